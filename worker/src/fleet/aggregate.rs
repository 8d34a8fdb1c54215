//! The fleet aggregates, as pure functions of the clusters' InstanceTypes (as the gateway
//! mirrors them) and the clusters' phases.
//!
//! - `instancetypes`: members grouped by spec, ignoring `inactive`, `displayName` and
//!   `description`; named `<general>-<accelerator>-<os>-<arch>-<cpu>c-<ram>g-<disk>g`. Only
//!   `Active` members count: `remaining` and `capacity` are summed, `onceMaxRequest` is the
//!   largest member's (one request lands in one cluster), partition profiles are summed, and
//!   `tiers` list, per whole-card request size, the clusters that can take it at once. A member
//!   whose cluster is not `Ready` is still counted from the mirror but marked stale.
//! - `instancetypeflavors`: one per hardware (the accelerator or CPU group with the card's
//!   facts), listing the clusters that offer it.

use std::collections::{BTreeMap, BTreeSet};

use gpustack_api::instance_type::{CapacityView, InstanceType, InstanceTypeSpec};
use serde_json::{Value, json};

use super::resources::{FLEET_GROUP, FLEET_VERSION};

/// One cluster's InstanceType.
#[derive(Clone, Debug)]
pub struct Member {
    /// The cluster it belongs to.
    pub cluster: String,
    /// Its name in its cluster.
    pub name: String,
    /// The InstanceType.
    pub it: InstanceType,
}

/// The phase a cluster must be in for its members to be current.
const READY: &str = "Ready";
const ACTIVE: &str = "Active";

/// The spec members are grouped by.
fn grouping_spec(spec: &InstanceTypeSpec) -> InstanceTypeSpec {
    InstanceTypeSpec {
        display_name: None,
        description: None,
        inactive: None,
        ..spec.clone()
    }
}

/// A quantity in the unit `unit` bytes (or cores for `unit == 1`), as a short decimal: `16Gi`
/// in GiB is `16`, `512Mi` is `0.5`, `500m` cores is `0.5`.
fn in_units(q: &str, unit: f64) -> String {
    match gpustack_kube_rest::quantity::value(q) {
        Some(n) => format!("{}", (n / unit * 100.0).round() / 100.0),
        None => "x".into(),
    }
}

/// The aggregate's name for a grouping spec.
pub fn aggregate_name(spec: &InstanceTypeSpec) -> String {
    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    let units = spec.unit_resources.clone().unwrap_or_default();
    let raw = format!(
        "{}-{}-{}-{}-{}c-{}g-{}g",
        spec.general_group.as_deref().unwrap_or("generic"),
        spec.accelerator_group.as_deref().unwrap_or("cpu"),
        spec.os.as_deref().unwrap_or("any"),
        spec.arch.as_deref().unwrap_or("any"),
        units
            .cpu
            .as_deref()
            .map_or("0".into(), |c| in_units(c, 1.0)),
        units
            .ram
            .as_deref()
            .map_or("0".into(), |r| in_units(r, GIB)),
        spec.local_storage
            .as_deref()
            .map_or("0".into(), |d| in_units(d, GIB)),
    );
    raw.to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Adds `v` into `sum`: remaining and capacity summed, onceMaxRequest the largest.
fn add_view(sum: &mut Option<CapacityView>, v: Option<&CapacityView>) {
    let Some(v) = v else { return };
    let s = sum.get_or_insert_with(CapacityView::default);
    s.once_max_request = s.once_max_request.max(v.once_max_request);
    s.remaining += v.remaining;
    s.capacity += v.capacity;
}

fn is_active(m: &Member) -> bool {
    m.it.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == ACTIVE)
}

fn stale(m: &Member, phases: &BTreeMap<String, String>) -> bool {
    phases.get(&m.cluster).map(String::as_str) != Some(READY)
}

fn earliest(members: &[&Member]) -> Option<String> {
    members
        .iter()
        .filter_map(|m| m.it.metadata.creation_timestamp.as_ref())
        .min_by_key(|t| t.0)
        .map(|t| t.0.to_string())
}

