//! Instances end to end: the real `worker` against an embedded cluster, a GPU node published as
//! its kubelet and device manager would, the Kueue stand-in admitting Workloads through the real
//! Kueue objects (with the worker's node-devices check), and the kubelet stand-in running the
//! Pods' containers as local processes. An Instance with one VRAM slice is queued, admitted and
//! runs with its environment; it stops and starts, a Pod the kubelet refuses is rebuilt, its
//! pool's deletion stops it, and deleting it takes everything with it.

use gpustack_api::{instance::Instance, instance_type::InstanceType, kueue::Workload};
use gpustack_tests::{
    embedded::{GatewayProcess, kube_client, stream_lines},
    inventory::{H100, Machine, publish},
    kubelet_http::KubeletHttp,
    kubelet_pods::PodRunner,
    kueue::Kueue,
    wait::poll_until,
    worker::{WorkerProcess, eventually},
};
use k8s_openapi::api::core::v1::{Node, Pod, Secret, Service};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

const POOL: &str = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64";
const IMAGE: &str = "ubuntu:24.04";

fn instance(name: &str, image: &str, extra: Value) -> Instance {
    let mut spec = json!({
        "type": POOL, "image": image,
        "command": ["sh", "-c", "echo hello from $GREETING; exec sleep 3600"],
        "env": [{"name": "GREETING", "value": name}],
        "ports": [{"port": 22}],
        "resources": {"acceleratorSlicedMemoryPercentage": 20},
        "volume": {"ephemeral": {"capacity": "1Gi"}},
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Instance",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec,
    }))
    .unwrap()
}

/// The Instance once its status satisfies `check`.
async fn phase_is(
    w: &WorkerProcess,
    api: &Api<Instance>,
    name: &str,
    check: impl Fn(&Instance) -> bool,
) -> Instance {
    eventually(&format!("instance {name}"), w, || async {
        let i = api.get(name).await.map_err(|e| e.to_string())?;
        check(&i)
            .then_some(i.clone())
            .ok_or_else(|| format!("{:?} stop={:?}", i.status, i.spec.stop))
    })
    .await
}

fn phase(i: &Instance) -> &str {
    i.status.as_ref().map(|s| s.phase()).unwrap_or("")
}

async fn set_stop(api: &Api<Instance>, name: &str, stop: bool) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"stop": stop}})),
    )
    .await
    .unwrap();
}

