//! Topology hierarchies (worker.md §1.4): which label levels a node's topology-aware scheduling
//! uses, from the `TopologySource`s that match it, the Kueue `Topology` each hierarchy gets, and
//! the status the worker reports on each source.

use std::collections::BTreeMap;

use gpustack_api::{
    kueue::{Topology, TopologyLevel, TopologySpec},
    labels::{HOSTNAME, RESOURCE_TYPE},
    topology_source::{SOURCE_KIND_LABELS, TopologySource, TopologySourceStatus},
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ObjectMeta;

use super::{
    conditions::{self, Wanted},
    label_match::matches,
};
use crate::names::topology_profile;

/// Whether the worker accepts the source: a valid spec, not being deleted.
pub fn ready(source: &TopologySource) -> bool {
    source.metadata.deletion_timestamp.is_none() && source.spec.validate().is_ok()
}

/// The node's levels, outermost first, ending with the hostname: the longest prefix of the
/// one Ready source's levels that the node carries non-empty labels for. With no matching
/// source, or several (ambiguous), the hierarchy is the hostname alone.
pub fn node_levels(labels: &BTreeMap<String, String>, sources: &[TopologySource]) -> Vec<String> {
    let mut matching = sources
        .iter()
        .filter(|s| ready(s) && matches(labels, &s.spec.node_selector));
    let mut levels: Vec<String> = match (matching.next(), matching.next()) {
        (Some(one), None) => one
            .spec
            .levels
            .iter()
            .take_while(|k| labels.get(*k).is_some_and(|v| !v.is_empty()))
            .cloned()
            .collect(),
        _ => Vec::new(),
    };
    levels.push(HOSTNAME.to_owned());
    levels
}

/// The profile of a hierarchy (`fnv64-<hash>`).
pub fn profile(levels: &[String]) -> String {
    topology_profile(levels)
}

/// The Kueue Topology of a hierarchy, `gpustack-<profile>`.
pub fn topology(levels: &[String]) -> Topology {
    Topology {
        metadata: ObjectMeta {
            name: Some(format!("gpustack-{}", profile(levels))),
            labels: Some(BTreeMap::from([(
                RESOURCE_TYPE.to_owned(),
                "nodes".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: TopologySpec {
            levels: levels
                .iter()
                .map(|l| TopologyLevel {
                    node_label: l.clone(),
                })
                .collect(),
        },
    }
}

/// The status the source should have, or `None` when it already has it.
pub fn source_status(source: &TopologySource, now: &Time) -> Option<TopologySourceStatus> {
    let generation = source.metadata.generation;
    let have = source.status.clone().unwrap_or_default();
    let verdict = source.spec.validate();
    let want = Wanted {
        type_: "Ready",
        ok: verdict.is_ok(),
        reason: if verdict.is_ok() {
            "Valid"
        } else {
            "InvalidSpec"
        }
        .to_owned(),
        message: match &verdict {
            Ok(()) => format!("levels {} then {HOSTNAME}", source.spec.levels.join(", ")),
            Err(e) => e.to_string(),
        },
        observed_generation: generation,
    };
    let condition = conditions::update(&have.conditions, &want, now);
    // A refused spec keeps the revision that last worked.
    let revision = if verdict.is_ok() {
        generation
    } else {
        have.last_successful_revision
    };
    let kind_current = have.source_kind.as_deref() == Some(SOURCE_KIND_LABELS);
    if condition.is_none() && kind_current && have.last_successful_revision == revision {
        return None;
    }
    let conditions = match condition {
        Some(c) => vec![c],
        None => have
            .conditions
            .into_iter()
            .filter(|c| c.type_ == "Ready")
            .collect(),
    };
    Some(TopologySourceStatus {
        source_kind: Some(SOURCE_KIND_LABELS.to_owned()),
        last_successful_revision: revision,
        conditions,
    })
}

#[cfg(test)]
mod tests {
    use gpustack_api::topology_source::TopologySourceSpec;

    use super::*;

    const ZONE: &str = "topology.kubernetes.io/zone";
    const RACK: &str = "example.com/rack";

    fn source(name: &str, selector: &[(&str, &str)], levels: &[&str]) -> TopologySource {
        let mut s = TopologySource::new(
            name,
            TopologySourceSpec {
                node_selector: selector
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                levels: levels.iter().map(|l| (*l).to_owned()).collect(),
            },
        );
        s.metadata.generation = Some(3);
        s
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn one_matching_source_gives_its_populated_prefix_then_the_hostname() {
        let racks = source("racks", &[("pool", "gpu")], &[ZONE, RACK]);
        let node = labels(&[("pool", "gpu"), (ZONE, "z1"), (RACK, "r1")]);
        assert_eq!(
            node_levels(&node, std::slice::from_ref(&racks)),
            [ZONE, RACK, HOSTNAME]
        );
        // A node without the rack label stops at the zone; one without the zone gets none.
        let no_rack = labels(&[("pool", "gpu"), (ZONE, "z1")]);
        assert_eq!(
            node_levels(&no_rack, std::slice::from_ref(&racks)),
            [ZONE, HOSTNAME]
        );
        let rack_only = labels(&[("pool", "gpu"), (RACK, "r1")]);
        assert_eq!(
            node_levels(&rack_only, std::slice::from_ref(&racks)),
            [HOSTNAME]
        );
        let empty_zone = labels(&[("pool", "gpu"), (ZONE, ""), (RACK, "r1")]);
        assert_eq!(
            node_levels(&empty_zone, std::slice::from_ref(&racks)),
            [HOSTNAME]
        );
        // Not selected.
        let other = labels(&[(ZONE, "z1"), (RACK, "r1")]);
        assert_eq!(node_levels(&other, &[racks]), [HOSTNAME]);
    }

    #[test]
    fn none_several_or_invalid_sources_leave_the_hostname_alone() {
        let node = labels(&[(ZONE, "z1"), (RACK, "r1")]);
        assert_eq!(node_levels(&node, &[]), [HOSTNAME]);
        let a = source("a", &[], &[ZONE]);
        let b = source("b", &[], &[ZONE, RACK]);
        assert_eq!(node_levels(&node, &[a.clone(), b]), [HOSTNAME], "ambiguous");
        let broken = source("broken", &[], &[ZONE, ZONE]);
        assert_eq!(
            node_levels(&node, &[a.clone(), broken]),
            [ZONE, HOSTNAME],
            "only Ready ones count"
        );
        let mut deleting = a;
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(node_levels(&node, &[deleting]), [HOSTNAME]);
    }

    #[test]
    fn topologies_are_named_by_the_hash_of_their_levels() {
        let levels = vec![ZONE.to_owned(), HOSTNAME.to_owned()];
        let t = topology(&levels);
        // FNV-1a 64 of "topology.kubernetes.io/zone\0kubernetes.io/hostname", computed outside
        // this code (Python: h = 0xcbf29ce484222325; per byte h ^= b, h *= 0x100000001b3).
        assert_eq!(
            t.metadata.name.as_deref(),
            Some("gpustack-fnv64-f7b1861ac0399767")
        );
        assert_eq!(
            topology(&[HOSTNAME.to_owned()]).metadata.name.as_deref(),
            Some("gpustack-fnv64-87bf574bea2a4f23")
        );
        assert_eq!(
            t.metadata.labels,
            Some(BTreeMap::from([(
                "resource.gpustack.ai/type".to_owned(),
                "nodes".to_owned()
            )]))
        );
        let names: Vec<&str> = t
            .spec
            .levels
            .iter()
            .map(|l| l.node_label.as_str())
            .collect();
        assert_eq!(names, [ZONE, HOSTNAME]);
    }

    #[test]
    fn status_says_ready_with_the_generation_or_why_not() {
        let now = Time(jiff::Timestamp::from_second(100).unwrap());
        let mut ok = source("racks", &[], &[ZONE, RACK]);
        let st = source_status(&ok, &now).unwrap();
        assert_eq!(st.source_kind.as_deref(), Some("Labels"));
        assert_eq!(st.last_successful_revision, Some(3));
        assert_eq!(st.conditions[0].status, "True");
        ok.status = Some(st);
        assert_eq!(
            source_status(&ok, &now),
            None,
            "nothing to write when current"
        );
        // A bad edit: not Ready, the message says why, the good revision is kept.
        ok.spec.levels.push(ZONE.to_owned());
        ok.metadata.generation = Some(4);
        let st = source_status(&ok, &now).unwrap();
        assert_eq!(st.last_successful_revision, Some(3));
        assert_eq!(st.conditions[0].status, "False");
        assert!(
            st.conditions[0].message.contains("repeats"),
            "{}",
            st.conditions[0].message
        );
    }
}
