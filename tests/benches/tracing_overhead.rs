//! Benchmark of what tracing costs a request (issue 37), not a pass/fail test: two real
//! `worker-gateway --embedded-cluster` processes, one exporting its spans over OTLP/HTTP to a
//! receiver here (`OTEL_EXPORTER_OTLP_ENDPOINT` set), one without it; the same GET of one
//! ConfigMap is timed against each, alternately, so that drift on the machine touches both
//! alike. Reproduce with
//!
//! ```text
//! cargo build --release --bin gpustack-operator && cargo bench -p gpustack-tests --bench tracing_overhead
//! ```
//!
//! (`GPUSTACK_BENCH_REQUESTS`, default 500 GETs against each, scales it).

use std::time::Instant;

use gpustack_tests::{
    bench::{self, Figure, env_usize, percentile},
    embedded::GatewayProcess,
    otlp::OtlpReceiver,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, api::PostParams};

const NAME: &str = "timed";

/// A gateway hosting cluster `one` under `dir`, with `env` set for it, and its ConfigMap.
async fn cluster(dir: &std::path::Path, env: &[(&str, &str)]) -> (GatewayProcess, Api<ConfigMap>) {
    let gw = tokio::task::block_in_place(|| GatewayProcess::start_with_env(dir, "one", env));
    let api: Api<ConfigMap> = Api::namespaced(bench::client(&gw.kubeconfig()).await, "default");
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": NAME}, "data": {"k": "v"},
    }))
    .unwrap();
    api.create(&PostParams::default(), &cm)
        .await
        .expect("creating the ConfigMap");
    (gw, api)
}

async fn timed_get(api: &Api<ConfigMap>) -> f64 {
    let t = Instant::now();
    api.get(NAME).await.expect("GET");
    t.elapsed().as_secs_f64() * 1000.0
}

fn summary(mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    (percentile(&ms, 0.5), percentile(&ms, 0.99))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let requests = env_usize("GPUSTACK_BENCH_REQUESTS", 500);
    let tmp = tempfile::tempdir().unwrap();
    let receiver = OtlpReceiver::start();
    let env = receiver.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (_off_gw, off) = cluster(&tmp.path().join("off"), &[]).await;
    let (_on_gw, on) = cluster(&tmp.path().join("on"), &env).await;

    // Warm both (connections, caches) before measuring.
    for _ in 0..50 {
        timed_get(&off).await;
        timed_get(&on).await;
    }
    let exported_before = receiver.spans().len();
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..requests {
        without.push(timed_get(&off).await);
        with.push(timed_get(&on).await);
    }
    let (p50_off, p99_off) = summary(without);
    let (p50_on, p99_on) = summary(with);
    println!(
        "GET latency ms over {requests} each: tracing off p50 {p50_off:.3} p99 {p99_off:.3}; on p50 {p50_on:.3} p99 {p99_on:.3}"
    );
    let figures = [
        Figure::new(
            "p50 added by tracing per GET",
            format!(
                "{:.3} ms ({:+.1}%)",
                p50_on - p50_off,
                (p50_on / p50_off - 1.0) * 100.0
            ),
            None,
            Some(true),
        ),
        Figure::new(
            "p99 added by tracing per GET",
            format!("{:.3} ms", p99_on - p99_off),
            None,
            Some(true),
        ),
    ];
    // The spans of the timed GETs arrive within the export interval; they prove the traced
    // side really exported (a request's span, each).
    let exported = gpustack_tests::wait::wait_until(
        "the timed GETs' spans",
        gpustack_tests::embedded::DEADLINE,
        || {
            let n = receiver.spans().len() - exported_before;
            (n >= requests).then_some(n)
        },
    );
    let figures: Vec<Figure> = figures
        .into_iter()
        .chain([Figure::new(
            "spans exported by the traced gateway during the timed GETs",
            exported.to_string(),
            None,
            Some(true),
        )])
        .collect();
    println!("\nsummary:");
    for f in &figures {
        println!("  {}", f.line());
    }
}
