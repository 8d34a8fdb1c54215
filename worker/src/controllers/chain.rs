//! The Kueue chain as one level-based plan (worker.md §2): from the observed nodes, ledgers,
//! InstanceTypes and queues, the writes that bring flavors, derived InstanceTypes, queues,
//! LocalQueues, Topologies and InstanceType statuses to what they should be. Only differences
//! are planned, so a change on one node touches the few objects that depend on it.

use std::collections::{BTreeMap, BTreeSet};

use gpustack_api::{
    instance_type::{InstanceType, InstanceTypeStatus},
    kueue::{ClusterQueue, LocalQueue, LocalQueueSpec, ResourceFlavor, Topology},
    labels::{CONTROLLED, NOTE_PREFIX, QUEUE, RESOURCE_TYPE},
    topology_source::{TopologySource, TopologySourceStatus},
};
use k8s_openapi::{
    api::core::v1::Namespace,
    apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time},
};
use kube::{Resource, api::ObjectMeta};

use super::{
    chain_settings::ChainSettings,
    conditions::{self, Wanted},
    flavors::{self, DesiredFlavor},
    it_status::{self, Pool},
    label_match::matches,
    ledger,
    node_facts::NodeFacts,
    plan_check::{self, TopologyState},
    queues, topology,
    unit_presets::UnitPresets,
};
use crate::names::local_queue_name;

/// The ClusterQueue condition that says whether the flavor plan was accepted.
pub const TOPOLOGY_READY: &str = "TopologyReady";

/// Namespaces that never get LocalQueues (besides the worker's own).
const RESERVED_NAMESPACES: &[&str] = &["kube-system", "kube-public", "kube-node-lease"];

/// What the chain observes.
pub struct Snapshot<'a> {
    /// The nodes' facts.
    pub nodes: &'a [NodeFacts],
    /// Each node's Devices ledger.
    pub devices: &'a ledger::DevicesByNode,
    /// The ResourceFlavors, by name.
    pub flavors: &'a BTreeMap<String, ResourceFlavor>,
    /// The InstanceTypes, by name.
    pub instance_types: &'a BTreeMap<String, InstanceType>,
    /// The ClusterQueues, by name.
    pub queues: &'a BTreeMap<String, ClusterQueue>,
    /// `(namespace, name)` of every LocalQueue.
    pub local_queues: &'a BTreeSet<(String, String)>,
    /// The namespaces (each gets LocalQueues unless reserved).
    pub namespaces: &'a [Namespace],
    /// The Topologies, by name.
    pub topologies: &'a BTreeMap<String, Topology>,
    /// The TopologySources.
    pub topology_sources: &'a [TopologySource],
    /// Per ClusterQueue, the flavors Workloads hold quota on there.
    pub held: &'a BTreeMap<String, BTreeSet<String>>,
    /// Whether the node-devices admission check is active.
    pub node_devices_active: bool,
    /// The worker's namespace.
    pub system_namespace: &'a str,
    /// The chain's settings.
    pub settings: &'a ChainSettings,
    /// The shipped unit resources table.
    pub presets: &'a UnitPresets,
    /// The time new conditions carry.
    pub now: &'a Time,
}

/// One write of the plan.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Create or update a ResourceFlavor.
    ApplyFlavor(ResourceFlavor),
    /// Create an InstanceType derived from the nodes.
    CreateInstanceType(Box<InstanceType>),
    /// Add the finalizer to the named InstanceType.
    AddFinalizer(String),
    /// Create or update a ClusterQueue.
    ApplyQueue(Box<ClusterQueue>),
    /// Set one condition on the named ClusterQueue.
    ApplyQueueCondition(String, Box<Condition>),
    /// Delete the named ClusterQueue.
    DeleteQueue(String),
    /// Remove the finalizer from the named InstanceType.
    RemoveFinalizer(String),
    /// Write the named InstanceType's status.
    ApplyStatus(String, Box<InstanceTypeStatus>),
    /// Create a LocalQueue.
    CreateLocalQueue(LocalQueue),
    /// Create a Topology.
    ApplyTopology(Topology),
    /// Delete the named Topology.
    DeleteTopology(String),
    /// Delete the named ResourceFlavor.
    DeleteFlavor(String),
    /// Write the named TopologySource's status.
    ApplySourceStatus(String, Box<TopologySourceStatus>),
}

