//! The kubelet's side of the CSI socket: NodePublishVolume for an inline ephemeral volume (the
//! attributes the kubelet adds with `podInfoOnMount`), and NodeUnpublishVolume.

use std::{collections::HashMap, path::Path, time::Duration};

use gpustack_model_manager::manifest::ManifestDigest;
use gpustack_proto::csi::v1::{
    self as csi, identity_client::IdentityClient, node_client::NodeClient,
};
use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint};

use super::plugin::{ARTIFACT, ARTIFACT_UID, NAMESPACE, kubelet_dir};

pub struct Kubelet {
    node: NodeClient<Channel>,
    identity: IdentityClient<Channel>,
    kubelet_dir: std::path::PathBuf,
}

impl Kubelet {
    /// A channel to the plugin's socket (connected lazily, on the first call).
    pub fn new(work: &Path, socket: &Path) -> Self {
        let path = socket.to_path_buf();
        let channel = Endpoint::from_static("http://localhost")
            .connect_timeout(Duration::from_secs(5))
            .connect_with_connector_lazy(tower::service_fn(move |_| {
                let path = path.clone();
                async move {
                    tokio::net::UnixStream::connect(path)
                        .await
                        .map(TokioIo::new)
                }
            }));
        Self {
            node: NodeClient::new(channel.clone()),
            identity: IdentityClient::new(channel),
            kubelet_dir: kubelet_dir(work),
        }
    }

    pub async fn probe(&mut self) -> Result<(), tonic::Status> {
        self.identity.probe(csi::ProbeRequest {}).await.map(|_| ())
    }

    pub fn target(&self, pod: &str) -> std::path::PathBuf {
        self.kubelet_dir
            .join(format!("pods/{pod}/volumes/kubernetes.io~csi/model/mount"))
    }

    pub async fn publish(
        &mut self,
        pod: &str,
        digest: &ManifestDigest,
    ) -> Result<(), tonic::Status> {
        let context: HashMap<String, String> = [
            ("artifact", ARTIFACT.to_owned()),
            ("artifactUID", ARTIFACT_UID.to_owned()),
            ("manifestDigest", digest.to_string()),
            ("csi.storage.k8s.io/ephemeral", "true".to_owned()),
            ("csi.storage.k8s.io/pod.namespace", NAMESPACE.to_owned()),
            ("csi.storage.k8s.io/pod.name", pod.to_owned()),
            ("csi.storage.k8s.io/pod.uid", pod.to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let request = csi::NodePublishVolumeRequest {
            volume_id: format!("csi-{pod}"),
            target_path: self.target(pod).display().to_string(),
            volume_capability: Some(csi::VolumeCapability {
                access_mode: Some(csi::volume_capability::AccessMode {
                    mode: csi::volume_capability::access_mode::Mode::SingleNodeReaderOnly as i32,
                }),
                access_type: Some(csi::volume_capability::AccessType::Mount(
                    csi::volume_capability::MountVolume::default(),
                )),
            }),
            readonly: true,
            volume_context: context,
            ..Default::default()
        };
        self.node.node_publish_volume(request).await.map(|_| ())
    }

    pub async fn unpublish(&mut self, pod: &str) -> Result<(), tonic::Status> {
        self.node
            .node_unpublish_volume(csi::NodeUnpublishVolumeRequest {
                volume_id: format!("csi-{pod}"),
                target_path: self.target(pod).display().to_string(),
            })
            .await
            .map(|_| ())
    }
}
