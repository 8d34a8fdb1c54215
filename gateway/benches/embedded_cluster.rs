//! Benchmark of the embedded cluster (issue 3), not a pass/fail test:
//!
//! `cargo bench -p gpustack-gateway --bench embedded_cluster` (set `GPUSTACK_BENCH_OBJECTS`,
//! default 10000, and `GPUSTACK_BENCH_RSS_OBJECTS`, default 100000, to scale it).
//!
//! 1. create N `Devices` (~2 KB each) through the API, one at a time (and from 16 concurrent
//!    clients), vs inserting the same rows with the same durability (one `synchronous=FULL` WAL
//!    transaction each) through sqlx;
//! 2. list the N objects through the API (median of 11);
//! 3. watch delivery latency, from a write's response to the event at a watcher, at 500 writes/s;
//! 4. resident memory of the process with M stored objects.

use std::{
    collections::HashMap,
    str::FromStr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt};
use gpustack_api::devices::Devices;
use gpustack_gateway::{
    server::{Gateway, GatewayOptions},
    store::{ObjectKey, Precondition, WriteOp},
};
use kube::{
    Api, Client, Config, ResourceExt,
    api::{ListParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
    runtime::watcher::{self, Event},
};
use serde_json::{Value, json};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A Devices object of about 2 KB.
fn device(name: &str) -> Value {
    let accelerators: Vec<Value> = (0..16)
        .map(|i| json!({"id": format!("GPU-{name}-{i:02}-0123456789abcdef"), "index": i, "memoryMib": 81559, "coresPercentage": 100}))
        .collect();
    json!({
        "apiVersion": "worker.gpustack.ai/v1alpha1",
        "kind": "Devices",
        // The payload is an annotation: the CRD's schema would prune unknown spec fields.
        "metadata": {
            "name": name,
            "labels": {"bench": "yes", "node": name},
            "annotations": {"bench.gpustack.ai/accelerators": Value::Array(accelerators).to_string()},
        },
        "spec": {},
    })
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

async fn client(gw: &Gateway) -> Client {
    let kc = Kubeconfig::read_from(gw.kubeconfig_path("bench")).unwrap();
    Client::try_from(
        Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap(),
    )
    .unwrap()
}

async fn direct_sqlx_inserts(dir: &std::path::Path, bodies: &[Value]) -> Duration {
    let options =
        SqliteConnectOptions::from_str(&format!("sqlite://{}", dir.join("direct.db").display()))
            .unwrap()
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .unwrap();
    sqlx::query("CREATE TABLE objects (cluster TEXT, grp TEXT, resource TEXT, namespace TEXT, name TEXT, rv INTEGER, body TEXT, PRIMARY KEY (cluster, grp, resource, namespace, name)) WITHOUT ROWID")
        .execute(&pool)
        .await
        .unwrap();
    let start = Instant::now();
    for (i, body) in bodies.iter().enumerate() {
        let mut tx = pool.begin().await.unwrap();
        sqlx::query(
            "INSERT INTO objects VALUES ('bench', 'worker.gpustack.ai', 'devices', '', ?, ?, ?)",
        )
        .bind(body["metadata"]["name"].as_str().unwrap())
        .bind(i as i64)
        .bind(body.to_string())
        .execute(&mut *tx)
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }
    let elapsed = start.elapsed();
    pool.close().await;
    elapsed
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let n = env_usize("GPUSTACK_BENCH_OBJECTS", 10_000);
    let m = env_usize("GPUSTACK_BENCH_RSS_OBJECTS", 100_000);
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(GatewayOptions::new(
        vec!["bench".into()],
        dir.path().join("data"),
        "127.0.0.1:0".parse().unwrap(),
    ))
    .await
    .unwrap();
    let client = client(&gw).await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    for crd in gpustack_api::crds::all() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let api: Api<Devices> = Api::all(client.clone());
    let raw: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::erase::<Devices>(&()),
    );
    println!(
        "data dir: {} (object size {} bytes)",
        dir.path().display(),
        device("node-00000").to_string().len()
    );
    println!("rss after start: {:.0} MiB", rss_mib());

    // 1. Creates through the API vs direct inserts.
    let bodies: Vec<Value> = (0..n).map(|i| device(&format!("node-{i:05}"))).collect();
    let start = Instant::now();
    for b in &bodies {
        let obj: kube::api::DynamicObject = serde_json::from_value(b.clone()).unwrap();
        raw.create(&PostParams::default(), &obj).await.unwrap();
    }
    let api_time = start.elapsed();
    let direct_time = direct_sqlx_inserts(dir.path(), &bodies).await;
    drop(bodies);
    let api_rate = n as f64 / api_time.as_secs_f64();
    let direct_rate = n as f64 / direct_time.as_secs_f64();
    println!(
        "create {n}: API {api_rate:.0}/s ({api_time:.2?}), direct sqlx {direct_rate:.0}/s ({direct_time:.2?}), ratio {:.2} (target >= 0.5)",
        api_rate / direct_rate
    );

    // 2. Listing.
    let mut times = Vec::new();
    for _ in 0..11 {
        let start = Instant::now();
        let list = api.list(&ListParams::default()).await.unwrap();
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(list.items.len(), n);
    }
    times.sort_by(f64::total_cmp);
    let mut raw_times = Vec::new();
    for _ in 0..11 {
        let start = Instant::now();
        let req = http::Request::get("/apis/worker.gpustack.ai/v1alpha1/devices")
            .body(Vec::new())
            .unwrap();
        let text = client.request_text(req).await.unwrap();
        raw_times.push(start.elapsed().as_secs_f64() * 1000.0);
        assert!(text.len() > n * 1000);
    }
    raw_times.sort_by(f64::total_cmp);
    println!(
        "list {n} as text (no client-side decoding): median {:.0} ms",
        percentile(&raw_times, 0.5)
    );
    println!(
        "list {n} typed (kube Api::list, decoding included): median {:.0} ms (target <= 300 ms), min {:.0} ms, max {:.0} ms",
        percentile(&times, 0.5),
        times[0],
        times[times.len() - 1]
    );

    // 1b. Creates through the API from 16 concurrent clients (group commit shares fsyncs).
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..16 {
        let raw = raw.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..n).step_by(16) {
                let obj: kube::api::DynamicObject =
                    serde_json::from_value(device(&format!("conc-{i:05}"))).unwrap();
                raw.create(&PostParams::default(), &obj).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let conc_rate = n as f64 / start.elapsed().as_secs_f64();
    println!(
        "create {n} from 16 concurrent clients: API {conc_rate:.0}/s, ratio to sequential direct sqlx {:.2}",
        conc_rate / direct_rate
    );

    // 3. Watch latency at 500 writes/s for 5 s.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    let seen: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let seen_w = seen.clone();
    let mut stream = watcher::watcher(cms.clone(), watcher::Config::default()).boxed();
    loop {
        if let Event::InitDone = stream.try_next().await.unwrap().unwrap() {
            break;
        }
    }
    let watching = tokio::spawn(async move {
        while let Some(Ok(ev)) = stream.next().await {
            if let Event::Apply(o) = ev {
                seen_w.lock().unwrap().insert(o.name_any(), Instant::now());
            }
        }
    });
    let writes = 2500;
    let mut acked = Vec::with_capacity(writes);
    let mut tick = tokio::time::interval(Duration::from_millis(2));
    let start = Instant::now();
    for i in 0..writes {
        tick.tick().await;
        let cm = k8s_openapi::api::core::v1::ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("w{i}")),
                ..Default::default()
            },
            ..Default::default()
        };
        cms.create(&PostParams::default(), &cm).await.unwrap();
        acked.push((format!("w{i}"), Instant::now()));
    }
    let achieved = writes as f64 / start.elapsed().as_secs_f64();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.lock().unwrap().len() < writes && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    watching.abort();
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let mut lat: Vec<f64> = acked
        .iter()
        .filter_map(|(name, t)| {
            seen.get(name)
                .map(|s| s.saturating_duration_since(*t).as_secs_f64() * 1000.0)
        })
        .collect();
    lat.sort_by(f64::total_cmp);
    println!(
        "watch: {} of {writes} writes seen at {achieved:.0} writes/s; latency after the response p50 {:.2} ms, p99 {:.2} ms (target <= 20 ms), max {:.2} ms",
        lat.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or(f64::NAN)
    );

    // 4. Resident memory with M stored objects (the rest written straight through the store).
    let store = gw.store().clone();
    for i in (2 * n)..m {
        let key = ObjectKey {
            cluster: "bench".into(),
            group: "worker.gpustack.ai".into(),
            resource: "devices".into(),
            namespace: String::new(),
            name: format!("node-{i:06}"),
        };
        store
            .commit(&key, Precondition::Absent, WriteOp::Put(device(&key.name)))
            .await
            .unwrap();
    }
    println!(
        "rss with {m} stored objects (server and this benchmark's client in one process): {:.0} MiB (target <= 150 MB)",
        rss_mib()
    );
    gw.shutdown().await;
}