impl Write {
    /// `verb kind/name`, for logs and tests.
    pub fn describe(&self) -> String {
        let name = |m: &ObjectMeta| m.name.clone().unwrap_or_default();
        match self {
            Write::ApplyFlavor(f) => format!("apply resourceflavor/{}", name(&f.metadata)),
            Write::CreateInstanceType(i) => format!("create instancetype/{}", name(&i.metadata)),
            Write::AddFinalizer(n) => format!("finalize instancetype/{n}"),
            Write::ApplyQueue(q) => format!("apply clusterqueue/{}", name(&q.metadata)),
            Write::ApplyQueueCondition(n, c) => {
                format!("condition clusterqueue/{n} {}={}", c.type_, c.status)
            }
            Write::DeleteQueue(n) => format!("delete clusterqueue/{n}"),
            Write::RemoveFinalizer(n) => format!("release instancetype/{n}"),
            Write::ApplyStatus(n, _) => format!("status instancetype/{n}"),
            Write::CreateLocalQueue(q) => format!(
                "create localqueue/{}/{}",
                q.metadata.namespace.clone().unwrap_or_default(),
                name(&q.metadata)
            ),
            Write::ApplyTopology(t) => format!("apply topology/{}", name(&t.metadata)),
            Write::DeleteTopology(n) => format!("delete topology/{n}"),
            Write::DeleteFlavor(n) => format!("delete resourceflavor/{n}"),
            Write::ApplySourceStatus(n, _) => format!("status topologysource/{n}"),
        }
    }
}

/// Whether `have` already carries every label and note of `want`, and its spec.
fn flavor_current(have: &ResourceFlavor, want: &ResourceFlavor) -> bool {
    let sub = |h: &Option<BTreeMap<String, String>>, w: &Option<BTreeMap<String, String>>| {
        matches(
            h.as_ref().unwrap_or(&BTreeMap::new()),
            w.as_ref().unwrap_or(&BTreeMap::new()),
        )
    };
    let notes = |m: &ObjectMeta| -> BTreeMap<String, String> {
        m.annotations
            .iter()
            .flatten()
            .filter(|(k, _)| k.starts_with(NOTE_PREFIX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    have.spec == want.spec
        && sub(&have.metadata.labels, &want.metadata.labels)
        && notes(&have.metadata) == notes(&want.metadata)
}

fn queue_current(have: &ClusterQueue, want: &ClusterQueue) -> bool {
    let labels_ok = matches(
        have.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()),
        want.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()),
    );
    let markers = |q: &ClusterQueue| {
        [
            gpustack_api::labels::EMPTY_PLAN_HOLD,
            gpustack_api::labels::MIGRATION_HOLD,
        ]
        .map(|k| {
            q.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(k).cloned())
        })
    };
    have.spec == want.spec && labels_ok && markers(have) == markers(want)
}

fn has_finalizer(it: &InstanceType) -> bool {
    it.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == CONTROLLED)
}

/// The state the pass leaves a Topology in: `wanted` are the levels each profile in use stands
/// for (applied in this pass when absent).
fn topology_state(
    name: &str,
    wanted: &BTreeMap<String, Vec<String>>,
    have: &BTreeMap<String, Topology>,
) -> TopologyState {
    match (have.get(name), wanted.get(name)) {
        (Some(t), _) if t.metadata.deletion_timestamp.is_some() => TopologyState::Missing,
        (Some(t), Some(want)) => {
            let levels: Vec<String> = t.spec.levels.iter().map(|l| l.node_label.clone()).collect();
            if &levels == want {
                TopologyState::Ready
            } else {
                TopologyState::Drifted {
                    have: levels,
                    want: want.clone(),
                }
            }
        }
        (Some(_), None) | (None, Some(_)) => TopologyState::Ready,
        (None, None) => TopologyState::Missing,
    }
}

/// What each pool member holds in the pool's quota unit, summed: what a sound plan totals.
fn pool_capacity(it: &InstanceType, members: &[&NodeFacts]) -> u64 {
    let accelerated = it.spec.acceleratable.unwrap_or(false);
    members
        .iter()
        .map(|n| {
            let per_node = match (&it.spec.accelerator_group, accelerated) {
                (Some(group), true) => n
                    .accelerators
                    .iter()
                    .find(|a| &a.key == group)
                    .map_or(0, |a| u64::from(a.count)),
                _ => n.cpus,
            };
            queues::quota_of(accelerated, per_node)
        })
        .sum()
}

