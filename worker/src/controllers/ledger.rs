//! A node's `Devices` read card by card: each card of the spec with what the ledger
//! (`Devices.status`) says it holds. A card the ledger does not list yet is free, and its
//! partition profiles are the card's static ceiling until the ledger counts them.

use std::{collections::BTreeMap, sync::Arc};

use gpustack_api::devices::{
    Accelerator, AcceleratorAllocation, AllocationMode, Devices, DevicesGroup,
    UNITS_PER_ACCELERATOR,
};

/// Each node's `Devices` by node name, shared with the cache they were read from (a plan reads
/// thousands of them; copying each pass doubled the worker's memory).
pub type DevicesByNode = BTreeMap<String, Arc<Devices>>;

/// One card and its holdings.
pub struct Card<'a> {
    /// The card's group.
    pub group: &'a DevicesGroup,
    /// The card.
    pub card: &'a Accelerator,
    /// How the card is allocated (whole, shared, sliced, partitioned).
    pub mode: AllocationMode,
    /// Units not held.
    pub remaining: u64,
    /// Logical slices held.
    pub slices: u32,
    /// Partition profiles by name: `(allocated, remaining)` instances.
    pub profiles: BTreeMap<String, (i32, i32)>,
}

impl Card<'_> {
    /// The accelerator group, `<manufacturer>-<id>`.
    pub fn key(&self) -> String {
        format!("{}-{}", self.group.manufacturer.as_str(), self.group.id)
    }

    /// Whether the device manager reports the card unhealthy.
    pub fn unhealthy(&self) -> bool {
        self.card.status.unhealthy
    }

    /// Whether the card is split into hardware partitions.
    pub fn partitioned(&self) -> bool {
        self.card.status.physical_sliced.is_some()
    }

    /// Whether it may host one more logical slice.
    pub fn free_slot(&self) -> bool {
        self.card
            .status
            .logical_sliced
            .as_ref()
            .is_some_and(|l| (self.slices as i32) < l.count)
    }
}

fn profiles(
    card: &Accelerator,
    held: Option<&AcceleratorAllocation>,
) -> BTreeMap<String, (i32, i32)> {
    let Some(p) = &card.status.physical_sliced else {
        return BTreeMap::new();
    };
    let counted =
        held.filter(|a| !a.remaining_profiles.is_empty() || !a.allocated_profiles.is_empty());
    p.profiles
        .iter()
        .map(|offered| {
            let count = |list: &[gpustack_api::devices::ProfileAllocation]| {
                list.iter()
                    .find(|x| x.name == offered.name)
                    .map_or(0, |x| x.count)
            };
            let pair = match counted {
                Some(a) => (count(&a.allocated_profiles), count(&a.remaining_profiles)),
                None => (0, offered.count),
            };
            (offered.name.clone(), pair)
        })
        .collect()
}

/// Every card of `devices`, in spec order.
pub fn cards(devices: &Devices) -> Vec<Card<'_>> {
    let mut out = Vec::new();
    for group in &devices.spec.groups {
        let ledger = devices.status.as_ref().and_then(|s| {
            s.groups
                .iter()
                .find(|l| l.id == group.id && l.manufacturer == group.manufacturer)
        });
        for card in &group.accelerators {
            let held = ledger.and_then(|l| l.accelerators.iter().find(|a| a.id == card.id));
            out.push(Card {
                group,
                card,
                mode: held.map_or(AllocationMode::None, |a| a.mode),
                remaining: held.map_or(UNITS_PER_ACCELERATOR, |a| a.remaining),
                slices: held.and_then(|a| a.allocated_slices).unwrap_or(0),
                profiles: profiles(card, held),
            });
        }
    }
    out
}
