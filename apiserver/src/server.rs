//! Running the API server: open the store, prepare TLS and each embedded cluster's kubeconfig,
//! serve HTTPS until told to stop, then drain connections and close the database.
//!
//! In two steps, so that a server built on this one (the hub) can host what it adds (its
//! mirrors) before anything is served: [`prepare`] opens, hosts and binds; [`Prepared::serve`]
//! serves, with an [`Extension`]'s endpoints beside the clusters'.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use axum::Router;
use futures::future::BoxFuture;
use gpustack_serving::{serve, trace_context::ServerSpans};

/// Connection caps and deadlines of the listeners ([`ServerOptions::serving`]).
pub use gpustack_serving::serve::Limits as ServingLimits;
use tokio::{
    net::{TcpListener, UnixListener},
    sync::watch,
    task::JoinHandle,
};
use tokio_rustls::TlsAcceptor;

use crate::{
    api::{
        self, AdmissionState, ApiOptions, ApiState, AuthState, Core,
        aggregation::{
            Aggregator,
            availability::Checker,
            front_proxy::{self, FrontProxyError},
        },
        caller::TokenAccess,
        cluster_defaults::{self, ensure_object},
        clusters::ServedClusters,
        pipeline,
        request_metrics::{self, RequestMetrics},
        resources,
        stored_kinds::StoredKinds,
    },
    hosting::{Hosting, HostingError},
    kubeconfig,
    registry::Registry,
    store::{ObjectKey, Precondition, Store, StoreError, WriteOp, token_hash},
    tls::{self, TlsError},
};

/// Event-log compaction: every `interval`, keep the newest `keep` events, and no more of them
/// than fit in `max_bytes`; then give freed space back to the file system. Also when embedded
/// clusters' Events older than `event_ttl` are deleted.
#[derive(Clone, Debug)]
pub struct Compaction {
    /// How often compaction runs.
    pub interval: Duration,
    /// How many of the newest events each compaction keeps at most.
    pub keep: u64,
    /// The most bytes of event bodies a compaction keeps.
    pub max_bytes: u64,
    /// How long an embedded cluster keeps an Event object before deleting it.
    pub event_ttl: Duration,
}

/// The event log's default size bound: a few minutes of a fleet's churn at 2 KB per change,
/// small next to the objects of a fleet of a million.
pub const DEFAULT_EVENT_LOG_BYTES: u64 = 256 << 20;

/// What to serve and where.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Embedded clusters to host (DNS labels).
    pub clusters: Vec<String>,
    /// Holds the database, the certificates and the kubeconfigs.
    pub data_dir: PathBuf,
    /// HTTPS address; port 0 picks a free port (see [`ApiServer::addr`]).
    pub bind: SocketAddr,
    /// Also serve plain HTTP on this unix socket (mode 0600, no token needed: the file mode is
    /// the access control). Its parent directory must exist; a stale socket is replaced.
    pub unix_socket: Option<PathBuf>,
    /// Tunables of the API surface (watch timeouts and caps, body size).
    pub api: ApiOptions,
    /// How the event log is bounded.
    pub compaction: Compaction,
    /// `--cert-dir`: serve its `tls.crt`/`tls.key` instead of a generated certificate
    /// (reloaded when they change).
    pub cert_dir: Option<PathBuf>,
    /// How long a generated serving certificate is valid; it is renewed at two thirds of that.
    pub serving_cert_lifetime: Duration,
    /// Holds the bearer token that may do anything over HTTPS; created (random, mode 0600)
    /// if missing.
    pub token_file: Option<PathBuf>,
    /// Connection caps and deadlines of every listener.
    pub serving: serve::Limits,
}

