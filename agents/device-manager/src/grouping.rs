//! Naming and ordering of device groups, shared by every vendor.

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, DevicesGroup},
};

/// The longest group id (a Kubernetes label value).
const MAX_ID_LEN: usize = 63;

/// Brand words removed from the front of a product name before it becomes a group id.
fn brand_prefixes(m: Manufacturer) -> &'static [&'static str] {
    match m {
        Manufacturer::Nvidia => &["nvidia"],
        Manufacturer::Amd => &["amd"],
        Manufacturer::Ascend => &["huawei", "ascend"],
        Manufacturer::Cambricon => &["cambricon"],
        Manufacturer::Hygon => &["hygon"],
        Manufacturer::Iluvatar => &["iluvatar"],
        Manufacturer::Metax => &["metax"],
        Manufacturer::Mthreads => &["mthreads", "moore threads"],
        Manufacturer::Thead => &["t-head", "thead"],
    }
}

/// The group id of a product: lowercase, brand removed, runs of other characters turned into
/// one `-`, at most 63 characters; with `with_memory` a `-<GiB>g` suffix.
pub fn group_id(m: Manufacturer, name: &str, memory_mib: u64, with_memory: bool) -> String {
    let mut rest = name.trim().to_ascii_lowercase();
    for brand in brand_prefixes(m) {
        if let Some(stripped) = rest.strip_prefix(brand) {
            rest = stripped.trim_start_matches([' ', '-', '_']).to_owned();
        }
    }
    let mut id = String::with_capacity(rest.len());
    for c in rest.chars() {
        if c.is_ascii_alphanumeric() || c == '.' {
            id.push(c);
        } else if !id.ends_with('-') {
            id.push('-');
        }
    }
    let mut id = id.trim_matches(['-', '.']).to_owned();
    if with_memory {
        let gib = (memory_mib + 512) / 1024;
        id = format!("{id}-{gib}g");
    }
    if id.len() > MAX_ID_LEN {
        id.truncate(MAX_ID_LEN);
        id = id.trim_end_matches(['-', '.']).to_owned();
    }
    if id.is_empty() {
        m.as_str().to_owned()
    } else {
        id
    }
}

/// An accelerator before grouping: its product facts and itself.
pub struct Detected {
    pub name: String,
    pub memory_mib: u64,
    /// Fills the group-level facts (cores, versions, family) from the first accelerator seen.
    pub group: DevicesGroup,
    pub accelerator: Accelerator,
}

/// Groups accelerators by (product name, memory); accelerators by index, groups by their first
/// accelerator's index; each group's sliced detail computed.
pub fn group(m: Manufacturer, detected: Vec<Detected>, with_memory: bool) -> Vec<DevicesGroup> {
    let mut groups: Vec<DevicesGroup> = Vec::new();
    for d in detected {
        match groups
            .iter_mut()
            .find(|g| g.name == d.name && g.memory == d.memory_mib)
        {
            Some(g) => g.accelerators.push(d.accelerator),
            None => {
                let mut g = d.group;
                g.id = group_id(m, &d.name, d.memory_mib, with_memory);
                g.manufacturer = m;
                g.name = d.name;
                g.memory = d.memory_mib;
                g.accelerators = vec![d.accelerator];
                groups.push(g);
            }
        }
    }
    // Two products can sanitise to one id (same name, different memory): keep ids unique.
    let mut seen: Vec<String> = Vec::new();
    for g in &mut groups {
        g.accelerators.sort_by_key(|a| a.index);
        g.refresh_sliced_detail();
        if seen.contains(&g.id) {
            g.id = group_id(m, &g.name, g.memory, true);
        }
        seen.push(g.id.clone());
    }
    groups.sort_by_key(|g| g.accelerators.first().map_or(u32::MAX, |a| a.index));
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_reference() {
        let id = |m, n| group_id(m, n, 0, false);
        assert_eq!(
            id(Manufacturer::Amd, "AMD Radeon RX 7800 XT"),
            "radeon-rx-7800-xt"
        );
        assert_eq!(id(Manufacturer::Nvidia, "NVIDIA A10G"), "a10g");
        assert_eq!(
            id(Manufacturer::Nvidia, "NVIDIA H100 80GB HBM3"),
            "h100-80gb-hbm3"
        );
        assert_eq!(id(Manufacturer::Ascend, "Ascend910B2"), "910b2");
        assert_eq!(
            id(Manufacturer::Nvidia, "Tesla V100-SXM2-32GB"),
            "tesla-v100-sxm2-32gb"
        );
        assert_eq!(
            group_id(Manufacturer::Amd, "AMD Radeon RX 7800 XT", 16368, true),
            "radeon-rx-7800-xt-16g"
        );
        let long = "X".repeat(100);
        assert_eq!(id(Manufacturer::Nvidia, &long).len(), 63);
        assert_eq!(id(Manufacturer::Nvidia, "NVIDIA"), "nvidia");
    }

    fn detected(name: &str, memory: u64, index: u32) -> Detected {
        Detected {
            name: name.into(),
            memory_mib: memory,
            group: DevicesGroup::new(Manufacturer::Nvidia, "", "", 0),
            accelerator: Accelerator {
                id: format!("GPU-{index}"),
                index,
                ..Default::default()
            },
        }
    }

    #[test]
    fn groups_by_name_and_memory() {
        let groups = group(
            Manufacturer::Nvidia,
            vec![
                detected("NVIDIA A100-SXM4-80GB", 81920, 1),
                detected("NVIDIA A10G", 23028, 2),
                detected("NVIDIA A100-SXM4-80GB", 81920, 0),
                detected("NVIDIA A10G", 24576, 3),
            ],
            false,
        );
        let shape: Vec<_> = groups
            .iter()
            .map(|g| {
                (
                    g.id.as_str(),
                    g.accelerators.iter().map(|a| a.index).collect::<Vec<_>>(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                ("a100-sxm4-80gb", vec![0, 1]),
                ("a10g", vec![2]),
                ("a10g-24g", vec![3])
            ]
        );
    }
}
