//! Iluvatar CoreX GPUs through IXML (`libixml.so`), the CoreX SDK's NVML-compatible management
//! library, loaded at run time by path (see [`ixml`] for the FFI and the symbol names).
//!
//! The library is looked for under the system root in `$COREX_HOME/{lib,lib64,…}`, then
//! `/usr/local/corex/{lib,lib64,…}` and the system directories (`crate::library`); only when
//! the root is the real `/` and none has it does loading fall back to the dynamic loader's own
//! search. A fixture root therefore never reaches the host's real SDK.
//!
//! Read per device (IXML order = `ixsmi` order = `index`):
//! - `nvmlDeviceGetUUID`: `id`, taken verbatim. IXML answers NVML's form, `GPU-` and a 5-part
//!   hexadecimal UUID (`GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`); it is what Iluvatar's device
//!   plugin and container toolkit name the card by, so it is not rewritten here.
//! - `nvmlDeviceGetName`: product name (`Iluvatar BI-V150`);
//! - `nvmlDeviceGetMinorNumber`: `physicalIndexes` `[minor]` (`/dev/iluvatar<minor>`);
//! - `nvmlDeviceGetMemoryInfo` (v1 `nvmlMemory_t`): memory, MiB;
//! - `nvmlDeviceGetCudaComputeCapability`: `computeCapability` `major.minor` (a BI-V150
//!   reports 7.1);
//! - `ixmlDeviceGetHealth` non-zero: `unhealthy` (absent or refused: healthy);
//! - `nvmlDeviceGetPciInfo`: the bus id that finds the PCI function (topology).
//!
//! Not read: `cores` (api.h declares no core-count query), `family` (no source names one).
//! Per system: `nvmlSystemGetDriverVersion` (`driverVersion`) and
//! `nvmlSystemGetCudaDriverVersion` (`runtimeVersion`, `major.minor`). Every card offers
//! logical slicing (`Manufacturer::Iluvatar`'s table entry; the count is the reference's open
//! question, taken as HAMi-core's 128 with overcommit). The monitor adds
//! `nvmlDeviceGetUtilizationRates` (gpu), `nvmlDeviceGetTemperature` (GPU sensor) and
//! `nvmlDeviceGetPowerUsage` (mW). A figure IXML refuses is absent, never 0.

mod facts;
mod ixml;

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, AcceleratorStatus, DeviceTopology, DevicesGroup, LogicalSliced},
    monitor::{AcceleratorMetrics, memory_utilization},
};

use crate::{
    detector::{DetectContext, DetectError, Detector},
    grouping::{self, Detected},
    pci,
};

use ixml::{Device, IxmlLib, OpenError};

/// The Iluvatar detector.
pub struct Ixml;

const MIB: u64 = 1024 * 1024;

/// An initialised IXML and the name to use for it in messages.
struct Session {
    ixml: IxmlLib,
    library: String,
}

