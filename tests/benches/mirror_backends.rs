//! The hub's mirror on SQLite and on PostgreSQL side by side (issue 36's benchmark rows), not
//! a pass/fail test: real `worker-gateway` processes, the upstreams being embedded clusters,
//! and a throwaway PostgreSQL server ([`Postgres`], over its unix socket, on this machine, with
//! `fsync` turned back on so that both stores make their commits durable). Reproduce with
//!
//! ```text
//! cargo build --release --bin gpustack-operator && cargo bench -p gpustack-tests --bench mirror_backends
//! ```
//!
//! (`GPUSTACK_BENCH_UPSTREAMS`, default 10, `GPUSTACK_BENCH_DEVICES`, default 5000 per
//! upstream, and `GPUSTACK_BENCH_LISTS`, default 7, scale it.)
//!
//! 0. Not measured: one upstream filled with the Devices (~2 KB each) through its API and
//!    stopped, its data directory copied once per upstream.
//! 1. For each store in turn, a hub with a fresh data directory (and, for PostgreSQL, a fresh
//!    database): the time from its start until `GET /apis/workers` shows every upstream `Ready`
//!    with all its Devices and a fleet list returns them all.
//! 2. A full list of the fleet view's Devices through that hub over HTTPS (its text received,
//!    not decoded), median of several.
//!
//! Then PostgreSQL's sync rate against SQLite's (target >= 0.7) and its list time against
//! SQLite's (target <= 1.3).
//!
//! Measured (issue 36; release binary, this bench built by `cargo test --bench`, one 2-core
//! machine at load 6 shared with other builds, 10 x 5,000): SQLite 3,652 objects/s and a
//! 50,000 list in 2,552 ms (median of 5), PostgreSQL 3,094 objects/s and 1,620 ms: sync 0.85x,
//! list 0.63x.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use gpustack_tests::{
    bench::{Figure, client, create_devices, env_usize, median},
    embedded::{GatewayProcess, free_port},
    hub::http_over_unix,
    postgres::Postgres,
    wait::poll,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client, api::PostParams};
use serde_json::Value;

/// Starts a `worker-gateway` process (blocking: it waits for kubectl to reach it).
fn launch(data: &Path, cluster: &str, args: &[&str]) -> GatewayProcess {
    tokio::task::block_in_place(|| GatewayProcess::start_with(data, cluster, free_port(), args))
}

/// `/apis/workers` over the hub's unix socket.
async fn workers(socket: &Path) -> Value {
    let socket = socket.to_owned();
    tokio::task::spawn_blocking(move || http_over_unix(&socket, "GET", "/apis/workers", None))
        .await
        .ok()
        .and_then(Result::ok)
        .and_then(|(_, body)| serde_json::from_str(&body).ok())
        .unwrap_or(Value::Null)
}

/// Whether every one of `n` upstreams is `Ready` with `per` Devices mirrored.
fn all_synced(status: &Value, n: usize, per: usize) -> bool {
    let items = status["items"].as_array().cloned().unwrap_or_default();
    items.len() == n
        && items
            .iter()
            .all(|i| i["phase"] == "Ready" && i["counts"]["Devices.worker.gpustack.ai"] == per)
}

/// How many Devices a full list of the fleet has.
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

/// One store's figures: objects per second through the sync, and the list's median in ms.
struct Run {
    rate: Option<f64>,
    list_ms: f64,
}

