//! What the controllers need to know about one Node, read from its labels (the device
//! manager's accelerator labels, NFD's CPU labels, the worker's own), its capacity and its
//! conditions. Pure: a Node in, facts out.

use std::collections::BTreeMap;

use gpustack_api::{
    Manufacturer,
    labels::{ACCELERATABLE_PREFIX, ARCH, MANAGED, OS},
    topology_source::TopologySource,
};
use k8s_openapi::api::core::v1::Node;

use super::topology;
use crate::names::topology_profile;

/// NFD's CPU labels and the annotation an NFD rule writes with the CPU's marketing name.
const NFD_VENDOR: &str = "feature.node.kubernetes.io/cpu-model.vendor_id";
const NFD_FAMILY: &str = "feature.node.kubernetes.io/cpu-model.family";
/// The annotation holding the CPU's marketing name.
pub const CPU_NAME_ANNOTATION: &str = "feature.gpustack.ai/cpu-name";
/// The CPU key when the CPU is not known.
pub const GENERIC: &str = "generic";

/// One accelerator product on a node, as the device manager labels it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceleratorFacts {
    /// `<manufacturer>-<group id>`.
    pub key: String,
    /// The manufacturer.
    pub manufacturer: Manufacturer,
    /// Healthy cards.
    pub count: u32,
    /// The product name.
    pub product: String,
    /// Per-card VRAM as the label gives it (`80Gi`).
    pub memory: String,
    /// Cores per card, as the label gives it.
    pub cores: String,
    /// The product family.
    pub family: String,
}

/// What the chain reads of one Node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFacts {
    /// The Node's name.
    pub name: String,
    /// The Node's labels.
    pub labels: BTreeMap<String, String>,
    /// Onboarded: labelled `gpustack.ai/managed`.
    pub managed: bool,
    /// Cordoned (`spec.unschedulable`) or not Ready: contributes no quota.
    pub unavailable: Option<&'static str>,
    /// The operating system (`linux`).
    pub os: String,
    /// The architecture (`amd64`).
    pub arch: String,
    /// The CPU key (`amd-epyc-7r32`) or `generic`.
    pub cpu_key: String,
    /// Lowercased CPU vendor, when known.
    pub cpu_manufacturer: Option<String>,
    /// `status.capacity.cpu`, whole cores.
    pub cpus: u64,
    /// The node's topology hierarchy, outermost first, ending with the hostname, and its
    /// profile (the hash of the levels).
    pub topology_levels: Vec<String>,
    /// The hash of the levels.
    pub topology_profile: String,
    /// The accelerator products on it.
    pub accelerators: Vec<AcceleratorFacts>,
}

impl NodeFacts {
    /// Whether the node counts for quota (neither cordoned nor not Ready).
    pub fn available(&self) -> bool {
        self.unavailable.is_none()
    }
}

/// A label value: at most 63 of `[a-z0-9.-]`, other characters as `-`, alphanumeric ends.
fn key_part(text: &str) -> String {
    let mapped: String = text
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut squeezed = String::with_capacity(mapped.len());
    for c in mapped.chars() {
        if !(c == '-' && squeezed.ends_with('-')) {
            squeezed.push(c);
        }
    }
    squeezed.trim_matches('-').to_owned()
}

