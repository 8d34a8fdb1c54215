//! AMD and Hygon from the kernel's own interfaces: the amdgpu driver's sysfs attributes (Hygon's
//! DCU driver is a fork of amdgpu and exposes the same ones), the KFD topology and hwmon. No ROCm
//! or DTK library is needed, so a container without `/opt/rocm` mounted still sees the cards (the
//! reference finds none there); when the toolkit is mounted its version becomes `runtimeVersion`,
//! and ROCm's copy of `amdgpu.ids` names AMD products.
//!
//! Read per card (`/sys/bus/pci/devices/<bdf>/…`):
//! - `drm/card<N>`, `drm/renderD<M>`: `physicalIndexes` `[N, M]`;
//! - `unique_id` (else KFD `unique_id`): the id `GPU-<hex>`;
//! - `mem_info_vram_total` / `_used`: memory;
//! - `ip_discovery/die/0/GC/0/{major,minor,revision}`: `family` (`GC 11.0.0`);
//! - `ras/umc_err_count` (`ue: N`): `unhealthy`;
//! - `gpu_busy_percent`, `hwmon/*/temp1_input`, `power1_average`: the monitor sample.
//!
//! KFD (`/sys/class/kfd/kfd/topology/nodes/*/properties`, matched by `drm_render_minor`): compute
//! units (`simd_count / simd_per_cu`) and the gfx target (`gfx_target_version`).

use std::collections::HashMap;

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, AcceleratorStatus, DevicesGroup, LogicalSliced},
    monitor::{AcceleratorMetrics, memory_utilization},
};

use crate::{
    detector::{DetectContext, DetectError, Detector},
    grouping::{self, Detected},
    pci::PciDevice,
    system_root::SystemRoot,
};

/// A manufacturer whose cards run an amdgpu-family kernel driver.
pub struct AmdgpuFamily {
    manufacturer: Manufacturer,
    /// The kernel module, whose `version` is the driver version when built out of tree.
    module: &'static str,
    /// Variables naming the user-space toolkit's home, and its usual place.
    toolkit_env: &'static [&'static str],
    toolkit_default: &'static str,
    /// What a card is called when no table or attribute names it.
    fallback_brand: &'static str,
}

pub const AMD: AmdgpuFamily = AmdgpuFamily {
    manufacturer: Manufacturer::Amd,
    module: "amdgpu",
    toolkit_env: &["ROCM_HOME", "ROCM_PATH"],
    toolkit_default: "/opt/rocm",
    fallback_brand: "AMD GPU",
};

/// Hygon DCUs: the `hydcu` driver, the DTK toolkit.
pub const HYGON: AmdgpuFamily = AmdgpuFamily {
    manufacturer: Manufacturer::Hygon,
    module: "hydcu",
    toolkit_env: &["DTK_HOME", "ROCM_PATH"],
    toolkit_default: "/opt/dtk",
    fallback_brand: "Hygon DCU",
};

const MIB: u64 = 1024 * 1024;
const KFD_NODES: &str = "/sys/class/kfd/kfd/topology/nodes";

/// One card as sysfs shows it.
struct Card {
    pci: PciDevice,
    dir: String,
    card: u32,
    render: Option<u32>,
}

