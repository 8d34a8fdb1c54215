//! The `gpustack-node-devices` admission check (worker.md §2.6): once Kueue reserves quota for
//! a Workload, the node it was placed on must really have the cards each PodSet asks for.
//! Quota counts credits; this counts cards, shares, slices and partitions on the node's ledger.
//! The verdict is only `Ready` or `Retry` (never `Rejected`: capacity comes back).

use std::collections::BTreeMap;

use gpustack_api::{
    Manufacturer,
    devices::{AllocationMode, Devices, UNITS_PER_ACCELERATOR},
    kueue::{PodSet, PodSetAssignment, Workload},
    labels::HOSTNAME,
};
use k8s_openapi::api::core::v1::PodSpec;

use super::{capacity::profile_spelling, ledger, manufacturers::Resolve};

/// The check state of a Workload that fits its nodes' devices.
pub const READY: &str = "Ready";
/// The check state of a Workload to be evicted and requeued.
pub const RETRY: &str = "Retry";

/// What one Pod of a PodSet asks of one manufacturer's cards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Demand {
    /// Whole cards, one Pod each.
    Whole {
        /// Whose cards.
        manufacturer: Manufacturer,
        /// How many.
        cards: u64,
    },
    /// A share of whole cards.
    Shared {
        /// Whose cards.
        manufacturer: Manufacturer,
        /// How many.
        cards: u64,
    },
    /// A logical slice of one card.
    Sliced {
        /// Whose card.
        manufacturer: Manufacturer,
        /// The slice's size in units.
        units: u64,
    },
    /// One hardware partition.
    Partition {
        /// Whose card.
        manufacturer: Manufacturer,
        /// The partition profile.
        profile: String,
    },
}

fn quantity(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> u64 {
    q.0.parse().unwrap_or(0)
}

/// The accelerator demands of one Pod of the set, from its containers' limits (requests where
/// no limit is given).
pub fn demands(spec: &PodSpec, resolve: &Resolve) -> Vec<Demand> {
    let mut out = Vec::new();
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in containers {
        let Some(res) = c.resources.as_ref() else {
            continue;
        };
        let mut asked: BTreeMap<String, u64> = BTreeMap::new();
        for list in [res.requests.as_ref(), res.limits.as_ref()]
            .into_iter()
            .flatten()
        {
            for (k, v) in list {
                asked.insert(k.clone(), quantity(v));
            }
        }
        for m in Manufacturer::ALL {
            let r = resolve(m);
            let base = r.resource_name.as_str();
            let get = |suffix: &str| asked.get(&format!("{base}{suffix}")).copied().unwrap_or(0);
            if get("") > 0 {
                out.push(Demand::Whole {
                    manufacturer: m,
                    cards: get(""),
                });
            }
            if get(".shared") > 0 {
                out.push(Demand::Shared {
                    manufacturer: m,
                    cards: get(".shared"),
                });
            }
            if get(".sliced") > 0 {
                out.push(Demand::Sliced {
                    manufacturer: m,
                    units: get(".sliced.units"),
                });
            }
            if get(".partitioned") > 0 {
                let kind = r
                    .partition_kind
                    .clone()
                    .unwrap_or_else(|| "partition".into());
                let prefix = format!("{base}.partitioned.{kind}-");
                if let Some(profile) = asked.keys().find_map(|k| k.strip_prefix(&prefix)) {
                    out.push(Demand::Partition {
                        manufacturer: m,
                        profile: profile.to_owned(),
                    });
                }
            }
        }
    }
    out
}

/// A node's free capacity, as the ledger says, card by card.
#[derive(Clone, Debug)]
struct Card {
    manufacturer: Manufacturer,
    mode: AllocationMode,
    remaining: u64,
    free_slot: bool,
    sliceable: bool,
    profiles: BTreeMap<String, i32>,
}

fn cards(devices: &Devices) -> Vec<Card> {
    ledger::cards(devices)
        .into_iter()
        .filter(|c| !c.unhealthy())
        .map(|c| Card {
            manufacturer: c.group.manufacturer,
            mode: c.mode,
            remaining: c.remaining,
            free_slot: c.free_slot(),
            sliceable: c.card.status.logical_sliced.is_some() && !c.partitioned(),
            profiles: c
                .profiles
                .iter()
                .map(|(name, (_, left))| (profile_spelling(c.group.manufacturer, name), *left))
                .collect(),
        })
        .collect()
}

/// Holds `n` unpartitioned cards that `eligible` accepts; how many were eligible when too few.
fn take_cards(
    cards: &mut [Card],
    n: u64,
    eligible: impl Fn(&Card) -> bool,
    hold: impl Fn(&mut Card),
) -> Result<(), usize> {
    let mut free: Vec<&mut Card> = cards
        .iter_mut()
        .filter(|c| c.profiles.is_empty() && eligible(c))
        .collect();
    if (free.len() as u64) < n {
        return Err(free.len());
    }
    for c in free.iter_mut().take(n as usize) {
        hold(c);
    }
    Ok(())
}

/// Why a node's free devices cannot meet one demand.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Shortfall {
    /// Not enough free whole cards.
    #[error("wants {wanted} whole {manufacturer} card(s), {free} free")]
    Whole {
        /// Whose cards.
        manufacturer: Manufacturer,
        /// How many were wanted.
        wanted: u64,
        /// How many are free.
        free: usize,
    },
    /// Not enough cards with room for a share.
    #[error("wants a share of {wanted} {manufacturer} card(s), {free} have one free")]
    Shared {
        /// Whose cards.
        manufacturer: Manufacturer,
        /// How many were wanted.
        wanted: u64,
        /// How many have a share free.
        free: usize,
    },
    /// No card has the slice free.
    #[error(
        "wants a {manufacturer} slice of {units} units, no card has that much free with a free slot"
    )]
    Slice {
        /// Whose card.
        manufacturer: Manufacturer,
        /// The slice's size in units.
        units: u64,
    },
    /// No partition of the profile is free.
    #[error("wants a {manufacturer} {profile} partition, none is free")]
    Partition {
        /// Whose card.
        manufacturer: Manufacturer,
        /// The partition profile.
        profile: String,
    },
}