fn local_queue(cq: &ClusterQueue, namespace: &str) -> Option<LocalQueue> {
    let name = cq.metadata.name.clone()?;
    let owner = OwnerReference {
        api_version: ClusterQueue::api_version(&()).into_owned(),
        kind: ClusterQueue::kind(&()).into_owned(),
        name: name.clone(),
        uid: cq.metadata.uid.clone()?,
        controller: Some(true),
        block_owner_deletion: None,
    };
    Some(LocalQueue {
        metadata: ObjectMeta {
            name: Some(local_queue_name(&name)),
            namespace: Some(namespace.to_owned()),
            annotations: Some(BTreeMap::from([(QUEUE.to_owned(), name.clone())])),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: LocalQueueSpec {
            cluster_queue: name,
            stop_policy: None,
        },
        status: None,
    })
}

/// The pool's nodes: those counted in its flavors, and those with its hardware that are not.
fn pool_nodes<'a>(
    it: &InstanceType,
    pool: &[&ResourceFlavor],
    desired: &BTreeMap<String, DesiredFlavor>,
    nodes: &'a [NodeFacts],
) -> (Vec<&'a NodeFacts>, Vec<&'a NodeFacts>) {
    let counted: BTreeSet<&str> = pool
        .iter()
        .filter_map(|f| desired.get(f.metadata.name.as_deref()?))
        .flat_map(|d| d.nodes.iter().map(String::as_str))
        .collect();
    let members = nodes
        .iter()
        .filter(|n| counted.contains(n.name.as_str()))
        .collect();
    let lost = match &it.spec.accelerator_group {
        Some(key) => nodes
            .iter()
            .filter(|n| n.managed && !n.available() && n.accelerators.iter().any(|a| &a.key == key))
            .collect(),
        None => Vec::new(),
    };
    (members, lost)
}

