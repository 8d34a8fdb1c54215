//! What `Allocate` may grant, decided against the ledger (devices.md §5 step 2): pure.
//!
//! Refusals are the kubelet's `FailedPrecondition`: a card held in another mode, two shared
//! tokens on one card, a card already taken, a slice with no free units or slots.

use std::collections::BTreeMap;

use gpustack_api::{
    Manufacturer,
    devices::{
        Accelerator, AcceleratorAllocation, AllocationMode, DevicesGroup, DevicesStatusGroup,
        UNITS_PER_ACCELERATOR,
    },
};

use super::tokens;
use crate::{
    injection::SliceLimits,
    ledger::{ContainerAllocation, Ledger},
};

/// A sliced container's limits for this manufacturer (`<resource>.sliced.*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SliceAsk {
    pub units: Option<u64>,
    pub cores_percentage: Option<u32>,
    pub memory_percentage: Option<u32>,
    pub memory_mib: Option<u64>,
}

impl SliceAsk {
    /// Reads the `<base>.sliced.*` keys out of a container's limits.
    pub fn from_limits(base: &str, limits: &BTreeMap<String, String>) -> Self {
        let get = |suffix: &str| {
            limits
                .get(&format!("{base}.sliced.{suffix}"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        Self {
            units: get("units"),
            cores_percentage: get("cores-percentage").map(|v| v.min(u64::from(u32::MAX)) as u32),
            memory_percentage: get("memory-percentage").map(|v| v.min(u64::from(u32::MAX)) as u32),
            memory_mib: get("memory-mib"),
        }
    }
}

/// Why an allocation is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    #[error("device {0} is not one this plugin advertises")]
    UnknownDevice(String),
    #[error("accelerator {accelerator} is held {held}, not {asked}")]
    HeldInAnotherMode {
        accelerator: String,
        held: &'static str,
        asked: &'static str,
    },
    #[error("accelerator {0} is already taken")]
    Taken(String),
    #[error(
        "two shared tokens on accelerator {0}: a shared request of N takes N distinct accelerators"
    )]
    TwoSharedOnOneCard(String),
    #[error("accelerator {accelerator} has {free} units free, the slice needs {need}")]
    NoFreeUnits {
        accelerator: String,
        need: u64,
        free: u64,
    },
    #[error("accelerator {accelerator} already hosts its {count} slices")]
    NoFreeSlot { accelerator: String, count: i32 },
    #[error("accelerator {0} is unhealthy")]
    Unhealthy(String),
    #[error("a slice needs exactly one of {0}.sliced.memory-percentage and {0}.sliced.memory-mib")]
    SliceMemory(String),
    #[error("slice cores percentage {0} is not within 1-100")]
    SliceCores(u32),
    #[error("{0} mode is not granted by this plugin")]
    NotGranted(&'static str),
    #[error("a partitioned container names exactly one profile as a limit {0}<profile>")]
    PartitionProfile(String),
    #[error("no card on this node offers partition profile {0}")]
    UnknownPartitionProfile(String),
    #[error("no healthy card has a free slot for partition profile {0}")]
    NoFreePartition(String),
    #[error("making the partition: {0}")]
    PartitionFailed(String),
}

/// The grant `Allocate` will reserve and annotate.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// (group, accelerator) positions in the spec, in request order.
    pub cards: Vec<(usize, usize)>,
    /// The annotation entry of the container.
    pub allocation: ContainerAllocation,
    pub slice: Option<SliceLimits>,
}

/// Checks `device_ids` for `mode` against `ledger` and prices them.
#[cfg(test)]
pub fn decide(
    groups: &[DevicesGroup],
    manufacturer: Manufacturer,
    resource_base: &str,
    mode: AllocationMode,
    device_ids: &[String],
    ledger: &Ledger,
    ask: &SliceAsk,
) -> Result<Decision, Refusal> {
    decide_gated(
        groups,
        manufacturer,
        resource_base,
        mode,
        device_ids,
        ledger,
        ask,
        true,
    )
}

