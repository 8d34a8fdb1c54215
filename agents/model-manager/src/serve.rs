//! The running plugin: the cache, the downloader, the CSI socket, the node's `NodeModelStore`
//! spec applied as it changes, and its status rebuilt and written. The binary hands in the
//! kube client and the paths; nothing here reads flags or the environment.

use futures::future::BoxFuture;
use std::{path::PathBuf, sync::Arc, time::Duration};

use gpustack_api::model_store::{InvalidNodeModelStoreSpec, NodeModelStore, NodeModelStoreSpec};
use gpustack_delegated_auth::{
    metrics_access::MetricsAccess,
    reviews::{Delegated, Ttls},
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, api::PatchParams};

use crate::{
    artifacts::WatchedArtifacts,
    csi::{self, NodePlugin},
    download::{DownloadLimits, Tuning},
    gc::{self, Watermarks},
    hub::HubSettings,
    materializer::{Materializer, StoreConfig},
    status::{self, Observed},
    store::{Store, StoreError},
};

/// How often the spec is re-read and status rebuilt (faster while downloading).
const IDLE_PASS: Duration = Duration::from_secs(60);
const BUSY_PASS: Duration = Duration::from_secs(10);

/// How `model-manager serve` runs on this node.
pub struct Options {
    /// This node's name: the CSI node id, and which `NodeModelStore` applies.
    pub node_name: String,
    /// The kubelet's root directory; mount targets must be under it.
    pub kubelet_dir: PathBuf,
    /// The cache root on the node (the store's layout).
    pub cache_root: PathBuf,
    /// The CSI socket the kubelet dials.
    pub csi_socket: PathBuf,
    /// The version the CSI identity service reports.
    pub version: String,
    /// The HTTPS port's address, and where its certificate pair lives (generated when `None`).
    pub bind: std::net::SocketAddr,
    /// The certificate pair's directory (`tls.crt`, `tls.key`).
    pub cert_dir: Option<PathBuf>,
    /// `/metrics` only to callers the cluster allows `get` on it (`--metrics-auth=delegated`),
    /// else to anyone who reaches the port.
    pub metrics_auth_delegated: bool,
}

