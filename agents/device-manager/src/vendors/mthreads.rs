//! Moore Threads GPUs through MTML, the driver's management library (`libmtml.so`), loaded at
//! run time by path so that a node without the driver still runs.
//!
//! The mthreads container runtime injects the library into the system directories
//! (`/usr/lib/x86_64-linux-gnu`, ...); the MUSA toolkit has its own copy in
//! `/usr/local/musa/lib`. Both are searched under the system root (`crate::library::locate`);
//! only when the root is the real `/` and no known directory has it does loading fall back to
//! the dynamic loader's search. A fixture root therefore never reaches a host's real driver.
//!
//! MTML is handle-based (library → device → memory / GPU sub-handles, see [`mtml`]). Devices
//! are `0..mtmlLibraryCountDevice`; `index` is that number and `physicalIndexes` is `[index]`.
//! Read per GPU:
//! - `mtmlDeviceGetUUID`: `id`, verbatim;
//! - `mtmlDeviceGetName`: the product name (`MTT S4000`);
//! - `mtmlMemoryGetTotal` (bytes): memory;
//! - `mtmlDeviceCountGpuCores`: `cores` (MUSA cores);
//! - `mtmlDeviceGetPciInfo` (`sbdf`): the bus id that finds the PCI function (topology);
//! - `mtmlMemoryGetEccErrorCounter` (uncorrected, volatile, DRAM) above 0: `unhealthy`.
//!
//! Per node: `mtmlSystemGetDriverVersion` as `driverVersion`. MTML reports no MUSA runtime
//! version (MooreThreads' own NVML shim answers `nvmlSystemGetCudaDriverVersion` with "not
//! supported"), so `runtimeVersion` stays empty, and no product family is defined. The monitor
//! adds `mtmlMemoryGetUsed`, `mtmlGpuGetUtilization`, `mtmlGpuGetTemperature` (°C) and
//! `mtmlDeviceGetPowerUsage` (mW). A figure MTML refuses is absent, never 0.

mod facts;
mod mtml;

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, AcceleratorStatus, DeviceTopology, DevicesGroup, LogicalSliced},
    monitor::{AcceleratorMetrics, memory_utilization},
};

use self::mtml::{Device, Mtml as Session, MtmlLibrary};
use crate::{
    detector::{DetectContext, DetectError, Detector},
    grouping::{self, Detected},
    pci,
};

/// The Moore Threads detector.
pub struct Mtml;

/// Finds and loads MTML. `None` (with a warning where it matters) when the library is absent
/// or unloadable: a measurement ("no Moore Threads GPUs here"). Initialising it is
/// [`initialise`]'s, because the session borrows the loaded library.
fn load(ctx: &mut DetectContext<'_>) -> Option<(MtmlLibrary, String)> {
    let found =
        ctx.locate_library("run under the mthreads runtime, which injects the driver's libraries")?;
    match MtmlLibrary::open(&found.path) {
        Ok(m) => Some((m, found.shown)),
        Err(e) => {
            ctx.library_unusable(&found, e, "is the Moore Threads driver installed?");
            None
        }
    }
}

/// `mtmlLibraryInit`; `None` with a warning when the driver does not answer.
fn initialise<'l>(
    lib: &'l MtmlLibrary,
    library: &str,
    ctx: &mut DetectContext<'_>,
) -> Option<Session<'l>> {
    match lib.init() {
        Ok(session) => Some(session),
        Err(e) => {
            ctx.warn(format!(
                "{}{library} did not initialise: {e}; reporting no mthreads accelerators (is the Moore Threads driver loaded?)",
                ctx.found_functions()
            ));
            None
        }
    }
}

/// The device count; a refusal means "could not measure".
fn count(session: &Session<'_>, library: &str) -> Result<u32, DetectError> {
    session.device_count().map_err(|e| e.detect_error(library))
}

/// The device at `index` and its UUID, or a warning and `None`: without an id it cannot enter
/// the ledger.
fn identified<'s>(
    session: &'s Session<'_>,
    index: u32,
    ctx: &mut DetectContext<'_>,
) -> Option<(Device<'s>, String)> {
    let device = match session.device(index) {
        Ok(d) => d,
        Err(e) => {
            ctx.warn(format!("Moore Threads GPU {index}: {e}; left out"));
            return None;
        }
    };
    match device.uuid() {
        Ok(uuid) if !uuid.is_empty() => Some((device, uuid)),
        Ok(_) => {
            ctx.warn(format!(
                "Moore Threads GPU {index}: mtmlDeviceGetUUID gave an empty UUID; left out"
            ));
            None
        }
        Err(e) => {
            ctx.warn(format!("Moore Threads GPU {index}: {e}; left out"));
            None
        }
    }
}

