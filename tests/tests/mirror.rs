//! End to end: `worker-gateway --upstreams` mirroring two upstream clusters (each an embedded
//! cluster in its own `worker-gateway` process), read with the real `kubectl` through the
//! kubeconfigs the mirroring gateway writes.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::Stdio,
    sync::mpsc,
};

use gpustack_tests::embedded::{DEADLINE, GatewayProcess, free_port, kubectl_with, wait_until};
use serde_json::Value;

fn crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds")
}

/// An upstream: an embedded cluster with the worker CRDs and one Devices object per name.
fn upstream(root: &Path, cluster: &str, devices: &[&str]) -> GatewayProcess {
    let gw = GatewayProcess::start(&root.join(cluster), cluster);
    gw.kubectl_ok(&["apply", "-f", crds_dir().to_str().unwrap()]);
    gw.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/devices.worker.gpustack.ai",
        "--timeout=20s",
    ]);
    for d in devices {
        create_device(&gw, d);
    }
    gw
}

fn create_device(gw: &GatewayProcess, name: &str) {
    let manifest = format!(
        "apiVersion: worker.gpustack.ai/v1alpha1\nkind: Devices\nmetadata:\n  name: {name}\n  labels: {{cluster-of-origin: {}}}\nspec: {{}}\n",
        gw.cluster
    );
    let mut child = gw
        .kubectl_command(&["create", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl create");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(manifest.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "creating {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The mirroring gateway, serving `upstreams` (each mirrored under its own cluster name).
fn mirror(root: &Path, upstreams: &[&GatewayProcess]) -> GatewayProcess {
    let file = root.join("upstreams.yaml");
    let text: String = upstreams
        .iter()
        .map(|u| {
            format!(
                "- name: {}\n  kubeconfig: {}\n",
                u.cluster,
                u.kubeconfig().display()
            )
        })
        .collect();
    std::fs::write(&file, text).unwrap();
    start_hub(root, &upstreams[0].cluster, free_port(), &[])
}

/// (Re)starts the hub of [`mirror`] on `port`, with `extra` flags.
fn start_hub(root: &Path, first: &str, port: u16, extra: &[&str]) -> GatewayProcess {
    let flag = format!("--upstreams={}", root.join("upstreams.yaml").display());
    let mut args = vec![flag.as_str(), "--worker-conn-mode=loopback"];
    args.extend_from_slice(extra);
    GatewayProcess::start_with(&root.join("hub"), first, port, &args)
}

/// kubectl flags that read mirrored cluster `cluster` through the hub.
fn hub_flags(hub: &GatewayProcess, cluster: &str) -> Vec<String> {
    vec![
        format!(
            "--kubeconfig={}",
            hub.data_dir.join(format!("{cluster}.kubeconfig")).display()
        ),
        format!("--cache-dir={}", hub.cache_dir.display()),
    ]
}

fn names(hub: &GatewayProcess, cluster: &str) -> Vec<String> {
    names_selected(hub, cluster, &[])
}

fn names_selected(hub: &GatewayProcess, cluster: &str, extra: &[&str]) -> Vec<String> {
    try_names(hub, cluster, extra)
        .unwrap_or_else(|e| panic!("listing {cluster}'s devices on the hub: {e}"))
}

/// The names of `cluster`'s Devices on the hub, or kubectl's complaint.
fn try_names(hub: &GatewayProcess, cluster: &str, extra: &[&str]) -> Result<Vec<String>, String> {
    let mut args = vec!["get", "devices", "-o", "name"];
    args.extend_from_slice(extra);
    let out = kubectl_with(&hub_flags(hub, cluster), &args)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            l.trim_start_matches("devices.worker.gpustack.ai/")
                .to_owned()
        })
        .collect();
    v.sort();
    Ok(v)
}

/// The hub's status entry for `cluster`.
fn worker(hub: &GatewayProcess, cluster: &str) -> Value {
    let doc: Value =
        serde_json::from_str(&hub.kubectl_ok(&["get", "--raw", "/apis/workers"])).unwrap();
    doc["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["cluster"] == cluster).cloned())
        .unwrap_or(Value::Null)
}

fn wait_phase(hub: &GatewayProcess, cluster: &str, phase: &str) -> Value {
    wait_until(&format!("{cluster} to be {phase}"), DEADLINE, || {
        let w = worker(hub, cluster);
        (w["phase"] == phase).then_some(w)
    })
}

fn wait_names(hub: &GatewayProcess, cluster: &str, want: &[&str]) {
    wait_until(
        &format!("{cluster}'s devices on the hub to be {want:?}"),
        DEADLINE,
        || (names(hub, cluster) == want).then_some(()),
    );
}

#[test]
fn hub_mirrors_two_upstreams_read_only_and_follows_their_changes() {
    let dir = tempfile::tempdir().unwrap();
    let east = upstream(dir.path(), "east", &["e-1", "e-2"]);
    let west = upstream(dir.path(), "west", &["w-1"]);
    let hub = mirror(dir.path(), &[&east, &west]);

    let e = wait_phase(&hub, "east", "Ready");
    assert_eq!(e["counts"]["Devices.worker.gpustack.ai"], 2, "{e}");
    assert!(e["lastSyncTime"].is_string(), "{e}");
    assert!(e["lastError"].is_null(), "{e}");
    let w = wait_phase(&hub, "west", "Ready");
    assert_eq!(w["counts"]["Devices.worker.gpustack.ai"], 1, "{w}");
    // Nodes are served (built in) but there are none; every default kind is mirrored.
    assert_eq!(w["counts"]["Node"], 0, "{w}");

    assert_eq!(names(&hub, "east"), ["e-1", "e-2"]);
    assert_eq!(names(&hub, "west"), ["w-1"]);
    // The fleet view: every upstream together, names made unique, the cluster as a label.
    assert_eq!(names(&hub, "_fleet"), ["east.e-1", "east.e-2", "west.w-1"]);
    assert_eq!(
        names_selected(&hub, "_fleet", &["-l", "gpustack.ai/cluster=west"]),
        ["west.w-1"]
    );
    let copy: Value = serde_json::from_str(
        &kubectl_with(
            &hub_flags(&hub, "_fleet"),
            &["get", "devices", "east.e-1", "-o", "json"],
        )
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        copy["metadata"]["annotations"]["gpustack.ai/original-name"],
        "e-1"
    );
    let got: Value = serde_json::from_str(
        &kubectl_with(
            &hub_flags(&hub, "west"),
            &["get", "devices", "w-1", "-o", "json"],
        )
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap(),
    )
    .unwrap();
    assert_eq!(got["kind"], "Devices");
    assert_eq!(got["metadata"]["labels"]["cluster-of-origin"], "west");
    assert!(got["metadata"].get("managedFields").is_none(), "{got}");

    // A watcher on the hub sees creations, updates and deletions made upstream.
    let mut watch = kubectl_with(
        &hub_flags(&hub, "east"),
        &[
            "get",
            "devices",
            "--watch",
            "--output-watch-events",
            "-o",
            "json",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .expect("kubectl get --watch");
    let stdout = watch.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for ev in serde_json::Deserializer::from_reader(stdout).into_iter::<Value>() {
            let Ok(ev) = ev else { break };
            if tx.send(ev).is_err() {
                break;
            }
        }
    });
    let wait_event = |kind: &str, name: &str| loop {
        let ev = rx
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|_| panic!("no {kind} event for {name} on the hub"));
        if ev["type"] == kind && ev["object"]["metadata"]["name"] == name {
            return ev;
        }
    };
    // kubectl lists, prints, then watches from the list's version: a change made after the
    // listed objects show is seen.
    wait_event("ADDED", "e-2");
    create_device(&east, "e-3");
    wait_event("ADDED", "e-3");
    east.kubectl_ok(&["label", "devices", "e-1", "tier=gold"]);
    let ev = wait_event("MODIFIED", "e-1");
    assert_eq!(ev["object"]["metadata"]["labels"]["tier"], "gold");
    east.kubectl_ok(&["delete", "devices", "e-2"]);
    wait_event("DELETED", "e-2");
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(names(&hub, "east"), ["e-1", "e-3"]);
    assert_eq!(
        names(&hub, "west"),
        ["w-1"],
        "the other upstream is untouched"
    );
    wait_names(&hub, "_fleet", &["east.e-1", "east.e-3", "west.w-1"]);
    wait_until("east's count to follow", DEADLINE, || {
        (worker(&hub, "east")["counts"]["Devices.worker.gpustack.ai"] == 2).then_some(())
    });

    // The mirror is read-only.
    let out = kubectl_with(
        &hub_flags(&hub, "east"),
        &["label", "devices", "e-1", "tier=silver", "--overwrite"],
    )
    .output()
    .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not allow this method"), "{err}");
    let out = kubectl_with(&hub_flags(&hub, "east"), &["delete", "devices", "e-1"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "delete on a mirror must fail");
    assert_eq!(names(&hub, "east"), ["e-1", "e-3"]);
}

#[test]
fn killed_upstream_stays_readable_and_degraded_then_converges_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let east = upstream(dir.path(), "east", &["e-1", "e-2"]);
    let west = upstream(dir.path(), "west", &["w-1"]);
    let hub = mirror(dir.path(), &[&east, &west]);
    wait_phase(&hub, "east", "Ready");
    wait_phase(&hub, "west", "Ready");

    let (port, data) = (east.port, east.data_dir.clone());
    east.crash();
    let e = wait_phase(&hub, "east", "Degraded");
    assert!(e["lastSyncTime"].is_string(), "{e}");
    let error = e["lastError"].as_str().unwrap_or_default();
    assert!(!error.is_empty(), "{e}");
    let kubeconfig: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(data.join("east.kubeconfig")).unwrap())
            .unwrap();
    let token = kubeconfig["users"][0]["user"]["token"].as_str().unwrap();
    assert!(token.len() > 20);
    assert!(
        !error.contains(token),
        "the status leaks the token: {error}"
    );
    assert_eq!(
        names(&hub, "east"),
        ["e-1", "e-2"],
        "still served while down"
    );
    assert_eq!(
        worker(&hub, "west")["phase"],
        "Ready",
        "{}",
        worker(&hub, "west")
    );

    // Back, on the same address and data, and changed: the mirror converges.
    let serve = "--embedded-cluster=east".to_owned();
    let east = GatewayProcess::start_with(&data, "east", port, &[serve.as_str()]);
    east.kubectl_ok(&["delete", "devices", "e-1"]);
    create_device(&east, "e-4");
    wait_names(&hub, "east", &["e-2", "e-4"]);
    wait_names(&hub, "_fleet", &["east.e-2", "east.e-4", "west.w-1"]);
    wait_until("east's count to follow", DEADLINE, || {
        (worker(&hub, "east")["counts"]["Devices.worker.gpustack.ai"] == 2).then_some(())
    });
}

#[test]
fn restarted_hub_serves_its_stored_mirror_and_its_relist_sweeps_what_vanished() {
    let dir = tempfile::tempdir().unwrap();
    let east = upstream(dir.path(), "east", &["e-1", "e-2"]);
    let west = upstream(dir.path(), "west", &["w-1"]);
    let hub = mirror(dir.path(), &[&east, &west]);
    wait_phase(&hub, "east", "Ready");
    wait_phase(&hub, "west", "Ready");
    let port = hub.port;
    assert!(hub.stop().success());

    // While the hub is down: east changes, west goes away.
    east.kubectl_ok(&["delete", "devices", "e-1"]);
    create_device(&east, "e-5");
    west.crash();

    let hub = start_hub(dir.path(), "east", port, &[]);
    // West's mirror is served from the store although west cannot be reached.
    assert_eq!(names(&hub, "west"), ["w-1"]);
    assert_eq!(worker(&hub, "west")["phase"], "Pending");
    // East's fresh list replaces what the hub had: e-1 is swept, e-5 appears.
    wait_names(&hub, "east", &["e-2", "e-5"]);
    wait_names(&hub, "_fleet", &["east.e-2", "east.e-5", "west.w-1"]);
    let e = wait_phase(&hub, "east", "Ready");
    assert_eq!(e["counts"]["Devices.worker.gpustack.ai"], 2, "{e}");
}

#[test]
fn frozen_upstream_is_detected_and_recovers_after_it_thaws() {
    let dir = tempfile::tempdir().unwrap();
    let east = upstream(dir.path(), "east", &["e-1"]);
    let file = dir.path().join("upstreams.yaml");
    std::fs::write(
        &file,
        format!(
            "- name: east\n  kubeconfig: {}\n",
            east.kubeconfig().display()
        ),
    )
    .unwrap();
    // A probe that gets no answer within 1s marks the upstream Degraded.
    let hub = start_hub(
        dir.path(),
        "east",
        free_port(),
        &["--worker-readiness-check-timeout=1s"],
    );
    wait_phase(&hub, "east", "Ready");

    east.freeze();
    let e = wait_phase(&hub, "east", "Degraded");
    assert!(
        e["lastError"]
            .as_str()
            .is_some_and(|m| m.contains("timed out")),
        "{e}"
    );
    assert_eq!(names(&hub, "east"), ["e-1"], "still served while frozen");
    east.thaw();
    wait_phase(&hub, "east", "Ready");
    create_device(&east, "e-2");
    wait_names(&hub, "east", &["e-1", "e-2"]);
}

#[test]
fn kind_installed_upstream_after_the_hub_started_is_mirrored_once_served() {
    let dir = tempfile::tempdir().unwrap();
    // No CRDs yet: the upstream serves Nodes only.
    let east = GatewayProcess::start(&dir.path().join("east"), "east");
    let hub = mirror(dir.path(), &[&east]);
    let e = wait_phase(&hub, "east", "Ready");
    let not_served = e["notServed"].as_array().cloned().unwrap_or_default();
    assert!(
        not_served.iter().any(|k| k == "Devices.worker.gpustack.ai"),
        "{e}"
    );

    east.kubectl_ok(&["apply", "-f", crds_dir().to_str().unwrap()]);
    east.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/devices.worker.gpustack.ai",
        "--timeout=20s",
    ]);
    create_device(&east, "late-1");
    wait_until("the late kind to be mirrored", DEADLINE, || {
        (try_names(&hub, "east", &[]).ok()? == ["late-1"]).then_some(())
    });
    let e = wait_phase(&hub, "east", "Ready");
    assert_eq!(e["notServed"], serde_json::json!([]), "{e}");
    assert_eq!(e["counts"]["Devices.worker.gpustack.ai"], 1, "{e}");
}
