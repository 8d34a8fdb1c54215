//! Where a partitioned request goes (devices.md §5 step 3), decided against the ledger: pure.
//!
//! Partition tokens are fungible: the plugin picks the card. The container names its profile as
//! a limit `<resource>.partitioned.<kind>-<profile>` (e.g. `nvidia.com/gpu.partitioned.mig-1g.10gb`);
//! the card is the fullest partition-mode card where that profile still has a free legal slot
//! (packing keeps whole cards free for large profiles), and the slot is its first free one.

use std::collections::BTreeMap;

use gpustack_api::{
    Manufacturer,
    devices::{
        AcceleratorAllocation, AllocationMode, DevicesGroup, DevicesStatus, DevicesStatusGroup,
        PhysicalSlicedProfile, Placement, UNITS_PER_ACCELERATOR,
    },
};

use super::decide::Refusal;
use crate::ledger::{ContainerAllocation, Ledger, free_slot};

/// The profile a container's limits name for `base` (`nvidia.com/gpu`) and partition `kind`.
pub fn asked_profile(
    base: &str,
    kind: &str,
    limits: &BTreeMap<String, String>,
) -> Result<String, Refusal> {
    let prefix = format!("{base}.partitioned.{kind}-");
    let named: Vec<&str> = limits
        .keys()
        .filter_map(|k| k.strip_prefix(&prefix))
        .collect();
    match named.as_slice() {
        [one] => Ok((*one).to_owned()),
        _ => Err(Refusal::PartitionProfile(prefix)),
    }
}

/// The partition chosen for a container.
#[derive(Clone, Debug, PartialEq)]
pub struct Pick {
    /// (group, accelerator) position in the spec.
    pub card: (usize, usize),
    pub profile: PhysicalSlicedProfile,
    pub slot: Placement,
    /// Units charged: the profile's share of the card's compute slices.
    pub units: u64,
}

/// The profile's share of a card, on the 1,600,000-unit basis: compute slices over the card's
/// largest profile's (memory slices where compute slices are not reported).
fn units(profile: &PhysicalSlicedProfile, all: &[PhysicalSlicedProfile]) -> u64 {
    let share = |p: &PhysicalSlicedProfile| {
        if p.compute_slices > 0 {
            p.compute_slices
        } else {
            p.memory_slices
        }
    };
    let whole = all.iter().map(share).max().unwrap_or(0);
    if whole == 0 {
        return UNITS_PER_ACCELERATOR;
    }
    (UNITS_PER_ACCELERATOR * u64::from(share(profile)) / u64::from(whole)).max(1)
}

/// Picks the card and slot for one `profile` partition of `manufacturer`.
pub fn pick(
    groups: &[DevicesGroup],
    manufacturer: Manufacturer,
    profile: &str,
    ledger: &Ledger,
) -> Result<Pick, Refusal> {
    let mut offered = false;
    let mut best: Option<(u32, Pick)> = None;
    for (gi, group) in groups.iter().enumerate() {
        if group.manufacturer != manufacturer {
            continue;
        }
        for (ai, card) in group.accelerators.iter().enumerate() {
            let Some(physical) = &card.status.physical_sliced else {
                continue;
            };
            let Some(p) = physical.profiles.iter().find(|p| p.name == profile) else {
                continue;
            };
            offered = true;
            if card.status.unhealthy {
                continue;
            }
            let held = ledger
                .accelerator(manufacturer, &card.id)
                .map_or(AllocationMode::None, |e| e.mode);
            if !matches!(held, AllocationMode::None | AllocationMode::Partitioned) {
                continue;
            }
            let occupied = ledger
                .placements
                .get(&card.id)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let Some(slot) = free_slot(&p.placements, occupied) else {
                continue;
            };
            let used: u32 = occupied.iter().map(|o| o.length).sum();
            let candidate = Pick {
                card: (gi, ai),
                profile: p.clone(),
                slot,
                units: units(p, &physical.profiles),
            };
            // Fullest first; among equals the first in spec order.
            if best.as_ref().is_none_or(|(u, _)| used > *u) {
                best = Some((used, candidate));
            }
        }
    }
    match best {
        Some((_, pick)) => Ok(pick),
        None if offered => Err(Refusal::NoFreePartition(profile.to_owned())),
        None => Err(Refusal::UnknownPartitionProfile(profile.to_owned())),
    }
}

/// The annotation entry for `pick`, with the partition's own `id` (a MIG UUID).
pub fn allocation(
    groups: &[DevicesGroup],
    manufacturer: Manufacturer,
    pick: &Pick,
    id: &str,
    ledger: &Ledger,
    device_ids: &[String],
) -> ContainerAllocation {
    let (gi, ai) = pick.card;
    let group = &groups[gi];
    let card = &group.accelerators[ai];
    let free = ledger
        .accelerator(manufacturer, &card.id)
        .map_or(UNITS_PER_ACCELERATOR, |e| e.remaining);
    ContainerAllocation {
        devices: DevicesStatus {
            groups: vec![DevicesStatusGroup {
                id: group.id.clone(),
                manufacturer,
                accelerators: vec![AcceleratorAllocation {
                    id: card.id.clone(),
                    index: card.index,
                    mode: AllocationMode::Partitioned,
                    allocated: pick.units,
                    remaining: free.saturating_sub(pick.units),
                    allocated_physical_profile: pick.profile.name.clone(),
                    allocated_physical_placements: vec![pick.slot],
                    allocated_physical_id: id.to_owned(),
                    ..AcceleratorAllocation::default()
                }],
            }],
        },
        device_ids: device_ids.to_vec(),
    }
}

