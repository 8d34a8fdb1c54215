//! Collection on a small filesystem (a 4 MiB tmpfs): a download that does not fit evicts the
//! oldest unreferenced tree down toward the low watermark, keeps a tree a Pod has mounted, and
//! fails with `InsufficientCapacity` when nothing can go.
//!
//! Mounting the tmpfs needs CAP_SYS_ADMIN; without it the test says so and stops.

mod support;

use std::time::Duration;

use gpustack_model_manager::{
    download::{DownloadLimits, Tuning},
    failure::Reason,
    filter::FileFilter,
    gc::Watermarks,
    hashing::digest_of,
    hub::HubSettings,
    manifest::{Manifest, ManifestDigest, ManifestEntry},
    materializer::{Materializer, Source, StoreConfig},
    store::{Store, VolumeRef},
};
use jiff::{SignedDuration, Timestamp};
use support::fault_hub::{COMMIT, FaultHub, HubFile};

const TREE: usize = 1_200_000;

/// A hub serving one ~1.2 MB tree whose content depends on `seed`, and its digest.
fn hub(seed: u8) -> (FaultHub, ManifestDigest) {
    let bytes: Vec<u8> = (0..TREE).map(|i| (i as u8).wrapping_mul(seed)).collect();
    let file = HubFile::new("model.safetensors", bytes, true);
    let digest = Manifest::new(vec![ManifestEntry {
        path: file.path.clone(),
        size: file.bytes.len() as u64,
        digest: digest_of(&file.bytes, true),
    }])
    .unwrap()
    .digest();
    (FaultHub::start("127.0.0.1", vec![file]), digest)
}

fn config(hub: &FaultHub) -> StoreConfig {
    StoreConfig {
        hub: HubSettings {
            endpoint: hub.url.clone(),
            ..Default::default()
        },
        watermarks: Watermarks {
            high_percent: 80,
            low_percent: 50,
        },
        pinned: vec![],
    }
}

fn source() -> Source {
    Source {
        repository: "org/model".into(),
        commit: COMMIT.into(),
        filter: FileFilter::default(),
        token: None,
    }
}

async fn materialize(
    m: &std::sync::Arc<Materializer>,
    hub: &FaultHub,
    d: &ManifestDigest,
) -> Result<(), Reason> {
    m.set_config(config(hub));
    let _ = m.ensure(d, source(), Timestamp::now());
    tokio::time::timeout(Duration::from_secs(60), m.wait(d))
        .await
        .expect("the attempt ends")
        .expect("an outcome")
        .map_err(|f| f.reason)
}

/// Makes a tree look idle for an hour, so that collection may take it.
fn age(store: &Store, d: &ManifestDigest) {
    let mut rec = store.digest_record(d).unwrap();
    rec.last_used_time = Some(Timestamp::now() - SignedDuration::from_hours(1));
    store.write_digest_record(d, &rec).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watermarks_are_respected_and_mounted_trees_kept() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let _fs = match support::tmpfs::mount(&cache, "4m") {
        Ok(fs) => fs,
        Err(e) => {
            eprintln!("skipping: mounting a tmpfs is not permitted here ({e})");
            return;
        }
    };
    let (hub_a, a) = hub(3);
    let (hub_b, b) = hub(5);
    let (hub_c, c) = hub(7);
    let (hub_d, d) = hub(11);
    let store = Store::open(&cache).unwrap();
    let m = Materializer::new(
        store.clone(),
        DownloadLimits::new(8, 0),
        Tuning::default(),
        config(&hub_a),
    );

    materialize(&m, &hub_a, &a).await.expect("A fits");
    materialize(&m, &hub_b, &b).await.expect("B fits");
    age(&store, &a);
    age(&store, &b);
    // B is mounted by a Pod.
    store
        .write_ref(&VolumeRef {
            volume_id: "csi-b".into(),
            target_path: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/m/mount".into(),
            hex: b.hex().into(),
            pod_namespace: String::new(),
            pod_name: String::new(),
            pod_uid: "u".into(),
        })
        .unwrap();

    // C does not fit under 80% beside A and B: A (unreferenced, idle) goes, B stays.
    materialize(&m, &hub_c, &c)
        .await
        .expect("C fits after collection");
    assert!(store.published_tree(&a).is_none(), "A was collected");
    assert!(
        store.published_tree(&b).is_some(),
        "the mounted tree is kept"
    );
    assert!(store.published_tree(&c).is_some());
    let usage = m.usage().unwrap();
    assert!(
        usage.used_bytes * 100 <= usage.total_bytes * 80,
        "under the high watermark: {usage:?}"
    );
    assert_eq!(
        m.removed_bytes.load(std::sync::atomic::Ordering::Relaxed),
        TREE as u64
    );

    // With B mounted and C just used, D cannot fit and nothing may go.
    let err = materialize(&m, &hub_d, &d).await.unwrap_err();
    assert_eq!(err, Reason::InsufficientCapacity);
    assert!(store.published_tree(&b).is_some() && store.published_tree(&c).is_some());
    let plan = m.collect(TREE as u64, &config(&hub_d)).await;
    assert!(plan.capacity_low && plan.remove.is_empty(), "{plan:?}");
}
