//! What real clients noticed against an embedded cluster (issue 39), each through the client
//! that noticed it: kube-rs's typed API and its event recorder, and raw HTTP as kubectl's
//! `--raw` sends it. The real `worker-gateway` serves the cluster.

use gpustack_tests::embedded::{GatewayProcess, kube_client};
use k8s_openapi::api::{
    core::v1::{ConfigMap, Node, Service},
    events::v1::Event,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
    runtime::events::{Event as Published, EventType, Recorder, Reporter},
};
use serde_json::{Value, json};

fn node(name: &str, spec: Value) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

/// kube-apiserver matches a field selector against the typed object: a Node that leaves
/// `spec.unschedulable` unset is schedulable (`false`), not "".
#[tokio::test]
async fn field_selectors_compare_defaulted_values() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("gw"), "clients");
    let nodes: Api<Node> = Api::all(kube_client(&gw.kubeconfig()).await);
    let pp = PostParams::default();
    nodes.create(&pp, &node("open", json!({}))).await.unwrap();
    let cordoned = node("cordoned", json!({"unschedulable": true}));
    nodes.create(&pp, &cordoned).await.unwrap();
    let names = |selector: &'static str| {
        let nodes = nodes.clone();
        async move {
            let listed = nodes
                .list(&ListParams::default().fields(selector))
                .await
                .unwrap();
            listed
                .items
                .iter()
                .map(|n| n.name_any())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names("spec.unschedulable==false").await, ["open"]);
    assert_eq!(names("spec.unschedulable=true").await, ["cordoned"]);
    assert_eq!(names("spec.unschedulable!=true").await, ["open"]);
}

/// A metadata-only PATCH (`as=PartialObjectMetadata`) answers the metadata alone, as GET does.
#[tokio::test]
async fn a_metadata_patch_answers_partial_object_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("gw"), "clients");
    let client = kube_client(&gw.kubeconfig()).await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "m"}, "data": {"secret-ish": "not in the answer"}}),
    )
    .unwrap();
    maps.create(&PostParams::default(), &cm).await.unwrap();
    let patch = json!({"metadata": {"labels": {"tier": "meta"}}});
    let answered = maps
        .patch_metadata("m", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(
        answered.types.as_ref().unwrap().kind,
        "PartialObjectMetadata"
    );
    assert_eq!(answered.labels()["tier"], "meta");
    // The raw answer carries nothing but the metadata; the data is still stored.
    let request = http::Request::patch("/api/v1/namespaces/default/configmaps/m")
        .header(
            "Accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .header("Content-Type", "application/merge-patch+json")
        .body(patch.to_string().into_bytes())
        .unwrap();
    let raw: Value = serde_json::from_str(&client.request_text(request).await.unwrap()).unwrap();
    assert_eq!(raw["kind"], "PartialObjectMetadata", "{raw}");
    assert!(raw.get("data").is_none(), "{raw}");
    let stored = gw.kubectl_ok(&["get", "configmap", "m", "-o", "json"]);
    assert!(stored.contains("not in the answer"), "{stored}");
}

/// kube-runtime's recorder publishes a repeated Event as a merge patch with its `series`;
/// the series must be kept (it is a field of the stored core Event as well).
#[tokio::test]
async fn a_repeated_event_keeps_its_series() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("gw"), "clients");
    let client = kube_client(&gw.kubeconfig()).await;
    let svc: Service = Api::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await
        .unwrap();
    let reporter = Reporter {
        controller: "real-clients".into(),
        instance: None,
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let published = Published {
        type_: EventType::Normal,
        reason: "Repeated".into(),
        note: Some("twice".into()),
        action: "Test".into(),
        secondary: None,
    };
    let reference = svc.object_ref(&());
    recorder.publish(&published, &reference).await.unwrap();
    recorder.publish(&published, &reference).await.unwrap();
    let events: Api<Event> = Api::namespaced(client, "default");
    let listed = events.list(&ListParams::default()).await.unwrap();
    let ev = listed
        .items
        .iter()
        .find(|e| e.reason.as_deref() == Some("Repeated"))
        .expect("the published Event");
    let series = ev.series.as_ref().expect("a series on the repeated Event");
    assert_eq!(series.count, 2);
    // The core form shows the same series.
    let core = gw.get_json(&["events.v1.", "-n", "default", &ev.name_any()]);
    assert_eq!(core["series"]["count"], 2, "{core}");
}

/// Objects are written with `kind`, `apiVersion` and `metadata` first, as kube-apiserver
/// writes them, whatever order the client sent.
#[test]
fn kind_and_api_version_lead_every_object() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("gw"), "clients");
    let body =
        r#"{"data":{"a":"b"},"metadata":{"name":"late"},"apiVersion":"v1","kind":"ConfigMap"}"#;
    let file = dir.path().join("late.json");
    std::fs::write(&file, body).unwrap();
    let url = "/api/v1/namespaces/default/configmaps";
    let created = gw.kubectl_ok(&["create", "--raw", url, "-f", file.to_str().unwrap()]);
    let got = gw.kubectl_ok(&["get", "--raw", &format!("{url}/late")]);
    for text in [&created, &got] {
        assert!(
            text.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"#),
            "{text}"
        );
    }
}

/// `kubectl apply --prune` walks kubectl's default prune set (core Endpoints,
/// PersistentVolumeClaims, ReplicationControllers among them): every kind of it is served, and
/// the API's own address is kept in `default/kubernetes`'s Endpoints and EndpointSlice.
#[test]
fn apply_prune_and_the_apis_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("gw"), "clients");
    let manifest = |names: &[&str]| -> std::path::PathBuf {
        let docs: Vec<String> = names
            .iter()
            .map(|n| {
                format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {n}\n  labels: {{app: x}}\ndata: {{k: v}}\n")
            })
            .collect();
        let path = dir.path().join(format!("{}.yaml", names.join("-")));
        std::fs::write(&path, docs.join("---\n")).unwrap();
        path
    };
    let both = manifest(&["kept", "pruned"]);
    gw.kubectl_ok(&["apply", "-l", "app=x", "-f", both.to_str().unwrap()]);
    let one = manifest(&["kept"]);
    let out = gw.kubectl_ok(&[
        "apply",
        "--prune",
        "-l",
        "app=x",
        "-f",
        one.to_str().unwrap(),
    ]);
    assert!(out.contains("configmap/pruned pruned"), "{out}");
    let left = gw.kubectl_ok(&["get", "configmaps", "-l", "app=x", "-o", "name"]);
    assert_eq!(left.trim(), "configmap/kept");

    let address = format!("127.0.0.1:{}", gw.port);
    let ep = gw.kubectl_ok(&["get", "endpoints", "kubernetes", "-n", "default"]);
    assert!(ep.contains(&address), "{ep}");
    let slice = gw.get_json(&[
        "endpointslices.discovery.k8s.io",
        "kubernetes",
        "-n",
        "default",
    ]);
    assert_eq!(slice["endpoints"][0]["addresses"], json!(["127.0.0.1"]));
    assert_eq!(slice["ports"][0]["port"], gw.port);
    // And clients may write their own.
    let pvc = r#"{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data","namespace":"default"},
        "spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}"#;
    let file = dir.path().join("pvc.json");
    std::fs::write(&file, pvc).unwrap();
    gw.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let listed = gw.kubectl_ok(&["get", "pvc", "data"]);
    assert!(listed.starts_with("NAME"), "{listed}");
    assert!(
        listed.lines().next().unwrap().contains("STORAGECLASS"),
        "{listed}"
    );
}
