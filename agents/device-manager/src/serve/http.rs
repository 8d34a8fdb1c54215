//! The HTTPS endpoints: `/metrics` (the registry passed in), `/monitor/snapshot` (the latest
//! sample as JSON), `/livez`, `/readyz`. TLS from `--cert-dir` (`tls.crt`, `tls.key`) or a
//! certificate generated at start; rustls with the ring provider.

use std::{
    path::Path,
    sync::{Arc, RwLock},
};

use axum::{Router, extract::State, http::StatusCode, response::IntoResponse, routing::get};
use gpustack_api::{monitor::MetricsGroup, time::Timestamp};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto,
    service::TowerToHyperService,
};
use prometheus::{Encoder, Registry, TextEncoder};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use serde::Serialize;
use tokio::{net::TcpListener, sync::watch};
use tokio_rustls::TlsAcceptor;

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
    pub snapshot: Arc<RwLock<Option<MonitorSnapshot>>>,
    pub ready: watch::Receiver<bool>,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Pem {
        path: String,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("generating a serving certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("building the TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The server configuration: the pair in `cert_dir`, else a fresh self-signed one.
pub fn tls_config(cert_dir: Option<&Path>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let (certs, key) = match cert_dir {
        Some(dir) => {
            let pem = |name: &str| dir.join(name).display().to_string();
            let crt = pem("tls.crt");
            let certs = CertificateDer::pem_file_iter(&crt)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|source| TlsError::Pem {
                    path: crt.clone(),
                    source,
                })?;
            let key_path = pem("tls.key");
            let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|source| TlsError::Pem {
                path: key_path,
                source,
            })?;
            (certs, key)
        }
        None => {
            let generated = rcgen::generate_simple_self_signed(vec![
                "localhost".to_owned(),
                "127.0.0.1".to_owned(),
            ])?;
            let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der())
                .map_err(|e| TlsError::Rustls(rustls::Error::General(e.to_owned())))?;
            (vec![generated.cert.der().clone()], key)
        }
    };
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    Ok(Arc::new(config))
}

pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/monitor/snapshot", get(snapshot))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(state)
}

async fn metrics(State(s): State<HttpState>) -> impl IntoResponse {
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

/// Serves `router` over TLS on `listener` until `stop` turns true.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    mut stop: watch::Receiver<bool>,
) {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => { tracing::warn!("accepting a connection: {e}"); continue; }
            },
            _ = stop.wait_for(|s| *s) => return,
        };
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let tls = match acceptor.accept(stream).await {
                Ok(tls) => tls,
                Err(e) => {
                    tracing::debug!(%peer, "TLS handshake failed: {e}");
                    return;
                }
            };
            if let Err(e) = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await
            {
                tracing::debug!(%peer, "connection ended: {e}");
            }
        });
    }
}