/// [`decide`], with the sliced gate (`GPUSTACK_DEVICE_PLUGIN_SLICED_ALLOCATE_GATE`) settable:
/// off, a slice is granted whatever units and slots its card has left (the kubelet's token
/// count is then the only bound), and charged as usual.
#[allow(clippy::too_many_arguments)]
pub fn decide_gated(
    groups: &[DevicesGroup],
    manufacturer: Manufacturer,
    resource_base: &str,
    mode: AllocationMode,
    device_ids: &[String],
    ledger: &Ledger,
    ask: &SliceAsk,
    sliced_gate: bool,
) -> Result<Decision, Refusal> {
    if matches!(
        mode,
        AllocationMode::Partitioned | AllocationMode::Visibility | AllocationMode::None
    ) {
        return Err(Refusal::NotGranted(mode.as_str()));
    }
    let mut cards: Vec<(usize, usize)> = Vec::new();
    for id in device_ids {
        let t = tokens::parse(id).ok_or_else(|| Refusal::UnknownDevice(id.clone()))?;
        let found = groups.iter().enumerate().find_map(|(gi, g)| {
            (g.manufacturer == manufacturer && g.id == t.group)
                .then(|| {
                    g.accelerators
                        .iter()
                        .position(|a| a.id == t.accelerator)
                        .map(|ai| (gi, ai))
                })
                .flatten()
        });
        let (gi, ai) = found.ok_or_else(|| Refusal::UnknownDevice(id.clone()))?;
        if !tokens::offers(&groups[gi].accelerators[ai], mode) {
            return Err(Refusal::UnknownDevice(id.clone()));
        }
        if cards.contains(&(gi, ai)) {
            return Err(match mode {
                AllocationMode::Shared => Refusal::TwoSharedOnOneCard(t.accelerator.to_owned()),
                // A sliced request is always 1; a second token on one card is the same slice.
                _ => continue,
            });
        }
        cards.push((gi, ai));
    }
    let slice = (mode == AllocationMode::Sliced)
        .then(|| slice_limits(resource_base, ask, groups, &cards))
        .transpose()?;
    let mut status_groups: Vec<DevicesStatusGroup> = Vec::new();
    for &(gi, ai) in &cards {
        let group = &groups[gi];
        let card: &Accelerator = &group.accelerators[ai];
        if card.status.unhealthy {
            return Err(Refusal::Unhealthy(card.id.clone()));
        }
        let entry = ledger.accelerator(manufacturer, &card.id);
        let held = entry.map_or(AllocationMode::None, |e| e.mode);
        if held != AllocationMode::None && held != mode {
            return Err(Refusal::HeldInAnotherMode {
                accelerator: card.id.clone(),
                held: held.as_str(),
                asked: mode.as_str(),
            });
        }
        let free = entry.map_or(UNITS_PER_ACCELERATOR, |e| e.remaining);
        let allocated = match mode {
            AllocationMode::Exclusive => {
                if held == AllocationMode::Exclusive {
                    return Err(Refusal::Taken(card.id.clone()));
                }
                UNITS_PER_ACCELERATOR
            }
            AllocationMode::Shared => {
                let need = UNITS_PER_ACCELERATOR / u64::from(tokens::SHARED_TOKENS);
                if free < need {
                    return Err(Refusal::NoFreeUnits {
                        accelerator: card.id.clone(),
                        need,
                        free,
                    });
                }
                need
            }
            _ => {
                let need = slice_units(ask, slice);
                if sliced_gate && free < need {
                    return Err(Refusal::NoFreeUnits {
                        accelerator: card.id.clone(),
                        need,
                        free,
                    });
                }
                let count = card.status.logical_sliced.as_ref().map_or(0, |l| l.count);
                let hosted = entry.and_then(|e| e.allocated_slices).unwrap_or(0);
                if sliced_gate && i64::from(hosted) >= i64::from(count) {
                    return Err(Refusal::NoFreeSlot {
                        accelerator: card.id.clone(),
                        count,
                    });
                }
                need
            }
        };
        let charge = AcceleratorAllocation {
            id: card.id.clone(),
            index: card.index,
            mode,
            allocated,
            remaining: free.saturating_sub(allocated),
            ..AcceleratorAllocation::default()
        };
        match status_groups.iter_mut().find(|g| g.id == group.id) {
            Some(g) => g.accelerators.push(charge),
            None => status_groups.push(DevicesStatusGroup {
                id: group.id.clone(),
                manufacturer,
                accelerators: vec![charge],
            }),
        }
    }
    Ok(Decision {
        cards,
        allocation: ContainerAllocation {
            devices: gpustack_api::devices::DevicesStatus {
                groups: status_groups,
            },
            device_ids: device_ids.to_vec(),
        },
        slice,
    })
}

/// A slice's cores and memory: cores default to 100; memory from exactly one of the
/// percentage (floor of pct × VRAM / 100, capped at VRAM) and the MiB figure.
fn slice_limits(
    base: &str,
    ask: &SliceAsk,
    groups: &[DevicesGroup],
    cards: &[(usize, usize)],
) -> Result<SliceLimits, Refusal> {
    let cores = ask.cores_percentage.unwrap_or(100);
    if !(1..=100).contains(&cores) {
        return Err(Refusal::SliceCores(cores));
    }
    let vram = cards.first().map_or(0, |&(gi, _)| groups[gi].memory);
    let memory_mib = match (ask.memory_percentage, ask.memory_mib) {
        (Some(pct), None) => (u64::from(pct) * vram / 100).min(vram),
        (None, Some(mib)) => mib.min(vram),
        _ => return Err(Refusal::SliceMemory(base.to_owned())),
    };
    Ok(SliceLimits {
        cores_percentage: cores,
        memory_mib,
    })
}

