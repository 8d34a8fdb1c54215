//! The `resourceVersion` a list or watch asks for, through the real `worker-gateway
//! --embedded-cluster`: not a version is a 400, one the store has not reached is a 504 "Too large
//! resource version" after a short wait (never an empty 200), and a reached one is served.

use std::time::{Duration, Instant};

use gpustack_tests::embedded::GatewayProcess;

#[test]
fn lists_and_watches_judge_the_version_they_ask_for() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("data"), "versions");
    let status = |path: &str| {
        let out = gw.kubectl(&["get", "--raw", path, "-v=6"]);
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), text)
    };

    let (ok, text) = status("/api/v1/namespaces/default/configmaps?resourceVersion=abc");
    assert!(!ok && text.contains("400"), "{text}");
    assert!(text.contains("resourceVersion: Invalid value"), "{text}");
    let (ok, text) = status("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=abc");
    assert!(!ok && text.contains("400"), "{text}");

    let started = Instant::now();
    let (ok, text) =
        status("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=999999999");
    assert!(!ok && text.contains("504"), "{text}");
    assert!(
        text.contains("Too large resource version: 999999999"),
        "{text}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(10),
        "answered after {waited:?}"
    );
    let (ok, text) = status("/api/v1/namespaces/default/configmaps?resourceVersion=999999999");
    assert!(!ok && text.contains("504"), "{text}");

    // A version the store has reached is served at once.
    let rv = gw.kubectl_ok(&[
        "get",
        "configmaps",
        "-n",
        "default",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    let (ok, text) = status(&format!(
        "/api/v1/namespaces/default/configmaps?resourceVersion={}",
        rv.trim()
    ));
    assert!(ok, "{text}");
}
