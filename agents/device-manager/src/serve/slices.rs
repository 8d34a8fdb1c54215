//! The per-slice view of `/monitor/snapshot` (devices.md §6, `slices`, schema version 1).
//!
//! On a card carved into logical slices, the processes the vendor library lists on the card are
//! attributed to the containers holding its slices: a process's host PID names its Pod through
//! `/proc/<pid>/cgroup` (the kubelet's `pod<uid>` cgroup), and the ledger says which container
//! of that Pod holds a slice of the card. One row that cannot be attributed (its cgroup
//! unreadable, or two containers of its Pod holding the card) blanks the card's usages, with the
//! reason, rather than charging a guess. A process of no Pod counts as `NonInstance`.
//!
//! On a card cut into MIG partitions, each partition a container holds (its MIG UUID in the
//! ledger's charge) is one `partitions[]` entry: its memory as the library reports it for the
//! MIG device, and its share of the card's compute as the ledger charges it.
//!
//! Pure: [`attribute`] and [`partitions`] take what was read; [`pod_of_cgroup`] parses one
//! cgroup file. The reads are the monitor pass's.

use std::collections::BTreeMap;

use gpustack_api::{
    Manufacturer,
    devices::{AcceleratorAllocation, AllocationMode, UNITS_PER_ACCELERATOR},
};
use serde::Serialize;

pub use crate::card_usage::{CardRows, PartitionHold, PartitionMemory, Reason};
use crate::ledger::PodCharges;

#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Slices {
    pub schema_version: u32,
    pub truncated: bool,
    pub usages: Vec<SliceUsage>,
    pub devices: Vec<SliceDevice>,
    pub partitions: Vec<SlicePartition>,
}

/// One partition a container holds, and what it uses.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SlicePartition {
    pub manufacturer: Manufacturer,
    #[serde(rename = "podUID")]
    pub pod_uid: String,
    pub container: String,
    /// The card it is cut from.
    #[serde(rename = "deviceID")]
    pub device_id: String,
    /// The partition's own id (`MIG-…`).
    pub id: String,
    pub profile: String,
    #[serde(rename = "memoryTotalMiB", skip_serializing_if = "Option::is_none")]
    pub memory_total_mib: Option<u64>,
    #[serde(rename = "memoryUsedMiB", skip_serializing_if = "Option::is_none")]
    pub memory_used_mib: Option<u64>,
    /// Its share of the card's compute, in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores_percent: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_reason: Option<Reason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores_reason: Option<Reason>,
}

/// What one container's slice of one card uses.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SliceUsage {
    pub manufacturer: Manufacturer,
    #[serde(rename = "podUID")]
    pub pod_uid: String,
    pub container: String,
    #[serde(rename = "deviceID")]
    pub device_id: String,
    #[serde(rename = "memoryUsedMiB", skip_serializing_if = "Option::is_none")]
    pub memory_used_mib: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores_utilization_percent: Option<u32>,
}

/// How one carved card's rows were read and attributed.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SliceDevice {
    pub manufacturer: Manufacturer,
    #[serde(rename = "deviceID")]
    pub device_id: String,
    /// Why no memory figure is given for the card's slices (absent when one is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_reason: Option<Reason>,
    /// Why no compute figure is given (per-process utilization is not read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores_reason: Option<Reason>,
    pub rows: Rows,
    pub reads_truncated: bool,
}

#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "PascalCase")]
pub struct Rows {
    pub returned: u32,
    pub attributed: u32,
    pub non_instance: u32,
    pub unreadable: u32,
    pub ambiguous: u32,
}

/// Whose a host PID is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    Pod(String),
    NotAPod,
    Unreadable,
}

/// Each live container's charges of manufacturer `m`: (pod UID, container, charge). Finished
/// Pods hold nothing.
fn live_charges(
    pods: &[PodCharges],
    m: Manufacturer,
) -> impl Iterator<Item = (&str, &str, &AcceleratorAllocation)> {
    pods.iter()
        .filter(|p| !p.finished)
        .flat_map(|pod| pod.allocations.iter().map(move |(c, a)| (pod, c, a)))
        .flat_map(move |(pod, container, a)| {
            a.devices
                .groups
                .iter()
                .filter(move |g| g.manufacturer == m)
                .flat_map(|g| &g.accelerators)
                .map(move |x| (pod.uid.as_str(), container.as_str(), x))
        })
}

