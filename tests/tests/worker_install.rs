//! The worker's install keeps the project's CRDs as compiled in: a drifted CRD is aligned when
//! the worker starts, and a terminating one is left alone (not patched, not recreated).

use gpustack_tests::{embedded::GatewayProcess, worker::WorkerProcess};
use serde_json::Value;

fn crd(gw: &GatewayProcess, name: &str) -> Value {
    serde_json::from_str(&gw.kubectl_ok(&["get", "crd", name, "-o", "json"])).unwrap()
}

#[test]
fn drifted_crds_are_aligned_and_terminating_ones_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    let first = WorkerProcess::start(&gw, &tmp.path().join("w1"), &["--disable-auths"], &[]);
    assert!(first.stop().success());

    // Someone edits a CRD by hand: the short name goes.
    let types = "instancetypes.worker.gpustack.ai";
    gw.kubectl_ok(&[
        "patch",
        "crd",
        types,
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/names/shortNames","value":["dv"]}]"#,
    ]);
    assert_eq!(
        crd(&gw, types)["spec"]["names"]["shortNames"],
        serde_json::json!(["dv"])
    );
    // Another is being deleted, held by someone's finalizer.
    let stores = "nodemodelstores.worker.gpustack.ai";
    gw.kubectl_ok(&[
        "patch",
        "crd",
        stores,
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);
    gw.kubectl_ok(&["delete", "crd", stores, "--wait=false"]);
    let held = crd(&gw, stores);
    assert!(held["metadata"]["deletionTimestamp"].is_string());

    let second = WorkerProcess::start(&gw, &tmp.path().join("w2"), &["--disable-auths"], &[]);
    // Ready means its install pass completed: the drift is gone...
    let aligned = crd(&gw, types);
    assert_eq!(
        aligned["spec"]["names"]["shortNames"],
        serde_json::json!(["instype"]),
        "{aligned}"
    );
    // ...and the terminating CRD was not touched.
    let after = crd(&gw, stores);
    assert_eq!(
        after["metadata"]["resourceVersion"],
        held["metadata"]["resourceVersion"]
    );
    assert!(
        second.log().contains("Terminating"),
        "the install says it left it alone:\n{}",
        second.log()
    );
    gw.kubectl_ok(&[
        "patch",
        "crd",
        stores,
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
}
