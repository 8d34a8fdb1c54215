//! ResourceFlavors and derived InstanceTypes from the managed nodes (worker.md §2.1–§2.2).
//!
//! A flavor is hardware identity: one per distinct (CPU key, accelerator key, os, arch,
//! per-node count, topology profile) among the managed, available nodes. Its labels say what it
//! is and how much of it there is; its node selector picks exactly the nodes it counts. A
//! cordoned node, or one that lost a card, stops counting in the flavor it was in (and may
//! count in another), which is how quotas follow healthy inventory.

use std::collections::BTreeMap;

use gpustack_api::{
    Manufacturer,
    instance_type::{InstanceType, InstanceTypeSpec, UnitResources},
    kueue::{ResourceFlavor, ResourceFlavorSpec},
    labels::{
        ACCELERATABLE, ACCELERATABLE_PREFIX, ARCH, CPU_ONLY, DERIVED_FROM_NODE, GENERAL_PREFIX,
        MANAGED, NOTE_PREFIX, OS, QUEUE_ENTRANCE, RESOURCE_TYPE, TOPOLOGY_PROFILE,
    },
};
use k8s_openapi::api::core::v1::Toleration;
use kube::api::ObjectMeta;
use serde_json::json;

use super::{
    chain_settings::ChainSettings,
    node_facts::{AcceleratorFacts, GENERIC, NodeFacts},
    unit_presets::{ACCELERATED_FALLBACK, UnitPresets, unit_resources},
};
use crate::names::{DERIVED_PREFIX, local_queue_name};

/// A flavor the nodes call for, and which nodes make it up.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredFlavor {
    /// The flavor.
    pub flavor: ResourceFlavor,
    /// The nodes it selects.
    pub nodes: Vec<String>,
}

/// What one node brings to one flavor.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct FlavorKey {
    cpu_key: String,
    accelerator: Option<String>,
    os: String,
    arch: String,
    per_node: u64,
    profile: String,
}

impl FlavorKey {
    fn name(&self) -> String {
        let Self {
            cpu_key,
            os,
            arch,
            per_node,
            profile,
            ..
        } = self;
        match &self.accelerator {
            Some(a) => format!("{DERIVED_PREFIX}{cpu_key}--{a}-{os}-{arch}-{per_node}d-{profile}"),
            None => format!("{DERIVED_PREFIX}{cpu_key}-{os}-{arch}-{per_node}c-{profile}"),
        }
    }

    /// The feature label this flavor is about.
    fn own_label(&self) -> String {
        match &self.accelerator {
            Some(a) => format!("{ACCELERATABLE_PREFIX}{a}"),
            None => format!("{GENERAL_PREFIX}{}", self.cpu_key),
        }
    }
}

/// The pool an InstanceType stands for: the labels its flavors must carry.
pub fn pool_labels(spec: &InstanceTypeSpec, aware_cpu: bool) -> BTreeMap<String, String> {
    let acceleratable = spec.acceleratable.unwrap_or(false);
    let mut out = BTreeMap::from([
        (ACCELERATABLE.to_owned(), acceleratable.to_string()),
        (OS.to_owned(), spec.os.clone().unwrap_or_default()),
        (ARCH.to_owned(), spec.arch.clone().unwrap_or_default()),
    ]);
    if acceleratable && let Some(a) = &spec.accelerator_group {
        out.insert(format!("{ACCELERATABLE_PREFIX}{a}"), "true".into());
    }
    if aware_cpu && let Some(g) = spec.general_group.as_deref().filter(|g| *g != GENERIC) {
        out.insert(format!("{GENERAL_PREFIX}{g}"), "true".into());
    }
    out
}

fn notes(
    key: &FlavorKey,
    accel: Option<&AcceleratorFacts>,
    node: &NodeFacts,
    aware: bool,
) -> BTreeMap<String, String> {
    let mut n = BTreeMap::from([
        ("acceleratable".to_owned(), accel.is_some().to_string()),
        ("generalGroup".to_owned(), key.cpu_key.clone()),
        ("topologyProfile".to_owned(), key.profile.clone()),
    ]);
    if let Some(a) = accel {
        n.insert("acceleratorGroup".into(), a.key.clone());
        n.insert("manufacturer".into(), a.manufacturer.as_str().into());
        n.insert("product".into(), a.product.clone());
        n.insert("family".into(), a.family.clone());
        n.insert("memory".into(), a.memory.clone());
        n.insert("cores".into(), a.cores.clone());
    }
    if accel.is_none() || aware {
        let detail = json!({
            "key": key.cpu_key,
            "manufacturer": node.cpu_manufacturer.clone().unwrap_or_default(),
            "cores": key.per_node,
        });
        n.insert("cpuDetail".into(), detail.to_string());
    }
    n.into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (format!("{NOTE_PREFIX}{k}"), v))
        .collect()
}

