//! Owner-reference garbage collection: foreground deletion behind the `foregroundDeletion`
//! finalizer (worked off in the background, across restarts), orphaning, background cascades.

use gpustack_apiserver::store::{ObjectKey, Precondition, WriteOp};
use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::OwnerReference};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use crate::harness::{DEADLINE, cm, start};
use gpustack_tests::wait::until;

const HOLD: &str = "gpustack.ai/hold";

fn reference(owner: &ConfigMap, block: bool) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: owner.metadata.name.clone().unwrap(),
        uid: owner.metadata.uid.clone().unwrap(),
        block_owner_deletion: block.then_some(true),
        ..Default::default()
    }
}

/// A dependent of `owners`, blocking their foreground deletion if `block`, held by a
/// finalizer of its own if `held`.
fn dependent(name: &str, owners: &[&ConfigMap], block: bool, held: bool) -> ConfigMap {
    let mut c = cm(name);
    c.metadata.owner_references = Some(owners.iter().map(|o| reference(o, block)).collect());
    if held {
        c.metadata.finalizers = Some(vec![HOLD.into()]);
    }
    c
}

/// Creates `c` in `api`, answering the stored object.
async fn create(api: &Api<ConfigMap>, c: &ConfigMap) -> ConfigMap {
    api.create(&PostParams::default(), c).await.unwrap()
}

/// Deletes `name` from `api` with `dp`, whatever the answer.
async fn delete(api: &Api<ConfigMap>, name: &str, dp: &DeleteParams) {
    api.delete(name, dp).await.unwrap();
}