impl Session {
    /// The devices in IXML order; one IXML refuses is reported and left out.
    fn devices(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<(u32, Device<'_>)>, DetectError> {
        let count = self
            .ixml
            .device_count()
            .map_err(|e| DetectError::LibraryCall {
                library: self.library.clone(),
                call: "nvmlDeviceGetCount",
                message: e.to_string(),
            })?;
        let mut devices = Vec::with_capacity(count as usize);
        for index in 0..count {
            match self.ixml.device(index) {
                Ok(device) => devices.push((index, device)),
                Err(e) => ctx.warn(format!(
                    "Iluvatar GPU {index}: nvmlDeviceGetHandleByIndex failed ({e}); left out"
                )),
            }
        }
        Ok(devices)
    }
}

/// Finds and initialises IXML. `None` (with a warning where it matters) when the library is
/// absent or will not initialise: that is a measurement ("no Iluvatar accelerators here").
fn open(ctx: &mut DetectContext<'_>) -> Option<Session> {
    let found = ctx.locate_library(
        "is the CoreX SDK installed, or the container started with the iluvatar runtime?",
    )?;
    match IxmlLib::open(&found.path) {
        Ok(ixml) => Some(Session {
            ixml,
            library: found.shown,
        }),
        Err(e @ OpenError::Init(_)) => {
            ctx.library_unusable(
                &found,
                format!("did not initialise: {e}"),
                "is the CoreX kernel driver loaded?",
            );
            None
        }
        Err(e) => {
            ctx.library_unusable(&found, e, "is the CoreX SDK installed?");
            None
        }
    }
}

/// What one device told us that both detect and monitor need.
struct Identity {
    id: String,
    unhealthy: bool,
}

fn identity(index: u32, device: &Device<'_>, ctx: &mut DetectContext<'_>) -> Option<Identity> {
    match device.uuid() {
        Ok(uuid) if !uuid.is_empty() => Some(Identity {
            id: uuid,
            // A library without the health query, or one that refuses it, has nothing to hold
            // against the card.
            unhealthy: device.health().is_ok_and(facts::unhealthy),
        }),
        Ok(_) => {
            ctx.warn(format!(
                "Iluvatar GPU {index}: nvmlDeviceGetUUID answered an empty id; left out"
            ));
            None
        }
        Err(e) => {
            ctx.warn(format!(
                "Iluvatar GPU {index}: nvmlDeviceGetUUID failed ({e}); left out"
            ));
            None
        }
    }
}

/// The topology of the PCI function at IXML's bus id; only the bus id when sysfs lacks it.
fn topology(device: &Device<'_>, ctx: &DetectContext<'_>) -> DeviceTopology {
    let Some(bus_id) = device
        .pci_info()
        .ok()
        .and_then(|info| facts::bus_id(&info.bus_id, &info.bus_id_legacy))
    else {
        return DeviceTopology::default();
    };
    ctx.pci_device(&bus_id)
        .or_else(|| pci::read_device(ctx.root, &bus_id))
        .map(|f| f.topology())
        .unwrap_or(DeviceTopology {
            pci_bus_id: bus_id,
            ..DeviceTopology::default()
        })
}

fn logical_slicing() -> Option<LogicalSliced> {
    Manufacturer::Iluvatar
        .spec()
        .logical_slicing
        .map(|s| LogicalSliced {
            cores_percentage_overcommit: s.cores_percentage_overcommit,
            count: s.count,
        })
}

impl Detector for Ixml {
    fn detect(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<DevicesGroup>, DetectError> {
        let Some(session) = open(ctx) else {
            return Ok(Vec::new());
        };
        let driver_version = session.ixml.driver_version().unwrap_or_default();
        let runtime_version = session
            .ixml
            .cuda_driver_version()
            .ok()
            .and_then(facts::cuda_version)
            .unwrap_or_default();
        let with_memory = (ctx.env)("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY")
            .is_some_and(|v| v == "true" || v == "1");

        let mut detected = Vec::new();
        for (index, device) in session.devices(ctx)? {
            let Some(who) = identity(index, &device, ctx) else {
                continue;
            };
            let name = match device.name() {
                Ok(n) => n,
                Err(e) => {
                    ctx.warn(format!(
                        "Iluvatar GPU {index}: nvmlDeviceGetName failed ({e}); left out"
                    ));
                    continue;
                }
            };
            let memory_mib = match device.memory() {
                Ok(m) => m.total / MIB,
                Err(e) => {
                    ctx.warn(format!(
                        "Iluvatar GPU {index}: nvmlDeviceGetMemoryInfo failed ({e}); left out"
                    ));
                    continue;
                }
            };
            let mut group = DevicesGroup::new(Manufacturer::Iluvatar, "", "", 0);
            group.driver_version = driver_version.clone();
            group.runtime_version = runtime_version.clone();
            group.compute_capability = device
                .compute_capability()
                .map(|(major, minor)| format!("{major}.{minor}"))
                .unwrap_or_default();
            detected.push(Detected {
                name,
                memory_mib,
                group,
                accelerator: Accelerator {
                    id: who.id,
                    index,
                    physical_indexes: device.minor_number().into_iter().collect(),
                    topology: topology(&device, ctx),
                    status: AcceleratorStatus {
                        unhealthy: who.unhealthy,
                        logical_sliced: logical_slicing(),
                        physical_sliced: None,
                    },
                },
            });
        }
        Ok(grouping::group(
            Manufacturer::Iluvatar,
            detected,
            with_memory,
        ))
    }

    fn monitor(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<AcceleratorMetrics>, DetectError> {
        let Some(session) = open(ctx) else {
            return Ok(Vec::new());
        };
        let mut samples = Vec::new();
        for (index, device) in session.devices(ctx)? {
            let Some(who) = identity(index, &device, ctx) else {
                continue;
            };
            let memory = device.memory().ok();
            let total = memory.map(|m| m.total / MIB);
            let used = memory.map(|m| m.used / MIB);
            samples.push(AcceleratorMetrics {
                id: who.id,
                memory: total,
                memory_usage: used,
                memory_utilization: used.zip(total).and_then(|(u, t)| memory_utilization(u, t)),
                cores_utilization: device.utilization().ok().map(|(gpu, _)| gpu.min(100)),
                temperature: device
                    .temperature()
                    .ok()
                    .and_then(|t| i32::try_from(t).ok()),
                power_usage: device.power_usage_mw().ok().map(facts::watts),
                unhealthy: who.unhealthy,
            });
        }
        Ok(samples)
    }
}

#[cfg(test)]
mod tests {
    use crate::{
        detect::{Options, detect},
        system_root::SystemRoot,
    };
    use gpustack_api::Manufacturer;

    /// A root with one Iluvatar processing accelerator in sysfs and nothing else.
    fn root_with_iluvatar_function() -> (tempfile::TempDir, SystemRoot) {
        let dir = tempfile::tempdir().unwrap();
        let root = SystemRoot::new(dir.path());
        let function = root.path("/sys/bus/pci/devices/0000:13:00.0");
        std::fs::create_dir_all(&function).unwrap();
        std::fs::write(function.join("vendor"), "0x1e3e\n").unwrap();
        std::fs::write(function.join("class"), "0x120000\n").unwrap();
        (dir, root)
    }

    fn iluvatar_only(no_pci_check: bool) -> Options {
        Options {
            manufacturers: vec![Manufacturer::Iluvatar],
            no_pci_check,
        }
    }

    #[test]
    fn corex_home_is_searched_first() {
        let (_dir, root) = root_with_iluvatar_function();
        let env = |k: &str| (k == "COREX_HOME").then(|| "/opt/corex-4.1".to_owned());
        let report = detect(&root, &env, &iluvatar_only(false));
        let [warning] = report.warnings.as_slice() else {
            panic!("one warning expected: {:?}", report.warnings);
        };
        let searched = warning.split(" under ").nth(1).unwrap_or_default();
        assert!(searched.starts_with("/opt/corex-4.1/lib:"), "{warning}");
    }
}
