//! End to end: `worker-gateway --upstreams` mirroring upstream clusters (each an embedded
//! cluster in its own `worker-gateway` process), read with the real `kubectl` through the
//! kubeconfigs the mirroring gateway writes, with kube-rs clients over HTTPS, and with a kube-rs
//! client over the hub's unix socket. Each test runs with the hub's store on SQLite and on
//! PostgreSQL (`on_sqlite::NAME`, `on_postgres::NAME`).

use std::{
    os::unix::fs::{FileTypeExt, PermissionsExt},
    path::Path,
    process::Stdio,
    sync::mpsc,
};

use futures::StreamExt;
use gpustack_api::devices::Devices;
use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess, free_port, kubectl_with},
    hub::{
        add_device, add_devices, crds_dir, start_upstream, upstream, upstream_with, upstreams_file,
    },
    hub_backend::{Backend, HubStore},
    on_both_backends,
    wait::wait_until,
};
use kube::{
    Api, Client, Config, ResourceExt,
    api::{ApiResource, DynamicObject, ListParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
    runtime::watcher,
};
use serde_json::Value;

on_both_backends!(
    hub_mirrors_two_upstreams_read_only_and_follows_their_changes,
    killed_upstream_stays_readable_and_degraded_then_converges_after_restart,
    restarted_hub_serves_its_stored_mirror_and_its_relist_sweeps_what_vanished,
    fleet_watch_resumes_from_its_version_across_a_hub_restart,
    frozen_upstream_is_detected_and_recovers_after_it_thaws,
    burst_waiting_for_a_frozen_hub_is_mirrored_and_counted_to_its_last_object,
    kind_installed_upstream_after_the_hub_started_is_mirrored_once_served,
    three_upstreams_fleet_view_lists_all_with_cluster_labels,
    upstream_compaction_makes_the_hub_relist_and_converge,
    kube_client_over_the_unix_socket_reads_the_mirror,
);

/// The mirroring gateway on `store`, serving `upstreams` (each mirrored under its own cluster
/// name).
fn mirror(root: &Path, store: &HubStore, upstreams: &[&GatewayProcess]) -> GatewayProcess {
    upstreams_file(root, upstreams);
    start_hub(root, store, &upstreams[0].cluster, free_port(), &[])
}

/// (Re)starts the hub of [`mirror`] on `port`, with `extra` flags.
fn start_hub(
    root: &Path,
    store: &HubStore,
    first: &str,
    port: u16,
    extra: &[&str],
) -> GatewayProcess {
    let flag = format!("--upstreams={}", root.join("upstreams.yaml").display());
    let mut args = vec![flag.as_str(), "--worker-conn-mode=loopback"];
    args.extend_from_slice(extra);
    GatewayProcess::start_with(&root.join("hub"), first, port, &store.args(&args))
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
    Ok(sorted_names(&String::from_utf8_lossy(&out.stdout)))
}

/// The sorted names in `kubectl get devices -o name` output, without the resource prefix.
fn sorted_names(out: &str) -> Vec<String> {
    let mut v: Vec<String> = out
        .lines()
        .map(|l| {
            l.trim_start_matches("devices.worker.gpustack.ai/")
                .to_owned()
        })
        .collect();
    v.sort();
    v
}

/// The hub's status entry for `cluster`, read over the owner's unix socket (a cluster's token
/// sees its own cluster's status only).
fn worker(hub: &GatewayProcess, cluster: &str) -> Value {
    gpustack_tests::hub::upstream_status(hub, cluster)
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

/// Waits until `cluster` is Ready with `n` mirrored Devices: counts are recounted at most once a
/// second per kind, so a status can be Ready a moment before its count catches up.
fn wait_ready_with_devices(hub: &GatewayProcess, cluster: &str, n: usize) -> Value {
    wait_until(
        &format!("{cluster} Ready with {n} Devices"),
        DEADLINE,
        || {
            let w = worker(hub, cluster);
            (w["phase"] == "Ready" && w["counts"]["Devices.worker.gpustack.ai"] == n).then_some(w)
        },
    )
}

fn hub_mirrors_two_upstreams_read_only_and_follows_their_changes(backend: Backend) {
    let store = HubStore::new(backend);
    let dir = tempfile::tempdir().unwrap();
    let east = upstream(dir.path(), "east", &["e-1", "e-2"]);
    let west = upstream(dir.path(), "west", &["w-1"]);
    let hub = mirror(dir.path(), &store, &[&east, &west]);

    let e = wait_ready_with_devices(&hub, "east", 2);
    assert!(e["lastSyncTime"].is_string(), "{e}");
    assert!(e["lastError"].is_null(), "{e}");
    let w = wait_ready_with_devices(&hub, "west", 1);
    // Nodes are served (built in) but there are none; every default kind is mirrored.
    assert_eq!(w["counts"]["Node"], 0, "{w}");

    assert_eq!(names(&hub, "east"), ["e-1", "e-2"]);
    assert_eq!(names(&hub, "west"), ["w-1"]);
    store.assert_devices_in_database("east", 2);
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
    add_device(&east, "e-3");
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
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not allow this method"), "{err}");
    assert_eq!(names(&hub, "east"), ["e-1", "e-3"]);
}

fn killed_upstream_stays_readable_and_degraded_then_converges_after_restart(backend: Backend) {
    let store = HubStore::new(backend);
    let dir = tempfile::tempdir().unwrap();
    let east = upstream(dir.path(), "east", &["e-1", "e-2"]);
    let west = upstream(dir.path(), "west", &["w-1"]);
    let hub = mirror(dir.path(), &store, &[&east, &west]);
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
    let east = start_upstream(&data, "east", port, &[]);
    east.kubectl_ok(&["delete", "devices", "e-1"]);
    add_device(&east, "e-4");
    wait_names(&hub, "east", &["e-2", "e-4"]);
    wait_names(&hub, "_fleet", &["east.e-2", "east.e-4", "west.w-1"]);
    wait_until("east's count to follow", DEADLINE, || {
        (worker(&hub, "east")["counts"]["Devices.worker.gpustack.ai"] == 2).then_some(())
    });
}

fn restarted_hub_serves_its_stored_mirror_and_its_relist_sweeps_what_vanished(backend: Backend) {
    let store = HubStore::new(backend);
    let dir = tempfile::tempdir().unwrap();
    let east = upstream(dir.path(), "east", &["e-1", "e-2"]);
    let west = upstream(dir.path(), "west", &["w-1"]);
    let hub = mirror(dir.path(), &store, &[&east, &west]);
    wait_phase(&hub, "east", "Ready");
    wait_phase(&hub, "west", "Ready");
    let port = hub.port;
    assert!(hub.stop().success());

    // While the hub is down: east changes, west goes away.
    east.kubectl_ok(&["delete", "devices", "e-1"]);
    add_device(&east, "e-5");
    west.crash();

    let hub = start_hub(dir.path(), &store, "east", port, &[]);
    // West's mirror is served from the store although west cannot be reached, and its status
    // says so: Degraded, with the time of the last sync (made before the restart).
    assert_eq!(names(&hub, "west"), ["w-1"]);
    let w = wait_phase(&hub, "west", "Degraded");
    assert!(w["lastSyncTime"].is_string(), "{w}");
    assert!(
        w["lastError"].as_str().is_some_and(|e| !e.is_empty()),
        "{w}"
    );
    // East's fresh list replaces what the hub had: e-1 is swept, e-5 appears.
    wait_names(&hub, "east", &["e-2", "e-5"]);
    wait_names(&hub, "_fleet", &["east.e-2", "east.e-5", "west.w-1"]);
    wait_ready_with_devices(&hub, "east", 2);
}

/// `GET /clusters/CLUSTER/PATH` on the hub, over its unix socket.
fn hub_get(hub: &GatewayProcess, cluster: &str, path: &str) -> String {
    let target = format!("/clusters/{cluster}{path}");
    let (code, body) = gpustack_tests::hub::http_over_unix(&hub.socket(), "GET", &target, None)
        .expect("a request over the hub's socket");
    assert_eq!(code, 200, "{target}: {body}");
    body
}

fn fleet_watch_resumes_from_its_version_across_a_hub_restart(backend: Backend) {
    let store = HubStore::new(backend);
    let dir = tempfile::tempdir().unwrap();
    let east = upstream(dir.path(), "east", &["e-1", "e-2"]);
    let hub = mirror(dir.path(), &store, &[&east]);
    wait_names(&hub, "_fleet", &["east.e-1", "east.e-2"]);
    let devices = "/apis/worker.gpustack.ai/v1alpha1/devices";
    let list: Value = serde_json::from_str(&hub_get(&hub, "_fleet", devices)).unwrap();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("a fleet list carries its resourceVersion")
        .to_owned();
    let port = hub.port;
    assert!(hub.stop().success());

    // While the hub is down, east changes.
    east.kubectl_ok(&["delete", "devices", "e-1"]);
    add_device(&east, "e-3");
    let hub = start_hub(dir.path(), &store, "east", port, &[]);
    wait_names(&hub, "_fleet", &["east.e-2", "east.e-3"]);

    // A fleet watcher that had got to `rv` before the restart resumes from it: it is told
    // exactly what changed since, under fleet names, and nothing it already had.
    let watch = format!("{devices}?watch=1&resourceVersion={rv}&timeoutSeconds=1");
    let out = hub_get(&hub, "_fleet", &watch);
    let mut seen: Vec<(String, String)> = serde_json::Deserializer::from_str(&out)
        .into_iter::<Value>()
        .map(|ev| {
            let ev = ev.expect("a watch event");
            let obj = &ev["object"];
            assert_eq!(
                obj["metadata"]["labels"]["gpustack.ai/cluster"], "east",
                "{ev}"
            );
            let at: u64 = obj["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(at > rv.parse().unwrap(), "{ev}");
            (
                ev["type"].as_str().unwrap().to_owned(),
                obj["metadata"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("ADDED".to_owned(), "east.e-3".to_owned()),
            ("DELETED".to_owned(), "east.e-1".to_owned())
        ]
    );
}

fn frozen_upstream_is_detected_and_recovers_after_it_thaws(backend: Backend) {
    let store = HubStore::new(backend);
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
        &store,
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
    add_device(&east, "e-2");
    wait_names(&hub, "east", &["e-1", "e-2"]);
}

/// A burst that reaches the hub at once (it was frozen while the upstream created it) is read
/// ahead and written in chunks, each while the previous commits: all of it is served and
/// counted, to its last object, with no further change to push it through. (That a last chunk
/// is settled before the watch reads on is pinned by `gateway/src/mirror/run.rs`'s tests.)
fn burst_waiting_for_a_frozen_hub_is_mirrored_and_counted_to_its_last_object(backend: Backend) {
    let store = HubStore::new(backend);
    let dir = tempfile::tempdir().unwrap();
    let east = upstream(dir.path(), "east", &["e-0"]);
    let hub = mirror(dir.path(), &store, &[&east]);
    wait_ready_with_devices(&hub, "east", 1);

    // 70 objects: more than one chunk however they arrive, the last one short.
    let burst: Vec<String> = (1..=70).map(|i| format!("b-{i:02}")).collect();
    let created: Vec<&str> = burst.iter().map(String::as_str).collect();
    hub.freeze();
    add_devices(&east, &created);
    hub.thaw();

    wait_ready_with_devices(&hub, "east", 71);
    let mut want: Vec<String> = burst.clone();
    want.push("e-0".into());
    want.sort();
    assert_eq!(names(&hub, "east"), want);
    assert_eq!(names(&hub, "_fleet"), fleet_names("east", &want));
}

fn kind_installed_upstream_after_the_hub_started_is_mirrored_once_served(backend: Backend) {
    let store = HubStore::new(backend);
    let dir = tempfile::tempdir().unwrap();
    // No CRDs yet: the upstream serves Nodes only.
    let east = GatewayProcess::start(&dir.path().join("east"), "east");
    let hub = mirror(dir.path(), &store, &[&east]);
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
    add_device(&east, "late-1");
    wait_until("the late kind to be mirrored", DEADLINE, || {
        (try_names(&hub, "east", &[]).ok()? == ["late-1"]).then_some(())
    });
    let e = wait_ready_with_devices(&hub, "east", 1);
    assert_eq!(e["notServed"], serde_json::json!([]), "{e}");
}

// ---- kube-rs clients: over HTTPS with the hub's kubeconfigs, over its unix socket ----

/// A runtime for the kube-rs parts of a test; the blocking helpers (kubectl, polling) keep
/// running on the test's own thread while its watchers run on the runtime's workers.
fn runtime() -> tokio::runtime::Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A kube client from one of the hub's kubeconfigs (HTTPS, bearer token).
async fn kube_client(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("the hub's kubeconfig parses");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kube config");
    Client::try_from(config).expect("kube client")
}

/// A kube client that speaks plain HTTP over the unix socket at `socket`, every request made
/// relative to `base` (`http://localhost/clusters/NAME`): hyper-util's legacy client over a
/// connector that opens the socket whatever the URI. Its tasks run on `rt`.
fn unix_client(rt: &tokio::runtime::Runtime, socket: &Path, base: &str) -> Client {
    let _in_runtime = rt.enter();
    use hyper_util::rt::{TokioExecutor, TokioIo};
    type Connecting = std::pin::Pin<
        Box<
            dyn std::future::Future<Output = std::io::Result<TokioIo<tokio::net::UnixStream>>>
                + Send,
        >,
    >;
    let socket = socket.to_owned();
    let connector = tower::service_fn(move |_: http::Uri| -> Connecting {
        let socket = socket.clone();
        Box::pin(async move {
            tokio::net::UnixStream::connect(socket)
                .await
                .map(TokioIo::new)
        })
    });
    let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build::<_, kube::client::Body>(connector);
    let service = tower::ServiceBuilder::new()
        .layer(kube::client::middleware::BaseUriLayer::new(
            base.parse().expect("base URI"),
        ))
        .service(http);
    Client::new(service, "default")
}

/// What a watcher on the hub saw.
#[derive(Debug)]
enum Seen {
    Synced,
    Applied(Devices),
    Deleted(Devices),
    Failed(String),
}

/// Runs a kube-runtime watcher of `api` on `rt`, forwarding what it sees.
fn watch_devices(
    rt: &tokio::runtime::Runtime,
    api: Api<Devices>,
    config: watcher::Config,
) -> mpsc::Receiver<Seen> {
    let (tx, rx) = mpsc::channel();
    rt.spawn(async move {
        let mut events = watcher::watcher(api, config).boxed();
        while let Some(ev) = events.next().await {
            let seen = match ev {
                Ok(watcher::Event::InitDone) => Seen::Synced,
                Ok(watcher::Event::Apply(d)) => Seen::Applied(d),
                Ok(watcher::Event::Delete(d)) => Seen::Deleted(d),
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => continue,
                Err(e) => Seen::Failed(e.to_string()),
            };
            if tx.send(seen).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for the watcher's first complete list.
fn wait_synced(rx: &mpsc::Receiver<Seen>) {
    loop {
        match rx.recv_timeout(DEADLINE) {
            Ok(Seen::Synced) => return,
            Ok(_) => {}
            Err(_) => panic!("the watcher on the hub never listed"),
        }
    }
}

/// The next change the watcher sees to `name` of type `applied` (else deleted), checking each
/// change seen on the way with `every`.
fn wait_change(
    rx: &mpsc::Receiver<Seen>,
    applied: bool,
    name: &str,
    every: &dyn Fn(&Devices),
) -> Devices {
    loop {
        let seen = rx.recv_timeout(DEADLINE).unwrap_or_else(|_| {
            panic!(
                "the watcher on the hub saw no {} of {name}",
                if applied { "apply" } else { "deletion" }
            )
        });
        let (is_apply, d) = match seen {
            Seen::Applied(d) => (true, d),
            Seen::Deleted(d) => (false, d),
            Seen::Failed(e) => {
                eprintln!("the watcher on the hub retries after: {e}");
                continue;
            }
            Seen::Synced => continue,
        };
        every(&d);
        if is_apply == applied && d.name_any() == name {
            return d;
        }
    }
}

fn label<'a>(d: &'a Devices, key: &str) -> Option<&'a str> {
    d.labels().get(key).map(String::as_str)
}

/// The names of the Devices of an upstream, read from the upstream itself.
fn upstream_names(gw: &GatewayProcess) -> Vec<String> {
    sorted_names(&gw.kubectl_ok(&["get", "devices", "-o", "name"]))
}

/// The resourceVersion of a list of `gw`'s Devices.
fn list_version(gw: &GatewayProcess) -> String {
    let list: Value = serde_json::from_str(&gw.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/worker.gpustack.ai/v1alpha1/devices?limit=1",
    ]))
    .unwrap();
    list["metadata"]["resourceVersion"]
        .as_str()
        .expect("a list carries its resourceVersion")
        .to_owned()
}

/// Whether a watch of `gw`'s Devices from `rv` answers 410 Gone (the log was compacted).
fn watch_expired(gw: &GatewayProcess, rv: &str) -> bool {
    let out = gw.kubectl(&[
        "get",
        "--raw",
        &format!(
            "/apis/worker.gpustack.ai/v1alpha1/devices?watch=1&resourceVersion={rv}&timeoutSeconds=1"
        ),
    ]);
    serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .filter_map(Result::ok)
        .any(|ev| ev["type"] == "ERROR" && ev["object"]["code"] == 410)
}

/// `cluster.name` for each of `names`.
fn fleet_names(cluster: &str, names: &[String]) -> Vec<String> {
    names.iter().map(|n| format!("{cluster}.{n}")).collect()
}

fn three_upstreams_fleet_view_lists_all_with_cluster_labels(backend: Backend) {
    let store = HubStore::new(backend);
    let dir = tempfile::tempdir().unwrap();
    let alpha = upstream(dir.path(), "alpha", &["a-1", "a-2"]);
    let beta = upstream(dir.path(), "beta", &["b-1"]);
    let gamma = upstream(dir.path(), "gamma", &["g-1", "g-2", "g-3"]);
    let hub = mirror(dir.path(), &store, &[&alpha, &beta, &gamma]);
    for (cluster, n) in [("alpha", 2), ("beta", 1), ("gamma", 3)] {
        wait_until(
            &format!("{cluster} to be Ready with {n} Devices"),
            DEADLINE,
            || {
                let w = worker(&hub, cluster);
                (w["phase"] == "Ready" && w["counts"]["Devices.worker.gpustack.ai"] == n)
                    .then_some(())
            },
        );
    }
    // The fleet view has its own kubeconfig, named after the fleet cluster.
    let fleet_kubeconfig = hub.data_dir.join("_fleet.kubeconfig");
    assert!(fleet_kubeconfig.is_file(), "{}", fleet_kubeconfig.display());
    let all = [
        "alpha.a-1",
        "alpha.a-2",
        "beta.b-1",
        "gamma.g-1",
        "gamma.g-2",
        "gamma.g-3",
    ];
    wait_names(&hub, "_fleet", &all);

    // Every copy is labelled with its cluster and annotated with its name there.
    let list: Value = serde_json::from_str(&String::from_utf8_lossy(
        &kubectl_with(
            &hub_flags(&hub, "_fleet"),
            &["get", "devices", "-o", "json"],
        )
        .output()
        .unwrap()
        .stdout,
    ))
    .unwrap();
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), all.len(), "{list}");
    for item in items {
        let meta = &item["metadata"];
        let name = meta["name"].as_str().unwrap();
        let (cluster, original) = name.split_once('.').unwrap();
        assert_eq!(meta["labels"]["gpustack.ai/cluster"], cluster, "{item}");
        assert_eq!(meta["labels"]["cluster-of-origin"], cluster, "{item}");
        assert_eq!(
            meta["annotations"]["gpustack.ai/original-name"], original,
            "{item}"
        );
    }
    // A label selector picks one cluster, alone or with the objects' own labels.
    for (cluster, want) in [
        ("alpha", &all[..2]),
        ("beta", &all[2..3]),
        ("gamma", &all[3..]),
    ] {
        assert_eq!(
            names_selected(
                &hub,
                "_fleet",
                &["-l", &format!("gpustack.ai/cluster={cluster}")]
            ),
            want
        );
    }
    assert_eq!(
        names_selected(
            &hub,
            "_fleet",
            &["-l", "gpustack.ai/cluster=gamma,cluster-of-origin=gamma"]
        ),
        &all[3..]
    );
    assert!(
        names_selected(&hub, "_fleet", &["-l", "gpustack.ai/cluster=delta"]).is_empty(),
        "no such cluster"
    );
    assert_eq!(
        names_selected(&hub, "_fleet", &["-l", "gpustack.ai/cluster!=gamma"]),
        &all[..3]
    );

    // kube-rs watchers on the fleet view (HTTPS, the fleet kubeconfig's token): one on every
    // cluster, one on alpha alone through a label selector.
    let rt = runtime();
    let client = rt.block_on(kube_client(&fleet_kubeconfig));
    let fleet: Api<Devices> = Api::all(client);
    let listed = rt
        .block_on(fleet.list(&ListParams::default()))
        .expect("typed fleet list");
    let mut got: Vec<String> = listed.items.iter().map(ResourceExt::name_any).collect();
    got.sort();
    assert_eq!(got, all);
    let everything = watch_devices(&rt, fleet.clone(), watcher::Config::default());
    let only_alpha = watch_devices(
        &rt,
        fleet.clone(),
        watcher::Config::default().labels("gpustack.ai/cluster=alpha"),
    );
    wait_synced(&everything);
    wait_synced(&only_alpha);
    let labelled = |d: &Devices| {
        let name = d.name_any();
        let cluster = name.split_once('.').map(|(c, _)| c).unwrap_or_default();
        assert_eq!(label(d, "gpustack.ai/cluster"), Some(cluster), "{d:?}");
    };

    // A creation, a label change and a deletion in beta and gamma reach the fleet watcher.
    add_device(&beta, "b-2");
    let d = wait_change(&everything, true, "beta.b-2", &labelled);
    assert_eq!(label(&d, "cluster-of-origin"), Some("beta"));
    beta.kubectl_ok(&["label", "devices", "b-1", "tier=gold"]);
    let d = wait_change(&everything, true, "beta.b-1", &labelled);
    assert_eq!(label(&d, "tier"), Some("gold"), "{d:?}");
    assert_eq!(label(&d, "gpustack.ai/cluster"), Some("beta"), "{d:?}");
    gamma.kubectl_ok(&["delete", "devices", "g-2"]);
    wait_change(&everything, false, "gamma.g-2", &labelled);
    // Alpha's watcher saw none of that; it sees alpha's own change.
    add_device(&alpha, "a-3");
    wait_change(&everything, true, "alpha.a-3", &labelled);
    wait_change(&only_alpha, true, "alpha.a-3", &|d| {
        assert_eq!(
            label(d, "gpustack.ai/cluster"),
            Some("alpha"),
            "the selected watcher saw another cluster's object: {d:?}"
        )
    });
    while let Ok(seen) = only_alpha.try_recv() {
        if let Seen::Applied(d) | Seen::Deleted(d) = seen {
            assert_eq!(label(&d, "gpustack.ai/cluster"), Some("alpha"), "{d:?}");
        }
    }

    let now = [
        "alpha.a-1",
        "alpha.a-2",
        "alpha.a-3",
        "beta.b-1",
        "beta.b-2",
        "gamma.g-1",
        "gamma.g-3",
    ];
    wait_names(&hub, "_fleet", &now);
    assert_eq!(
        names_selected(
            &hub,
            "_fleet",
            &["-l", "gpustack.ai/cluster=beta,tier=gold"]
        ),
        ["beta.b-1"]
    );
    assert_eq!(names(&hub, "gamma"), ["g-1", "g-3"]);
    drop(rt);
}

fn upstream_compaction_makes_the_hub_relist_and_converge(backend: Backend) {
    let store = HubStore::new(backend);
    let dir = tempfile::tempdir().unwrap();
    // The upstream keeps only its 5 newest events and trims its log every second.
    let short_log = [
        "--event-log-retention=5",
        "--event-log-compaction-interval=1s",
    ];
    let east = upstream_with(
        dir.path(),
        "east",
        &["e-1", "e-2", "e-3", "e-4"],
        &short_log,
    );
    let west = upstream(dir.path(), "west", &["w-1"]);
    let hub = mirror(dir.path(), &store, &[&east, &west]);
    wait_phase(&hub, "east", "Ready");
    wait_phase(&hub, "west", "Ready");
    wait_names(&hub, "east", &["e-1", "e-2", "e-3", "e-4"]);
    // The hub has seen everything up to here; from here a watch still resumes.
    let seen_by_hub = list_version(&east);
    assert!(!watch_expired(&east, &seen_by_hub), "compacted too early");

    // The hub is frozen, and its connections to east are cut (east crashes and comes back on
    // the same address and data), so that it must resume its watches once it runs again.
    hub.freeze();
    let (port, data) = (east.port, east.data_dir.clone());
    east.crash();
    let east = start_upstream(&data, "east", port, &short_log);
    // Many changes, deletions among them, more than the upstream's log keeps.
    east.kubectl_ok(&["delete", "devices", "e-1", "e-2"]);
    east.kubectl_ok(&["label", "devices", "e-3", "tier=gold"]);
    for i in 1..=8 {
        add_device(&east, &format!("n-{i}"));
    }
    east.kubectl_ok(&["delete", "devices", "n-1"]);
    wait_until(
        "the upstream to compact its log past what the hub has seen",
        DEADLINE,
        || watch_expired(&east, &seen_by_hub).then_some(()),
    );
    let want = upstream_names(&east);
    assert_eq!(
        want,
        [
            "e-3", "e-4", "n-2", "n-3", "n-4", "n-5", "n-6", "n-7", "n-8"
        ]
    );

    // Thawed, the hub's resumed watch answers 410: it relists and converges to exactly what
    // the upstream has, deletions included.
    hub.thaw();
    let want: Vec<&str> = want.iter().map(String::as_str).collect();
    wait_names(&hub, "east", &want);
    let mut fleet = fleet_names(
        "east",
        &want.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
    );
    fleet.push("west.w-1".into());
    wait_names(
        &hub,
        "_fleet",
        &fleet.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(
        names_selected(&hub, "east", &["-l", "tier=gold"]),
        ["e-3"],
        "the label set while the hub was behind"
    );
    wait_until("east's count to follow", DEADLINE, || {
        (worker(&hub, "east")["counts"]["Devices.worker.gpustack.ai"] == want.len()).then_some(())
    });
    assert_eq!(
        names(&hub, "west"),
        ["w-1"],
        "the other upstream is untouched"
    );
    // The relist came from the expired version, not from a replay: the 410 answered the watch
    // the hub had open (kube-runtime's "too old resource version"), or the watch it resumed
    // from its stored version where it started the mirror again (a hub on PostgreSQL frozen
    // past its lease takes the lease again when it runs, and resumes).
    let log = std::fs::read_to_string(hub.log_path()).unwrap_or_default();
    assert!(
        log.contains("too old resource version")
            || log.contains("relisting upstream=east kind=Devices.worker.gpustack.ai reason=watching Devices.worker.gpustack.ai: the upstream no longer has version"),
        "the hub's log does not show the 410 it relisted after:\n{log}"
    );
    wait_phase(&hub, "east", "Ready");

    // And it keeps following: the watch after the relist is live.
    add_device(&east, "n-9");
    east.kubectl_ok(&["delete", "devices", "e-4"]);
    let mut want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
    want.retain(|n| n != "e-4");
    want.push("n-9".into());
    want.sort();
    wait_names(
        &hub,
        "east",
        &want.iter().map(String::as_str).collect::<Vec<_>>(),
    );
}

fn kube_client_over_the_unix_socket_reads_the_mirror(backend: Backend) {
    let store = HubStore::new(backend);
    let dir = tempfile::tempdir().unwrap();
    let east = upstream(dir.path(), "east", &["d-1", "d-2"]);
    let west = upstream(dir.path(), "west", &["w-1"]);
    upstreams_file(dir.path(), &[&east, &west]);
    let socket = dir.path().join("gw.sock");
    let upstreams = format!(
        "--upstreams={}",
        dir.path().join("upstreams.yaml").display()
    );
    let hub = GatewayProcess::start_with_socket(
        &dir.path().join("hub"),
        "east",
        free_port(),
        &socket,
        &store.args(&[upstreams.as_str(), "--worker-conn-mode=loopback"]),
    );
    wait_phase(&hub, "east", "Ready");
    wait_phase(&hub, "west", "Ready");
    wait_names(&hub, "east", &["d-1", "d-2"]);

    // The socket is the access control: owner only.
    let meta = std::fs::metadata(&socket).expect("the socket exists");
    assert!(meta.file_type().is_socket(), "{meta:?}");
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "socket mode {:o}",
        meta.permissions().mode()
    );

    let rt = runtime();
    // One cluster's mirror, typed, with no token.
    let east_client = unix_client(&rt, &socket, "http://localhost/clusters/east");
    let devices: Api<Devices> = Api::all(east_client.clone());
    let list = rt
        .block_on(devices.list(&ListParams::default()))
        .expect("typed list over the socket");
    let mut got: Vec<String> = list.items.iter().map(ResourceExt::name_any).collect();
    got.sort();
    assert_eq!(got, ["d-1", "d-2"]);
    assert!(
        list.metadata
            .resource_version
            .is_some_and(|v| !v.is_empty()),
        "a list has a resourceVersion"
    );
    let d1 = rt
        .block_on(devices.get("d-1"))
        .expect("get over the socket");
    assert_eq!(label(&d1, "cluster-of-origin"), Some("east"));
    assert!(d1.metadata.managed_fields.is_none());
    let missing = rt.block_on(devices.get("nope"));
    assert!(
        matches!(&missing, Err(kube::Error::Api(s)) if s.code == 404),
        "{missing:?}"
    );
    // Read-only: a write through the socket answers 405.
    let write = rt.block_on(devices.create(
        &PostParams::default(),
        &Devices::new("d-9", Default::default()),
    ));
    assert!(
        matches!(&write, Err(kube::Error::Api(s)) if s.code == 405),
        "{write:?}"
    );

    // The fleet view, untyped, with a label selector.
    let fleet_client = unix_client(&rt, &socket, "http://localhost/clusters/_fleet");
    let fleet: Api<DynamicObject> =
        Api::all_with(fleet_client.clone(), &ApiResource::erase::<Devices>(&()));
    let all = rt
        .block_on(fleet.list(&ListParams::default()))
        .expect("fleet list over the socket");
    let mut got: Vec<String> = all.items.iter().map(ResourceExt::name_any).collect();
    got.sort();
    assert_eq!(got, ["east.d-1", "east.d-2", "west.w-1"]);
    let west_only = rt
        .block_on(fleet.list(&ListParams::default().labels("gpustack.ai/cluster=west")))
        .expect("selected fleet list over the socket");
    assert_eq!(
        west_only
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>(),
        ["west.w-1"]
    );
    let copy = rt
        .block_on(fleet.get("east.d-2"))
        .expect("fleet get over the socket");
    assert_eq!(
        copy.annotations()
            .get("gpustack.ai/original-name")
            .map(String::as_str),
        Some("d-2")
    );

    // A kube-runtime watcher over the socket follows the upstream.
    let seen = watch_devices(&rt, devices.clone(), watcher::Config::default());
    wait_synced(&seen);
    add_device(&east, "d-3");
    wait_change(&seen, true, "d-3", &|_| {});
    east.kubectl_ok(&["label", "devices", "d-2", "tier=gold"]);
    let d2 = wait_change(&seen, true, "d-2", &|_| {});
    assert_eq!(label(&d2, "tier"), Some("gold"));
    east.kubectl_ok(&["delete", "devices", "d-1"]);
    wait_change(&seen, false, "d-1", &|_| {});
    let list = rt
        .block_on(devices.list(&ListParams::default()))
        .expect("typed list over the socket");
    let mut got: Vec<String> = list.items.iter().map(ResourceExt::name_any).collect();
    got.sort();
    assert_eq!(got, ["d-2", "d-3"]);

    // The status API is served on the socket too.
    let req = http::Request::get("/apis/workers")
        .body(Vec::new())
        .unwrap();
    let status: Value = serde_json::from_str(
        &rt.block_on(unix_client(&rt, &socket, "http://localhost").request_text(req))
            .expect("/apis/workers over the socket"),
    )
    .unwrap();
    let clusters: Vec<&str> = status["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["cluster"].as_str())
        .collect();
    assert!(
        clusters.contains(&"east") && clusters.contains(&"west"),
        "{status}"
    );
    drop(rt);
}
