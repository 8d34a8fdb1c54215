//! The CSI socket driven by an independent client (Python grpcio from the vendored csi.proto)
//! as the kubelet would: identity calls, a publish that answers `Aborted` while the download
//! runs and then mounts read-only, a tenant of another namespace refused, unpublish idempotent.
//!
//! The ModelArtifacts come from a fixed lookup standing in for the plugin's cluster cache.
//! Mounting needs CAP_SYS_ADMIN; without it the test says so and stops after the identity and
//! authorization checks.

mod support;

use std::{
    collections::HashMap,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use gpustack_api::model_artifact::{
    ArtifactSource, HubSource, ModelArtifact, ModelArtifactSpec, ModelArtifactStatus,
    ResolvedArtifact,
};
use gpustack_model_manager::{
    csi::{ArtifactLookup, DRIVER_NAME, LookupError, NodePlugin},
    download::{DownloadLimits, Tuning},
    gc::Watermarks,
    hashing::digest_of,
    hub::HubSettings,
    manifest::{Manifest, ManifestDigest, ManifestEntry},
    materializer::{Materializer, StoreConfig},
    store::Store,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::json;
use support::{
    fault_hub::{COMMIT, FaultHub, HubFile},
    grpcio::CsiClient,
};

/// Stands in for the cluster: ModelArtifacts by namespace and name.
struct FixedArtifacts(HashMap<(String, String), ModelArtifact>);

#[tonic::async_trait]
impl ArtifactLookup for FixedArtifacts {
    async fn get(&self, ns: &str, name: &str) -> Result<Option<ModelArtifact>, LookupError> {
        Ok(self.0.get(&(ns.to_owned(), name.to_owned())).cloned())
    }
}

fn artifact(digest: &ManifestDigest) -> ModelArtifact {
    let mut a = ModelArtifact::new(
        "llm",
        ModelArtifactSpec {
            source: ArtifactSource {
                hugging_face: Some(HubSource {
                    repository: "org/model".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    a.metadata.namespace = Some("team-a".into());
    a.metadata.uid = Some("uid-a".into());
    a.status = Some(ModelArtifactStatus {
        resolved: Some(ResolvedArtifact {
            revision: COMMIT.into(),
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

fn can_mount(work: &Path) -> Result<(), String> {
    let (src, dst) = (work.join("probe-src"), work.join("probe-dst"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&dst).unwrap();
    match nix::mount::mount(
        Some(&src),
        &dst,
        None::<&str>,
        nix::mount::MsFlags::MS_BIND,
        None::<&str>,
    ) {
        Ok(()) => {
            nix::mount::umount2(&dst, nix::mount::MntFlags::empty()).unwrap();
            Ok(())
        }
        Err(e) => Err(format!("bind mounts are not permitted here ({e})")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_client_publishes_and_unpublishes() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let weights: Vec<u8> = (0..200_000u32).map(|i| (i % 241) as u8).collect();
    let files = vec![
        HubFile::new("config.json", b"{}".to_vec(), false),
        HubFile::new("model.safetensors", weights.clone(), true),
    ];
    let digest = Manifest::new(
        files
            .iter()
            .map(|f| ManifestEntry {
                path: f.path.clone(),
                size: f.bytes.len() as u64,
                digest: digest_of(&f.bytes, f.lfs),
            })
            .collect(),
    )
    .unwrap()
    .digest();
    let hub = FaultHub::start("127.0.0.1", files);
    let work = tempfile::tempdir().unwrap();
    let kubelet = work.path().join("kubelet");
    let socket = kubelet.join("plugins").join(DRIVER_NAME).join("csi.sock");
    let m = Materializer::new(
        Store::open(&work.path().join("cache")).unwrap(),
        DownloadLimits::new(8, 64 * 1024 * 1024),
        Tuning {
            segment_bytes: 64 * 1024,
            ..Tuning::default()
        },
        StoreConfig {
            hub: HubSettings {
                endpoint: hub.url.clone(),
                ..Default::default()
            },
            watermarks: Watermarks {
                high_percent: 100,
                low_percent: 99,
            },
            pinned: vec![],
        },
    );
    let mut known = HashMap::new();
    known.insert(("team-a".to_owned(), "llm".to_owned()), artifact(&digest));
    let plugin = NodePlugin::new(
        "node-1".into(),
        kubelet.clone(),
        "test".into(),
        m,
        Arc::new(FixedArtifacts(known)),
    );
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let registry = prometheus::Registry::new();
    let grpc = gpustack_serving::grpc_metrics::GrpcMetrics::register(
        &registry,
        "gpustack_model_manager",
        &gpustack_model_manager::csi::METHODS,
    )
    .unwrap();
    let server = tokio::spawn({
        let socket = socket.clone();
        async move {
            gpustack_model_manager::csi::serve(plugin, &socket, grpc, async {
                let _ = stop_rx.await;
            })
            .await
        }
    });
    let client = tokio::task::spawn_blocking({
        let (w, s) = (work.path().to_path_buf(), socket.clone());
        move || CsiClient::new(&w, &s)
    })
    .await
    .unwrap();
    let client = Arc::new(client);
    let call = |method: &'static str, body: serde_json::Value| {
        let c = Arc::clone(&client);
        async move {
            tokio::task::spawn_blocking(move || c.call(method, body))
                .await
                .unwrap()
        }
    };

    let info = call("Identity.GetPluginInfo", json!({})).await;
    assert_eq!(
        (info.code.as_str(), info.response["name"].as_str()),
        ("OK", Some(DRIVER_NAME))
    );
    assert_eq!(call("Identity.Probe", json!({})).await.code, "OK");
    let node = call("Node.NodeGetInfo", json!({})).await;
    assert_eq!(node.response["nodeId"], "node-1");
    let caps = call("Node.NodeGetCapabilities", json!({})).await;
    assert_eq!((caps.code.as_str(), &caps.response), ("OK", &json!({})));
    assert_eq!(
        call("Node.NodeStageVolume", json!({})).await.code,
        "UNIMPLEMENTED"
    );

    let target =
        |pod: &str| kubelet.join(format!("pods/{pod}/volumes/kubernetes.io~csi/model/mount"));
    let publish = |pod: &str, ns: &str| {
        json!({
            "volumeId": format!("csi-{pod}"),
            "targetPath": target(pod),
            "volumeCapability": {"mount": {}, "accessMode": {"mode": "SINGLE_NODE_READER_ONLY"}},
            "readonly": true,
            "secrets": {"token": "hf_sekrit"},
            "volumeContext": {
                "artifact": "llm",
                "artifactUID": "uid-a",
                "manifestDigest": digest.to_string(),
                "csi.storage.k8s.io/ephemeral": "true",
                "csi.storage.k8s.io/pod.namespace": ns,
                "csi.storage.k8s.io/pod.name": pod,
                "csi.storage.k8s.io/pod.uid": pod,
            },
        })
    };

    // A tenant whose namespace does not hold the artifact.
    let denied = call("Node.NodePublishVolume", publish("pod-b", "team-b")).await;
    assert_eq!(denied.code, "PERMISSION_DENIED", "{denied:?}");
    assert!(
        denied.details.contains("does not exist"),
        "{}",
        denied.details
    );
    let mut bad = publish("pod-c", "team-a");
    bad["targetPath"] = json!(work.path().join("elsewhere"));
    assert_eq!(
        call("Node.NodePublishVolume", bad).await.code,
        "INVALID_ARGUMENT"
    );

    // Every call above was counted by method and the code the client saw.
    let text = {
        let mut out = Vec::new();
        prometheus::Encoder::encode(
            &prometheus::TextEncoder::new(),
            &registry.gather(),
            &mut out,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    };
    for line in [
        r#"gpustack_model_manager_grpc_calls_total{code="OK",method="/csi.v1.Identity/Probe"} 1"#,
        r#"gpustack_model_manager_grpc_calls_total{code="Unimplemented",method="/csi.v1.Node/NodeStageVolume"} 1"#,
        r#"gpustack_model_manager_grpc_calls_total{code="PermissionDenied",method="/csi.v1.Node/NodePublishVolume"} 1"#,
        r#"gpustack_model_manager_grpc_calls_total{code="InvalidArgument",method="/csi.v1.Node/NodePublishVolume"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
    }

    if let Err(reason) = can_mount(work.path()) {
        eprintln!("skipping the mount half of this test: {reason}");
        let _ = stop_tx.send(());
        return;
    }

    // Kubelet retries until the download is published.
    let first = call("Node.NodePublishVolume", publish("pod-a", "team-a")).await;
    assert_eq!(first.code, "ABORTED", "{first:?}");
    assert!(
        first.details.starts_with("materializing sha256:"),
        "{}",
        first.details
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let o = call("Node.NodePublishVolume", publish("pod-a", "team-a")).await;
        if o.code == "OK" {
            break;
        }
        assert_eq!(o.code, "ABORTED", "{o:?}");
        assert!(Instant::now() < deadline, "not published in time: {o:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let t = target("pod-a");
    assert_eq!(std::fs::read(t.join("model.safetensors")).unwrap(), weights);
    let entry = gpustack_model_manager::mount::mount_table()
        .unwrap()
        .into_iter()
        .rev()
        .find(|e| e.mount_point == t)
        .expect("mounted");
    assert!(entry.is_sealed(), "{entry:?}");
    assert!(
        std::fs::write(t.join("new"), b"x").is_err(),
        "the mount is read-only"
    );
    // A second publish of the same target answers OK at once.
    assert_eq!(
        call("Node.NodePublishVolume", publish("pod-a", "team-a"))
            .await
            .code,
        "OK"
    );

    let unpublish = json!({"volumeId": "csi-pod-a", "targetPath": t});
    assert_eq!(
        call("Node.NodeUnpublishVolume", unpublish.clone())
            .await
            .code,
        "OK"
    );
    assert!(!t.exists());
    assert_eq!(
        call("Node.NodeUnpublishVolume", unpublish).await.code,
        "OK",
        "idempotent"
    );
    assert!(
        !gpustack_model_manager::mount::mount_table()
            .unwrap()
            .iter()
            .any(|e| e.mount_point == t)
    );

    let _ = stop_tx.send(());
    server.await.unwrap().unwrap();
}
