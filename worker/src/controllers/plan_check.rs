//! Whether a ClusterQueue's flavor plan is sound before it is written (worker.md §2.3 "Flavor
//! limits"). A refused plan is not written at all: the queue keeps the plan it has, and its
//! `TopologyReady` condition says why, naming the flavors at fault.

use std::collections::{BTreeMap, BTreeSet};

use gpustack_api::kueue::{ResourceFlavor, ResourceGroup};

/// Most flavors one queue's plan may name.
pub const MAX_FLAVORS: usize = 64;

/// The state of the Topology a flavor names, as the pass will leave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyState {
    /// Present with the levels its profile stands for (or applied in this pass).
    Ready,
    /// Absent and not being created, or being deleted.
    Missing,
    /// Present with other levels: never patched (Topologies are immutable), only reported.
    Drifted {
        /// The levels it has.
        have: Vec<String>,
        /// The levels the nodes call for.
        want: Vec<String>,
    },
}

/// Why a plan was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The plan names more flavors than a ClusterQueue may hold.
    #[error("the plan names {count} flavors, more than {MAX_FLAVORS}; over the limit: {}", over.join(", "))]
    TooManyFlavors {
        /// How many flavors the plan names.
        count: usize,
        /// The flavors past the limit.
        over: Vec<String>,
    },
    /// Something is covered twice.
    #[error("the plan covers {what} more than once")]
    RepeatedCoverage {
        /// What is covered twice.
        what: String,
    },
    /// Two flavors select one node.
    #[error("flavors {first} and {second} both select node {node}")]
    OverlappingSelectors {
        /// One flavor.
        first: String,
        /// The other flavor.
        second: String,
        /// The node both select.
        node: String,
    },
    /// A flavor names a Topology that does not exist.
    #[error("flavor {flavor} names Topology {topology}, which is missing")]
    MissingTopology {
        /// The flavor.
        flavor: String,
        /// The Topology it names.
        topology: String,
    },
    /// A flavor's Topology has other levels than its nodes.
    #[error(
        "flavor {flavor} names Topology {topology} whose levels {have:?} are not {want:?}; \
         Topologies are never patched: delete it to have it recreated"
    )]
    TopologyDrift {
        /// The flavor.
        flavor: String,
        /// The Topology.
        topology: String,
        /// The levels it has.
        have: Vec<String>,
        /// The levels the nodes call for.
        want: Vec<String>,
    },
    /// A pool's quota differs from its nodes' capacity.
    #[error("the plan's {resource} quota {planned} is not the pool's capacity {capacity} (flavors {})", flavors.join(", "))]
    QuotaNotConserved {
        /// The resource.
        resource: String,
        /// The quota planned.
        planned: u64,
        /// The nodes' capacity.
        capacity: u64,
        /// The pool's flavors.
        flavors: Vec<String>,
    },
}

impl Refusal {
    /// The condition reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::TooManyFlavors { .. } => "TooManyFlavors",
            Refusal::RepeatedCoverage { .. } => "RepeatedCoverage",
            Refusal::OverlappingSelectors { .. } => "OverlappingSelectors",
            Refusal::MissingTopology { .. } => "TopologyMissing",
            Refusal::TopologyDrift { .. } => "TopologyDrift",
            Refusal::QuotaNotConserved { .. } => "QuotaNotConserved",
        }
    }
}

/// What the plan is checked against.
pub struct Context<'a> {
    /// The flavors the plan may name, by name.
    pub flavors: &'a BTreeMap<String, &'a ResourceFlavor>,
    /// The state of a Topology, by name.
    pub topology: &'a dyn Fn(&str) -> TopologyState,
    /// Every managed node's name and labels.
    pub nodes: &'a [(&'a str, &'a BTreeMap<String, String>)],
    /// What the pool's member nodes hold, in the covered resource's unit.
    pub capacity: u64,
}

