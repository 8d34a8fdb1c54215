//! Node Feature Discovery's `NodeFeature` (`nfd.k8s-sigs.io/v1alpha1`): where the operator's
//! agents put node labels when NFD runs, for NFD's master to set on the Node. Each agent
//! writes its own object, `<node>-<writer>`, in the system namespace.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The API group of Node Feature Discovery's kinds.
pub const GROUP: &str = "nfd.k8s-sigs.io";
/// The NodeFeature API version the device manager writes.
pub const VERSION: &str = "v1alpha1";
/// The kind the device manager publishes node feature labels with.
pub const KIND: &str = "NodeFeature";
/// Its plural resource name.
pub const PLURAL: &str = "nodefeatures";
/// The label NFD reads to know which node a `NodeFeature` describes.
pub const NODE_NAME_LABEL: &str = "nfd.node.kubernetes.io/node-name";

/// The `NodeFeature` `name` carrying `labels` for `node` (owned by the Node when `node_uid`
/// is known).
pub fn node_feature(
    name: &str,
    node: &str,
    namespace: &str,
    node_uid: Option<&str>,
    labels: &BTreeMap<String, String>,
) -> Value {
    let mut meta = json!({
        "name": name,
        "namespace": namespace,
        "labels": {NODE_NAME_LABEL: node},
    });
    if let Some(uid) = node_uid {
        meta["ownerReferences"] = json!([{
            "apiVersion": "v1", "kind": "Node", "name": node, "uid": uid,
        }]);
    }
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": KIND,
        "metadata": meta,
        "spec": {"labels": labels},
    })
}
