//! MetaX GPUs through MXSML, the driver's management library (`libmxsml.so`), loaded at run
//! time by path so that a node without the driver still runs.
//!
//! The library is located under the system root (`crate::library::locate`: `$MACA_HOME/lib`,
//! `/opt/maca/lib`, the driver package's `/opt/mxdriver/lib`, the system directories); only
//! when the root is the real `/` and no known directory has it does loading fall back to the
//! dynamic loader's search. A fixture root therefore never reaches a host's real driver.
//!
//! Devices are MXSML ids `0..mxSmlGetDeviceCount()`; `index` is that id (the GPU number
//! `mx-smi` shows). SR-IOV virtual functions are skipped, as in the reference: those MXSML
//! reports in VF mode and those whose PCI function has a `physfn` link. Read per GPU:
//! - `mxSmlGetDeviceInfo`: `id` (its `uuid`, verbatim), the product name (`deviceName`, e.g.
//!   `MXC500`), the bus id that finds the PCI function (topology, and `physicalIndexes`
//!   `[cardN, renderDN]` from the function's `drm/` directory), and the brand behind `family`
//!   when the name does not tell ([`facts::family`]);
//! - `mxSmlGetMemoryInfo`: `vramTotal` (KB) as memory;
//! - `mxSmlGetDeviceVersion` (`MXSML_Version_Driver`): `driverVersion`;
//! - `mxSmlGetTotalEccErrors`: uncorrectable SRAM or DRAM errors make the GPU `unhealthy`.
//!
//! Per node: `mxSmlGetMacaVersion` (the MACA stack) as `runtimeVersion`. The monitor adds
//! `vramUse`, `mxSmlGetDeviceIpUsage` (xcore), `mxSmlGetTemperatureInfo` (hotspot, 0.01 °C)
//! and `mxSmlGetBoardPowerInfo` (sum of the board's inputs, mW). A figure MXSML refuses is
//! absent, never 0.

mod facts;
mod mxsml;

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, AcceleratorStatus, DeviceTopology, DevicesGroup, LogicalSliced},
    monitor::{AcceleratorMetrics, memory_utilization},
};

use self::mxsml::{DeviceInfo, MxsmlLibrary};
use crate::{
    detector::{DetectContext, DetectError, Detector},
    grouping::{self, Detected},
    pci::{self, PciDevice},
};

/// The MetaX detector.
pub struct Mxsml;

/// One physical GPU as MXSML addresses it.
struct Gpu {
    /// The MXSML device id.
    id: u32,
    info: DeviceInfo,
    /// Its PCI function, where sysfs has it.
    function: Option<PciDevice>,
}

/// Finds, loads and initialises MXSML. `None` (with a warning where it matters) when the
/// library is absent, unloadable or the driver does not answer: a measurement ("no MetaX GPUs
/// here").
fn open(ctx: &mut DetectContext<'_>) -> Option<MxsmlLibrary> {
    let found = ctx.locate_library("mount the MetaX driver: /opt/mxdriver and /opt/maca")?;
    let mxsml = match MxsmlLibrary::open(&found.path) {
        Ok(l) => l,
        Err(e) => {
            ctx.library_unusable(
                &found,
                e,
                "mount the MetaX driver: /opt/mxdriver and /opt/maca",
            );
            return None;
        }
    };
    if let Err(e) = mxsml.init() {
        ctx.library_unusable(
            &found,
            format!("did not initialise: {e}"),
            "is the MetaX driver loaded?",
        );
        return None;
    }
    Some(mxsml)
}

/// Every physical GPU in MXSML id order. A device MXSML cannot describe is reported and left
/// out; SR-IOV virtual functions are left out quietly.
fn gpus(mxsml: &MxsmlLibrary, ctx: &mut DetectContext<'_>) -> Vec<Gpu> {
    let mut gpus = Vec::new();
    for id in 0..mxsml.device_count() {
        let info = match mxsml.device_info(id) {
            Ok(info) => info,
            Err(e) => {
                ctx.warn(format!("MetaX GPU {id}: {e}; left out"));
                continue;
            }
        };
        let bus_id = pci::normalize_bus_id(&info.bdf);
        let function = ctx
            .pci_device(&bus_id)
            .or_else(|| pci::read_device(ctx.root, &bus_id));
        let has_physfn = function.as_ref().is_some_and(|f| {
            ctx.root
                .path(format!("{}/physfn", f.sysfs_dir))
                .symlink_metadata()
                .is_ok()
        });
        if facts::is_virtual_function(info.mode, has_physfn) {
            tracing::debug!("MetaX GPU {id} at {bus_id} is an SR-IOV virtual function; skipped");
            continue;
        }
        gpus.push(Gpu { id, info, function });
    }
    gpus
}

