//! Running the gateway: open the store, prepare TLS and each embedded cluster's kubeconfig,
//! serve HTTPS until told to stop, then drain connections and close the database.

use std::{
    collections::{HashMap, HashSet},
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::{conn::auto, graceful::GracefulShutdown},
    service::TowerToHyperService,
};
use tokio::{
    net::{TcpListener, UnixListener, UnixStream},
    sync::watch,
    task::JoinHandle,
};
use tokio_rustls::TlsAcceptor;

use crate::{
    api::{self, ApiOptions, ApiState, objects, resources},
    kubeconfig,
    mirror::{Mirror, MirrorOptions, StatusBoard, Upstream},
    store::{ObjectKey, Precondition, Store, StoreError, WriteOp, token_hash},
    tls::{self, TlsError},
};

/// Event-log compaction: every `interval`, keep the newest `keep` events.
#[derive(Clone, Debug)]
pub struct Compaction {
    pub interval: Duration,
    pub keep: u64,
}

/// What to serve and where.
#[derive(Clone, Debug)]
pub struct GatewayOptions {
    /// Embedded clusters to host (DNS labels).
    pub clusters: Vec<String>,
    /// Holds the database, the certificates and the kubeconfigs.
    pub data_dir: PathBuf,
    /// HTTPS address; port 0 picks a free port (see [`Gateway::addr`]).
    pub bind: SocketAddr,
    /// Also serve plain HTTP on this unix socket (mode 0600, no token needed: the file mode is
    /// the access control). Its parent directory must exist; a stale socket is replaced.
    pub unix_socket: Option<PathBuf>,
    pub api: ApiOptions,
    pub compaction: Compaction,
    /// Upstream clusters to mirror, served read-only under their names.
    pub upstreams: Vec<Upstream>,
    pub mirror: MirrorOptions,
}

