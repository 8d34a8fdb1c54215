//! Benchmark of the hub's mirror (issue 4, section 7), not a pass/fail test: real
//! `worker-gateway` processes, the upstreams being embedded clusters. Reproduce with
//!
//! ```text
//! cargo build --release --bin gpustack-operator && cargo bench -p gpustack-tests --bench mirror
//! ```
//!
//! (the bench runs `target/release/gpustack-operator`, or the binary named by
//! `GPUSTACK_OPERATOR_BIN`; `GPUSTACK_BENCH_UPSTREAMS`, default 10, `GPUSTACK_BENCH_DEVICES`,
//! default 2000 per upstream, `GPUSTACK_BENCH_MEMORY_OBJECTS`, default 50000,
//! `GPUSTACK_BENCH_WRITE_RATE`, default 200 writes/s, `GPUSTACK_BENCH_WATCH_SECONDS`,
//! default 10, and `GPUSTACK_BENCH_WATCH_RUNS`, default 5, scale it; issue 17's figures use
//! `GPUSTACK_BENCH_DEVICES=5000`). The synthetic million-object hub is the store-level bench
//! `cargo bench -p gpustack-apiserver --bench fleet_scale`.
//!
//! 0. Not measured: one upstream is filled with the Devices (~2 KB each) through its API and
//!    stopped, and its data directory copied once per upstream (each then serves the same
//!    objects on its own port); a reference embedded cluster gets all the upstreams' objects
//!    together (10 x 2,000 = 20,000) through its API.
//! 1. Time to a fully synced mirror: from starting the hub with every upstream until
//!    `GET /apis/workers` shows each `Ready` with all its Devices and a fleet list returns
//!    them all.
//! 2. A list of the fleet view through the hub vs a list of the same number of objects straight
//!    from the reference cluster: the same kube-rs `Api<DynamicObject>::list` over HTTPS on
//!    both sides, alternating, median of several each.
//! 3. Watch latency: creates spread over the upstreams at a fixed total rate, from each
//!    create's response to its event at a kube-rs watch of the hub's fleet view; several runs,
//!    each one's p99 reported.
//! 4. Bursts, filling the upstreams up to the memory figure's objects: first half created as
//!    fast as the upstreams can while the hub mirrors them (for information: on one machine the
//!    upstreams' creates take most of the cores), then the second half with the hub frozen
//!    (SIGSTOP), so that the whole burst waits for it; the hub's burst rate is that half over
//!    the time from thawing it (SIGCONT) until it has them all.
//! 5. The hub's resident memory (`/proc/<pid>/status`) once it mirrors the memory figure's
//!    objects, after a full fleet list, and its data directory's size per mirrored object
//!    against the object's JSON size (after the sync and after the burst).
//!
//! Each figure is printed against its target, then once more in a closing summary.

use std::{
    collections::HashMap,
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use gpustack_tests::{
    bench::{
        self, Figure, env_usize, latencies_ms, median, percentile, proc_status_mb, rss_breakdown,
    },
    embedded::{GatewayProcess, free_port},
    wait::poll,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams, PostParams, WatchEvent, WatchParams},
};
use serde_json::Value;

/// The sizes of the regular files directly in `dir`, largest first, in MB.
fn files_mb(dir: &Path) -> String {
    let mut files: Vec<(String, u64)> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let m = e.metadata().ok()?;
                    m.is_file()
                        .then(|| (e.file_name().to_string_lossy().into_owned(), m.len()))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort_by_key(|(_, len)| std::cmp::Reverse(*len));
    files
        .iter()
        .take(4)
        .map(|(name, len)| format!("{name} {:.0} MB", *len as f64 / 1e6))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The total size of the files under `dir`, in MB.
fn dir_mb(dir: &Path) -> f64 {
    fn walk(dir: &Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => walk(&e.path()),
                Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
                _ => 0,
            })
            .sum()
    }
    walk(dir) as f64 / 1e6
}

