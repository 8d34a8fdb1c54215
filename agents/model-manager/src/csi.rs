//! The CSI node plugin `model.csi.gpustack.ai`: Identity and Node services over the kubelet's
//! unix socket. Everything but the calls below answers `Unimplemented`; there is no Controller.
//!
//! NodePublishVolume: validate → lock the target → look up the Pod namespace's ModelArtifact →
//! authorize → already mounted? → claim the published tree (or start/join its download and
//! answer `Aborted` with progress) → bind it read-only, nosuid, nodev. NodeUnpublishVolume works
//! from the target alone and is idempotent.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use gpustack_api::model_artifact::ModelArtifact;
use gpustack_proto::csi::v1::{
    self as csi, identity_server::Identity, node_server::Node, volume_capability::AccessType,
};
use jiff::Timestamp;
use tonic::{Request, Response, Status};

use crate::{
    authorize::{self, PublishRequest},
    failure::Reason,
    hub::HubToken,
    materializer::{Ensure, Materializer},
    mount,
    store::VolumeRef,
};

/// The CSI driver name pods' volumes ask for, and that the plugin registers with the kubelet.
pub const DRIVER_NAME: &str = "model.csi.gpustack.ai";

/// Why a ModelArtifact could not be looked up (the mount answers `Unavailable`).
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The watch cache has not finished its first list.
    #[error("the ModelArtifact cache has not synced yet")]
    NotSynced,
    /// The API server could not be read.
    #[error("reading the ModelArtifact: {0}")]
    Api(#[from] kube::Error),
}

/// Where the plugin finds `ModelArtifact`s: the cluster's watch cache, or a fixed set in tests.
#[tonic::async_trait]
pub trait ArtifactLookup: Send + Sync + 'static {
    /// `Ok(None)` when it does not exist; `Err` when the cache could not answer.
    async fn get(&self, namespace: &str, name: &str) -> Result<Option<ModelArtifact>, LookupError>;
    /// False until the lookup can answer (caches synced).
    fn ready(&self) -> bool {
        true
    }
}

/// Counts behind `gpustack_model_manager_mounts_total{result}`.
#[derive(Debug, Default)]
pub struct MountCounters {
    /// Publish calls for a target that already has the tree mounted (a kubelet retry).
    pub hit: std::sync::atomic::AtomicU64,
    /// Trees bind-mounted at a new target.
    pub materialized: std::sync::atomic::AtomicU64,
    /// Mounts the artifact does not authorize (answered `PermissionDenied`).
    pub denied: std::sync::atomic::AtomicU64,
    /// Mounts answered with an error while the download runs or backs off (the kubelet retries).
    pub pending: std::sync::atomic::AtomicU64,
}

/// The CSI identity and node services: a mount publishes an artifact's tree read-only at the
/// target.
pub struct NodePlugin {
    node_name: String,
    kubelet_dir: PathBuf,
    version: String,
    materializer: Arc<Materializer>,
    artifacts: Arc<dyn ArtifactLookup>,
    target_locks: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
    /// Mount outcomes so far (read by `/metrics`).
    pub mounts: MountCounters,
}

impl NodePlugin {
    /// A plugin for `node_name` that accepts targets under `kubelet_dir` and reports `version`.
    pub fn new(
        node_name: String,
        kubelet_dir: PathBuf,
        version: String,
        materializer: Arc<Materializer>,
        artifacts: Arc<dyn ArtifactLookup>,
    ) -> Arc<Self> {
        Arc::new(Self {
            node_name,
            kubelet_dir,
            version,
            materializer,
            artifacts,
            target_locks: Mutex::new(HashMap::new()),
            mounts: MountCounters::default(),
        })
    }