/// The units a slice charges: its `.sliced.units` limit, else the larger of its cores and
/// memory shares; at least one unit, at most a card.
fn slice_units(ask: &SliceAsk, slice: Option<SliceLimits>) -> u64 {
    let units = ask.units.unwrap_or_else(|| {
        let pct = slice
            .map_or(100, |s| s.cores_percentage)
            .max(ask.memory_percentage.unwrap_or(0));
        UNITS_PER_ACCELERATOR * u64::from(pct) / 100
    });
    units.clamp(1, UNITS_PER_ACCELERATOR)
}

#[cfg(test)]
mod tests {
    use gpustack_api::devices::LogicalSliced;

    use super::*;

    const D: u64 = UNITS_PER_ACCELERATOR;

    fn groups() -> Vec<DevicesGroup> {
        let card = |id: &str, index: u32| {
            let mut a = Accelerator {
                id: id.into(),
                index,
                ..Accelerator::default()
            };
            a.status.logical_sliced = Some(LogicalSliced {
                cores_percentage_overcommit: true,
                count: 2,
            });
            a
        };
        vec![DevicesGroup {
            accelerators: vec![card("GPU-a", 0), card("GPU-b", 1)],
            ..DevicesGroup::new(Manufacturer::Nvidia, "h100", "H100", 80000)
        }]
    }

    fn ledger_with(held: &[(&str, AllocationMode, u64)]) -> Ledger {
        let charges = held
            .iter()
            .map(|(id, mode, units)| AcceleratorAllocation {
                id: (*id).into(),
                mode: *mode,
                allocated: *units,
                ..AcceleratorAllocation::default()
            })
            .collect();
        crate::ledger::fixtures::holding(groups(), charges)
    }

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn half_memory() -> SliceAsk {
        SliceAsk {
            cores_percentage: Some(50),
            memory_percentage: Some(50),
            ..SliceAsk::default()
        }
    }

    #[test]
    fn grants_and_prices() {
        let g = groups();
        let l = Ledger::default();
        let ex = decide(
            &g,
            Manufacturer::Nvidia,
            "nvidia.com/gpu",
            AllocationMode::Exclusive,
            &ids(&["h100:GPU-b:0000"]),
            &l,
            &SliceAsk::default(),
        )
        .unwrap();
        assert_eq!(ex.cards, vec![(0, 1)]);
        let charge = &ex.allocation.devices.groups[0].accelerators[0];
        assert_eq!(
            (charge.mode, charge.allocated, charge.remaining),
            (AllocationMode::Exclusive, D, 0)
        );
        assert_eq!(ex.allocation.device_ids, ["h100:GPU-b:0000"]);

        let sh = decide(
            &g,
            Manufacturer::Nvidia,
            "nvidia.com/gpu",
            AllocationMode::Shared,
            &ids(&["h100:GPU-a:0000", "h100:GPU-b:160000"]),
            &l,
            &SliceAsk::default(),
        )
        .unwrap();
        assert_eq!(sh.allocation.devices.groups[0].accelerators.len(), 2);
        assert_eq!(
            sh.allocation.devices.groups[0].accelerators[0].allocated,
            D / 10
        );

        let sl = decide(
            &g,
            Manufacturer::Nvidia,
            "nvidia.com/gpu",
            AllocationMode::Sliced,
            &ids(&["h100:GPU-a:0001"]),
            &l,
            &half_memory(),
        )
        .unwrap();
        assert_eq!(
            sl.slice,
            Some(SliceLimits {
                cores_percentage: 50,
                memory_mib: 40000
            })
        );
        assert_eq!(
            sl.allocation.devices.groups[0].accelerators[0].allocated,
            D / 2
        );

        let units = SliceAsk {
            units: Some(400_000),
            memory_mib: Some(100_000),
            ..SliceAsk::default()
        };
        let su = decide(
            &g,
            Manufacturer::Nvidia,
            "nvidia.com/gpu",
            AllocationMode::Sliced,
            &ids(&["h100:GPU-a:0000"]),
            &l,
            &units,
        )
        .unwrap();
        assert_eq!(
            su.slice,
            Some(SliceLimits {
                cores_percentage: 100,
                memory_mib: 80000
            })
        );
        assert_eq!(
            su.allocation.devices.groups[0].accelerators[0].allocated,
            400_000
        );
    }