/// The hub's data directory per mirrored object against the object's JSON size.
fn disk_figure(data: &Path, objects: usize, object_bytes: usize) -> Figure {
    let mb = dir_mb(data);
    let ratio = mb * 1e6 / (objects.max(1) * object_bytes) as f64;
    Figure::new(
        format!("hub disk per mirrored object / its JSON size, {objects} objects"),
        format!("ratio {ratio:.2} ({mb:.0} MB: {})", files_mb(data)),
        Some("<= 3"),
        Some(ratio <= 3.0),
    )
}

use bench::{client, create_devices, devices_resource};

/// Starts a `worker-gateway` process (blocking: it waits for kubectl to reach it).
fn launch(data: &Path, cluster: &str, args: &[&str]) -> GatewayProcess {
    tokio::task::block_in_place(|| GatewayProcess::start_with(data, cluster, free_port(), args))
}

/// An embedded cluster `cluster` with the worker CRDs installed, and a client for it.
async fn embedded(root: &Path, cluster: &str) -> (GatewayProcess, Client) {
    let serve = format!("--embedded-cluster={cluster}");
    let gw = launch(&root.join(cluster), cluster, &[serve.as_str()]);
    let client = client(&gw.kubeconfig()).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in gpustack_api::crds::all() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    (gw, client)
}

/// The hub's `/apis/workers`, read over its unix socket: its owner sees every upstream's status
/// (a cluster's token only its own).
async fn workers(socket: &Path) -> Value {
    let socket = socket.to_owned();
    tokio::task::spawn_blocking(move || {
        gpustack_tests::hub::http_over_unix(&socket, "GET", "/apis/workers", None)
    })
    .await
    .ok()
    .and_then(Result::ok)
    .and_then(|(_, body)| serde_json::from_str(&body).ok())
    .unwrap_or(Value::Null)
}

/// Whether every one of `n` upstreams is `Ready` with `per` Devices mirrored.
fn all_synced(status: &Value, n: usize, per: &dyn Fn(&str) -> usize) -> bool {
    let items = status["items"].as_array().cloned().unwrap_or_default();
    items.len() == n
        && items.iter().all(|i| {
            let cluster = i["cluster"].as_str().unwrap_or_default();
            i["phase"] == "Ready" && i["counts"]["Devices.worker.gpustack.ai"] == per(cluster)
        })
}

