//! NVIDIA through NVML, the driver's management library (`libnvidia-ml.so.1`), loaded at run
//! time with nvml-wrapper so that a node without the driver still runs.
//!
//! The library is located under the system root (`crate::library::locate`) and loaded by path;
//! only when the root is the real `/` and no known directory has it does loading fall back to
//! the dynamic loader's search (the nvidia container runtime may have injected it elsewhere). A
//! fixture root therefore never reaches the host's real driver.
//!
//! Read per device (NVML order = `nvidia-smi` order = `index`):
//! - `nvmlDeviceGetUUID`: `id` (`GPU-<uuid>`); `nvmlDeviceGetName`: product name;
//! - `nvmlDeviceGetMinorNumber`: `physicalIndexes` `[minor]` (`/dev/nvidia<minor>`);
//! - `nvmlDeviceGetMemoryInfo_v2`: memory, with `nvmlDeviceGetEccMode` and
//!   `nvmlDeviceGetMemoryBusWidth` for the GDDR-with-ECC correction ([`facts::memory_mib`]);
//! - `nvmlDeviceGetNumGpuCores`: `cores`; `nvmlDeviceGetCudaComputeCapability`:
//!   `computeCapability` and `family`;
//! - `nvmlDeviceGetTotalEccErrors` (uncorrected, volatile) > 0: `unhealthy`;
//! - `nvmlDeviceGetPciInfo_v3`: the bus id that finds the PCI function (topology);
//! - `nvmlDeviceGetMigMode`: MIG on → `physicalSliced` from the driver's GPU-instance profiles
//!   (`nvmlDeviceGetGpuInstanceProfileInfoV` over every profile index, each answered
//!   profile's slots from `nvmlDeviceGetGpuInstancePossiblePlacements_v2`; see
//!   [`gpu_instances`] and [`mig_profiles::from_driver`]), or from the fixed per-product table
//!   when the library lacks those functions or answers no profile; MIG off → `logicalSliced`.
//!
//! Per system: `nvmlSystemGetDriverVersion` (`driverVersion`) and
//! `nvmlSystemGetCudaDriverVersion_v2` (`runtimeVersion`, `major.minor`). The monitor adds
//! `nvmlDeviceGetUtilizationRates` (gpu), `nvmlDeviceGetTemperature` (GPU sensor) and
//! `nvmlDeviceGetPowerUsage` (mW). A figure NVML refuses is absent, never 0.

mod facts;
mod gpu_instances;
pub(crate) mod mig_instances;
mod mig_profiles;
pub mod processes;

use std::ffi::OsStr;

use gpustack_api::{
    Manufacturer,
    devices::{
        Accelerator, AcceleratorStatus, DeviceTopology, DevicesGroup, LogicalSliced, PhysicalSliced,
    },
    monitor::{AcceleratorMetrics, memory_utilization},
};
use nvml_wrapper::{
    Device,
    enum_wrappers::device::{EccCounter, MemoryError, TemperatureSensor},
    error::NvmlError,
};

use crate::{
    detector::{DetectContext, DetectError, Detector},
    grouping::{self, Detected},
    pci,
};

/// The NVIDIA detector.
pub struct Nvml;

/// `NVML_DEVICE_MIG_ENABLE`.
const MIG_ENABLED: u32 = 1;
const MIB: u64 = 1024 * 1024;

/// An initialised NVML and the name to use for it in messages.
struct Session {
    nvml: nvml_wrapper::Nvml,
    library: String,
}

