//! Benchmark of the worker's Pod webhooks (issue 13), not a pass/fail test: the real
//! `worker-gateway` (an embedded cluster, whose admission chain calls the webhooks) and the
//! real `worker`. Reproduce with
//!
//! ```text
//! cargo build --release --bin gpustack-operator && cargo bench -p gpustack-tests --bench webhooks
//! ```
//!
//! (`GPUSTACK_BENCH_CREATE_RATE`, default 200 Pod creates/s, `GPUSTACK_BENCH_SECONDS`, default
//! 10, scale it).
//!
//! 1. Added latency: Pod creates at a fixed rate, alternating a Pod the webhooks see (the
//!    queue label, a logical slice priced by the mutating half and checked by the validating
//!    half) and the same Pod without the label (no webhook is called), each create timed from
//!    its request to its response; the added latency is the difference of the p99s (and p50s).
//! 2. The worker's CPU time (user + system, from `/proc`) per review answered during the run,
//!    and the p99 of its own answer time (its `gpustack_worker_admission_duration_seconds`
//!    histogram, a bucket bound): what the webhooks cost apart from the transport (the
//!    embedded cluster calls them on kept-alive connections, one pool per caBundle and
//!    endpoint, so a TLS handshake is paid only when the pool grows).

use std::time::{Duration, Instant};

use gpustack_tests::{
    bench::{self, Figure, env_usize, median, percentile},
    worker::local_queue_name as entrance,
};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams},
    core::GroupVersionKind,
};
use serde_json::json;

