//! Benchmark of the embedded cluster (issue 3), not a pass/fail test. Reproduce with
//!
//! ```text
//! cargo bench -p gpustack-apiserver --bench embedded_cluster
//! ```
//!
//! (`GPUSTACK_BENCH_OBJECTS`, default 10000, and `GPUSTACK_BENCH_RSS_OBJECTS`, default 100000,
//! scale it; `GPUSTACK_BENCH_RSS_OBJECTS=0` leaves the memory figure out, and with it the release
//! build; `GPUSTACK_BENCH_WATCH_RATE`, default 2000, is the watch figure's write rate). The
//! memory figure runs `target/release/gpustack-operator`, which the bench first
//! brings up to date with `cargo build --release --bin gpustack-operator` (and stops, exit 1, if
//! that fails), so that it never measures a stale build; `GPUSTACK_OPERATOR_BIN` names another
//! binary instead, measured as it is.
//!
//! 1. create N `Devices` (~2 KB each) through the API, one at a time, vs inserting the same rows
//!    with the same durability (one `synchronous=FULL` WAL transaction each) through sqlx; the
//!    two alternate in rounds, so that a busy machine slows both alike (and, for information,
//!    through the store alone in the same rounds, a request's round trip without a write, and
//!    creates from 16 concurrent clients);
//! 2. list the N objects through the API (median of 11);
//! 3. watch delivery latency, from a write's response to the event at a watcher, at 2,000
//!    writes/s (each write started on its schedule, whether or not the one before answered,
//!    with at most 250 in flight);
//! 4. resident memory of the gateway server alone: the real `worker-gateway` binary as its own
//!    process, loaded with M objects through its API, read from `/proc` after a full list.
//!
//! Each figure is printed against its target, then once more in a closing summary.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    str::FromStr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt};
use gpustack_api::devices::Devices;
use gpustack_apiserver::{
    server::{ApiServer, ServerOptions},
    store::{ObjectKey, Precondition, Store, WriteOp},
};
use gpustack_tests::{
    bench::{Figure, device, env_usize, latencies_ms, percentile, proc_status_mb},
    wait::{poll, until},
};
use kube::{
    Api, Client, Config, ResourceExt,
    api::{ListParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
    runtime::watcher::{self, Event},
};
use serde_json::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

async fn client(gw: &ApiServer) -> Client {
    let kc = Kubeconfig::read_from(gw.kubeconfig_path("bench")).unwrap();
    Client::try_from(
        Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap(),
    )
    .unwrap()
}

/// The limit: the same rows inserted through sqlx into a bare table, one durable
/// (`synchronous=FULL`, WAL) transaction each.
async fn direct_pool(dir: &Path) -> sqlx::SqlitePool {
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
    pool
}

async fn direct_sqlx_inserts(
    pool: &sqlx::SqlitePool,
    first_rv: usize,
    bodies: &[Value],
) -> Duration {
    let start = Instant::now();
    for (i, body) in bodies.iter().enumerate() {
        let mut tx = pool.begin().await.unwrap();
        sqlx::query(
            "INSERT INTO objects VALUES ('bench', 'worker.gpustack.ai', 'devices', '', ?, ?, ?)",
        )
        .bind(body["metadata"]["name"].as_str().unwrap())
        .bind((first_rv + i) as i64)
        .bind(body.to_string())
        .execute(&mut *tx)
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }
    start.elapsed()
}

/// The same creates through the store alone (its writer task, the one create statement, the
/// commit), without HTTP, TLS or the API's pipeline: what the API adds is the rest.
async fn store_creates(store: &Store, bodies: &[Value]) -> Duration {
    let start = Instant::now();
    for body in bodies {
        let key = ObjectKey {
            cluster: "bench".into(),
            group: "worker.gpustack.ai".into(),
            resource: "devices".into(),
            namespace: String::new(),
            name: body["metadata"]["name"].as_str().unwrap().into(),
        };
        store
            .commit(&key, Precondition::Absent, WriteOp::Put(body.clone()))
            .await
            .unwrap();
    }
    start.elapsed()
}

async fn api_creates(raw: &Api<kube::api::DynamicObject>, bodies: &[Value]) -> Duration {
    let start = Instant::now();
    for b in bodies {
        let obj: kube::api::DynamicObject = serde_json::from_value(b.clone()).unwrap();
        raw.create(&PostParams::default(), &obj).await.unwrap();
    }
    start.elapsed()
}

/// The most watch-phase writes in flight at once. kube's client speaks HTTP/1.1 and opens a
/// connection per request in flight, with no bound, and the server admits at most half its
/// listener's 1,024 connections from one address (`gpustack_serving::serve::Limits`): on a
/// loaded machine an unbounded schedule of 2,000 writes/s went past that and its next
/// connections were closed in their TLS handshake. 250 is what an HTTP/2 client (client-go)
/// gets on a connection; reached only when a write takes over 125 ms at 2,000/s.
const WATCH_IN_FLIGHT: usize = 250;

/// How many rounds the API creates and the direct inserts alternate in.
const CREATE_ROUNDS: usize = 10;

/// The `gpustack-operator` binary the memory figure runs: the one `GPUSTACK_OPERATOR_BIN` names,
/// else the release build, rebuilt from the current sources first. Exits with a one-line
/// reason when there is no such binary or the build fails.
fn operator_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("GPUSTACK_OPERATOR_BIN") {
        let p = PathBuf::from(p);
        if !p.is_file() {
            fail(&format!(
                "GPUSTACK_OPERATOR_BIN: {} is not a file",
                p.display()
            ));
        }
        return p;
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    // `cargo bench` sets CARGO to the cargo running it.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--bin", "gpustack-operator"])
        .current_dir(&workspace)
        .env("CARGO_TARGET_DIR", &target)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => fail(&format!(
            "cargo build --release --bin gpustack-operator failed ({s}); not measuring a stale binary"
        )),
        Err(e) => fail(&format!(
            "could not run cargo to build the release binary: {e}"
        )),
    }
    let bin = target.join("release/gpustack-operator");
    if !bin.is_file() {
        fail(&format!(
            "{} missing after the release build",
            bin.display()
        ));
    }
    bin
}