/// The ownership marker written in the container's work directory (`partition.json`): what
/// the reclaim loop destroys once the Pod is gone (no Release RPC exists).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Marker {
    pub manufacturer: Manufacturer,
    /// The parent card.
    pub accelerator: String,
    pub profile: String,
    pub gpu_instance: u32,
    pub compute_instance: u32,
    /// The partition's own id (`MIG-…`).
    pub id: String,
}

/// The marker's file name inside a container's work directory.
pub const MARKER_FILE: &str = "partition.json";

#[cfg(test)]
mod tests {
    use gpustack_api::devices::{Accelerator, PhysicalSliced};

    use super::*;

    fn profile(name: &str, compute: u32, memory: u32, starts: &[u32]) -> PhysicalSlicedProfile {
        PhysicalSlicedProfile {
            name: name.into(),
            memory_mib: 10_000 * u64::from(memory),
            compute_slices: compute,
            memory_slices: memory,
            count: starts.len() as i32,
            placements: starts
                .iter()
                .map(|&start| Placement {
                    start,
                    length: memory,
                })
                .collect(),
        }
    }

    fn groups() -> Vec<DevicesGroup> {
        let card = |id: &str, index: u32| {
            let mut a = Accelerator {
                id: id.into(),
                index,
                ..Accelerator::default()
            };
            a.status.physical_sliced = Some(PhysicalSliced {
                profiles: vec![
                    profile("1g.10gb", 1, 1, &[0, 1, 2, 3, 4, 5, 6]),
                    profile("3g.40gb", 3, 4, &[0, 4]),
                    profile("7g.80gb", 7, 8, &[0]),
                ],
                count: 7,
            });
            a
        };
        vec![DevicesGroup {
            accelerators: vec![card("GPU-a", 0), card("GPU-b", 1)],
            ..DevicesGroup::new(Manufacturer::Nvidia, "a100", "A100", 81920)
        }]
    }

    fn holding(slots: &[(&str, &str, u32, u32)]) -> Ledger {
        let charges = slots
            .iter()
            .map(|(card, name, start, length)| AcceleratorAllocation {
                id: (*card).into(),
                mode: AllocationMode::Partitioned,
                allocated: 1,
                allocated_physical_profile: (*name).into(),
                allocated_physical_placements: vec![Placement {
                    start: *start,
                    length: *length,
                }],
                ..AcceleratorAllocation::default()
            })
            .collect();
        crate::ledger::fixtures::holding(groups(), charges)
    }

    #[test]
    fn the_profile_is_read_from_the_limits() {
        let limits: BTreeMap<String, String> = [
            ("nvidia.com/gpu.partitioned".to_owned(), "1".to_owned()),
            (
                "nvidia.com/gpu.partitioned.mig-1g.10gb".to_owned(),
                "1".to_owned(),
            ),
        ]
        .into();
        assert_eq!(
            asked_profile("nvidia.com/gpu", "mig", &limits).unwrap(),
            "1g.10gb"
        );
        assert!(matches!(
            asked_profile("nvidia.com/gpu", "mig", &BTreeMap::new()),
            Err(Refusal::PartitionProfile(_))
        ));
    }

    #[test]
    fn packs_onto_the_fullest_card_at_the_first_free_slot() {
        let g = groups();
        let empty = pick(&g, Manufacturer::Nvidia, "1g.10gb", &Ledger::default()).unwrap();
        assert_eq!(empty.card, (0, 0));
        assert_eq!(
            empty.slot,
            Placement {
                start: 0,
                length: 1
            }
        );
        assert_eq!(empty.units, UNITS_PER_ACCELERATOR / 7);

        // GPU-b holds one partition: the next goes there, beside it.
        let l = holding(&[("GPU-b", "1g.10gb", 0, 1)]);
        let next = pick(&g, Manufacturer::Nvidia, "1g.10gb", &l).unwrap();
        assert_eq!(next.card, (0, 1));
        assert_eq!(
            next.slot,
            Placement {
                start: 1,
                length: 1
            }
        );
        // A 3g needs four aligned memory slices: the second half.
        let big = pick(&g, Manufacturer::Nvidia, "3g.40gb", &l).unwrap();
        assert_eq!((big.card, big.slot.start), ((0, 1), 4));
        // The placement-aware ledger: one 1g at slot 0 leaves six 1g, one 3g, no 7g.
        let left = &l
            .accelerator(Manufacturer::Nvidia, "GPU-b")
            .unwrap()
            .remaining_profiles;
        let counts: Vec<(&str, i32)> = left.iter().map(|p| (p.name.as_str(), p.count)).collect();
        assert_eq!(counts, [("1g.10gb", 6), ("3g.40gb", 1), ("7g.80gb", 0)]);
    }

    #[test]
    fn refusals() {
        let g = groups();
        let full = holding(&[("GPU-a", "7g.80gb", 0, 8), ("GPU-b", "7g.80gb", 0, 8)]);
        assert_eq!(
            pick(&g, Manufacturer::Nvidia, "1g.10gb", &full),
            Err(Refusal::NoFreePartition("1g.10gb".into()))
        );
        assert_eq!(
            pick(&g, Manufacturer::Nvidia, "2g.20gb", &Ledger::default()),
            Err(Refusal::UnknownPartitionProfile("2g.20gb".into()))
        );
    }
}
