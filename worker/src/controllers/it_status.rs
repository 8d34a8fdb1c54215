//! An InstanceType's status from its pool's `Devices` ledgers (worker.md §2.4): four views of
//! the same cards (whole cards, shares, VRAM slices, partitions), the profiles, the hardware
//! detail, the entrance and the phase, with the reason whenever inventory is lost.

use std::collections::BTreeMap;

use gpustack_api::{
    devices::{
        AcceleratorSlicedDetail, AllocationMode, DevicesGroup, PhysicalSlicedDetail,
        ProfileCapacity, UNITS_PER_ACCELERATOR,
    },
    instance_type::{CapacityView, InstanceType, InstanceTypeDetail, InstanceTypeStatus},
    kueue::{ClusterQueue, ResourceFlavor},
    labels::NOTE_PREFIX,
};

use super::{
    ledger::{self, Card},
    node_facts::NodeFacts,
    queues,
};
use crate::names::local_queue_name;

/// Units of one share (a tenth of a card) and of one VRAM percent.
const SHARE: u64 = UNITS_PER_ACCELERATOR / 10;
const PERCENT: u64 = UNITS_PER_ACCELERATOR / 100;

/// The pool as the status sees it.
pub struct Pool<'a> {
    /// The InstanceType.
    pub it: &'a InstanceType,
    /// The pool's flavors.
    pub flavors: Vec<&'a ResourceFlavor>,
    /// Nodes counted in the pool's flavors.
    pub nodes: Vec<&'a NodeFacts>,
    /// Nodes that carry the pool's hardware but count in no flavor (cordoned, not ready).
    pub lost_nodes: Vec<&'a NodeFacts>,
    /// Each node's Devices ledger.
    pub devices: &'a ledger::DevicesByNode,
    /// The pool's queue as this pass leaves it.
    pub queue: &'a ClusterQueue,
}

#[derive(Default)]
struct Views {
    exclusive: CapacityView,
    shared: CapacityView,
    sliced: CapacityView,
    partitioned: CapacityView,
    remaining_profiles: BTreeMap<String, i64>,
    allocated_profiles: BTreeMap<String, i64>,
    unhealthy: Vec<String>,
}

/// Adds one node's cards of the pool's group to the views.
fn add_node(views: &mut Views, node: &str, cards: &[&Card]) {
    let (mut node_whole, mut node_shared) = (0i64, 0i64);
    for c in cards {
        if c.unhealthy() {
            views.unhealthy.push(format!("{node}/{}", c.card.id));
            continue;
        }
        if let Some(p) = &c.card.status.physical_sliced {
            let left = if c.profiles.is_empty() {
                0
            } else {
                c.profiles
                    .values()
                    .map(|(_, r)| i64::from(*r))
                    .max()
                    .unwrap_or(0)
            };
            views.partitioned.capacity += i64::from(p.count);
            views.partitioned.remaining += left;
            views.partitioned.once_max_request =
                views.partitioned.once_max_request.max(i64::from(left > 0));
            for (name, (allocated, remaining)) in &c.profiles {
                *views.remaining_profiles.entry(name.clone()).or_default() += i64::from(*remaining);
                *views.allocated_profiles.entry(name.clone()).or_default() += i64::from(*allocated);
            }
            continue;
        }
        let (mode, remaining) = (c.mode, c.remaining);
        views.exclusive.capacity += 1;
        views.shared.capacity += 10;
        if mode == AllocationMode::None && remaining >= UNITS_PER_ACCELERATOR {
            views.exclusive.remaining += 1;
            node_whole += 1;
        }
        if matches!(mode, AllocationMode::None | AllocationMode::Shared) {
            views.shared.remaining += (remaining / SHARE) as i64;
            if remaining >= SHARE {
                node_shared += 1;
            }
        }
        if c.card.status.logical_sliced.is_some() {
            views.sliced.capacity += 100;
            if matches!(mode, AllocationMode::None | AllocationMode::Sliced) && c.free_slot() {
                let pct = (remaining / PERCENT) as i64;
                views.sliced.remaining += pct;
                views.sliced.once_max_request = views.sliced.once_max_request.max(pct);
            }
        }
    }
    views.exclusive.once_max_request = views.exclusive.once_max_request.max(node_whole);
    views.shared.once_max_request = views.shared.once_max_request.max(node_shared);
}