/// Why `serve` could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The cache root could not be opened.
    #[error("opening the cache: {0}")]
    Store(#[from] StoreError),
    /// The HTTPS port could not be set up.
    #[error("serving HTTPS: {0}")]
    Http(#[from] crate::http::HttpError),
    /// The HTTPS port could not bind.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The bind error.
        source: std::io::Error,
    },
    /// The CSI socket could not be served.
    #[error("serving the CSI socket {path}: {source}")]
    Socket {
        /// The socket's path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// Why the node's spec cannot be applied: `Ready=False InvalidConfiguration`, and downloads
/// and collection stop until it changes.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The spec itself is invalid.
    #[error(transparent)]
    Spec(#[from] InvalidNodeModelStoreSpec),
    /// The CA bundle ConfigMap is missing or unusable.
    #[error("spec.hub.caBundleConfigMap {namespace}/{name}: {problem}")]
    CaBundle {
        /// The ConfigMap's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// The materializer's configuration from a valid spec; `ca_pem` is the CA bundle's `ca.crt`.
pub fn store_config(
    spec: &NodeModelStoreSpec,
    ca_pem: Option<Vec<u8>>,
) -> Result<StoreConfig, ConfigError> {
    spec.validate()?;
    Ok(StoreConfig {
        hub: HubSettings {
            endpoint: spec.hub.hugging_face_endpoint.clone(),
            https_proxy: spec.hub.https_proxy.clone(),
            no_proxy: spec.hub.no_proxy.clone(),
            ca_pem,
        },
        watermarks: Watermarks {
            high_percent: spec.watermarks.high_percent,
            low_percent: spec.watermarks.low_percent,
        },
        pinned: spec.pinned.clone(),
    })
}

/// `ca.crt` of the spec's CA bundle ConfigMap in the operator's namespace (the client's
/// default namespace: the plugin Pod's own); `None` when the spec names none.
async fn ca_bundle(
    client: &kube::Client,
    spec: &NodeModelStoreSpec,
) -> Result<Option<Vec<u8>>, ConfigError> {
    let name = &spec.hub.ca_bundle_config_map;
    if name.is_empty() {
        return Ok(None);
    }
    let namespace = client.default_namespace().to_owned();
    let problem = |problem: String| ConfigError::CaBundle {
        namespace: namespace.clone(),
        name: name.clone(),
        problem,
    };
    let cm = Api::<ConfigMap>::namespaced(client.clone(), &namespace)
        .get_opt(name)
        .await
        .map_err(|e| problem(e.to_string()))?
        .ok_or_else(|| problem("not found".into()))?;
    ca_of_config_map(&cm, &namespace, name).map(Some)
}

/// The PEM bundle under the key `ca.crt` of the CA bundle ConfigMap `namespace/name`.
pub fn ca_of_config_map(
    cm: &ConfigMap,
    namespace: &str,
    name: &str,
) -> Result<Vec<u8>, ConfigError> {
    cm.data
        .as_ref()
        .and_then(|d| d.get(CA_BUNDLE_KEY))
        .map(|pem| pem.clone().into_bytes())
        .ok_or_else(|| ConfigError::CaBundle {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            problem: format!("has no key {CA_BUNDLE_KEY}"),
        })
}

/// The key of the CA bundle ConfigMap that holds the PEM certificates.
pub const CA_BUNDLE_KEY: &str = "ca.crt";

/// The kubelet's thresholds applied to the watermarks when the cache shares the kubelet's
/// filesystem; the note explains a cap for the Ready condition.
fn kubelet_capped(
    config: &mut StoreConfig,
    spec: &NodeModelStoreSpec,
    shares_kubelet_fs: bool,
    total_bytes: u64,
) -> Option<String> {
    if !shares_kubelet_fs {
        return None;
    }
    let k = spec.kubelet.clone().unwrap_or_default();
    let cap = gc::kubelet_cap(
        &gc::KubeletThresholds {
            nodefs_available: &k.nodefs_available,
            imagefs_available: &k.imagefs_available,
            image_gc_high_percent: k.image_gc_high_threshold_percent,
        },
        total_bytes,
    );
    let capped = gc::capped(&config.watermarks, cap)?;
    let note = format!(
        "high watermark capped at {}% (low {}%) by the kubelet's eviction and image GC thresholds on the shared filesystem",
        capped.high_percent, capped.low_percent
    );
    config.watermarks = capped;
    Some(note)
}

/// Whether two paths are on the same filesystem (device).
fn same_device(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev(),
        _ => false,
    }
}

/// Serves the CSI socket and the HTTPS port, and keeps status and the cache in step with the node's
/// spec, until `shutdown`.
///
/// Boxed here so that its state machine is compiled with this crate: rustc compiles an async
/// body in the crate that polls it, which would otherwise be the binary, again after every
/// change here.
pub fn run(
    options: Options,
    client: kube::Client,
    shutdown: BoxFuture<'static, ()>,
) -> BoxFuture<'static, Result<(), ServeError>> {
    Box::pin(run_until(options, client, shutdown))
}

async fn run_until(
    options: Options,
    client: kube::Client,
    shutdown: BoxFuture<'static, ()>,
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
    // Until the first status pass has applied the node's spec.
    materializer.set_valid(false);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let plugin = NodePlugin::new(
        options.node_name.clone(),
        options.kubelet_dir.clone(),
        options.version.clone(),
        Arc::clone(&materializer),
        WatchedArtifacts::start(client.clone(), stop_rx.clone()),
    );
    let tls = crate::http::tls_config(options.cert_dir.as_deref())?;
    let listener = tokio::net::TcpListener::bind(options.bind)
        .await
        .map_err(|source| ServeError::Bind {
            addr: options.bind,
            source,
        })?;
    let registry = prometheus::Registry::new();
    let grpc = gpustack_serving::grpc_metrics::GrpcMetrics::register(
        &registry,
        "gpustack_model_manager",
        &csi::METHODS,
    )
    .map_err(crate::http::HttpError::from)?;
    let metrics = Arc::new(crate::http::Metrics::new(registry)?);
    materializer.set_outcome_sink(Arc::clone(&metrics) as _);
    let metrics_access = if options.metrics_auth_delegated {
        MetricsAccess::Delegated(Box::new(Delegated::new(client.clone(), Ttls::default())))
    } else {
        MetricsAccess::Open
    };
    let router = crate::http::router(crate::http::HttpState {
        metrics,
        metrics_access: Arc::new(metrics_access),
        plugin: Arc::clone(&plugin),
        materializer: Arc::clone(&materializer),
    });
    // The toolkit's serving: a connection cap, handshake and header deadlines, and an accept
    // loop that backs off when descriptors run out.
    let https = tokio::spawn(gpustack_serving::serve::serve_tls(
        listener,
        tls,
        router,
        stop_rx.clone(),
    ));
    let reporter = tokio::spawn(report_loop(
        Reporter {
            client,
            node: options.node_name.clone(),
            shares_kubelet_fs: same_device(&options.kubelet_dir, &options.cache_root),
            materializer,
            limits,
        },
        stop_rx,
    ));
    let socket = options.csi_socket.clone();
    tracing::info!(socket = %socket.display(), "serving CSI");
    let result = csi::serve(plugin, &socket, grpc, shutdown).await;
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

/// What the status passes work with.
struct Reporter {
    client: kube::Client,
    node: String,
    /// The cache is on the kubelet's filesystem: its thresholds cap the high watermark.
    shares_kubelet_fs: bool,
    materializer: Arc<Materializer>,
    limits: Arc<DownloadLimits>,
}

/// Applies the node's spec and writes its status, level-based: every pass starts from what the
/// API server and the disk say now.
async fn report_loop(r: Reporter, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut last_write = Timestamp::UNIX_EPOCH;
    loop {
        let busy = !r.materializer.jobs().is_empty();
        if let Err(e) = r.report_once(&mut last_write).await {
            tracing::warn!(node = %r.node, "status pass: {e}");
        }
        let wait = if busy { BUSY_PASS } else { IDLE_PASS };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = r.materializer.changed.notified() => {}
            _ = stop.changed() => return,
        }
    }
}

impl Reporter {
    /// The configuration the spec asks for, or why it cannot be applied.
    async fn config(
        &self,
        spec: &NodeModelStoreSpec,
    ) -> Result<(StoreConfig, Option<String>), ConfigError> {
        spec.validate()?;
        let ca = ca_bundle(&self.client, spec).await?;
        let mut config = store_config(spec, ca)?;
        let total = self.materializer.usage().map_or(0, |u| u.total_bytes);
        let note = kubelet_capped(&mut config, spec, self.shares_kubelet_fs, total);
        Ok((config, note))
    }

    async fn report_once(&self, last_write: &mut Timestamp) -> Result<(), kube::Error> {
        let (node, materializer) = (self.node.as_str(), &self.materializer);
        let api = Api::<NodeModelStore>::all(self.client.clone());
        let Some(nms) = api.get_opt(node).await? else {
            tracing::debug!(node, "no NodeModelStore yet");
            return Ok(());
        };
        let (invalid, note) = match self.config(&nms.spec).await {
            Ok((config, note)) => {
                self.limits.set(
                    nms.spec.download.concurrency,
                    nms.spec.download.bytes_per_second,
                );
                materializer.set_config(config);
                materializer.set_valid(true);
                (None, note)
            }
            Err(why) => {
                materializer.set_valid(false);
                (Some(why.to_string()), None)
            }
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
                ready_note: note,
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
}