/// The writes that bring the cluster to what `s` calls for (pure).
pub fn plan(s: &Snapshot) -> Vec<Write> {
    let settings = s.settings;
    let desired = flavors::desired_flavors(s.nodes, settings);
    let mut writes = Vec::new();
    for (name, d) in &desired {
        if s.flavors
            .get(name)
            .is_none_or(|have| !flavor_current(have, &d.flavor))
        {
            writes.push(Write::ApplyFlavor(d.flavor.clone()));
        }
    }
    if settings.derived_from_node {
        let mut planned = BTreeSet::new();
        for d in desired.values() {
            if let Some(it) = flavors::derived_instance_type(&d.flavor, settings, s.presets) {
                let name = it.metadata.name.clone().unwrap_or_default();
                if !s.instance_types.contains_key(&name) && planned.insert(name) {
                    writes.push(Write::CreateInstanceType(Box::new(it)));
                }
            }
        }
    }
    let live: Vec<ResourceFlavor> = desired.values().map(|d| d.flavor.clone()).collect();
    // The hierarchy each profile in use stands for, from the nodes that carry it.
    let by_name: BTreeMap<&str, &NodeFacts> =
        s.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut wanted_topologies: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for d in desired.values() {
        let (Some(topology), Some(node)) = (
            d.flavor.spec.topology_name.as_ref(),
            d.nodes.first().and_then(|n| by_name.get(n.as_str())),
        ) else {
            continue;
        };
        wanted_topologies
            .entry(topology.clone())
            .or_insert_with(|| node.topology_levels.clone());
    }
    // Created before the queues that need them; immutable, so a drifted one is reported on
    // the queues, never patched.
    for (name, levels) in &wanted_topologies {
        if !s.topologies.contains_key(name) {
            writes.push(Write::ApplyTopology(topology::topology(levels)));
        }
    }
    let state = |name: &str| topology_state(name, &wanted_topologies, s.topologies);
    let managed: Vec<(&str, &BTreeMap<String, String>)> = s
        .nodes
        .iter()
        .filter(|n| n.managed)
        .map(|n| (n.name.as_str(), &n.labels))
        .collect();
    let none_held = BTreeSet::new();
    // Flavors some queue still names (a migration's old plan, a refused plan's kept one).
    let mut named: BTreeSet<String> = BTreeSet::new();
    for (name, it) in s.instance_types {
        let current = s.queues.get(name);
        if it.metadata.deletion_timestamp.is_some() {
            match current {
                Some(q) if q.metadata.deletion_timestamp.is_none() => {
                    writes.push(Write::DeleteQueue(name.clone()))
                }
                Some(_) => {}
                None if has_finalizer(it) => writes.push(Write::RemoveFinalizer(name.clone())),
                None => {}
            }
            continue;
        }
        if !has_finalizer(it) {
            writes.push(Write::AddFinalizer(name.clone()));
        }
        let pool = queues::pool_flavors(it, &live, settings.aware_cpu_manufacturer);
        let (members, lost) = pool_nodes(it, &pool, &desired, s.nodes);
        let proposed = queues::flavor_plan(it, &pool);
        let by_flavor: BTreeMap<String, &ResourceFlavor> = pool
            .iter()
            .map(|f| (f.metadata.name.clone().unwrap_or_default(), *f))
            .collect();
        let verdict = plan_check::validate(
            &proposed,
            &plan_check::Context {
                flavors: &by_flavor,
                topology: &state,
                nodes: &managed,
                capacity: pool_capacity(it, &members),
            },
        );
        let want = queues::desired_queue(
            it,
            verdict.is_ok().then_some(proposed),
            current,
            s.node_devices_active,
            settings,
            s.held.get(name).unwrap_or(&none_held),
        );
        named.extend(
            want.spec
                .resource_groups
                .iter()
                .flat_map(|g| g.flavors.iter().map(|f| f.name.clone())),
        );
        if current.is_none_or(|have| !queue_current(have, &want)) {
            writes.push(Write::ApplyQueue(Box::new(want.clone())));
        }
        let condition = Wanted {
            type_: TOPOLOGY_READY,
            ok: verdict.is_ok(),
            reason: match &verdict {
                Ok(()) => "PlanAccepted".to_owned(),
                Err(e) => e.reason().to_owned(),
            },
            message: match &verdict {
                // Stable while sound, so a quota change does not rewrite it.
                Ok(()) => "the flavor plan is sound; every flavor has its Topology".to_owned(),
                Err(e) => format!("flavor plan refused, the queue keeps its plan: {e}"),
            },
            observed_generation: None,
        };
        let have_conditions = current
            .and_then(|c| c.status.as_ref())
            .map(|st| st.conditions.as_slice())
            .unwrap_or_default();
        if let Some(c) = conditions::update(have_conditions, &condition, s.now) {
            writes.push(Write::ApplyQueueCondition(name.clone(), Box::new(c)));
        }
        // The status reads the queue as it will be after this pass.
        let queue_view = ClusterQueue {
            status: current.and_then(|c| c.status.clone()),
            ..want
        };
        let status = it_status::status(&Pool {
            it,
            flavors: pool,
            nodes: members,
            lost_nodes: lost,
            devices: s.devices,
            queue: &queue_view,
        });
        if it.status.as_ref() != Some(&status) {
            writes.push(Write::ApplyStatus(name.clone(), Box::new(status)));
        }
    }
    for (name, cq) in s.queues {
        if cq.metadata.deletion_timestamp.is_some() || !s.instance_types.contains_key(name) {
            continue;
        }
        for ns in s.namespaces {
            let Some(ns_name) = ns.metadata.name.as_deref() else {
                continue;
            };
            let terminating = ns.metadata.deletion_timestamp.is_some();
            if terminating
                || ns_name == s.system_namespace
                || RESERVED_NAMESPACES.contains(&ns_name)
            {
                continue;
            }
            if !s
                .local_queues
                .contains(&(ns_name.to_owned(), local_queue_name(name)))
                && let Some(lq) = local_queue(cq, ns_name)
            {
                writes.push(Write::CreateLocalQueue(lq));
            }
        }
    }
    // Topologies of the flavors a queue still names stay while it does.
    for f in named.iter().filter(|n| !desired.contains_key(*n)) {
        if let Some(t) = s.flavors.get(f).and_then(|f| f.spec.topology_name.clone())
            && let Some(have) = s.topologies.get(&t)
        {
            let levels = have
                .spec
                .levels
                .iter()
                .map(|l| l.node_label.clone())
                .collect();
            wanted_topologies.entry(t).or_insert(levels);
        }
    }
    for (name, t) in s.topologies {
        let ours = t
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(RESOURCE_TYPE))
            .is_some_and(|v| v == "nodes");
        if ours && !wanted_topologies.contains_key(name) && t.metadata.deletion_timestamp.is_none()
        {
            writes.push(Write::DeleteTopology(name.clone()));
        }
    }
    // Retired last: the queues above no longer name them.
    for (name, f) in s.flavors {
        let ours = f
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(RESOURCE_TYPE))
            .is_some_and(|v| v == "nodes");
        if ours && !desired.contains_key(name) && !named.contains(name) {
            writes.push(Write::DeleteFlavor(name.clone()));
        }
    }
    for source in s.topology_sources {
        if let Some(status) = topology::source_status(source, s.now) {
            let name = source.metadata.name.clone().unwrap_or_default();
            writes.push(Write::ApplySourceStatus(name, Box::new(status)));
        }
    }
    writes
}

