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
    devices::{Accelerator, AcceleratorStatus, DevicesGroup},
    monitor::AcceleratorMetrics,
};

use super::nvml_shaped::{
    self, Bound, BoundCard, Hints, Names, Session,
    binding::{NvmlShapedLibrary, Status},
};
use crate::{
    detector::{DetectContext, DetectError, Detector},
    grouping::{self, Detected},
};

use ixml::{Device, IxmlLib};

/// The Iluvatar detector.
pub struct Ixml;

const HINTS: Hints = Hints {
    locate: "is the CoreX SDK installed, or the container started with the iluvatar runtime?",
    install: "is the CoreX SDK installed?",
    driver: "is the CoreX kernel driver loaded?",
};

/// How messages name the cards and calls.
const NAMES: Names = Names {
    card: "Iluvatar GPU",
    count_call: "nvmlDeviceGetCount",
    handle_call: "nvmlDeviceGetHandleByIndex",
    uuid_call: "nvmlDeviceGetUUID",
    name_call: "nvmlDeviceGetName",
    memory_call: "nvmlDeviceGetMemoryInfo",
};

impl Bound for IxmlLib {
    type BoundCard<'a> = Device<'a>;

    const NAMES: Names = NAMES;

    fn shared(&self) -> &NvmlShapedLibrary {
        self.lib()
    }

    fn bound_card(&self, index: u32) -> Result<Device<'_>, Status> {
        self.device(index)
    }
}

impl<'a> BoundCard<'a> for Device<'a> {
    fn unhealthy(&self) -> bool {
        // A library without the health query, or one that refuses it, has nothing to hold
        // against the card.
        self.health().is_ok_and(facts::unhealthy)
    }
}

fn open(ctx: &mut DetectContext<'_>) -> Option<Session<IxmlLib>> {
    nvml_shaped::open(ctx, &HINTS, IxmlLib::open)
}

impl Detector for Ixml {
    fn detect(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<DevicesGroup>, DetectError> {
        let Some(session) = open(ctx) else {
            return Ok(Vec::new());
        };
        let driver_version = session.lib.lib().driver_version().unwrap_or_default();
        let runtime_version = session
            .lib
            .lib()
            .runtime_version()
            .ok()
            .and_then(facts::cuda_version)
            .unwrap_or_default();
        let with_memory = ctx.group_id_with_memory();

        let mut detected = Vec::new();
        for (index, device) in session.cards(ctx)? {
            let Some(who) = nvml_shaped::identity::<IxmlLib>(index, &device, ctx) else {
                continue;
            };
            let Some((name, memory_mib)) =
                nvml_shaped::name_and_memory(&NAMES, ctx, index, &device)
            else {
                continue;
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
                    topology: ctx.topology(
                        device
                            .pci_info()
                            .ok()
                            .and_then(|info| facts::bus_id(&info.bus_id, &info.bus_id_legacy)),
                    ),
                    status: AcceleratorStatus {
                        unhealthy: who.unhealthy,
                        logical_sliced: super::logical_slicing(Manufacturer::Iluvatar),
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
        match open(ctx) {
            Some(session) => session.monitor(ctx),
            None => Ok(Vec::new()),
        }
    }
}
