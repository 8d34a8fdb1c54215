//! Benchmark of the gateway under a mixed load (issue 10), not a pass/fail test: one real
//! `worker-gateway` hosting two embedded clusters, `busy` and `quiet`. Reproduce with
//!
//! ```text
//! cargo build --release --bin gpustack-operator && cargo bench -p gpustack-tests --bench gateway_mixed_load
//! ```
//!
//! (`GPUSTACK_BENCH_WRITE_RATE`, default 500 writes/s, `GPUSTACK_BENCH_SECONDS`, default 60,
//! `GPUSTACK_BENCH_WATCHERS`, default 50, `GPUSTACK_BENCH_SLOW_READERS`, default 20,
//! `GPUSTACK_BENCH_IDLE_CONNECTIONS`, default 100, `GPUSTACK_BENCH_PROBE_RATE`, default 20
//! requests/s, scale it).
//!
//! 1. Baseline: the probe alone for 10 s. The probe is another cluster's client (`quiet`,
//!    its own token): a get, a list of 50 and a create in turn at a fixed rate, each request
//!    started on its tick (a slow answer does not delay the next) and timed to its response.
//! 2. Mixed load on `busy`, held for the run while the probe goes on:
//!    - ConfigMap creates (~1 KB) at a fixed rate over kube-rs, each started on its tick;
//!    - watchers of `busy`'s ConfigMaps, each reading every event off its stream;
//!    - slow readers over raw TLS: each asks for the whole ConfigMap list (megabytes, seeded
//!      before) and reads 1 KiB every 100 ms, so its answer stays stuck in the socket;
//!    - idle TLS connections: handshake, one request, then silence (reopened if closed).
//!
//!    Figures: the probe's p99 under load against the 50 ms target and as a ratio to the
//!    baseline; the writes acknowledged per second; every watcher's share of the acknowledged
//!    writes it saw; idle connections the gateway closed; its peak resident memory; and, after
//!    the run, every acknowledged create present in a fresh list (nothing lost).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::{AsyncBufReadExt, StreamExt};
use gpustack_tests::{
    bench::{self, Figure, env_usize, percentile, proc_status_mb},
    embedded::{GatewayProcess, free_port},
    wait::poll,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use tokio_rustls::{TlsConnector, client::TlsStream};

/// How long the probe runs alone before the load starts.
const BASELINE: Duration = Duration::from_secs(10);
/// ConfigMaps in `busy` before the run: a list of them is several megabytes.
const SEEDED: usize = 2_000;

fn config_map(name: &str, value_len: usize) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"bench": "mixed"}},
        "data": {"payload": "x".repeat(value_len)},
    }))
    .expect("a ConfigMap")
}

/// What raw TLS clients need: the address, the cluster's path prefix, its token, and a
/// connector trusting the gateway's CA.
#[derive(Clone)]
struct RawTarget {
    port: u16,
    prefix: String,
    token: String,
    tls: TlsConnector,
}

impl RawTarget {
    fn new(gw: &GatewayProcess, kubeconfig: &std::path::Path) -> Self {
        let text = std::fs::read_to_string(kubeconfig).expect("kubeconfig");
        let doc: serde_json::Value = serde_yaml_ng::from_str(&text).expect("kubeconfig YAML");
        let server = doc["clusters"][0]["cluster"]["server"].as_str().unwrap();
        let prefix = server
            .splitn(4, '/')
            .nth(3)
            .map(|p| format!("/{p}"))
            .unwrap_or_default();
        let token = doc["users"][0]["user"]["token"]
            .as_str()
            .unwrap()
            .to_owned();
        let config = gpustack_tests::embedded::trusting_gateway_ca(&gw.data_dir);
        RawTarget {
            port: gw.port,
            prefix,
            token,
            tls: TlsConnector::from(Arc::new(config)),
        }
    }

    async fn connect(&self) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(("127.0.0.1", self.port)).await?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        self.tls.connect(name, tcp).await
    }

    fn get(&self, path: &str) -> String {
        format!(
            "GET {}{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n",
            self.prefix, self.token
        )
    }
}

/// Reads `s` until the end of an HTTP head; false if the connection closed first.
async fn read_head(s: &mut TlsStream<TcpStream>) -> bool {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    true
}

