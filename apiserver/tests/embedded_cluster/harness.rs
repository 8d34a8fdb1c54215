//! Starting a gateway and a kube client for it; waiting on conditions with deadlines.

use std::{collections::BTreeMap, future::Future, path::PathBuf, time::Duration};

use gpustack_apiserver::server::{ApiServer, ServerOptions};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Client, Config,
    api::ObjectMeta,
    config::{KubeConfigOptions, Kubeconfig},
};
use tempfile::TempDir;

/// The ConfigMap every namespace holds from its creation (the cluster's CA), as on any
/// cluster: lists of a namespace's ConfigMaps show it.
pub const ROOT_CA: &str = "kube-root-ca.crt";

/// How long any awaited condition may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

pub struct Harness {
    pub gateway: ApiServer,
    pub client: Client,
    pub kubeconfig: PathBuf,
    pub dir: TempDir,
}

impl Harness {
    /// Shuts the gateway down and starts a new one on the same data directory and port.
    pub async fn restart(self) -> Harness {
        let addr = self.gateway.addr();
        self.gateway.shutdown().await;
        let options = ServerOptions::new(vec!["demo".into()], self.dir.path().to_owned(), addr);
        let gateway = within("restart", ApiServer::start(options))
            .await
            .expect("restarted");
        Harness { gateway, ..self }
    }
}

pub async fn start() -> Harness {
    start_with(|_| {}).await
}

pub async fn start_with(tune: impl FnOnce(&mut ServerOptions)) -> Harness {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = ServerOptions::new(
        vec!["demo".into()],
        dir.path().to_owned(),
        "127.0.0.1:0".parse().unwrap(),
    );
    tune(&mut options);
    let gateway = ApiServer::start(options).await.expect("gateway starts");
    let kubeconfig = gateway.kubeconfig_path("demo");
    let client = client_for(&kubeconfig).await;
    Harness {
        gateway,
        client,
        kubeconfig,
        dir,
    }
}

pub async fn client_for(kubeconfig: &std::path::Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("kubeconfig parses");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kube config");
    Client::try_from(config).expect("kube client")
}

/// Awaits `fut`, failing the test after [`DEADLINE`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// A ConfigMap `name` holding `k: v`.
pub fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
        ..Default::default()
    }
}
