//! End to end: `kubectl` against the real `worker-gateway --embedded-cluster` process, whose
//! embedded cluster calls an admission webhook (the in-test stand-in for the worker's admission
//! webhooks) and reports its denial.

#[path = "../../gateway/tests/support/webhook.rs"]
mod webhook;

use gpustack_tests::embedded::GatewayProcess;
use serde_json::json;

use webhook::{DENIAL, WebhookServer, configuration};

#[test]
fn kubectl_prints_a_validating_webhook_denial() {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let server = runtime.block_on(WebhookServer::start());
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = GatewayProcess::start(&dir.path().join("data"), "demo");

    let config = configuration(
        "ValidatingWebhookConfiguration",
        "deny",
        "deny.example.com",
        json!({"url": server.url("/validate"), "caBundle": server.ca_bundle()}),
        json!({}),
    );
    let config_file = dir.path().join("webhook.json");
    std::fs::write(&config_file, config.to_string()).unwrap();
    gw.kubectl_ok(&["create", "-f", config_file.to_str().unwrap()]);

    let refused = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "refused", "namespace": "default", "labels": {"deny": "true"}},
        "data": {"k": "v"},
    });
    let refused_file = dir.path().join("refused.json");
    std::fs::write(&refused_file, refused.to_string()).unwrap();
    let stderr = gw.kubectl_err(&["create", "-f", refused_file.to_str().unwrap()]);
    assert!(
        stderr.contains(&format!(
            "admission webhook \"deny.example.com\" denied the request: {DENIAL}"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("Forbidden"), "{stderr}");

    // Allowed objects are created, with the webhook's warning printed.
    let out = gw.kubectl(&["create", "configmap", "fine", "--from-literal=k=v"]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(webhook::WARNING), "{stderr}");
    assert_eq!(server.requests("/validate").len(), 2);
    gw.stop();
}
