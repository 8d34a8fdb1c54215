//! Reaching the hub's `worker-gateway`: over its unix socket (plain HTTP; the socket's file mode
//! is the access control, so no token is sent), or over HTTPS with a kubeconfig naming its
//! address, its CA and a bearer token (the `_admin.kubeconfig` the gateway writes). Two clients
//! come out: one at the gateway's root (`/apis/workers`) and one at its fleet view
//! (`/clusters/_fleet/`), where the upstreams' objects are served as one Kubernetes API.

use std::path::{Path, PathBuf};

use kube::{
    Client,
    client::middleware::BaseUriLayer,
    config::{KubeConfigOptions, Kubeconfig},
};

/// The gateway's fleet view, under its root.
pub const FLEET_PREFIX: &str = "/clusters/_fleet";

/// Where the gateway is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// Its `--bind-unix-path`.
    Socket(PathBuf),
    /// A kubeconfig for its HTTPS endpoint.
    Kubeconfig(PathBuf),
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Socket(p) => write!(f, "unix socket {}", p.display()),
            Address::Kubeconfig(p) => write!(f, "the gateway named in {}", p.display()),
        }
    }
}

/// Why the gateway cannot be reached.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The gateway's kubeconfig could not be read.
    #[error("reading the gateway kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The kubeconfig's path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The gateway's address is not a URL (the address).
    #[error("the gateway address {0} is not a valid URL")]
    Url(String),
    /// The client could not be built.
    #[error("building the gateway client: {0}")]
    Client(#[source] kube::Error),
}

/// Clients of one gateway.
#[derive(Clone)]
pub struct Clients {
    /// At the gateway's root.
    pub root: Client,
    /// At its fleet view: `/apis/...` paths read every upstream's mirror.
    pub fleet: Client,
}

/// Builds the clients; nothing is sent yet (the gateway may come later).
pub async fn connect(address: &Address) -> Result<Clients, ConnectError> {
    match address {
        Address::Socket(path) => Ok(Clients {
            root: over_socket(path, "/"),
            fleet: over_socket(path, FLEET_PREFIX),
        }),
        Address::Kubeconfig(path) => {
            let fail = |source| ConnectError::Kubeconfig {
                path: path.clone(),
                source,
            };
            let kubeconfig = Kubeconfig::read_from(path).map_err(fail)?;
            let root =
                kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await
                    .map_err(fail)?;
            let mut fleet = root.clone();
            let base = root.cluster_url.to_string();
            let url = format!("{}{FLEET_PREFIX}", base.trim_end_matches('/'));
            fleet.cluster_url = url.parse().map_err(|_| ConnectError::Url(url))?;
            Ok(Clients {
                root: Client::try_from(root).map_err(ConnectError::Client)?,
                fleet: Client::try_from(fleet).map_err(ConnectError::Client)?,
            })
        }
    }
}

/// A client whose requests go over the unix socket at `socket`, under `base`.
fn over_socket(socket: &Path, base: &str) -> Client {
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, kube::client::Body>(hyperlocal::UnixConnector);
    let base: http::Uri = hyperlocal::Uri::new(socket, base).into();
    let service = tower::ServiceBuilder::new()
        .layer(BaseUriLayer::new(base))
        .service(http);
    Client::new(service, "default")
}
