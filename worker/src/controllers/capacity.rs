//! Extended resources the worker adds to `Node.status.capacity` (worker.md §1.2): per
//! manufacturer, the sliced and partitioned figures Kueue's transformations and the webhooks
//! read. A manufacturer's keys appear only while the device plugin offers its bare `.sliced`
//! or `.partitioned` pool on the node.

use std::collections::BTreeMap;

use gpustack_api::{
    Manufacturer,
    devices::{Devices, UNITS_PER_ACCELERATOR},
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{ledger, manufacturers::Resolve, node_facts::NodeFacts};

/// Whether the capacity pool `key` is offered (a positive quantity).
fn offered(capacity: &BTreeMap<String, Quantity>, key: &str) -> bool {
    capacity
        .get(key)
        .and_then(|q| q.0.parse::<f64>().ok())
        .is_some_and(|v| v > 0.0)
}

/// T-Head spells profiles without the dot (`4g48gb`); the capacity key uses `4g.48gb`.
pub fn profile_spelling(m: Manufacturer, name: &str) -> String {
    if m == Manufacturer::Thead
        && !name.contains('.')
        && let Some(i) = name.find('g')
    {
        return format!("{}.{}", &name[..=i], &name[i + 1..]);
    }
    name.to_owned()
}

fn mib(memory: &str) -> u64 {
    if let Some(g) = memory.strip_suffix("Gi") {
        g.parse::<u64>().unwrap_or(0) * 1024
    } else {
        memory
            .strip_suffix("Mi")
            .and_then(|m| m.parse().ok())
            .unwrap_or(0)
    }
}

/// The keys the worker wants in the node's capacity. `resolve` gives each manufacturer's
/// resource base and partition kind as this deployment configures them.
pub fn desired(
    node: &NodeFacts,
    capacity: &BTreeMap<String, Quantity>,
    devices: Option<&Devices>,
    resolve: &Resolve,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(devices) = devices else { return out };
    let mut by_manufacturer: BTreeMap<Manufacturer, Vec<_>> = BTreeMap::new();
    for g in &devices.spec.groups {
        by_manufacturer.entry(g.manufacturer).or_default().push(g);
    }
    for (m, groups) in by_manufacturer {
        let r = resolve(m);
        let base = &r.resource_name;
        let healthy = || {
            groups
                .iter()
                .flat_map(|g| g.accelerators.iter().map(move |c| (g, c)))
                .filter(|(_, c)| !c.status.unhealthy)
        };
        if offered(capacity, &format!("{base}.sliced")) {
            let sliceable: Vec<_> = healthy()
                .filter(|(_, c)| c.status.logical_sliced.is_some())
                .collect();
            let n = sliceable.len() as u64;
            let overcommit = sliceable.iter().all(|(_, c)| {
                c.status
                    .logical_sliced
                    .as_ref()
                    .is_some_and(|l| l.cores_percentage_overcommit)
            });
            let cores = if overcommit && n > 0 {
                sliceable
                    .iter()
                    .map(|(_, c)| {
                        c.status
                            .logical_sliced
                            .as_ref()
                            .map_or(0, |l| l.count.max(0) as u64)
                    })
                    .sum::<u64>()
                    * 100
            } else {
                n * 100
            };
            let vram: u64 = sliceable
                .iter()
                .map(|(g, _)| {
                    let label = node
                        .accelerators
                        .iter()
                        .find(|a| a.key == format!("{}-{}", m.as_str(), g.id))
                        .map(|a| mib(&a.memory))
                        .unwrap_or(0);
                    if label > 0 {
                        label
                    } else {
                        g.memory / 1024 * 1024
                    }
                })
                .sum();
            out.insert(
                format!("{base}.sliced.units"),
                (n * UNITS_PER_ACCELERATOR).to_string(),
            );
            out.insert(format!("{base}.sliced.cores-percentage"), cores.to_string());
            out.insert(
                format!("{base}.sliced.memory-percentage"),
                (n * 100).to_string(),
            );
            out.insert(format!("{base}.sliced.memory-mib"), vram.to_string());
        }
        if offered(capacity, &format!("{base}.partitioned")) {
            let kind = r
                .partition_kind
                .clone()
                .unwrap_or_else(|| "partition".into());
            let partitioned: Vec<_> = healthy()
                .filter(|(_, c)| c.status.physical_sliced.is_some())
                .collect();
            out.insert(
                format!("{base}.partitioned.units"),
                (partitioned.len() as u64 * UNITS_PER_ACCELERATOR).to_string(),
            );
            let mut profiles: BTreeMap<String, i64> = BTreeMap::new();
            let cards = ledger::cards(devices);
            for c in cards
                .iter()
                .filter(|c| c.group.manufacturer == m && c.partitioned() && !c.unhealthy())
            {
                for (name, (allocated, remaining)) in &c.profiles {
                    *profiles.entry(profile_spelling(m, name)).or_default() +=
                        i64::from(*allocated) + i64::from(*remaining);
                }
            }
            for (name, count) in profiles {
                out.insert(
                    format!("{base}.partitioned.{kind}-{name}"),
                    count.to_string(),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thead_profiles_gain_their_dot() {
        assert_eq!(profile_spelling(Manufacturer::Thead, "4g48gb"), "4g.48gb");
        assert_eq!(profile_spelling(Manufacturer::Nvidia, "1g.10gb"), "1g.10gb");
    }
}