/// Starts a hub on `store_flags` mirroring the upstreams `upstreams_flag` names, measures its
/// sync and its fleet lists, and stops it.
async fn measure(
    root: &Path,
    upstreams_flag: &str,
    label: &str,
    store_flags: &[&str],
    (n, per, lists): (usize, usize, usize),
) -> Run {
    let total = n * per;
    let mut args = vec![upstreams_flag, "--worker-conn-mode=loopback"];
    args.extend_from_slice(store_flags);
    let start = Instant::now();
    let hub = launch(&root.join(format!("hub-{label}")), "u0", &args);
    let socket = hub.socket();
    let fleet = client(&hub.data_dir.join("_fleet.kubeconfig")).await;
    let synced = poll(Duration::from_secs(600), || {
        let (socket, fleet) = (socket.clone(), fleet.clone());
        async move {
            if !all_synced(&workers(&socket).await, n, per) {
                return None;
            }
            (fleet_count(&fleet).await == total).then(Instant::now)
        }
    })
    .await;
    let rate = synced.map(|at| total as f64 / at.duration_since(start).as_secs_f64());
    println!(
        "{label}: synced {n} x {per} in {}",
        rate.map_or("> 600 s".to_owned(), |r| format!(
            "{:.1} s ({r:.0} objects/s)",
            total as f64 / r
        ))
    );
    // The list's text only, not decoded: the bench's own decoding is not the store's cost.
    let mut times = Vec::new();
    for _ in 0..lists {
        let req = http::Request::get("/apis/worker.gpustack.ai/v1alpha1/devices")
            .body(Vec::new())
            .unwrap();
        let start = Instant::now();
        let text = fleet.request_text(req).await.expect("fleet list");
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        assert!(text.len() > total * 100, "{} bytes", text.len());
    }
    let list_ms = median(times.clone());
    println!("{label}: fleet list of {total}: median {list_ms:.0} ms of {times:.0?}");
    assert!(tokio::task::block_in_place(|| hub.stop()).success());
    Run { rate, list_ms }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let n = env_usize("GPUSTACK_BENCH_UPSTREAMS", 10);
    let per = env_usize("GPUSTACK_BENCH_DEVICES", 5000);
    let lists = env_usize("GPUSTACK_BENCH_LISTS", 7).max(1);
    let total = n * per;
    gpustack_tests::announce_binary();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();

    // 0. The upstreams: one filled, copied.
    let template = launch(
        &root.join("template"),
        "template",
        &["--embedded-cluster=template"],
    );
    let template_client = client(&template.kubeconfig()).await;
    let crds: Api<CustomResourceDefinition> = Api::all(template_client.clone());
    for crd in gpustack_api::crds::all() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let names = (0..per).map(|i| format!("node-{i:05}")).collect();
    create_devices(&template_client, names, 8).await;
    let template_data = template.data_dir.clone();
    assert!(tokio::task::block_in_place(|| template.stop()).success());
    let (upstreams, upstreams_flag) =
        gpustack_tests::bench::upstreams_from_template(root, &template_data, n);
    println!("{n} upstreams serving {per} Devices each");

    let pg = Postgres::start();
    // The harness runs without fsync; a store compared with SQLite's durable commits makes its
    // own durable too.
    pg.psql("postgres", "ALTER SYSTEM SET fsync = on");
    pg.psql("postgres", "ALTER SYSTEM SET full_page_writes = on");
    pg.psql("postgres", "SELECT pg_reload_conf()");
    let url = pg.create_database("hub");
    let store = format!("--store={url}");

    let sizes = (n, per, lists);
    let sqlite = measure(root, &upstreams_flag, "sqlite", &[], sizes).await;
    let postgres = measure(root, &upstreams_flag, "postgres", &[store.as_str()], sizes).await;

    let mut figures = Vec::new();
    for (label, run) in [("SQLite", &sqlite), ("PostgreSQL", &postgres)] {
        figures.push(Figure::new(
            format!("{label}: initial sync of {n} x {per}, then a fleet list of {total}"),
            format!(
                "{} objects/s; list median {:.0} ms",
                run.rate.map_or("-".to_owned(), |r| format!("{r:.0}")),
                run.list_ms
            ),
            None,
            Some(run.rate.is_some()),
        ));
    }
    let sync_ratio = match (postgres.rate, sqlite.rate) {
        (Some(p), Some(s)) => p / s,
        _ => 0.0,
    };
    figures.push(Figure::new(
        format!("initial sync of {n} x {per}: PostgreSQL's rate / SQLite's"),
        format!("{sync_ratio:.2}"),
        Some(">= 0.7"),
        Some(sync_ratio >= 0.7),
    ));
    let list_ratio = postgres.list_ms / sqlite.list_ms;
    figures.push(Figure::new(
        format!("fleet list of {total}: PostgreSQL's time / SQLite's"),
        format!(
            "{list_ratio:.2} ({:.0} ms / {:.0} ms)",
            postgres.list_ms, sqlite.list_ms
        ),
        Some("<= 1.3"),
        Some(list_ratio <= 1.3),
    ));
    gpustack_tests::bench::print_summary("mirror_backends", &figures);
    drop(upstreams);
}
