//! Which nodes can mount the model cache: the kubelet writes a node's `CSINode` (storage.k8s.io)
//! when a CSI plugin registers with it, listing the driver in `spec.drivers`, and drops it from
//! there when the plugin goes. Nodes whose CSINode lists [`MODEL_CSI_DRIVER`] get the label
//! [`MODEL_CSI_REGISTERED`]`=true`; the label goes with the driver. The Workload webhook pins
//! PodSets that mount the driver to that label.
//!
//! [`plan`] is the pure decision; [`run`] watches Nodes and CSINodes and applies it.

use std::{collections::BTreeSet, time::Instant};

use futures::StreamExt;
use gpustack_api::labels::{MODEL_CSI_DRIVER, MODEL_CSI_REGISTERED};
use k8s_openapi::api::{core::v1::Node, storage::v1::CSINode};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{WatchStreamExt, reflector, reflector::ObjectRef, watcher},
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{
    ownership::owned_keys,
    reconcile_metrics::{Loop, ReconcileMetrics},
};

/// The field manager of this label alone. Not the worker's main one: a server-side apply drops
/// the fields its manager applied before and omits now, so the node-label loop's applies and
/// these would remove each other's labels.
pub const MANAGER: &str = "gpustack-worker-model-manager-nodes";

/// Whether `csi` lists the model cache's driver.
pub fn registered(csi: Option<&CSINode>) -> bool {
    csi.is_some_and(|c| c.spec.drivers.iter().any(|d| d.name == MODEL_CSI_DRIVER))
}

/// The apply that brings `node`'s label in line with its CSINode `csi`, if one is needed.
pub fn plan(node: &Node, csi: Option<&CSINode>) -> Option<Value> {
    let name = node.name_any();
    let has = node.labels().get(MODEL_CSI_REGISTERED).map(String::as_str) == Some("true");
    let ours = owned_keys(&node.metadata, None, &["metadata", "labels"], |m| {
        m == MANAGER
    })
    .contains(MODEL_CSI_REGISTERED);
    let want = registered(csi);
    let body = |labels: Value| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}});
    match (want, has, ours) {
        (true, true, true) => None,
        (true, _, _) => Some(body(json!({MODEL_CSI_REGISTERED: "true"}))),
        // Applying nothing gives up the label; one set by someone else is theirs.
        (false, _, true) => Some(body(json!({}))),
        (false, _, false) => None,
    }
}

/// Forwards the name of every `K` the cluster reports into `tx`, keeping `writer`'s store.
fn follow<K>(
    client: &kube::Client,
    writer: reflector::store::Writer<K>,
    tx: mpsc::UnboundedSender<String>,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let stream = gpustack_watch::objects::<K>(client.clone(), None, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .touched_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(o) => {
                    let _ = tx.send(o.name_any());
                }
                Err(e) => tracing::debug!("watch {}: {e}", K::plural(&())),
            }
        }
    })
}

/// Keeps the label until the task is dropped (the controllers' leadership ends).
pub async fn run(client: kube::Client, metrics: ReconcileMetrics) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (nodes, node_writer) = reflector::store::<Node>();
    let (csi_nodes, csi_writer) = reflector::store::<CSINode>();
    let tasks = [
        follow::<Node>(&client, node_writer, tx.clone()),
        follow::<CSINode>(&client, csi_writer, tx),
    ];
    struct Abort<const N: usize>([tokio::task::JoinHandle<()>; N]);
    impl<const N: usize> Drop for Abort<N> {
        fn drop(&mut self) {
            self.0.iter().for_each(|t| t.abort());
        }
    }
    let _abort = Abort(tasks);
    let api: Api<Node> = Api::all(client);
    let params = PatchParams::apply(MANAGER).force();
    while let Some(first) = rx.recv().await {
        // A burst of events is one pass over the nodes it names.
        let mut names = BTreeSet::from([first]);
        while let Ok(n) = rx.try_recv() {
            names.insert(n);
        }
        let mut pending = names.len();
        for name in names {
            metrics.set_model_manager_nodes_depth(pending);
            pending -= 1;
            let Some(node) = nodes.get(&ObjectRef::new(&name)) else {
                continue;
            };
            let started = Instant::now();
            let csi = csi_nodes.get(&ObjectRef::new(&name));
            let mut ok = true;
            if let Some(body) = plan(&node, csi.as_deref()) {
                match api.patch(&name, &params, &Patch::Apply(body)).await {
                    Ok(_) => tracing::debug!(node = name, "model-manager registration label"),
                    Err(e) => {
                        ok = false;
                        tracing::warn!(node = name, "model-manager registration label: {e}")
                    }
                }
            }
            metrics.observe(Loop::ModelManagerNodes, ok, started.elapsed());
        }
        metrics.set_model_manager_nodes_depth(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};

    fn csi(drivers: &[&str]) -> CSINode {
        serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "spec": {"drivers": drivers.iter().map(|d| json!({"name": d, "nodeID": "n1"})).collect::<Vec<_>>()},
        }))
        .unwrap()
    }

    fn node(label: Option<&str>, manager: Option<&str>) -> Node {
        let mut n: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
        if let Some(v) = label {
            n.metadata.labels = Some([(MODEL_CSI_REGISTERED.to_owned(), v.to_owned())].into());
        }
        if let Some(m) = manager {
            n.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
                manager: Some(m.into()),
                operation: Some("Apply".into()),
                fields_v1: Some(FieldsV1(json!({"f:metadata": {"f:labels": {
                    format!("f:{MODEL_CSI_REGISTERED}"): {}}}}))),
                ..Default::default()
            }]);
        }
        n
    }

    #[test]
    fn the_label_follows_the_driver() {
        let with = csi(&["other.csi.example.com", MODEL_CSI_DRIVER]);
        let without = csi(&["other.csi.example.com"]);
        assert!(registered(Some(&with)));
        assert!(!registered(Some(&without)));
        assert!(!registered(None));

        let set = plan(&node(None, None), Some(&with)).expect("labelled");
        assert_eq!(set["metadata"]["labels"][MODEL_CSI_REGISTERED], "true");
        assert_eq!(set["metadata"]["name"], "n1");
        assert_eq!(
            plan(&node(Some("true"), Some(MANAGER)), Some(&with)),
            None,
            "nothing to do"
        );
        // Someone else's label: taken over, so that it goes with the driver.
        assert!(plan(&node(Some("true"), Some("admin")), Some(&with)).is_some());
        let gone = plan(&node(Some("true"), Some(MANAGER)), Some(&without)).expect("given up");
        assert_eq!(gone["metadata"]["labels"], json!({}));
        assert!(plan(&node(Some("true"), Some(MANAGER)), None).is_some());
        assert_eq!(plan(&node(None, None), None), None);
        assert_eq!(
            plan(&node(Some("false"), Some("admin")), None),
            None,
            "an admin's own label stays"
        );
    }
}