#[cfg(test)]
mod tests {
    use gpustack_api::{labels::HOSTNAME, labels::MIGRATION_HOLD};

    use super::*;
    use crate::controllers::node_facts::fixtures::gpu_node;

    const ZONE: &str = "topology.kubernetes.io/zone";

    /// An 8-card node (no CPU pool: mixing is off in these tests) on the hierarchy `levels`.
    fn node(levels: &[&str]) -> NodeFacts {
        let levels: Vec<String> = levels.iter().map(|l| (*l).to_owned()).collect();
        NodeFacts {
            topology_profile: topology::profile(&levels),
            topology_levels: levels,
            ..gpu_node("a", 8)
        }
    }

    /// The queue the plan applies.
    fn applied_queue(writes: &[Write]) -> ClusterQueue {
        writes
            .iter()
            .find_map(|w| match w {
                Write::ApplyQueue(q) => Some(*q.clone()),
                _ => None,
            })
            .expect("a queue write")
    }

    fn names(writes: &[Write]) -> Vec<String> {
        writes.iter().map(Write::describe).collect()
    }

    /// The chain as it stood on the hostname profile: its flavor, Topology, InstanceType and
    /// queue, as `plan` would have written them.
    struct Before {
        flavors: BTreeMap<String, ResourceFlavor>,
        topologies: BTreeMap<String, Topology>,
        instance_types: BTreeMap<String, InstanceType>,
        queues: BTreeMap<String, ClusterQueue>,
    }

    fn before(settings: &ChainSettings, presets: &UnitPresets) -> Before {
        let old = node(&[HOSTNAME]);
        let desired = flavors::desired_flavors(std::slice::from_ref(&old), settings);
        let d = desired.values().next().unwrap();
        let mut it = flavors::derived_instance_type(&d.flavor, settings, presets).unwrap();
        it.metadata.finalizers = Some(vec![CONTROLLED.to_owned()]);
        let name = it.metadata.name.clone().unwrap();
        let plan = queues::flavor_plan(&it, &[&d.flavor]);
        let cq = queues::desired_queue(&it, Some(plan), None, false, settings, &BTreeSet::new());
        let t = topology::topology(&old.topology_levels);
        Before {
            flavors: desired
                .iter()
                .map(|(n, d)| (n.clone(), d.flavor.clone()))
                .collect(),
            topologies: BTreeMap::from([(t.metadata.name.clone().unwrap(), t)]),
            instance_types: BTreeMap::from([(name.clone(), it)]),
            queues: BTreeMap::from([(name, cq)]),
        }
    }

    /// What else the plan sees.
    #[derive(Default)]
    struct Observed {
        queues: BTreeMap<String, ClusterQueue>,
        topologies: BTreeMap<String, Topology>,
        held: BTreeMap<String, BTreeSet<String>>,
    }

    /// The plan over `b`'s flavors and InstanceTypes and what else is observed.
    fn run(
        b: &Before,
        nodes: &[NodeFacts],
        o: &Observed,
        settings: &ChainSettings,
        presets: &UnitPresets,
    ) -> Vec<Write> {
        let Observed {
            queues,
            topologies,
            held,
        } = o;
        plan(&Snapshot {
            nodes,
            devices: &BTreeMap::new(),
            flavors: &b.flavors,
            instance_types: &b.instance_types,
            queues,
            local_queues: &BTreeSet::new(),
            namespaces: &[],
            topologies,
            topology_sources: &[],
            held,
            node_devices_active: false,
            system_namespace: "gpustack-system",
            settings,
            presets,
            now: &Time(jiff::Timestamp::UNIX_EPOCH),
        })
    }

