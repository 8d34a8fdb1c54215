//! A Pod's extended resources cannot be overcommitted, as kube-apiserver enforces: through the
//! real `worker-gateway --embedded-cluster` and kubectl, a Pod asking for more (or less) of a
//! device plugin's pool in `requests` than in `limits` is refused with the field named, and
//! nothing is stored; an equal one is stored.

use gpustack_tests::embedded::GatewayProcess;

fn pod(name: &str, requests: &str, limits: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  containers:\n  - name: main\n    image: cuda\n    resources:\n      requests: {{nvidia.com/gpu.sliced: \"{requests}\"}}\n      limits: {{nvidia.com/gpu.sliced: \"{limits}\"}}\n"
    )
}

#[test]
fn extended_resource_requests_must_equal_limits() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("data"), "pods");
    let file = dir.path().join("over.yaml");
    std::fs::write(&file, pod("over", "3", "1")).unwrap();
    let out = gw.kubectl(&["create", "-f", file.to_str().unwrap()]);
    assert!(!out.status.success(), "stored");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains(
            "spec.containers[0].resources.requests[nvidia.com/gpu.sliced]: Invalid value: \"3\": must be equal to nvidia.com/gpu.sliced limit of 1"
        ),
        "{text}"
    );
    assert!(!gw.kubectl(&["get", "pod", "over"]).status.success());

    // Nor by a later patch of the requests.
    std::fs::write(&file, pod("fair", "1", "1")).unwrap();
    gw.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let out = gw.kubectl(&[
        "patch",
        "pod",
        "fair",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/containers/0/resources/requests/nvidia.com~1gpu.sliced","value":"4"}]"#,
    ]);
    assert!(!out.status.success(), "patched");
    let limits = gw.kubectl_ok(&[
        "get",
        "pod",
        "fair",
        "-o",
        "jsonpath={.spec.containers[0].resources.requests}",
    ]);
    assert!(limits.contains("\"1\""), "{limits}");
}
