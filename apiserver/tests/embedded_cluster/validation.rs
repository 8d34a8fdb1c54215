//! Custom resources against their CRD's structural schema: 422 `Invalid` with one cause per
//! violation, nothing written, dry runs validated too, defaults applied.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
    core::Status,
};
use serde_json::{Value, json};

use crate::harness::{DEADLINE, start};
use gpustack_tests::wait::until;

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["replicas"],
                            "properties": {
                                "replicas": {"type": "integer", "minimum": 1},
                                "mode": {"type": "string", "enum": ["fast", "slow"]},
                                "name": {"type": "string", "pattern": "^[a-z]+$"},
                                "size": {"type": "string", "default": "medium"},
                                "limits": {"type": "object", "default": {}, "properties": {
                                    "cpu": {"type": "integer", "default": 2}
                                }}
                            }
                        },
                        "status": {
                            "type": "object",
                            "properties": {"phase": {"type": "string", "enum": ["Ready", "Failed"]}}
                        }
                    }
                }}
            }]
        }
    })
}

async fn widgets(client: &Client) -> Api<DynamicObject> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd()).unwrap(),
    )
    .await
    .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    until("Widgets served", DEADLINE, || {
        let api = api.clone();
        async move { api.list(&Default::default()).await.ok() }
    })
    .await;
    api
}

fn widget(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

fn status_of(e: kube::Error) -> Box<Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected a Status error, got {other:?}"),
    }
}

/// The (reason, field) of each cause.
fn causes(s: &Status) -> Vec<(String, String)> {
    s.details
        .as_ref()
        .expect("details")
        .causes
        .iter()
        .map(|c| (c.reason.clone(), c.field.clone()))
        .collect()
}

#[tokio::test]
async fn invalid_custom_resources_are_refused_with_every_cause() {
    let h = start().await;
    let api = widgets(&h.client).await;
    let bad = widget(
        "bad",
        json!({"replicas": "three", "mode": "medium", "name": "Not-OK"}),
    );
    let s = status_of(api.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        causes(&s),
        vec![
            ("FieldValueTypeInvalid".into(), "spec.replicas".into()),
            ("FieldValueNotSupported".into(), "spec.mode".into()),
            ("FieldValueInvalid".into(), "spec.name".into()),
        ]
    );
    assert!(
        s.message.starts_with(
            r#"Widget.example.com "bad" is invalid: [spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string", "#
        ),
        "{}",
        s.message
    );
    let details = s.details.as_ref().unwrap();
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        ("bad", "example.com", "Widget")
    );
    assert!(
        api.get_opt("bad").await.unwrap().is_none(),
        "nothing written"
    );

    let s = status_of(
        api.create(&PostParams::default(), &widget("empty", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        causes(&s),
        vec![("FieldValueRequired".into(), "spec.replicas".into())]
    );
    assert_eq!(
        s.message,
        r#"Widget.example.com "empty" is invalid: spec.replicas: Required value"#
    );
}

#[tokio::test]
async fn dry_runs_are_validated_and_write_nothing() {
    let h = start().await;
    let api = widgets(&h.client).await;
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let s = status_of(
        api.create(&dry, &widget("w", json!({"replicas": 0})))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 422);
    assert_eq!(
        causes(&s),
        vec![("FieldValueInvalid".into(), "spec.replicas".into())]
    );
    let ok = api
        .create(&dry, &widget("w", json!({"replicas": 1})))
        .await
        .unwrap();
    assert_eq!(ok.data["spec"]["size"], "medium");
    assert!(api.get_opt("w").await.unwrap().is_none());
}

#[tokio::test]
async fn valid_objects_pass_with_their_defaults_and_stay_valid() {
    let h = start().await;
    let api = widgets(&h.client).await;
    let created = api
        .create(
            &PostParams::default(),
            &widget("w", json!({"replicas": 2, "mode": "fast", "name": "abc"})),
        )
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["size"], "medium");
    assert_eq!(created.data["spec"]["limits"], json!({"cpu": 2}));
    let read = api.get("w").await.unwrap();
    assert_eq!(read.data["spec"]["size"], "medium");

    // Patches and updates are validated on the object they produce; nothing changes.
    let s = status_of(
        api.patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": "many"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(s.code, 422);
    assert_eq!(
        causes(&s),
        vec![("FieldValueTypeInvalid".into(), "spec.replicas".into())]
    );
    let mut replaced = api.get("w").await.unwrap();
    replaced.data["spec"]["mode"] = json!("warp");
    let s = status_of(
        api.replace("w", &PostParams::default(), &replaced)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        causes(&s),
        vec![("FieldValueNotSupported".into(), "spec.mode".into())]
    );
    let apply = PatchParams::apply("tests").force();
    let s = status_of(
        api.patch(
            "w",
            &apply,
            &Patch::Apply(json!({
                "apiVersion": "example.com/v1", "kind": "Widget",
                "spec": {"replicas": 1, "name": "UPPER"}
            })),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        causes(&s),
        vec![("FieldValueInvalid".into(), "spec.name".into())]
    );
    // The status subresource is validated too.
    let s = status_of(
        api.patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Sleeping"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        causes(&s),
        vec![("FieldValueNotSupported".into(), "status.phase".into())]
    );
    let after = api.get("w").await.unwrap();
    assert_eq!(
        after.metadata.resource_version,
        read.metadata.resource_version
    );

    // A valid change goes through.
    let patched = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["replicas"], 5);
    api.patch_status(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Ready"}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn defaults_a_schema_gains_later_show_on_reads() {
    let h = start().await;
    let api = widgets(&h.client).await;
    api.create(&PostParams::default(), &widget("w", json!({"replicas": 1})))
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(h.client.clone());
    crds.patch(
        "widgets.example.com",
        &PatchParams::default(),
        &Patch::<()>::Json(
            serde_json::from_value(json!([{
                "op": "add",
                "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/mode/default",
                "value": "slow"
            }]))
            .unwrap(),
        ),
    )
    .await
    .unwrap();
    until("the new default on get", DEADLINE, || async {
        let w = api.get("w").await.unwrap();
        (w.data["spec"]["mode"] == "slow").then_some(())
    })
    .await;
    let listed = api.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items[0].data["spec"]["mode"], "slow");
}