    #[test]
    fn a_migrating_queue_keeps_its_old_flavor_and_topology_until_they_are_free() {
        let settings = ChainSettings {
            mixed_on_node: false,
            ..ChainSettings::default()
        };
        let presets = UnitPresets::builtin().unwrap();
        let b = before(&settings, &presets);
        let (it_name, old_flavor) = (
            b.queues.keys().next().unwrap().clone(),
            b.flavors.keys().next().unwrap().clone(),
        );
        let nodes = [node(&[ZONE, HOSTNAME])];
        // The Topologies' names: `gpustack-fnv64-` and the FNV-1a 64 of the levels joined by
        // NUL, computed outside this code (Python: h = 0xcbf29ce484222325; per byte h ^= b,
        // h *= 0x100000001b3 mod 2^64).
        let racked = "gpustack-fnv64-f7b1861ac0399767".to_owned();
        let hostname = "gpustack-fnv64-87bf574bea2a4f23".to_owned();
        let busy = Observed {
            queues: b.queues.clone(),
            topologies: b.topologies.clone(),
            held: BTreeMap::from([(it_name.clone(), BTreeSet::from([old_flavor.clone()]))]),
        };
        let writes = run(&b, &nodes, &busy, &settings, &presets);
        let held = applied_queue(&writes);
        assert_eq!(
            held.spec.stop_policy.as_deref(),
            Some(queues::HOLD_AND_DRAIN)
        );
        assert_eq!(
            held.spec.resource_groups,
            b.queues[&it_name].spec.resource_groups
        );
        let said = names(&writes);
        assert!(
            said.contains(&format!("apply topology/{racked}")),
            "{said:?}"
        );
        assert!(!said.iter().any(|w| w.starts_with("delete")), "{said:?}");

        // Drained: the new plan, the old flavor and Topology retired, the condition True.
        let mut drained = Observed {
            queues: BTreeMap::from([(it_name.clone(), held)]),
            topologies: b.topologies.clone(),
            held: BTreeMap::new(),
        };
        let t = topology::topology(&nodes[0].topology_levels);
        drained.topologies.insert(racked.clone(), t);
        let writes = run(&b, &nodes, &drained, &settings, &presets);
        let said = names(&writes);
        for want in [
            format!("apply clusterqueue/{it_name}"),
            format!("condition clusterqueue/{it_name} TopologyReady=True"),
            format!("delete resourceflavor/{old_flavor}"),
            format!("delete topology/{hostname}"),
        ] {
            assert!(said.contains(&want), "{want} in {said:?}");
        }
        let switched = applied_queue(&writes);
        assert_eq!(switched.spec.stop_policy.as_deref(), Some(queues::NONE));
        assert!(
            switched
                .metadata
                .annotations
                .is_none_or(|a| !a.contains_key(MIGRATION_HOLD))
        );
    }

    #[test]
    fn a_drifted_topology_refuses_the_plan_and_is_never_patched() {
        let settings = ChainSettings {
            mixed_on_node: false,
            ..ChainSettings::default()
        };
        let presets = UnitPresets::builtin().unwrap();
        let b = before(&settings, &presets);
        let it_name = b.queues.keys().next().unwrap().clone();
        let nodes = [node(&[HOSTNAME])];
        let mut drifted = b.topologies.clone();
        for t in drifted.values_mut() {
            t.spec.levels.insert(
                0,
                gpustack_api::kueue::TopologyLevel {
                    node_label: ZONE.into(),
                },
            );
        }
        let observed = Observed {
            topologies: drifted,
            ..Observed::default()
        };
        let writes = run(&b, &nodes, &observed, &settings, &presets);
        let said = names(&writes);
        assert!(!said.iter().any(|w| w.contains("topology/")), "{said:?}");
        let condition = writes
            .iter()
            .find_map(|w| match w {
                Write::ApplyQueueCondition(n, c) if n == &it_name => Some(c.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", "TopologyDrift")
        );
        let queue = applied_queue(&writes);
        assert!(
            queue.spec.resource_groups.is_empty(),
            "a refused plan is not written"
        );
    }
}
