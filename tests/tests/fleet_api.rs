//! The fleet API end to end, as a fleet operator meets it: three upstream clusters (each an
//! embedded cluster with a worker running its controllers, fed GPU machines), a hub gateway
//! mirroring them, and a hub worker serving `fleet.gpustack.ai/v1` from that gateway through
//! the hub cluster's aggregation — asked with kubectl at the hub. Each test runs with the hub
//! gateway's store on SQLite and on PostgreSQL (`on_sqlite::NAME`, `on_postgres::NAME`).

use std::{
    path::Path,
    process::Child,
    sync::mpsc::Receiver,
    time::{Duration, Instant},
};

use gpustack_tests::{
    embedded::{GatewayProcess, free_port, kubectl_as, stream_lines, with_token},
    hub::{HubProcess, upstreams_file},
    hub_backend::{Backend, HubStore},
    inventory::{H100, Machine, RX7800XT, publish},
    on_both_backends,
    wait::wait_until,
    worker::WorkerProcess,
};
use serde_json::Value;

on_both_backends!(
    async three_clusters_in_one_kubectl_view,
    the_worker_reads_the_gateway_over_https_with_its_kubeconfig,
);

const WAIT: Duration = Duration::from_secs(90);
/// How the H100 pools' accelerator group reads.
const H100_CARD: &str = "h100";

/// An upstream cluster: its embedded cluster and its worker, with `machine` published.
struct Upstream {
    gw: GatewayProcess,
    worker: WorkerProcess,
    port: u16,
}

async fn client(gw: &GatewayProcess) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(gw.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

async fn upstream(root: &Path, name: &str, machine: &Machine) -> Upstream {
    let port = free_port();
    let gw = start_cluster(root, name, port);
    // An upstream's worker serves no fleet of its own.
    let worker = WorkerProcess::start(
        &gw,
        &root.join(format!("{name}-worker")),
        &["--disable-auths", "--gateway-socket="],
        &[],
    );
    publish(&client(&gw).await, machine).await.unwrap();
    Upstream { gw, worker, port }
}

fn start_cluster(root: &Path, name: &str, port: u16) -> GatewayProcess {
    let serve = format!("--embedded-cluster={name}");
    GatewayProcess::start_with(&root.join(name), name, port, &[serve.as_str()])
}

/// `kubectl get RESOURCE -o json` at the hub, once it answers.
fn get_json(hub: &GatewayProcess, resource: &str) -> Option<Value> {
    let out = hub.kubectl(&["get", resource, "-o", "json"]);
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// Waits until `check` holds for the list of `resource` at the hub; on a timeout, says what the
/// list held last.
fn wait_list(hub: &GatewayProcess, resource: &str, what: &str, check: impl Fn(&[Value]) -> bool) {
    let last = std::cell::RefCell::new(Value::Null);
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_until(what, WAIT, || {
            let list = get_json(hub, resource)?;
            let ok = check(list["items"].as_array().map(Vec::as_slice).unwrap_or(&[]));
            *last.borrow_mut() = list;
            ok.then_some(())
        })
    }));
    if done.is_err() {
        panic!(
            "timed out waiting for {what}; {resource} last held:\n{:#}",
            last.borrow()
        );
    }
}

fn item<'a>(items: &'a [Value], name: &str) -> Option<&'a Value> {
    items.iter().find(|o| o["metadata"]["name"] == name)
}

fn phase_is(items: &[Value], cluster: &str, phase: &str) -> bool {
    item(items, cluster).is_some_and(|c| c["status"]["phase"] == phase)
}

/// The aggregate whose accelerator group names `card` (`h100`, `rx-7800`).
fn aggregate_of<'a>(items: &'a [Value], card: &str) -> Option<&'a Value> {
    items.iter().find(|o| {
        o["spec"]["acceleratorGroup"]
            .as_str()
            .is_some_and(|g| g.contains(card))
    })
}

/// `kubectl get -w` lines at the hub, and the child to stop.
fn watch(hub: &GatewayProcess, args: &[&str]) -> (Child, Receiver<String>) {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    full.push("-w");
    stream_lines(hub.kubectl_command(&full))
}

fn expect_line(rx: &Receiver<String>, wanted: &str) {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) if l.trim() == wanted => return,
            Ok(l) => seen.push(l),
            Err(_) => break,
        }
    }
    panic!("no line {wanted:?} on the watch; saw {seen:?}");
}

fn apply(hub: &GatewayProcess, root: &Path, name: &str, yaml: &str) -> std::process::Output {
    let file = root.join(format!("{name}.yaml"));
    std::fs::write(&file, yaml).unwrap();
    hub.kubectl(&["create", "-f", file.to_str().unwrap()])
}