/// The topology of the GPU's PCI function; only the bus id when sysfs lacks it.
fn topology(gpu: &Gpu) -> DeviceTopology {
    match &gpu.function {
        Some(f) => f.topology(),
        None => DeviceTopology {
            pci_bus_id: pci::normalize_bus_id(&gpu.info.bdf),
            ..DeviceTopology::default()
        },
    }
}

/// `[cardN, renderDN]` from the function's DRM nodes; empty when there are none.
fn physical_indexes(gpu: &Gpu, ctx: &DetectContext<'_>) -> Vec<u32> {
    gpu.function
        .as_ref()
        .map(|f| {
            let entries = ctx
                .root
                .list_dir(format!("{}/drm", f.sysfs_dir))
                .unwrap_or_default();
            facts::drm_indexes(&entries)
        })
        .unwrap_or_default()
}

/// Uncorrectable ECC errors make a GPU unhealthy; a refused query holds nothing against it.
fn unhealthy(mxsml: &MxsmlLibrary, gpu: &Gpu) -> bool {
    match mxsml.uncorrectable_ecc_errors(gpu.id) {
        Ok(n) => n > 0,
        Err(e) => {
            tracing::debug!("MetaX GPU {}: {e}", gpu.id);
            false
        }
    }
}

impl Detector for Mxsml {
    fn detect(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<DevicesGroup>, DetectError> {
        let Some(mxsml) = open(ctx) else {
            return Ok(Vec::new());
        };
        let runtime_version = mxsml.maca_version().unwrap_or_default();
        let with_memory = ctx.group_id_with_memory();
        let slicing = Manufacturer::Metax.spec().logical_slicing;

        let mut detected = Vec::new();
        for gpu in gpus(&mxsml, ctx) {
            if gpu.info.uuid.is_empty() {
                ctx.warn(format!(
                    "MetaX GPU {}: mxSmlGetDeviceInfo gave no uuid; left out",
                    gpu.id
                ));
                continue;
            }
            let Some(memory_mib) = mxsml
                .vram(gpu.id)
                .ok()
                .and_then(|m| facts::kb_to_mib(m.total))
                .filter(|m| *m > 0)
            else {
                ctx.warn(format!(
                    "MetaX GPU {}: mxSmlGetMemoryInfo reported no memory; left out",
                    gpu.id
                ));
                continue;
            };
            let mut group = DevicesGroup::new(Manufacturer::Metax, "", "", 0);
            group.driver_version = mxsml.driver_version(gpu.id).unwrap_or_default();
            group.runtime_version = runtime_version.clone();
            group.family = facts::family(&gpu.info.name, gpu.info.brand)
                .unwrap_or_default()
                .to_owned();
            detected.push(Detected {
                name: gpu.info.name.clone(),
                memory_mib,
                group,
                accelerator: Accelerator {
                    id: gpu.info.uuid.clone(),
                    index: gpu.id,
                    physical_indexes: physical_indexes(&gpu, ctx),
                    topology: topology(&gpu),
                    status: AcceleratorStatus {
                        unhealthy: unhealthy(&mxsml, &gpu),
                        logical_sliced: slicing.map(|s| LogicalSliced {
                            cores_percentage_overcommit: s.cores_percentage_overcommit,
                            count: s.count,
                        }),
                        physical_sliced: None,
                    },
                },
            });
        }
        Ok(grouping::group(Manufacturer::Metax, detected, with_memory))
    }

    fn monitor(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<AcceleratorMetrics>, DetectError> {
        let Some(mxsml) = open(ctx) else {
            return Ok(Vec::new());
        };
        let mut samples = Vec::new();
        for gpu in gpus(&mxsml, ctx) {
            if gpu.info.uuid.is_empty() {
                continue;
            }
            let vram = mxsml.vram(gpu.id).ok();
            let total = vram.and_then(|m| facts::kb_to_mib(m.total));
            let used = vram.and_then(|m| facts::kb_to_mib(m.used));
            samples.push(AcceleratorMetrics {
                id: gpu.info.uuid.clone(),
                memory: total,
                memory_usage: used,
                memory_utilization: used.zip(total).and_then(|(u, t)| memory_utilization(u, t)),
                cores_utilization: mxsml.xcore_usage(gpu.id).ok().and_then(facts::percent),
                temperature: mxsml.hotspot_centidegrees(gpu.id).ok().map(facts::celsius),
                power_usage: mxsml
                    .board_power_mw(gpu.id)
                    .ok()
                    .and_then(|ways| facts::watts(&ways)),
                unhealthy: unhealthy(&mxsml, &gpu),
            });
        }
        Ok(samples)
    }
}