/// `EX/SH/SL/PT` remaining, `-` for a view no member has.
fn summary(views: [&Option<CapacityView>; 4]) -> String {
    views
        .iter()
        .map(|v| v.as_ref().map_or("-".into(), |v| v.remaining.to_string()))
        .collect::<Vec<_>>()
        .join("/")
}

/// The `instancetypes` aggregates by name.
pub fn instance_types(
    members: &[Member],
    phases: &BTreeMap<String, String>,
) -> BTreeMap<String, Value> {
    let mut groups: BTreeMap<String, (InstanceTypeSpec, Vec<&Member>)> = BTreeMap::new();
    for m in members {
        let spec = grouping_spec(&m.it.spec);
        let key = serde_json::to_string(&spec).unwrap_or_default();
        groups
            .entry(key)
            .or_insert_with(|| (spec, Vec::new()))
            .1
            .push(m);
    }
    let mut out = BTreeMap::new();
    for (spec, mut group) in groups.into_values() {
        group.sort_by(|a, b| (&a.cluster, &a.name).cmp(&(&b.cluster, &b.name)));
        let name = aggregate_name(&spec);
        let counted: Vec<&Member> = group.iter().copied().filter(|m| is_active(m)).collect();
        let (mut ex, mut sh, mut sl, mut pt, mut cpu) = (None, None, None, None, None);
        let mut remaining_profiles: BTreeMap<String, i64> = BTreeMap::new();
        let mut allocated_profiles: BTreeMap<String, i64> = BTreeMap::new();
        let mut tiers: BTreeMap<i64, BTreeSet<&str>> = BTreeMap::new();
        for m in &counted {
            let Some(s) = m.it.status.as_ref() else {
                continue;
            };
            add_view(&mut ex, s.accelerator.as_ref());
            add_view(&mut sh, s.accelerator_shared.as_ref());
            add_view(&mut sl, s.accelerator_sliced.as_ref());
            add_view(&mut pt, s.accelerator_partitioned.as_ref());
            add_view(&mut cpu, s.cpu.as_ref());
            for (p, n) in &s.remaining_profiles {
                *remaining_profiles.entry(p.clone()).or_default() += n;
            }
            for (p, n) in &s.allocated_profiles {
                *allocated_profiles.entry(p.clone()).or_default() += n;
            }
            if let Some(once) = s.accelerator.as_ref().map(|v| v.once_max_request)
                && once > 0
            {
                tiers.entry(once).or_default().insert(m.cluster.as_str());
            }
        }
        let clusters: BTreeSet<&str> = counted.iter().map(|m| m.cluster.as_str()).collect();
        let stale_clusters: BTreeSet<&str> = group
            .iter()
            .filter(|m| stale(m, phases))
            .map(|m| m.cluster.as_str())
            .collect();
        let members_json: Vec<Value> = group
            .iter()
            .map(|m| {
                json!({
                    "cluster": m.cluster,
                    "name": m.name,
                    "phase": m.it.status.as_ref().and_then(|s| s.phase.clone()),
                    "stale": stale(m, phases),
                })
            })
            .collect();
        let detail = group
            .iter()
            .find_map(|m| m.it.status.as_ref().and_then(|s| s.detail.clone()));
        let mut status = json!({
            "phase": if counted.is_empty() { "Inactive" } else { ACTIVE },
            "summary": summary([&ex, &sh, &sl, &pt]),
            "clusters": clusters,
            "clusterList": clusters.iter().copied().collect::<Vec<_>>().join(","),
            "members": members_json,
            "tiers": tiers.iter().rev().map(|(once, cs)| json!({"onceMaxRequest": once, "clusters": cs})).collect::<Vec<_>>(),
        });
        for (key, view) in [
            ("accelerator", &ex),
            ("acceleratorShared", &sh),
            ("acceleratorSliced", &sl),
            ("acceleratorPartitioned", &pt),
            ("cpu", &cpu),
        ] {
            if let Some(v) = view {
                status[key] = json!(v);
            }
        }
        if !remaining_profiles.is_empty() {
            status["remainingProfiles"] = json!(remaining_profiles);
        }
        if !allocated_profiles.is_empty() {
            status["allocatedProfiles"] = json!(allocated_profiles);
        }
        if let Some(d) = detail {
            status["detail"] = json!(d);
        }
        if !stale_clusters.is_empty() {
            status["staleClusters"] = json!(stale_clusters);
        }
        let mut metadata = json!({"name": name});
        if let Some(t) = earliest(&group) {
            metadata["creationTimestamp"] = json!(t);
        }
        let obj = json!({
            "apiVersion": format!("{FLEET_GROUP}/{FLEET_VERSION}"),
            "kind": "InstanceType",
            "metadata": metadata,
            "spec": spec,
            "status": status,
        });
        out.insert(name, obj);
    }
    out
}