/// Sets a setting in the Settings Secret, as `kubectl patch setting` does.
async fn set_setting(c: &kube::Client, name: &str, value: &str) {
    let secrets: Api<Secret> = Api::namespaced(c.clone(), "gpustack-system");
    let patch = json!({"data": {name: k8s_openapi::ByteString(value.as_bytes().to_vec())}});
    secrets
        .patch(
            "gpustack-settings",
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instance_is_queued_runs_stops_starts_and_goes() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    let w = WorkerProcess::start(&gw, &tmp.path().join("worker"), &["--disable-auths"], &[]);
    let c = kube_client(&gw.kubeconfig()).await;
    publish(&c, &Machine::gpu("gpu-a", H100, 8)).await.unwrap();
    let _kueue = Kueue::start(c.clone());
    let kubelet = PodRunner::start(c.clone(), "gpu-a", &tmp.path().join("kubelet"), &[IMAGE]);
    let _kubelet_http = KubeletHttp::start(&c, &kubelet).await;
    let its: Api<InstanceType> = Api::all(c.clone());
    eventually("the H100 pool to be sliceable", &w, || async {
        let it = its.get(POOL).await.map_err(|e| e.to_string())?;
        let s = it.status.clone().unwrap_or_default();
        (s.entrance.is_some()
            && s.accelerator_sliced
                .as_ref()
                .is_some_and(|v| v.capacity > 0))
        .then_some(())
        .ok_or_else(|| format!("{s:?}"))
    })
    .await;

    // The node's addresses, as its kubelet reports them: the external one is where instances
    // are reached, the internal one where the cluster reaches the kubelet.
    Api::<Node>::all(c.clone())
        .patch_status(
            "gpu-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"addresses": [
                {"type": "ExternalIP", "address": "192.0.2.10"},
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": "gpu-a"}]}})),
        )
        .await
        .unwrap();

    let api: Api<Instance> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let services: Api<Service> = Api::namespaced(c.clone(), "default");
    let workloads: Api<Workload> = Api::namespaced(c.clone(), "default");
    api.create(&PostParams::default(), &instance("box", IMAGE, json!({})))
        .await
        .unwrap();

    // Queued at the pool's entrance: a Workload for its Pod, admitted once the node-devices
    // check passes; then Running with its environment.
    let ready = phase_is(&w, &api, "box", |i| phase(i) == "Ready").await;
    let status = ready.status.clone().unwrap();
    assert_eq!(status.node_name.as_deref(), Some("gpu-a"));
    assert_eq!(status.ports.len(), 1);
    let node_port = status.ports[0].node_port.expect("a node port");
    assert!((30000..=32767).contains(&node_port), "{node_port}");
    assert!(
        ready
            .finalizers()
            .contains(&"gpustack.ai/controlled".to_owned())
    );
    let pod = pods.get("box").await.unwrap();
    assert_eq!(
        pod.labels()["kueue.x-k8s.io/queue-name"],
        gpustack_tests::worker::local_queue_name(POOL)
    );
    assert_eq!(
        pod.labels()["app.kubernetes.io/part-of"],
        ready.uid().unwrap()
    );
    let owner = &pod.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Instance", ready.uid().unwrap().as_str())
    );
    let limits = pod.spec.as_ref().unwrap().containers[0]
        .resources
        .clone()
        .unwrap()
        .limits
        .unwrap();
    assert_eq!(limits["nvidia.com/gpu.sliced.memory-percentage"].0, "20");
    // The worker's Pod webhook turned the slice into units of the card.
    assert_eq!(
        limits["nvidia.com/gpu.sliced.units"].0,
        (20 * 16000).to_string()
    );
    let wl = workloads
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|wl| {
            wl.owner_references()
                .iter()
                .any(|o| Some(&o.uid) == pod.uid().as_ref())
        })
        .expect("a Workload owned by the Pod");
    let checks = wl.status.clone().unwrap().admission_checks;
    assert!(
        checks
            .iter()
            .any(|c| c.name == "gpustack-node-devices" && c.state == "Ready"),
        "{checks:?}"
    );
    let svc = services.get("box").await.unwrap();
    assert_eq!(svc.owner_references()[0].kind, "Pod");
    let uid = pod.uid().unwrap();
    let log = eventually("the container's output", &w, || async {
        let log = kubelet.log("default", "box", &uid, "main");
        log.contains("hello from box")
            .then_some(log.clone())
            .ok_or(log)
    })
    .await;
    assert!(log.contains(" stdout F hello from box"), "{log}");

    // The v1 view, as kubectl shows it through the worker: its pool, where it is reached,
    // its node ports, its phase.
    let table = w.kubectl_ok(&["get", "inst", "-n", "default"]);
    let mut lines = table.lines();
    let headers: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        headers,
        ["NAME", "TYPE", "ACCESS", "PORTS", "PHASE", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let ports = format!("22:{node_port}/TCP");
    assert_eq!(
        row[..5],
        ["box", POOL, "192.0.2.10", ports.as_str(), "Ready"],
        "{table}"
    );
    // instances/events: the kubelet's Events about its Pod.
    let events: Value = serde_json::from_str(&w.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/worker.gpustack.ai/v1/namespaces/default/instances/box/events",
    ]))
    .unwrap();
    assert_eq!(events["kind"], "InstanceEvents");
    assert_eq!(events["metadata"]["uid"], json!(pod.uid()));
    let messages: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert!(messages.contains(&"Started container main"), "{events}");

    // The log: `kubectl logs` against the cluster (pods/log, forwarded to the node's kubelet),
    // and instances/log through the worker, directly and aggregated.
    let logs = gw.kubectl_ok(&["logs", "box", "-n", "default"]);
    assert_eq!(logs, "hello from box\n");
    let stamped = gw.kubectl_ok(&["logs", "box", "-n", "default", "--timestamps", "--tail=1"]);
    let (at, text) = stamped.trim_end().split_once(' ').unwrap();
    assert!(at.parse::<jiff::Timestamp>().is_ok(), "{stamped}");
    assert_eq!(text, "hello from box");
    assert_eq!(
        gw.kubectl_ok(&["logs", "box", "-n", "default", "--limit-bytes=5"]),
        "hello"
    );
    let log_path = "/apis/worker.gpustack.ai/v1/namespaces/default/instances/box/log";
    assert_eq!(
        w.kubectl_ok(&["get", "--raw", &format!("{log_path}?tailLines=1")]),
        "hello from box\n"
    );
    assert_eq!(
        gw.kubectl_ok(&["get", "--raw", &format!("{log_path}?timestamps=false")]),
        "hello from box\n"
    );
    let refused = w.kubectl_err(&["get", "--raw", &format!("{log_path}?tailLines=-1")]);
    assert!(refused.contains("tailLines"), "{refused}");
    // Followed: the lines come as they are written, and the stream ends with the container.
    let (mut follower, lines) =
        stream_lines(w.kubectl_command(&["get", "--raw", &format!("{log_path}?follow=true")]));
    let first = lines
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("a followed line");
    assert_eq!(first, "hello from box");

    // The node proxy reaches the kubelet's stats summary; instances/metrics reads it.
    let summary: Value = serde_json::from_str(&gw.kubectl_ok(&[
        "get",
        "--raw",
        "/api/v1/nodes/gpu-a/proxy/stats/summary",
    ]))
    .unwrap();
    assert!(
        summary["pods"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["podRef"]["uid"] == json!(pod.uid())),
        "{summary}"
    );
    let metrics_path = "/apis/worker.gpustack.ai/v1/namespaces/default/instances/box/metrics";
    let metrics: Value =
        serde_json::from_str(&gw.kubectl_ok(&["get", "--raw", metrics_path])).unwrap();
    assert_eq!(metrics["kind"], "InstanceMetrics", "{metrics}");
    let main = &pod.spec.as_ref().unwrap().containers[0];
    let cpu_limit = main.resources.as_ref().unwrap().limits.as_ref().unwrap()["cpu"]
        .0
        .clone();
    assert!(
        metrics["cpuTotalMilliCores"].as_i64().unwrap() > 0,
        "{metrics} ({cpu_limit})"
    );
    assert!(metrics["memoryTotalMiB"].as_i64().unwrap() > 0, "{metrics}");
    // The processes were measured: their resident memory and their logs' bytes.
    assert!(metrics["memoryUsedMiB"].as_i64().unwrap() >= 1, "{metrics}");
    assert!(
        metrics["storageUsedMiB"].as_i64().unwrap() >= 1,
        "{metrics}"
    );
    assert!(metrics["cpuUsedMilliCores"].as_i64().is_some(), "{metrics}");

    // A wildcard DNS domain (a setting) spells the address under it, for every instance.
    set_setting(&c, "instance-access-wildcard-dns", "traefik.me").await;
    eventually(
        "the access address under the wildcard domain",
        &w,
        || async {
            let got = w.kubectl_ok(&[
                "get",
                "instances.v1.worker.gpustack.ai",
                "box",
                "-n",
                "default",
                "-o",
                "jsonpath={.status.accessAddresses[0]}",
            ]);
            (got == "192-0-2-10.traefik.me").then_some(()).ok_or(got)
        },
    )
    .await;

    // Stop: the Pod and its Service go, the processes with them; the object stays.
    set_stop(&api, "box", true).await;
    let stopped = phase_is(&w, &api, "box", |i| phase(i) == "Stopped").await;
    assert_eq!(stopped.status.unwrap().node_name, None);
    assert!(pods.get_opt("box").await.unwrap().is_none());
    eventually("the Service to go with its Pod", &w, || async {
        match services.get_opt("box").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".to_owned()),
        }
    })
    .await;
    eventually("the containers to stop", &w, || async {
        let running = kubelet.running();
        running
            .is_empty()
            .then_some(())
            .ok_or(format!("{running:?}"))
    })
    .await;
    // The followed log ended with its container.
    let ended = poll_until(std::time::Duration::from_secs(30), || {
        follower.try_wait().ok().flatten()
    });
    assert!(ended.is_some(), "the followed log is still open");
    // Stopped: its metrics are what it declares, nothing measured; its log is refused.
    let metrics: Value =
        serde_json::from_str(&w.kubectl_ok(&["get", "--raw", metrics_path])).unwrap();
    assert!(
        metrics["cpuTotalMilliCores"].as_i64().unwrap() > 0,
        "{metrics}"
    );
    for absent in ["cpuUsedMilliCores", "memoryUsedMiB", "storageUsedMiB"] {
        assert!(metrics.get(absent).is_none(), "{absent}: {metrics}");
    }
    let refused = w.kubectl_err(&["get", "--raw", log_path]);
    assert!(refused.contains("has no Pod"), "{refused}");

    // Start, with the kubelet refusing the first Pod at admission: rebuilt, then Ready.
    kubelet.refuse_next(1);
    set_stop(&api, "box", false).await;
    let again = phase_is(&w, &api, "box", |i| phase(i) == "Ready").await;
    let second = pods.get("box").await.unwrap();
    assert_ne!(second.uid(), pod.uid());
    assert!(again.status.unwrap().ports[0].node_port.is_some());

    // An image the node cannot pull: a clear status naming it.
    api.create(
        &PostParams::default(),
        &instance("nope", "registry.invalid/nope:1", json!({"ports": []})),
    )
    .await
    .unwrap();
    let stuck = phase_is(&w, &api, "nope", |i| {
        i.status
            .as_ref()
            .and_then(|s| s.phase_message.as_deref())
            .is_some_and(|m| m.contains("ErrImagePull"))
    })
    .await;
    let msg = stuck.status.unwrap().phase_message.unwrap();
    assert!(
        msg.contains("registry.invalid/nope:1") && msg.contains("container main"),
        "{msg}"
    );
    assert!(
        services.get_opt("nope").await.unwrap().is_none(),
        "no ports, no Service"
    );
    // Its log is refused as kube-apiserver refuses a container that never started.
    let refused = gw.kubectl_err(&["logs", "nope", "-n", "default"]);
    assert!(
        refused.contains("is waiting to start: ErrImagePull"),
        "{refused}"
    );

    // The pool deleted: its Instances are stopped (spec.stop set), not left to fail.
    its.delete(POOL, &DeleteParams::default()).await.unwrap();
    let drained = phase_is(&w, &api, "box", |i| {
        phase(i) == "Stopped" && i.spec.stop == Some(true)
    })
    .await;
    assert!(drained.spec.stopped());
    assert!(
        w.log().contains("stop instance as its instance type"),
        "{}",
        w.log()
    );
    assert!(pods.get_opt("box").await.unwrap().is_none());

    // Deleted: the finalizer lets go once the Pod is gone; nothing is left behind.
    for name in ["box", "nope"] {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    eventually("everything to go", &w, || async {
        let left: Vec<String> = api
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .map(|i| i.name_any())
            .chain(
                pods.list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?
                    .items
                    .iter()
                    .map(|p| p.name_any()),
            )
            .chain(
                services
                    .list(&ListParams::default().labels("resource.gpustack.ai/type=instances"))
                    .await
                    .map_err(|e| e.to_string())?
                    .items
                    .iter()
                    .map(|p| p.name_any()),
            )
            .collect();
        left.is_empty().then_some(()).ok_or(format!("{left:?}"))
    })
    .await;
    let wls = workloads.list(&ListParams::default()).await.unwrap();
    eventually("the Workloads to go with their Pods", &w, || async {
        let n = workloads
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .len();
        (n == 0)
            .then_some(())
            .ok_or(format!("{n} left of {}", wls.items.len()))
    })
    .await;
}

