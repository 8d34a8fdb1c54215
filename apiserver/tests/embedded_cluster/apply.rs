//! Field ownership and server-side apply conflicts through `kube::Api`, as Kubernetes has them.

use gpustack_api::devices::Devices;
use http::Request;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
    core::Status,
};
use serde_json::{Value, json};

use crate::{crud::install_crds, harness::start};

fn config(data: Value) -> Patch<Value> {
    Patch::Apply(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default"},
        "data": data,
    }))
}

fn ssa(manager: &str) -> PatchParams {
    PatchParams::apply(manager)
}

fn status_of(e: kube::Error) -> Box<Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected a Status error, got {other:?}"),
    }
}

/// Each manager's operation and `FieldsV1`, by manager name.
fn owners(cm: &ConfigMap) -> Vec<(String, String, Value)> {
    cm.metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            (
                e.manager.unwrap_or_default(),
                e.operation.unwrap_or_default(),
                e.fields_v1.map(|f| f.0).unwrap_or(Value::Null),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_second_applier_changing_a_field_conflicts() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    api.patch("c", &ssa("first"), &config(json!({"x": "1", "y": "1"})))
        .await
        .unwrap();
    let s = status_of(
        api.patch("c", &ssa("second"), &config(json!({"x": "2"})))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Apply failed with 1 conflict: conflict with \"first\": .data.x"
    );
    let causes = s.details.expect("details").causes;
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].message, "conflict with \"first\"");
    assert_eq!(causes[0].field, ".data.x");
    // Nothing was written.
    let cm = api.get("c").await.unwrap();
    assert_eq!(cm.data.unwrap()["x"], "1");

    // Two fields of one manager: both listed.
    let s = status_of(
        api.patch("c", &ssa("second"), &config(json!({"x": "2", "y": "2"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        s.message,
        "Apply failed with 2 conflicts: conflicts with \"first\":\n- .data.x\n- .data.y"
    );
    assert_eq!(s.details.unwrap().causes.len(), 2);
}

#[tokio::test]
async fn the_same_value_is_shared_ownership() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    api.patch("c", &ssa("first"), &config(json!({"x": "1", "y": "1"})))
        .await
        .unwrap();
    let cm = api
        .patch("c", &ssa("second"), &config(json!({"x": "1"})))
        .await
        .unwrap();
    assert_eq!(
        owners(&cm),
        [
            (
                "first".into(),
                "Apply".into(),
                json!({"f:data": {"f:x": {}, "f:y": {}}})
            ),
            (
                "second".into(),
                "Apply".into(),
                json!({"f:data": {"f:x": {}}})
            ),
        ]
    );
    // The first stops applying x: "second" still owns it, so it stays.
    let cm = api
        .patch("c", &ssa("first"), &config(json!({"y": "1"})))
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["x"], "1");
}

#[tokio::test]
async fn force_takes_the_fields_over() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    api.patch("c", &ssa("first"), &config(json!({"x": "1"})))
        .await
        .unwrap();
    let cm = api
        .patch("c", &ssa("second").force(), &config(json!({"x": "2"})))
        .await
        .unwrap();
    assert_eq!(cm.data.as_ref().unwrap()["x"], "2");
    // "first" owned nothing else, so its entry is gone.
    assert_eq!(
        owners(&cm),
        [(
            "second".into(),
            "Apply".into(),
            json!({"f:data": {"f:x": {}}})
        )]
    );
    // And "first" now conflicts with "second".
    let s = status_of(
        api.patch("c", &ssa("first"), &config(json!({"x": "1"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 409);
    assert_eq!(
        s.details.unwrap().causes[0].message,
        "conflict with \"second\""
    );
}

#[tokio::test]
async fn an_update_then_an_apply_conflicts() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    api.patch("c", &ssa("kubectl"), &config(json!({"x": "1"})))
        .await
        .unwrap();
    let edit = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..Default::default()
    };
    let cm = api
        .patch("c", &edit, &Patch::Merge(json!({"data": {"x": "2"}})))
        .await
        .unwrap();
    // The update took x from the applier, which owned nothing else.
    assert_eq!(
        owners(&cm),
        [(
            "kubectl-edit".into(),
            "Update".into(),
            json!({"f:data": {"f:x": {}}})
        )]
    );
    let s = status_of(
        api.patch("c", &ssa("kubectl"), &config(json!({"x": "3"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        s.message,
        "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.x"
    );
    assert_eq!(
        s.details.unwrap().causes[0].message,
        "conflict with \"kubectl-edit\" using v1"
    );
    // Applying the value the update left is sharing it, not a conflict.
    api.patch("c", &ssa("kubectl"), &config(json!({"x": "2"})))
        .await
        .unwrap();
}

#[tokio::test]
async fn fields_an_applier_omits_are_removed_unless_owned_elsewhere() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    api.patch(
        "c",
        &ssa("first"),
        &config(json!({"x": "1", "y": "1", "z": "1"})),
    )
    .await
    .unwrap();
    // "other" updates z (taking it), and applies w.
    let other = PatchParams {
        field_manager: Some("other".into()),
        ..Default::default()
    };
    api.patch("c", &other, &Patch::Merge(json!({"data": {"z": "2"}})))
        .await
        .unwrap();
    api.patch("c", &ssa("third"), &config(json!({"w": "1"})))
        .await
        .unwrap();
    let cm = api
        .patch("c", &ssa("first"), &config(json!({"x": "1"})))
        .await
        .unwrap();
    let data = cm.data.unwrap();
    assert_eq!(data.get("x").map(String::as_str), Some("1"));
    assert!(!data.contains_key("y"), "{data:?}");
    assert_eq!(data.get("z").map(String::as_str), Some("2"));
    assert_eq!(data.get("w").map(String::as_str), Some("1"));
}

/// Sends one raw request; status and body.
async fn send(client: &Client, req: Request<Vec<u8>>) -> (u16, Value) {
    let resp = client.send(req.map(Into::into)).await.expect("sent");
    let code = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn every_write_records_its_manager_and_force_is_only_for_apply() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    // Without fieldManager, the User-Agent's product names the manager.
    let create = Request::post("/api/v1/namespaces/default/configmaps")
        .header("Content-Type", "application/json")
        .header("User-Agent", "mytool/1.2 (linux/amd64)")
        .body(br#"{"metadata":{"name":"c"},"data":{"a":"1"}}"#.to_vec())
        .unwrap();
    let (code, created) = send(&h.client, create).await;
    assert_eq!(code, 201, "{created}");
    let entry = &created["metadata"]["managedFields"][0];
    assert_eq!(entry["manager"], "mytool");
    assert_eq!(entry["operation"], "Update");
    assert_eq!(entry["apiVersion"], "v1");
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert!(entry["time"].is_string());
    assert_eq!(entry["fieldsV1"], json!({"f:data": {".": {}, "f:a": {}}}));

    // A PUT with a field manager takes what it changed.
    let mut cm = api.get("c").await.unwrap();
    cm.data.as_mut().unwrap().insert("a".into(), "2".into());
    let pp = PostParams {
        field_manager: Some("replacer".into()),
        ..Default::default()
    };
    let cm = api.replace("c", &pp, &cm).await.unwrap();
    let owners = owners(&cm);
    assert_eq!(owners.len(), 2, "{owners:?}");
    assert_eq!(owners[1].0, "replacer");
    assert_eq!(owners[1].2, json!({"f:data": {"f:a": {}}}));

    // `force` on a merge patch: refused as Kubernetes refuses it.
    let forced = Request::patch("/api/v1/namespaces/default/configmaps/c?force=true")
        .header("Content-Type", "application/merge-patch+json")
        .body(br#"{"data":{"b":"1"}}"#.to_vec())
        .unwrap();
    let (code, status) = send(&h.client, forced).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );

    // Status writes carry their subresource.
    install_crds(&h.client).await;
    let devices: Api<Devices> = Api::all(h.client.clone());
    devices
        .patch("n", &ssa("creator"), &Patch::Apply(json!({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices", "metadata": {"name": "n"}, "spec": {}})))
        .await
        .unwrap();
    let d = devices
        .patch_status(
            "n",
            &PatchParams {
                field_manager: Some("ctrl".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({"status": {"groups": []}})),
        )
        .await
        .unwrap();
    let entries = d.metadata.managed_fields.unwrap();
    let ctrl = entries
        .iter()
        .find(|e| e.manager.as_deref() == Some("ctrl"))
        .expect("ctrl's entry");
    assert_eq!(ctrl.operation.as_deref(), Some("Update"));
    assert_eq!(ctrl.subresource.as_deref(), Some("status"));
    assert_eq!(
        ctrl.fields_v1.as_ref().unwrap().0,
        json!({"f:status": {"f:groups": {}}})
    );
}