/// Why a PodSet's assignment does not fit its nodes' devices.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Misfit {
    /// Topology-aware scheduling assigned the PodSet no node.
    #[error("podset {set}: no node assigned by topology-aware scheduling")]
    Unplaced {
        /// The PodSet.
        set: String,
    },
    /// An assigned node has no Devices ledger.
    #[error("podset {set}: node {node} has no Devices ledger")]
    NoLedger {
        /// The PodSet.
        set: String,
        /// The node.
        node: String,
    },
    /// An assigned node lacks free devices.
    #[error("podset {set}: node {node} has not enough free devices: {why}")]
    Short {
        /// The PodSet.
        set: String,
        /// The node.
        node: String,
        /// What is short.
        why: Shortfall,
    },
}

/// Takes `d` from `cards` (so later Pods see what earlier ones took); the reason when it cannot.
fn take(cards: &mut [Card], d: &Demand) -> Result<(), Shortfall> {
    const SHARE: u64 = UNITS_PER_ACCELERATOR / 10;
    match d {
        Demand::Whole {
            manufacturer,
            cards: n,
        } => take_cards(
            cards,
            *n,
            |c| {
                c.manufacturer == *manufacturer
                    && c.mode == AllocationMode::None
                    && c.remaining >= UNITS_PER_ACCELERATOR
            },
            |c| {
                c.mode = AllocationMode::Exclusive;
                c.remaining = 0;
            },
        )
        .map_err(|free| Shortfall::Whole {
            manufacturer: *manufacturer,
            wanted: *n,
            free,
        })?,
        Demand::Shared {
            manufacturer,
            cards: n,
        } => take_cards(
            cards,
            *n,
            |c| {
                c.manufacturer == *manufacturer
                    && matches!(c.mode, AllocationMode::None | AllocationMode::Shared)
                    && c.remaining >= SHARE
            },
            |c| {
                c.mode = AllocationMode::Shared;
                c.remaining -= SHARE;
            },
        )
        .map_err(|free| Shortfall::Shared {
            manufacturer: *manufacturer,
            wanted: *n,
            free,
        })?,
        Demand::Sliced {
            manufacturer,
            units,
        } => {
            // The fullest card that still fits, so whole cards stay whole.
            let best = cards
                .iter_mut()
                .filter(|c| {
                    c.manufacturer == *manufacturer
                        && c.sliceable
                        && c.free_slot
                        && matches!(c.mode, AllocationMode::None | AllocationMode::Sliced)
                        && c.remaining >= *units
                })
                .min_by_key(|c| c.remaining);
            let Some(c) = best else {
                return Err(Shortfall::Slice {
                    manufacturer: *manufacturer,
                    units: *units,
                });
            };
            c.mode = AllocationMode::Sliced;
            c.remaining -= units;
        }
        Demand::Partition {
            manufacturer,
            profile,
        } => {
            let card = cards.iter_mut().find(|c| {
                c.manufacturer == *manufacturer && c.profiles.get(profile).is_some_and(|n| *n > 0)
            });
            let Some(c) = card else {
                return Err(Shortfall::Partition {
                    manufacturer: *manufacturer,
                    profile: profile.clone(),
                });
            };
            if let Some(n) = c.profiles.get_mut(profile) {
                *n -= 1;
            }
        }
    }
    Ok(())
}