/// The containers holding a slice of `accelerator` (pod UID, container), from the ledger's
/// Pods.
pub fn holders(pods: &[PodCharges], m: Manufacturer, accelerator: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = live_charges(pods, m)
        .filter(|(_, _, x)| x.id == accelerator && x.mode == AllocationMode::Sliced)
        .map(|(uid, container, _)| (uid.to_owned(), container.to_owned()))
        .collect();
    out.dedup();
    out
}

/// The partitions of manufacturer `m` that live containers hold; a charge without a partition
/// id (not made yet) is left out.
pub fn partition_holds(pods: &[PodCharges], m: Manufacturer) -> Vec<PartitionHold> {
    live_charges(pods, m)
        .filter(|(_, _, x)| {
            x.mode == AllocationMode::Partitioned && !x.allocated_physical_id.is_empty()
        })
        .map(|(uid, container, x)| PartitionHold {
            pod_uid: uid.to_owned(),
            container: container.to_owned(),
            device_id: x.id.clone(),
            id: x.allocated_physical_id.clone(),
            profile: x.allocated_physical_profile.clone(),
            units: x.allocated,
        })
        .collect()
}

/// The `partitions[]` entries of held partitions, each with its memory as read (or why it
/// could not be).
pub fn partitions(
    m: Manufacturer,
    read: &[(PartitionHold, Result<PartitionMemory, Reason>)],
) -> Vec<SlicePartition> {
    read.iter()
        .map(|(h, memory)| {
            let share = (h.units > 0 && h.units <= UNITS_PER_ACCELERATOR).then(|| {
                ((h.units * 100 + UNITS_PER_ACCELERATOR / 2) / UNITS_PER_ACCELERATOR) as u32
            });
            SlicePartition {
                manufacturer: m,
                pod_uid: h.pod_uid.clone(),
                container: h.container.clone(),
                device_id: h.device_id.clone(),
                id: h.id.clone(),
                profile: h.profile.clone(),
                memory_total_mib: memory.as_ref().ok().map(|m| m.total_mib),
                memory_used_mib: memory.as_ref().ok().map(|m| m.used_mib),
                cores_percent: share,
                memory_reason: memory.as_ref().err().copied(),
                cores_reason: share.is_none().then_some(Reason::InvalidData),
            }
        })
        .collect()
}

/// The view of `cards` (each with its holders from [`holders`]).
pub fn attribute(
    m: Manufacturer,
    cards: &[(CardRows, Vec<(String, String)>)],
    owner_of: impl Fn(u32) -> Owner,
) -> Slices {
    let mut usages = Vec::new();
    let mut devices = Vec::new();
    for (card, held) in cards {
        let mut device = SliceDevice {
            manufacturer: m,
            device_id: card.accelerator.clone(),
            memory_reason: None,
            cores_reason: Some(Reason::Unsupported),
            rows: Rows::default(),
            reads_truncated: false,
        };
        let rows = match &card.rows {
            Ok(rows) => rows,
            Err(reason) => {
                device.memory_reason = Some(*reason);
                devices.push(device);
                continue;
            }
        };
        let mut used: BTreeMap<(String, String), Option<u64>> =
            held.iter().map(|h| (h.clone(), Some(0))).collect();
        for row in rows {
            device.rows.returned += 1;
            let uid = match owner_of(row.pid) {
                Owner::Unreadable => {
                    device.rows.unreadable += 1;
                    continue;
                }
                Owner::NotAPod => {
                    device.rows.non_instance += 1;
                    continue;
                }
                Owner::Pod(uid) => uid,
            };
            let mut of_pod = held.iter().filter(|(u, _)| *u == uid);
            match (of_pod.next(), of_pod.next()) {
                (None, _) => device.rows.non_instance += 1,
                (Some(_), Some(_)) => device.rows.ambiguous += 1,
                (Some(h), None) => {
                    device.rows.attributed += 1;
                    let slot = used.entry(h.clone()).or_insert(Some(0));
                    *slot = match (*slot, row.memory_used_mib) {
                        (Some(a), Some(b)) => Some(a + b),
                        _ => None,
                    };
                }
            }
        }
        if device.rows.unreadable > 0 {
            device.memory_reason = Some(Reason::Permission);
        } else if device.rows.ambiguous > 0 {
            device.memory_reason = Some(Reason::InvalidData);
        } else {
            usages.extend(
                used.into_iter()
                    .map(|((pod_uid, container), mib)| SliceUsage {
                        manufacturer: m,
                        pod_uid,
                        container,
                        device_id: card.accelerator.clone(),
                        memory_used_mib: mib,
                        cores_utilization_percent: None,
                    }),
            );
        }
        devices.push(device);
    }
    Slices {
        schema_version: 1,
        truncated: false,
        usages,
        devices,
        partitions: Vec::new(),
    }
}