    #[test]
    fn refusals() {
        let g = groups();
        type Case = (
            &'static str,
            Ledger,
            AllocationMode,
            Vec<String>,
            SliceAsk,
            Refusal,
        );
        let cases: Vec<Case> = vec![
            (
                "held in another mode",
                ledger_with(&[("GPU-a", AllocationMode::Sliced, D / 2)]),
                AllocationMode::Exclusive,
                ids(&["h100:GPU-a:0000"]),
                SliceAsk::default(),
                Refusal::HeldInAnotherMode {
                    accelerator: "GPU-a".into(),
                    held: "sliced",
                    asked: "exclusive",
                },
            ),
            (
                "two shared on one card",
                Ledger::default(),
                AllocationMode::Shared,
                ids(&["h100:GPU-a:0000", "h100:GPU-a:160000"]),
                SliceAsk::default(),
                Refusal::TwoSharedOnOneCard("GPU-a".into()),
            ),
            (
                "exclusive taken",
                ledger_with(&[("GPU-a", AllocationMode::Exclusive, D)]),
                AllocationMode::Exclusive,
                ids(&["h100:GPU-a:0000"]),
                SliceAsk::default(),
                Refusal::Taken("GPU-a".into()),
            ),
            (
                "slice without free units",
                ledger_with(&[("GPU-a", AllocationMode::Sliced, 1_200_000)]),
                AllocationMode::Sliced,
                ids(&["h100:GPU-a:0001"]),
                half_memory(),
                Refusal::NoFreeUnits {
                    accelerator: "GPU-a".into(),
                    need: D / 2,
                    free: 400_000,
                },
            ),
            (
                "slice without a slot",
                ledger_with(&[
                    ("GPU-a", AllocationMode::Sliced, 1),
                    ("GPU-a", AllocationMode::Sliced, 1),
                ]),
                AllocationMode::Sliced,
                ids(&["h100:GPU-a:0001"]),
                half_memory(),
                Refusal::NoFreeSlot {
                    accelerator: "GPU-a".into(),
                    count: 2,
                },
            ),
            (
                "slice memory missing",
                Ledger::default(),
                AllocationMode::Sliced,
                ids(&["h100:GPU-a:0001"]),
                SliceAsk::default(),
                Refusal::SliceMemory("nvidia.com/gpu".into()),
            ),
            (
                "unknown token",
                Ledger::default(),
                AllocationMode::Exclusive,
                ids(&["h100:GPU-z:0000"]),
                SliceAsk::default(),
                Refusal::UnknownDevice("h100:GPU-z:0000".into()),
            ),
        ];
        for (name, ledger, mode, devices, ask, want) in cases {
            assert_eq!(
                decide(
                    &g,
                    Manufacturer::Nvidia,
                    "nvidia.com/gpu",
                    mode,
                    &devices,
                    &ledger,
                    &ask
                ),
                Err(want),
                "{name}"
            );
        }
    }

    #[test]
    fn the_sliced_gate_off_grants_past_the_units() {
        let g = groups();
        let full = ledger_with(&[("GPU-a", AllocationMode::Sliced, 1_200_000)]);
        let ids = ids(&["h100:GPU-a:0001"]);
        let decide_with = |gate| {
            decide_gated(
                &g,
                Manufacturer::Nvidia,
                "nvidia.com/gpu",
                AllocationMode::Sliced,
                &ids,
                &full,
                &half_memory(),
                gate,
            )
        };
        assert!(matches!(
            decide_with(true),
            Err(Refusal::NoFreeUnits { .. })
        ));
        let granted = decide_with(false).unwrap();
        let charge = &granted.allocation.devices.groups[0].accelerators[0];
        assert_eq!((charge.allocated, charge.remaining), (D / 2, 0));
    }

    #[test]
    fn limits_are_read_from_the_container() {
        let limits: BTreeMap<String, String> = [
            ("nvidia.com/gpu.sliced".to_owned(), "1".to_owned()),
            (
                "nvidia.com/gpu.sliced.cores-percentage".to_owned(),
                "30".to_owned(),
            ),
            (
                "nvidia.com/gpu.sliced.memory-mib".to_owned(),
                "2048".to_owned(),
            ),
        ]
        .into();
        assert_eq!(
            SliceAsk::from_limits("nvidia.com/gpu", &limits),
            SliceAsk {
                units: None,
                cores_percentage: Some(30),
                memory_percentage: None,
                memory_mib: Some(2048)
            }
        );
    }
}