/// One card's slicing capacity, from the first healthy card of the pool.
fn per_card_detail(group: &DevicesGroup) -> Option<AcceleratorSlicedDetail> {
    let card = group.accelerators.iter().find(|c| !c.status.unhealthy)?;
    let physical = card
        .status
        .physical_sliced
        .as_ref()
        .map(|p| PhysicalSlicedDetail {
            count: p.count,
            profiles: p
                .profiles
                .iter()
                .map(|x| ProfileCapacity {
                    name: x.name.clone(),
                    count: x.count,
                    memory_mib: x.memory_mib,
                })
                .collect(),
        });
    let logical = card.status.logical_sliced.clone();
    (logical.is_some() || physical.is_some())
        .then_some(AcceleratorSlicedDetail { logical, physical })
}

fn detail(flavors: &[&ResourceFlavor], group: Option<&DevicesGroup>) -> Option<InstanceTypeDetail> {
    let notes = flavors.first()?.metadata.annotations.as_ref()?;
    let note = |k: &str| notes.get(&format!("{NOTE_PREFIX}{k}")).cloned();
    Some(InstanceTypeDetail {
        manufacturer: note("manufacturer"),
        product: note("product"),
        family: note("family"),
        memory: note("memory"),
        cores: note("cores"),
        sliced_detail: group.and_then(per_card_detail),
    })
}

/// Why the pool holds less than its hardware: unhealthy cards and unavailable nodes.
fn losses(views: &Views, lost: &[&NodeFacts]) -> Option<String> {
    let mut parts = Vec::new();
    if !views.unhealthy.is_empty() {
        parts.push(format!(
            "{} unhealthy card(s) left out: {}",
            views.unhealthy.len(),
            views.unhealthy.join(", ")
        ));
    }
    for n in lost {
        parts.push(format!(
            "node {} {} left out",
            n.name,
            n.unavailable.unwrap_or("unavailable")
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The InstanceType's status for `pool` (pure).
pub fn status(pool: &Pool) -> InstanceTypeStatus {
    let name = pool.it.metadata.name.clone().unwrap_or_default();
    let mut views = Views::default();
    let accelerated = pool.it.spec.acceleratable.unwrap_or(false);
    let key = pool.it.spec.accelerator_group.clone().unwrap_or_default();
    let mut sample_group = None;
    let mut cpu = CapacityView::default();
    for node in &pool.nodes {
        cpu.capacity += node.cpus as i64;
        cpu.once_max_request = cpu.once_max_request.max(node.cpus as i64);
        if !accelerated {
            continue;
        }
        let Some(devices) = pool.devices.get(&node.name) else {
            continue;
        };
        let all = ledger::cards(devices);
        let ours: Vec<&Card> = all.iter().filter(|c| c.key() == key).collect();
        if let Some(first) = ours.first() {
            sample_group.get_or_insert(first.group);
        }
        add_node(&mut views, &node.name, &ours);
    }
    cpu.remaining = cpu.capacity;
    let (phase, held) = queues::phase(pool.queue);
    let loss = losses(&views, &pool.lost_nodes);
    let message = match (held, loss) {
        (Some(h), Some(l)) => Some(format!("{h}; {l}")),
        (h, l) => h.or(l),
    };
    let view = |v: CapacityView| (accelerated && v.capacity > 0).then_some(v);
    InstanceTypeStatus {
        accelerator: view(views.exclusive),
        accelerator_shared: view(views.shared),
        accelerator_sliced: view(views.sliced),
        accelerator_partitioned: view(views.partitioned),
        remaining_profiles: views.remaining_profiles,
        allocated_profiles: views.allocated_profiles,
        cpu: (!accelerated).then_some(cpu),
        entrance: Some(local_queue_name(&name)),
        phase: Some(phase.to_owned()),
        phase_message: message,
        detail: detail(&pool.flavors, sample_group),
    }
}