fn flavor(
    key: &FlavorKey,
    nodes: &[&NodeFacts],
    accel: Option<&AcceleratorFacts>,
    settings: &ChainSettings,
) -> ResourceFlavor {
    let own = key.own_label();
    let count_label = format!("{own}.count");
    let capacity = key.per_node * nodes.len() as u64;
    let general = format!("{GENERAL_PREFIX}{}", key.cpu_key);
    let mut labels = BTreeMap::from([
        (own.clone(), "true".to_owned()),
        (OS.to_owned(), key.os.clone()),
        (ARCH.to_owned(), key.arch.clone()),
        (TOPOLOGY_PROFILE.to_owned(), key.profile.clone()),
        (ACCELERATABLE.to_owned(), accel.is_some().to_string()),
        (count_label.clone(), key.per_node.to_string()),
        (format!("{own}.capacity"), capacity.to_string()),
        (RESOURCE_TYPE.to_owned(), "nodes".to_owned()),
    ]);
    let mut node_labels = BTreeMap::from([
        (MANAGED.to_owned(), "true".to_owned()),
        (OS.to_owned(), key.os.clone()),
        (ARCH.to_owned(), key.arch.clone()),
        (general.clone(), "true".to_owned()),
        (count_label, key.per_node.to_string()),
        (TOPOLOGY_PROFILE.to_owned(), key.profile.clone()),
    ]);
    if accel.is_some() {
        labels.insert(general, "true".into());
        node_labels.insert(own, "true".into());
    } else if !settings.mixed_on_node {
        node_labels.insert(CPU_ONLY.to_owned(), "true".into());
    }
    ResourceFlavor {
        metadata: ObjectMeta {
            name: Some(key.name()),
            labels: Some(labels),
            annotations: Some(notes(key, accel, nodes[0], settings.aware_cpu_manufacturer)),
            ..ObjectMeta::default()
        },
        spec: ResourceFlavorSpec {
            node_labels,
            node_taints: Vec::new(),
            tolerations: vec![Toleration {
                operator: Some("Exists".into()),
                ..Toleration::default()
            }],
            topology_name: Some(format!("gpustack-{}", key.profile)),
        },
    }
}

/// Every flavor the managed, available nodes call for, by name.
pub fn desired_flavors(
    nodes: &[NodeFacts],
    settings: &ChainSettings,
) -> BTreeMap<String, DesiredFlavor> {
    let mut groups: BTreeMap<FlavorKey, (Vec<&NodeFacts>, Option<&AcceleratorFacts>)> =
        BTreeMap::new();
    for node in nodes.iter().filter(|n| n.managed && n.available()) {
        let base = |accelerator: Option<String>, per_node: u64| FlavorKey {
            cpu_key: node.cpu_key.clone(),
            accelerator,
            os: node.os.clone(),
            arch: node.arch.clone(),
            per_node,
            profile: node.topology_profile.clone(),
        };
        let accelerated: Vec<&AcceleratorFacts> =
            node.accelerators.iter().filter(|a| a.count > 0).collect();
        for a in &accelerated {
            let e = groups
                .entry(base(Some(a.key.clone()), a.count.into()))
                .or_default();
            e.0.push(node);
            e.1 = Some(a);
        }
        if node.cpus > 0 && (settings.mixed_on_node || accelerated.is_empty()) {
            groups
                .entry(base(None, node.cpus))
                .or_default()
                .0
                .push(node);
        }
    }
    groups
        .into_iter()
        .map(|(key, (members, accel))| {
            let flavor = flavor(&key, &members, accel, settings);
            let nodes = members.iter().map(|n| n.name.clone()).collect();
            (key.name(), DesiredFlavor { flavor, nodes })
        })
        .collect()
}