/// The CPU key: the vendor, then the CPU's name (or NFD's family id), at most 63 characters.
pub fn cpu_key(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> (String, Option<String>) {
    let Some(vendor) = labels
        .get(NFD_VENDOR)
        .map(|v| key_part(v))
        .filter(|v| !v.is_empty())
    else {
        return (GENERIC.to_owned(), None);
    };
    let model = annotations
        .get(CPU_NAME_ANNOTATION)
        .or_else(|| labels.get(NFD_FAMILY))
        .map(|m| key_part(m))
        .unwrap_or_default();
    let mut key = if model.is_empty() {
        vendor.clone()
    } else {
        // The vendor is not repeated when the name already starts with it (`AMD EPYC ...`).
        let model = model
            .strip_prefix(&format!("{vendor}-"))
            .unwrap_or(&model)
            .to_owned();
        format!("{vendor}-{model}")
    };
    key.truncate(63);
    (key.trim_end_matches(['-', '.']).to_owned(), Some(vendor))
}

/// The accelerator products the device manager labelled on the node.
pub fn accelerators(labels: &BTreeMap<String, String>) -> Vec<AcceleratorFacts> {
    let get = |key: &str, suffix: &str| {
        labels
            .get(&format!("{ACCELERATABLE_PREFIX}{key}.{suffix}"))
            .cloned()
            .unwrap_or_default()
    };
    labels
        .iter()
        .filter_map(|(k, v)| {
            let key = k.strip_prefix(ACCELERATABLE_PREFIX)?;
            if v != "true" || key.contains('.') {
                return None;
            }
            let (manufacturer, id) = key.split_once('-')?;
            let manufacturer: Manufacturer = manufacturer.parse().ok()?;
            (!id.is_empty()).then_some(())?;
            Some(AcceleratorFacts {
                key: key.to_owned(),
                manufacturer,
                count: get(key, "count").parse().unwrap_or(0),
                product: get(key, "product"),
                memory: get(key, "memory"),
                cores: get(key, "cores"),
                family: get(key, "family"),
            })
        })
        .collect()
}

/// Whole cores of a quantity (`16`, `15500m`).
fn whole_cores(q: &str) -> u64 {
    match q.strip_suffix('m') {
        Some(milli) => milli.parse::<u64>().map(|m| m / 1000).unwrap_or(0),
        None => q.parse::<f64>().map(|c| c.floor() as u64).unwrap_or(0),
    }
}

/// The hierarchy-free profile every node has when no `TopologySource` names a hierarchy.
pub fn hostname_profile() -> String {
    topology_profile(&[gpustack_api::labels::HOSTNAME])
}

/// The node's facts; its topology comes from the `TopologySource`s that match it.
pub fn facts(node: &Node, sources: &[TopologySource]) -> NodeFacts {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    let (cpu_key, cpu_manufacturer) = cpu_key(&labels, &annotations);
    let levels = topology::node_levels(&labels, sources);
    let status = node.status.as_ref();
    let cpus = status
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("cpu"))
        .map(|q| whole_cores(&q.0))
        .unwrap_or(0);
    let not_ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status != "True");
    let cordoned = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    NodeFacts {
        name: node.metadata.name.clone().unwrap_or_default(),
        managed: labels.get(MANAGED).is_some_and(|v| v == "true"),
        unavailable: if cordoned {
            Some("cordoned")
        } else if not_ready {
            Some("not ready")
        } else {
            None
        },
        os: labels.get(OS).cloned().unwrap_or_else(|| "linux".into()),
        arch: labels.get(ARCH).cloned().unwrap_or_else(|| "amd64".into()),
        cpu_key,
        cpu_manufacturer,
        cpus,
        topology_profile: topology::profile(&levels),
        topology_levels: levels,
        accelerators: accelerators(&labels),
        labels,
    }
}

/// Nodes for the controllers' unit tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    pub(crate) fn gpu_node(name: &str, cards: u32) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            labels: BTreeMap::new(),
            managed: true,
            unavailable: None,
            os: "linux".into(),
            arch: "amd64".into(),
            cpu_key: "amd-epyc-7r32".into(),
            cpu_manufacturer: Some("amd".into()),
            cpus: 96,
            topology_levels: vec![gpustack_api::labels::HOSTNAME.to_owned()],
            topology_profile: hostname_profile(),
            accelerators: vec![AcceleratorFacts {
                key: "nvidia-h100-80gb-hbm3".into(),
                manufacturer: Manufacturer::Nvidia,
                count: cards,
                product: "NVIDIA-H100-80GB-HBM3".into(),
                memory: "80Gi".into(),
                cores: "16896".into(),
                family: "Hopper".into(),
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn cpu_keys_from_nfd() {
        let labels = map(&[(NFD_VENDOR, "AMD"), (NFD_FAMILY, "25")]);
        let named = map(&[(CPU_NAME_ANNOTATION, "AMD EPYC 7R32")]);
        assert_eq!(
            cpu_key(&labels, &named),
            ("amd-epyc-7r32".into(), Some("amd".into()))
        );
        assert_eq!(cpu_key(&labels, &map(&[])).0, "amd-25");
        assert_eq!(cpu_key(&map(&[]), &named), ("generic".into(), None));
    }

    #[test]
    fn accelerators_from_device_manager_labels() {
        let p = ACCELERATABLE_PREFIX;
        let labels = map(&[
            (&format!("{p}nvidia"), "true"),
            (&format!("{p}nvidia.driver-version"), "550"),
            (&format!("{p}nvidia-h100-80gb-hbm3"), "true"),
            (&format!("{p}nvidia-h100-80gb-hbm3.count"), "8"),
            (&format!("{p}nvidia-h100-80gb-hbm3.memory"), "80Gi"),
            (&format!("{p}nvidia-h100-80gb-hbm3.product"), "NVIDIA-H100"),
        ]);
        let a = accelerators(&labels);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].key, "nvidia-h100-80gb-hbm3");
        assert_eq!((a[0].count, a[0].memory.as_str()), (8, "80Gi"));
    }

    #[test]
    fn cores_are_whole() {
        assert_eq!(whole_cores("16"), 16);
        assert_eq!(whole_cores("15500m"), 15);
    }
}