impl Session {
    fn call_error(&self, call: &'static str) -> impl FnOnce(NvmlError) -> DetectError + '_ {
        move |e| DetectError::LibraryCall {
            library: self.library.clone(),
            call,
            message: e.to_string(),
        }
    }

    /// The devices in NVML order; one NVML refuses is reported and left out.
    fn devices(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<(u32, Device<'_>)>, DetectError> {
        let count = self
            .nvml
            .device_count()
            .map_err(self.call_error("nvmlDeviceGetCount_v2"))?;
        let mut devices = Vec::with_capacity(count as usize);
        for index in 0..count {
            match self.nvml.device_by_index(index) {
                Ok(device) => devices.push((index, device)),
                Err(e) => ctx.warn(format!(
                    "NVIDIA GPU {index}: nvmlDeviceGetHandleByIndex_v2 failed ({e}); left out"
                )),
            }
        }
        Ok(devices)
    }
}

/// Finds and initialises NVML. `None` (with a warning where it matters) when the library is
/// absent or the driver is not loaded: that is a measurement ("no NVIDIA accelerators here").
fn open(ctx: &mut DetectContext<'_>) -> Option<Session> {
    let found = ctx.locate_library(
        "is the NVIDIA driver installed, or the container started with the nvidia runtime?",
    )?;
    match nvml_wrapper::Nvml::builder()
        .lib_path(OsStr::new(&found.path))
        .init()
    {
        Ok(nvml) => Some(Session {
            nvml,
            library: found.shown,
        }),
        Err(NvmlError::LibloadingError(e)) => {
            ctx.library_unusable(
                &found,
                format!("could not be loaded: {e}"),
                "is the NVIDIA driver installed?",
            );
            None
        }
        Err(e) => {
            ctx.library_unusable(
                &found,
                format!("did not initialise: {e}"),
                "is the NVIDIA kernel driver loaded?",
            );
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
        Ok(uuid) => Some(Identity {
            id: facts::accelerator_id(&uuid),
            // ECC off, or a product without ECC, answers NotSupported: nothing to hold against it.
            unhealthy: device
                .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
                .is_ok_and(|n| n > 0),
        }),
        Err(e) => {
            ctx.warn(format!(
                "NVIDIA GPU {index}: nvmlDeviceGetUUID failed ({e}); left out"
            ));
            None
        }
    }
}

/// The topology of the PCI function at NVML's bus id; only the bus id when sysfs lacks it.
fn topology(device: &Device<'_>, ctx: &DetectContext<'_>) -> DeviceTopology {
    let Ok(info) = device.pci_info() else {
        return DeviceTopology::default();
    };
    let bus_id = pci::normalize_bus_id(&info.bus_id);
    ctx.pci_device(&bus_id)
        .or_else(|| pci::read_device(ctx.root, &bus_id))
        .map(|f| f.topology())
        .unwrap_or(DeviceTopology {
            pci_bus_id: bus_id,
            ..DeviceTopology::default()
        })
}

/// The physical slicing of a card in MIG mode: the driver's profiles, else the fixed table.
fn mig_slicing(
    index: u32,
    name: &str,
    memory_mib: u64,
    nvml: &nvml_wrapper::Nvml,
    device: &Device<'_>,
    ctx: &mut DetectContext<'_>,
) -> Option<PhysicalSliced> {
    match driver_profiles(index, nvml, device, ctx) {
        Ok(Some(sliced)) => return Some(sliced),
        Ok(None) => tracing::info!(
            "NVIDIA GPU {index}: NVML answered no usable MIG profile; using the built-in table"
        ),
        Err(missing) => {
            tracing::info!("NVIDIA GPU {index}: {missing}; using the built-in MIG profile table")
        }
    }
    let physical = mig_profiles::product_for(name, memory_mib).map(mig_profiles::physical_sliced);
    if physical.is_none() {
        ctx.warn(format!(
            "NVIDIA GPU {index} ({name}) is in MIG mode but NVML describes no MIG profile and there is no table for it here; it offers no slices"
        ));
    }
    physical
}

/// The card's profiles as NVML answers them at every profile index. `Err` when the library
/// cannot describe GPU instances at all; profiles it could not answer for are left out with a
/// warning (a profile missing here is missing from the node's capacity).
fn driver_profiles(
    index: u32,
    nvml: &nvml_wrapper::Nvml,
    device: &Device<'_>,
    ctx: &mut DetectContext<'_>,
) -> Result<Option<PhysicalSliced>, gpu_instances::QueryError> {
    let mut probed = Vec::new();
    let mut unreadable = Vec::new();
    for profile_index in 0..gpu_instances::PROFILE_COUNT {
        let info = match gpu_instances::profile_info(nvml, device, profile_index) {
            Ok(info) => info,
            Err(e) if e.is_no_such_profile() => continue,
            Err(e @ gpu_instances::QueryError::Missing(_)) => return Err(e),
            Err(e) => {
                unreadable.push(format!("profile index {profile_index}: {e}"));
                continue;
            }
        };
        match gpu_instances::possible_placements(nvml, device, info.id) {
            Ok(slots) => probed.push((info, slots)),
            Err(e @ gpu_instances::QueryError::Missing(_)) => return Err(e),
            Err(e) => unreadable.push(format!("placements of profile {}: {e}", info.id)),
        }
    }
    if !unreadable.is_empty() {
        ctx.warn(format!(
            "NVIDIA GPU {index}: left MIG profiles out because NVML could not answer for them ({})",
            unreadable.join("; ")
        ));
    }
    let (sliced, left_out) = mig_profiles::from_driver(&probed);
    for reason in left_out {
        tracing::info!("NVIDIA GPU {index}: dropped an unpublishable MIG profile: {reason}");
    }
    Ok(sliced)
}

fn slicing(
    index: u32,
    name: &str,
    memory_mib: u64,
    nvml: &nvml_wrapper::Nvml,
    device: &Device<'_>,
    ctx: &mut DetectContext<'_>,
) -> AcceleratorStatus {
    let mig = device.mig_mode().ok();
    if let Some(m) = &mig
        && m.current != m.pending
    {
        ctx.warn(format!(
            "NVIDIA GPU {index}: MIG mode change pending ({} → {}); it takes effect after a GPU reset",
            m.current, m.pending
        ));
    }
    if mig.as_ref().is_some_and(|m| m.current == MIG_ENABLED) {
        let physical = mig_slicing(index, name, memory_mib, nvml, device, ctx);
        // A partitioned card offers no logical slices: only `.partitioned`.
        return AcceleratorStatus {
            unhealthy: false,
            logical_sliced: None,
            physical_sliced: physical,
        };
    }
    AcceleratorStatus {
        unhealthy: false,
        logical_sliced: Manufacturer::Nvidia
            .spec()
            .logical_slicing
            .map(|s| LogicalSliced {
                cores_percentage_overcommit: s.cores_percentage_overcommit,
                count: s.count,
            }),
        physical_sliced: None,
    }
}

impl Detector for Nvml {
    fn detect(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<DevicesGroup>, DetectError> {
        let Some(session) = open(ctx) else {
            return Ok(Vec::new());
        };
        let nvml = &session.nvml;
        let driver_version = nvml.sys_driver_version().unwrap_or_default();
        let runtime_version = nvml
            .sys_cuda_driver_version()
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
                        "NVIDIA GPU {index}: nvmlDeviceGetName failed ({e}); left out"
                    ));
                    continue;
                }
            };
            let memory_mib = match device.memory_info() {
                Ok(m) => facts::memory_mib(
                    m.total,
                    device.is_ecc_enabled().ok().map(|e| e.currently_enabled),
                    device.memory_bus_width().ok(),
                ),
                Err(e) => {
                    ctx.warn(format!(
                        "NVIDIA GPU {index}: nvmlDeviceGetMemoryInfo_v2 failed ({e}); left out"
                    ));
                    continue;
                }
            };
            let cc = device.cuda_compute_capability().ok();
            let mut group = DevicesGroup::new(Manufacturer::Nvidia, "", "", 0);
            group.cores = device.num_cores().ok();
            group.driver_version = driver_version.clone();
            group.runtime_version = runtime_version.clone();
            group.compute_capability = cc
                .as_ref()
                .map(|c| format!("{}.{}", c.major, c.minor))
                .unwrap_or_default();
            group.family = cc
                .as_ref()
                .and_then(|c| facts::family(c.major, c.minor))
                .unwrap_or_default()
                .to_owned();
            let mut status = slicing(index, &name, memory_mib, nvml, &device, ctx);
            status.unhealthy = who.unhealthy;
            detected.push(Detected {
                name,
                memory_mib,
                group,
                accelerator: Accelerator {
                    id: who.id,
                    index,
                    physical_indexes: device.minor_number().into_iter().collect(),
                    topology: topology(&device, ctx),
                    status,
                },
            });
        }
        Ok(grouping::group(Manufacturer::Nvidia, detected, with_memory))
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
            // The sample's memory is what NVML reports as usable (no ECC correction), so that
            // used / total is the share of what a workload can actually get.
            let memory = device.memory_info().ok();
            let total = memory.as_ref().map(|m| m.total / MIB);
            let used = memory.as_ref().map(|m| m.used / MIB);
            samples.push(AcceleratorMetrics {
                id: who.id,
                memory: total,
                memory_usage: used,
                memory_utilization: used.zip(total).and_then(|(u, t)| memory_utilization(u, t)),
                // Not reported for a card in MIG mode: absent then, never 0.
                cores_utilization: device.utilization_rates().ok().map(|u| u.gpu.min(100)),
                temperature: device
                    .temperature(TemperatureSensor::Gpu)
                    .ok()
                    .and_then(|t| i32::try_from(t).ok()),
                power_usage: device.power_usage().ok().map(facts::watts),
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

    /// A root with one NVIDIA 3D controller in sysfs and nothing else.
    fn root_with_nvidia_function() -> (tempfile::TempDir, SystemRoot) {
        let dir = tempfile::tempdir().unwrap();
        let root = SystemRoot::new(dir.path());
        let function = root.path("/sys/bus/pci/devices/0000:01:00.0");
        std::fs::create_dir_all(&function).unwrap();
        std::fs::write(function.join("vendor"), "0x10de\n").unwrap();
        std::fs::write(function.join("class"), "0x030200\n").unwrap();
        (dir, root)
    }

    fn nvidia_only(no_pci_check: bool) -> Options {
        Options {
            manufacturers: vec![Manufacturer::Nvidia],
            no_pci_check,
        }
    }

    #[test]
    fn library_directories_follow_ld_library_path() {
        // A library only on LD_LIBRARY_PATH (under the root) is found there, not on the host.
        let (_dir, root) = root_with_nvidia_function();
        let lib = root.path("/opt/driver/libnvidia-ml.so.1");
        std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
        std::fs::write(&lib, b"").unwrap();
        let env = |k: &str| (k == "LD_LIBRARY_PATH").then(|| "/opt/driver".to_owned());
        let report = detect(&root, &env, &nvidia_only(false));
        assert!(
            report
                .warnings
                .iter()
                .any(|w| w.contains("/opt/driver/libnvidia-ml.so.1")),
            "{:?}",
            report.warnings
        );
    }
}
