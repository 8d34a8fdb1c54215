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

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, AcceleratorStatus, DevicesGroup, PhysicalSliced},
    monitor::AcceleratorMetrics,
};
use nvml_wrapper::{
    Device,
    enum_wrappers::device::{EccCounter, MemoryError, TemperatureSensor},
    error::NvmlError,
};

use super::{
    ffi::OpenError,
    nvml_shaped::{self, Card, Hints, Memory, Names, NvmlShaped, Session},
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

const HINTS: Hints = Hints {
    locate: "is the NVIDIA driver installed, or the container started with the nvidia runtime?",
    install: "is the NVIDIA driver installed?",
    driver: "is the NVIDIA kernel driver loaded?",
};

impl NvmlShaped for nvml_wrapper::Nvml {
    type Error = NvmlError;
    type Card<'a> = Device<'a>;

    const NAMES: Names = Names {
        card: "NVIDIA GPU",
        count_call: "nvmlDeviceGetCount_v2",
        handle_call: "nvmlDeviceGetHandleByIndex_v2",
        uuid_call: "nvmlDeviceGetUUID",
        name_call: "nvmlDeviceGetName",
        memory_call: "nvmlDeviceGetMemoryInfo_v2",
    };

    fn count(&self) -> Result<u32, NvmlError> {
        self.device_count()
    }

    fn card(&self, index: u32) -> Result<Device<'_>, NvmlError> {
        self.device_by_index(index)
    }
}

impl Card for Device<'_> {
    type Error = NvmlError;

    fn accelerator_id(&self) -> Result<String, NvmlError> {
        self.uuid().map(|uuid| facts::accelerator_id(&uuid))
    }

    fn is_unhealthy(&self) -> bool {
        // ECC off, or a product without ECC, answers NotSupported: nothing to hold against it.
        self.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
            .is_ok_and(|n| n > 0)
    }

    /// What NVML reports as usable (no ECC correction), so that used / total is the share of
    /// what a workload can actually get.
    fn usable_memory(&self) -> Option<Memory> {
        self.memory_info().ok().map(|m| Memory {
            total: m.total,
            used: m.used,
        })
    }

    fn gpu_utilization(&self) -> Option<u32> {
        self.utilization_rates().ok().map(|u| u.gpu)
    }

    fn gpu_temperature(&self) -> Option<u32> {
        self.temperature(TemperatureSensor::Gpu).ok()
    }

    fn power_mw(&self) -> Option<u32> {
        self.power_usage().ok()
    }
}

/// nvml-wrapper's load and init errors in the binding vocabulary: the loader's own error, a
/// missing symbol, or `nvmlInit_v2`'s answer.
fn open_error(e: NvmlError) -> OpenError {
    match e {
        NvmlError::LibloadingError(e) => OpenError::Load(e),
        NvmlError::FailedToLoadSymbol(symbol) => OpenError::MissingSymbol(symbol),
        status => OpenError::Init {
            call: "nvmlInit_v2",
            status: Box::new(status),
        },
    }
}

/// Finds and initialises NVML (see [`nvml_shaped::open`]).
fn open(ctx: &mut DetectContext<'_>) -> Option<Session<nvml_wrapper::Nvml>> {
    nvml_shaped::open(ctx, &HINTS, |path| {
        nvml_wrapper::Nvml::builder()
            .lib_path(path)
            .init()
            .map_err(open_error)
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
) -> Result<Option<PhysicalSliced>, gpu_instances::NvmlCallError> {
    let mut probed = Vec::new();
    let mut unreadable = Vec::new();
    for profile_index in 0..gpu_instances::PROFILE_COUNT {
        let info = match gpu_instances::profile_info(nvml, device, profile_index) {
            Ok(info) => info,
            Err(e) if e.is_no_such_profile() => continue,
            Err(e @ gpu_instances::NvmlCallError::Missing(_)) => return Err(e),
            Err(e) => {
                unreadable.push(format!("profile index {profile_index}: {e}"));
                continue;
            }
        };
        match gpu_instances::possible_placements(nvml, device, info.id) {
            Ok(slots) => probed.push((info, slots)),
            Err(e @ gpu_instances::NvmlCallError::Missing(_)) => return Err(e),
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
        logical_sliced: super::logical_slicing(Manufacturer::Nvidia),
        physical_sliced: None,
    }
}

impl Detector for Nvml {
    fn detect(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<DevicesGroup>, DetectError> {
        let Some(session) = open(ctx) else {
            return Ok(Vec::new());
        };
        let nvml = &session.lib;
        let driver_version = nvml.sys_driver_version().unwrap_or_default();
        let runtime_version = nvml
            .sys_cuda_driver_version()
            .ok()
            .and_then(facts::cuda_version)
            .unwrap_or_default();
        let with_memory = ctx.group_id_with_memory();

        let mut detected = Vec::new();
        for (index, device) in session.cards(ctx)? {
            let Some(who) = nvml_shaped::identity::<nvml_wrapper::Nvml>(index, &device, ctx) else {
                continue;
            };
            let names = &<nvml_wrapper::Nvml as NvmlShaped>::NAMES;
            let Some(name) = names.required(ctx, index, names.name_call, device.name()) else {
                continue;
            };
            let Some(memory) = names.required(ctx, index, names.memory_call, device.memory_info())
            else {
                continue;
            };
            let memory_mib = facts::memory_mib(
                memory.total,
                device.is_ecc_enabled().ok().map(|e| e.currently_enabled),
                device.memory_bus_width().ok(),
            );
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
                    topology: ctx.topology(
                        device
                            .pci_info()
                            .ok()
                            .map(|info| pci::normalize_bus_id(&info.bus_id)),
                    ),
                    status,
                },
            });
        }
        Ok(grouping::group(Manufacturer::Nvidia, detected, with_memory))
    }

    fn monitor(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<AcceleratorMetrics>, DetectError> {
        match open(ctx) {
            Some(session) => session.monitor(ctx),
            None => Ok(Vec::new()),
        }
    }
}
