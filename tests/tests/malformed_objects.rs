//! Objects of the wrong shape are refused at write time, as kube-apiserver's decoder and its
//! metadata rules refuse them: the real `worker-gateway` serves an embedded cluster and the
//! real `kubectl` writes each attack of the review (a Pod with `containers: "nope"`, labels that
//! are numbers, annotations that are objects, Secret data that is not base64, a Secret whose
//! type changes, a custom kind's object with object annotations).

use gpustack_tests::embedded::GatewayProcess;
use serde_json::{Value, json};

struct Cluster {
    dir: tempfile::TempDir,
    gw: GatewayProcess,
}

impl Cluster {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let gw = GatewayProcess::start(&dir.path().join("gw"), "malformed");
        Cluster { dir, gw }
    }

    /// `v` POSTed as it is to the collection at `url` (`kubectl create --raw`: kubectl would
    /// refuse some of these before sending them), which must fail: the error output.
    fn refused(&self, name: &str, url: &str, v: &Value) -> String {
        let path = self.dir.path().join(format!("{name}.json"));
        std::fs::write(&path, v.to_string()).unwrap();
        let out = self
            .gw
            .kubectl(&["create", "--raw", url, "-f", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{name} was stored: {err}");
        err
    }
}

const PODS: &str = "/api/v1/namespaces/default/pods";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

#[track_caller]
fn says(err: &str, what: &str) {
    assert!(err.contains(what), "expected {what:?} in:\n{err}");
}

fn configmap(metadata: Value) -> Value {
    let mut meta = json!({"name": "cm", "namespace": "default"});
    meta.as_object_mut()
        .unwrap()
        .extend(metadata.as_object().unwrap().clone());
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}})
}

#[test]
fn objects_of_the_wrong_shape_are_refused() {
    let c = Cluster::start();
    let err = c.refused(
        "pod",
        PODS,
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                "spec": {"containers": "nope"}}),
    );
    says(&err, "Pod in version \"v1\" cannot be handled as a Pod");

    let err = c.refused(
        "labels",
        CONFIGMAPS,
        &configmap(json!({"labels": {"app": 5}})),
    );
    says(
        &err,
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap",
    );
    let err = c.refused(
        "annotations",
        CONFIGMAPS,
        &configmap(json!({"annotations": {"note": {"nested": true}}})),
    );
    says(&err, "cannot be handled as a ConfigMap");
    let err = c.refused(
        "label-key",
        CONFIGMAPS,
        &configmap(json!({"labels": {"bad key": "v"}})),
    );
    says(
        &err,
        "metadata.labels: Invalid value: \"bad key\": name part must consist of alphanumeric characters",
    );

    let err = c.refused(
        "secret",
        "/api/v1/namespaces/default/secrets",
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"},
                "data": {"k": "not base64!"}}),
    );
    says(
        &err,
        "Secret in version \"v1\" cannot be handled as a Secret",
    );
    c.gw.kubectl_ok(&["create", "secret", "generic", "s", "--from-literal=k=v"]);
    let err = c.gw.kubectl_err(&[
        "patch",
        "secret",
        "s",
        "--type=merge",
        "-p",
        r#"{"type":"kubernetes.io/tls"}"#,
    ]);
    says(
        &err,
        "type: Invalid value: \"kubernetes.io/tls\": field is immutable",
    );

    // A custom kind: its schema says nothing of metadata, the rules still hold.
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "queues.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "queues", "singular": "queue", "kind": "Queue"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                   "x-kubernetes-preserve-unknown-fields": true}}}]},
    });
    let path = c.dir.path().join("crd.json");
    std::fs::write(&path, crd.to_string()).unwrap();
    c.gw.kubectl_ok(&["create", "-f", path.to_str().unwrap()]);
    let queue = json!({"apiVersion": "example.com/v1", "kind": "Queue",
        "metadata": {"name": "q", "namespace": "default", "annotations": {"a": {"b": 1}}}});
    let err = gpustack_tests::wait::wait_until(
        "the Queue kind served",
        gpustack_tests::embedded::DEADLINE,
        || {
            let err = c.refused(
                "queue",
                "/apis/example.com/v1/namespaces/default/queues",
                &queue,
            );
            (!err.contains("NotFound") && !err.contains("not found")).then_some(err)
        },
    );
    says(&err, "Queue in version \"v1\" cannot be handled as a Queue");

    // Nothing of the attacks was stored.
    let stored =
        c.gw.kubectl_ok(&["get", "pods,configmaps,secrets", "-o", "name"]);
    assert!(
        !stored.contains("pod/p") && !stored.contains("configmap/cm"),
        "{stored}"
    );
    assert!(stored.contains("secret/s"), "{stored}");
}
