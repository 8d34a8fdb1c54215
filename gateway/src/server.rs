//! Running the hub: the embedded API server (its embedded clusters, if any), the mirrors
//! hosted in it before it serves, and the operations API beside its clusters.

use futures::future::{BoxFuture, LocalBoxFuture};
use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use axum::Router;
use gpustack_apiserver::{
    api::caller::TokenAccess,
    server::{self as api_server, ApiServer, Extension, ServerError, ServerOptions},
    store::Store,
};

use crate::{
    hub_store::{HubStore, OpenError, StoreSetting},
    metrics::HubMetrics,
    mirror::{ConnMode, MirrorOptions, StatusBoard, SubscribeError, Subscriptions, Upstream},
    ops::{self, Ops},
};

/// How long an upstream's lease lasts by default: a dead replica's upstreams are mirrored
/// again by another within about this.
pub const DEFAULT_MIRROR_LEASE: std::time::Duration = std::time::Duration::from_secs(15);

/// What the hub serves and where.
#[derive(Clone, Debug)]
pub struct GatewayOptions {
    /// The API server: embedded clusters, data directory, listeners, TLS, tokens.
    pub server: ServerOptions,
    /// Upstream clusters to mirror (the `--upstreams` file), served read-only under their
    /// names; more are subscribed at run time through `/apis/workers`.
    pub upstreams: Vec<Upstream>,
    /// Timeouts and retry schedules of the mirrors.
    pub mirror: MirrorOptions,
    /// How upstreams subscribed without a kubeconfig are reached.
    pub conn_mode: ConnMode,
    /// Directories besides `--data-dir` whose kubeconfigs run-time subscriptions may name
    /// (`--subscription-kubeconfig-dir`).
    pub subscription_kubeconfig_dirs: Vec<PathBuf>,
    /// Where the hub's bookkeeping is kept (`--store`).
    pub store: StoreSetting,
    /// On PostgreSQL, how long a replica's lease of an upstream lasts unless renewed
    /// (`--mirror-lease-duration`): a dead replica's upstreams are taken over after it.
    pub mirror_lease: std::time::Duration,
}

impl GatewayOptions {
    /// Options serving `clusters` from `data_dir` on `bind`, with no upstreams, SQLite bookkeeping and loopback connections.
    pub fn new(clusters: Vec<String>, data_dir: PathBuf, bind: SocketAddr) -> Self {
        GatewayOptions {
            server: ServerOptions::new(clusters, data_dir, bind),
            upstreams: Vec::new(),
            mirror: MirrorOptions::default(),
            conn_mode: ConnMode::Loopback,
            subscription_kubeconfig_dirs: Vec::new(),
            store: StoreSetting::Sqlite,
            mirror_lease: DEFAULT_MIRROR_LEASE,
        }
    }
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// Embedded clusters were asked of a hub on PostgreSQL: they stay on SQLite, in a
    /// gateway of their own.
    #[error(
        "embedded clusters ({0}) are kept on SQLite only: host them in a worker-gateway without --store=postgres://"
    )]
    EmbeddedOnPostgres(String),
    /// A name is both an embedded cluster and an upstream.
    #[error("the name {0} is both an embedded cluster and an upstream")]
    NameClash(String),
    /// The API server could not start.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// An upstream's mirror could not start.
    #[error("starting the mirrors")]
    Subscribe(#[from] SubscribeError),
    /// The hub's store could not be opened.
    #[error("opening the hub's store (--store)")]
    HubStore(#[from] OpenError),
    /// The hub's metrics could not be registered.
    #[error("registering the hub's metrics")]
    Metrics(#[from] prometheus::Error),
}

/// A running hub.
pub struct Gateway {
    server: ApiServer,
    subscriptions: Subscriptions,
    hub: HubStore,
}

/// The hub's part of every listener: the operations API in front, and the mirrors stopped
/// before the store closes.
struct Hub {
    ops: Arc<Ops>,
}

impl Extension for Hub {
    fn router(&self, api: Router, access: TokenAccess) -> Router {
        ops::router(self.ops.clone(), access, api)
    }

    async fn stop(&self) {
        self.ops.subscriptions.stop().await;
    }
}

impl Gateway {
    /// Opens the store, hosts the embedded clusters and the mirrors, and starts serving;
    /// `/metrics` serves `metrics`, with the hub's and the API server's series added to it.
    ///
    /// Boxed here so that its state machine is compiled with this crate: rustc compiles an
    /// async body in the crate that polls it, which would otherwise be the binary, again after
    /// every change here.
    pub fn start(
        opts: GatewayOptions,
        metrics: &prometheus::Registry,
    ) -> LocalBoxFuture<'_, Result<Gateway, GatewayError>> {
        Box::pin(Self::start_serving(opts, metrics))
    }

    async fn start_serving(
        opts: GatewayOptions,
        metrics: &prometheus::Registry,
    ) -> Result<Gateway, GatewayError> {
        let clusters = &opts.server.clusters;
        if let Some(u) = opts.upstreams.iter().find(|u| clusters.contains(&u.name)) {
            return Err(GatewayError::NameClash(u.name.clone()));
        }
        if matches!(opts.store, StoreSetting::Postgres(_)) && !clusters.is_empty() {
            return Err(GatewayError::EmbeddedOnPostgres(clusters.join(", ")));
        }
        let prepared = api_server::prepare(opts.server.clone(), metrics).await?;
        let hub = HubStore::open_replica(prepared.store().clone(), &opts.store, opts.mirror_lease)
            .await?;
        if let Some(leasing) = hub.leasing() {
            metrics.register(Box::new(leasing.held_gauge().clone()))?;
            metrics.register(Box::new(leasing.fencing().refused_batches().clone()))?;
        }
        let subscriptions = Subscriptions::new(
            prepared.hosting().clone(),
            hub.clone(),
            prepared.registry().clone(),
            opts.mirror.clone(),
            opts.conn_mode.clone(),
            clusters.iter().cloned().collect(),
        );
        // Stored mirrors (with their CRDs) are served at once, before their upstreams answer.
        subscriptions.start(opts.upstreams.clone()).await?;
        let ops = Arc::new(Ops {
            subscriptions: subscriptions.clone(),
            store: prepared.store().clone(),
            metrics: HubMetrics::register(metrics, subscriptions.board().clone())?,
            subscription_kubeconfig_dirs: std::iter::once(opts.server.data_dir.clone())
                .chain(opts.subscription_kubeconfig_dirs.iter().cloned())
                .collect(),
            max_body_bytes: opts.server.api.max_body_bytes,
        });
        let server = prepared.serve(Hub { ops }).await?;
        Ok(Gateway {
            server,
            subscriptions,
            hub,
        })
    }

    /// The address actually listened on.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The object store the gateway serves.
    pub fn store(&self) -> &Store {
        self.server.store()
    }

    /// The upstreams' status.
    pub fn workers(&self) -> &StatusBoard {
        self.subscriptions.board()
    }

    /// The upstream mirrors.
    pub fn subscriptions(&self) -> &Subscriptions {
        &self.subscriptions
    }

    /// Where the admin kubeconfig of `cluster` is written.
    pub fn kubeconfig_path(&self, cluster: &str) -> PathBuf {
        self.server.kubeconfig_path(cluster)
    }

    /// Stops accepting, ends watches, drains connections (up to 10 s), stops the mirrors and
    /// closes the stores.
    pub fn shutdown(self) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            self.server.shutdown().await;
            self.hub.close().await;
        })
    }
}
