//! Benchmark of the fleet API (issue 18), not a pass/fail test: upstream embedded clusters, a
//! hub `worker-gateway` mirroring them, and a hub `worker` serving `fleet.gpustack.ai/v1` from
//! that gateway's unix socket behind the hub cluster's aggregation. Reproduce with
//!
//! ```text
//! cargo build --release --bin gpustack-operator && cargo bench -p gpustack-tests --bench fleet
//! ```
//!
//! (`GPUSTACK_BENCH_DEVICES`, default 5000 per upstream, `GPUSTACK_BENCH_LIST_UPSTREAMS`,
//! default 4, `GPUSTACK_BENCH_MEMORY_UPSTREAMS`, default 10, `GPUSTACK_BENCH_WRITE_RATE`,
//! default 200 writes/s, `GPUSTACK_BENCH_WATCH_SECONDS`, default 10, scale it).
//!
//! 0. Not measured: one upstream is filled with Devices (~2 KB each) and stopped, and its data
//!    directory copied once per upstream.
//! 1. A full list of the fleet's Devices (4 x 5,000 = 20,000) through the hub worker's
//!    aggregation (`devices.fleet.gpustack.ai`: hub cluster → worker → gateway socket) vs the
//!    same list straight from the gateway's socket: kube-rs `Api<DynamicObject>::list`,
//!    alternating, median of 5 each.
//! 2. Upstream change → fleet watcher: label patches spread over the upstreams at a fixed total
//!    rate, from each patch's response to its event on a watch of `devices.fleet.gpustack.ai`
//!    through the aggregation; p99.
//! 3. The hub worker's resident memory once the gateway mirrors 10 x 5,000 = 50,000 objects,
//!    after two full fleet lists through it.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use gpustack_tests::{
    bench::{
        self, Figure, client, copy_dir, create_devices, env_usize, latencies_ms, median,
        percentile, proc_status_mb,
    },
    embedded::{GatewayProcess, free_port},
    wait::poll,
    worker::WorkerProcess,
};
use gpustack_worker::fleet::gateway::{self, Address};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, WatchEvent, WatchParams},
    core::GroupVersionKind,
};
use serde_json::json;

fn launch(data: &Path, cluster: &str, args: &[&str]) -> GatewayProcess {
    tokio::task::block_in_place(|| GatewayProcess::start_with(data, cluster, free_port(), args))
}

fn fleet_devices() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("fleet.gpustack.ai", "v1", "Devices"),
        "devices",
    )
}

/// Items of a full list, and how long it took.
async fn timed_list(api: &Api<DynamicObject>) -> (f64, usize) {
    let start = Instant::now();
    let list = api.list(&ListParams::default()).await.expect("list");
    (start.elapsed().as_secs_f64() * 1000.0, list.items.len())
}

/// Starts a copy of the template upstream as cluster `name`; its kubeconfig.
fn upstream_copy(root: &Path, template: &Path, name: &str) -> (GatewayProcess, PathBuf) {
    let data = root.join(name);
    copy_dir(template, &data);
    let gw = launch(&data, "template", &["--embedded-cluster=template"]);
    let kc = gw.kubeconfig();
    (gw, kc)
}

/// Subscribes `name` to the gateway over its socket, with the upstream's kubeconfig.
fn subscribe(socket: &Path, name: &str, kubeconfig: &Path) {
    let target = format!(
        "/apis/workers?cluster={name}&kubeconfig={}",
        kubeconfig.display()
    );
    let (code, body) = gpustack_tests::hub::http_over_unix(socket, "POST", &target, None)
        .expect("subscribing over the socket");
    assert!((200..300).contains(&code), "{code}: {body}");
}

