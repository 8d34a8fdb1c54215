//! Benchmark of the worker's aggregated API (issue 11), not a pass/fail test: the real
//! `worker-gateway` (an embedded cluster) and the real `worker` behind its aggregation.
//! Reproduce with
//!
//! ```text
//! cargo build --release --bin gpustack-operator && cargo bench -p gpustack-tests --bench worker
//! ```
//!
//! (`GPUSTACK_BENCH_DEVICES`, default 10000, `GPUSTACK_BENCH_WRITE_RATE`, default 200 writes/s,
//! `GPUSTACK_BENCH_WATCH_SECONDS`, default 10, scale it).
//!
//! 1. A full list of the Devices through the aggregation (`devices.v1.worker.gpustack.ai`:
//!    cluster → worker → cluster) vs the same list of the custom resources straight from the
//!    cluster: kube-rs `Api<DynamicObject>::list` over HTTPS, alternating, median of 5 each.
//! 2. Watch delivery: label patches at a fixed rate; from each patch's response to its event on
//!    a watch through the aggregation and on a direct watch; the added latency is the
//!    difference of the two p99s.
//! 3. The worker's resident memory (peak and now) after those lists, with every Device present
//!    (each an 8-card spec, which the controllers cache, and a 2 KB annotation, which they do not).
//! 4. One-machine start: from spawning `worker` with no cluster at hand until
//!    `kubectl get devices.v1.worker.gpustack.ai` answers.
//! 5. One small read: GETs of one Device through the aggregation vs straight from the cluster,
//!    one after the other (what each fleet or worker read pays on top of the cluster's own).

use std::{
    collections::HashMap,
    process::Stdio,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt};
use gpustack_tests::{
    bench::{self, Figure, env_usize, latencies_ms, median, percentile, proc_status_mb},
    embedded::{free_port, kubectl_with},
    inventory::{H100, Machine},
    wait::poll,
};
use kube::{
    Api,
    api::{
        ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
        WatchParams,
    },
    core::GroupVersionKind,
};
use serde_json::json;

/// A node's `Devices` as the worker's controllers cache it: an 8x H100 spec as detected, plus
/// [`bench::device`]'s 2 KB annotation (which the cache drops, and every list carries).
fn node_devices(name: &str) -> serde_json::Value {
    let mut d = Machine::gpu(name, H100, 8).devices();
    d["metadata"] = bench::device(name)["metadata"].clone();
    d
}

fn devices(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("worker.gpustack.ai", version, "Devices"),
        "devices",
    )
}

use bench::client;

async fn timed_list(api: &Api<DynamicObject>) -> (Duration, usize) {
    let start = Instant::now();
    let list = api.list(&ListParams::default()).await.expect("list");
    (start.elapsed(), list.items.len())
}