/// A one-line digest of `/apis/workers`: phase and Devices count per upstream.
fn digest(status: &Value) -> String {
    status["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| {
                    format!(
                        "{}={}/{}",
                        i["cluster"].as_str().unwrap_or("?"),
                        i["phase"].as_str().unwrap_or("?"),
                        i["counts"]["Devices.worker.gpustack.ai"]
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| status.to_string())
}

/// How many items a full list of the fleet's Devices has (read as text, counted).
async fn fleet_count(fleet: &Client) -> usize {
    #[derive(serde::Deserialize)]
    struct Items {
        items: Vec<serde::de::IgnoredAny>,
    }
    let req = http::Request::get("/apis/worker.gpustack.ai/v1alpha1/devices")
        .body(Vec::new())
        .unwrap();
    match fleet.request_text(req).await {
        Ok(text) => serde_json::from_str::<Items>(&text).map_or(0, |l| l.items.len()),
        Err(_) => 0,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let n = env_usize("GPUSTACK_BENCH_UPSTREAMS", 10);
    let per = env_usize("GPUSTACK_BENCH_DEVICES", 2000);
    let memory_objects = env_usize("GPUSTACK_BENCH_MEMORY_OBJECTS", 50_000);
    let rate = env_usize("GPUSTACK_BENCH_WRITE_RATE", 200);
    let watch_secs = env_usize("GPUSTACK_BENCH_WATCH_SECONDS", 10);
    let watch_runs = env_usize("GPUSTACK_BENCH_WATCH_RUNS", 5).max(1);
    let total = n * per;
    gpustack_tests::announce_binary();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let object_bytes = serde_json::to_string(&bench::device("node-00000"))
        .unwrap()
        .len();
    println!(
        "data: {} (object size {object_bytes} bytes)",
        root.display()
    );
    let mut figures = Vec::new();

    // 0. Not measured: the upstreams' objects (one filled upstream, copied) and the reference
    // cluster with as many objects, filled at the same time.
    let start = Instant::now();
    let (template, template_client) = embedded(root, "template").await;
    let (reference, reference_client) = embedded(root, "reference").await;
    let names = |prefix: &str, count: usize| -> Vec<String> {
        (0..count).map(|i| format!("{prefix}-{i:05}")).collect()
    };
    tokio::join!(
        create_devices(&template_client, names("node", per), 8),
        create_devices(&reference_client, names("node", total), 16),
    );
    println!(
        "filled one upstream with {per} and the reference cluster with {total} Devices in {:.1?}",
        start.elapsed()
    );
    let template_data = template.data_dir.clone();
    assert!(tokio::task::block_in_place(|| template.stop()).success());
    let (upstreams, upstreams_flag) =
        gpustack_tests::bench::upstreams_from_template(root, &template_data, n);
    let upstream_clients: Vec<Client> =
        futures::future::join_all(upstreams.iter().map(client_of)).await;
    println!("{n} upstreams serving {per} Devices each");

    // 1. Time to a fully synced mirror.
    let start = Instant::now();
    let hub = launch(
        &root.join("hub"),
        "u0",
        &[upstreams_flag.as_str(), "--worker-conn-mode=loopback"],
    );
    let hub_pid = hub.pid().expect("the hub runs");
    let hub_socket = hub.socket();
    let fleet_client = client(&hub.data_dir.join("_fleet.kubeconfig")).await;
    let synced = poll(Duration::from_secs(300), || {
        let (hub_socket, fleet_client) = (hub_socket.clone(), fleet_client.clone());
        async move {
            if !all_synced(&workers(&hub_socket).await, n, &|_| per) {
                return None;
            }
            (fleet_count(&fleet_client).await == total).then(Instant::now)
        }
    })
    .await;
    figures.push(match synced {
        Some(at) => {
            let took = at.duration_since(start).as_secs_f64();
            Figure::new(
                format!("time to a fully synced mirror of {n} upstreams x {per} Devices"),
                format!("{took:.1} s, {:.0} objects/s", total as f64 / took),
                None,
                Some(true),
            )
        }
        None => {
            println!(
                "the mirror did not sync within 300 s: {}",
                digest(&workers(&hub_socket).await)
            );
            Figure::new(
                format!("time to a fully synced mirror of {n} upstreams x {per} Devices"),
                "> 300 s".into(),
                None,
                Some(false),
            )
        }
    });
    println!(
        "hub after the sync: resident {:.0} MB ({}), peak {:.0} MB; data {:.0} MB ({})",
        proc_status_mb(hub_pid, "VmRSS"),
        rss_breakdown(hub_pid),
        proc_status_mb(hub_pid, "VmHWM"),
        dir_mb(&hub.data_dir),
        files_mb(&hub.data_dir)
    );
    let synced_hwm = proc_status_mb(hub_pid, "VmHWM");
    figures.push(Figure::new(
        format!("hub peak resident memory (VmHWM) through the sync of {total} objects"),
        format!("{synced_hwm:.0} MB"),
        Some("<= 64 MB at 50,000"),
        Some(synced.is_some() && (total > 50_000 || synced_hwm <= 64.0)),
    ));
    figures.push(disk_figure(&hub.data_dir, total, object_bytes));

    // 2. Fleet list through the hub vs the same number of objects from one embedded cluster.
    let fleet: Api<DynamicObject> = Api::all_with(fleet_client.clone(), &devices_resource());
    let direct: Api<DynamicObject> = Api::all_with(reference_client.clone(), &devices_resource());
    let (mut via_hub, mut straight) = (Vec::new(), Vec::new());
    for _ in 0..7 {
        for (api, times) in [(&fleet, &mut via_hub), (&direct, &mut straight)] {
            let start = Instant::now();
            let list = api.list(&ListParams::default()).await.expect("list");
            times.push(start.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(list.items.len(), total);
        }
    }
    let (hub_ms, direct_ms) = (median(via_hub.clone()), median(straight.clone()));
    let ratio = hub_ms / direct_ms;
    println!(
        "list {total} (kube-rs DynamicObject, decoding included): fleet view via the hub median {hub_ms:.0} ms (min {:.0}, max {:.0}), one embedded cluster median {direct_ms:.0} ms (min {:.0}, max {:.0})",
        via_hub.iter().copied().fold(f64::INFINITY, f64::min),
        via_hub.iter().copied().fold(0.0, f64::max),
        straight.iter().copied().fold(f64::INFINITY, f64::min),
        straight.iter().copied().fold(0.0, f64::max),
    );
    figures.push(Figure::new(
        format!(
            "list of the {total}-object fleet view via the hub / straight from one embedded cluster"
        ),
        format!("ratio {ratio:.2} ({hub_ms:.0} ms / {direct_ms:.0} ms, medians of 7)"),
        Some("<= 1.2"),
        Some(ratio <= 1.2),
    ));
    drop((reference_client, direct));
    drop(reference);

    // 3. Watch latency, upstream create's response to the event at a fleet watcher.
    let (mut p99s, mut all_seen) = (Vec::new(), true);
    for run in 0..watch_runs {
        let rv = current_version(&fleet).await;
        let seen: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let mut stream = fleet
            .watch(&WatchParams::default().timeout(290), &rv)
            .await
            .expect("fleet watch")
            .boxed();
        let seen_w = seen.clone();
        let watching = tokio::spawn(async move {
            while let Some(Ok(ev)) = stream.next().await {
                if let WatchEvent::Added(o) = ev {
                    let name = o.metadata.name.unwrap_or_default();
                    seen_w.lock().unwrap().insert(name, Instant::now());
                }
            }
        });
        let writes = rate * watch_secs;
        let acked: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
        let mut tasks = Vec::with_capacity(writes);
        let start = Instant::now();
        for i in 0..writes {
            tick.tick().await;
            let k = i % n;
            let api: Api<DynamicObject> =
                Api::all_with(upstream_clients[k].clone(), &devices_resource());
            let acked = acked.clone();
            tasks.push(tokio::spawn(async move {
                let name = format!("lat-{run}-{i:05}");
                api.create(&PostParams::default(), &bench::device_object(&name))
                    .await
                    .expect("upstream create");
                let at = Instant::now();
                acked.lock().unwrap().push((format!("u{k}.{name}"), at));
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let achieved = writes as f64 / start.elapsed().as_secs_f64();
        poll(Duration::from_secs(30), || {
            let done = seen.lock().unwrap().len() >= writes;
            async move { done.then_some(()) }
        })
        .await;
        watching.abort();
        let seen = std::mem::take(&mut *seen.lock().unwrap());
        let acked = std::mem::take(&mut *acked.lock().unwrap());
        let lat = latencies_ms(&acked, &seen);
        let (p50, p99) = (percentile(&lat, 0.5), percentile(&lat, 0.99));
        println!(
            "watch: {} of {writes} upstream writes seen on the hub's fleet view at {achieved:.0} writes/s over {n} upstreams; latency after the upstream's response p50 {p50:.2} ms, p99 {p99:.2} ms, max {:.2} ms",
            lat.len(),
            lat.last().copied().unwrap_or(f64::NAN)
        );
        p99s.push(p99);
        all_seen &= lat.len() == writes;
        figures.push(Figure::new(
            format!(
                "run {}: upstream write to hub fleet watcher at {achieved:.0} writes/s, p50 / p99",
                run + 1
            ),
            format!("{p50:.2} ms / {p99:.2} ms"),
            None,
            Some(lat.len() == writes),
        ));
    }
    let worst = p99s.iter().copied().fold(0.0, f64::max);
    figures.push(Figure::new(
        format!("upstream write to hub fleet watcher, p99 of each of {watch_runs} runs"),
        format!(
            "{} ms",
            p99s.iter()
                .map(|p| format!("{p:.2}"))
                .collect::<Vec<_>>()
                .join(" / ")
        ),
        Some("all < 20 ms"),
        Some(all_seen && worst < 20.0),
    ));
    let writes = rate * watch_secs * watch_runs;

    // 4. Bursts, up to `memory_objects` in all: the first half created while the hub mirrors,
    // the second half while the hub is frozen, so that it arrives all at once.
    let per_memory = memory_objects.div_ceil(n);
    // What each upstream holds before the bursts, and once they are done: they add none where
    // the sync and the watch runs already made more.
    let before: Vec<usize> = (0..n)
        .map(|k| per + writes / n + usize::from(k < writes % n))
        .collect();
    let expected: Vec<usize> = before.iter().map(|&b| b.max(per_memory)).collect();
    let halfway: Vec<usize> = before
        .iter()
        .zip(&expected)
        .map(|(&b, &e)| b + (e - b) / 2)
        .collect();
    let expected_total: usize = expected.iter().sum();
    let counts_of = |counts: &[usize], cluster: &str| {
        let k: usize = cluster
            .trim_start_matches('u')
            .parse()
            .unwrap_or(usize::MAX);
        counts.get(k).copied().unwrap_or(usize::MAX)
    };
    let all_there = |counts: &[usize]| {
        let (socket, counts) = (hub_socket.clone(), counts.to_vec());
        poll(Duration::from_secs(300), move || {
            let (hub_socket, counts) = (socket.clone(), counts.clone());
            async move {
                all_synced(&workers(&hub_socket).await, n, &|c| counts_of(&counts, c))
                    .then(Instant::now)
            }
        })
    };
    let create = |from: &[usize], to: &[usize]| {
        let fills: Vec<_> = upstream_clients
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let more: Vec<String> = (from[k]..to[k]).map(|i| format!("more-{i:05}")).collect();
                let c = c.clone();
                tokio::spawn(async move { create_devices(&c, more, 4).await })
            })
            .collect();
        async move {
            for f in fills {
                f.await.unwrap();
            }
        }
    };

    // 4a. Created while the hub mirrors: on one machine the upstreams' creates and the hub
    // share the cores, so this is mostly the upstreams' pace; for information.
    let concurrent: usize = halfway.iter().sum::<usize>() - before.iter().sum::<usize>();
    let start = Instant::now();
    create(&before, &halfway).await;
    let created_in = start.elapsed().as_secs_f64();
    match all_there(&halfway).await {
        Some(at) => figures.push(Figure::new(
            format!(
                "burst while creating, for information: {concurrent} objects created over {n} upstreams while the hub mirrors"
            ),
            format!(
                "{:.0} objects/s (all on the hub {:.1} s after the creates began; the upstreams took {created_in:.1} s, sharing the machine with the hub)",
                concurrent as f64 / at.duration_since(start).as_secs_f64(),
                at.duration_since(start).as_secs_f64()
            ),
            None,
            Some(true),
        )),
        None => println!(
            "the hub did not mirror the first burst within 300 s: {}",
            digest(&workers(&hub_socket).await)
        ),
    }

    // 4b. The same again with the hub frozen (SIGSTOP) while the upstreams create: its watches
    // fall behind, and once it runs again (SIGCONT) the whole burst is waiting for it, as it is
    // for a hub whose upstreams change faster than it mirrors. The burst is mirrored when a
    // watch of the hub's fleet view has seen every one of its objects added.
    let burst = expected_total - halfway.iter().sum::<usize>();
    let from = current_version(&fleet).await;
    let seen_all = tokio::spawn(added_on_fleet(fleet_client.clone(), from, burst));
    hub.freeze();
    let start = Instant::now();
    create(&halfway, &expected).await;
    println!(
        "created {burst} more Devices over {n} upstreams in {:.1?} with the hub frozen",
        start.elapsed()
    );
    let thawed = Instant::now();
    hub.thaw();
    let last_added = tokio::time::timeout(Duration::from_secs(300), seen_all)
        .await
        .ok()
        .and_then(Result::ok)
        .flatten();
    let mirrored = all_there(&expected).await.and(last_added);
    match mirrored {
        Some(at) => {
            let took = at.duration_since(thawed).as_secs_f64();
            figures.push(Figure::new(
                format!("burst: {burst} objects waiting over {n} upstreams, mirrored by the hub"),
                format!("{:.0} objects/s ({took:.1} s)", burst as f64 / took),
                Some(">= 5000 objects/s"),
                Some(burst as f64 / took >= 5000.0),
            ));
        }
        None => println!(
            "the hub did not mirror the burst within 300 s: {}",
            digest(&workers(&hub_socket).await)
        ),
    }
    let start = Instant::now();
    let listed = fleet_count(&fleet_client).await;
    println!(
        "full fleet list of {listed} from the hub in {:.1?}; hub data {:.0} MB ({})",
        start.elapsed(),
        dir_mb(&hub.data_dir),
        files_mb(&hub.data_dir)
    );
    println!(
        "hub resident memory now: {:.0} MB ({})",
        proc_status_mb(hub_pid, "VmRSS"),
        rss_breakdown(hub_pid)
    );
    let (hwm, rss) = (
        proc_status_mb(hub_pid, "VmHWM"),
        proc_status_mb(hub_pid, "VmRSS"),
    );
    figures.push(Figure::new(
        format!("hub resident memory with {listed} mirrored objects, after a full fleet list"),
        format!("peak (VmHWM) {hwm:.0} MB, now (VmRSS) {rss:.0} MB"),
        Some("<= 64 MB"),
        Some(mirrored.is_some() && listed == expected_total && hwm <= 64.0),
    ));
    figures.push(disk_figure(&hub.data_dir, listed, object_bytes));

    gpustack_tests::bench::print_summary("mirror", &figures);
    drop(hub);
    drop(upstreams);
}

/// The version a list through `api` is at now: where a watch of what follows starts.
async fn current_version(api: &Api<DynamicObject>) -> String {
    api.list(&ListParams::default().limit(1))
        .await
        .expect("list for a version")
        .metadata
        .resource_version
        .unwrap_or_default()
}

/// Watches the hub's fleet view of Devices from `rv` until `want` objects have been added,
/// and returns when the last one arrived. A watch the hub ends (a watcher that falls too far
/// behind is let go) is taken up again from the last version seen; a watch the hub refuses
/// ends the count (`None`). Only the event's type and version are decoded.
async fn added_on_fleet(client: Client, mut rv: String, want: usize) -> Option<Instant> {
    use futures::{AsyncBufReadExt, TryStreamExt};
    #[derive(serde::Deserialize)]
    struct Line {
        #[serde(rename = "type")]
        kind: String,
        object: Object,
    }
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Meta,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Meta {
        resource_version: Option<String>,
    }
    let mut added = 0;
    loop {
        let req = http::Request::get(format!(
            "/apis/worker.gpustack.ai/v1alpha1/devices?watch=true&timeoutSeconds=290&resourceVersion={rv}"
        ))
        .body(Vec::new())
        .unwrap();
        let stream = match client.request_stream(req).await {
            Ok(stream) => stream,
            Err(e) => {
                println!("watching the fleet view from {rv} failed: {e}");
                return None;
            }
        };
        let mut lines = stream.lines();
        while let Ok(Some(line)) = lines.try_next().await {
            let Ok(ev) = serde_json::from_str::<Line>(&line) else {
                continue;
            };
            if let Some(v) = ev.object.metadata.resource_version {
                rv = v;
            }
            if ev.kind == "ADDED" {
                added += 1;
                if added >= want {
                    return Some(Instant::now());
                }
            }
        }
    }
}

async fn client_of(gw: &GatewayProcess) -> Client {
    client(&gw.kubeconfig()).await
}
