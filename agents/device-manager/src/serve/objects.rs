//! Writing the node's objects: the `Devices` spec and status (only this agent's manufacturers'
//! groups replaced) and the accelerator labels: as an NFD `NodeFeature` where that kind is
//! served (NFD's master then labels the Node), else on the Node directly (field-managed merge
//! patches).

use futures::future::BoxFuture;
use gpustack_api::{
    Manufacturer,
    devices::{Devices, DevicesGroup, DevicesSpec, DevicesStatus},
};
use k8s_openapi::{
    api::core::v1::Node,
    apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, OwnerReference},
};
use kube::{
    Client,
    api::{
        Api, ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams,
        PostParams,
    },
};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};

use super::labels::{align_groups, node_label_patch, node_labels};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "gpustack-device-manager";

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Creates the node's `Devices` (owned by the Node) or replaces this agent's groups in it.
pub fn publish_spec<'a>(
    client: &'a Client,
    node: &'a str,
    ours: &'a [Manufacturer],
    detected: &'a [DevicesGroup],
) -> BoxFuture<'a, Result<(), kube::Error>> {
    Box::pin(async move {
        let api: Api<Devices> = Api::all(client.clone());
        match api.get_opt(node).await? {
            None => {
                let owner = Api::<Node>::all(client.clone())
                    .get_opt(node)
                    .await?
                    .map(|n| OwnerReference {
                        api_version: "v1".into(),
                        kind: "Node".into(),
                        name: node.into(),
                        uid: n.metadata.uid.unwrap_or_default(),
                        controller: Some(true),
                        block_owner_deletion: None,
                    });
                if owner.is_none() {
                    tracing::warn!(
                        node,
                        "Node not found: the Devices object is created without an owner"
                    );
                }
                let obj = Devices {
                    metadata: ObjectMeta {
                        name: Some(node.into()),
                        owner_references: owner.map(|o| vec![o]),
                        ..ObjectMeta::default()
                    },
                    spec: DevicesSpec {
                        groups: align_groups(&[], ours, detected),
                    },
                    status: None,
                };
                api.create(
                    &PostParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..PostParams::default()
                    },
                    &obj,
                )
                .await?;
            }
            Some(current) => {
                let groups = align_groups(&current.spec.groups, ours, detected);
                if groups != current.spec.groups {
                    api.patch(
                        node,
                        &params(),
                        &Patch::Merge(json!({"spec": {"groups": groups}})),
                    )
                    .await?;
                }
            }
        }
        Ok(())
    })
}

/// Replaces this agent's groups in `Devices.status`; `false` when the object does not exist
/// yet (the spec writer creates it: try again later).
pub async fn publish_status(
    client: &Client,
    node: &str,
    ours: &[Manufacturer],
    status: &DevicesStatus,
) -> Result<bool, kube::Error> {
    let api: Api<Devices> = Api::all(client.clone());
    let Some(current) = api.get_opt(node).await? else {
        return Ok(false);
    };
    let mut groups: Vec<_> = current
        .status
        .as_ref()
        .map(|s| {
            s.groups
                .iter()
                .filter(|g| !ours.contains(&g.manufacturer))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    groups.extend(status.groups.iter().cloned());
    groups.sort_by(|a, b| (a.manufacturer, &a.id).cmp(&(b.manufacturer, &b.id)));
    if current.status.as_ref().map(|s| &s.groups) != Some(&groups) {
        api.patch_status(
            node,
            &params(),
            &Patch::Merge(json!({"status": {"groups": groups}})),
        )
        .await?;
    }
    Ok(true)
}

/// Sets the accelerator labels on the Node and removes stale ones of this agent.
pub fn publish_labels<'a>(
    client: &'a Client,
    node: &'a str,
    ours: &'a [Manufacturer],
    detected: &'a [DevicesGroup],
) -> BoxFuture<'a, Result<(), kube::Error>> {
    Box::pin(async move {
        let api: Api<Node> = Api::all(client.clone());
        let Some(current) = api.get_opt(node).await? else {
            tracing::warn!(node, "Node not found: accelerator labels not published");
            return Ok(());
        };
        let have = current.metadata.labels.unwrap_or_default();
        let patch = node_label_patch(&have, node_labels(detected), ours, |_| true);
        patch_labels(&api, node, patch).await
    })
}

/// Removes from the Node the labels of `ours` that this agent wrote there itself (its field
/// manager owns them), once NFD's `NodeFeature` carries the labels instead; labels NFD's
/// master or anyone else wrote stay. Answers how many were removed.
pub async fn remove_direct_labels(
    client: &Client,
    node: &str,
    ours: &[Manufacturer],
) -> Result<usize, kube::Error> {
    let api: Api<Node> = Api::all(client.clone());
    let Some(current) = api.get_opt(node).await? else {
        return Ok(0);
    };
    let written = labels_owned_by(&current.metadata.managed_fields, FIELD_MANAGER);
    let have = current.metadata.labels.unwrap_or_default();
    let patch = node_label_patch(&have, BTreeMap::new(), ours, |k| written.contains(k));
    let removed = patch.values().filter(|v| v.is_none()).count();
    patch_labels(&api, node, patch).await?;
    Ok(removed)
}

async fn patch_labels(
    api: &Api<Node>,
    node: &str,
    patch: BTreeMap<String, Option<String>>,
) -> Result<(), kube::Error> {
    if patch.is_empty() {
        return Ok(());
    }
    let labels: Map<String, Value> = patch
        .into_iter()
        .map(|(k, v)| (k, v.map_or(Value::Null, Value::String)))
        .collect();
    api.patch(
        node,
        &params(),
        &Patch::Merge(json!({"metadata": {"labels": labels}})),
    )
    .await?;
    Ok(())
}