impl Detector for AmdgpuFamily {
    fn detect(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<DevicesGroup>, DetectError> {
        let cards = cards(ctx);
        if cards.is_empty() {
            return Ok(Vec::new());
        }
        let root = ctx.root;
        let kfd = kfd_nodes(root);
        let driver_version = driver_version(root, self.module);
        let toolkit = self.toolkit_home(ctx.env);
        let runtime_version = toolkit_version(root, &toolkit);
        let names = product_names(root, &toolkit);
        let with_memory = ctx.group_id_with_memory();
        let slicing = self.manufacturer.spec().logical_slicing;

        let mut detected = Vec::new();
        for (index, card) in cards.iter().enumerate() {
            let Some(id) = unique_id(root, card, &kfd) else {
                ctx.warn(format!(
                    "{} card {} at {} has no unique id (no unique_id in sysfs or KFD); skipped",
                    self.manufacturer, card.card, card.pci.bus_id
                ));
                continue;
            };
            let memory_mib = read_u64(root, &format!("{}/mem_info_vram_total", card.dir))
                .map(|b| b / MIB)
                .unwrap_or(0);
            let props = card.render.and_then(|r| kfd.get(&r));
            let name = product_name(root, card, &names, self.fallback_brand);
            let mut group = DevicesGroup::new(self.manufacturer, "", "", 0);
            group.cores = props.and_then(compute_units);
            group.driver_version = driver_version.clone().unwrap_or_default();
            group.runtime_version = runtime_version.clone().unwrap_or_default();
            group.compute_capability = props
                .and_then(|p| p.get("gfx_target_version"))
                .and_then(|v| gfx_target(*v))
                .unwrap_or_default();
            group.family = gc_version(root, card).unwrap_or_default();
            detected.push(Detected {
                name,
                memory_mib,
                group,
                accelerator: Accelerator {
                    id,
                    index: index as u32,
                    physical_indexes: std::iter::once(card.card).chain(card.render).collect(),
                    topology: card.pci.topology(),
                    status: AcceleratorStatus {
                        unhealthy: uncorrectable_errors(root, card) > 0,
                        logical_sliced: slicing.map(|s| LogicalSliced {
                            cores_percentage_overcommit: s.cores_percentage_overcommit,
                            count: s.count,
                        }),
                        physical_sliced: None,
                    },
                },
            });
        }
        Ok(grouping::group(self.manufacturer, detected, with_memory))
    }

    fn monitor(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<AcceleratorMetrics>, DetectError> {
        let root = ctx.root;
        let kfd = kfd_nodes(root);
        let mut samples = Vec::new();
        for card in cards(ctx) {
            let Some(id) = unique_id(root, &card, &kfd) else {
                continue;
            };
            let total =
                read_u64(root, &format!("{}/mem_info_vram_total", card.dir)).map(|b| b / MIB);
            let used = read_u64(root, &format!("{}/mem_info_vram_used", card.dir)).map(|b| b / MIB);
            let hwmon = hwmon_dir(root, &card);
            samples.push(AcceleratorMetrics {
                id,
                memory: total,
                memory_usage: used,
                memory_utilization: used.zip(total).and_then(|(u, t)| memory_utilization(u, t)),
                cores_utilization: read_u64(root, &format!("{}/gpu_busy_percent", card.dir))
                    .map(|p| p.min(100) as u32),
                temperature: hwmon
                    .as_ref()
                    .and_then(|h| root.read_attr(format!("{h}/temp1_input")))
                    .and_then(|t| t.parse::<i64>().ok())
                    .map(|milli| (milli / 1000) as i32),
                power_usage: hwmon.as_ref().and_then(|h| {
                    ["power1_average", "power1_input"]
                        .iter()
                        .find_map(|f| read_u64(root, &format!("{h}/{f}")))
                        .map(|micro| (micro / 1_000_000) as u32)
                }),
                unhealthy: uncorrectable_errors(root, &card) > 0,
            });
        }
        Ok(samples)
    }
}

/// The amdgpu cards among this manufacturer's PCI functions, ordered by bus id (the order
/// rocm-smi enumerates them in).
fn cards(ctx: &DetectContext<'_>) -> Vec<Card> {
    let root = ctx.root;
    let functions: Vec<PciDevice> = match ctx.pci {
        Some(devices) => devices.to_vec(),
        None => root
            .list_dir("/sys/class/drm")
            .unwrap_or_default()
            .iter()
            .filter(|n| card_number(n).is_some())
            .filter_map(|n| {
                let link =
                    std::fs::canonicalize(root.path(format!("/sys/class/drm/{n}/device"))).ok()?;
                let device = crate::pci::read_device_at(root, &link)?;
                ctx.manufacturer
                    .pci_vendor
                    .matches(&device.vendor_id, &device.class)
                    .then_some(device)
            })
            .collect(),
    };
    let mut cards: Vec<Card> = functions
        .into_iter()
        .filter_map(|pci| {
            let dir = pci.sysfs_dir.clone();
            let drm = root.list_dir(format!("{dir}/drm")).unwrap_or_default();
            let card = drm.iter().find_map(|n| card_number(n))?;
            let render = drm
                .iter()
                .find_map(|n| n.strip_prefix("renderD").and_then(|m| m.parse().ok()));
            Some(Card {
                pci,
                dir,
                card,
                render,
            })
        })
        .collect();
    cards.sort_by(|a, b| a.pci.bus_id.cmp(&b.pci.bus_id));
    cards.dedup_by(|a, b| a.pci.bus_id == b.pci.bus_id);
    cards
}

fn card_number(name: &str) -> Option<u32> {
    name.strip_prefix("card")?.parse().ok()
}

fn read_u64(root: &SystemRoot, path: &str) -> Option<u64> {
    root.read_attr(path)?.parse().ok()
}

/// KFD topology nodes that are GPUs, keyed by their DRM render minor.
fn kfd_nodes(root: &SystemRoot) -> HashMap<u32, HashMap<String, u64>> {
    let mut nodes = HashMap::new();
    for node in root.list_dir(KFD_NODES).unwrap_or_default() {
        let Some(text) = root.read_attr(format!("{KFD_NODES}/{node}/properties")) else {
            continue;
        };
        let props = parse_properties(&text);
        if let Some(&minor) = props.get("drm_render_minor")
            && minor > 0
        {
            nodes.insert(minor as u32, props);
        }
    }
    nodes
}

/// KFD `properties`: one `name value` pair per line.
fn parse_properties(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(char::is_whitespace)?;
            Some((k.to_owned(), v.trim().parse().ok()?))
        })
        .collect()
}

