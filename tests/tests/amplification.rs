//! Amplification, attacked through the real `worker-gateway --embedded-cluster`: small requests
//! that would make huge objects or huge answers (a JSON patch of `copy`s, a create that CRD
//! defaults inflate, a create with thousands of values outside a huge enum) are refused with a
//! bounded answer, and the process under attack stays within a memory bound the whole time (a
//! watchdog samples its resident size from /proc).

use std::{
    path::Path,
    time::{Duration, Instant},
};

use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess},
    wait::wait_until,
    watchdog::Watchdog,
};
use serde_json::{Value, json};

/// The most the gateway's resident memory may grow while attacked. Each attack, unbounded,
/// took it past 2 GB; bounded, a 16 MiB object and its copies stay well under this.
const GROWTH_BOUND_KB: u64 = 400 * 1024;

fn write(dir: &Path, name: &str, v: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, v.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Runs kubectl, which must fail within `limit`; its error text.
fn refused_within(gw: &GatewayProcess, limit: Duration, args: &[&str]) -> String {
    let started = Instant::now();
    let out = gw.kubectl(args);
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "{args:?} was accepted: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(took < limit, "{args:?} took {took:?}");
    text
}

fn crd(name: &str, plural: &str, spec_schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.amp.example.com")},
        "spec": {"group": "amp.example.com", "scope": "Namespaced",
            "names": {"kind": name, "plural": plural, "singular": plural.trim_end_matches('s'), "listKind": format!("{name}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}}}]}
    })
}

fn serve_kind(gw: &GatewayProcess, dir: &Path, crd: &Value, plural: &str) {
    gw.kubectl_ok(&[
        "create",
        "-f",
        &write(dir, &format!("{plural}-crd.json"), crd),
    ]);
    wait_until(&format!("{plural} to be served"), DEADLINE, || {
        gw.kubectl(&["get", plural]).status.success().then_some(())
    });
}

#[test]
fn small_requests_cannot_make_huge_objects_or_answers() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("data"), "amp");
    let pid = gw.pid().expect("the gateway's pid");
    let watchdog = Watchdog::on(pid, GROWTH_BOUND_KB);
    let limit = Duration::from_secs(20);

    // 1. A JSON patch of copies: each doubles what the last made.
    gw.kubectl_ok(&["create", "configmap", "grow", "--from-literal=k=v"]);
    let mut ops = vec![json!({"op": "add", "path": "/x", "value": ["a".repeat(1024)]})];
    ops.extend((0..40).map(|_| json!({"op": "copy", "from": "/x", "path": "/x/-"})));
    let patch = write(dir.path(), "copies.json", &json!(ops));
    assert!(
        std::fs::metadata(&patch).unwrap().len() < 4096,
        "a small patch"
    );
    let text = refused_within(
        &gw,
        limit,
        &[
            "patch",
            "configmap",
            "grow",
            "--type=json",
            "--patch-file",
            &patch,
        ],
    );
    assert!(text.contains("would exceed the limit"), "{text}");
    // The 413 of any object past the limit, not a 422 of a patch that does not apply.
    assert!(text.contains("Request entity too large"), "{text}");

    // 2. A create that defaults inflate: 20,000 empty items, each given a 1 KiB default.
    let padded = crd(
        "Padded",
        "paddeds",
        json!({"type": "object", "properties": {"items": {"type": "array", "items": {
            "type": "object", "properties": {"pad": {"type": "string", "default": "p".repeat(1024)}}}}}}),
    );
    serve_kind(&gw, dir.path(), &padded, "paddeds");
    let obj = json!({"apiVersion": "amp.example.com/v1", "kind": "Padded",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"items": vec![json!({}); 20_000]}});
    let text = refused_within(
        &gw,
        limit,
        &["create", "-f", &write(dir.path(), "padded.json", &obj)],
    );
    assert!(text.contains("Request entity too large"), "{text}");

    // 3. Thousands of values outside a 20,000-value enum: a bounded list of causes, each
    //    naming a bounded number of the allowed values.
    let values: Vec<String> = (0..20_000).map(|i| format!("value-{i:05}")).collect();
    let enumerated = crd(
        "Picky",
        "pickies",
        json!({"type": "object", "properties": {"picks": {"type": "array", "items": {
            "type": "string", "enum": values}}}}),
    );
    serve_kind(&gw, dir.path(), &enumerated, "pickies");
    let bad: Vec<String> = (0..2_000).map(|i| format!("bad-{i}")).collect();
    let obj = json!({"apiVersion": "amp.example.com/v1", "kind": "Picky",
        "metadata": {"name": "p", "namespace": "default"}, "spec": {"picks": bad}});
    let file = write(dir.path(), "picky.json", &obj);
    let started = Instant::now();
    let out = gw.kubectl(&["create", "-f", &file, "-v=6"]);
    assert!(started.elapsed() < limit);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(text.contains("422"), "{text}");
    assert!(text.contains("supported values: \"value-00000\""), "{text}");
    assert!(text.contains("(19984 more)"), "{text}");
    // The whole answer, read raw: at most 100 causes, and small.
    let raw = gw.kubectl(&[
        "create",
        "--raw",
        "/apis/amp.example.com/v1/namespaces/default/pickies",
        "-f",
        &file,
    ]);
    let body = String::from_utf8_lossy(&raw.stderr).into_owned();
    assert!(body.len() < 256 * 1024, "an answer of {} bytes", body.len());

    let growth = watchdog.growth_kb();
    assert!(
        growth < GROWTH_BOUND_KB,
        "the gateway grew by {growth} KiB under attack (bound {GROWTH_BOUND_KB} KiB)"
    );
    // And it still serves.
    gw.kubectl_ok(&["get", "configmap", "grow"]);
}
