//! The `accelerators` of an `instances/<name>/metrics` sample (instances.md §5, worker.md §4.1):
//! what the node's device manager last sampled (`/monitor/snapshot`), kept to the cards the
//! Pod's `main` container was granted (its allocation annotation). Temperature, power and health
//! are the whole card's; memory is the grant's share of the card where the card is sliced; a
//! used figure of a carved card only where the snapshot attributes it to this Pod. What was not
//! measured is absent, never 0. Pure: the snapshot is read in [`super::instance_device_snapshots`].

use gpustack_api::{
    devices::{AllocationMode, DevicesStatusGroup, UNITS_PER_ACCELERATOR},
    monitor::{AcceleratorMetrics, MetricsGroup},
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// A snapshot older than this many monitor periods is not used (the device manager stopped
/// sampling, or is stuck).
pub const STALE_AFTER_PERIODS: u64 = 3;
/// The period assumed when a snapshot states none (the device manager's default).
pub const DEFAULT_PERIOD_SECONDS: u64 = 15;

/// `/monitor/snapshot`, as far as the metrics read it.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// When it was sampled, RFC 3339 with the node's offset.
    pub timestamp: String,
    /// The device manager's monitor period.
    #[serde(default)]
    pub period_seconds: u64,
    /// One sample per manufacturer.
    #[serde(default)]
    pub groups: Vec<MetricsGroup>,
    /// The per-slice view, where a card is carved.
    #[serde(default)]
    pub slices: Option<Slices>,
}

/// The per-slice view's rows this reads.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Slices {
    /// What each container's slice of a card uses.
    #[serde(default)]
    pub usages: Vec<SliceUsage>,
    /// Each partition a container holds.
    #[serde(default)]
    pub partitions: Vec<SlicePartition>,
}

/// What one container's slice of one card uses.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SliceUsage {
    /// The Pod.
    #[serde(rename = "podUID")]
    pub pod_uid: String,
    /// Its container.
    pub container: String,
    /// The card.
    #[serde(rename = "deviceID")]
    pub device_id: String,
    /// Memory its processes use on the card.
    #[serde(rename = "memoryUsedMiB")]
    pub memory_used_mib: Option<u64>,
    /// Its processes' share of the card's compute.
    #[serde(rename = "coresUtilizationPercent")]
    pub cores_utilization_percent: Option<u32>,
}

/// One partition a container holds.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SlicePartition {
    /// The Pod.
    #[serde(rename = "podUID")]
    pub pod_uid: String,
    /// Its container.
    pub container: String,
    /// The card it is cut from.
    #[serde(rename = "deviceID")]
    pub device_id: String,
    /// The partition's own id (`MIG-…`).
    pub id: String,
    /// Its memory.
    #[serde(rename = "memoryTotalMiB")]
    pub memory_total_mib: Option<u64>,
    /// Its memory in use.
    #[serde(rename = "memoryUsedMiB")]
    pub memory_used_mib: Option<u64>,
}

/// Whether `snapshot` was sampled recently enough at `now` to be used.
pub fn fresh(snapshot: &Snapshot, now: jiff::Timestamp) -> bool {
    let Ok(at) = snapshot.timestamp.parse::<gpustack_api::time::Timestamp>() else {
        return false;
    };
    let period = match snapshot.period_seconds {
        0 => DEFAULT_PERIOD_SECONDS,
        p => p,
    };
    let age = now.as_second() - at.instant.as_second();
    age <= (STALE_AFTER_PERIODS * period) as i64
}

fn mode_name(mode: AllocationMode) -> &'static str {
    match mode {
        AllocationMode::None => "None",
        AllocationMode::Exclusive => "Exclusive",
        AllocationMode::Shared => "Shared",
        AllocationMode::Sliced => "Sliced",
        AllocationMode::Partitioned => "Partitioned",
        AllocationMode::Visibility => "Visibility",
    }
}

fn put<T: serde::Serialize>(entry: &mut Map<String, Value>, key: &str, v: Option<T>) {
    if let Some(v) = v {
        entry.insert(key.into(), json!(v));
    }
}

