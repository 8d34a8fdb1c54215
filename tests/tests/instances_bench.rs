//! The Instances benchmark (issue 38), `#[ignore]`d: not a pass/fail test. The real `worker`
//! against an embedded cluster with GPU nodes, the Kueue stand-in and one kubelet stand-in per
//! node (as in `instances.rs`):
//! - create-to-Ready of many Instances, and of that the time the worker adds: from the create
//!   acknowledged to its Pod seen, plus from the Pod seen `Running` to the Instance seen
//!   `Ready` (the stand-ins' queueing, binding and starting left out);
//! - `instances/metrics` latency for one Instance with the node cache warm, and for 100
//!   Instances asked at once;
//! - the worker's resident memory with many more (stopped) Instances.
//!
//! ```sh
//! cargo build && cargo test -p gpustack-tests --test instances_bench -- --ignored --nocapture
//! ```
//! Knobs: `GPUSTACK_BENCH_INSTANCE_NODES` (10), `GPUSTACK_BENCH_INSTANCES` (100),
//! `GPUSTACK_BENCH_STOPPED_INSTANCES` (10000). The issue's scale is 100 nodes and 1,000
//! Instances; `GPUSTACK_OPERATOR_BIN` names another (a release) binary;
//! `GPUSTACK_BENCH_KEEP_DIR` keeps the worker's log, its and the gateway's `/metrics` and each
//! Instance's timeline (`timeline.csv`) there.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use gpustack_api::{instance::Instance, instance_type::InstanceType};
use gpustack_tests::{
    bench::{Figure, env_usize, percentile, proc_status_mb},
    embedded::{GatewayProcess, kube_client},
    inventory::{H100, Machine, publish},
    kubelet_http::KubeletHttp,
    kubelet_pods::PodRunner,
    kueue::Kueue,
    worker::{WorkerProcess, eventually},
};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt,
    api::PostParams,
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;

const POOL: &str = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64";
const IMAGE: &str = "ubuntu:24.04";
/// Creates in flight at once.
const CONCURRENCY: usize = 16;

fn instance(name: &str, stop: bool) -> Instance {
    serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Instance",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": POOL, "image": IMAGE, "stop": stop,
            "command": ["sh", "-c", "echo up; exec sleep 3600"],
            "resources": {"acceleratorSlicedMemoryPercentage": 10},
            "volume": {"ephemeral": {"capacity": "1Gi"}}},
    }))
    .unwrap()
}

/// When each name was first seen meeting a condition.
type Seen = Arc<Mutex<HashMap<String, Instant>>>;

/// Follows the `K`s of namespace `default` from a thread, runtime and client of its own,
/// noting when each first meets each of `checks`; returns once the watch has listed. On the
/// test's runtime, beside the stand-ins of 100 nodes, what a watch saw reached the bench
/// seconds late at 1,000 Instances, and that lag counted as the worker's time.
async fn note<K, const N: usize>(
    kubeconfig: std::path::PathBuf,
    checks: [fn(&K) -> bool; N],
) -> [Seen; N]
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
{
    let seen: [Seen; N] = std::array::from_fn(|_| Seen::default());
    let noted = seen.clone();
    let (listed, is_listed) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async move {
            let api: Api<K> = Api::namespaced(kube_client(&kubeconfig).await, "default");
            let mut events = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            let mut listed = Some(listed);
            while let Some(event) = events.next().await {
                let o = match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                    Ok(watcher::Event::InitDone) => {
                        listed.take().map(|tx| tx.send(()));
                        continue;
                    }
                    _ => continue,
                };
                let at = Instant::now();
                for (check, seen) in checks.iter().zip(&noted) {
                    if check(&o) {
                        seen.lock().unwrap().entry(o.name_any()).or_insert(at);
                    }
                }
            }
        });
    });
    tokio::time::timeout(Duration::from_secs(60), is_listed)
        .await
        .expect("the watch lists within a minute")
        .expect("the watch lists");
    seen
}