fn pod(name: &str, queue: Option<&str>) -> Pod {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "app", "image": "busybox", "resources": {"limits": {
            "nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "25"}}}]},
    });
    if let Some(q) = queue {
        p["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = json!(q);
    }
    serde_json::from_value(p).unwrap()
}

/// The upper bound (ms) of the histogram bucket under which 99% of the Pod reviews fell.
fn handler_p99_ms(metrics: &str) -> Option<f64> {
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for line in metrics.lines().filter(|l| {
        l.starts_with("gpustack_worker_admission_duration_seconds_bucket{webhook=\"pod.")
    }) {
        let le = line.split("le=\"").nth(1)?.split('"').next()?;
        let le: f64 = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().ok()?
        };
        let n: f64 = line.rsplit(' ').next()?.parse().ok()?;
        match buckets.iter_mut().find(|(b, _)| *b == le) {
            Some((_, c)) => *c += n,
            None => buckets.push((le, n)),
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last()?.1;
    buckets
        .iter()
        .find(|(_, c)| *c >= 0.99 * total)
        .map(|(le, _)| le * 1000.0)
}

/// User plus system CPU seconds of process `pid` so far.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces) start at the state, field 3.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let rate = env_usize("GPUSTACK_BENCH_CREATE_RATE", 200);
    let seconds = env_usize("GPUSTACK_BENCH_SECONDS", 10);
    let tmp = tempfile::tempdir().unwrap();
    let mut figures = Vec::new();

    let (gw, worker) = bench::cluster_and_worker(tmp.path(), &[]);
    let cluster = bench::client(&gw.kubeconfig()).await;

    // The pool the Pods' queue fronts, with the status the controllers would write.
    let it = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("worker.gpustack.ai", "v1alpha1", "InstanceType"),
        "instancetypes",
    );
    let its: Api<DynamicObject> = Api::all_with(cluster.clone(), &it);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType", "metadata": {"name": "h100"},
        "spec": {"acceleratable": true, "acceleratorGroup": "nvidia-h100", "os": "linux", "arch": "amd64",
                 "unitResources": {"cpu": "8", "ram": "64Gi"}, "localStorage": "100Gi"},
    }))
    .unwrap();
    its.create(&PostParams::default(), &obj)
        .await
        .expect("creating the InstanceType");
    let status = json!({"status": {"entrance": entrance("h100"), "phase": "Active", "detail": {"memory": "80Gi"}}});
    its.patch_status("h100", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("writing its status");
    let queue = entrance("h100");

    let pods: Api<Pod> = Api::namespaced(cluster.clone(), "default");
    // Warm both paths (connections, caches) before measuring.
    for i in 0..20 {
        let q = (i % 2 == 0).then_some(queue.as_str());
        pods.create(&PostParams::default(), &pod(&format!("warm-{i}"), q))
            .await
            .expect("warm-up create");
    }

    let pid = worker.pid().expect("the worker runs");
    let cpu_before = cpu_seconds(pid);
    let total = rate * seconds;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = Vec::with_capacity(total);
    let started = Instant::now();
    for i in 0..total {
        tick.tick().await;
        let api = pods.clone();
        let hooked = i % 2 == 0;
        let q = hooked.then(|| queue.clone());
        tasks.push(tokio::spawn(async move {
            let p = pod(&format!("p-{i:06}"), q.as_deref());
            let t = Instant::now();
            let r = api.create(&PostParams::default(), &p).await;
            (
                hooked,
                t.elapsed().as_secs_f64() * 1000.0,
                r.map(|created| created.spec),
            )
        }));
    }
    let offered = started.elapsed();
    let (mut with, mut without, mut failed) = (Vec::new(), Vec::new(), 0usize);
    for t in tasks {
        match t.await.expect("create task") {
            (true, ms, Ok(spec)) => {
                let units = spec
                    .and_then(|s| s.containers[0].resources.clone())
                    .and_then(|r| r.limits)
                    .and_then(|l| l.get("nvidia.com/gpu.sliced.units").map(|q| q.0.clone()));
                assert_eq!(units.as_deref(), Some("400000"), "a hooked Pod is priced");
                with.push(ms);
            }
            (false, ms, Ok(_)) => without.push(ms),
            (_, _, Err(e)) => {
                failed += 1;
                eprintln!("create failed: {e}");
            }
        }
    }
    let cpu_after = cpu_seconds(pid);
    with.sort_by(f64::total_cmp);
    without.sort_by(f64::total_cmp);
    println!(
        "{} creates offered in {offered:.1?} ({:.0}/s), {failed} failed",
        total,
        total as f64 / offered.as_secs_f64()
    );
    let (p99_with, p99_without) = (percentile(&with, 0.99), percentile(&without, 0.99));
    let (p50_with, p50_without) = (median(with.clone()), median(without.clone()));
    println!(
        "create latency ms: through the webhooks p50 {p50_with:.2} p99 {p99_with:.2}; without p50 {p50_without:.2} p99 {p99_without:.2}"
    );
    let added = p99_with - p99_without;
    figures.push(Figure::new(
        format!("webhook p99 added per Pod create at {rate}/s"),
        format!("{added:.2} ms (p50 added {:.2} ms)", p50_with - p50_without),
        Some("<= 5 ms"),
        Some(added <= 5.0 && failed == 0),
    ));
    let reviews = with.len() * 2;
    let cpu = match (cpu_before, cpu_after) {
        (Some(b), Some(a)) if reviews > 0 => Some((a - b) * 1000.0 / reviews as f64),
        _ => None,
    };
    figures.push(Figure::new(
        "worker CPU time per review (mutate + validate counted apart)",
        cpu.map(|c| format!("{c:.3} ms")).unwrap_or_default(),
        None,
        cpu.map(|_| true),
    ));
    let metrics = tokio::task::block_in_place(|| worker.kubectl_ok(&["get", "--raw", "/metrics"]));
    let handler = handler_p99_ms(&metrics);
    figures.push(Figure::new(
        "the worker's own answer time per Pod review, p99 (histogram bound)",
        handler.map(|h| format!("<= {h} ms")).unwrap_or_default(),
        Some("<= 5 ms"),
        handler.map(|h| h <= 5.0),
    ));

    println!("\nsummary:");
    for f in &figures {
        println!("  {}", f.line());
    }
    drop(worker);
    drop(gw);
}
