//! `worker.gpustack.ai/v1alpha1` `TopologySource`: the node label hierarchy (zone, rack, ...)
//! that topology-aware scheduling uses for the nodes it selects (worker.md §1.4).
//!
//! Cluster-scoped. An admin writes `spec`; the worker validates it and writes `status`
//! (`sourceKind` `Labels`, the `Ready` condition, the last generation it accepted). A node
//! matched by exactly one Ready source gets that source's hierarchy; otherwise its hierarchy is
//! the hostname alone.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
#[cfg(feature = "schema")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::labels::HOSTNAME;

/// What a source reads levels from: the nodes' own labels (the only kind there is).
pub const SOURCE_KIND_LABELS: &str = "Labels";
/// Most levels a hierarchy may have (Kueue's Topology allows 16, the hostname takes one).
pub const MAX_LEVELS: usize = 15;

/// Where the topology hierarchy of a set of nodes comes from: node label keys, outermost first.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[cfg_attr(not(feature = "schema"), kube(schema = "disabled"))]
#[kube(
    group = "worker.gpustack.ai",
    version = "v1alpha1",
    kind = "TopologySource",
    plural = "topologysources",
    shortname = "toposrc",
    category = "gpustack",
    status = "TopologySourceStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Kind","type":"string","jsonPath":".status.sourceKind"}"#,
    printcolumn = r#"{"name":"Revision","type":"integer","jsonPath":".status.lastSuccessfulRevision"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct TopologySourceSpec {
    /// Labels a node must carry to take this hierarchy; empty selects every node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Node label keys, outermost first (`topology.kubernetes.io/zone`, then a rack label...).
    /// `kubernetes.io/hostname` is always appended as the innermost level.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 15)))]
    pub levels: Vec<String>,
}

/// What the worker made of a TopologySource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TopologySourceStatus {
    /// How the hierarchy was derived: `Labels` (from the nodes' labels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_kind: Option<String>,
    /// The last `metadata.generation` whose spec was accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_revision: Option<i64>,
    /// `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])))]
    pub conditions: Vec<Condition>,
}

/// What a spec may not say; each message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTopologySource {
    /// No level was given.
    #[error("spec.levels is empty")]
    NoLevels,
    /// More levels than Kueue's Topology allows.
    #[error("spec.levels has {0} entries; at most {MAX_LEVELS} are allowed")]
    TooManyLevels(usize),
    /// A level is not a valid label key.
    #[error("spec.levels[{index}] {key:?} is not a valid label key")]
    BadKey {
        /// The level's position in `spec.levels`.
        index: usize,
        /// The key given.
        key: String,
    },
    /// A level appears twice.
    #[error("spec.levels[{index}] {key:?} repeats an earlier level")]
    Duplicate {
        /// The level's position in `spec.levels`.
        index: usize,
        /// The key given.
        key: String,
    },
    /// A level names the hostname label, which is always appended.
    #[error("spec.levels[{index}] is {HOSTNAME}, which is always the innermost level already")]
    Hostname {
        /// The level's position in `spec.levels`.
        index: usize,
    },
    /// A node selector key is not a valid label key.
    #[error("spec.nodeSelector key {0:?} is not a valid label key")]
    BadSelectorKey(String),
}

impl TopologySourceSpec {
    /// Checks the spec against the rules above; the error names the field.
    pub fn validate(&self) -> Result<(), InvalidTopologySource> {
        use InvalidTopologySource as E;
        if self.levels.is_empty() {
            return Err(E::NoLevels);
        }
        if self.levels.len() > MAX_LEVELS {
            return Err(E::TooManyLevels(self.levels.len()));
        }
        let mut seen = BTreeSet::new();
        for (index, key) in self.levels.iter().enumerate() {
            if !is_label_key(key) {
                return Err(E::BadKey {
                    index,
                    key: key.clone(),
                });
            }
            if key == HOSTNAME {
                return Err(E::Hostname { index });
            }
            if !seen.insert(key.as_str()) {
                return Err(E::Duplicate {
                    index,
                    key: key.clone(),
                });
            }
        }
        if let Some(k) = self.node_selector.keys().find(|k| !is_label_key(k)) {
            return Err(E::BadSelectorKey(k.clone()));
        }
        Ok(())
    }
}

/// A Kubernetes label key: an optional DNS-subdomain prefix and `/`, then a name of at most
/// 63 alphanumerics, `-`, `_` or `.` that starts and ends alphanumeric.
pub fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let alnum_ends = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && alnum_ends(name)
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && alnum_ends(part)
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    name_ok && prefix_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(levels: &[&str]) -> TopologySourceSpec {
        TopologySourceSpec {
            node_selector: BTreeMap::new(),
            levels: levels.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn label_keys() {
        for ok in [
            "zone",
            "topology.kubernetes.io/zone",
            "example.com/rack_1",
            "a.b-c",
        ] {
            assert!(is_label_key(ok), "{ok}");
        }
        for bad in [
            "",
            "/zone",
            "Example.com/zone",
            "zone-",
            "a/b/c",
            &"x".repeat(64),
        ] {
            assert!(!is_label_key(bad), "{bad}");
        }
    }

    #[test]
    fn specs_are_validated() {
        use InvalidTopologySource as E;
        assert_eq!(
            spec(&["topology.kubernetes.io/zone", "example.com/rack"]).validate(),
            Ok(())
        );
        assert_eq!(spec(&[]).validate(), Err(E::NoLevels));
        assert_eq!(
            spec(&["zone", "rack", "zone"]).validate(),
            Err(E::Duplicate {
                index: 2,
                key: "zone".into()
            })
        );
        assert_eq!(
            spec(&["zone", "bad key"]).validate(),
            Err(E::BadKey {
                index: 1,
                key: "bad key".into()
            })
        );
        assert_eq!(
            spec(&["zone", HOSTNAME]).validate(),
            Err(E::Hostname { index: 1 })
        );
        let many: Vec<String> = (0..16).map(|i| format!("l{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(spec(&refs).validate(), Err(E::TooManyLevels(16)));
    }
}