/// The `instancetypeflavors` by name: one per hardware across the fleet.
pub fn flavors(members: &[Member]) -> BTreeMap<String, Value> {
    let mut groups: BTreeMap<String, (Value, Vec<&Member>)> = BTreeMap::new();
    for m in members {
        let detail =
            m.it.status
                .as_ref()
                .and_then(|s| s.detail.clone())
                .unwrap_or_default();
        let mut spec = serde_json::Map::new();
        let mut put = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                spec.insert(k.to_owned(), json!(v));
            }
        };
        put("acceleratorGroup", m.it.spec.accelerator_group.clone());
        put("generalGroup", m.it.spec.general_group.clone());
        put("manufacturer", detail.manufacturer);
        put("product", detail.product);
        put("family", detail.family);
        put("memory", detail.memory);
        let spec = Value::Object(spec);
        let key = spec.to_string();
        groups
            .entry(key)
            .or_insert_with(|| (spec, Vec::new()))
            .1
            .push(m);
    }
    let mut out: BTreeMap<String, Value> = BTreeMap::new();
    for (spec, group) in groups.into_values() {
        let base = format!(
            "gpustack--{}",
            spec["acceleratorGroup"]
                .as_str()
                .or(spec["generalGroup"].as_str())
                .unwrap_or("generic")
        );
        // Two hardware kinds under one group name (rare: differing card facts) stay apart.
        let mut name = base.clone();
        let mut n = 2;
        while out.contains_key(&name) {
            name = format!("{base}-{n}");
            n += 1;
        }
        let clusters: BTreeSet<&str> = group.iter().map(|m| m.cluster.as_str()).collect();
        let capacity: i64 = group
            .iter()
            .filter_map(|m| m.it.status.as_ref())
            .filter_map(|s| s.accelerator.as_ref().or(s.cpu.as_ref()))
            .map(|v| v.capacity)
            .sum();
        let mut metadata = json!({"name": name});
        if let Some(t) = earliest(&group) {
            metadata["creationTimestamp"] = json!(t);
        }
        out.insert(
            name,
            json!({
                "apiVersion": format!("{FLEET_GROUP}/{FLEET_VERSION}"),
                "kind": "InstanceTypeFlavor",
                "metadata": metadata,
                "spec": spec,
                "status": {
                    "clusters": clusters,
                    "clusterList": clusters.iter().copied().collect::<Vec<_>>().join(","),
                    "capacity": capacity,
                },
            }),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpustack_api::instance_type::{InstanceTypeDetail, InstanceTypeStatus, UnitResources};

    fn view(once: i64, remaining: i64, capacity: i64) -> Option<CapacityView> {
        Some(CapacityView {
            once_max_request: once,
            remaining,
            capacity,
        })
    }

    fn member(cluster: &str, accel: &str, phase: &str, ex: Option<CapacityView>) -> Member {
        let mut it = InstanceType::new(
            "gpustack--x",
            InstanceTypeSpec {
                display_name: Some(format!("shown in {cluster}")),
                accelerator_group: Some(accel.into()),
                general_group: Some("generic".into()),
                acceleratable: Some(true),
                os: Some("linux".into()),
                arch: Some("amd64".into()),
                unit_resources: Some(UnitResources {
                    cpu: Some("4".into()),
                    ram: Some("16Gi".into()),
                }),
                local_storage: Some("100Gi".into()),
                ..Default::default()
            },
        );
        it.status = Some(InstanceTypeStatus {
            accelerator: ex,
            phase: Some(phase.into()),
            remaining_profiles: BTreeMap::from([("1g.10gb".into(), 7)]),
            detail: Some(InstanceTypeDetail {
                manufacturer: Some("nvidia".into()),
                product: Some("H100".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        Member {
            cluster: cluster.into(),
            name: "gpustack--x".into(),
            it,
        }
    }

    fn ready(cs: &[&str]) -> BTreeMap<String, String> {
        cs.iter()
            .map(|c| ((*c).to_owned(), READY.to_owned()))
            .collect()
    }

    #[test]
    fn identical_pools_of_two_clusters_make_one_aggregate() {
        let members = [
            member("east", "nvidia-h100", ACTIVE, view(8, 12, 16)),
            member("west", "nvidia-h100", ACTIVE, view(4, 4, 8)),
            member("north", "nvidia-a100", ACTIVE, view(2, 2, 2)),
        ];
        let all = instance_types(&members, &ready(&["east", "west", "north"]));
        assert_eq!(all.len(), 2);
        let h100 = &all["generic-nvidia-h100-linux-amd64-4c-16g-100g"];
        assert_eq!(h100["status"]["accelerator"]["remaining"], 16);
        assert_eq!(h100["status"]["accelerator"]["capacity"], 24);
        assert_eq!(h100["status"]["accelerator"]["onceMaxRequest"], 8);
        assert_eq!(h100["status"]["clusters"], json!(["east", "west"]));
        assert_eq!(h100["status"]["remainingProfiles"]["1g.10gb"], 14);
        assert_eq!(
            h100["status"]["tiers"],
            json!([{"onceMaxRequest": 8, "clusters": ["east"]}, {"onceMaxRequest": 4, "clusters": ["west"]}])
        );
        assert_eq!(h100["status"]["summary"], "16/-/-/-");
        assert!(h100["spec"].get("displayName").is_none());
    }

    #[test]
    fn only_active_members_count_and_lost_clusters_are_stale() {
        let members = [
            member("east", "nvidia-h100", ACTIVE, view(8, 12, 16)),
            member("west", "nvidia-h100", "Inactive", view(4, 4, 8)),
        ];
        let all = instance_types(&members, &ready(&["west"]));
        let agg = all.values().next().unwrap();
        assert_eq!(agg["status"]["accelerator"]["remaining"], 12);
        assert_eq!(agg["status"]["clusters"], json!(["east"]));
        assert_eq!(agg["status"]["staleClusters"], json!(["east"]));
        assert_eq!(agg["status"]["members"][0]["stale"], true);
        assert_eq!(agg["status"]["members"][1]["phase"], "Inactive");
    }

    #[test]
    fn names_are_dns_safe_and_read_in_whole_units() {
        let mut spec = member("a", "Nvidia_H100", ACTIVE, None).it.spec;
        spec.unit_resources = Some(UnitResources {
            cpu: Some("500m".into()),
            ram: Some("512Mi".into()),
        });
        assert_eq!(
            aggregate_name(&spec),
            "generic-nvidia-h100-linux-amd64-0.5c-0.5g-100g"
        );
    }

    #[test]
    fn flavors_are_one_per_hardware_listing_their_clusters() {
        let members = [
            member("east", "nvidia-h100", ACTIVE, view(8, 12, 16)),
            member("west", "nvidia-h100", ACTIVE, view(4, 4, 8)),
        ];
        let f = flavors(&members);
        assert_eq!(f.len(), 1);
        let h100 = &f["gpustack--nvidia-h100"];
        assert_eq!(h100["status"]["clusters"], json!(["east", "west"]));
        assert_eq!(h100["status"]["capacity"], 24);
        assert_eq!(h100["spec"]["product"], "H100");
    }
}