fn compute_units(props: &HashMap<String, u64>) -> Option<u32> {
    let simds = *props.get("simd_count")?;
    let per_cu = *props.get("simd_per_cu")?;
    (per_cu > 0 && simds > 0).then(|| (simds / per_cu) as u32)
}

/// `gfx_target_version` 110001 -> `gfx1101`, 90010 -> `gfx90a`.
pub(crate) fn gfx_target(version: u64) -> Option<String> {
    (version > 0).then(|| {
        let (major, minor, step) = (version / 10000, (version / 100) % 100, version % 100);
        format!("gfx{major}{minor:x}{step:x}")
    })
}

fn unique_id(
    root: &SystemRoot,
    card: &Card,
    kfd: &HashMap<u32, HashMap<String, u64>>,
) -> Option<String> {
    let from_sysfs = root
        .read_attr(format!("{}/unique_id", card.dir))
        .map(|s| s.trim_start_matches("0x").to_ascii_lowercase())
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit()));
    let from_kfd = || {
        card.render
            .and_then(|r| kfd.get(&r))
            .and_then(|p| p.get("unique_id"))
            .filter(|id| **id != 0)
            .map(|id| format!("{id:x}"))
    };
    from_sysfs.or_else(from_kfd).map(|hex| format!("GPU-{hex}"))
}

fn gc_version(root: &SystemRoot, card: &Card) -> Option<String> {
    let base = format!("{}/ip_discovery/die/0/GC/0", card.dir);
    let part = |f: &str| root.read_attr(format!("{base}/{f}"));
    Some(format!(
        "GC {}.{}.{}",
        part("major")?,
        part("minor")?,
        part("revision")?
    ))
}

