//! The HTTPS endpoints: `/metrics` (the registry passed in), `/monitor/snapshot` (the latest
//! sample as JSON), `/livez`, `/readyz`. `/metrics` is guarded by [`MetricsAccess`]. TLS from `--cert-dir` (`tls.crt`, `tls.key`) or a
//! certificate generated at start; rustls with the ring provider.

use std::{
    path::Path,
    sync::{Arc, RwLock},
};

use axum::{
    Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::IntoResponse,
    routing::get,
};
use gpustack_api::{monitor::MetricsGroup, time::Timestamp};
use gpustack_delegated_auth::metrics_access::MetricsAccess;
use gpustack_serving::certs;
use prometheus::{Encoder, Registry, TextEncoder};
use serde::Serialize;
use tokio::sync::watch;

/// The latest monitor sample (devices.md §6).
#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct MonitorSnapshot {
    pub timestamp: Timestamp,
    pub period_seconds: u64,
    pub groups: Vec<MetricsGroup>,
    /// The per-slice view, where a card is carved into slices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slices: Option<super::slices::Slices>,
}

/// What the handlers read.
#[derive(Clone)]
pub struct HttpState {
    pub registry: Registry,
    pub metrics_access: Arc<MetricsAccess>,
    pub snapshot: Arc<RwLock<Option<MonitorSnapshot>>>,
    pub ready: watch::Receiver<bool>,
}

/// The serving configuration: the pair in `cert_dir`, else one generated at start.
pub fn tls_config(
    cert_dir: Option<&Path>,
) -> Result<Arc<rustls::ServerConfig>, certs::ServingConfigError> {
    certs::serving_config(
        cert_dir,
        &certs::Names {
            ca_common_name: "gpustack-device-manager-ca",
            common_name: "gpustack-device-manager",
            subject_alt_names: &["localhost", "127.0.0.1"],
        },
    )
}

pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/monitor/snapshot", get(snapshot))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(state)
}

async fn metrics(State(s): State<HttpState>, headers: HeaderMap) -> impl IntoResponse {
    if let Err(refused) = s.metrics_access.check(&headers).await {
        return (refused.status(), refused.to_string()).into_response();
    }
    let mut body = Vec::new();
    match TextEncoder::new().encode(&s.registry.gather(), &mut body) {
        Ok(()) => (
            StatusCode::OK,
            [("content-type", prometheus::TEXT_FORMAT)],
            body,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn snapshot(State(s): State<HttpState>) -> impl IntoResponse {
    let current = s.snapshot.read().unwrap_or_else(|e| e.into_inner()).clone();
    match current {
        Some(snap) => axum::Json(snap).into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "no sample yet").into_response(),
    }
}

async fn ready(State(s): State<HttpState>) -> impl IntoResponse {
    if *s.ready.borrow() {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the first detection pass is not published yet",
        )
    }
}
