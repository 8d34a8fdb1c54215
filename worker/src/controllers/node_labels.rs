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

use super::{chain_settings::ChainSettings, node_facts::NodeFacts};

/// Units a card must have free to host one more share.
const SHARE: u64 = UNITS_PER_ACCELERATOR / 10;

/// Per accelerator group of the node: the most free units on one sliceable card that still
/// has a slot, and how many cards have a free share.
pub fn fit(devices: &Devices) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for group in &devices.spec.groups {
        let key = format!("{}-{}", group.manufacturer.as_str(), group.id);
        let ledger = devices.status.as_ref().and_then(|s| {
            s.groups
                .iter()
                .find(|g| g.id == group.id && g.manufacturer == group.manufacturer)
        });
        let (mut max_units, mut shared) = (0u64, 0u64);
        for card in group.accelerators.iter().filter(|c| !c.status.unhealthy) {
            let alloc = ledger.and_then(|l| l.accelerators.iter().find(|a| a.id == card.id));
            let (mode, remaining, slices) = alloc
                .map_or((AllocationMode::None, UNITS_PER_ACCELERATOR, 0), |a| {
                    (a.mode, a.remaining, a.allocated_slices.unwrap_or(0))
                });
            if card.status.physical_sliced.is_some() {
                continue;
            }
            if let Some(l) = &card.status.logical_sliced
                && matches!(mode, AllocationMode::None | AllocationMode::Sliced)
                && (slices as i32) < l.count
            {
                max_units = max_units.max(remaining);
            }
            if matches!(mode, AllocationMode::None | AllocationMode::Shared) && remaining >= SHARE {
                shared += 1;
            }
        }
        out.insert(key, (max_units, shared));
    }
    out
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
    if !node.labels.contains_key(TOPOLOGY_PROFILE)
        || node.labels.get(TOPOLOGY_PROFILE) == Some(&node.topology_profile)
    {
        out.insert(TOPOLOGY_PROFILE.to_owned(), node.topology_profile.clone());
    }
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
