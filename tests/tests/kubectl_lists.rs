//! End to end: `kind: List` files through the real `kubectl` against an embedded cluster. For a
//! List, kubectl validates every item on the client side against `/openapi/v2`, which it asks
//! for as gnostic protobuf only; with default validation (`Strict`) the whole command fails when
//! that document cannot be had.

use gpustack_tests::{
    embedded::{GatewayProcess, write_file},
    hub::upstream,
};
use serde_json::{Value, json};

/// An embedded cluster with the worker CRDs installed.
fn start() -> (tempfile::TempDir, GatewayProcess) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = upstream(dir.path(), "lists", &[]);
    (dir, gw)
}

/// Two ConfigMaps and a Devices object with a filled-in spec (nested lists, integers, a `null`
/// for a nullable field) in a YAML v1 List.
const LIST_YAML: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: list-a, namespace: default, labels: {from: list}}
  data: {greeting: hello}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: list-b, namespace: default}
  data: {size: "3"}
- apiVersion: worker.gpustack.ai/v1alpha1
  kind: Devices
  metadata: {name: list-node}
  spec:
    groups:
    - id: g0
      manufacturer: nvidia
      name: H200
      memory: 144000
      cores: null
      acceleratorSlicedDetail: null
      accelerators:
      - {id: gpu-0, index: 0, topology: {pciBusId: "0000:01:00.0"}}
"#;

#[test]
fn apply_and_create_lists() {
    let (dir, gw) = start();
    let dir = dir.path();

    // `kubectl apply -f` of a YAML List: each item created.
    let file = write_file(dir, "list.yaml", LIST_YAML);
    let out = gw.kubectl_ok(&["apply", "-f", &file]);
    assert!(out.contains("configmap/list-a created"), "{out}");
    assert!(out.contains("configmap/list-b created"), "{out}");
    assert!(
        out.contains("devices.worker.gpustack.ai/list-node created"),
        "{out}"
    );
    let a = gw.get_json(&["configmap", "list-a"]);
    assert_eq!(a["data"], json!({"greeting": "hello"}));
    assert_eq!(a["metadata"]["labels"]["from"], "list");
    let node = gw.get_json(&["devices", "list-node"]);
    assert_eq!(node["spec"]["groups"][0]["memory"], 144000);
    assert_eq!(
        node["spec"]["groups"][0]["accelerators"][0]["topology"]["pciBusId"],
        "0000:01:00.0"
    );

    // Applying it again with one change: that item configured, the others unchanged.
    let changed = LIST_YAML.replace("greeting: hello", "greeting: bonjour");
    let file = write_file(dir, "list.yaml", &changed);
    let out = gw.kubectl_ok(&["apply", "-f", &file]);
    assert!(out.contains("configmap/list-a configured"), "{out}");
    assert!(out.contains("configmap/list-b unchanged"), "{out}");
    // (Not necessarily "unchanged": the server defaults fields inside `accelerators`, and the JSON
    // merge patch kubectl computes for custom kinds replaces whole lists; so with a single file.)
    assert!(
        out.contains("devices.worker.gpustack.ai/list-node "),
        "{out}"
    );
    let a = gw.get_json(&["configmap", "list-a"]);
    assert_eq!(a["data"], json!({"greeting": "bonjour"}));

    // `kubectl create -f` of a JSON List.
    let list = json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "json-cm", "namespace": "default"}, "data": {"k": "v"}},
            {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices",
             "metadata": {"name": "json-node"}, "spec": {"groups": []}},
        ],
    });
    let file = write_file(dir, "list.json", &list.to_string());
    let out = gw.kubectl_ok(&["create", "-f", &file]);
    assert!(out.contains("configmap/json-cm created"), "{out}");
    assert!(
        out.contains("devices.worker.gpustack.ai/json-node created"),
        "{out}"
    );
    assert_eq!(
        gw.get_json(&["configmap", "json-cm"])["data"],
        json!({"k": "v"})
    );
    assert_eq!(
        gw.get_json(&["devices", "json-node"])["spec"],
        json!({"groups": []})
    );
    // A second create reports the existing objects.
    let err = gw.kubectl_err(&["create", "-f", &file]);
    assert!(err.contains("already exists"), "{err}");

    // The names of every object created.
    let names = gw.kubectl_ok(&["get", "configmaps,devices", "-A", "-o", "name"]);
    for n in [
        "configmap/list-a",
        "configmap/list-b",
        "configmap/json-cm",
        "devices.worker.gpustack.ai/list-node",
        "devices.worker.gpustack.ai/json-node",
    ] {
        assert!(names.contains(n), "{n} missing from {names}");
    }
}

#[test]
fn unknown_fields_in_list_items() {
    let (dir, gw) = start();
    let dir = dir.path();
    let bad_list = write_file(
        dir,
        "bad-list.yaml",
        r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: before-bad, namespace: default}
  data: {x: "1"}
- apiVersion: worker.gpustack.ai/v1alpha1
  kind: Devices
  metadata: {name: bad-node}
  spec: {bogus: 1}
"#,
    );
    // A List is validated on the client side, item by item, against the OpenAPI v2 schemas:
    // the unknown field is named and nothing is created.
    for verb in ["create", "apply"] {
        let err = gw.kubectl_err(&[verb, "-f", &bad_list]);
        assert!(
            err.contains(r#"unknown field "bogus" in ai.gpustack.worker.v1alpha1.Devices.spec"#),
            "{verb}: {err}"
        );
        assert!(err.contains("--validate=false"), "{verb}: {err}");
    }
    let none = gw.kubectl_err(&["get", "configmap", "before-bad"]);
    assert!(
        none.contains(r#"configmaps "before-bad" not found"#),
        "{none}"
    );
    let none = gw.kubectl_err(&["get", "devices", "bad-node"]);
    assert!(none.contains(r#""bad-node" not found"#), "{none}");

    // The same item alone: validated by the server (fieldValidation=Strict).
    let single = write_file(
        dir,
        "bad.yaml",
        "apiVersion: worker.gpustack.ai/v1alpha1\nkind: Devices\nmetadata: {name: bad-node}\nspec: {bogus: 1}\n",
    );
    let err = gw.kubectl_err(&["create", "-f", &single]);
    assert!(err.contains(r#"unknown field "spec.bogus""#), "{err}");

    // `--validate=warn` skips the client side; the server warns and creates.
    let out = gw.kubectl(&["create", "--validate=warn", "-f", &bad_list]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(r#"unknown field "spec.bogus""#), "{stderr}");
    let node = gw.get_json(&["devices", "bad-node"]);
    assert!(node["spec"].get("bogus").is_none(), "{node}");
}

#[test]
fn openapi_v2_forms() {
    let (_dir, gw) = start();
    // JSON, as before: the CRD's schema with its group-version-kind.
    let doc: Value =
        serde_json::from_str(&gw.kubectl_ok(&["get", "--raw", "/openapi/v2"])).unwrap();
    assert_eq!(doc["swagger"], "2.0");
    let devices = &doc["definitions"]["ai.gpustack.worker.v1alpha1.Devices"];
    assert_eq!(
        devices["x-kubernetes-group-version-kind"],
        json!([{"group": "worker.gpustack.ai", "version": "v1alpha1", "kind": "Devices"}])
    );
    assert!(devices["properties"]["spec"]["properties"]["groups"].is_object());
    // Nullable fields keep no type (kubectl would reject a null for a typed field).
    assert!(devices["properties"]["status"].get("type").is_none());
    assert!(
        doc["definitions"]["io.k8s.api.core.v1.ConfigMap"]["x-kubernetes-group-version-kind"]
            .is_array()
    );
}