/// How often a slow reader takes 1 KiB: the pace that defines it, not a wait.
const SLOW_READ_PACE: Duration = Duration::from_millis(100);
/// How often a closed connection is reopened.
const RECONNECT_PACE: Duration = Duration::from_millis(100);

/// Set once when the run ends; every load task returns on it.
type Stop = tokio::sync::watch::Receiver<bool>;

async fn stopped(stop: &mut Stop) {
    let _ = stop.wait_for(|s| *s).await;
}

/// A slow reader: asks for the whole list and reads 1 KiB at [`SLOW_READ_PACE`] until
/// `stop`; asks again if the answer ever ends. Counts the bytes it got.
async fn slow_reader(target: RawTarget, mut stop: Stop, bytes: Arc<AtomicU64>) {
    let mut pace = tokio::time::interval(SLOW_READ_PACE);
    let mut buf = [0u8; 1024];
    loop {
        tokio::select! {
            _ = pace.tick() => {}
            _ = stopped(&mut stop) => return,
        }
        let Ok(mut s) = target.connect().await else {
            continue;
        };
        let req = target.get("/api/v1/namespaces/default/configmaps");
        if s.write_all(req.as_bytes()).await.is_err() {
            continue;
        }
        loop {
            tokio::select! {
                r = s.read(&mut buf) => match r {
                    Ok(0) | Err(_) => break,
                    Ok(n) => bytes.fetch_add(n as u64, Ordering::Relaxed),
                },
                _ = stopped(&mut stop) => return,
            };
            tokio::select! {
                _ = pace.tick() => {}
                _ = stopped(&mut stop) => return,
            }
        }
    }
}

/// An idle keep-alive connection: one request, then silence until `stop`, reopened (and
/// counted) whenever the gateway closes it.
async fn idle_connection(target: RawTarget, mut stop: Stop, closed: Arc<AtomicU64>) {
    let mut pace = tokio::time::interval(RECONNECT_PACE);
    let mut buf = [0u8; 4096];
    for opened in 0u64.. {
        if opened > 0 {
            closed.fetch_add(1, Ordering::Relaxed);
        }
        tokio::select! {
            _ = pace.tick() => {}
            _ = stopped(&mut stop) => return,
        }
        let Ok(mut s) = target.connect().await else {
            continue;
        };
        let req = target.get("/version");
        if s.write_all(req.as_bytes()).await.is_err() || !read_head(&mut s).await {
            continue;
        }
        // The body is small and already read with the head, or it arrives now; afterwards the
        // connection only ends when the gateway closes it.
        loop {
            tokio::select! {
                r = s.read(&mut buf) => if matches!(r, Ok(0) | Err(_)) { break },
                _ = stopped(&mut stop) => return,
            }
        }
    }
}

/// A watcher of `busy`'s ConfigMaps from `rv`: counts the events (lines) it reads into
/// `seen` until `stop`; returns whether its stream ended early.
async fn watcher(client: Client, rv: String, seen: Arc<AtomicU64>, mut stop: Stop) -> bool {
    let uri = format!(
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=3600"
    );
    let req = http::Request::get(uri).body(Vec::new()).unwrap();
    let Ok(stream) = client.request_stream(req).await else {
        return true;
    };
    let mut lines = stream.lines();
    loop {
        tokio::select! {
            line = lines.next() => match line {
                Some(Ok(_)) => seen.fetch_add(1, Ordering::Relaxed),
                _ => return !*stop.borrow(),
            },
            _ = stopped(&mut stop) => return false,
        };
    }
}