/// The first reason to refuse `groups`, in the order the reference lists them.
pub fn validate(groups: &[ResourceGroup], ctx: &Context) -> Result<(), Refusal> {
    let names: Vec<&str> = groups
        .iter()
        .flat_map(|g| g.flavors.iter().map(|f| f.name.as_str()))
        .collect();
    if names.len() > MAX_FLAVORS {
        return Err(Refusal::TooManyFlavors {
            count: names.len(),
            over: names[MAX_FLAVORS..]
                .iter()
                .map(|n| (*n).to_owned())
                .collect(),
        });
    }
    let mut seen = BTreeSet::new();
    if let Some(dup) = names.iter().find(|n| !seen.insert(**n)) {
        return Err(Refusal::RepeatedCoverage {
            what: format!("flavor {dup}"),
        });
    }
    let mut covered = BTreeSet::new();
    for r in groups.iter().flat_map(|g| g.covered_resources.iter()) {
        if !covered.insert(r.as_str()) {
            let flavors: Vec<&str> = groups
                .iter()
                .filter(|g| g.covered_resources.contains(r))
                .flat_map(|g| g.flavors.iter().map(|f| f.name.as_str()))
                .collect();
            return Err(Refusal::RepeatedCoverage {
                what: format!("resource {r} (in flavors {})", flavors.join(", ")),
            });
        }
    }
    let planned: Vec<&ResourceFlavor> = names
        .iter()
        .filter_map(|n| ctx.flavors.get(*n).copied())
        .collect();
    // Kueue picks the first flavor that fits: a node two flavors select is counted twice.
    for (node, labels) in ctx.nodes {
        let mut selecting = planned.iter().filter(|f| {
            !f.spec.node_labels.is_empty()
                && super::label_match::matches(labels, &f.spec.node_labels)
        });
        if let (Some(a), Some(b)) = (selecting.next(), selecting.next()) {
            return Err(Refusal::OverlappingSelectors {
                first: a.metadata.name.clone().unwrap_or_default(),
                second: b.metadata.name.clone().unwrap_or_default(),
                node: (*node).to_owned(),
            });
        }
    }
    for f in &planned {
        let Some(topology) = f.spec.topology_name.as_deref() else {
            continue;
        };
        let flavor = f.metadata.name.clone().unwrap_or_default();
        match (ctx.topology)(topology) {
            TopologyState::Ready => {}
            TopologyState::Missing => {
                return Err(Refusal::MissingTopology {
                    flavor,
                    topology: topology.to_owned(),
                });
            }
            TopologyState::Drifted { have, want } => {
                return Err(Refusal::TopologyDrift {
                    flavor,
                    topology: topology.to_owned(),
                    have,
                    want,
                });
            }
        }
    }
    for g in groups {
        for resource in &g.covered_resources {
            let planned: u64 = g
                .flavors
                .iter()
                .flat_map(|f| f.resources.iter().filter(|r| &r.name == resource))
                .map(|r| r.nominal_quota.0.parse::<u64>().unwrap_or(0))
                .sum();
            if planned != ctx.capacity {
                return Err(Refusal::QuotaNotConserved {
                    resource: resource.clone(),
                    planned,
                    capacity: ctx.capacity,
                    flavors: g.flavors.iter().map(|f| f.name.clone()).collect(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use gpustack_api::kueue::{FlavorQuotas, ResourceFlavorSpec, ResourceQuota};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use kube::api::ObjectMeta;

    use super::*;

    fn flavor(name: &str, selector: &[(&str, &str)], topology: &str) -> ResourceFlavor {
        ResourceFlavor {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: ResourceFlavorSpec {
                node_labels: selector
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                topology_name: Some(topology.into()),
                ..ResourceFlavorSpec::default()
            },
        }
    }

    fn group(resource: &str, quotas: &[(&str, u64)]) -> ResourceGroup {
        ResourceGroup {
            covered_resources: vec![resource.into()],
            flavors: quotas
                .iter()
                .map(|(n, q)| FlavorQuotas {
                    name: (*n).into(),
                    resources: vec![ResourceQuota {
                        name: resource.into(),
                        nominal_quota: Quantity(q.to_string()),
                    }],
                })
                .collect(),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Checks `groups` over flavors `a` (8 cards per node) and `b` (4), on nodes `n1` (8) and
    /// `n2` (4), with `state` for every Topology and `capacity`.
    fn check(
        groups: &[ResourceGroup],
        extra: &[ResourceFlavor],
        nodes: &[(&str, BTreeMap<String, String>)],
        state: TopologyState,
        capacity: u64,
    ) -> Result<(), Refusal> {
        let a = flavor("a", &[("count", "8")], "gpustack-t");
        let b = flavor("b", &[("count", "4")], "gpustack-t");
        let mut flavors: BTreeMap<String, &ResourceFlavor> =
            BTreeMap::from([("a".to_owned(), &a), ("b".to_owned(), &b)]);
        for f in extra {
            flavors.insert(f.metadata.name.clone().unwrap(), f);
        }
        let nodes: Vec<(&str, &BTreeMap<String, String>)> =
            nodes.iter().map(|(n, l)| (*n, l)).collect();
        let topology = move |_: &str| state.clone();
        validate(
            groups,
            &Context {
                flavors: &flavors,
                topology: &topology,
                nodes: &nodes,
                capacity,
            },
        )
    }

    #[test]
    fn refusals() {
        let n1 = ("n1", labels(&[("count", "8")]));
        let n2 = ("n2", labels(&[("count", "4")]));
        let nodes = [n1, n2];
        let r = "credits.gpustack.ai/nvidia";
        let sound = [group(r, &[("b", 4), ("a", 8)])];
        assert_eq!(check(&sound, &[], &nodes, TopologyState::Ready, 12), Ok(()));

        let many: Vec<(String, u64)> = (0..65).map(|i| (format!("f{i:02}"), 1)).collect();
        let many: Vec<(&str, u64)> = many.iter().map(|(n, q)| (n.as_str(), *q)).collect();
        match check(&[group(r, &many)], &[], &[], TopologyState::Ready, 65) {
            Err(Refusal::TooManyFlavors { count: 65, over }) => assert_eq!(over, ["f64"]),
            other => panic!("{other:?}"),
        }

        let twice = [group(r, &[("a", 8), ("a", 8)])];
        let e = check(&twice, &[], &nodes, TopologyState::Ready, 16).unwrap_err();
        assert_eq!(e.reason(), "RepeatedCoverage");
        assert!(e.to_string().contains("flavor a"), "{e}");
        let two_groups = [group(r, &[("a", 8)]), group(r, &[("b", 4)])];
        let e = check(&two_groups, &[], &nodes, TopologyState::Ready, 12).unwrap_err();
        assert!(
            e.to_string().contains(&format!("{r} (in flavors a, b)")),
            "{e}"
        );

        let gpu = flavor("gpu", &[("gpu", "true")], "gpustack-t");
        let both = ("n3", labels(&[("count", "8"), ("gpu", "true")]));
        let overlapping = [group(r, &[("a", 8), ("gpu", 8)])];
        let e = check(&overlapping, &[gpu], &[both], TopologyState::Ready, 16).unwrap_err();
        assert_eq!(
            e,
            Refusal::OverlappingSelectors {
                first: "a".into(),
                second: "gpu".into(),
                node: "n3".into()
            }
        );

        let e = check(&sound, &[], &nodes, TopologyState::Missing, 12).unwrap_err();
        assert_eq!(e.reason(), "TopologyMissing");
        assert!(
            e.to_string().contains("flavor b") && e.to_string().contains("gpustack-t"),
            "{e}"
        );
        let drift = TopologyState::Drifted {
            have: vec!["x".into()],
            want: vec!["kubernetes.io/hostname".into()],
        };
        assert_eq!(
            check(&sound, &[], &nodes, drift, 12).unwrap_err().reason(),
            "TopologyDrift"
        );

        let e = check(&sound, &[], &nodes, TopologyState::Ready, 8).unwrap_err();
        assert_eq!(e.reason(), "QuotaNotConserved");
        assert!(
            e.to_string().contains("12") && e.to_string().contains("flavors b, a"),
            "{e}"
        );
    }
}
