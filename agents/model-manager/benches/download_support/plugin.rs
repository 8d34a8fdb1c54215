//! The plugin under measurement, in a process of its own (so its peak RSS is its own): the
//! library's CSI node service over a unix socket, with the materializer, downloader and store
//! the binary builds, at the spec's default limits (8 requests in flight, no bandwidth cap) and
//! the downloader's default tuning. The benchmark drives it as the kubelet does, over gRPC.
//!
//! The ModelArtifact comes from a fixed lookup standing in for the cluster's watch cache (the
//! binary needs an API server; the mount path is otherwise the same).

use std::{collections::HashMap, path::Path, sync::Arc};

use gpustack_api::model_artifact::{
    ArtifactSource, HubSource, ModelArtifact, ModelArtifactSpec, ModelArtifactStatus,
    ResolvedArtifact,
};
use gpustack_model_manager::{
    csi::{ArtifactLookup, LookupError, NodePlugin},
    download::{DownloadLimits, Tuning},
    gc::Watermarks,
    hub::HubSettings,
    manifest::ManifestDigest,
    materializer::{Materializer, StoreConfig},
    store::Store,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub const NAMESPACE: &str = "bench";
pub const ARTIFACT: &str = "llm";
pub const ARTIFACT_UID: &str = "uid-bench";

struct FixedArtifacts(HashMap<(String, String), ModelArtifact>);

#[tonic::async_trait]
impl ArtifactLookup for FixedArtifacts {
    async fn get(&self, ns: &str, name: &str) -> Result<Option<ModelArtifact>, LookupError> {
        Ok(self.0.get(&(ns.to_owned(), name.to_owned())).cloned())
    }
}

fn artifact(repo: &str, commit: &str, digest: &ManifestDigest) -> ModelArtifact {
    let mut a = ModelArtifact::new(
        ARTIFACT,
        ModelArtifactSpec {
            source: ArtifactSource {
                hugging_face: Some(HubSource {
                    repository: repo.into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    a.metadata.namespace = Some(NAMESPACE.into());
    a.metadata.uid = Some(ARTIFACT_UID.into());
    a.status = Some(ModelArtifactStatus {
        resolved: Some(ResolvedArtifact {
            revision: commit.into(),
            manifest_digest: digest.to_string(),
            ..Default::default()
        }),
        conditions: vec![Condition {
            type_: "Resolved".into(),
            status: "True".into(),
            reason: "Resolved".into(),
            message: String::new(),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }],
        ..Default::default()
    });
    a
}

/// What the child process is told on its command line.
pub struct ChildArgs<'a> {
    pub work: &'a Path,
    pub hub: &'a str,
    pub repo: &'a str,
    pub commit: &'a str,
    pub digest: &'a ManifestDigest,
}

impl ChildArgs<'_> {
    pub fn to_args(&self) -> Vec<String> {
        vec![
            self.work.display().to_string(),
            self.hub.to_owned(),
            self.repo.to_owned(),
            self.commit.to_owned(),
            self.digest.hex().to_owned(),
        ]
    }
}

pub fn kubelet_dir(work: &Path) -> std::path::PathBuf {
    work.join("kubelet")
}

pub fn socket(work: &Path) -> std::path::PathBuf {
    work.join("csi.sock")
}

/// The child's main: serves CSI until its stdin closes.
pub fn child_main(args: &[String]) {
    let [work, hub, repo, commit, hex] = args else {
        panic!("the plugin child needs: work hub repo commit digest-hex, got {args:?}");
    };
    let work = Path::new(work);
    let digest = ManifestDigest::from_hex(hex).expect("a digest");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let materializer = Materializer::new(
            Store::open(&work.join("cache")).expect("opening the cache"),
            DownloadLimits::new(8, 0),
            Tuning::default(),
            StoreConfig {
                hub: HubSettings {
                    endpoint: hub.clone(),
                    ..Default::default()
                },
                // The cache shares the host's disk with everything else on it: the highest
                // valid watermark, so other tenants' bytes do not refuse the reservation.
                watermarks: Watermarks {
                    high_percent: 95,
                    low_percent: 94,
                },
                pinned: vec![],
            },
        );
        let mut known = HashMap::new();
        known.insert(
            (NAMESPACE.to_owned(), ARTIFACT.to_owned()),
            artifact(repo, commit, &digest),
        );
        let plugin = NodePlugin::new(
            "bench-node".into(),
            kubelet_dir(work),
            "bench".into(),
            materializer,
            Arc::new(FixedArtifacts(known)),
        );
        let stdin_closed = async {
            let _ = tokio::task::spawn_blocking(|| {
                let mut sink = Vec::new();
                let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            })
            .await;
        };
        let grpc = gpustack_serving::grpc_metrics::GrpcMetrics::register(
            &prometheus::Registry::new(),
            "gpustack_model_manager",
            &gpustack_model_manager::csi::METHODS,
        )
        .expect("registering the gRPC series");
        gpustack_model_manager::csi::serve(plugin, &socket(work), grpc, stdin_closed)
            .await
            .expect("serving CSI");
    });
}
