//! Huawei Ascend NPUs through DCMI, the driver's management library (`libdcmi.so`), loaded at
//! run time by path so that a node without the driver still runs.
//!
//! The library is located under the system root (`crate::library::locate`; the driver installs
//! it in `/usr/local/Ascend/driver/lib64/driver`, the DCMI package in `/usr/local/dcmi`); only
//! when the root is the real `/` and no known directory has it does loading fall back to the
//! dynamic loader's search. A fixture root therefore never reaches a host's real driver.
//!
//! Enumeration is the reference's: `dcmi_get_card_list` × `dcmi_get_device_num_in_card`, each
//! NPU addressed as (card id, device id in card). Read per NPU:
//! - `dcmi_get_device_die_v2` (VDIE): `id`, see [`facts::die_id`];
//! - `dcmi_get_device_logic_id`: the order of `index` (0, 1, ... in logic id order);
//! - `dcmi_get_device_phyid_from_logicid`: `physicalIndexes` `[phyId, cardId, deviceIdInCard]`;
//! - `dcmi_get_device_chip_info`: name ([`facts::product_name`]), `family`, `cores` (AI cores);
//! - `dcmi_get_device_hbm_info`, else (no HBM, e.g. 310P) `dcmi_get_device_memory_info_v3`:
//!   memory;
//! - `dcmi_get_device_health` other than 0: `unhealthy`;
//! - `dcmi_get_device_pcie_info_v2`: the bus id that finds the PCI function (topology);
//! - `dcmi_get_device_ip` / `dcmi_get_device_gateway` (RoCE port 0): `topology.roce`.
//!
//! Per node: `dcmi_get_driver_version` (`driverVersion`) and the CANN toolkit's version file
//! (`runtimeVersion`, see [`toolkit_version`]). The monitor adds
//! `dcmi_get_device_utilization_rate` (AI core), `dcmi_get_device_temperature` and
//! `dcmi_get_device_power_info` (0.1 W). A figure DCMI refuses is absent, never 0.

mod dcmi;
mod facts;
mod share;

pub use share::ContainerShare;

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, AcceleratorStatus, DeviceTopology, DevicesGroup, Roce},
    monitor::{AcceleratorMetrics, memory_utilization},
};

use self::dcmi::{DcmiLibrary, MemoryFigures};
use super::ffi::CallError;
use crate::{
    detector::{DetectContext, DetectError, Detector},
    grouping::{self, Detected},
    system_root::SystemRoot,
};

/// The Ascend detector.
pub struct Dcmi;

/// A loaded and initialised DCMI, and the name to use for it in messages.
struct Session {
    dcmi: DcmiLibrary,
    library: String,
}

/// One NPU as DCMI addresses it.
struct Npu {
    card: i32,
    device: i32,
    logic_id: Option<u32>,
}

impl Session {
    fn call_error(&self, e: CallError) -> DetectError {
        e.detect_error(&self.library)
    }