impl ServerOptions {
    /// Options for hosting `clusters` with data in `data_dir`, serving HTTPS on `bind`; everything else at its default.
    pub fn new(clusters: Vec<String>, data_dir: PathBuf, bind: SocketAddr) -> Self {
        ServerOptions {
            clusters,
            data_dir,
            bind,
            unix_socket: None,
            api: ApiOptions::default(),
            compaction: Compaction {
                interval: Duration::from_secs(60),
                keep: 100_000,
                max_bytes: DEFAULT_EVENT_LOG_BYTES,
                event_ttl: Duration::from_secs(3600),
            },
            serving: serve::Limits::default(),
            cert_dir: None,
            serving_cert_lifetime: DEFAULT_SERVING_CERT_LIFETIME,
            token_file: None,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The data directory could not be created.
    #[error("creating the data directory {path}")]
    DataDir {
        /// The data directory.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The store could not be opened.
    #[error("opening the store")]
    Store(#[from] StoreError),
    /// The serving certificates could not be made or loaded.
    #[error("preparing TLS")]
    Tls(#[from] TlsError),
    /// The HTTPS address could not be bound.
    #[error("listening on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The unix socket could not be served.
    #[error("serving on the unix socket {path}: {reason}")]
    UnixSocket {
        /// The socket's path.
        path: PathBuf,
        /// Why it failed.
        reason: String,
    },
    /// An embedded cluster could not be hosted.
    #[error("hosting a cluster")]
    Hosting(#[from] HostingError),
    /// The clusters' front-proxy certificates could not be made or loaded.
    #[error("the front-proxy identity")]
    FrontProxy(#[from] FrontProxyError),
    /// The admin token file could not be read or created.
    #[error("the token file {path}: {reason}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why it failed.
        reason: String,
    },
    /// The request metrics could not be registered.
    #[error("registering the request metrics")]
    Metrics(#[from] prometheus::Error),
}

/// A running API server.
pub struct ApiServer {
    addr: SocketAddr,
    store: Store,
    data_dir: PathBuf,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// What a server built on this one adds: endpoints of its own beside the clusters' on every
/// listener, and work to stop before the store closes.
pub trait Extension: Send + Sync + 'static {
    /// One listener's router: `api` (the clusters) with what the extension serves beside it;
    /// `access` tells that listener's callers apart by their tokens.
    fn router(&self, api: Router, access: TokenAccess) -> Router;

    /// Stops what the extension runs; the store closes once this returns.
    fn stop(&self) -> impl Future<Output = ()> + Send;
}

/// No extension: the clusters alone.
impl Extension for () {
    fn router(&self, api: Router, _: TokenAccess) -> Router {
        api
    }

    async fn stop(&self) {}
}

pub use crate::hosting::kubeconfig_path;

/// The namespaces every cluster starts with.
const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// What every cluster starts with: its namespaces, the default RBAC objects
/// ([`api::auth::defaults`]) and what [`cluster_defaults`] adds (the API's Service and
/// endpoints at `addr`, each namespace's account and CA certificate `ca_pem`).
async fn ensure_initial_objects(
    store: &Store,
    cluster: &str,
    addr: SocketAddr,
    ca_pem: &str,
) -> Result<(), StoreError> {
    for ns in INITIAL_NAMESPACES {
        let body = serde_json::json!({"metadata": {"name": ns}});
        let status = serde_json::json!({"phase": "Active"});
        ensure_object(store, cluster, "namespaces", None, body, Some(status)).await?;
    }
    for role in api::auth::defaults::cluster_roles() {
        ensure_object(store, cluster, "clusterroles", None, role, None).await?;
    }
    for binding in api::auth::defaults::cluster_role_bindings() {
        ensure_object(store, cluster, "clusterrolebindings", None, binding, None).await?;
    }
    for (namespace, role) in api::auth::defaults::roles() {
        ensure_object(store, cluster, "roles", Some(namespace), role, None).await?;
    }
    cluster_defaults::seed_cluster(store, cluster, addr, ca_pem).await
}

/// Writes `kube-system/extension-apiserver-authentication` (what extension API servers trust)
/// unless it already says so.
async fn publish_authentication(
    store: &Store,
    cluster: &str,
    client_ca: &str,
    front_proxy_ca: &str,
) -> Result<(), StoreError> {
    let data = front_proxy::configmap_data(client_ca, front_proxy_ca);
    let key = ObjectKey {
        cluster: cluster.into(),
        group: String::new(),
        resource: "configmaps".into(),
        namespace: "kube-system".into(),
        name: front_proxy::CONFIGMAP.into(),
    };
    let wanted = serde_json::to_value(&data)?;
    let (rv, mut current) = match store.get(&key).await? {
        Some((_, current)) if current["data"] == wanted => return Ok(()),
        Some(found) => found,
        None => {
            let body = front_proxy::configmap(&data);
            return ensure_object(
                store,
                cluster,
                "configmaps",
                Some("kube-system"),
                body,
                None,
            )
            .await;
        }
    };
    current["data"] = wanted;
    match store
        .commit(&key, Precondition::At(rv), WriteOp::Put(current))
        .await
    {
        // Another writer got there first; the next start settles it.
        Ok(_) | Err(StoreError::Conflict { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The `--token-file` token: read from the file, or a new random token written there (mode
/// 0600) when it does not exist.
fn admin_token(path: &Path) -> Result<String, ServerError> {
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |reason: String| ServerError::TokenFile {
        path: path.to_owned(),
        reason,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let token = text.trim();
            if token.is_empty() || token.contains(char::is_whitespace) {
                return Err(fail("must hold one token on one line".into()));
            }
            Ok(token.to_owned())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let token = kubeconfig::new_token();
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(|e| fail(format!("creating it: {e}")))?;
            std::io::Write::write_all(&mut f, format!("{token}\n").as_bytes())
                .map_err(|e| fail(format!("writing it: {e}")))?;
            tracing::info!(path = %path.display(), "wrote a new admin token");
            Ok(token)
        }
        Err(e) => Err(fail(e.to_string())),
    }
}

/// An API server opened, its clusters hosted and its listeners bound, not serving yet.
pub struct Prepared {
    opts: ServerOptions,
    store: Store,
    tls: tls::ServingTls,
    listener: TcpListener,
    unix: Option<StagedUnix>,
    hosting: Hosting,
    aggregator: Aggregator,
    state: ApiState,
    metrics: RequestMetrics,
}

/// Opens the store, writes kubeconfigs, hosts the embedded clusters and binds the listeners;
/// the requests answered are counted in `metrics`.
///
/// This and the other futures the hub awaits from this crate are boxed here: async bodies are
/// compiled in the crate that polls them, so the hub's crate compiled the store's writer, its
/// PostgreSQL mirror and the HTTP servers again for itself (a quarter of its LLVM IR; issue
/// 41's build time).
pub fn prepare(
    opts: ServerOptions,
    metrics: &prometheus::Registry,
) -> BoxFuture<'_, Result<Prepared, ServerError>> {
    Box::pin(prepared(opts, metrics))
}

async fn prepared(
    opts: ServerOptions,
    metrics: &prometheus::Registry,
) -> Result<Prepared, ServerError> {
    let request_metrics = RequestMetrics::register(metrics)?;
    std::fs::create_dir_all(&opts.data_dir).map_err(|source| ServerError::DataDir {
        path: opts.data_dir.clone(),
        source,
    })?;
    let admin_token = match &opts.token_file {
        Some(path) => Some(admin_token(path)?),
        None => None,
    };
    let store = Store::open(&opts.data_dir.join("gateway.db")).await?;
    store.commit_metrics().register(metrics)?;
    let tls = match &opts.cert_dir {
        Some(dir) => tls::load_cert_dir(dir)?,
        None => tls::load_or_create(&opts.data_dir.join("tls"), opts.serving_cert_lifetime)?,
    };
    let listener =
        gpustack_serving::listen::bind(opts.bind).map_err(|source| ServerError::Bind {
            addr: opts.bind,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServerError::Bind {
        addr: opts.bind,
        source,
    })?;

    let hosting = Hosting {
        store: store.clone(),
        data_dir: opts.data_dir.clone(),
        addr,
        ca_pem: tls.ca_pem.clone(),
        served: ServedClusters::default(),
        // The only embedded cluster is served at the root too; mirrors never are.
        root: (opts.clusters.len() == 1).then(|| opts.clusters[0].clone()),
    };
    if let Some(token) = &admin_token {
        let path = hosting.write_admin_kubeconfig(token)?;
        tracing::info!(kubeconfig = %path.display(), "the admin token's kubeconfig");
    }
    for cluster in &opts.clusters {
        ensure_initial_objects(&store, cluster, addr, &tls.ca_pem).await?;
        let path = hosting.host(cluster, false).await?;
        tracing::info!(cluster, kubeconfig = %path.display(), "embedded cluster ready");
    }
    let unix = match &opts.unix_socket {
        Some(path) => Some(bind_unix(path)?),
        None => None,
    };
    let aggregator = Aggregator::new(&opts.api.aggregation, opts.api.max_watch_timeout);
    for cluster in &opts.clusters {
        let identity = front_proxy::load(&store, cluster).await?;
        publish_authentication(&store, cluster, &tls.ca_pem, &identity.ca_pem).await?;
        aggregator.set_identity(cluster, identity);
    }
    let state = ApiState {
        core: Arc::new(Core {
            store: store.clone(),
            registry: resources::Registry::new(),
            served: hosting.served.clone(),
            root: hosting.root.clone(),
            options: opts.api.clone(),
            root_ca_pem: tls.ca_pem.clone(),
            kinds: StoredKinds::new(store.clone()),
            collector: Arc::new(crate::api::handlers::new_collector()),
            patterns: Default::default(),
        }),
        auth: Arc::new(AuthState {
            require_token: true,
            admin_token_hash: admin_token.as_deref().map(token_hash),
            watches: Default::default(),
        }),
        admission: Arc::new(AdmissionState {
            webhooks: crate::api::admission::Admission::with_metrics(metrics)?,
            cel_slots: Default::default(),
        }),
        aggregator: aggregator.clone(),
    };
    Ok(Prepared {
        opts,
        store,
        tls,
        listener,
        unix,
        hosting,
        aggregator,
        state,
        metrics: request_metrics,
    })
}

impl Prepared {
    /// The opened store, for what is set up on it before serving (the hub's own store).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Which clusters are served; what is hosted here before [`Prepared::serve`] is served at
    /// once.
    pub fn hosting(&self) -> &Hosting {
        &self.hosting
    }

    /// The kinds each cluster serves.
    pub fn registry(&self) -> &Registry {
        &self.state.core.registry
    }

    /// Serves every listener until [`ApiServer::shutdown`], with `extension`'s endpoints beside
    /// the clusters'.
    pub fn serve<E: Extension>(
        self,
        extension: E,
    ) -> BoxFuture<'static, Result<ApiServer, ServerError>> {
        let extension = Arc::new(extension);
        let stopping = extension.clone();
        self.serve_beside(
            Box::new(move |api, access| extension.router(api, access)),
            Box::new(move || Box::pin(async move { stopping.stop().await })),
        )
    }

    /// [`Prepared::serve`] with the extension's two parts as trait objects. Not generic, so that
    /// the boxing, and with it the servers' whole run, is compiled here once rather than in
    /// each extension's crate.
    fn serve_beside(
        self,
        extension_router: Box<dyn Fn(Router, TokenAccess) -> Router + Send + Sync>,
        stop_extension: Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>,
    ) -> BoxFuture<'static, Result<ApiServer, ServerError>> {
        Box::pin(self.serve_with(extension_router, stop_extension))
    }

    async fn serve_with(
        self,
        extension_router: Box<dyn Fn(Router, TokenAccess) -> Router + Send + Sync>,
        stop_extension: Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>,
    ) -> Result<ApiServer, ServerError> {
        let Prepared {
            opts,
            store,
            tls,
            listener,
            unix,
            hosting: _,
            aggregator,
            state,
            metrics,
        } = self;
        // Whatever was hosted since (stored mirrors, with their CRDs) is served at once.
        state.core.load_crds().await?;
        api::resume_collection(&state);
        let listener_router = |state: ApiState| {
            let access = state.access();
            extension_router(api::router(state), access)
                .layer(axum::middleware::from_fn_with_state(
                    metrics.clone(),
                    request_metrics::count_and_refuse_unknown_methods,
                ))
                .layer(ServerSpans::http(pipeline::route_template))
        };
        // The owner-only socket needs no token; its callers' watches count with the others'.
        let unix_router = listener_router(ApiState {
            auth: Arc::new(AuthState {
                require_token: false,
                admin_token_hash: state.auth.admin_token_hash.clone(),
                watches: state.auth.watches.clone(),
            }),
            ..state.clone()
        });
        let collector = state.core.collector.clone();
        let router = listener_router(state);
        let addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: opts.bind,
            source,
        })?;

        // Nothing is left to fail or wait for: the socket goes where clients look for it.
        let unix = unix.map(StagedUnix::publish).transpose()?;
        let (stop, stop_rx) = watch::channel(false);
        let acceptor = TlsAcceptor::from(tls.config);
        let renewal = tokio::spawn(tls::keep_fresh(tls.renewal, stop_rx.clone()));
        let compaction = tokio::spawn(compact_periodically(
            store.clone(),
            opts.compaction.clone(),
            opts.clusters.clone(),
        ));
        let checker = tokio::spawn(
            Checker {
                store: store.clone(),
                aggregator,
                clusters: opts.clusters.clone(),
                interval: opts.api.aggregation.check_interval,
            }
            .run(stop_rx.clone()),
        );
        let role_aggregation = tokio::spawn(api::auth::role_aggregation::run(
            store.clone(),
            opts.clusters.clone(),
            stop_rx.clone(),
        ));
        let task_store = store.clone();
        let limits = opts.serving.clone();
        let task = tokio::spawn(async move {
            let mut endpoints = vec![serve::Endpoint {
                listener: serve::Listener::Tls {
                    tcp: listener,
                    tls: acceptor,
                },
                router,
            }];
            if let Some(unix) = unix {
                endpoints.push(serve::Endpoint {
                    listener: serve::Listener::Unix(unix),
                    router: unix_router,
                });
            }
            let watches = task_store.clone();
            serve::serve(endpoints, limits, stop_rx, move || watches.end_watches()).await;
            compaction.abort();
            checker.abort();
            role_aggregation.abort();
            renewal.abort();
            stop_extension().await;
            // Collection under way may finish; what it leaves is resumed after a restart.
            collector.finish(COLLECTION_GRACE).await;
            task_store.close().await;
        });
        tracing::info!(%addr, "serving HTTPS");
        Ok(ApiServer {
            addr,
            store,
            data_dir: opts.data_dir,
            stop,
            task,
        })
    }
}

impl ApiServer {
    /// Opens the store, writes kubeconfigs and starts serving the clusters alone (their
    /// request metrics counted, but served by no one).
    pub fn start(opts: ServerOptions) -> BoxFuture<'static, Result<ApiServer, ServerError>> {
        Box::pin(async move {
            prepare(opts, &prometheus::Registry::new())
                .await?
                .serve(())
                .await
        })
    }

    /// The address actually listened on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The store the server serves from, for in-process readers and writers.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Where the admin kubeconfig of `cluster` is written.
    pub fn kubeconfig_path(&self, cluster: &str) -> PathBuf {
        kubeconfig_path(&self.data_dir, cluster)
    }

    /// Stops accepting, ends watches, drains connections (up to 10 s) and closes the store.
    pub fn shutdown(self) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let _ = self.stop.send(true);
            let _ = self.task.await;
        })
    }
}

/// How long a generated serving certificate is valid unless told otherwise: a year.
pub const DEFAULT_SERVING_CERT_LIFETIME: Duration = Duration::from_secs(365 * 86_400);

/// How long a shutdown lets the garbage collector's running passes finish.
const COLLECTION_GRACE: Duration = Duration::from_secs(5);

async fn compact_periodically(store: Store, policy: Compaction, embedded: Vec<String>) {
    let mut tick = tokio::time::interval(policy.interval);
    tick.tick().await;
    loop {
        tick.tick().await;
        let cutoff = jiff::Timestamp::now()
            .checked_sub(policy.event_ttl)
            .unwrap_or(jiff::Timestamp::MIN);
        for cluster in &embedded {
            match store.expire_events(cluster, cutoff).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(cluster, expired = n, "expired events"),
                Err(e) => tracing::warn!(cluster, error = %e, "expiring events failed"),
            }
        }
        match store
            .expire_tokens(jiff::Timestamp::now().as_second())
            .await
        {
            Ok(0) => {}
            Ok(n) => tracing::debug!(expired = n, "forgot expired ServiceAccount tokens"),
            Err(e) => tracing::warn!(error = %e, "forgetting expired tokens failed"),
        }
        if let Err(e) = store.compact_within(policy.keep, policy.max_bytes).await {
            tracing::warn!(error = %e, "event log compaction failed");
        }
        match store.reclaim().await {
            Ok(free) => tracing::debug!(free_pages = free, "reclaimed disk space"),
            Err(e) => tracing::warn!(error = %e, "reclaiming disk space failed"),
        }
    }
}

/// A unix listener bound and listening at a private staging path; [`StagedUnix::publish`] moves
/// it to its public path once the server accepts. Until then a client finds no socket there
/// and its connect fails at once, instead of waiting in the backlog of a server still starting
/// (a restarted hub gateway opens its store and hosts its mirrors first: the hub worker's fleet
/// reads would wait that long).
struct StagedUnix {
    listener: Option<UnixListener>,
    path: PathBuf,
    private: PathBuf,
}

impl StagedUnix {
    fn staged(&self) -> PathBuf {
        self.private.join("s")
    }

    /// Moves the socket into place; the listener to accept on.
    fn publish(mut self) -> Result<UnixListener, ServerError> {
        std::fs::rename(self.staged(), &self.path).map_err(|e| ServerError::UnixSocket {
            path: self.path.clone(),
            reason: format!("moving into place: {e}"),
        })?;
        tracing::info!(path = %self.path.display(), "serving plain HTTP on the unix socket");
        Ok(self.listener.take().expect("published once"))
    }
}

impl Drop for StagedUnix {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.private);
    }
}

