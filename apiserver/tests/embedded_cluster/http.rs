//! The raw HTTP surface through the kube client's transport: discovery negotiation, auth,
//! tables, errors.

use http::{Request, StatusCode};
use kube::{Client, Discovery};
use serde_json::Value;

use crate::harness::{client_for, start};

async fn get(client: &Client, path: &str, accept: Option<&str>) -> (StatusCode, Value) {
    let mut req = Request::get(path);
    if let Some(a) = accept {
        req = req.header("Accept", a);
    }
    let resp = client
        .send(req.body(Vec::new()).unwrap().map(Into::into))
        .await
        .expect("request sent");
    let status = resp.status();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn get_with_type(client: &Client, path: &str, accept: &str) -> (StatusCode, String, Value) {
    let req = Request::get(path)
        .header("Accept", accept)
        .body(Vec::new())
        .unwrap();
    let resp = client
        .send(req.map(Into::into))
        .await
        .expect("request sent");
    let status = resp.status();
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (
        status,
        ct,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn discovery_accept_forms() {
    let h = start().await;
    // What kubectl and kube-rs send: v2, v2beta1, then plain JSON.
    let both = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    let v2beta1_only = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
    let unknown_only = "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList";
    for path in ["/api", "/apis"] {
        let (s, ct, doc) = get_with_type(&h.client, path, both).await;
        assert_eq!(s, StatusCode::OK, "{path}");
        assert_eq!(
            ct,
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
        assert_eq!(doc["kind"], "APIGroupDiscoveryList");
        let (s, ct, doc) = get_with_type(&h.client, path, v2beta1_only).await;
        assert_eq!(
            (s, doc["apiVersion"].as_str()),
            (StatusCode::OK, Some("apidiscovery.k8s.io/v2beta1")),
            "{ct}"
        );
        let (s, _, doc) = get_with_type(&h.client, path, unknown_only).await;
        assert_eq!(s, StatusCode::NOT_ACCEPTABLE, "{path}");
        assert_eq!(doc["kind"], "Status");
        let (s, _, doc) = get_with_type(&h.client, path, "application/json").await;
        assert_eq!(s, StatusCode::OK);
        assert!(
            doc["kind"] == "APIVersions" || doc["kind"] == "APIGroupList",
            "{doc}"
        );
    }
    // Group-version documents have no aggregated form: legacy after the fallback, else 406.
    let (s, _, doc) = get_with_type(&h.client, "/apis/apiextensions.k8s.io/v1", both).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "customresourcedefinitions/status")
    );
    let (s, _, _) = get_with_type(&h.client, "/apis/apiextensions.k8s.io/v1", v2beta1_only).await;
    assert_eq!(s, StatusCode::NOT_ACCEPTABLE);

    // kube-rs discovery both ways, including a CRD kind registered a moment ago.
    crate::crud::install_crds(&h.client).await;
    let aggregated = Discovery::new(h.client.clone())
        .run_aggregated()
        .await
        .expect("aggregated discovery");
    let legacy = Discovery::new(h.client.clone())
        .run()
        .await
        .expect("legacy discovery");
    for d in [&aggregated, &legacy] {
        assert!(d.has_group("coordination.k8s.io"));
        let group = d.get("worker.gpustack.ai").expect("CRD group discovered");
        assert!(
            group
                .recommended_resources()
                .iter()
                .any(|(r, _)| r.kind == "Devices")
        );
    }
    let core = aggregated.get("").expect("core group");
    assert!(
        core.recommended_resources()
            .iter()
            .any(|(r, _)| r.kind == "ConfigMap")
    );
}

#[tokio::test]
async fn requests_without_the_token_get_401_status() {
    let h = start().await;
    let text = std::fs::read_to_string(&h.kubeconfig).unwrap();
    let mut doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    doc["users"][0]["user"]["token"] = serde_yaml_ng::Value::from("wrong-token");
    let wrong = h.dir.path().join("wrong.kubeconfig");
    std::fs::write(&wrong, serde_yaml_ng::to_string(&doc).unwrap()).unwrap();
    let client = client_for(&wrong).await;
    let (s, body) = get(&client, "/api/v1/namespaces", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["code"], 401);
    // Health is open; the token file itself never contains the stored hash.
    let (s, _) = get(&client, "/readyz", None).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn tables_and_errors() {
    let h = start().await;
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let (s, doc) = get(&h.client, "/api/v1/namespaces", Some(table)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(doc["kind"], "Table");
    assert_eq!(doc["columnDefinitions"][0]["name"], "Name");
    assert!(
        doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["cells"][0] == "default")
    );
    let (s, doc) = get(
        &h.client,
        "/api/v1/namespaces/default/configmaps/nope",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(
        (doc["kind"].as_str(), doc["reason"].as_str()),
        (Some("Status"), Some("NotFound"))
    );
    let (s, doc) = get(&h.client, "/apis/nothing.example.com/v1/things", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(doc["kind"], "Status");
    let (s, doc) = get(
        &h.client,
        "/api/v1/namespaces/default/configmaps?labelSelector=a%20b%3Dc",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(doc["reason"], "BadRequest");
    let (s, doc) = get(&h.client, "/openapi/v3", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(doc["paths"]["api/v1"]["serverRelativeURL"].is_string());
}
