//! The fleet view: every upstream's mirrored objects together, served read-only as the cluster
//! [`FLEET`] (`/clusters/_fleet/`). Each object is stored a second time there, named
//! `CLUSTER.NAME` so names stay unique across upstreams (a cluster name is a DNS label, so the
//! first dot splits it off again), labelled `gpustack.ai/cluster=CLUSTER` (select one upstream
//! with a label selector) and annotated with its original name.
//!
//! Why a stored copy rather than a query across clusters: selectors, pagination, watch
//! resumption and tables then work exactly as for any cluster, and a fleet list costs what a
//! list of one cluster costs; the price is writing and storing each mirrored object twice.

use serde_json::{Value, json};

use crate::store::ObjectKey;

/// The cluster name of the fleet view. Not a DNS label, so no upstream or embedded cluster can
/// take it.
pub const FLEET: &str = "_fleet";

/// The label naming an object's upstream in the fleet view.
pub const CLUSTER_LABEL: &str = "gpustack.ai/cluster";

/// The annotation holding an object's name in its upstream.
pub const ORIGINAL_NAME: &str = "gpustack.ai/original-name";

/// The fleet view's name of `name` from `cluster`.
pub fn fleet_name(cluster: &str, name: &str) -> String {
    format!("{cluster}.{name}")
}

/// The (cluster, name) a fleet view name stands for.
pub fn original(fleet_name: &str) -> Option<(&str, &str)> {
    fleet_name.split_once('.')
}

/// The fleet view's key for a mirrored object's key.
pub fn fleet_key(key: &ObjectKey) -> ObjectKey {
    ObjectKey {
        cluster: FLEET.to_owned(),
        name: fleet_name(&key.cluster, &key.name),
        ..key.clone()
    }
}

/// The fleet view's copy of `body`, mirrored from `cluster`.
pub fn fleet_body(cluster: &str, mut body: Value) -> Value {
    let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) else {
        return body;
    };
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    meta.insert("name".into(), json!(fleet_name(cluster, &name)));
    for (field, k, v) in [
        ("labels", CLUSTER_LABEL, cluster.to_owned()),
        ("annotations", ORIGINAL_NAME, name),
    ] {
        let map = meta.entry(field).or_insert_with(|| json!({}));
        if !map.is_object() {
            *map = json!({});
        }
        if let Some(m) = map.as_object_mut() {
            m.insert(k.into(), json!(v));
        }
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_recoverable() {
        let n = fleet_name("east", "node-1.example");
        assert_eq!(n, "east.node-1.example");
        assert_eq!(original(&n), Some(("east", "node-1.example")));
        let key = ObjectKey {
            cluster: "east".into(),
            group: "".into(),
            resource: "nodes".into(),
            namespace: "".into(),
            name: "n".into(),
        };
        let f = fleet_key(&key);
        assert_eq!((f.cluster.as_str(), f.name.as_str()), (FLEET, "east.n"));
        assert_eq!(f.resource, "nodes");
    }

    #[test]
    fn copies_carry_cluster_label_and_original_name() {
        let body = json!({"metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {}});
        let got = fleet_body("west", body);
        assert_eq!(got["metadata"]["name"], "west.n");
        assert_eq!(
            got["metadata"]["labels"],
            json!({"a": "b", CLUSTER_LABEL: "west"})
        );
        assert_eq!(got["metadata"]["annotations"][ORIGINAL_NAME], "n");
        assert_eq!(got["spec"], json!({}));
    }
}
