//! Talking to the kubelet over its unix sockets: registration, the pod-resources lookup, and
//! noticing a kubelet restart (its `kubelet.sock` recreated), after which every plugin must
//! register again.

use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use gpustack_proto::{
    deviceplugin::v1beta1::{
        self as dp, DevicePluginOptions, RegisterRequest, registration_client::RegistrationClient,
    },
    podresources::v1::{
        ListPodResourcesRequest, PodResources,
        pod_resources_lister_client::PodResourcesListerClient,
    },
};
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint};

/// Why talking to the kubelet failed.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("connecting to {path}: {source}")]
    Connect {
        path: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("{what} over {path}: {source}")]
    Call {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: tonic::Status,
    },
}

/// A gRPC channel over the unix socket at `path` (the URI is a placeholder tonic requires).
pub async fn unix_channel(path: &Path) -> Result<Channel, KubeletError> {
    let target = path.to_owned();
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_| {
            let target = target.clone();
            async move { UnixStream::connect(target).await.map(TokioIo::new) }
        }))
        .await
        .map_err(|source| KubeletError::Connect {
            path: path.to_owned(),
            source,
        })
}

/// Registers the plugin serving `endpoint` (a socket name in the kubelet's directory) for
/// `resource`; `GetPreferredAllocation` is offered, `PreStartContainer` is not needed.
pub async fn register(kubelet: &Path, endpoint: &str, resource: &str) -> Result<(), KubeletError> {
    let mut client = RegistrationClient::new(unix_channel(kubelet).await?);
    client
        .register(RegisterRequest {
            version: dp::VERSION.to_owned(),
            endpoint: endpoint.to_owned(),
            resource_name: resource.to_owned(),
            options: Some(DevicePluginOptions {
                pre_start_required: false,
                get_preferred_allocation_available: true,
            }),
        })
        .await
        .map_err(|source| KubeletError::Call {
            what: "Register",
            path: kubelet.to_owned(),
            source,
        })?;
    Ok(())
}

/// The kubelet's pod-resources socket beside its device-plugin directory:
/// `/var/lib/kubelet/device-plugins/kubelet.sock` → `/var/lib/kubelet/pod-resources/kubelet.sock`.
pub fn pod_resources_socket(kube_socket: &Path) -> PathBuf {
    let kubelet_dir = kube_socket
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| Path::new("/var/lib/kubelet"));
    kubelet_dir.join("pod-resources").join("kubelet.sock")
}

/// The pod-resources client `Allocate` asks, keeping its connection between calls (tonic
/// reconnects a broken one through the connector, so a restarted kubelet's new socket is
/// found); a failed call drops it so the next one starts afresh.
pub struct PodResourcesClient {
    socket: PathBuf,
    channel: std::sync::Mutex<Option<Channel>>,
}

impl PodResourcesClient {
    pub fn new(socket: PathBuf) -> Self {
        Self {
            socket,
            channel: std::sync::Mutex::new(None),
        }
    }

    /// Every Pod's assigned devices, as the kubelet reports them.
    pub async fn list(&self) -> Result<Vec<PodResources>, KubeletError> {
        let cached = self
            .channel
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let channel = match cached {
            Some(c) => c,
            None => {
                let c = unix_channel(&self.socket).await?;
                *self.channel.lock().unwrap_or_else(|e| e.into_inner()) = Some(c.clone());
                c
            }
        };
        let reply = PodResourcesListerClient::new(channel)
            .list(ListPodResourcesRequest {})
            .await;
        match reply {
            Ok(r) => Ok(r.into_inner().pod_resources),
            Err(source) => {
                *self.channel.lock().unwrap_or_else(|e| e.into_inner()) = None;
                Err(KubeletError::Call {
                    what: "List",
                    path: self.socket.clone(),
                    source,
                })
            }
        }
    }
}

/// (device, inode, ctime seconds, ctime nanoseconds) of a socket file.
pub type SocketIdentity = (u64, u64, i64, i64);

/// The identity of a socket file. A recreated socket may reuse the inode number, so its change
/// time (to the nanosecond) is part of it.
pub fn socket_identity(path: &Path) -> Option<SocketIdentity> {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino(), m.ctime(), m.ctime_nsec()))
}