/// Each Instance's moments in Unix milliseconds, a CSV row per name, to set beside the
/// worker's log when looking into a run.
fn timeline(names: &[String], columns: &[(&str, &HashMap<String, Instant>)]) -> String {
    let (now, wall) = (Instant::now(), std::time::SystemTime::now());
    let unix = |t: &Instant| {
        (wall - now.saturating_duration_since(*t))
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis().to_string())
            .unwrap_or_default()
    };
    let header: Vec<&str> = columns.iter().map(|(c, _)| *c).collect();
    let mut csv = format!("name,{}\n", header.join(","));
    for n in names {
        let row: Vec<String> = columns
            .iter()
            .map(|(_, at)| at.get(n).map(unix).unwrap_or_default())
            .collect();
        csv.push_str(&format!("{n},{}\n", row.join(",")));
    }
    csv
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// Creates `names` with at most [`CONCURRENCY`] in flight, each retried a few times on a
/// server error (a webhook call lost under load, as a client retries it); when each was
/// acknowledged.
/// The wait before re-sending a create the loaded API server answered with a 5xx.
const RETRY: gpustack_serving::backoff::Backoff = gpustack_serving::backoff::Backoff::new(
    Duration::from_millis(200),
    Duration::from_millis(1600),
);

async fn create_all(api: &Api<Instance>, names: &[String], stop: bool) -> HashMap<String, Instant> {
    futures::stream::iter(names.iter().cloned())
        .map(|n| async move {
            let mut tries = 0;
            loop {
                match api
                    .create(&PostParams::default(), &instance(&n, stop))
                    .await
                {
                    Ok(_) => break,
                    Err(kube::Error::Api(s)) if s.code >= 500 && tries < 5 => {
                        tries += 1;
                        tokio::time::sleep(RETRY.after_failures(tries)).await;
                    }
                    Err(e) => panic!("creating {n}: {e}"),
                }
            }
            (n, Instant::now())
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await
}

/// How long one `instances/metrics` took, and whether it measured the memory in use.
async fn metrics_ms(c: &kube::Client, name: &str) -> (f64, bool) {
    let path = format!("/apis/worker.gpustack.ai/v1/namespaces/default/instances/{name}/metrics");
    let started = Instant::now();
    let text = c
        .request_text(http::Request::get(path).body(Vec::new()).unwrap())
        .await
        .unwrap_or_else(|e| panic!("metrics of {name}: {e}"));
    let took = ms(started.elapsed());
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    (took, doc["memoryUsedMiB"].is_number())
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a benchmark: run with --ignored --nocapture"]
async fn instances_at_scale() {
    let nodes = env_usize("GPUSTACK_BENCH_INSTANCE_NODES", 10);
    let count = env_usize("GPUSTACK_BENCH_INSTANCES", 100);
    let stopped = env_usize("GPUSTACK_BENCH_STOPPED_INSTANCES", 10_000);
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    let w = WorkerProcess::start(&gw, &tmp.path().join("worker"), &["--disable-auths"], &[]);
    let c = kube_client(&gw.kubeconfig()).await;
    let mut kubelets = Vec::new();
    for i in 0..nodes {
        let name = format!("gpu-{i:03}");
        publish(&c, &Machine::gpu(&name, H100, 8)).await.unwrap();
        let runner = PodRunner::start(c.clone(), &name, &tmp.path().join(&name), &[IMAGE]);
        let http = KubeletHttp::start(&c, &runner).await;
        kubelets.push((runner, http));
    }
    let _kueue = Kueue::start(c.clone());
    let its: Api<InstanceType> = Api::all(c.clone());
    let slices = (nodes * 8 * 10) as i64;
    eventually("the pool's slices on every node", &w, || async {
        let it = its.get(POOL).await.map_err(|e| e.to_string())?;
        let s = it.status.clone().unwrap_or_default();
        (s.entrance.is_some()
            && s.accelerator_sliced
                .as_ref()
                .is_some_and(|v| v.capacity * 10 >= slices))
        .then_some(())
        .ok_or_else(|| format!("{s:?}"))
    })
    .await;

    let api: Api<Instance> = Api::namespaced(c.clone(), "default");
    let [pod_seen, pod_bound, pod_running] = note::<Pod, 3>(
        gw.kubeconfig(),
        [
            |_| true,
            |p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_some_and(|n| !n.is_empty())
            },
            |p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"),
        ],
    )
    .await;
    let [listed, ready, idle] = note::<Instance, 3>(
        gw.kubeconfig(),
        [
            |_| true,
            |i| i.status.as_ref().map(|s| s.phase()) == Some("Ready"),
            |i| i.status.as_ref().map(|s| s.phase()) == Some("Stopped"),
        ],
    )
    .await;

    // Create-to-Ready.
    let names: Vec<String> = (0..count).map(|i| format!("run-{i:04}")).collect();
    let started = Instant::now();
    let acked = create_all(&api, &names, false).await;
    let deadline = Duration::from_secs(60 + count as u64);
    let all_ready = gpustack_tests::wait::poll(deadline, || async {
        (ready.lock().unwrap().len() >= count).then_some(())
    })
    .await;
    let wall = started.elapsed();
    let (mut added, mut whole) = (Vec::new(), Vec::new());
    // The worker's two parts apart, and the stand-ins' (queueing and binding, then starting).
    let (mut to_pod, mut to_ready, mut to_bound, mut to_run) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // How late this process's watches show a change: a create acknowledged to the Instance
    // seen (the cluster's fan-out and this process's load, counted in the worker's part).
    let lag = sorted(
        names
            .iter()
            .filter_map(|n| {
                let seen = *listed.lock().unwrap().get(n)?;
                Some(ms(seen.saturating_duration_since(*acked.get(n)?)))
            })
            .collect(),
    );
    {
        let (seen, bound, running, ready) = (
            pod_seen.lock().unwrap(),
            pod_bound.lock().unwrap(),
            pod_running.lock().unwrap(),
            ready.lock().unwrap(),
        );
        for n in &names {
            let (Some(a), Some(p), Some(r), Some(d)) =
                (acked.get(n), seen.get(n), running.get(n), ready.get(n))
            else {
                continue;
            };
            let (pod, up) = (
                ms(p.saturating_duration_since(*a)),
                ms(d.saturating_duration_since(*r)),
            );
            to_pod.push(pod);
            to_ready.push(up);
            added.push(pod + up);
            whole.push(ms(d.saturating_duration_since(*a)));
            if let Some(b) = bound.get(n) {
                to_bound.push(ms(b.saturating_duration_since(*p)));
                to_run.push(ms(r.saturating_duration_since(*b)));
            }
        }
    }
    let (added, whole) = (sorted(added), sorted(whole));
    let mut figures = vec![Figure::new(
        format!("{count} Instances over {nodes} nodes Ready"),
        format!("{} in {:.1} s", whole.len(), wall.as_secs_f64()),
        None,
        Some(all_ready.is_some()),
    )];
    let p99 = percentile(&added, 0.99);
    figures.push(Figure::new(
        "create-to-Ready, worker-added p50/p99",
        format!("{:.0} / {:.0} ms", percentile(&added, 0.5), p99),
        Some("p99 <= 2,000 ms"),
        Some(p99 <= 2000.0),
    ));
    for (what, v) in [
        ("worker: create acknowledged to Pod seen", to_pod),
        ("worker: Pod seen Running to Instance seen Ready", to_ready),
        ("watch lag: create acknowledged to Instance seen", lag),
        ("stand-ins: Pod seen to Pod seen bound (Kueue)", to_bound),
        (
            "stand-ins: Pod seen bound to Pod seen Running (kubelet)",
            to_run,
        ),
    ] {
        let v = sorted(v);
        figures.push(Figure::new(
            format!("  {what}, p50/p99"),
            format!(
                "{:.0} / {:.0} ms",
                percentile(&v, 0.5),
                percentile(&v, 0.99)
            ),
            None,
            Some(true),
        ));
    }
    figures.push(Figure::new(
        "create-to-Ready, whole p50/p99 (stand-ins included)",
        format!(
            "{:.0} / {:.0} ms",
            percentile(&whole, 0.5),
            percentile(&whole, 0.99)
        ),
        None,
        Some(true),
    ));

    // instances/metrics, asked of the worker itself.
    let direct = gpustack_tests::bench::client(&w.kubeconfig()).await;
    metrics_ms(&direct, &names[0]).await;
    let mut one = Vec::new();
    for _ in 0..200 {
        one.push(metrics_ms(&direct, &names[0]).await.0);
    }
    let one = sorted(one);
    let p99 = percentile(&one, 0.99);
    figures.push(Figure::new(
        "instances/metrics, one Instance, node cache warm, p50/p99",
        format!("{:.1} / {:.1} ms", percentile(&one, 0.5), p99),
        Some("p99 <= 50 ms"),
        Some(p99 <= 50.0),
    ));
    let hundred: Vec<String> = names.iter().take(100).cloned().collect();
    let started = Instant::now();
    let answers = futures::future::join_all(hundred.iter().map(|n| metrics_ms(&direct, n))).await;
    let measured = answers.iter().filter(|(_, m)| *m).count();
    let parallel = sorted(answers.into_iter().map(|(t, _)| t).collect());
    figures.push(Figure::new(
        format!(
            "instances/metrics, {} Instances at once, p50/p99 (all)",
            hundred.len()
        ),
        format!(
            "{:.1} / {:.1} ms ({:.0} ms; {measured} with usage measured)",
            percentile(&parallel, 0.5),
            percentile(&parallel, 0.99),
            ms(started.elapsed())
        ),
        None,
        Some(true),
    ));

    // Memory with many more Instances (stopped: no Pods), once the worker has settled each.
    let more: Vec<String> = (0..stopped).map(|i| format!("idle-{i:05}")).collect();
    let started = Instant::now();
    create_all(&api, &more, true).await;
    let settled = gpustack_tests::wait::poll(Duration::from_secs(900), || async {
        (idle.lock().unwrap().len() >= stopped).then_some(())
    })
    .await;
    let pid = w.pid().expect("the worker runs");
    let rss = proc_status_mb(pid, "VmRSS");
    figures.push(Figure::new(
        format!(
            "worker memory with {} Instances ({} stopped, settled in {:.0} s)",
            count + stopped,
            stopped,
            started.elapsed().as_secs_f64()
        ),
        format!(
            "{rss:.0} MB resident, peak {:.0} MB",
            proc_status_mb(pid, "VmHWM")
        ),
        Some("<= 150 MB"),
        settled.map(|_| rss <= 150.0),
    ));
    // The worker's log and its reconcile series, kept where asked (for looking into a run).
    if let Ok(dir) = std::env::var("GPUSTACK_BENCH_KEEP_DIR") {
        let dir = std::path::Path::new(&dir);
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("worker.log"), w.log()).unwrap();
        let csv = timeline(
            &names,
            &[
                ("acked", &acked),
                ("pod_seen", &pod_seen.lock().unwrap()),
                ("bound", &pod_bound.lock().unwrap()),
                ("running", &pod_running.lock().unwrap()),
                ("ready", &ready.lock().unwrap()),
            ],
        );
        std::fs::write(dir.join("timeline.csv"), csv).unwrap();
        let scrape = direct
            .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
            .await
            .unwrap_or_else(|e| e.to_string());
        std::fs::write(dir.join("worker-metrics.txt"), scrape).unwrap();
        // The embedded cluster's side (its admin's, over the socket): request latencies and
        // group commits.
        let scrape = gpustack_tests::hub::http_over_unix(&gw.socket(), "GET", "/metrics", None)
            .map(|(_, text)| text)
            .unwrap_or_else(|e| e.to_string());
        std::fs::write(dir.join("gateway-metrics.txt"), scrape).unwrap();
    }
    println!("\nsummary:");
    for f in &figures {
        println!("  {}", f.line());
    }
    drop(kubelets);
}
