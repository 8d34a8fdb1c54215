//! Writing the node's objects: the `Devices` spec and status (only this agent's manufacturers'
//! groups replaced) and the accelerator labels on the Node (field-managed merge patches).

use gpustack_api::{
    Manufacturer,
    devices::{Devices, DevicesGroup, DevicesSpec, DevicesStatus},
};
use k8s_openapi::{api::core::v1::Node, apimachinery::pkg::apis::meta::v1::OwnerReference};
use kube::{
    Client,
    api::{Api, ObjectMeta, Patch, PatchParams, PostParams},
};
use serde_json::{Map, Value, json};

use super::labels::{align_groups, node_labels, owned_label};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "gpustack-device-manager";

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Creates the node's `Devices` (owned by the Node) or replaces this agent's groups in it.
pub async fn publish_spec(
    client: &Client,
    node: &str,
    ours: &[Manufacturer],
    detected: &[DevicesGroup],
) -> Result<(), kube::Error> {
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
}

/// Replaces this agent's groups in `Devices.status` (a missing object is left for the spec
/// writer to create).
pub async fn publish_status(
    client: &Client,
    node: &str,
    ours: &[Manufacturer],
    status: &DevicesStatus,
) -> Result<(), kube::Error> {
    let api: Api<Devices> = Api::all(client.clone());
    let Some(current) = api.get_opt(node).await? else {
        return Ok(());
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
    Ok(())
}

/// Sets the accelerator labels on the Node and removes stale ones of this agent.
pub async fn publish_labels(
    client: &Client,
    node: &str,
    ours: &[Manufacturer],
    detected: &[DevicesGroup],
) -> Result<(), kube::Error> {
    let api: Api<Node> = Api::all(client.clone());
    let Some(current) = api.get_opt(node).await? else {
        tracing::warn!(node, "Node not found: accelerator labels not published");
        return Ok(());
    };
    let have = current.metadata.labels.unwrap_or_default();
    let mut want = node_labels(detected);
    // Another agent's manufacturers keep the shared marker label.
    if want.is_empty()
        && have.keys().any(|k| {
            owned_label(k, &Manufacturer::ALL)
                && !owned_label(k, ours)
                && k != gpustack_api::labels::ACCELERATABLE
        })
    {
        want.insert(gpustack_api::labels::ACCELERATABLE.into(), "true".into());
    }
    let mut patch = Map::new();
    for k in have
        .keys()
        .filter(|k| owned_label(k, ours) && !want.contains_key(*k))
    {
        patch.insert(k.clone(), Value::Null);
    }
    for (k, v) in &want {
        if have.get(k) != Some(v) {
            patch.insert(k.clone(), Value::String(v.clone()));
        }
    }
    if !patch.is_empty() {
        api.patch(
            node,
            &params(),
            &Patch::Merge(json!({"metadata": {"labels": patch}})),
        )
        .await?;
    }
    Ok(())
}
