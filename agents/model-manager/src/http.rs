//! The HTTPS port (32444): `/metrics` (Prometheus text from the registry), `/model/downloads`
//! (the running downloads, for the worker's progress view), `/livez`, `/readyz`. TLS is a
//! self-signed certificate made at start, or `tls.crt`/`tls.key` from a directory; rustls with
//! the ring provider. No tenant data is served here.

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use axum::{
    Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::IntoResponse,
    routing::get,
};
use gpustack_delegated_auth::metrics_access::MetricsAccess;
use gpustack_serving::certs;
use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

use crate::{
    csi::NodePlugin,
    materializer::{Materializer, OutcomeSink},
};

/// Why the HTTPS port could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The serving certificate could not be loaded or made.
    #[error(transparent)]
    Tls(#[from] certs::ServingConfigError),
    /// A metric could not be registered.
    #[error("registering metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// The plugin's metrics. Counters mirror the components' own atomic counts at scrape time, so
/// the download and mount paths never touch the registry.
pub struct Metrics {
    registry: Registry,
    download_bytes: IntCounterVec,
    mounts: IntCounterVec,
    materializations: IntCounterVec,
    publish_duration: Histogram,
    stored_bytes: IntGauge,
    capacity_bytes: IntGauge,
    used_bytes: IntGauge,
    high_watermark_bytes: IntGauge,
    gc_removed: IntCounter,
    seen: Mutexed,
}

#[derive(Default)]
struct Mutexed {
    received: AtomicU64,
    removed: AtomicU64,
    mounts: [AtomicU64; 4],
}

const MOUNT_RESULTS: [&str; 4] = ["hit", "materialized", "denied", "pending"];

impl Metrics {
    /// Registers the plugin's metrics in `registry`.
    pub fn new(registry: Registry) -> Result<Self, HttpError> {
        let name =
            |n: &str, help: &str| Opts::new(format!("gpustack_model_manager_{n}"), help.to_owned());
        let download_bytes = IntCounterVec::new(
            name("download_bytes_total", "Bytes downloaded, by source."),
            &["source"],
        )?;
        let mounts = IntCounterVec::new(
            name("mounts_total", "NodePublishVolume outcomes."),
            &["result"],
        )?;
        let materializations = IntCounterVec::new(
            name(
                "materializations_total",
                "Download attempts that ended, by result (published or the failure's reason).",
            ),
            &["result"],
        )?;
        // Buckets 1·2^k seconds, from 1 s to a little over an hour.
        let publish_duration = Histogram::with_opts(
            HistogramOpts::new(
                "gpustack_model_manager_publish_duration_seconds",
                "Time from the start of an attempt to its publication.",
            )
            .buckets(prometheus::exponential_buckets(1.0, 2.0, 13)?),
        )?;
        let stored_bytes = IntGauge::with_opts(name("stored_bytes", "Bytes of published trees."))?;
        let capacity_bytes =
            IntGauge::with_opts(name("capacity_bytes", "Size of the cache filesystem."))?;
        let used_bytes = IntGauge::with_opts(name(
            "used_bytes",
            "Bytes in use on the cache filesystem (what the watermarks are measured against).",
        ))?;
        let high_watermark_bytes = IntGauge::with_opts(name(
            "high_watermark_bytes",
            "The high watermark in bytes: past it, downloads wait for collection.",
        ))?;
        let gc_removed = IntCounter::with_opts(name(
            "gc_removed_bytes_total",
            "Bytes removed by collection.",
        ))?;
        registry.register(Box::new(download_bytes.clone()))?;
        registry.register(Box::new(mounts.clone()))?;
        registry.register(Box::new(materializations.clone()))?;
        registry.register(Box::new(publish_duration.clone()))?;
        registry.register(Box::new(stored_bytes.clone()))?;
        registry.register(Box::new(capacity_bytes.clone()))?;
        registry.register(Box::new(used_bytes.clone()))?;
        registry.register(Box::new(high_watermark_bytes.clone()))?;
        registry.register(Box::new(gc_removed.clone()))?;
        for r in MOUNT_RESULTS {
            mounts.with_label_values(&[r]);
        }
        materializations.with_label_values(&["published"]);
        download_bytes.with_label_values(&["hub"]);
        Ok(Self {
            registry,
            download_bytes,
            mounts,
            materializations,
            publish_duration,
            stored_bytes,
            capacity_bytes,
            used_bytes,
            high_watermark_bytes,
            gc_removed,
            seen: Mutexed::default(),
        })
    }

    /// Brings the registry up to date with the components' counts.
    fn refresh(&self, plugin: &NodePlugin, materializer: &Materializer) {
        let bump = |seen: &AtomicU64, now: u64, c: &IntCounter| {
            let before = seen.swap(now, Ordering::Relaxed);
            c.inc_by(now.saturating_sub(before));
        };
        let received = materializer.counters.received.load(Ordering::Relaxed);
        bump(
            &self.seen.received,
            received,
            &self.download_bytes.with_label_values(&["hub"]),
        );
        let removed = materializer.removed_bytes.load(Ordering::Relaxed);
        bump(&self.seen.removed, removed, &self.gc_removed);
        let m = &plugin.mounts;
        let counts = [&m.hit, &m.materialized, &m.denied, &m.pending];
        for (i, (r, c)) in MOUNT_RESULTS.iter().zip(counts).enumerate() {
            bump(
                &self.seen.mounts[i],
                c.load(Ordering::Relaxed),
                &self.mounts.with_label_values(&[r]),
            );
        }
        if let Ok(published) = materializer.store().list_published() {
            self.stored_bytes
                .set(published.iter().map(|(_, m)| m.size_bytes as i64).sum());
        }
        if let Ok(usage) = materializer.usage() {
            self.capacity_bytes.set(usage.total_bytes as i64);
            self.used_bytes.set(usage.used_bytes as i64);
            let high = u128::from(materializer.config().watermarks.high_percent);
            self.high_watermark_bytes
                .set((u128::from(usage.total_bytes) * high / 100) as i64);
        }
    }
}

impl OutcomeSink for Metrics {
    fn outcome(&self, result: &str, took: std::time::Duration) {
        self.materializations.with_label_values(&[result]).inc();
        if result == "published" {
            self.publish_duration.observe(took.as_secs_f64());
        }
    }
}

/// What the handlers read.
#[derive(Clone)]
pub struct HttpState {
    /// The plugin's metrics, refreshed on each scrape.
    pub metrics: Arc<Metrics>,
    /// Who may read them.
    pub metrics_access: Arc<MetricsAccess>,
    /// The CSI plugin (its mount counters, the lookup's readiness).
    pub plugin: Arc<NodePlugin>,
    /// The cache (downloads in progress, the store's layout).
    pub materializer: Arc<Materializer>,
}

/// The HTTPS routes: `/metrics`, `/model/downloads`, `/livez`, `/readyz`.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/model/downloads", get(downloads))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn metrics(State(s): State<HttpState>, headers: HeaderMap) -> impl IntoResponse {
    if let Err(refused) = s.metrics_access.check(&headers).await {
        return (refused.status(), refused.to_string()).into_response();
    }
    s.metrics.refresh(&s.plugin, &s.materializer);
    let mut body = Vec::new();
    match TextEncoder::new().encode(&s.metrics.registry.gather(), &mut body) {
        Ok(()) => (
            StatusCode::OK,
            [("content-type", prometheus::TEXT_FORMAT)],
            body,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// Ready when the ModelArtifact cache has synced (mounts can be authorized) and the cache
/// filesystem answers statfs and holds its layout; otherwise 503 naming what is not.
async fn readyz(State(s): State<HttpState>) -> impl IntoResponse {
    let mut failing = Vec::new();
    if !s.plugin.artifacts_ready() {
        failing.push("the ModelArtifact cache has not synced".to_owned());
    }
    if let Err(e) = s.materializer.usage() {
        failing.push(e.to_string());
    }
    if let Err(e) = s.materializer.store().check_layout() {
        failing.push(format!("the cache layout: {e}"));
    }
    if failing.is_empty() {
        (StatusCode::OK, "ok".to_owned())
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, failing.join("\n"))
    }
}

async fn downloads(State(s): State<HttpState>) -> impl IntoResponse {
    let downloads: Vec<serde_json::Value> = s
        .materializer
        .jobs()
        .into_iter()
        .map(|j| {
            serde_json::json!({
                "digest": j.digest.to_string(),
                "downloadedBytes": j.downloaded_bytes,
                "sizeBytes": j.size_bytes,
                "source": "hub",
            })
        })
        .collect();
    axum::Json(serde_json::json!({ "downloads": downloads }))
}

/// The serving configuration: the pair in `cert_dir`, else one generated at start.
pub fn tls_config(cert_dir: Option<&Path>) -> Result<Arc<rustls::ServerConfig>, HttpError> {
    Ok(certs::serving_config(
        cert_dir,
        &certs::Names {
            ca_common_name: "gpustack-model-manager-ca",
            common_name: "gpustack-model-manager",
            subject_alt_names: &["localhost", "127.0.0.1"],
        },
    )?)
}