/// Binds `path` for the owner only, staged beside it (see [`StagedUnix`]), after removing a
/// stale socket there; its parent must exist.
fn bind_unix(path: &Path) -> Result<StagedUnix, ServerError> {
    use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
    let fail = |reason: String| ServerError::UnixSocket {
        path: path.to_owned(),
        reason,
    };
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(fail(format!(
            "the directory {} does not exist",
            parent.display()
        )));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path)
            .map_err(|e| fail(format!("removing the stale socket: {e}")))?,
        Ok(_) => return Err(fail("a file that is not a socket is in the way".into())),
        Err(_) => {}
    }
    // bind() creates the socket with the process umask's mode (often 0755 or 0777), and anyone
    // who can reach it then may connect without a token. So it is bound inside a directory
    // only the owner can enter, narrowed to 0600 there, and only then renamed into place: at
    // its public path it is never looser than 0600. (A umask change would do the same, but
    // the umask is process-wide and would also narrow files other threads create meanwhile.)
    let private = private_bind_dir(parent, std::process::id());
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(|e| fail(format!("creating {}: {e}", private.display())))?;
    let mut staged = StagedUnix {
        listener: None,
        path: path.to_owned(),
        private,
    };
    let at = staged.staged();
    let listener = UnixListener::bind(&at).map_err(|e| fail(e.to_string()))?;
    std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| fail(format!("setting mode 0600: {e}")))?;
    staged.listener = Some(listener);
    Ok(staged)
}