/// Names seen on a watch of `api` from `rv`, with when they were seen.
fn watch_into(
    api: Api<DynamicObject>,
    rv: String,
    seen: Arc<Mutex<HashMap<String, Instant>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let params = WatchParams::default().timeout(290);
        let mut stream = api.watch(&params, &rv).await.expect("watch").boxed();
        while let Some(ev) = stream.next().await {
            if let Ok(WatchEvent::Modified(o)) = ev {
                let key = format!(
                    "{}/{}",
                    o.metadata.name.unwrap_or_default(),
                    o.metadata
                        .labels
                        .unwrap_or_default()
                        .get("tick")
                        .cloned()
                        .unwrap_or_default()
                );
                seen.lock().unwrap().entry(key).or_insert_with(Instant::now);
            }
        }
    })
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let n = env_usize("GPUSTACK_BENCH_DEVICES", 10_000);
    let rate = env_usize("GPUSTACK_BENCH_WRITE_RATE", 200);
    let watch_seconds = env_usize("GPUSTACK_BENCH_WATCH_SECONDS", 10);
    let tmp = tempfile::tempdir().unwrap();
    let mut figures = Vec::new();

    let (gw, worker) = bench::cluster_and_worker(tmp.path(), &["--apiservice-check-interval=1s"]);
    let cluster = client(&gw.kubeconfig()).await;
    let direct: Api<DynamicObject> = Api::all_with(cluster.clone(), &devices("v1alpha1"));
    let aggregated: Api<DynamicObject> = Api::all_with(cluster.clone(), &devices("v1"));

    let start = Instant::now();
    futures::stream::iter((0..n).map(|i| format!("node-{i:05}")))
        .map(|name| {
            let api = direct.clone();
            async move {
                let obj: DynamicObject = serde_json::from_value(node_devices(&name)).unwrap();
                api.create(&PostParams::default(), &obj).await.map(|_| ())
            }
        })
        .buffer_unordered(8)
        .try_collect::<()>()
        .await
        .expect("creating Devices");
    println!("created {n} Devices (~4 KB) in {:.1?}", start.elapsed());
    poll(Duration::from_secs(60), || {
        let api = aggregated.clone();
        async move { api.list(&ListParams::default().limit(1)).await.ok() }
    })
    .await
    .expect("the aggregated API answers");

    // 1. Lists.
    let (mut through, mut straight) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let (d, k) = timed_list(&aggregated).await;
        assert_eq!(k, n);
        through.push(d.as_secs_f64() * 1000.0);
        let (d, k) = timed_list(&direct).await;
        assert_eq!(k, n);
        straight.push(d.as_secs_f64() * 1000.0);
    }
    let (t, s) = (median(through), median(straight));
    let ratio = t / s;
    figures.push(Figure::new(
        format!(
            "list of {n} Devices through the aggregation vs straight from the cluster (median of 5)"
        ),
        format!("{t:.0} ms vs {s:.0} ms = {ratio:.2}x"),
        Some("<= 1.5x"),
        Some(ratio <= 1.5),
    ));

    // 5. Small reads, one after the other.
    let (mut through, mut straight) = (Vec::new(), Vec::new());
    for i in 0..400 {
        let name = format!("node-{:05}", i % n);
        let t = Instant::now();
        aggregated
            .get(&name)
            .await
            .expect("get through the aggregation");
        through.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        direct.get(&name).await.expect("get from the cluster");
        straight.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    through.sort_by(f64::total_cmp);
    straight.sort_by(f64::total_cmp);
    let (t50, t99) = (percentile(&through, 0.5), percentile(&through, 0.99));
    let (s50, s99) = (percentile(&straight, 0.5), percentile(&straight, 0.99));
    figures.push(Figure::new(
        "GET of one Device through the aggregation vs straight from the cluster (400 each)",
        format!(
            "p50 {t50:.2} ms vs {s50:.2} ms = {:.2}x; p99 {t99:.2} ms vs {s99:.2} ms",
            t50 / s50
        ),
        Some("p50 <= 2x"),
        Some(t50 <= 2.0 * s50),
    ));

    // 3. Memory after the lists.
    let pid = worker.pid().expect("worker running");
    let (hwm, rss) = (proc_status_mb(pid, "VmHWM"), proc_status_mb(pid, "VmRSS"));
    figures.push(Figure::new(
        format!("worker resident memory with {n} Devices, after 5 full lists"),
        format!("peak (VmHWM) {hwm:.0} MB, now (VmRSS) {rss:.0} MB"),
        Some("<= 100 MB"),
        Some(hwm <= 100.0),
    ));

    // 2. Watch delivery.
    let rv = direct
        .list(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let (seen_agg, seen_direct) = (Arc::default(), Arc::default());
    let w1 = watch_into(aggregated.clone(), rv.clone(), Arc::clone(&seen_agg));
    let w2 = watch_into(direct.clone(), rv, Arc::clone(&seen_direct));
    let writes = rate * watch_seconds;
    let mut acked = Vec::with_capacity(writes);
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let began = Instant::now();
    let mut ticker = tokio::time::interval(interval);
    // Each write runs as its own task, so its acknowledgement is timed when its response
    // arrives, not when this loop next looks.
    let mut pending = Vec::with_capacity(writes);
    for i in 0..writes {
        ticker.tick().await;
        let api = direct.clone();
        let name = format!("node-{:05}", i % n);
        pending.push(tokio::spawn(async move {
            let tick = i.to_string();
            let patch = json!({"metadata": {"labels": {"tick": tick}}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("patch");
            (format!("{name}/{tick}"), Instant::now())
        }));
    }
    for p in pending {
        acked.push(p.await.expect("write task"));
    }
    let achieved = writes as f64 / began.elapsed().as_secs_f64();
    let _ = poll(Duration::from_secs(10), || {
        let (a, d) = (Arc::clone(&seen_agg), Arc::clone(&seen_direct));
        async move {
            (a.lock().unwrap().len() >= writes && d.lock().unwrap().len() >= writes).then_some(())
        }
    })
    .await;
    w1.abort();
    w2.abort();
    let lat_agg = latencies_ms(&acked, &seen_agg.lock().unwrap());
    let lat_direct = latencies_ms(&acked, &seen_direct.lock().unwrap());
    let (pa, pd) = (percentile(&lat_agg, 0.99), percentile(&lat_direct, 0.99));
    println!(
        "watch at {achieved:.0} writes/s: through the aggregation {} of {writes} seen, p50 {:.2} ms p99 {pa:.2} ms; direct {} seen, p50 {:.2} ms p99 {pd:.2} ms",
        lat_agg.len(),
        percentile(&lat_agg, 0.5),
        lat_direct.len(),
        percentile(&lat_direct, 0.5),
    );
    let added = pa - pd;
    figures.push(Figure::new(
        format!("watch delivery through the aggregation at {achieved:.0} writes/s, p99 added over a direct watch"),
        format!("{added:.2} ms ({pa:.2} ms vs {pd:.2} ms)"),
        Some("<= 10 ms"),
        Some(lat_agg.len() == writes && added <= 10.0),
    ));
    drop(worker);
    drop(gw);

    // 4. One-machine start.
    let data = tmp.path().join("one-machine");
    let (api_port, port) = (free_port(), free_port());
    let start = Instant::now();
    let mut child = gpustack_tests::operator()
        .args([
            "worker",
            &format!("--embedded-api-port={api_port}"),
            &format!("--secure-port={port}"),
        ])
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("GPUSTACK_DATA_DIR", &data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let kubeconfig = data.join("local.kubeconfig");
    let answered = poll(Duration::from_secs(30), || {
        let kubeconfig = kubeconfig.clone();
        let cache = tmp.path().join("kube-cache");
        async move {
            let out = kubectl_with(
                &[
                    format!("--kubeconfig={}", kubeconfig.display()),
                    format!("--cache-dir={}", cache.display()),
                ],
                &["get", "devices.v1.worker.gpustack.ai"],
            )
            .output()
            .ok()?;
            out.status.success().then(Instant::now)
        }
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let took = answered.map(|at| at.duration_since(start));
    figures.push(Figure::new(
        "one-machine start to `kubectl get devices.v1.worker.gpustack.ai` answering",
        took.map(|d| format!("{:.2} s", d.as_secs_f64()))
            .unwrap_or_else(|| "no answer in 30 s".into()),
        Some("<= 2 s"),
        Some(took.is_some_and(|d| d <= Duration::from_secs(2))),
    ));

    gpustack_tests::bench::print_summary("worker", &figures);
}