fn uncorrectable_errors(root: &SystemRoot, card: &Card) -> u64 {
    root.read_attr(format!("{}/ras/umc_err_count", card.dir))
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.trim()
                    .strip_prefix("ue:")
                    .and_then(|v| v.trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

fn hwmon_dir(root: &SystemRoot, card: &Card) -> Option<String> {
    let dir = format!("{}/hwmon", card.dir);
    root.list_dir(&dir)
        .ok()?
        .into_iter()
        .find(|h| h.starts_with("hwmon"))
        .map(|h| format!("{dir}/{h}"))
}

/// The driver's version: the DKMS module's own, else the kernel's (in-tree driver) as `X.Y.Z`.
fn driver_version(root: &SystemRoot, module: &str) -> Option<String> {
    root.read_attr(format!("/sys/module/{module}/version"))
        .filter(|v| !v.is_empty())
        .or_else(|| {
            let release = root.kernel_release()?;
            let numeric: String = release
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            Some(numeric.trim_end_matches('.').to_owned()).filter(|v| !v.is_empty())
        })
}

impl AmdgpuFamily {
    fn toolkit_home(&self, env: &dyn Fn(&str) -> Option<String>) -> String {
        self.toolkit_env
            .iter()
            .find_map(|v| env(v).filter(|p| !p.is_empty()))
            .unwrap_or_else(|| self.toolkit_default.to_owned())
    }
}

/// The toolkit's `major.minor` from `<home>/.info/version` (`7.2.0-43`), when it is mounted.
fn toolkit_version(root: &SystemRoot, home: &str) -> Option<String> {
    let text = root.read_attr(format!("{home}/.info/version"))?;
    let mut parts = text.split(['.', '-']);
    Some(format!("{}.{}", parts.next()?, parts.next()?))
}

/// Marketing names keyed by (device id, revision), from libdrm's `amdgpu.ids` as rocm-smi reads
/// it: the toolkit's copy first, then the system's.
fn product_names(root: &SystemRoot, toolkit: &str) -> HashMap<(String, String), String> {
    let candidates = [
        format!("{toolkit}/share/libdrm/amdgpu.ids"),
        "/usr/share/libdrm/amdgpu.ids".to_owned(),
    ];
    candidates
        .iter()
        .find_map(|p| std::fs::read_to_string(root.path(p)).ok())
        .map(|text| parse_amdgpu_ids(&text))
        .unwrap_or_default()
}

/// `amdgpu.ids` lines: `DEVICE,\tREVISION,\tName`; `#` comments and a version line.
fn parse_amdgpu_ids(text: &str) -> HashMap<(String, String), String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let mut fields = l.splitn(3, ',');
            let device = fields.next()?.trim().to_ascii_lowercase();
            let revision = fields.next()?.trim().to_ascii_lowercase();
            let name = fields.next()?.trim().to_owned();
            Some(((device, revision), name))
        })
        .collect()
}

fn product_name(
    root: &SystemRoot,
    card: &Card,
    names: &HashMap<(String, String), String>,
    fallback_brand: &str,
) -> String {
    let revision = card
        .pci
        .revision
        .trim_start_matches("0x")
        .to_ascii_lowercase();
    let key = (card.pci.device_id.clone(), revision);
    names
        .get(&key)
        .cloned()
        .or_else(|| {
            root.read_attr(format!("{}/product_name", card.dir))
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(|| format!("{fallback_brand} {}", card.pci.device_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfx_targets() {
        assert_eq!(gfx_target(110001).as_deref(), Some("gfx1101"));
        assert_eq!(gfx_target(90010).as_deref(), Some("gfx90a"));
        assert_eq!(gfx_target(90402).as_deref(), Some("gfx942"));
        assert_eq!(gfx_target(0), None);
    }

    #[test]
    fn amdgpu_ids_lines() {
        let ids = parse_amdgpu_ids("# comment\n1.0.0\n747E,\tC8,\tAMD Radeon RX 7800 XT\n");
        assert_eq!(
            ids.get(&("747e".into(), "c8".into())).map(String::as_str),
            Some("AMD Radeon RX 7800 XT")
        );
    }

    #[test]
    fn kfd_properties() {
        let p = parse_properties("simd_count 120\nsimd_per_cu 2\ngfx_target_version 110001\n");
        assert_eq!(compute_units(&p), Some(60));
    }
}