/// The label keys `manager`'s `Update` entries own (`f:metadata` → `f:labels` → `f:<key>`).
fn labels_owned_by(entries: &Option<Vec<ManagedFieldsEntry>>, manager: &str) -> BTreeSet<String> {
    entries
        .iter()
        .flatten()
        .filter(|e| {
            e.manager.as_deref() == Some(manager) && e.operation.as_deref() == Some("Update")
        })
        .filter_map(|e| e.fields_v1.as_ref())
        .filter_map(|f| f.0.pointer("/f:metadata/f:labels")?.as_object())
        .flat_map(|labels| labels.keys().filter_map(|k| k.strip_prefix("f:")))
        .map(str::to_owned)
        .collect()
}

pub use gpustack_api::nfd::{
    GROUP as NODE_FEATURE_GROUP, KIND as NODE_FEATURE_KIND, NODE_NAME_LABEL as NFD_NODE_NAME_LABEL,
    VERSION as NODE_FEATURE_VERSION,
};

/// The node's `NodeFeature` name: `<node>-gpustack-device-manager`.
pub fn node_feature_name(node: &str) -> String {
    format!("{node}-gpustack-device-manager")
}

/// Whether the cluster serves NFD's `NodeFeature` kind (a discovery read).
pub async fn node_feature_served(client: &Client) -> Result<bool, kube::Error> {
    match client
        .list_api_group_resources(&format!("{NODE_FEATURE_GROUP}/{NODE_FEATURE_VERSION}"))
        .await
    {
        Ok(list) => Ok(list.resources.iter().any(|r| r.kind == NODE_FEATURE_KIND)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// The agent's `NodeFeature` object carrying `labels` for `node`.
pub fn node_feature(
    node: &str,
    namespace: &str,
    node_uid: Option<&str>,
    labels: &BTreeMap<String, String>,
) -> serde_json::Value {
    gpustack_api::nfd::node_feature(&node_feature_name(node), node, namespace, node_uid, labels)
}

/// The field manager of the `NodeFeature` apply: one per manufacturer set, since every
/// manufacturer's agent on a node applies its labels to the same object, and each must own only
/// its own keys (a key two agents send with one value, the shared marker, is co-owned).
pub fn node_feature_manager(ours: &[Manufacturer]) -> String {
    let names: Vec<&str> = ours.iter().map(|m| m.as_str()).collect();
    format!("{FIELD_MANAGER}-{}", names.join("-"))
}

/// Applies (server-side) the node's `NodeFeature` with `labels`; labels this agent applied
/// before and no longer sends are dropped by the apply.
pub async fn publish_node_feature(
    client: &Client,
    node: &str,
    namespace: &str,
    ours: &[Manufacturer],
    labels: &BTreeMap<String, String>,
) -> Result<(), kube::Error> {
    let uid = Api::<Node>::all(client.clone())
        .get_opt(node)
        .await?
        .and_then(|n| n.metadata.uid);
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(NODE_FEATURE_GROUP, NODE_FEATURE_VERSION, NODE_FEATURE_KIND),
        "nodefeatures",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let params = PatchParams::apply(&node_feature_manager(ours)).force();
    api.patch(
        &node_feature_name(node),
        &params,
        &Patch::Apply(node_feature(node, namespace, uid.as_deref(), labels)),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_owned_by_reads_the_update_entries_of_one_manager() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
        let entry = |manager: &str, op: &str, keys: &[&str]| {
            let labels: Map<String, Value> =
                keys.iter().map(|k| (format!("f:{k}"), json!({}))).collect();
            ManagedFieldsEntry {
                manager: Some(manager.into()),
                operation: Some(op.into()),
                fields_v1: Some(FieldsV1(json!({"f:metadata": {"f:labels": labels}}))),
                ..ManagedFieldsEntry::default()
            }
        };
        let entries = Some(vec![
            entry(FIELD_MANAGER, "Update", &["a", "b"]),
            entry("nfd-master", "Update", &["c"]),
            entry(FIELD_MANAGER, "Apply", &["d"]),
        ]);
        let got = labels_owned_by(&entries, FIELD_MANAGER);
        assert_eq!(got, ["a".to_owned(), "b".to_owned()].into());
        assert!(labels_owned_by(&None, FIELD_MANAGER).is_empty());
    }

    #[test]
    fn node_feature_shape() {
        let labels: BTreeMap<String, String> = [(
            "feature.gpustack.ai/acceleratable".to_owned(),
            "true".to_owned(),
        )]
        .into();
        let nf = node_feature("n1", "gpustack-system", Some("u-1"), &labels);
        assert_eq!(nf["apiVersion"], "nfd.k8s-sigs.io/v1alpha1");
        assert_eq!(nf["metadata"]["name"], "n1-gpustack-device-manager");
        assert_eq!(nf["metadata"]["namespace"], "gpustack-system");
        assert_eq!(
            nf["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"],
            "n1"
        );
        assert_eq!(nf["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(
            nf["spec"]["labels"]["feature.gpustack.ai/acceleratable"],
            "true"
        );
        assert!(
            node_feature("n1", "ns", None, &labels)["metadata"]
                .get("ownerReferences")
                .is_none()
        );
        assert_eq!(
            node_feature_manager(&[Manufacturer::Nvidia, Manufacturer::Amd]),
            "gpustack-device-manager-nvidia-amd"
        );
    }
}