async fn wait_gone(api: &Api<ConfigMap>, name: &str) {
    until(&format!("{name} to be deleted"), DEADLINE, || async {
        api.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await;
}

async fn wait_deleting(api: &Api<ConfigMap>, name: &str) -> ConfigMap {
    until(
        &format!("{name} to be marked for deletion"),
        DEADLINE,
        || async {
            api.get_opt(name)
                .await
                .unwrap()
                .filter(|c| c.metadata.deletion_timestamp.is_some())
        },
    )
    .await
}

fn finalizers(c: &ConfigMap) -> Vec<String> {
    c.metadata.finalizers.clone().unwrap_or_default()
}

async fn release(api: &Api<ConfigMap>, name: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn foreground_owner_waits_for_its_blocking_dependents() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let owner = create(&api, &cm("owner")).await;
    create(&api, &dependent("blocker", &[&owner], true, true)).await;
    create(&api, &dependent("plain", &[&owner], false, false)).await;
    // A chain: the owner waits for `mid`, which waits for `leaf`.
    let mid = create(&api, &dependent("mid", &[&owner], true, false)).await;
    create(&api, &dependent("leaf", &[&mid], true, true)).await;

    let answer = api
        .delete("owner", &DeleteParams::foreground())
        .await
        .unwrap()
        .left()
        .expect("the owner is answered, still there");
    assert!(answer.metadata.deletion_timestamp.is_some());
    assert!(finalizers(&answer).contains(&"foregroundDeletion".to_string()));

    wait_gone(&api, "plain").await;
    wait_deleting(&api, "blocker").await;
    let mid = wait_deleting(&api, "mid").await;
    assert!(finalizers(&mid).contains(&"foregroundDeletion".to_string()));
    wait_deleting(&api, "leaf").await;
    let owner = api.get("owner").await.unwrap();
    assert!(owner.metadata.deletion_timestamp.is_some());
    assert_eq!(finalizers(&owner), vec!["foregroundDeletion"]);

    // The blocker goes; the owner still waits for the chain.
    release(&api, "blocker").await;
    wait_gone(&api, "blocker").await;
    assert!(api.get_opt("owner").await.unwrap().is_some());
    release(&api, "leaf").await;
    for name in ["leaf", "mid", "owner"] {
        wait_gone(&api, name).await;
    }
}

#[tokio::test]
async fn foreground_deletion_with_no_blocking_dependents_finishes_on_its_own() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    create(&api, &cm("lonely")).await;
    delete(&api, "lonely", &DeleteParams::foreground()).await;
    wait_gone(&api, "lonely").await;

    // Another finalizer keeps the owner once the collector's is gone.
    let mut kept = cm("kept");
    kept.metadata.finalizers = Some(vec![HOLD.into()]);
    create(&api, &kept).await;
    delete(&api, "kept", &DeleteParams::foreground()).await;
    until(
        "only the owner's own finalizer to remain",
        DEADLINE,
        || async {
            let c = api.get("kept").await.unwrap();
            (finalizers(&c) == vec![HOLD]).then_some(())
        },
    )
    .await;
    release(&api, "kept").await;
    wait_gone(&api, "kept").await;
}

#[tokio::test]
async fn foreground_deletion_survives_a_restart() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let owner = create(&api, &cm("owner")).await;
    create(&api, &dependent("blocker", &[&owner], true, true)).await;
    delete(&api, "owner", &DeleteParams::foreground()).await;
    wait_deleting(&api, "blocker").await;

    // An owner marked while nothing worked on it (as after a crash right after the mark): only
    // the stored objects say there is work to do.
    let store = h.gateway.store().clone();
    let key = |name: &str| ObjectKey {
        cluster: "demo".into(),
        group: String::new(),
        resource: "configmaps".into(),
        namespace: "default".into(),
        name: name.into(),
    };
    let stalled = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "stalled", "namespace": "default", "uid": "00000000-0000-4000-8000-000000000001",
                     "creationTimestamp": "2026-01-01T00:00:00Z", "deletionTimestamp": "2026-01-01T00:00:01Z",
                     "deletionGracePeriodSeconds": 0, "finalizers": ["foregroundDeletion"]}
    });
    let stalled_child = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "stalled-child", "namespace": "default", "uid": "00000000-0000-4000-8000-000000000002",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "stalled",
                                          "uid": "00000000-0000-4000-8000-000000000001", "blockOwnerDeletion": true}]}
    });
    for (name, body) in [("stalled", stalled), ("stalled-child", stalled_child)] {
        store
            .commit(&key(name), Precondition::Absent, WriteOp::Put(body))
            .await
            .unwrap();
    }
    drop(store);

    let h = h.restart().await;

    let owner = api.get("owner").await.unwrap();
    assert_eq!(finalizers(&owner), vec!["foregroundDeletion"]);
    release(&api, "blocker").await;
    for name in ["blocker", "owner", "stalled-child", "stalled"] {
        wait_gone(&api, name).await;
    }
    h.gateway.shutdown().await;
}

#[tokio::test]
async fn orphaning_removes_owner_references_then_the_owner() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let owner = create(&api, &cm("owner")).await;
    let other = create(&api, &cm("other")).await;
    create(&api, &dependent("only", &[&owner], true, false)).await;
    create(&api, &dependent("shared", &[&owner, &other], false, false)).await;
    delete(&api, "owner", &DeleteParams::orphan()).await;
    wait_gone(&api, "owner").await;
    let only = api.get("only").await.unwrap();
    assert!(
        only.metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
    let shared = api.get("shared").await.unwrap();
    let refs = shared.metadata.owner_references.unwrap_or_default();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].name, "other");
}

#[tokio::test]
async fn background_deletion_takes_the_dependents_along() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let owner = create(&api, &cm("owner")).await;
    let child = create(&api, &dependent("child", &[&owner], false, false)).await;
    create(&api, &dependent("grandchild", &[&child], true, false)).await;
    create(&api, &cm("bystander")).await;
    delete(&api, "owner", &DeleteParams::background()).await;
    for name in ["owner", "child", "grandchild"] {
        wait_gone(&api, name).await;
    }
    assert!(api.get_opt("bystander").await.unwrap().is_some());
}