/// The Pod UID in a `/proc/<pid>/cgroup` file: the kubelet's `pod<uid>` cgroup, as the
/// cgroupfs driver names it (`/kubepods/burstable/pod<uid>/<container>`) or the systemd one
/// (`kubepods-burstable-pod<uid with _>.slice`). `None`: not a Pod's process.
pub fn pod_of_cgroup(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .flat_map(|path| path.split('/'))
        .find_map(|segment| {
            let name = segment.strip_suffix(".slice").unwrap_or(segment);
            let uid = name.rsplit_once("-pod").map_or_else(
                || name.strip_prefix("pod"),
                |(prefix, uid)| prefix.starts_with("kubepods").then_some(uid),
            )?;
            let uid = uid.replace('_', "-");
            (uid.len() == 36 && uid.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
                .then_some(uid)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card_usage::ProcessRow;

    const UID_A: &str = "0a1b2c3d-0000-4000-8000-00000000000a";
    const UID_B: &str = "0a1b2c3d-0000-4000-8000-00000000000b";

    #[test]
    fn cgroup_paths_of_both_drivers() {
        let systemd = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-abc.scope\n",
            UID_A.replace('-', "_")
        );
        assert_eq!(pod_of_cgroup(&systemd).as_deref(), Some(UID_A));
        let cgroupfs = format!("12:memory:/kubepods/besteffort/pod{UID_B}/abc\n0::/\n");
        assert_eq!(pod_of_cgroup(&cgroupfs).as_deref(), Some(UID_B));
        let guaranteed = format!(
            "0::/kubepods.slice/kubepods-pod{}.slice/x",
            UID_A.replace('-', "_")
        );
        assert_eq!(pod_of_cgroup(&guaranteed).as_deref(), Some(UID_A));
        assert_eq!(pod_of_cgroup("0::/system.slice/sshd.service\n"), None);
        assert_eq!(pod_of_cgroup("0::/user.slice/podman-pod1.slice\n"), None);
    }

    fn rows(list: &[(u32, Option<u64>)]) -> Result<Vec<ProcessRow>, Reason> {
        Ok(list
            .iter()
            .map(|&(pid, memory_used_mib)| ProcessRow {
                pid,
                memory_used_mib,
            })
            .collect())
    }

    fn held(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(u, c)| ((*u).to_owned(), (*c).to_owned()))
            .collect()
    }

    fn owners(pid: u32) -> Owner {
        match pid {
            1 | 2 => Owner::Pod(UID_A.into()),
            3 => Owner::Pod(UID_B.into()),
            4 => Owner::NotAPod,
            _ => Owner::Unreadable,
        }
    }

    #[test]
    fn processes_are_summed_per_holding_container() {
        let cards = vec![(
            CardRows {
                accelerator: "GPU-0".into(),
                rows: rows(&[(1, Some(100)), (2, Some(50)), (4, Some(7))]),
            },
            held(&[(UID_A, "main"), (UID_B, "side")]),
        )];
        let got = attribute(Manufacturer::Nvidia, &cards, owners);
        let figures: Vec<(&str, &str, Option<u64>)> = got
            .usages
            .iter()
            .map(|u| (u.pod_uid.as_str(), u.container.as_str(), u.memory_used_mib))
            .collect();
        // A holder with no process uses nothing, measured.
        assert_eq!(
            figures,
            [(UID_A, "main", Some(150)), (UID_B, "side", Some(0))]
        );
        let d = &got.devices[0];
        assert_eq!(
            d.rows,
            Rows {
                returned: 3,
                attributed: 2,
                non_instance: 1,
                ..Rows::default()
            }
        );
        assert_eq!(
            (d.memory_reason, d.cores_reason),
            (None, Some(Reason::Unsupported))
        );
        let json = serde_json::to_value(&got).unwrap();
        assert_eq!(json["schemaVersion"], 1);
        assert_eq!(json["usages"][0]["podUID"], UID_A);
        assert_eq!(json["usages"][0]["memoryUsedMiB"], 150);
        assert!(json["usages"][0].get("coresUtilizationPercent").is_none());
        assert_eq!(json["devices"][0]["rows"]["NonInstance"], 1);
        assert_eq!(json["devices"][0]["coresReason"], "unsupported");
    }

    #[test]
    fn one_unattributable_row_blanks_the_card() {
        let unreadable = (
            CardRows {
                accelerator: "GPU-0".into(),
                rows: rows(&[(1, Some(100)), (9, Some(5))]),
            },
            held(&[(UID_A, "main")]),
        );
        let ambiguous = (
            CardRows {
                accelerator: "GPU-1".into(),
                rows: rows(&[(1, Some(100))]),
            },
            held(&[(UID_A, "main"), (UID_A, "side")]),
        );
        let failed = (
            CardRows {
                accelerator: "GPU-2".into(),
                rows: Err(Reason::Unsupported),
            },
            held(&[(UID_B, "main")]),
        );
        let got = attribute(
            Manufacturer::Nvidia,
            &[unreadable, ambiguous, failed],
            owners,
        );
        assert!(got.usages.is_empty(), "{:?}", got.usages);
        let reasons: Vec<Option<Reason>> = got.devices.iter().map(|d| d.memory_reason).collect();
        assert_eq!(
            reasons,
            [
                Some(Reason::Permission),
                Some(Reason::InvalidData),
                Some(Reason::Unsupported)
            ]
        );
        assert_eq!(got.devices[1].rows.ambiguous, 1);
    }

    #[test]
    fn partitions_carry_their_memory_and_their_charged_share() {
        let hold = |id: &str, units: u64| PartitionHold {
            pod_uid: UID_A.into(),
            container: "main".into(),
            device_id: "GPU-0".into(),
            id: id.into(),
            profile: "1g.10gb".into(),
            units,
        };
        let read = [
            (
                hold("MIG-a", UNITS_PER_ACCELERATOR / 7),
                Ok(PartitionMemory {
                    total_mib: 9_856,
                    used_mib: 1_024,
                }),
            ),
            (
                hold("MIG-b", UNITS_PER_ACCELERATOR),
                Err(Reason::Unsupported),
            ),
            (hold("MIG-c", 0), Err(Reason::Unsupported)),
        ];
        let got = partitions(Manufacturer::Nvidia, &read);
        let figures: Vec<_> = got
            .iter()
            .map(|p| {
                (
                    p.id.as_str(),
                    p.memory_total_mib,
                    p.memory_used_mib,
                    p.cores_percent,
                    p.memory_reason,
                    p.cores_reason,
                )
            })
            .collect();
        assert_eq!(
            figures,
            [
                ("MIG-a", Some(9_856), Some(1_024), Some(14), None, None),
                (
                    "MIG-b",
                    None,
                    None,
                    Some(100),
                    Some(Reason::Unsupported),
                    None
                ),
                (
                    "MIG-c",
                    None,
                    None,
                    None,
                    Some(Reason::Unsupported),
                    Some(Reason::InvalidData)
                ),
            ]
        );
        let json = serde_json::to_value(&got[0]).unwrap();
        assert_eq!(json["memoryTotalMiB"], 9_856);
        assert_eq!(json["coresPercent"], 14);
        assert_eq!(json["podUID"], UID_A);
        assert!(json.get("memoryReason").is_none());
    }
}
