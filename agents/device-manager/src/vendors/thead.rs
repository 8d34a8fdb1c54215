//! T-Head (Alibaba) PPUs through HGML (`libhgml.so`), the PPU SDK's NVML-shaped management
//! library, loaded at run time by path (see [`hgml`] for the FFI, the symbol names and the
//! sources every call was checked against). The reference lists the library as x86_64 only.
//!
//! The library is looked for under the system root in `$PPU_HOME/{lib,lib64,…}`, then
//! `/usr/local/PPU_SDK/{lib,lib64,…}` and the system directories (`crate::library`); only when
//! the root is the real `/` and none has it does loading fall back to the dynamic loader's own
//! search. A fixture root therefore never reaches the host's real SDK.
//!
//! Read per device (HGML order = `index`), as the reference operator's T-Head detector does:
//! - `hgmlDeviceGetUUID`: `id`, verbatim. It is the id the operator, gpustack-runtime and the
//!   PPU container runtime name the card by; its exact spelling (NVML's `GPU-` and a 5-part
//!   hexadecimal UUID is assumed by the fixtures) is not shown by any source, so it is not
//!   rewritten or validated here beyond being non-empty.
//! - `hgmlDeviceGetName`: product name (`PPU-ZW810E`);
//! - `hgmlDeviceGetMinorNumber`: `physicalIndexes` `[minor]`; omitted when refused, never
//!   replaced by the index (the operator records it to prove which device node is the card);
//! - `hgmlDeviceGetMemoryInfo_v2` (else v1): memory, MiB;
//! - `hgmlDeviceGetNumGpuCores`: `cores` (group level, from the first card);
//! - `hgmlDeviceGetHggcComputeCapability`: `computeCapability` `major.minor`;
//! - `hgmlDeviceGetMemoryErrorCounter(uncorrected, volatile, DRAM)` > 0: `unhealthy`;
//! - `hgmlDeviceGetPciInfo*`: the bus id that finds the PCI function (topology);
//! - `hgmlDeviceGetMigMode`: a card in MIG mode gets `physicalSliced` from its GPU-instance
//!   profiles (`hgmlDeviceGetGpuInstanceProfileInfoV` over pyhgml's 15 profile indexes, each
//!   answered profile's legal slots from `hgmlDeviceGetGpuInstancePossiblePlacements_v2`; see
//!   [`facts::derive_profiles`]) and no `logicalSliced`; every other card gets
//!   `Manufacturer::Thead`'s logical slicing (128, overcommit).
//!
//! Per system: `hgmlSystemGetDriverVersion` (`driverVersion`) and
//! `hgmlSystemGetHggcDriverVersion_v2` (`runtimeVersion`, HGGC `major.minor`). Not read:
//! `family` (no source names one). The monitor adds `hgmlDeviceGetUtilizationRates` (gpu),
//! `hgmlDeviceGetTemperature` (GPU sensor) and `hgmlDeviceGetPowerUsage` (mW). Unlike the
//! operator, which samples GPM SM utilisation first, cores utilisation comes from the
//! utilisation rates only; and a figure HGML refuses is absent, never 0.

mod facts;
mod hgml;

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, AcceleratorStatus, DevicesGroup, LogicalSliced, PhysicalSliced},
    monitor::AcceleratorMetrics,
};

use super::nvml_shaped::{
    self, Bound, BoundCard, Hints, Memory, Names, Session,
    binding::{NvmlShapedLibrary, Status},
};
use crate::{
    detector::{DetectContext, DetectError, Detector},
    grouping::{self, Detected},
};

use hgml::{Device, HgmlLib};

/// The T-Head detector.
pub struct Hgml;

const HINTS: Hints = Hints {
    locate: "is the PPU SDK installed or mounted?",
    install: "is the PPU SDK installed or mounted?",
    driver: "is the PPU kernel driver loaded?",
};

/// How messages name the cards and calls.
const NAMES: Names = Names {
    card: "T-Head PPU",
    count_call: "hgmlDeviceGetCount",
    handle_call: "hgmlDeviceGetHandleByIndex",
    uuid_call: "hgmlDeviceGetUUID",
    name_call: "hgmlDeviceGetName",
    memory_call: "hgmlDeviceGetMemoryInfo",
};

impl Bound for HgmlLib {
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
        facts::unhealthy(self.uncorrected_dram_errors().ok())
    }

    /// `hgmlDeviceGetMemoryInfo_v2`, else the v1 record.
    fn memory_figures(&self) -> Result<Memory, Status> {
        self.memory()
    }
}

fn open(ctx: &mut DetectContext<'_>) -> Option<Session<HgmlLib>> {
    nvml_shaped::open(ctx, &HINTS, HgmlLib::open)
}

fn logical_slicing() -> Option<LogicalSliced> {
    super::logical_slicing(Manufacturer::Thead)
}