/// Stops the bench with `why` and exit status 1.
fn fail(why: &str) -> ! {
    eprintln!("error: {why}");
    std::process::exit(1)
}

/// Kills the server process when the measurement ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The gateway server's own peak and current resident memory (MB) after it stored `m` objects
/// through its API and answered a full list of them, or why it was not measured.
async fn server_memory(bin: &Path, m: usize) -> Result<(f64, f64, f64), String> {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(bin)
        .args([
            "worker-gateway",
            "--embedded-cluster=rss",
            &format!("--data-dir={}", data.display()),
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
            "--bind-unix-path=",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", bin.display()))?;
    let server = Server(child);
    let pid = server.0.id();
    let kubeconfig = data.join("rss.kubeconfig");
    let kc = until("the kubeconfig", Duration::from_secs(30), || {
        let kubeconfig = kubeconfig.clone();
        async move {
            let text = std::fs::read_to_string(&kubeconfig).ok()?;
            text.contains(&format!(":{port}"))
                .then(|| Kubeconfig::from_yaml(&text).ok())
                .flatten()
        }
    })
    .await;
    let client = Client::try_from(
        Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap(),
    )
    .unwrap();
    until("/readyz", Duration::from_secs(30), || {
        let client = client.clone();
        async move {
            let req = http::Request::get("/readyz").body(Vec::new()).unwrap();
            client.request_text(req).await.ok()
        }
    })
    .await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    for crd in gpustack_api::crds::all() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let raw: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::erase::<Devices>(&()),
    );
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..16 {
        let raw = raw.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..m).step_by(16) {
                let obj: kube::api::DynamicObject =
                    serde_json::from_value(device(&format!("node-{i:06}"))).unwrap();
                raw.create(&PostParams::default(), &obj).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    println!(
        "loaded {m} objects into the server process in {:.0?}",
        start.elapsed()
    );
    let start = Instant::now();
    let req = http::Request::get("/apis/worker.gpustack.ai/v1alpha1/devices")
        .body(Vec::new())
        .unwrap();
    let text = client.request_text(req).await.unwrap();
    println!(
        "full list of {m} from the server process: {} MB in {:.0?}",
        text.len() / 1_000_000,
        start.elapsed()
    );
    assert!(text.len() > m * 1000);
    let db_mb = std::fs::read_dir(&data)
        .map(|d| {
            d.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len() as f64)
                .sum::<f64>()
                / 1e6
        })
        .unwrap_or(f64::NAN);
    println!("data directory: {db_mb:.0} MB");
    let figures = (
        proc_status_mb(pid, "VmHWM"),
        proc_status_mb(pid, "VmRSS"),
        db_mb,
    );
    // For comparison only, after the figures were read (the peak is sticky): one page holding
    // every object is still built in memory, as every full list was before lists streamed.
    let req = http::Request::get(format!(
        "/apis/worker.gpustack.ai/v1alpha1/devices?limit={m}"
    ))
    .body(Vec::new())
    .unwrap();
    drop(text);
    let text = client.request_text(req).await.unwrap();
    assert!(text.len() > m * 1000);
    println!(
        "(for comparison: after one more list as a single page of {m}, built in memory as full lists were before, the server's peak is {:.0} MB)",
        proc_status_mb(pid, "VmHWM")
    );
    Ok(figures)
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let n = env_usize("GPUSTACK_BENCH_OBJECTS", 10_000);
    let m = env_usize("GPUSTACK_BENCH_RSS_OBJECTS", 100_000);
    // Before any measurement, so that a failed build stops the bench at once.
    let bin = (m > 0).then(operator_binary);
    let dir = tempfile::tempdir().unwrap();
    let gw = ApiServer::start(ServerOptions::new(
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
    let mut figures = Vec::new();

    // 1. Creates through the API vs direct inserts, alternating in rounds.
    let bodies: Vec<Value> = (0..n).map(|i| device(&format!("node-{i:05}"))).collect();
    let direct = direct_pool(dir.path()).await;
    let store = Store::open(&dir.path().join("store.db")).await.unwrap();
    let (mut api_time, mut direct_time, mut store_time) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut round_ratios = Vec::new();
    let per_round = n.div_ceil(CREATE_ROUNDS);
    for (r, chunk) in bodies.chunks(per_round).enumerate() {
        let a = api_creates(&raw, chunk).await;
        let d = direct_sqlx_inserts(&direct, r * per_round, chunk).await;
        store_time += store_creates(&store, chunk).await;
        api_time += a;
        direct_time += d;
        round_ratios.push(d.as_secs_f64() / a.as_secs_f64());
    }
    direct.close().await;
    drop(store);
    drop(bodies);
    round_ratios.sort_by(f64::total_cmp);
    let api_rate = n as f64 / api_time.as_secs_f64();
    let direct_rate = n as f64 / direct_time.as_secs_f64();
    let ratio = api_rate / direct_rate;
    println!(
        "create {n}: API {api_rate:.0}/s ({:.0} us each), direct sqlx {direct_rate:.0}/s ({:.0} us each); per-round ratios min {:.2}, median {:.2}, max {:.2}",
        api_time.as_secs_f64() * 1e6 / n as f64,
        direct_time.as_secs_f64() * 1e6 / n as f64,
        round_ratios[0],
        percentile(&round_ratios, 0.5),
        round_ratios[round_ratios.len() - 1],
    );
    println!(
        "create {n} through the store alone (no HTTP, TLS or pipeline): {:.0}/s ({:.0} us each)",
        n as f64 / store_time.as_secs_f64(),
        store_time.as_secs_f64() * 1e6 / n as f64,
    );
    // Where a create's time goes beyond the store's, for information: the same client's
    // round trip with no store behind it, then with one read.
    let reads = n.min(2_000);
    let start = Instant::now();
    for _ in 0..reads {
        let req = http::Request::get("/version").body(Vec::new()).unwrap();
        client.request_text(req).await.unwrap();
    }
    println!(
        "GET /version, {reads} sequential (the HTTPS round trip alone): {:.0} us each",
        start.elapsed().as_secs_f64() * 1e6 / reads as f64
    );
    let start = Instant::now();
    for i in 0..reads {
        raw.get(&format!("node-{i:05}")).await.unwrap();
    }
    println!(
        "get one object, {reads} sequential (the round trip and one store read): {:.0} us each",
        start.elapsed().as_secs_f64() * 1e6 / reads as f64
    );
    figures.push(Figure::new(
        format!("sequential creates of {n}, API / direct sqlx"),
        format!("ratio {ratio:.2}"),
        Some(">= 0.8"),
        Some(ratio >= 0.8),
    ));

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
        "list {n} typed (kube Api::list, decoding included): median {:.0} ms, min {:.0} ms, max {:.0} ms",
        percentile(&times, 0.5),
        times[0],
        times[times.len() - 1]
    );
    let list_ms = percentile(&times, 0.5);
    figures.push(Figure::new(
        format!("list {n} (typed, median of 11)"),
        format!("{list_ms:.0} ms"),
        Some("<= 100 ms"),
        Some(list_ms <= 100.0),
    ));

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
        "create {n} from 16 concurrent clients (for information): API {conc_rate:.0}/s, ratio to sequential direct sqlx {:.2}",
        conc_rate / direct_rate
    );

    // 3. Watch latency at `rate` writes/s for 5 s: each write starts on its schedule (a
    // millisecond tick starts the writes due by then), however long the ones before take, as
    // long as fewer than `WATCH_IN_FLIGHT` are in flight; past that it waits for an answer.
    let rate = env_usize("GPUSTACK_BENCH_WATCH_RATE", 2000).max(1);
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
    let writes = rate * 5;
    let mut in_flight = tokio::task::JoinSet::new();
    let room = Arc::new(tokio::sync::Semaphore::new(WATCH_IN_FLIGHT));
    let (mut peak, mut held_back) = (0, 0);
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let start = Instant::now();
    let mut started = 0;
    while started < writes {
        tick.tick().await;
        let due = ((start.elapsed().as_secs_f64() * rate as f64) as usize + 1).min(writes);
        for i in started..due {
            if room.available_permits() == 0 {
                held_back += 1;
            }
            let permit = room.clone().acquire_owned().await.unwrap();
            peak = peak.max(WATCH_IN_FLIGHT - room.available_permits());
            let cms = cms.clone();
            in_flight.spawn(async move {
                let cm = k8s_openapi::api::core::v1::ConfigMap {
                    metadata: kube::api::ObjectMeta {
                        name: Some(format!("w{i}")),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                cms.create(&PostParams::default(), &cm).await.unwrap();
                drop(permit);
                (format!("w{i}"), Instant::now())
            });
        }
        started = due;
    }
    let mut acked = Vec::with_capacity(writes);
    while let Some(done) = in_flight.join_next().await {
        acked.push(done.unwrap());
    }
    let achieved = writes as f64 / start.elapsed().as_secs_f64();
    poll(Duration::from_secs(30), || {
        let done = seen.lock().unwrap().len() >= writes;
        async move { done.then_some(()) }
    })
    .await;
    watching.abort();
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let lat = latencies_ms(&acked, &seen);
    let p99 = percentile(&lat, 0.99);
    println!(
        "watch: {} of {writes} writes seen at {achieved:.0} writes/s ({peak} in flight at most, {held_back} started late for want of room); latency after the response p50 {:.2} ms, p99 {p99:.2} ms, max {:.2} ms",
        lat.len(),
        percentile(&lat, 0.5),
        lat.last().copied().unwrap_or(f64::NAN)
    );
    figures.push(Figure::new(
        format!("watch delivery at {achieved:.0} writes/s, p99"),
        format!("{p99:.2} ms"),
        Some("<= 5 ms"),
        Some(lat.len() == writes && p99 <= 5.0),
    ));
    gw.shutdown().await;

    // 4. The server's resident memory, in its own process.
    let Some(bin) = bin else {
        println!("server memory not measured: GPUSTACK_BENCH_RSS_OBJECTS=0");
        return summary(&figures);
    };
    figures.push(match server_memory(&bin, m).await {
        Ok((hwm, rss, _)) => Figure::new(
            format!("gateway server resident memory with {m} objects, after a full list"),
            format!("peak (VmHWM) {hwm:.0} MB, now (VmRSS) {rss:.0} MB"),
            Some("<= 150 MB"),
            Some(hwm <= 150.0),
        ),
        Err(why) => {
            println!("server memory not measured: {why}");
            Figure::new(
                format!("gateway server resident memory with {m} objects"),
                "-".into(),
                Some("<= 150 MB"),
                None,
            )
        }
    });

    summary(&figures);
}

/// The closing summary of `figures`.
fn summary(figures: &[Figure]) {
    println!("\nsummary (reproduce: cargo bench -p gpustack-apiserver --bench embedded_cluster):");
    for f in figures {
        println!("  {}", f.line());
    }
}
