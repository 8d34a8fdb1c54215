//! Admission webhooks: the embedded cluster calls them over HTTPS as kube-apiserver does. The
//! webhook server is an in-test stand-in for the worker's admission webhooks (see
//! `tests/support/webhook.rs`).

#[path = "../support/webhook.rs"]
mod webhook;

use std::collections::BTreeMap;

use k8s_openapi::api::{
    admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
    core::v1::{ConfigMap, Namespace, Service},
};
use kube::{
    Api, Client,
    api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams},
    core::Status,
};
use serde_json::{Value, json};

use crate::harness::{cm, start};
use webhook::{DENIAL, WARNING, WebhookServer, configuration};

async fn add_mutating(client: &Client, name: &str, hook: &str, cc: Value, extra: Value) {
    let cfg = configuration("MutatingWebhookConfiguration", name, hook, cc, extra);
    let cfg: MutatingWebhookConfiguration = serde_json::from_value(cfg).unwrap();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &cfg)
        .await
        .expect("mutating configuration created");
}

async fn add_validating(client: &Client, name: &str, hook: &str, cc: Value, extra: Value) {
    let cfg = configuration("ValidatingWebhookConfiguration", name, hook, cc, extra);
    let cfg: ValidatingWebhookConfiguration = serde_json::from_value(cfg).unwrap();
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &cfg)
        .await
        .expect("validating configuration created");
}

fn url_config(server: &WebhookServer, path: &str) -> Value {
    json!({"url": server.url(path), "caBundle": server.ca_bundle()})
}

fn labelled(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut c = cm(name);
    c.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    c
}