/// The owner-only directory a socket in `parent` is bound in before it is moved into place:
/// beside it (a rename does not cross filesystems) and named after the process, so that two
/// gateways binding in one directory do not share it. Kept short: a socket path is limited to
/// about 100 bytes.
fn private_bind_dir(parent: &Path, pid: u32) -> PathBuf {
    parent.join(format!(".gw-bind-{pid}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::UnixStream;

    #[test]
    fn sockets_are_bound_beside_their_path() {
        assert_eq!(
            private_bind_dir(Path::new("/run/gpustack"), 42),
            Path::new("/run/gpustack/.gw-bind-42")
        );
    }

    #[tokio::test]
    async fn unix_socket_is_owner_only_and_replaces_a_stale_one() {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        // Loosen the directory's default so that a socket bound in place would be 0755 or
        // looser: the bind must not depend on the umask.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("gw.sock");
        let first = bind_unix(&path).unwrap().publish().unwrap();
        drop(first);
        // The socket left behind by a stopped gateway is replaced; until the server publishes
        // it nothing is there to connect to (no wait in the backlog of a server not serving).
        let staged = bind_unix(&path).unwrap();
        assert!(std::fs::symlink_metadata(&path).is_err());
        assert!(UnixStream::connect(&path).await.is_err());
        let _listener = staged.publish().unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("gw.sock")]);
        UnixStream::connect(&path).await.unwrap();
    }
}