    fn target_lock(&self, target: &Path) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.target_locks.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(locks.entry(target.to_path_buf()).or_default())
    }

    /// Whether mounts can be authorized yet (the ModelArtifact cache has synced).
    pub fn artifacts_ready(&self) -> bool {
        self.artifacts.ready()
    }

    fn count(&self, c: &std::sync::atomic::AtomicU64) {
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    async fn publish(&self, r: csi::NodePublishVolumeRequest) -> Result<(), Status> {
        let has_mount = matches!(
            r.volume_capability
                .as_ref()
                .and_then(|c| c.access_type.as_ref()),
            Some(AccessType::Mount(_))
        );
        let req = authorize::validate(
            &r.volume_id,
            &r.target_path,
            has_mount,
            &r.volume_context,
            &self.kubelet_dir,
        )
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
        if !self.artifacts.ready() {
            return Err(Status::unavailable(
                "the ModelArtifact cache has not synced yet",
            ));
        }
        let lock = self.target_lock(&req.target);
        let _target = lock.lock().await;

        let artifact = self
            .artifacts
            .get(&req.pod_namespace, &req.artifact)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let token = r
            .secrets
            .get("token")
            .and_then(|t| HubToken::new(t.clone()));
        let source = match authorize::authorize(&req, artifact.as_ref(), token) {
            Ok(s) => s,
            Err(denied) => {
                self.count(&self.mounts.denied);
                return Err(Status::permission_denied(denied.to_string()));
            }
        };

        if let Some(existing) = mounted_at(&req.target) {
            if existing.is_sealed() {
                self.count(&self.mounts.hit);
                return Ok(());
            }
            let _ = mount::unmount(&req.target);
            return Err(Status::unavailable(
                "the target was mounted writable; it has been unmounted",
            ));
        }

        let materialized = loop {
            let claim = self.materializer.claim_lock.lock().await;
            if let Some(tree) = self.materializer.store().published_tree(&req.digest) {
                self.materializer
                    .store()
                    .write_ref(&volume_ref(&req))
                    .map_err(|e| Status::internal(format!("recording the mount: {e}")))?;
                drop(claim);
                break tree;
            }
            drop(claim);
            match self
                .materializer
                .ensure(&req.digest, source.clone(), Timestamp::now())
            {
                Ensure::Published(_) => continue,
                Ensure::InProgress(progress) => {
                    self.count(&self.mounts.pending);
                    return Err(Status::aborted(progress));
                }
                Ensure::BackingOff {
                    reason,
                    message,
                    retry_time,
                } => {
                    self.count(&self.mounts.pending);
                    let retry = retry_time
                        .map(|t| format!(" (retry after {t})"))
                        .unwrap_or_default();
                    let text = format!(
                        "materializing {}: {reason}: {message}{retry}",
                        req.digest.short()
                    );
                    return Err(if reason == Reason::InsufficientCapacity {
                        Status::resource_exhausted(text)
                    } else {
                        Status::unavailable(text)
                    });
                }
            }
        };
        if let Err(e) = mount::bind_read_only(&materialized, &req.target) {
            let _ = self.materializer.store().remove_ref(&req.volume_id);
            tracing::error!(target = %req.target.display(), "bind mount failed: {e}");
            return Err(Status::internal(format!("bind mount failed: {e}")));
        }
        self.count(&self.mounts.materialized);
        self.record_use(req.digest.hex());
        Ok(())
    }

    fn record_use(&self, hex: &str) {
        let Some(d) = crate::manifest::ManifestDigest::from_hex(hex) else {
            return;
        };
        let store = self.materializer.store();
        if let Ok(mut rec) = store.digest_record(&d) {
            rec.last_used_time = Some(Timestamp::now());
            let _ = store.write_digest_record(&d, &rec);
        }
        self.materializer.changed.notify_one();
    }

    async fn unpublish(&self, r: csi::NodeUnpublishVolumeRequest) -> Result<(), Status> {
        if r.volume_id.is_empty() {
            return Err(Status::invalid_argument("volume_id is required"));
        }
        let target = authorize::check_target(&r.target_path, &self.kubelet_dir)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let lock = self.target_lock(&target);
        let _target = lock.lock().await;
        mount::unmount(&target).map_err(|e| Status::internal(format!("unmounting: {e}")))?;
        match std::fs::remove_dir(&target) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Status::internal(format!("removing the target: {e}")));
            }
            _ => {}
        }
        let refs = self.materializer.store().refs().unwrap_or_default();
        if let Some(r) = refs
            .iter()
            .find(|x| x.volume_id == r.volume_id || x.target_path == target)
        {
            let hex = r.hex.clone();
            self.materializer
                .store()
                .remove_ref(&r.volume_id)
                .map_err(|e| Status::internal(format!("dropping the mount record: {e}")))?;
            self.record_use(&hex);
        }
        Ok(())
    }
}

fn volume_ref(req: &PublishRequest) -> VolumeRef {
    VolumeRef {
        volume_id: req.volume_id.clone(),
        target_path: req.target.clone(),
        hex: req.digest.hex().to_owned(),
        pod_namespace: req.pod_namespace.clone(),
        pod_name: req.pod_name.clone(),
        pod_uid: req.pod_uid.clone(),
    }
}