fn api_error(e: kube::Error) -> Box<Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn mutating_then_validating_webhooks_admit_creates_updates_and_deletes() {
    let h = start().await;
    let server = WebhookServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    // Written before any webhook exists: the configurations are read again once they change.
    cms.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    add_mutating(
        &h.client,
        "a-label",
        "label.example.com",
        url_config(&server, "/mutate"),
        json!({}),
    )
    .await;
    add_validating(
        &h.client,
        "deny",
        "deny.example.com",
        url_config(&server, "/validate"),
        json!({}),
    )
    .await;

    // The mutating webhook's label is stored, and the validating one saw it.
    let created = cms
        .create(&PostParams::default(), &cm("plain"))
        .await
        .unwrap();
    assert_eq!(created.metadata.labels.unwrap()["admitted"], "yes");
    let stored = cms.get("plain").await.unwrap();
    assert_eq!(stored.metadata.labels.unwrap()["admitted"], "yes");
    let validated = server.requests("/validate");
    let first = &validated[0];
    assert_eq!(first["operation"], "CREATE");
    assert_eq!(first["object"]["metadata"]["labels"]["admitted"], "yes");
    assert_eq!(
        first["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(first["kind"]["kind"], "ConfigMap");
    assert_eq!(first["namespace"], "default");
    assert_eq!(first["name"], "plain");
    assert_eq!(first["dryRun"], false);
    assert_eq!(first["options"]["kind"], "CreateOptions");
    assert!(first["userInfo"]["username"].is_string());

    // Refused with the webhook's code and message, nothing stored.
    let err = api_error(
        cms.create(
            &PostParams::default(),
            &labelled("refused", &[("deny", "true")]),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        format!("admission webhook \"deny.example.com\" denied the request: {DENIAL}")
    );
    assert!(cms.get_opt("refused").await.unwrap().is_none());

    // Updates (patches) are reviewed with the old object; a refused one changes nothing.
    let pp = PatchParams::default();
    cms.patch("plain", &pp, &Patch::Merge(json!({"data": {"k": "w"}})))
        .await
        .unwrap();
    let update = server.requests("/validate").pop().unwrap();
    assert_eq!(update["operation"], "UPDATE");
    assert_eq!(update["oldObject"]["data"]["k"], "v");
    assert_eq!(update["object"]["data"]["k"], "w");
    assert_eq!(update["options"]["kind"], "PatchOptions");
    let err = api_error(
        cms.patch(
            "plain",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"deny": "true"}}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 403);
    assert!(
        !cms.get("plain")
            .await
            .unwrap()
            .metadata
            .labels
            .unwrap()
            .contains_key("deny")
    );

    // A dry run is sent as one to webhooks without side effects.
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let dried = cms.create(&dry, &cm("dry")).await.unwrap();
    assert_eq!(dried.metadata.labels.unwrap()["admitted"], "yes");
    let review = server.requests("/validate").pop().unwrap();
    assert_eq!(review["dryRun"], true);
    assert_eq!(server.requests("/mutate").pop().unwrap()["dryRun"], true);
    assert!(cms.get_opt("dry").await.unwrap().is_none());

    // Deletes carry the old object and no object.
    cms.delete("plain", &DeleteParams::default()).await.unwrap();
    let delete = server.requests("/validate").pop().unwrap();
    assert_eq!(delete["operation"], "DELETE");
    assert_eq!(delete["object"], Value::Null);
    assert_eq!(delete["oldObject"]["metadata"]["name"], "plain");
    assert_eq!(delete["options"]["kind"], "DeleteOptions");

    // Webhook warnings come back as Warning headers.
    let body = serde_json::to_vec(&cm("warned")).unwrap();
    let req = http::Request::post("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let resp = h.client.send(req.map(Into::into)).await.unwrap();
    assert_eq!(resp.status(), 201);
    let warnings: Vec<String> = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    assert!(warnings.iter().any(|w| w.contains(WARNING)), "{warnings:?}");
}

#[tokio::test]
async fn failure_policy_decides_whether_an_unreachable_webhook_refuses() {
    let h = start().await;
    let server = WebhookServer::start().await;
    // Nothing listens on port 1.
    let unreachable = json!({"url": "https://127.0.0.1:1/", "caBundle": server.ca_bundle()});
    add_validating(
        &h.client,
        "ignored",
        "ignored.example.com",
        unreachable.clone(),
        json!({"failurePolicy": "Ignore"}),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    cms.create(&PostParams::default(), &cm("ignored"))
        .await
        .unwrap();

    add_validating(
        &h.client,
        "failing",
        "fail.example.com",
        unreachable,
        json!({}),
    )
    .await;
    let err = api_error(
        cms.create(&PostParams::default(), &cm("failed"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 500);
    assert!(
        err.message
            .contains("failed calling webhook \"fail.example.com\""),
        "{}",
        err.message
    );
    assert!(cms.get_opt("failed").await.unwrap().is_none());
}

#[tokio::test]
async fn webhooks_without_a_ca_bundle_or_with_side_effects_are_refused_their_calls() {
    let h = start().await;
    let server = WebhookServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    add_validating(
        &h.client,
        "untrusted",
        "untrusted.example.com",
        json!({"url": server.url("/validate")}),
        json!({}),
    )
    .await;
    let err = api_error(
        cms.create(&PostParams::default(), &cm("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 500);
    assert!(
        err.message.contains("\"untrusted.example.com\""),
        "{}",
        err.message
    );
    assert!(err.message.contains("caBundle"), "{}", err.message);
    Api::<ValidatingWebhookConfiguration>::all(h.client.clone())
        .delete("untrusted", &DeleteParams::default())
        .await
        .unwrap();

    add_validating(
        &h.client,
        "effects",
        "effects.example.com",
        url_config(&server, "/validate"),
        json!({"sideEffects": "Unknown"}),
    )
    .await;
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let err = api_error(cms.create(&dry, &cm("b")).await.unwrap_err());
    assert_eq!(err.code, 400);
    assert_eq!(
        err.message,
        "admission webhook \"effects.example.com\" does not support dry run"
    );
    // Not a dry run: called.
    cms.create(&PostParams::default(), &cm("b")).await.unwrap();
}

#[tokio::test]
async fn namespace_and_object_selectors_pick_the_requests_reviewed() {
    let h = start().await;
    let server = WebhookServer::start().await;
    let namespaces: Api<Namespace> = Api::all(h.client.clone());
    for (name, labels) in [("hooked", Some(("hooked", "yes"))), ("quiet", None)] {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: labels.map(|(k, v)| BTreeMap::from([(k.to_string(), v.to_string())])),
                ..Default::default()
            },
            ..Default::default()
        };
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
    }
    add_validating(
        &h.client,
        "by-namespace",
        "ns.example.com",
        url_config(&server, "/validate"),
        json!({"namespaceSelector": {"matchLabels": {"hooked": "yes"}}}),
    )
    .await;
    let deny = [("deny", "true")];
    let quiet: Api<ConfigMap> = Api::namespaced(h.client.clone(), "quiet");
    let hooked: Api<ConfigMap> = Api::namespaced(h.client.clone(), "hooked");
    quiet
        .create(&PostParams::default(), &labelled("x", &deny))
        .await
        .expect("a namespace the selector does not select is not reviewed");
    let err = api_error(
        hooked
            .create(&PostParams::default(), &labelled("x", &deny))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 403);
    assert!(err.message.contains("\"ns.example.com\""));

    add_validating(
        &h.client,
        "by-object",
        "object.example.com",
        url_config(&server, "/validate"),
        json!({"objectSelector": {"matchExpressions": [{"key": "check", "operator": "Exists"}]}}),
    )
    .await;
    quiet
        .create(&PostParams::default(), &labelled("y", &deny))
        .await
        .expect("an object the selector does not select is not reviewed");
    let err = api_error(
        quiet
            .create(
                &PostParams::default(),
                &labelled("z", &[("deny", "true"), ("check", "1")]),
            )
            .await
            .unwrap_err(),
    );
    assert!(
        err.message.contains("\"object.example.com\""),
        "{}",
        err.message
    );
    // Deleting `y` (not selected by its labels) is not reviewed, so it is allowed.
    quiet.delete("y", &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn a_service_client_config_is_called_at_the_service_cluster_ip() {
    let h = start().await;
    let server = WebhookServer::start().await;
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "hooks", "namespace": "default"},
        "spec": {"clusterIP": "127.0.0.1", "ports": [{"port": server.addr.port()}]},
    }))
    .unwrap();
    Api::<Service>::namespaced(h.client.clone(), "default")
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
    add_validating(
        &h.client,
        "by-service",
        "service.example.com",
        json!({
            "service": {"namespace": "default", "name": "hooks", "port": server.addr.port(), "path": "/validate"},
            "caBundle": server.ca_bundle(),
        }),
        json!({}),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let err = api_error(
        cms.create(&PostParams::default(), &labelled("x", &[("deny", "true")]))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 403);
    assert!(err.message.contains(DENIAL));
    cms.create(&PostParams::default(), &cm("fine"))
        .await
        .unwrap();
    assert_eq!(server.requests("/validate").len(), 2);
}