/// Runs the probe against `quiet` for `length`; each request's latency in ms, sorted, and
/// how many failed.
async fn probe(api: Api<ConfigMap>, rate: usize, length: Duration, tag: &str) -> (Vec<f64>, u64) {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let end = Instant::now() + length;
    let mut tasks = Vec::new();
    let mut i = 0usize;
    while Instant::now() < end {
        tick.tick().await;
        let api = api.clone();
        let name = format!("{tag}-{i}");
        let kind = i % 3;
        i += 1;
        tasks.push(tokio::spawn(async move {
            let started = Instant::now();
            let ok = match kind {
                0 => api.get(&format!("seed-{}", i % 100)).await.is_ok(),
                1 => api.list(&ListParams::default().limit(50)).await.is_ok(),
                _ => api
                    .create(&PostParams::default(), &config_map(&name, 200))
                    .await
                    .is_ok(),
            };
            (started.elapsed().as_secs_f64() * 1000.0, ok)
        }));
    }
    let mut lat = Vec::new();
    let mut failed = 0;
    for t in tasks {
        let (ms, ok) = t.await.unwrap();
        lat.push(ms);
        failed += u64::from(!ok);
    }
    lat.sort_by(f64::total_cmp);
    (lat, failed)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rate = env_usize("GPUSTACK_BENCH_WRITE_RATE", 500);
    let seconds = env_usize("GPUSTACK_BENCH_SECONDS", 60);
    let watchers = env_usize("GPUSTACK_BENCH_WATCHERS", 50);
    let slow_readers = env_usize("GPUSTACK_BENCH_SLOW_READERS", 20);
    let idle = env_usize("GPUSTACK_BENCH_IDLE_CONNECTIONS", 100);
    let probe_rate = env_usize("GPUSTACK_BENCH_PROBE_RATE", 20);
    let tmp = tempfile::tempdir().unwrap();
    let mut figures = Vec::new();

    let gw = tokio::task::block_in_place(|| {
        GatewayProcess::start_with(
            &tmp.path().join("gw"),
            "busy",
            free_port(),
            &["--embedded-cluster=busy", "--embedded-cluster=quiet"],
        )
    });
    let quiet_kubeconfig = gw.data_dir.join("quiet.kubeconfig");
    let busy = bench::client(&gw.kubeconfig()).await;
    let quiet = bench::client(&quiet_kubeconfig).await;
    let busy_cms: Api<ConfigMap> = Api::namespaced(busy.clone(), "default");
    let quiet_cms: Api<ConfigMap> = Api::namespaced(quiet.clone(), "default");

    // Seeds: a list of `busy` far larger than socket buffers; objects for the probe's gets.
    let seed = |api: Api<ConfigMap>, n: usize, len: usize| async move {
        futures::stream::iter(0..n)
            .map(|i| {
                let api = api.clone();
                async move {
                    api.create(
                        &PostParams::default(),
                        &config_map(&format!("seed-{i}"), len),
                    )
                    .await
                    .expect("seeding")
                }
            })
            .buffer_unordered(16)
            .collect::<Vec<_>>()
            .await;
    };
    seed(busy_cms.clone(), SEEDED, 2_000).await;
    seed(quiet_cms.clone(), 100, 200).await;

    let (base, base_failed) = probe(quiet_cms.clone(), probe_rate, BASELINE, "base").await;
    let base_p99 = percentile(&base, 0.99);
    figures.push(Figure::new(
        "probe alone, p50 / p99",
        format!(
            "{:.2} / {:.2} ms over {} requests, {base_failed} failed",
            percentile(&base, 0.5),
            base_p99,
            base.len()
        ),
        None,
        Some(base_failed == 0),
    ));

    // The load.
    let (stop_all, stop) = tokio::sync::watch::channel(false);
    // Watchers stop apart from the rest: once they have read every acknowledged write.
    let (stop_watchers, stop_watching) = tokio::sync::watch::channel(false);
    let rv = busy_cms
        .list_metadata(&ListParams::default().limit(1))
        .await
        .expect("a list")
        .metadata
        .resource_version
        .unwrap_or_default();
    let watch_tasks: Vec<_> = (0..watchers)
        .map(|_| {
            let seen = Arc::new(AtomicU64::new(0));
            let task = watcher(
                busy.clone(),
                rv.clone(),
                seen.clone(),
                stop_watching.clone(),
            );
            (seen, tokio::spawn(task))
        })
        .collect();
    let raw = RawTarget::new(&gw, &gw.kubeconfig());
    let slow_bytes = Arc::new(AtomicU64::new(0));
    let slow_tasks: Vec<_> = (0..slow_readers)
        .map(|_| tokio::spawn(slow_reader(raw.clone(), stop.clone(), slow_bytes.clone())))
        .collect();
    let idle_closed = Arc::new(AtomicU64::new(0));
    let idle_tasks: Vec<_> = (0..idle)
        .map(|_| {
            tokio::spawn(idle_connection(
                raw.clone(),
                stop.clone(),
                idle_closed.clone(),
            ))
        })
        .collect();
    // Every slow reader has its answer flowing before the timed part starts.
    let started = poll(Duration::from_secs(30), || {
        let got = slow_bytes.load(Ordering::Relaxed);
        async move { (got >= (slow_readers as u64) * 1024).then_some(()) }
    })
    .await;
    assert!(started.is_some(), "the slow readers never got an answer");

    let acked = Arc::new(AtomicU64::new(0));
    let write_failed = Arc::new(AtomicU64::new(0));
    let writer = {
        let (api, stop, acked, failed) = (
            busy_cms.clone(),
            stop.clone(),
            acked.clone(),
            write_failed.clone(),
        );
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut tasks = Vec::new();
            let mut i = 0usize;
            while !*stop.borrow() {
                tick.tick().await;
                let (api, acked, failed) = (api.clone(), acked.clone(), failed.clone());
                let name = format!("load-{i}");
                i += 1;
                tasks.push(tokio::spawn(async move {
                    match api
                        .create(&PostParams::default(), &config_map(&name, 1_000))
                        .await
                    {
                        Ok(_) => acked.fetch_add(1, Ordering::Relaxed),
                        Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }));
            }
            futures::future::join_all(tasks).await;
        })
    };

    let run = Duration::from_secs(seconds as u64);
    let (loaded, loaded_failed) = probe(quiet_cms.clone(), probe_rate, run, "load").await;
    stop_all.send_replace(true);
    writer.await.unwrap();
    let acked = acked.load(Ordering::Relaxed);
    let write_failed = write_failed.load(Ordering::Relaxed);

    let p99 = percentile(&loaded, 0.99);
    figures.push(Figure::new(
        format!(
            "another cluster's requests under load ({rate} writes/s, {watchers} watchers, {slow_readers} slow readers, {idle} idle TLS connections, {seconds} s), p50 / p99"
        ),
        format!(
            "{:.2} / {p99:.2} ms over {} requests ({:.2}x the probe alone), {loaded_failed} failed",
            percentile(&loaded, 0.5),
            loaded.len(),
            p99 / base_p99
        ),
        Some("p99 < 50 ms"),
        Some(p99 < 50.0 && loaded_failed == 0),
    ));
    figures.push(Figure::new(
        "writes acknowledged",
        format!(
            "{acked} ({:.0}/s of {rate}/s asked), {write_failed} failed",
            acked as f64 / seconds as f64
        ),
        None,
        Some(write_failed == 0),
    ));

    // Writes acknowledged just before the end may still be on their way to a watcher.
    let counts = || -> Vec<u64> {
        watch_tasks
            .iter()
            .map(|(seen, _)| seen.load(Ordering::Relaxed))
            .collect()
    };
    poll(Duration::from_secs(10), || {
        let caught_up = counts().iter().all(|n| *n >= acked);
        async move { caught_up.then_some(()) }
    })
    .await;
    let seen = counts();
    stop_watchers.send_replace(true);
    let mut ended_early = 0;
    for (_, t) in watch_tasks {
        ended_early += usize::from(t.await.unwrap());
    }
    let least = seen.iter().copied().min().unwrap_or(0);
    figures.push(Figure::new(
        "events read by the slowest watcher / writes acknowledged",
        format!(
            "{least} / {acked} ({:.3}), {ended_early} of {watchers} streams ended early",
            least as f64 / acked.max(1) as f64
        ),
        None,
        Some(ended_early == 0),
    ));
    for t in slow_tasks.into_iter().chain(idle_tasks) {
        t.await.unwrap();
    }
    figures.push(Figure::new(
        "idle TLS connections the gateway closed during the run",
        idle_closed.load(Ordering::Relaxed).to_string(),
        None,
        Some(true),
    ));
    let pid = gw.pid().expect("the gateway runs");
    figures.push(Figure::new(
        "gateway peak resident memory",
        format!("{:.0} MB", proc_status_mb(pid, "VmHWM")),
        None,
        Some(true),
    ));

    // Nothing acknowledged is lost: every created name is in a fresh list.
    let names: std::collections::HashSet<String> = busy_cms
        .list_metadata(&ListParams::default())
        .await
        .expect("the final list")
        .items
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .filter(|n| n.starts_with("load-"))
        .collect();
    figures.push(Figure::new(
        "acknowledged creates in the final list",
        format!("{} of {acked}", names.len()),
        None,
        Some(names.len() as u64 >= acked),
    ));

    println!("\nsummary:");
    for f in &figures {
        println!("  {}", f.line());
    }
}