fn mounted_at(target: &Path) -> Option<crate::mountinfo::MountEntry> {
    let table = mount::mount_table().ok()?;
    crate::mountinfo::find(&table, target).cloned()
}

/// The Identity service of the plugin.
pub struct IdentityService(pub Arc<NodePlugin>);
/// The Node service of the plugin.
pub struct NodeService(pub Arc<NodePlugin>);

#[tonic::async_trait]
impl Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _: Request<csi::GetPluginInfoRequest>,
    ) -> Result<Response<csi::GetPluginInfoResponse>, Status> {
        Ok(Response::new(csi::GetPluginInfoResponse {
            name: DRIVER_NAME.into(),
            vendor_version: self.0.version.clone(),
            manifest: HashMap::new(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<csi::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<csi::GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(csi::GetPluginCapabilitiesResponse::default()))
    }

    async fn probe(
        &self,
        _: Request<csi::ProbeRequest>,
    ) -> Result<Response<csi::ProbeResponse>, Status> {
        Ok(Response::new(csi::ProbeResponse::default()))
    }
}

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        _: Request<csi::NodeStageVolumeRequest>,
    ) -> Result<Response<csi::NodeStageVolumeResponse>, Status> {
        Err(Status::unimplemented("staging is not supported"))
    }

    async fn node_unstage_volume(
        &self,
        _: Request<csi::NodeUnstageVolumeRequest>,
    ) -> Result<Response<csi::NodeUnstageVolumeResponse>, Status> {
        Err(Status::unimplemented("staging is not supported"))
    }

    async fn node_publish_volume(
        &self,
        request: Request<csi::NodePublishVolumeRequest>,
    ) -> Result<Response<csi::NodePublishVolumeResponse>, Status> {
        self.0.publish(request.into_inner()).await?;
        Ok(Response::new(csi::NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<csi::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<csi::NodeUnpublishVolumeResponse>, Status> {
        self.0.unpublish(request.into_inner()).await?;
        Ok(Response::new(csi::NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_volume_stats(
        &self,
        _: Request<csi::NodeGetVolumeStatsRequest>,
    ) -> Result<Response<csi::NodeGetVolumeStatsResponse>, Status> {
        Err(Status::unimplemented("volume stats are not supported"))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<csi::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<csi::NodeGetCapabilitiesResponse>, Status> {
        Ok(Response::new(csi::NodeGetCapabilitiesResponse::default()))
    }

    async fn node_get_info(
        &self,
        _: Request<csi::NodeGetInfoRequest>,
    ) -> Result<Response<csi::NodeGetInfoResponse>, Status> {
        Ok(Response::new(csi::NodeGetInfoResponse {
            node_id: self.0.node_name.clone(),
            ..Default::default()
        }))
    }
}

/// The Identity and Node services' methods, the only values of the gRPC series' `method` label.
pub const METHODS: [&str; 10] = [
    "/csi.v1.Identity/GetPluginInfo",
    "/csi.v1.Identity/GetPluginCapabilities",
    "/csi.v1.Identity/Probe",
    "/csi.v1.Node/NodeStageVolume",
    "/csi.v1.Node/NodeUnstageVolume",
    "/csi.v1.Node/NodePublishVolume",
    "/csi.v1.Node/NodeUnpublishVolume",
    "/csi.v1.Node/NodeGetVolumeStats",
    "/csi.v1.Node/NodeGetCapabilities",
    "/csi.v1.Node/NodeGetInfo",
];

/// Serves Identity and Node on the unix socket at `path` (replacing a stale socket file) until
/// `shutdown` resolves, each call counted in `grpc`.
pub async fn serve(
    plugin: Arc<NodePlugin>,
    path: &Path,
    grpc: gpustack_serving::grpc_metrics::GrpcMetrics,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), std::io::Error> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = tokio::net::UnixListener::bind(path)?;
    let routes = tonic::service::Routes::new(
        gpustack_proto::csi::v1::identity_server::IdentityServer::new(IdentityService(Arc::clone(
            &plugin,
        ))),
    )
    .add_service(gpustack_proto::csi::v1::node_server::NodeServer::new(
        NodeService(plugin),
    ));
    gpustack_serving::grpc::serve_unix(routes, listener, grpc, Box::pin(shutdown))
        .await
        .map_err(std::io::Error::other)
}