/// The InstanceType a flavor belongs to when derived from nodes.
pub fn derived_instance_type(
    flavor: &ResourceFlavor,
    settings: &ChainSettings,
    presets: &UnitPresets,
) -> Option<InstanceType> {
    let notes = flavor.metadata.annotations.as_ref()?;
    let note = |k: &str| notes.get(&format!("{NOTE_PREFIX}{k}")).cloned();
    let labels = flavor.metadata.labels.as_ref()?;
    let os = labels.get(OS)?.clone();
    let arch = labels.get(ARCH)?.clone();
    let accel = note("acceleratorGroup");
    let cpu_key = note("generalGroup").unwrap_or_else(|| GENERIC.to_owned());
    let group = if settings.aware_cpu_manufacturer {
        cpu_key.clone()
    } else {
        GENERIC.to_owned()
    };
    let name = match (&accel, settings.aware_cpu_manufacturer) {
        (Some(a), true) => format!("{DERIVED_PREFIX}{group}--{a}-{os}-{arch}"),
        (Some(a), false) => format!("{DERIVED_PREFIX}{a}-{os}-{arch}"),
        (None, _) => format!("{DERIVED_PREFIX}{group}-{os}-{arch}"),
    };
    let product = note("product").unwrap_or_default();
    let hardware = accel.as_ref().and(
        note("manufacturer")
            .and_then(|m| m.parse::<Manufacturer>().ok())
            .map(|m| (m, product.as_str())),
    );
    // An accelerated flavor whose manufacturer is unreadable still gets the accelerated size.
    let (cpu, ram) = match (hardware, &accel) {
        (None, Some(_)) => (
            ACCELERATED_FALLBACK.0.to_owned(),
            ACCELERATED_FALLBACK.1.to_owned(),
        ),
        (h, _) => unit_resources(presets, settings.unit_presets.as_ref(), h),
    };
    let spec = InstanceTypeSpec {
        display_name: Some(note("product").unwrap_or_else(|| "CPU-only".to_owned())),
        description: None,
        inactive: None,
        accelerator_group: accel.clone(),
        general_group: Some(group),
        acceleratable: Some(accel.is_some()),
        os: Some(os),
        arch: Some(arch),
        unit_resources: Some(UnitResources {
            cpu: Some(cpu),
            ram: Some(ram),
        }),
        local_storage: Some("100Gi".into()),
    };
    let mut it_labels = pool_labels(&spec, settings.aware_cpu_manufacturer);
    it_labels.insert(DERIVED_FROM_NODE.to_owned(), "true".into());
    it_labels.insert(QUEUE_ENTRANCE.to_owned(), local_queue_name(&name));
    Some(InstanceType {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(it_labels),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::node_facts::fixtures::gpu_node;

    #[test]
    fn identical_nodes_share_a_flavor_and_double_its_capacity() {
        let s = ChainSettings::default();
        let one = desired_flavors(&[gpu_node("a", 8)], &s);
        let two = desired_flavors(&[gpu_node("a", 8), gpu_node("b", 8)], &s);
        assert_eq!(one.len(), 2, "an accelerated and a CPU flavor (mixing on)");
        assert_eq!(two.len(), 2);
        let accel = two
            .values()
            .find(|f| f.flavor.metadata.name.as_ref().unwrap().contains("8d"))
            .unwrap();
        let labels = accel.flavor.metadata.labels.as_ref().unwrap();
        assert_eq!(
            labels["acceleratable.feature.gpustack.ai/nvidia-h100-80gb-hbm3.capacity"],
            "16"
        );
        assert_eq!(accel.nodes, ["a", "b"]);
    }

    #[test]
    fn a_lost_card_or_a_cordon_moves_the_node() {
        let s = ChainSettings::default();
        let mut cordoned = gpu_node("b", 8);
        cordoned.unavailable = Some("cordoned");
        let f = desired_flavors(&[gpu_node("a", 7), cordoned], &s);
        assert!(f.keys().any(|n| n.contains("-7d-")));
        assert!(!f.keys().any(|n| n.contains("-8d-")));
        let mut mixed_off = s.clone();
        mixed_off.mixed_on_node = false;
        assert_eq!(desired_flavors(&[gpu_node("a", 8)], &mixed_off).len(), 1);
    }

    #[test]
    fn derived_instance_types_are_named_by_pool() {
        let s = ChainSettings::default();
        let presets = UnitPresets::builtin().unwrap();
        let f = desired_flavors(&[gpu_node("a", 8)], &s);
        let names: std::collections::BTreeSet<String> = f
            .values()
            .filter_map(|d| {
                derived_instance_type(&d.flavor, &s, &presets)?
                    .metadata
                    .name
            })
            .collect();
        assert_eq!(
            names,
            [
                "gpustack--generic-linux-amd64",
                "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
            ]
            .map(str::to_owned)
            .into()
        );
        let aware = ChainSettings {
            aware_cpu_manufacturer: true,
            ..s
        };
        let names: std::collections::BTreeSet<String> =
            desired_flavors(&[gpu_node("a", 8)], &aware)
                .values()
                .filter_map(|d| {
                    derived_instance_type(&d.flavor, &aware, &presets)?
                        .metadata
                        .name
                })
                .collect();
        assert_eq!(
            names,
            [
                "gpustack--amd-epyc-7r32--nvidia-h100-80gb-hbm3-linux-amd64",
                "gpustack--amd-epyc-7r32-linux-amd64"
            ]
            .map(str::to_owned)
            .into()
        );
    }

    #[test]
    fn derived_instance_types_take_their_unit_resources_from_the_tables() {
        let presets = UnitPresets::builtin().unwrap();
        let s = ChainSettings::default();
        let units = |s: &ChainSettings| -> BTreeMap<String, (String, String)> {
            desired_flavors(&[gpu_node("a", 8)], s)
                .values()
                .filter_map(|d| derived_instance_type(&d.flavor, s, &presets))
                .map(|it| {
                    let u = it.spec.unit_resources.unwrap();
                    (
                        it.spec.display_name.unwrap(),
                        (u.cpu.unwrap(), u.ram.unwrap()),
                    )
                })
                .collect()
        };
        let got = units(&s);
        assert_eq!(got["NVIDIA-H100-80GB-HBM3"], ("16".into(), "192Gi".into()));
        assert_eq!(got["CPU-only"], ("1".into(), "2Gi".into()));
        let admin = ChainSettings {
            unit_presets: Some(
                UnitPresets::parse("nvidia:\n  H100: {cpu: \"10\", ram: 100Gi}\n").unwrap(),
            ),
            ..s
        };
        assert_eq!(
            units(&admin)["NVIDIA-H100-80GB-HBM3"],
            ("10".into(), "100Gi".into())
        );
    }
}
