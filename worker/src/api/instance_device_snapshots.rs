//! The device managers' `/monitor/snapshot` of a node, for `instances/<name>/metrics`
//! (instances.md §5 "Gathering"): for each manufacturer asked, a Ready device manager Pod on the
//! node (the system namespace, `app.kubernetes.io/component=device-manager`,
//! `gpustack.ai/manufacturer=<m>`) is asked at `https://<podIP>:<its "https" port>` with no
//! proxy. Its certificate is its own self-made one, so it is not checked: the snapshot is the
//! node's utilization, read by the worker and answered only to callers the API authorized.
//! What a node's managers answered (or that they did not) is kept for [`SNAPSHOT_MAX_AGE`],
//! one read per node at a time, as the kubelet stats are.

use std::{
    collections::HashMap,
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use gpustack_api::Manufacturer;
use gpustack_serving::any_server_cert::AnyServerCertificate;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::ListParams};
use rustls::pki_types::ServerName;

use super::instance_accelerators::Snapshot;

/// How long a node's snapshots are reused (as its kubelet stats are).
pub const SNAPSHOT_MAX_AGE: Duration = Duration::from_secs(15);
/// The device manager's port when its Pod names none `https`.
pub const DEFAULT_PORT: u16 = 32443;
/// The longest one snapshot read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(3);
/// The largest snapshot read.
const MAX_SNAPSHOT_BYTES: usize = 4 << 20;
/// The labels of the device manager's Pods (the chart's DaemonSets).
const COMPONENT: &str = "app.kubernetes.io/component=device-manager";
const MANUFACTURER_LABEL: &str = "gpustack.ai/manufacturer";