/// The image the node's device manager Pod names; the kubelet stand-in has it "pulled" and
/// runs the real binary for it.
const OPERATOR_IMAGE: &str = "gpustack/gpustack-operator:test";

/// `device-manager serve` on the HGX H100 fixture (NVML stand-in) as the chart's DaemonSet Pod
/// for node `node` (labels, port `https`), on the host's network so that it is reached at the
/// node's loopback: the kubelet stand-in runs it.
fn device_manager_pod(
    node: &str,
    host: &gpustack_tests::machines::nvidia::NvidiaNode,
    kubeconfig: &std::path::Path,
    kube_socket: &std::path::Path,
    port: u16,
) -> Pod {
    let env = [
        ("GPUSTACK_SYSTEM_ROOT", host.root.display().to_string()),
        (
            gpustack_tests::machines::nvidia::FIXTURE_ENV,
            host.nvml_fixture.display().to_string(),
        ),
        ("KUBERNETES_NODE_NAME", node.to_owned()),
        ("RUST_LOG", "info".to_owned()),
    ];
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("gpustack-device-manager-nvidia-{node}"),
            "namespace": "gpustack-system",
            "labels": {"app.kubernetes.io/component": "device-manager",
                "gpustack.ai/manufacturer": "nvidia"}},
        "spec": {"nodeName": node, "hostNetwork": true, "containers": [{
            "name": "main", "image": OPERATOR_IMAGE,
            "command": [gpustack_tests::binary().display().to_string(), "device-manager", "serve",
                "--manufacturer=nvidia", "--bind-address=127.0.0.1",
                format!("--secure-port={port}"),
                format!("--kube-socket={}", kube_socket.display()),
                format!("--kubeconfig={}", kubeconfig.display())],
            "env": env.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
            "ports": [{"name": "https", "containerPort": port}]}]},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instances_accelerators_come_from_its_nodes_device_manager() {
    use gpustack_tests::machines::nvidia::{H100_GPUS, hgx_h100_node};
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    let w = WorkerProcess::start(&gw, &tmp.path().join("worker"), &["--disable-auths"], &[]);
    let c = kube_client(&gw.kubeconfig()).await;
    publish(&c, &Machine::gpu("gpu-a", H100, 8)).await.unwrap();
    let _kueue = Kueue::start(c.clone());
    let kubelet = PodRunner::start(
        c.clone(),
        "gpu-a",
        &tmp.path().join("kubelet"),
        &[IMAGE, OPERATOR_IMAGE],
    );
    let _kubelet_http = KubeletHttp::start(&c, &kubelet).await;
    let its: Api<InstanceType> = Api::all(c.clone());
    eventually("the H100 pool to be sliceable", &w, || async {
        let it = its.get(POOL).await.map_err(|e| e.to_string())?;
        let s = it.status.clone().unwrap_or_default();
        (s.entrance.is_some()
            && s.accelerator_sliced
                .as_ref()
                .is_some_and(|v| v.capacity > 0))
        .then_some(())
        .ok_or_else(|| format!("{s:?}"))
    })
    .await;
    let api: Api<Instance> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    api.create(
        &PostParams::default(),
        &instance("box", IMAGE, json!({"ports": []})),
    )
    .await
    .unwrap();
    phase_is(&w, &api, "box", |i| phase(i) == "Ready").await;

    // The node's device manager, and the card the device plugin granted the Instance's main
    // container: a fifth of GPU 0, recorded on the Pod as its Allocate records it.
    let host = hgx_h100_node(&tmp.path().join("host"));
    let port = gpustack_tests::embedded::free_port();
    let sockets = tmp.path().join("device-plugins");
    std::fs::create_dir_all(&sockets).unwrap();
    let dm = device_manager_pod(
        "gpu-a",
        &host,
        &gw.kubeconfig(),
        &sockets.join("kubelet.sock"),
        port,
    );
    let managers: Api<Pod> = Api::namespaced(c.clone(), "gpustack-system");
    managers.create(&PostParams::default(), &dm).await.unwrap();
    let card = &H100_GPUS[0];
    let grant = json!({"main": {"devices": {"groups": [{"id": "h100-80gb-hbm3",
        "manufacturer": "nvidia", "accelerators": [
            {"id": card.uuid, "index": 0, "mode": 3, "allocated": 320000}]}]}}});
    pods.patch(
        "box",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {
            "device.gpustack.ai/accelerator.allocated": grant.to_string()}}})),
    )
    .await
    .unwrap();

    // What the device manager sampled of that card, asked of it directly.
    let snapshot_url = format!("https://127.0.0.1:{port}/monitor/snapshot");
    let sampled = eventually("the device manager's first sample", &w, || async {
        let out = std::process::Command::new("curl")
            .args(["-sk", "--fail", "--max-time", "5", &snapshot_url])
            .output()
            .map_err(|e| e.to_string())?;
        let snap: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
        snap["groups"][0]["accelerators"]
            .as_array()
            .and_then(|cards| cards.iter().find(|a| a["id"] == card.uuid).cloned())
            .ok_or_else(|| snap.to_string())
    })
    .await;

    // instances/metrics: the granted card alone, its share of the card's memory, the card's
    // temperature, power and health; what the slice uses is not measured here, so absent.
    let metrics_path = "/apis/worker.gpustack.ai/v1/namespaces/default/instances/box/metrics";
    let metrics = eventually("the accelerator figures", &w, || async {
        let m: Value = serde_json::from_str(&w.kubectl_ok(&["get", "--raw", metrics_path]))
            .map_err(|e| e.to_string())?;
        m["accelerators"]
            .is_array()
            .then_some(m.clone())
            .ok_or_else(|| m.to_string())
    })
    .await;
    let cards = metrics["accelerators"].as_array().unwrap();
    assert_eq!(cards.len(), 1, "{metrics}");
    let got = &cards[0];
    assert_eq!(got["id"], card.uuid, "{metrics}");
    assert_eq!(got["mode"], "Sliced", "{metrics}");
    let memory = sampled["memory"].as_u64().expect("the card's memory");
    assert_eq!(
        got["memoryTotalMiB"].as_u64(),
        Some((memory * 320_000).div_ceil(1_600_000)),
        "{metrics} {sampled}"
    );
    for (ours, theirs) in [
        ("temperatureCelsius", "temperature"),
        ("powerUsageWatts", "powerUsage"),
        ("unhealthy", "unhealthy"),
    ] {
        assert_eq!(
            got.get(ours),
            sampled.get(theirs),
            "{ours}: {metrics} {sampled}"
        );
    }
    for absent in [
        "memoryUsedMiB",
        "memoryUtilizationPercent",
        "coresUtilizationPercent",
    ] {
        assert!(got.get(absent).is_none(), "{absent}: {metrics}");
    }
    assert!(metrics["memoryUsedMiB"].is_number(), "{metrics}");

    // The device manager gone: no accelerator figures once the kept snapshot is old, rather
    // than zeros; the rest of the sample stays.
    managers
        .delete(&dm.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    let without = eventually("the accelerator figures to go", &w, || async {
        let m: Value = serde_json::from_str(&w.kubectl_ok(&["get", "--raw", metrics_path]))
            .map_err(|e| e.to_string())?;
        m.get("accelerators")
            .is_none()
            .then_some(m.clone())
            .ok_or_else(|| m.to_string())
    })
    .await;
    assert!(without["cpuTotalMilliCores"].is_number(), "{without}");
    assert!(w.log().contains("no accelerator figures"), "{}", w.log());
}
