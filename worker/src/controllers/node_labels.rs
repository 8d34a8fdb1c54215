//! The labels the worker keeps on a Node (worker.md §0, §1.1, §1.3): onboarding, the CPU's
//! feature labels, `cpu-only`, the fit labels and the topology profile. The worker applies
//! them with its own field manager, so a label it stops wanting is removed and nothing another
//! writer set is touched.

use std::collections::BTreeMap;

use gpustack_api::{
    devices::{AllocationMode, Devices, UNITS_PER_ACCELERATOR},
    labels::{
        CPU_ONLY, FIT_SHARED_PREFIX, FIT_SLICED_PREFIX, GENERAL_PREFIX, MANAGED, TOPOLOGY_PROFILE,
    },
};

use super::{chain_settings::ChainSettings, ledger, node_facts::NodeFacts};

/// Units a card must have free to host one more share.
const SHARE: u64 = UNITS_PER_ACCELERATOR / 10;

/// Per accelerator group of the node: the most free units on one sliceable card that still
/// has a slot, and how many cards have a free share.
pub fn fit(devices: &Devices) -> BTreeMap<String, (u64, u64)> {
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for c in ledger::cards(devices) {
        let entry = out.entry(c.key()).or_default();
        if c.unhealthy() || c.partitioned() {
            continue;
        }
        if c.free_slot() && matches!(c.mode, AllocationMode::None | AllocationMode::Sliced) {
            entry.0 = entry.0.max(c.remaining);
        }
        if matches!(c.mode, AllocationMode::None | AllocationMode::Shared) && c.remaining >= SHARE {
            entry.1 += 1;
        }
    }
    out
}

/// Whether `key` is one of the node's feature labels (§1.1): where NFD runs they travel in the
/// worker's `NodeFeature` rather than on the Node.
pub fn feature_label(key: &str) -> bool {
    key == MANAGED || key == CPU_ONLY || key.starts_with(GENERAL_PREFIX)
}

/// The labels the worker wants on the node. `managed_by_others` is the value of
/// `gpustack.ai/managed` when someone else set it: an admin's choice wins.
pub fn desired(
    node: &NodeFacts,
    devices: Option<&Devices>,
    managed_by_others: Option<&str>,
    settings: &ChainSettings,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let managed = match managed_by_others {
        Some(v) => v == "true",
        None if settings.node_management_manual => false,
        None => {
            out.insert(MANAGED.to_owned(), "true".to_owned());
            true
        }
    };
    if !managed {
        return out;
    }
    if let Some(m) = &node.cpu_manufacturer {
        out.insert(format!("{GENERAL_PREFIX}{m}"), "true".into());
    }
    out.insert(format!("{GENERAL_PREFIX}{}", node.cpu_key), "true".into());
    out.insert(
        format!("{GENERAL_PREFIX}{}.count", node.cpu_key),
        node.cpus.to_string(),
    );
    if !settings.mixed_on_node && node.accelerators.iter().all(|a| a.count == 0) {
        out.insert(CPU_ONLY.to_owned(), "true".into());
    }
    // The profile follows the TopologySources: the worker's to write.
    out.insert(TOPOLOGY_PROFILE.to_owned(), node.topology_profile.clone());
    if let Some(d) = devices {
        for (key, (units, shared)) in fit(d) {
            if node.accelerators.iter().any(|a| a.key == key) {
                out.insert(format!("{FIT_SLICED_PREFIX}{key}"), units.to_string());
                out.insert(format!("{FIT_SHARED_PREFIX}{key}"), shared.to_string());
            }
        }
    }
    out
}