/// Devices the gateway mirrors, over every upstream (its `/apis/workers` counts).
async fn mirrored_count(socket: &Path) -> usize {
    let socket = socket.to_owned();
    let doc: serde_json::Value = tokio::task::spawn_blocking(move || {
        gpustack_tests::hub::http_over_unix(&socket, "GET", "/apis/workers", None)
    })
    .await
    .ok()
    .and_then(Result::ok)
    .and_then(|(_, body)| serde_json::from_str(&body).ok())
    .unwrap_or_default();
    doc["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["counts"]["Devices.worker.gpustack.ai"].as_u64())
                .sum::<u64>() as usize
        })
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let per = env_usize("GPUSTACK_BENCH_DEVICES", 5000);
    let list_upstreams = env_usize("GPUSTACK_BENCH_LIST_UPSTREAMS", 4);
    let memory_upstreams = env_usize("GPUSTACK_BENCH_MEMORY_UPSTREAMS", 10).max(list_upstreams);
    let rate = env_usize("GPUSTACK_BENCH_WRITE_RATE", 200);
    let watch_seconds = env_usize("GPUSTACK_BENCH_WATCH_SECONDS", 10);
    gpustack_tests::announce_binary();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut figures = Vec::new();

    // 0. The template upstream.
    let start = Instant::now();
    let template = launch(
        &root.join("template"),
        "template",
        &["--embedded-cluster=template"],
    );
    let template_client = client(&template.kubeconfig()).await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(template_client.clone());
    for crd in gpustack_api::crds::all() {
        crds.create(&Default::default(), &crd).await.unwrap();
    }
    let names: Vec<String> = (0..per).map(|i| format!("node-{i:05}")).collect();
    create_devices(&template_client, names, 8).await;
    println!(
        "filled the template upstream with {per} Devices in {:.1?}",
        start.elapsed()
    );
    let template_data = template.data_dir.clone();
    assert!(tokio::task::block_in_place(|| template.stop()).success());

    // The hub: the mirroring gateway (socket only matters), its own cluster and the worker.
    let mut upstreams = Vec::new();
    let mut file = String::new();
    for k in 0..list_upstreams {
        let (gw, kc) = upstream_copy(root, &template_data, &format!("u{k}"));
        file.push_str(&format!("- name: u{k}\n  kubeconfig: {}\n", kc.display()));
        upstreams.push(gw);
    }
    std::fs::write(root.join("upstreams.yaml"), file).unwrap();
    let upstreams_flag = format!("--upstreams={}", root.join("upstreams.yaml").display());
    let allow = format!("--subscription-kubeconfig-dir={}", root.display());
    let mirror = launch(
        &root.join("mirror"),
        "u0",
        &[
            upstreams_flag.as_str(),
            allow.as_str(),
            "--worker-conn-mode=loopback",
        ],
    );
    let socket = mirror.socket();
    let hub = launch(
        &root.join("hub"),
        "hub",
        &["--embedded-cluster=hub", "--apiservice-check-interval=1s"],
    );
    let socket_flag = format!("--gateway-socket={}", socket.display());
    let worker = tokio::task::block_in_place(|| {
        WorkerProcess::start(&hub, &root.join("hub-worker"), &[socket_flag.as_str()], &[])
    });
    let hub_client = client(&hub.kubeconfig()).await;
    let through: Api<DynamicObject> = Api::all_with(hub_client.clone(), &fleet_devices());
    let gateway = gateway::connect(&Address::Socket(socket.clone()))
        .await
        .expect("the gateway's socket");
    let straight: Api<DynamicObject> =
        Api::all_with(gateway.fleet.clone(), &bench::devices_resource());
    let total = list_upstreams * per;
    let synced = poll(Duration::from_secs(300), || {
        let api = through.clone();
        async move {
            let list = api.list(&ListParams::default()).await.ok()?;
            (list.items.len() == total).then_some(())
        }
    })
    .await;
    assert!(
        synced.is_some(),
        "the fleet never listed {total} Devices\n{}",
        worker.log()
    );

    // 1. Lists.
    let (mut t, mut s) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let (ms, k) = timed_list(&through).await;
        assert_eq!(k, total);
        t.push(ms);
        let (ms, k) = timed_list(&straight).await;
        assert_eq!(k, total);
        s.push(ms);
    }
    let (t, s) = (median(t), median(s));
    let ratio = t / s;
    figures.push(Figure::new(
        format!("list of a {total}-device fleet through the hub worker's aggregation vs straight from the gateway's socket (median of 5)"),
        format!("{t:.0} ms vs {s:.0} ms = {ratio:.2}x"),
        Some("<= 1.3x"),
        Some(ratio <= 1.3),
    ));

    // 2. Upstream change → fleet watcher through the aggregation.
    let upstream_clients: Vec<Client> = futures::future::join_all(upstreams.iter().map(|u| {
        let kubeconfig = u.kubeconfig();
        async move { client(&kubeconfig).await }
    }))
    .await;
    let rv = through
        .list(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let seen: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let watcher = {
        let (api, seen) = (through.clone(), Arc::clone(&seen));
        tokio::spawn(async move {
            let params = WatchParams::default().timeout(290);
            let mut stream = api.watch(&params, &rv).await.expect("watch").boxed();
            while let Some(ev) = stream.next().await {
                if let Ok(WatchEvent::Modified(o)) = ev {
                    let tick = o.metadata.labels.unwrap_or_default().get("tick").cloned();
                    let key = format!(
                        "{}/{}",
                        o.metadata.name.unwrap_or_default(),
                        tick.unwrap_or_default()
                    );
                    seen.lock().unwrap().entry(key).or_insert_with(Instant::now);
                }
            }
        })
    };
    let writes = rate * watch_seconds;
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    let began = Instant::now();
    let mut pending = Vec::with_capacity(writes);
    for i in 0..writes {
        ticker.tick().await;
        let k = i % list_upstreams;
        let api: Api<DynamicObject> =
            Api::all_with(upstream_clients[k].clone(), &bench::devices_resource());
        let name = format!("node-{:05}", (i / list_upstreams) % per);
        pending.push(tokio::spawn(async move {
            let tick = i.to_string();
            let patch = json!({"metadata": {"labels": {"tick": tick}}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("patch");
            (format!("u{k}.{name}/{tick}"), Instant::now())
        }));
    }
    let mut acked = Vec::with_capacity(writes);
    for p in pending {
        acked.push(p.await.expect("write task"));
    }
    let achieved = writes as f64 / began.elapsed().as_secs_f64();
    let _ = poll(Duration::from_secs(15), || {
        let seen = Arc::clone(&seen);
        async move { (seen.lock().unwrap().len() >= writes).then_some(()) }
    })
    .await;
    watcher.abort();
    let lat = latencies_ms(&acked, &seen.lock().unwrap());
    let p99 = percentile(&lat, 0.99);
    println!(
        "watch at {achieved:.0} writes/s: {} of {writes} seen, p50 {:.2} ms, p99 {p99:.2} ms",
        lat.len(),
        percentile(&lat, 0.5)
    );
    figures.push(Figure::new(
        format!(
            "upstream change → fleet watcher through the aggregation at {achieved:.0} writes/s, p99"
        ),
        format!("{p99:.2} ms"),
        Some("<= 30 ms"),
        Some(lat.len() == writes && p99 <= 30.0),
    ));

    // 3. Memory with the whole fleet mirrored.
    for k in list_upstreams..memory_upstreams {
        let name = format!("u{k}");
        let (gw, kc) = upstream_copy(root, &template_data, &name);
        subscribe(&socket, &name, &kc);
        upstreams.push(gw);
    }
    let all = memory_upstreams * per;
    let mirrored = poll(Duration::from_secs(600), || {
        let socket = socket.clone();
        async move { (mirrored_count(&socket).await >= all).then_some(()) }
    })
    .await;
    if mirrored.is_none() {
        println!("the gateway did not mirror {all} objects in time");
    }
    for _ in 0..2 {
        let (_, k) = timed_list(&through).await;
        assert!(k >= all, "{k} < {all}");
    }
    let pid = worker.pid().expect("worker running");
    let (hwm, rss) = (proc_status_mb(pid, "VmHWM"), proc_status_mb(pid, "VmRSS"));
    figures.push(Figure::new(
        format!(
            "hub worker resident memory with {all} mirrored objects, after two full fleet lists"
        ),
        format!("peak (VmHWM) {hwm:.0} MB, now (VmRSS) {rss:.0} MB"),
        Some("<= 100 MB"),
        Some(hwm <= 100.0),
    ));

    gpustack_tests::bench::print_summary("fleet", &figures);
    drop(worker);
    drop(hub);
    drop(mirror);
    drop(upstreams);
}