/// Memory in use as a percentage of `total`; not clamped (a slice may use past its share).
fn percent(used: Option<u64>, total: Option<u64>) -> Option<u64> {
    match (used, total) {
        (Some(u), Some(t)) if t > 0 => Some(u * 100 / t),
        _ => None,
    }
}

/// The sample's `accelerators`: one entry per card (a partition: per partition) granted to
/// container `container` of Pod `pod_uid`, from the snapshots of the node's device managers.
/// A card no snapshot reports is left out.
pub fn entries(
    granted: &[DevicesStatusGroup],
    snapshots: &[&Snapshot],
    pod_uid: &str,
    container: &str,
) -> Vec<Value> {
    let mut out = Vec::new();
    for group in granted {
        let cards: Vec<(&MetricsGroup, &AcceleratorMetrics, Option<&Slices>)> = snapshots
            .iter()
            .flat_map(|s| {
                s.groups
                    .iter()
                    .filter(|g| g.manufacturer == group.manufacturer)
                    .flat_map(move |g| {
                        g.accelerators
                            .iter()
                            .map(move |a| (g, a, s.slices.as_ref()))
                    })
            })
            .collect();
        for grant in &group.accelerators {
            let Some((_, card, slices)) = cards.iter().find(|(_, a, _)| a.id == grant.id) else {
                continue;
            };
            let ours = |u: &&SliceUsage| {
                u.pod_uid == pod_uid && u.container == container && u.device_id == card.id
            };
            let usage = slices.and_then(|s| s.usages.iter().find(ours));
            let attributed_used = usage.and_then(|u| u.memory_used_mib);
            let attributed_cores = usage.and_then(|u| u.cores_utilization_percent);
            let (id, total, used, memory_pct, cores) = match grant.mode {
                // The whole card is the container's: the card's own figures.
                AllocationMode::Exclusive => (
                    card.id.clone(),
                    card.memory,
                    card.memory_usage,
                    card.memory_utilization.map(u64::from),
                    card.cores_utilization,
                ),
                // Its share of the card's memory; what it uses only where attributed to it.
                AllocationMode::Sliced => {
                    let share = card
                        .memory
                        .filter(|_| grant.allocated > 0)
                        .map(|m| (m * grant.allocated).div_ceil(UNITS_PER_ACCELERATOR));
                    let pct = percent(attributed_used, share);
                    (
                        card.id.clone(),
                        share,
                        attributed_used,
                        pct,
                        attributed_cores,
                    )
                }
                // The partition's own figures, under its own id.
                AllocationMode::Partitioned => {
                    let held = &grant.allocated_physical_id;
                    let part = slices.and_then(|s| {
                        s.partitions.iter().find(|p| {
                            p.pod_uid == pod_uid
                                && p.container == container
                                && p.device_id == card.id
                                && (held.is_empty() || p.id == *held)
                        })
                    });
                    let id = if held.is_empty() {
                        card.id.clone()
                    } else {
                        held.clone()
                    };
                    let total = part.and_then(|p| p.memory_total_mib);
                    let used = part.and_then(|p| p.memory_used_mib);
                    (id, total, used, percent(used, total), None)
                }
                // Shared cards and a sidecar's view: the card is not the container's alone.
                _ => (
                    card.id.clone(),
                    card.memory,
                    attributed_used,
                    percent(attributed_used, card.memory),
                    attributed_cores,
                ),
            };
            let mut entry = Map::new();
            entry.insert("id".into(), json!(id));
            entry.insert("mode".into(), json!(mode_name(grant.mode)));
            put(&mut entry, "memoryTotalMiB", total);
            put(&mut entry, "memoryUsedMiB", used);
            put(&mut entry, "memoryUtilizationPercent", memory_pct);
            put(&mut entry, "coresUtilizationPercent", cores);
            put(&mut entry, "temperatureCelsius", card.temperature);
            put(&mut entry, "powerUsageWatts", card.power_usage);
            entry.insert("unhealthy".into(), json!(card.unhealthy));
            out.push(Value::Object(entry));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(at: &str) -> Snapshot {
        serde_json::from_value(json!({
            "timestamp": at, "periodSeconds": 15,
            "groups": [{"manufacturer": "nvidia", "timestamp": at, "accelerators": [
                {"id": "GPU-0", "memory": 81920, "memoryUsage": 4000, "memoryUtilization": 4,
                 "coresUtilization": 30, "temperature": 41, "powerUsage": 120, "unhealthy": false},
                {"id": "GPU-1", "memory": 81920, "unhealthy": true},
                {"id": "GPU-2", "memory": 81920, "memoryUsage": 9}]}],
            "slices": {"schemaVersion": 1, "truncated": false, "devices": [],
                "usages": [{"manufacturer": "nvidia", "podUID": "u-1", "container": "main",
                    "deviceID": "GPU-1", "memoryUsedMiB": 20000}],
                "partitions": []},
        }))
        .unwrap()
    }

    fn grant(cards: Value) -> Vec<DevicesStatusGroup> {
        serde_json::from_value(
            json!([{"id": "h100", "manufacturer": "nvidia", "accelerators": cards}]),
        )
        .unwrap()
    }

    #[test]
    fn a_slice_has_its_share_and_what_is_attributed_to_it_past_its_share() {
        let at = "2026-01-01T08:00:00+08:00";
        let got = entries(
            &grant(json!([{"id": "GPU-1", "index": 1, "mode": 3, "allocated": 320000}])),
            &[&snapshot(at)],
            "u-1",
            "main",
        );
        assert_eq!(
            got,
            [
                json!({"id": "GPU-1", "mode": "Sliced", "memoryTotalMiB": 16384,
                "memoryUsedMiB": 20000, "memoryUtilizationPercent": 122, "unhealthy": true})
            ]
        );
        // Another Pod's slice of the same card: nothing of this one's is attributed to it.
        let other = entries(
            &grant(json!([{"id": "GPU-1", "mode": 3, "allocated": 160000}])),
            &[&snapshot(at)],
            "u-2",
            "main",
        );
        assert_eq!(
            other,
            [json!({"id": "GPU-1", "mode": "Sliced", "memoryTotalMiB": 8192, "unhealthy": true})]
        );
    }

    #[test]
    fn a_whole_card_has_the_cards_figures_and_ungranted_or_unsampled_cards_are_left_out() {
        let got = entries(
            &grant(json!([{"id": "GPU-0", "mode": 1, "allocated": 1600000},
                {"id": "GPU-9", "mode": 1, "allocated": 1600000}])),
            &[&snapshot("2026-01-01T00:00:00Z")],
            "u-1",
            "main",
        );
        assert_eq!(
            got,
            [
                json!({"id": "GPU-0", "mode": "Exclusive", "memoryTotalMiB": 81920,
                "memoryUsedMiB": 4000, "memoryUtilizationPercent": 4,
                "coresUtilizationPercent": 30, "temperatureCelsius": 41, "powerUsageWatts": 120,
                "unhealthy": false})
            ]
        );
        assert!(entries(&[], &[&snapshot("2026-01-01T00:00:00Z")], "u-1", "main").is_empty());
    }

    #[test]
    fn a_partition_is_its_own_entry() {
        let mut s = snapshot("2026-01-01T00:00:00Z");
        s.slices.as_mut().unwrap().partitions.push(SlicePartition {
            pod_uid: "u-1".into(),
            container: "main".into(),
            device_id: "GPU-2".into(),
            id: "MIG-a".into(),
            memory_total_mib: Some(19968),
            memory_used_mib: None,
        });
        let got = entries(
            &grant(json!([{"id": "GPU-2", "mode": 4, "allocatedPhysicalID": "MIG-a"}])),
            &[&s],
            "u-1",
            "main",
        );
        assert_eq!(
            got,
            [
                json!({"id": "MIG-a", "mode": "Partitioned", "memoryTotalMiB": 19968,
                "unhealthy": false})
            ]
        );
    }

    #[test]
    fn an_old_snapshot_is_not_used() {
        let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        assert!(fresh(&snapshot("2026-01-01T08:00:30+08:00"), now));
        assert!(!fresh(&snapshot("2026-01-01T00:00:00Z"), now));
        let unreadable = Snapshot {
            timestamp: "not a time".into(),
            ..Snapshot::default()
        };
        assert!(!fresh(&unreadable, now));
    }
}