    /// Every NPU, ordered by logic id (the order of `index`). A card DCMI cannot list the
    /// devices of is reported and left out; the card list itself failing means "could not
    /// measure".
    fn npus(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<Npu>, DetectError> {
        let cards = self.dcmi.card_list().map_err(|e| self.call_error(e))?;
        let mut npus = Vec::new();
        for card in cards {
            let count = match self.dcmi.device_num_in_card(card) {
                Ok(n) => n,
                Err(e) => {
                    ctx.warn(format!("Ascend card {card}: {e}; its NPUs are left out"));
                    continue;
                }
            };
            for device in 0..count.max(0) {
                let logic_id = self
                    .dcmi
                    .logic_id(card, device)
                    .ok()
                    .and_then(|l| u32::try_from(l).ok());
                npus.push(Npu {
                    card,
                    device,
                    logic_id,
                });
            }
        }
        // Without a logic id an NPU goes last, in card order: still listed, never reordered
        // ahead of the ones DCMI numbered.
        npus.sort_by_key(|n| (n.logic_id.unwrap_or(u32::MAX), n.card, n.device));
        Ok(npus)
    }

    /// The NPU's die id, or a warning and `None`: without an id it cannot enter the ledger.
    fn id(&self, npu: &Npu, ctx: &mut DetectContext<'_>) -> Option<String> {
        match self.dcmi.die_id(npu.card, npu.device, dcmi::VDIE) {
            Ok(words) => facts::die_id(&words).or_else(|| {
                ctx.warn(format!(
                    "Ascend card {} device {}: dcmi_get_device_die_v2 gave an all-zero die id; left out",
                    npu.card, npu.device
                ));
                None
            }),
            Err(e) => {
                ctx.warn(format!(
                    "Ascend card {} device {}: {e}; left out",
                    npu.card, npu.device
                ));
                None
            }
        }
    }

    /// HBM when the chip has it, else its DDR.
    fn memory(&self, npu: &Npu) -> Option<MemoryFigures> {
        self.dcmi
            .hbm_info(npu.card, npu.device)
            .ok()
            .filter(|m| m.total_mb > 0)
            .or_else(|| {
                self.dcmi
                    .memory_info(npu.card, npu.device)
                    .ok()
                    .filter(|m| m.total_mb > 0)
            })
    }

    /// Health other than "normal" is unhealthy; a refused query holds nothing against the card.
    fn unhealthy(&self, npu: &Npu) -> bool {
        match self.dcmi.health(npu.card, npu.device) {
            Ok(h) => facts::unhealthy(h),
            Err(e) => {
                tracing::debug!("Ascend card {} device {}: {e}", npu.card, npu.device);
                false
            }
        }
    }

    /// The topology of the PCI function at DCMI's bus id; only the bus id when sysfs lacks it.
    fn topology(&self, npu: &Npu, ctx: &DetectContext<'_>) -> DeviceTopology {
        let Ok(a) = self.dcmi.pcie_address(npu.card, npu.device) else {
            return DeviceTopology::default();
        };
        let mut topology = ctx.topology(Some(facts::bus_id(a.domain, a.bus, a.device, a.function)));
        topology.roce = self.roce(npu);
        topology
    }

    /// The NPU's RoCE port address; `None` where it has none (inference cards) or DCMI refuses.
    fn roce(&self, npu: &Npu) -> Option<Roce> {
        let (ip, mask) = self.dcmi.roce_address(npu.card, npu.device).ok()?;
        let gateway = self.dcmi.roce_gateway(npu.card, npu.device).ok();
        facts::roce(ip, mask, gateway)
    }
}

/// Finds, loads and initialises DCMI. `None` (with a warning where it matters) when the library
/// is absent, unloadable or the driver does not answer: a measurement ("no Ascend NPUs here").
fn open(ctx: &mut DetectContext<'_>) -> Option<Session> {
    let found = ctx
        .locate_library("mount the Ascend driver: /usr/local/Ascend/driver and /usr/local/dcmi")?;
    let dcmi = match DcmiLibrary::open(&found.path) {
        Ok(l) => l,
        Err(e) => {
            ctx.library_unusable(
                &found,
                e,
                "mount the Ascend driver: /usr/local/Ascend/driver and /usr/local/dcmi",
            );
            return None;
        }
    };
    if let Err(e) = dcmi.init() {
        ctx.library_unusable(
            &found,
            format!("did not initialise: {e}"),
            "is the Ascend driver loaded?",
        );
        return None;
    }
    Some(Session {
        dcmi,
        library: found.shown,
    })
}

/// Where the CANN toolkit's `latest` directory may be, in order: `ASCEND_TOOLKIT_HOME` (which
/// CANN's `set_env.sh` points at `.../ascend-toolkit/latest` itself) and below it, then
/// `<CANN_HOME>/ascend-toolkit/latest`, then `/usr/local/Ascend/ascend-toolkit/latest`.
fn toolkit_dirs(env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut dirs = Vec::new();
    if let Some(home) = env("ASCEND_TOOLKIT_HOME").filter(|h| !h.is_empty()) {
        let home = home.trim_end_matches('/').to_owned();
        dirs.push(format!("{home}/ascend-toolkit/latest"));
        dirs.push(home);
    }
    for home in [env("CANN_HOME"), Some("/usr/local/Ascend".to_owned())]
        .into_iter()
        .flatten()
        .filter(|h| !h.is_empty())
    {
        dirs.push(format!(
            "{}/ascend-toolkit/latest",
            home.trim_end_matches('/')
        ));
    }
    dirs
}

/// The CANN release of the host's toolkit (`8.0.RC2`), read under the system root from the
/// first toolkit directory that has `version.cfg` (its `*_running_version=[inner:release]`
/// lines) or `compiler/version.info` (its `version_dir=` line); `None` when no toolkit is
/// mounted.
fn toolkit_version(root: &SystemRoot, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    toolkit_dirs(env).iter().find_map(|dir| {
        root.read_attr(format!("{dir}/version.cfg"))
            .and_then(|t| facts::cann_version_from_cfg(&t))
            .or_else(|| {
                root.read_attr(format!("{dir}/compiler/version.info"))
                    .and_then(|t| facts::cann_version_from_info(&t))
            })
    })
}

impl Detector for Dcmi {
    fn detect(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<DevicesGroup>, DetectError> {
        let Some(session) = open(ctx) else {
            return Ok(Vec::new());
        };
        let driver_version = session.dcmi.driver_version().unwrap_or_default();
        let runtime_version = toolkit_version(ctx.root, ctx.env);
        let cann_major = runtime_version.as_deref().and_then(facts::cann_major);
        let with_memory = ctx.group_id_with_memory();

        let mut detected = Vec::new();
        for (index, npu) in session.npus(ctx)?.iter().enumerate() {
            let Some(id) = session.id(npu, ctx) else {
                continue;
            };
            let chip = match session.dcmi.chip_info(npu.card, npu.device) {
                Ok(c) => c,
                Err(e) => {
                    ctx.warn(format!(
                        "Ascend card {} device {}: {e}; left out",
                        npu.card, npu.device
                    ));
                    continue;
                }
            };
            let Some(memory) = session.memory(npu) else {
                ctx.warn(format!(
                    "Ascend card {} device {}: neither dcmi_get_device_hbm_info nor dcmi_get_device_memory_info_v3 reported memory; left out",
                    npu.card, npu.device
                ));
                continue;
            };
            let family = facts::family(&chip.chip_name);
            let mut group = DevicesGroup::new(Manufacturer::Ascend, "", "", 0);
            group.cores = (chip.aicore_count > 0).then_some(chip.aicore_count);
            group.driver_version = driver_version.clone();
            group.runtime_version = runtime_version.clone().unwrap_or_default();
            group.family = family.unwrap_or_default().to_owned();
            let phy_id = npu.logic_id.and_then(|l| session.dcmi.phy_id(l).ok());
            detected.push(Detected {
                name: facts::product_name(&chip.chip_type, &chip.chip_name),
                memory_mib: memory.total_mb,
                group,
                accelerator: Accelerator {
                    id,
                    index: index as u32,
                    physical_indexes: phy_id
                        .map(|p| vec![p, npu.card as u32, npu.device as u32])
                        .unwrap_or_default(),
                    topology: session.topology(npu, ctx),
                    status: AcceleratorStatus {
                        unhealthy: session.unhealthy(npu),
                        logical_sliced: facts::logical_slicing(family, cann_major),
                        physical_sliced: None,
                    },
                },
            });
        }
        Ok(grouping::group(Manufacturer::Ascend, detected, with_memory))
    }

    fn monitor(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<AcceleratorMetrics>, DetectError> {
        let Some(session) = open(ctx) else {
            return Ok(Vec::new());
        };
        let mut samples = Vec::new();
        for npu in session.npus(ctx)? {
            let Some(id) = session.id(&npu, ctx) else {
                continue;
            };
            let (card, device) = (npu.card, npu.device);
            let memory = session.memory(&npu);
            let total = memory.map(|m| m.total_mb);
            let used = memory.map(|m| m.used_mb);
            samples.push(AcceleratorMetrics {
                id,
                memory: total,
                memory_usage: used,
                memory_utilization: used.zip(total).and_then(|(u, t)| memory_utilization(u, t)),
                cores_utilization: session
                    .dcmi
                    .utilization(card, device, dcmi::UTILIZATION_AICORE)
                    .ok()
                    .map(|u| u.min(100)),
                temperature: session.dcmi.temperature(card, device).ok(),
                power_usage: session
                    .dcmi
                    .power_deciwatts(card, device)
                    .ok()
                    .and_then(facts::watts),
                unhealthy: session.unhealthy(&npu),
            });
        }
        Ok(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toolkit_version_is_read_under_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = SystemRoot::new(dir.path());
        let none = |_: &str| None;
        assert_eq!(toolkit_version(&root, &none), None);

        let info = root.path("/usr/local/Ascend/ascend-toolkit/latest/compiler/version.info");
        std::fs::create_dir_all(info.parent().unwrap()).unwrap();
        std::fs::write(&info, "Version=7.3.0.1.231\nversion_dir=8.0.RC2\n").unwrap();
        assert_eq!(toolkit_version(&root, &none).as_deref(), Some("8.0.RC2"));

        // ASCEND_TOOLKIT_HOME names the `latest` directory itself.
        let cfg = root.path("/opt/cann/latest/version.cfg");
        std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
        std::fs::write(&cfg, "runtime_running_version=[8.1.0.1:8.1.RC1]\n").unwrap();
        let env = |k: &str| (k == "ASCEND_TOOLKIT_HOME").then(|| "/opt/cann/latest".to_owned());
        assert_eq!(toolkit_version(&root, &env).as_deref(), Some("8.1.RC1"));
    }
}