/// The topology of the PCI function at MTML's bus id; only the bus id when sysfs lacks it.
fn topology(device: &Device<'_>, ctx: &DetectContext<'_>) -> DeviceTopology {
    ctx.topology(
        device
            .pci_sbdf()
            .ok()
            .map(|sbdf| pci::normalize_bus_id(&sbdf)),
    )
}

/// Uncorrected ECC errors make a GPU unhealthy; a refused query holds nothing against it.
fn unhealthy(device: &Device<'_>, index: u32) -> bool {
    match device.memory().and_then(|m| m.uncorrected_ecc_errors()) {
        Ok(n) => facts::unhealthy(n),
        Err(e) => {
            tracing::debug!("Moore Threads GPU {index}: {e}");
            false
        }
    }
}

impl Detector for Mtml {
    fn detect(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<DevicesGroup>, DetectError> {
        let Some((lib, library)) = load(ctx) else {
            return Ok(Vec::new());
        };
        let Some(session) = initialise(&lib, &library, ctx) else {
            return Ok(Vec::new());
        };
        let driver_version = session.driver_version().unwrap_or_default();
        let with_memory = ctx.group_id_with_memory();
        let slicing = Manufacturer::Mthreads.spec().logical_slicing;

        let mut detected = Vec::new();
        for index in 0..count(&session, &library)? {
            let Some((device, id)) = identified(&session, index, ctx) else {
                continue;
            };
            let name = match device.name() {
                Ok(n) if !n.is_empty() => n,
                other => {
                    let why = other
                        .err()
                        .map_or("an empty name".to_owned(), |e| e.to_string());
                    ctx.warn(format!("Moore Threads GPU {index}: {why}; left out"));
                    continue;
                }
            };
            let Some(memory_mib) = device
                .memory()
                .and_then(|m| m.total_bytes())
                .ok()
                .map(facts::bytes_to_mib)
                .filter(|m| *m > 0)
            else {
                ctx.warn(format!(
                    "Moore Threads GPU {index}: mtmlMemoryGetTotal reported no memory; left out"
                ));
                continue;
            };
            let mut group = DevicesGroup::new(Manufacturer::Mthreads, "", "", 0);
            group.cores = device.gpu_cores().ok().filter(|c| *c > 0);
            group.driver_version = driver_version.clone();
            detected.push(Detected {
                name,
                memory_mib,
                group,
                accelerator: Accelerator {
                    id,
                    index,
                    physical_indexes: facts::physical_indexes(index),
                    topology: topology(&device, ctx),
                    status: AcceleratorStatus {
                        unhealthy: unhealthy(&device, index),
                        logical_sliced: slicing.map(|s| LogicalSliced {
                            cores_percentage_overcommit: s.cores_percentage_overcommit,
                            count: s.count,
                        }),
                        physical_sliced: None,
                    },
                },
            });
        }
        Ok(grouping::group(
            Manufacturer::Mthreads,
            detected,
            with_memory,
        ))
    }

    fn monitor(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<AcceleratorMetrics>, DetectError> {
        let Some((lib, library)) = load(ctx) else {
            return Ok(Vec::new());
        };
        let Some(session) = initialise(&lib, &library, ctx) else {
            return Ok(Vec::new());
        };
        let mut samples = Vec::new();
        for index in 0..count(&session, &library)? {
            let Some((device, id)) = identified(&session, index, ctx) else {
                continue;
            };
            let memory = device.memory().ok();
            let total = memory
                .as_ref()
                .and_then(|m| m.total_bytes().ok())
                .map(facts::bytes_to_mib);
            let used = memory
                .as_ref()
                .and_then(|m| m.used_bytes().ok())
                .map(facts::bytes_to_mib);
            drop(memory);
            let gpu = device.gpu().ok();
            samples.push(AcceleratorMetrics {
                id,
                memory: total,
                memory_usage: used,
                memory_utilization: used.zip(total).and_then(|(u, t)| memory_utilization(u, t)),
                cores_utilization: gpu
                    .as_ref()
                    .and_then(|g| g.utilization().ok())
                    .map(facts::percent),
                temperature: gpu
                    .as_ref()
                    .and_then(|g| g.temperature().ok())
                    .and_then(facts::celsius),
                power_usage: device.power_mw().ok().map(facts::watts),
                unhealthy: unhealthy(&device, index),
            });
        }
        Ok(samples)
    }
}