/// Which nodes the PodSet's Pods were placed on, and how many on each (from the topology
/// assignment's hostname level).
fn placements(a: &PodSetAssignment) -> Vec<(String, i32)> {
    let Some(t) = &a.topology_assignment else {
        return Vec::new();
    };
    let Some(level) = t.levels.iter().position(|l| l == HOSTNAME) else {
        return Vec::new();
    };
    t.domains
        .iter()
        .filter_map(|d| Some((d.values.get(level)?.clone(), d.count)))
        .collect()
}

/// The verdict on a Workload with reserved quota: `(Ready|Retry, message)`.
pub fn verdict(
    wl: &Workload,
    devices: &ledger::DevicesByNode,
    resolve: &Resolve,
) -> (&'static str, String) {
    let assignments = wl
        .status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .map_or(&[][..], |a| a.pod_set_assignments.as_slice());
    let mut ledgers: BTreeMap<String, Vec<Card>> = BTreeMap::new();
    for set in &wl.spec.pod_sets {
        let Some(a) = assignments.iter().find(|a| a.name == set.name) else {
            return (RETRY, format!("podset {}: not assigned yet", set.name));
        };
        if let Err(why) = check_set(set, a, devices, &mut ledgers, resolve) {
            return (RETRY, why.to_string());
        }
    }
    (
        READY,
        "the assigned nodes have the devices every podset asks for".to_owned(),
    )
}

fn check_set(
    set: &PodSet,
    a: &PodSetAssignment,
    devices: &ledger::DevicesByNode,
    ledgers: &mut BTreeMap<String, Vec<Card>>,
    resolve: &Resolve,
) -> Result<(), Misfit> {
    let Some(spec) = set.template.spec.as_ref() else {
        return Ok(());
    };
    let wants = demands(spec, resolve);
    if wants.is_empty() {
        return Ok(());
    }
    let placed = placements(a);
    if placed.is_empty() {
        return Err(Misfit::Unplaced {
            set: set.name.clone(),
        });
    }
    for (node, pods) in placed {
        let Some(d) = devices.get(&node) else {
            return Err(Misfit::NoLedger {
                set: set.name.clone(),
                node,
            });
        };
        let cards = ledgers.entry(node.clone()).or_insert_with(|| cards(d));
        for _ in 0..pods.max(0) {
            for w in &wants {
                take(cards, w).map_err(|why| Misfit::Short {
                    set: set.name.clone(),
                    node: node.clone(),
                    why,
                })?;
            }
        }
    }
    Ok(())
}