/// Why a device manager's snapshot could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Its Pods could not be listed.
    #[error("listing the device manager Pods: {0}")]
    List(#[from] kube::Error),
    /// No Ready Pod of the manufacturer runs on the node.
    #[error("no Ready device manager Pod for {0}")]
    NoPod(Manufacturer),
    /// The Pod's IP is not an address.
    #[error("the device manager Pod's IP {0:?} is not an address")]
    Address(String),
    /// The connection or the TLS handshake failed.
    #[error("connecting: {0}")]
    Connect(#[from] std::io::Error),
    /// The HTTP exchange failed.
    #[error("asking: {0}")]
    Http(#[from] hyper::Error),
    /// The request could not be built.
    #[error("building the request: {0}")]
    Build(#[from] http::Error),
    /// The device manager answered something else than 200.
    #[error("the device manager answered {0}")]
    Refused(u16),
    /// The body was over the cap or cut off.
    #[error("the snapshot is larger than {MAX_SNAPSHOT_BYTES} bytes or was cut off")]
    Body,
    /// The body is not a snapshot.
    #[error("the snapshot is not readable: {0}")]
    Json(#[from] serde_json::Error),
    /// It took longer than [`READ_TIMEOUT`].
    #[error("no answer within {READ_TIMEOUT:?}")]
    Timeout,
}

/// One node's last snapshot of one manufacturer (none: its manager did not answer) and when it
/// was read; locked while it is read again.
type Slot = Arc<tokio::sync::Mutex<Option<(Instant, Option<Arc<Snapshot>>)>>>;

/// The device managers' snapshots, each node's and manufacturer's reused for
/// [`SNAPSHOT_MAX_AGE`].
pub struct DeviceSnapshots {
    system_namespace: String,
    tls: tokio_rustls::TlsConnector,
    slots: Mutex<HashMap<(String, Manufacturer), Slot>>,
}

impl DeviceSnapshots {
    /// Snapshots of the device managers in `system_namespace`.
    pub fn new(system_namespace: &str) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .dangerous()
            // The device manager serves a self-made certificate; no credential is sent to it.
            .with_custom_certificate_verifier(Arc::new(AnyServerCertificate(provider)))
            .with_no_client_auth();
        DeviceSnapshots {
            system_namespace: system_namespace.to_owned(),
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            slots: Mutex::default(),
        }
    }

    /// The snapshots of node `node`'s device managers of `manufacturers`, read unless recent
    /// ones are kept; a manager that could not be read is left out (and logged).
    pub async fn of_node(
        &self,
        client: &kube::Client,
        node: &str,
        manufacturers: &[Manufacturer],
    ) -> Vec<Arc<Snapshot>> {
        let mut out = Vec::new();
        for m in manufacturers {
            if let Some(s) = self.one(client, node, *m).await {
                out.push(s);
            }
        }
        out
    }

    async fn one(
        &self,
        client: &kube::Client,
        node: &str,
        m: Manufacturer,
    ) -> Option<Arc<Snapshot>> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            // Entries gone stale are forgotten, so the map follows the fleet.
            slots.retain(|_, s| {
                s.try_lock().map_or(true, |g| {
                    g.as_ref()
                        .is_some_and(|(at, _)| at.elapsed() < SNAPSHOT_MAX_AGE)
                })
            });
            slots.entry((node.to_owned(), m)).or_default().clone()
        };
        let mut kept = slot.lock().await;
        if let Some((at, v)) = kept.as_ref()
            && at.elapsed() < SNAPSHOT_MAX_AGE
        {
            return v.clone();
        }
        let read = match self.managers(client, node).await {
            Ok(pods) => self.read(&pods, m).await,
            Err(e) => Err(SnapshotError::List(e)),
        };
        let read = read
            .map_err(|e| {
                tracing::warn!(target: "instance-metrics", node, manufacturer = %m, "no accelerator figures: {e}")
            })
            .ok()
            .map(Arc::new);
        *kept = Some((Instant::now(), read.clone()));
        read
    }

    /// The device manager Pods on `node`.
    async fn managers(&self, client: &kube::Client, node: &str) -> Result<Vec<Pod>, kube::Error> {
        let lp = ListParams::default()
            .labels(COMPONENT)
            .fields(&format!("spec.nodeName={node}"));
        Ok(
            Api::<Pod>::namespaced(client.clone(), &self.system_namespace)
                .list(&lp)
                .await?
                .items,
        )
    }

    /// The snapshot of manufacturer `m`'s Ready manager among `pods`.
    async fn read(&self, pods: &[Pod], m: Manufacturer) -> Result<Snapshot, SnapshotError> {
        let (ip, port) = pods
            .iter()
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(MANUFACTURER_LABEL))
                    .is_some_and(|v| *v == m.to_string())
            })
            .find_map(ready_endpoint)
            .ok_or(SnapshotError::NoPod(m))?;
        let ip: IpAddr = ip.parse().map_err(|_| SnapshotError::Address(ip.clone()))?;
        tokio::time::timeout(READ_TIMEOUT, self.get(SocketAddr::new(ip, port)))
            .await
            .map_err(|_| SnapshotError::Timeout)?
    }

    async fn get(&self, at: SocketAddr) -> Result<Snapshot, SnapshotError> {
        let tcp = tokio::net::TcpStream::connect(at).await?;
        let tls = self
            .tls
            .connect(ServerName::IpAddress(at.ip().into()), tcp)
            .await?;
        let (mut send, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        let driver = tokio::spawn(connection);
        let request = http::Request::get("/monitor/snapshot")
            .header(http::header::HOST, at.to_string())
            .header(http::header::ACCEPT, "application/json")
            .body(Empty::<Bytes>::new())?;
        let response = send.send_request(request).await?;
        let status = response.status();
        let result = if status.is_success() {
            match http_body_util::Limited::new(response.into_body(), MAX_SNAPSHOT_BYTES)
                .collect()
                .await
            {
                Ok(body) => serde_json::from_slice(&body.to_bytes()).map_err(SnapshotError::Json),
                Err(_) => Err(SnapshotError::Body),
            }
        } else {
            Err(SnapshotError::Refused(status.as_u16()))
        };
        driver.abort();
        result
    }
}

/// A Ready Pod's IP and its `https` port (else [`DEFAULT_PORT`]).
fn ready_endpoint(pod: &Pod) -> Option<(String, u16)> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    let ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let ip = status.pod_ip.clone().filter(|ip| !ip.is_empty())?;
    let port = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some("https"))
        .and_then(|p| u16::try_from(p.container_port).ok())
        .unwrap_or(DEFAULT_PORT);
    ready.then_some((ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ready: &str, ip: Option<&str>, port: Option<i32>) -> Pod {
        let mut container = json!({"name": "main"});
        if let Some(p) = port {
            container["ports"] = json!([{"name": "metrics", "containerPort": 9}, {"name": "https", "containerPort": p}]);
        }
        serde_json::from_value(json!({
            "metadata": {"name": "dm"},
            "spec": {"containers": [container]},
            "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": ready}]},
        }))
        .unwrap()
    }

    #[test]
    fn a_ready_manager_is_asked_at_its_ip_and_https_port() {
        assert_eq!(
            ready_endpoint(&pod("True", Some("127.0.0.1"), Some(4443))),
            Some(("127.0.0.1".into(), 4443))
        );
        assert_eq!(
            ready_endpoint(&pod("True", Some("192.0.2.4"), None)),
            Some(("192.0.2.4".into(), DEFAULT_PORT))
        );
        assert_eq!(ready_endpoint(&pod("False", Some("192.0.2.4"), None)), None);
        assert_eq!(ready_endpoint(&pod("True", None, None)), None);
    }
}