fn apiservice_available(hub: &GatewayProcess) -> Option<(String, String)> {
    let svc = get_json(hub, "apiservice/v1.fleet.gpustack.ai")?;
    let cond = svc["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")?
        .clone();
    Some((
        cond["status"].as_str()?.to_owned(),
        cond["message"].as_str().unwrap_or("").to_owned(),
    ))
}

async fn three_clusters_in_one_kubectl_view(backend: Backend) {
    let store = HubStore::new(backend);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let mut east_machine = Machine::gpu("gpu-a", H100, 8);
    let east = upstream(root, "east", &east_machine).await;
    let west = upstream(root, "west", &Machine::gpu("gpu-b", H100, 8)).await;
    let north = upstream(root, "north", &Machine::gpu("amd-a", RX7800XT, 2)).await;

    // The hub: a gateway mirroring east and west (north is added with kubectl below), and the
    // hub's own cluster where the worker serves the fleet API.
    let upstreams = upstreams_file(root, &[&east.gw, &west.gw]);
    let mirror_data = root.join("mirror");
    let mirror_port = free_port();
    let mirror_args = [
        "--worker-conn-mode=loopback".to_owned(),
        format!("--upstreams={}", upstreams.display()),
    ];
    let mirror_args: Vec<&str> = mirror_args.iter().map(String::as_str).collect();
    let mirror = HubProcess::start(&mirror_data, mirror_port, &store.args(&mirror_args));
    let hub = start_cluster(root, "hub", free_port());
    let socket = format!("--gateway-socket={}", mirror.socket.display());
    // Delegated authentication and authorization, as in production.
    let hub_worker = WorkerProcess::start(&hub, &root.join("hub-worker"), &[socket.as_str()], &[]);

    wait_list(
        &hub,
        "clusters.fleet.gpustack.ai",
        "east and west Ready",
        |cs| phase_is(cs, "east", "Ready") && phase_is(cs, "west", "Ready"),
    );

    // A spec naming a Secret that does not exist is refused with one Invalid message.
    let cluster_yaml = "apiVersion: fleet.gpustack.ai/v1\nkind: Cluster\nmetadata: {name: north}\nspec:\n  mode: kubeconfig\n  secretRef: {namespace: default, name: north-kubeconfig}\n";
    let refused = apply(&hub, root, "north-cluster", cluster_yaml);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("is invalid: spec.secretRef: Not found: secret default/north-kubeconfig"),
        "{err}"
    );
    // With the Secret, creating the Cluster subscribes.
    let kubeconfig = north.gw.kubeconfig();
    hub.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "north-kubeconfig",
        "-n",
        "default",
        &format!("--from-file=kubeconfig={}", kubeconfig.display()),
    ]);
    // Someone who may create clusters but not read that Secret is refused: the worker reads
    // it with its own identity.
    hub.kubectl_ok(&["create", "serviceaccount", "fleet-editor", "-n", "default"]);
    let rbac = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: fleet-editor}\nrules:\n- {apiGroups: [fleet.gpustack.ai], resources: [clusters], verbs: [create, get, list]}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: fleet-editor}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: fleet-editor}\nsubjects:\n- {kind: ServiceAccount, name: fleet-editor, namespace: default}\n";
    let granted = apply(&hub, root, "fleet-editor", rbac);
    assert!(
        granted.status.success(),
        "{}",
        String::from_utf8_lossy(&granted.stderr)
    );
    let token = hub.kubectl_ok(&["create", "token", "fleet-editor", "-n", "default"]);
    let editor = root.join("editor.kubeconfig");
    with_token(&hub.kubeconfig(), token.trim(), &editor);
    let manifest = root.join("north-cluster.yaml");
    let denied = kubectl_as(
        &editor,
        &root.join("editor-cache"),
        &["create", "-f", manifest.to_str().unwrap()],
    );
    let err = String::from_utf8_lossy(&denied.stderr);
    assert!(
        !denied.status.success()
            && err.contains(
                "cannot get resource \"secrets\" in API group \"\" in the namespace \"default\""
            ),
        "{err}"
    );
    let created = apply(&hub, root, "north-cluster", cluster_yaml);
    assert!(
        created.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&created.stderr),
        hub_worker.log()
    );
    wait_list(&hub, "clusters.fleet.gpustack.ai", "north Ready", |cs| {
        phase_is(cs, "north", "Ready")
    });
    let table = hub.kubectl_ok(&["get", "clusters.fleet.gpustack.ai"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "PHASE", "LAST", "SYNC", "DEVICES", "AGE"]);
    // Each row has an age (when it was subscribed) and north shows the spec it was made with,
    // its defaults filled in.
    for row in table.lines().skip(1) {
        let age = row.split_whitespace().last().unwrap_or("");
        assert!(age != "<unknown>" && !age.is_empty(), "{table}");
    }
    let north = hub.get_json(&["clusters.fleet.gpustack.ai", "north"]);
    assert!(
        north["metadata"]["creationTimestamp"].is_string(),
        "{north}"
    );
    assert_eq!(
        north["spec"],
        serde_json::json!({"mode": "kubeconfig",
            "secretRef": {"namespace": "default", "name": "north-kubeconfig", "key": "kubeconfig"}})
    );

    // Every upstream's devices, labelled with their cluster.
    wait_list(&hub, "devices.fleet.gpustack.ai", "every node", |ds| {
        ["east.gpu-a", "west.gpu-b", "north.amd-a"]
            .iter()
            .all(|n| item(ds, n).is_some())
    });
    // A name both groups serve stays the hub cluster's own (it has no nodes): the fleet's
    // APIService ranks below the worker's.
    assert_eq!(hub.kubectl_ok(&["get", "devices", "-o", "name"]).trim(), "");
    let listed = hub.kubectl_ok(&[
        "get",
        "devices.fleet.gpustack.ai",
        "-L",
        "gpustack.ai/cluster",
    ]);
    for (node, cluster) in [
        ("east.gpu-a", "east"),
        ("west.gpu-b", "west"),
        ("north.amd-a", "north"),
    ] {
        let row = listed
            .lines()
            .find(|l| l.starts_with(node))
            .unwrap_or_else(|| panic!("{node} not listed:\n{listed}"));
        assert!(row.split_whitespace().any(|c| c == cluster), "{row}");
    }

    // Every upstream's Instances, with their cluster and phase: a stopped one made in east.
    east.gw.kubectl_ok(&[
        "create",
        "-f",
        &gpustack_tests::embedded::write_file(
            root,
            "east-instance.yaml",
            "apiVersion: worker.gpustack.ai/v1alpha1\nkind: Instance\nmetadata: {name: box, namespace: default}\nspec:\n  type: any-pool\n  image: ubuntu:24.04\n  stop: true\n  volume: {ephemeral: {capacity: 1Gi}}\n",
        ),
    ]);
    wait_list(
        &hub,
        "instances.fleet.gpustack.ai",
        "east's stopped instance",
        |is| item(is, "east.box").is_some_and(|i| i["status"]["phase"] == "Stopped"),
    );
    let table = hub.kubectl_ok(&["get", "instances.fleet.gpustack.ai", "-n", "default"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "CLUSTER", "TYPE", "PHASE", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        row[..4],
        ["east.box", "east", "any-pool", "Stopped"],
        "{table}"
    );

    // Identical pools of east and west make one aggregate, remaining summed; north's pool is
    // an aggregate of its own. Each upstream's worker derives its InstanceTypes in its own
    // time, so both are waited for.
    wait_list(
        &hub,
        "instancetypes.fleet.gpustack.ai",
        "the H100 aggregate of two clusters and north's RX 7800 aggregate",
        |its| {
            aggregate_of(its, H100_CARD).is_some_and(|a| {
                a["status"]["clusters"] == serde_json::json!(["east", "west"])
                    && a["status"]["accelerator"]["remaining"] == 16
            }) && aggregate_of(its, "rx-7800")
                .is_some_and(|a| a["status"]["clusters"] == serde_json::json!(["north"]))
        },
    );
    let its = get_json(&hub, "instancetypes.fleet.gpustack.ai").unwrap();
    let items = its["items"].as_array().unwrap();
    let h100 = aggregate_of(items, H100_CARD).unwrap()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let group = aggregate_of(items, H100_CARD).unwrap()["spec"]["acceleratorGroup"].clone();
    // One flavor for the H100 pools of both clusters, listing both.
    wait_list(
        &hub,
        "instancetypeflavors.fleet.gpustack.ai",
        "one H100 flavor of east and west",
        |flavors| {
            let h100: Vec<&Value> = flavors
                .iter()
                .filter(|f| f["spec"]["acceleratorGroup"] == group)
                .collect();
            h100.len() == 1 && h100[0]["status"]["clusters"] == serde_json::json!(["east", "west"])
        },
    );

    // A card turns unhealthy in east: the aggregate's remaining drops, seen by a watch.
    let (mut watcher, lines) = watch(
        &hub,
        &[
            &format!("instancetypes.fleet.gpustack.ai/{h100}"),
            "-o",
            "jsonpath={.status.accelerator.remaining}{\"\\n\"}",
        ],
    );
    expect_line(&lines, "16");
    east_machine.unhealthy = vec![0];
    publish(&client(&east.gw).await, &east_machine)
        .await
        .unwrap();
    expect_line(&lines, "15");
    let _ = watcher.kill();

    // East is lost: still listed, Degraded with its last sync time (from before the loss); its
    // devices still served as they were and its aggregate member marked stale. Back, it is
    // Ready again.
    let east_device = || {
        let devices = get_json(&hub, "devices.fleet.gpustack.ai")?;
        item(devices["items"].as_array()?, "east.gpu-a").cloned()
    };
    let before = wait_until("east's device to show card 0 unhealthy", WAIT, || {
        east_device()
            .filter(|d| d["spec"]["groups"][0]["accelerators"][0]["status"]["unhealthy"] == true)
    });
    let Upstream { gw, worker, port } = east;
    drop(worker);
    let killed = jiff::Timestamp::now();
    gw.crash();
    wait_list(&hub, "clusters.fleet.gpustack.ai", "east Degraded", |cs| {
        phase_is(cs, "east", "Degraded")
            && item(cs, "east").is_some_and(|c| c["status"]["lastSyncTime"].is_string())
    });
    let clusters = get_json(&hub, "clusters.fleet.gpustack.ai").unwrap();
    let east_status = &item(clusters["items"].as_array().unwrap(), "east").unwrap()["status"];
    let synced: jiff::Timestamp = east_status["lastSyncTime"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap_or_else(|e| panic!("lastSyncTime of {east_status}: {e}"));
    assert!(
        synced <= killed,
        "east's lastSyncTime {synced} is after it was killed at {killed}: {east_status}"
    );
    assert_eq!(
        east_device(),
        Some(before),
        "east's device is served as it was before the crash"
    );
    wait_list(
        &hub,
        "instancetypes.fleet.gpustack.ai",
        "east's member stale",
        |its| {
            aggregate_of(its, H100_CARD)
                .is_some_and(|a| a["status"]["staleClusters"] == serde_json::json!(["east"]))
        },
    );
    let east_again = start_cluster(root, "east", port);
    wait_list(
        &hub,
        "clusters.fleet.gpustack.ai",
        "east Ready again",
        |cs| phase_is(cs, "east", "Ready"),
    );

    // Deleting a Cluster unsubscribes.
    hub.kubectl_ok(&["delete", "clusters.fleet.gpustack.ai", "north"]);
    wait_list(&hub, "clusters.fleet.gpustack.ai", "north gone", |cs| {
        item(cs, "north").is_none()
    });
    assert!(mirror.worker("north").is_none());

    // The gateway stops: the fleet's APIService turns unavailable, the worker's own API answers.
    wait_until("the fleet APIService available", WAIT, || {
        apiservice_available(&hub).filter(|(s, _)| s == "True")
    });
    mirror.stop();
    let (_, message) = wait_until("the fleet APIService unavailable", WAIT, || {
        apiservice_available(&hub).filter(|(s, _)| s == "False")
    });
    assert!(message.contains("503"), "{message}");
    hub.kubectl_ok(&["get", "devices.worker.gpustack.ai"]);
    hub.kubectl_ok(&["get", "--raw", "/apis/worker.gpustack.ai/v1"]);
    drop((east_again, west, north, hub_worker));
}

async fn the_worker_reads_the_gateway_over_https_with_its_kubeconfig(backend: Backend) {
    let store = HubStore::new(backend);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let east = gpustack_tests::hub::upstream(root, "east", &["gpu-a"]);
    let upstreams = upstreams_file(root, &[&east]);
    // The gateway's HTTPS endpoint, with its admin token and the kubeconfig it writes for it.
    let mirror_data = root.join("mirror");
    let token_file = root.join("admin.token");
    let args = [
        "--worker-conn-mode=loopback".to_owned(),
        format!("--upstreams={}", upstreams.display()),
        format!("--token-file={}", token_file.display()),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mirror = HubProcess::start(&mirror_data, free_port(), &store.args(&args));
    let hub = start_cluster(root, "hub", free_port());
    let kubeconfig = format!(
        "--gateway-kubeconfig={}",
        mirror_data.join("_admin.kubeconfig").display()
    );
    let worker = WorkerProcess::start(
        &hub,
        &root.join("hub-worker"),
        &["--disable-auths", kubeconfig.as_str()],
        &[],
    );
    wait_list(&hub, "clusters.fleet.gpustack.ai", "east Ready", |cs| {
        phase_is(cs, "east", "Ready")
    });
    wait_list(&hub, "devices.fleet.gpustack.ai", "east's node", |ds| {
        item(ds, "east.gpu-a").is_some()
    });
    store.assert_devices_in_database("east", 1);
    let token = std::fs::read_to_string(&token_file).unwrap();
    assert!(!worker.log().contains(token.trim()), "the token was logged");
    drop((worker, hub, mirror, east));
}