impl GatewayOptions {
    pub fn new(clusters: Vec<String>, data_dir: PathBuf, bind: SocketAddr) -> Self {
        GatewayOptions {
            clusters,
            data_dir,
            bind,
            unix_socket: None,
            api: ApiOptions::default(),
            compaction: Compaction {
                interval: Duration::from_secs(60),
                keep: 100_000,
            },
            upstreams: Vec::new(),
            mirror: MirrorOptions::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("no embedded cluster and no upstream to serve")]
    NoClusters,
    #[error("the name {0} is both an embedded cluster and an upstream")]
    NameClash(String),
    #[error("creating the data directory {path}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening the store")]
    Store(#[from] StoreError),
    #[error("preparing TLS")]
    Tls(#[from] TlsError),
    #[error("listening on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("serving on the unix socket {path}: {reason}")]
    UnixSocket { path: PathBuf, reason: String },
    #[error("writing the kubeconfig {path}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A running gateway.
pub struct Gateway {
    addr: SocketAddr,
    store: Store,
    data_dir: PathBuf,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    workers: StatusBoard,
}

/// Where the admin kubeconfig of `cluster` is written.
pub fn kubeconfig_path(data_dir: &Path, cluster: &str) -> PathBuf {
    data_dir.join(format!("{cluster}.kubeconfig"))
}

fn server_url(addr: SocketAddr, cluster: &str, only_one: bool) -> String {
    let host = match addr {
        SocketAddr::V4(a) if a.ip().is_unspecified() => "127.0.0.1".to_owned(),
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) if a.ip().is_unspecified() => "[::1]".to_owned(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    };
    if only_one {
        format!("https://{host}:{}", addr.port())
    } else {
        format!("https://{host}:{}/clusters/{cluster}", addr.port())
    }
}

/// The namespaces every cluster starts with.
const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

async fn ensure_namespaces(store: &Store, cluster: &str) -> Result<(), StoreError> {
    let def = resources::builtins()
        .into_iter()
        .find(|d| d.plural == "namespaces")
        .expect("namespaces are built in");
    for ns in INITIAL_NAMESPACES {
        let key = ObjectKey {
            cluster: cluster.into(),
            group: String::new(),
            resource: "namespaces".into(),
            namespace: String::new(),
            name: (*ns).into(),
        };
        if store.get(&key).await?.is_some() {
            continue;
        }
        let uid = format!("{:032x}", rand::random::<u128>());
        let mut obj = objects::prepare_create(
            &def,
            "v1",
            None,
            serde_json::json!({"metadata": {"name": ns}}),
            &uid,
            "",
            jiff::Timestamp::now(),
        )
        .expect("initial namespaces are valid");
        obj["status"] = serde_json::json!({"phase": "Active"});
        match store
            .commit(&key, Precondition::Absent, WriteOp::Put(obj))
            .await
        {
            Ok(_) | Err(StoreError::AlreadyExists) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The cluster's admin token: the one in its kubeconfig if the store knows it, else a new one.
async fn admin_token(
    store: &Store,
    cluster: &str,
    path: &Path,
) -> Result<(String, String), StoreError> {
    let stored = store.cluster_token_hash(cluster).await?;
    if let (Some(token), Some(hash)) = (kubeconfig::read_token(path), stored.as_ref())
        && token_hash(&token) == *hash
    {
        return Ok((token, hash.clone()));
    }
    let token = kubeconfig::new_token();
    store.set_cluster_token(cluster, &token).await?;
    let hash = token_hash(&token);
    Ok((token, hash))
}

impl Gateway {
    /// Opens the store, writes kubeconfigs and starts serving.
    pub async fn start(opts: GatewayOptions) -> Result<Gateway, GatewayError> {
        if opts.clusters.is_empty() && opts.upstreams.is_empty() {
            return Err(GatewayError::NoClusters);
        }
        if let Some(u) = opts
            .upstreams
            .iter()
            .find(|u| opts.clusters.contains(&u.name))
        {
            return Err(GatewayError::NameClash(u.name.clone()));
        }
        std::fs::create_dir_all(&opts.data_dir).map_err(|source| GatewayError::DataDir {
            path: opts.data_dir.clone(),
            source,
        })?;
        let store = Store::open(&opts.data_dir.join("gateway.db")).await?;
        let tls = tls::load_or_create(&opts.data_dir.join("tls"))?;
        let listener = TcpListener::bind(opts.bind)
            .await
            .map_err(|source| GatewayError::Bind {
                addr: opts.bind,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| GatewayError::Bind {
            addr: opts.bind,
            source,
        })?;

        let mut clusters = HashMap::new();
        // The fleet view makes a single upstream two clusters.
        let only_one = opts.clusters.len() == 1 && opts.upstreams.is_empty();
        let mut mirrored: Vec<String> = opts.upstreams.iter().map(|u| u.name.clone()).collect();
        if !mirrored.is_empty() {
            mirrored.push(crate::mirror::fleet::FLEET.to_owned());
        }
        for cluster in opts.clusters.iter().chain(&mirrored) {
            let is_mirror = mirrored.contains(cluster);
            if !is_mirror {
                ensure_namespaces(&store, cluster).await?;
            }
            let path = kubeconfig_path(&opts.data_dir, cluster);
            let (token, hash) = admin_token(&store, cluster, &path).await?;
            let text = kubeconfig::render(
                cluster,
                &server_url(addr, cluster, only_one),
                &tls.ca_pem,
                &token,
            );
            kubeconfig::write(&path, &text).map_err(|source| GatewayError::Kubeconfig {
                path: path.clone(),
                source,
            })?;
            if is_mirror {
                tracing::info!(cluster, kubeconfig = %path.display(), "serving the mirror of an upstream");
            } else {
                tracing::info!(cluster, kubeconfig = %path.display(), "embedded cluster ready");
            }
            clusters.insert(cluster.clone(), hash);
        }
        let unix = match &opts.unix_socket {
            Some(path) => Some(bind_unix(path)?),
            None => None,
        };
        let state = ApiState {
            store: store.clone(),
            registry: resources::Registry::new(),
            clusters,
            options: opts.api.clone(),
            require_token: true,
            read_only: mirrored.iter().cloned().collect::<HashSet<_>>(),
            workers: StatusBoard::new(opts.mirror.probe_interval),
        };
        state.load_crds().await?;
        let workers = state.workers.clone();
        let mirrors: Vec<JoinHandle<()>> = opts
            .upstreams
            .iter()
            .map(|u| {
                workers.add(&u.name);
                let mirror = Mirror {
                    upstream: u.clone(),
                    store: store.clone(),
                    registry: state.registry.clone(),
                    board: workers.clone(),
                    options: opts.mirror.clone(),
                };
                tokio::spawn(mirror.run())
            })
            .collect();
        let unix_router = api::router(Arc::new(ApiState {
            require_token: false,
            ..state.clone()
        }));
        let router = api::router(Arc::new(state));

        let (stop, stop_rx) = watch::channel(false);
        let acceptor = TlsAcceptor::from(tls.config);
        let compaction = tokio::spawn(compact_periodically(store.clone(), opts.compaction.clone()));
        let task_store = store.clone();
        let task = tokio::spawn(async move {
            let listeners = Listeners {
                tcp: listener,
                acceptor,
                router,
                unix,
                unix_router,
            };
            serve(listeners, stop_rx, &task_store).await;
            compaction.abort();
            for m in mirrors {
                m.abort();
            }
            task_store.close().await;
        });
        tracing::info!(%addr, "serving HTTPS");
        Ok(Gateway {
            addr,
            store,
            data_dir: opts.data_dir,
            stop,
            task,
            workers,
        })
    }

    /// The address actually listened on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The upstreams' status.
    pub fn workers(&self) -> &StatusBoard {
        &self.workers
    }

    pub fn kubeconfig_path(&self, cluster: &str) -> PathBuf {
        kubeconfig_path(&self.data_dir, cluster)
    }

    /// Stops accepting, ends watches, drains connections (up to 10 s) and closes the store.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn compact_periodically(store: Store, policy: Compaction) {
    let mut tick = tokio::time::interval(policy.interval);
    tick.tick().await;
    loop {
        tick.tick().await;
        if let Err(e) = store.compact(policy.keep).await {
            tracing::warn!(error = %e, "event log compaction failed");
        }
    }
}

/// Binds `path` for the owner only, replacing a stale socket; its parent must exist.
fn bind_unix(path: &Path) -> Result<UnixListener, GatewayError> {
    use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
    let fail = |reason: String| GatewayError::UnixSocket {
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
    let staged = private.join("s");
    let bound = UnixListener::bind(&staged)
        .map_err(|e| e.to_string())
        .and_then(|l| {
            std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| format!("setting mode 0600: {e}"))?;
            std::fs::rename(&staged, path).map_err(|e| format!("moving into place: {e}"))?;
            Ok(l)
        });
    let _ = std::fs::remove_dir_all(&private);
    let listener = bound.map_err(fail)?;
    tracing::info!(path = %path.display(), "serving plain HTTP on the unix socket");
    Ok(listener)
}

/// The owner-only directory a socket in `parent` is bound in before it is moved into place:
/// beside it (a rename does not cross filesystems) and named after the process, so that two
/// gateways binding in one directory do not share it. Kept short: a socket path is limited to
/// about 100 bytes.
fn private_bind_dir(parent: &Path, pid: u32) -> PathBuf {
    parent.join(format!(".gw-bind-{pid}"))
}

struct Listeners {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    router: axum::Router,
    unix: Option<UnixListener>,
    unix_router: axum::Router,
}

async fn accept_unix(l: &Option<UnixListener>) -> std::io::Result<UnixStream> {
    match l {
        Some(l) => l.accept().await.map(|(s, _)| s),
        None => std::future::pending().await,
    }
}

async fn serve(listeners: Listeners, mut stop: watch::Receiver<bool>, store: &Store) {
    let Listeners {
        tcp,
        acceptor,
        router,
        unix,
        unix_router,
    } = listeners;
    let graceful = GracefulShutdown::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = accept_unix(&unix) => {
                let stream = match accepted {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "unix socket accept failed");
                        continue;
                    }
                };
                let service = TowerToHyperService::new(unix_router.clone());
                let watcher = graceful.watcher();
                tokio::spawn(async move {
                    let builder = auto::Builder::new(TokioExecutor::new());
                    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                    if let Err(e) = watcher.watch(conn.into_owned()).await {
                        tracing::debug!(error = %e, "unix connection ended with an error");
                    }
                });
            }
            accepted = tcp.accept() => {
                let (tcp, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let _ = tcp.set_nodelay(true);
                let acceptor = acceptor.clone();
                let service = TowerToHyperService::new(router.clone());
                let watcher = graceful.watcher();
                tokio::spawn(async move {
                    let stream = match acceptor.accept(tcp).await {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            return;
                        }
                    };
                    let builder = auto::Builder::new(TokioExecutor::new());
                    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                    if let Err(e) = watcher.watch(conn.into_owned()).await {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                });
            }
        }
    }
    drop(tcp);
    drop(unix);
    store.end_watches();
    if tokio::time::timeout(Duration::from_secs(10), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after 10s; closing anyway");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let first = bind_unix(&path).unwrap();
        drop(first);
        // The socket left behind by a stopped gateway is replaced.
        let _listener = bind_unix(&path).unwrap();
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

    #[test]
    fn server_urls() {
        let a: SocketAddr = "0.0.0.0:9443".parse().unwrap();
        assert_eq!(server_url(a, "demo", true), "https://127.0.0.1:9443");
        assert_eq!(
            server_url(a, "demo", false),
            "https://127.0.0.1:9443/clusters/demo"
        );
        let b: SocketAddr = "[::]:1".parse().unwrap();
        assert_eq!(server_url(b, "x", true), "https://[::1]:1");
    }
}