/// How a card may be sliced: physically when it is in MIG mode, logically otherwise.
fn slicing(
    index: u32,
    device: &Device<'_>,
    ctx: &mut DetectContext<'_>,
) -> (Option<LogicalSliced>, Option<PhysicalSliced>) {
    match device.mig_mode() {
        Ok((current, _)) if current == facts::MIG_ENABLE => {
            (None, mig_profiles(index, device, ctx))
        }
        Ok(_) => (logical_slicing(), None),
        // A library without the query, or a card that says MIG is not supported, does not
        // partition: that is an answer.
        Err(e) if e.is_absent() || e.is_function_not_found() => (logical_slicing(), None),
        Err(e) => {
            // As the operator does: an unreadable mode counts as "not partitioned", but not in
            // silence, since a card in MIG mode cannot serve the logical slices it advertises.
            ctx.warn(format!(
                "T-Head PPU {index}: hgmlDeviceGetMigMode failed ({e}); reported as not partitioned, which is wrong if MIG is on"
            ));
            (logical_slicing(), None)
        }
    }
}

/// The physical slicing of a card in MIG mode, from every profile index the driver answers and
/// each answered profile's legal placements. Profiles the driver could not answer for are left
/// out with a warning: a profile missing here is missing from the node's capacity.
fn mig_profiles(
    index: u32,
    device: &Device<'_>,
    ctx: &mut DetectContext<'_>,
) -> Option<PhysicalSliced> {
    let mut probed = Vec::new();
    let mut unreadable = Vec::new();
    for profile_index in 0..hgml::GPU_INSTANCE_PROFILE_COUNT {
        match device.profile_info(profile_index) {
            Ok(info) => match device.possible_placements(info.id) {
                Ok(slots) => probed.push((info, slots)),
                Err(e) => unreadable.push(format!("placements of profile {}: {e}", info.id)),
            },
            Err(e) if e.is_absent() => {}
            Err(e) => unreadable.push(format!("profile index {profile_index}: {e}")),
        }
    }
    if !unreadable.is_empty() {
        ctx.warn(format!(
            "T-Head PPU {index}: left MIG profiles out because HGML could not answer for them ({})",
            unreadable.join("; ")
        ));
    }
    let (profiles, rejected) = facts::derive_profiles(&probed);
    for reason in rejected {
        tracing::info!("T-Head PPU {index}: dropped an unpublishable MIG profile: {reason}");
    }
    let sliced = facts::physical_sliced(profiles);
    if sliced.is_none() {
        ctx.warn(format!(
            "T-Head PPU {index} is in MIG mode but HGML offers no publishable MIG profile; it is reported with no slicing"
        ));
    }
    sliced
}

/// Withholds the profiles a group's cards disagree on, then recomputes the group's aggregate.
fn reconcile_profiles(groups: &mut [DevicesGroup]) {
    for g in groups {
        let mut cards: Vec<Option<PhysicalSliced>> = g
            .accelerators
            .iter_mut()
            .map(|a| a.status.physical_sliced.take())
            .collect();
        for name in facts::reject_divergent(&mut cards) {
            tracing::info!(
                "withheld MIG profile {name:?} from group {}: its cards disagree on it",
                g.id
            );
        }
        for (a, sliced) in g.accelerators.iter_mut().zip(cards) {
            a.status.physical_sliced = sliced;
        }
        g.refresh_sliced_detail();
    }
}

impl Detector for Hgml {
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
            .and_then(facts::runtime_version)
            .unwrap_or_default();
        let with_memory = ctx.group_id_with_memory();

        let mut detected = Vec::new();
        for (index, device) in session.cards(ctx)? {
            let Some(who) = nvml_shaped::identity::<HgmlLib>(index, &device, ctx) else {
                continue;
            };
            let Some((name, memory_mib)) =
                nvml_shaped::name_and_memory(&NAMES, ctx, index, &device)
            else {
                continue;
            };
            let mut group = DevicesGroup::new(Manufacturer::Thead, "", "", 0);
            group.cores = device.num_cores().ok().filter(|&c| c > 0);
            group.driver_version = driver_version.clone();
            group.runtime_version = runtime_version.clone();
            group.compute_capability = device
                .compute_capability()
                .ok()
                .and_then(|(major, minor)| facts::compute_capability(major, minor))
                .unwrap_or_default();
            let (logical_sliced, physical_sliced) = slicing(index, &device, ctx);
            detected.push(Detected {
                name,
                memory_mib,
                group,
                accelerator: Accelerator {
                    id: who.id,
                    index,
                    physical_indexes: device.minor_number().into_iter().collect(),
                    topology: ctx.topology(device.pci_info().ok().and_then(|info| {
                        facts::bus_id(
                            info.domain,
                            info.bus,
                            info.device,
                            &info.bus_id,
                            &info.bus_id_legacy,
                        )
                    })),
                    status: AcceleratorStatus {
                        unhealthy: who.unhealthy,
                        logical_sliced,
                        physical_sliced,
                    },
                },
            });
        }
        let mut groups = grouping::group(Manufacturer::Thead, detected, with_memory);
        reconcile_profiles(&mut groups);
        Ok(groups)
    }

    fn monitor(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<AcceleratorMetrics>, DetectError> {
        match open(ctx) {
            Some(session) => session.monitor(ctx),
            None => Ok(Vec::new()),
        }
    }
}
