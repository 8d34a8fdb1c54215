//! `/readyz` on the HTTPS port, asked by a real HTTPS client: `503` naming every check that
//! fails (the ModelArtifact cache not synced, a cache root in another layout, a cache
//! filesystem that cannot be measured), `200 ok` once all pass.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use gpustack_api::model_artifact::ModelArtifact;
use gpustack_delegated_auth::metrics_access::MetricsAccess;
use gpustack_model_manager::{
    csi::{ArtifactLookup, LookupError, NodePlugin},
    download::{DownloadLimits, Tuning},
    http::{self, HttpState, Metrics},
    materializer::{Materializer, StoreConfig},
    store::{LAYOUT, Store},
};

/// Stands in for the cluster's ModelArtifact watch cache: empty, synced when the test says.
struct Lookup(Arc<AtomicBool>);

#[tonic::async_trait]
impl ArtifactLookup for Lookup {
    async fn get(&self, _: &str, _: &str) -> Result<Option<ModelArtifact>, LookupError> {
        Ok(None)
    }
    fn ready(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The HTTPS port's router over a cache at `work/cache`, synced when `synced` says.
fn router(work: &std::path::Path, synced: &Arc<AtomicBool>) -> axum::Router {
    let m = Materializer::new(
        Store::open(&work.join("cache")).unwrap(),
        DownloadLimits::new(8, 0),
        Tuning::default(),
        StoreConfig::default(),
    );
    let plugin = NodePlugin::new(
        "node-1".into(),
        work.join("kubelet"),
        "test".into(),
        Arc::clone(&m),
        Arc::new(Lookup(Arc::clone(synced))),
    );
    http::router(HttpState {
        metrics: Arc::new(Metrics::new(prometheus::Registry::new()).unwrap()),
        metrics_access: Arc::new(MetricsAccess::Open),
        plugin,
        materializer: m,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_503_naming_what_failed() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("cache");
    let synced = Arc::new(AtomicBool::new(false));
    let router = router(work.path(), &synced);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/readyz", listener.local_addr().unwrap());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(gpustack_serving::serve::serve_tls(
        listener,
        http::tls_config(None).unwrap(),
        router,
        stop_rx,
    ));
    // The serving certificate is self-signed and made at start; the client checks the answer,
    // not the certificate.
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let ask = || async {
        let resp = client.get(&url).send().await.expect("the port answers");
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap())
    };

    std::fs::write(root.join("layout"), "someone-else v9\n").unwrap();
    let (status, body) = ask().await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("the ModelArtifact cache has not synced"),
        "{body}"
    );
    assert!(
        body.contains("the cache layout") && body.contains("someone-else v9"),
        "{body}"
    );
    assert!(!body.contains("statfs"), "{body}");

    synced.store(true, Ordering::Relaxed);
    std::fs::write(root.join("layout"), format!("{LAYOUT}\n")).unwrap();
    assert_eq!(ask().await, (200, "ok".to_owned()));

    std::fs::remove_dir_all(&root).unwrap();
    let (status, body) = ask().await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("statfs of the cache filesystem") && body.contains("the cache layout"),
        "{body}"
    );
    assert!(!body.contains("ModelArtifact"), "{body}");

    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the port stops")
        .unwrap();
}

/// Clients that connect and never start TLS (the same bound the API servers have): others are
/// answered meanwhile, and each silent one is closed once the setup deadline (10 s) passes
/// instead of holding its connection for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_never_start_tls_are_closed_and_lock_nobody_out() {
    use tokio::io::AsyncReadExt;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let work = tempfile::tempdir().unwrap();
    let synced = Arc::new(AtomicBool::new(true));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(gpustack_serving::serve::serve_tls(
        listener,
        http::tls_config(None).unwrap(),
        router(work.path(), &synced),
        stop_rx,
    ));
    let mut silent = Vec::new();
    for _ in 0..32 {
        silent.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let live = client
        .get(format!("https://{addr}/livez"))
        .send()
        .await
        .expect("answered while 32 clients stay silent");
    assert_eq!(live.status().as_u16(), 200);
    for (i, conn) in silent.iter_mut().enumerate() {
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(30), conn.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("silent client {i} still open after 30 s"));
        // Closed by the server: end of stream (or a reset), never a byte of an answer.
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "silent client {i}: {read:?}"
        );
    }
    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(15), server)
        .await
        .expect("the port stops")
        .unwrap();
}
