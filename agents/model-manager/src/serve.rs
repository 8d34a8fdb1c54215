//! The running plugin: the cache, the downloader, the CSI socket, the node's `NodeModelStore`
//! spec applied as it changes, and its status rebuilt and written. The binary hands in the
//! kube client and the paths; nothing here reads flags or the environment.

use std::{path::PathBuf, sync::Arc, time::Duration};

use gpustack_api::{
    model_artifact::ModelArtifact,
    model_store::{NodeModelStore, NodeModelStoreSpec},
};
use jiff::Timestamp;
use kube::{Api, api::PatchParams};

use crate::{
    csi::{self, ArtifactLookup, NodePlugin},
    download::{DownloadLimits, Tuning},
    gc::Watermarks,
    hub::HubSettings,
    materializer::{Materializer, StoreConfig},
    status::{self, Observed},
    store::{Store, StoreError},
};

/// How often the spec is re-read and status rebuilt (faster while downloading).
const IDLE_PASS: Duration = Duration::from_secs(60);
const BUSY_PASS: Duration = Duration::from_secs(10);

pub struct Options {
    pub node_name: String,
    pub kubelet_dir: PathBuf,
    pub cache_root: PathBuf,
    pub csi_socket: PathBuf,
    pub version: String,
    /// The HTTPS port's address, and where its certificate pair lives (generated when `None`).
    pub bind: std::net::SocketAddr,
    pub cert_dir: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("opening the cache: {0}")]
    Store(#[from] StoreError),
    #[error("serving HTTPS: {0}")]
    Http(#[from] crate::http::HttpError),
    #[error("binding {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("serving the CSI socket {path}: {source}")]
    Socket {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// ModelArtifacts read from the API server as each mount asks.
pub struct KubeArtifacts(pub kube::Client);

#[tonic::async_trait]
impl ArtifactLookup for KubeArtifacts {
    async fn get(&self, namespace: &str, name: &str) -> Result<Option<ModelArtifact>, String> {
        Api::<ModelArtifact>::namespaced(self.0.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The materializer's configuration from a spec; `Err` names the invalid field.
pub fn store_config(spec: &NodeModelStoreSpec) -> Result<StoreConfig, String> {
    spec.validate().map_err(|e| e.to_string())?;
    Ok(StoreConfig {
        hub: HubSettings {
            endpoint: spec.hub.hugging_face_endpoint.clone(),
            https_proxy: spec.hub.https_proxy.clone(),
            no_proxy: spec.hub.no_proxy.clone(),
            ca_pem: None,
        },
        watermarks: Watermarks {
            high_percent: spec.watermarks.high_percent,
            low_percent: spec.watermarks.low_percent,
        },
        pinned: spec.pinned.clone(),
    })
}

pub async fn run(
    options: Options,
    client: kube::Client,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let store = Store::open(&options.cache_root)?;
    store.empty_trash()?;
    recover_refs(&store);
    let limits = DownloadLimits::new(8, 0);
    let materializer = Materializer::new(
        store,
        Arc::clone(&limits),
        Tuning::default(),
        StoreConfig::default(),
    );
    let plugin = NodePlugin::new(
        options.node_name.clone(),
        options.kubelet_dir.clone(),
        options.version.clone(),
        Arc::clone(&materializer),
        Arc::new(KubeArtifacts(client.clone())),
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let tls = crate::http::tls_config(options.cert_dir.as_deref())?;
    let listener = tokio::net::TcpListener::bind(options.bind)
        .await
        .map_err(|source| ServeError::Bind {
            addr: options.bind,
            source,
        })?;
    let metrics = Arc::new(crate::http::Metrics::new(prometheus::Registry::new())?);
    let router = crate::http::router(crate::http::HttpState {
        metrics,
        plugin: Arc::clone(&plugin),
        materializer: Arc::clone(&materializer),
    });
    let https = tokio::spawn(crate::http::serve(listener, tls, router, stop_rx.clone()));
    let reporter = tokio::spawn(report_loop(
        Api::<NodeModelStore>::all(client),
        options.node_name.clone(),
        materializer,
        limits,
        stop_rx,
    ));
    let socket = options.csi_socket.clone();
    tracing::info!(socket = %socket.display(), "serving CSI");
    let result = csi::serve(plugin, &socket, shutdown).await;
    let _ = stop_tx.send(true);
    let _ = reporter.await;
    let _ = https.await;
    result.map_err(|source| ServeError::Socket {
        path: socket,
        source,
    })
}

/// Reconciles `ledger/refs` with the mounts that survived a restart (best effort: a failure
/// leaves the ledger as it was, and GC only ever trusts refs).
fn recover_refs(store: &Store) {
    let (Ok(device), Ok(table), Ok(refs)) = (
        crate::recover::device_of(store.root()),
        crate::mount::mount_table(),
        store.refs(),
    ) else {
        tracing::warn!("could not read the mount table or the refs; keeping the ledger as it is");
        return;
    };
    let live = crate::recover::live_mounts(&table, &device);
    let plan = crate::recover::reconcile(&live, &refs);
    for r in &plan.write {
        if let Err(e) = store.write_ref(r) {
            tracing::warn!(volume = %r.volume_id, "recording a surviving mount: {e}");
        }
    }
    for id in &plan.drop {
        if let Err(e) = store.remove_ref(id) {
            tracing::warn!(volume = %id, "dropping a stale mount record: {e}");
        }
    }
    tracing::info!(mounts = live.len(), "recovered mounts");
}

/// Applies the node's spec and writes its status, level-based: every pass starts from what the
/// API server and the disk say now.
async fn report_loop(
    api: Api<NodeModelStore>,
    node: String,
    materializer: Arc<Materializer>,
    limits: Arc<DownloadLimits>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut last_write = Timestamp::UNIX_EPOCH;
    loop {
        let busy = !materializer.jobs().is_empty();
        if let Err(e) = report_once(&api, &node, &materializer, &limits, &mut last_write).await {
            tracing::warn!(node = %node, "status pass: {e}");
        }
        let wait = if busy { BUSY_PASS } else { IDLE_PASS };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = materializer.changed.notified() => {}
            _ = stop.changed() => return,
        }
    }
}

async fn report_once(
    api: &Api<NodeModelStore>,
    node: &str,
    materializer: &Materializer,
    limits: &DownloadLimits,
    last_write: &mut Timestamp,
) -> Result<(), kube::Error> {
    let Some(nms) = api.get_opt(node).await? else {
        tracing::debug!(node, "no NodeModelStore yet");
        return Ok(());
    };
    let invalid = match store_config(&nms.spec) {
        Ok(config) => {
            limits.set(
                nms.spec.download.concurrency,
                nms.spec.download.bytes_per_second,
            );
            materializer.set_config(config.clone());
            None
        }
        Err(why) => Some(why),
    };
    let capacity_low = match &invalid {
        None => {
            materializer
                .collect(0, &materializer.config())
                .await
                .capacity_low
        }
        Some(_) => false,
    };
    let store = materializer.store();
    let published = store.list_published().unwrap_or_default();
    let records = store.digest_records().unwrap_or_default();
    let refs = store.refs().unwrap_or_default();
    let jobs = materializer.jobs();
    let current = nms.status.clone().unwrap_or_default();
    let next = status::build(
        &Observed {
            generation: nms.metadata.generation,
            usage: materializer.usage().ok(),
            published: &published,
            records: &records,
            refs: &refs,
            jobs: &jobs,
            invalid_spec: invalid,
            capacity_low,
            now: Timestamp::now(),
        },
        &current,
    );
    let now = Timestamp::now();
    if !status::should_write(&current, &next, *last_write, now) {
        return Ok(());
    }
    let patch = serde_json::json!({ "status": next });
    api.patch_status(
        node,
        &PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await?;
    *last_write = now;
    Ok(())
}
