//! The materializer against a hub that misbehaves on purpose (see `support/fault_hub.rs`):
//! ranged segments, retries, stalls, truncation, a flipped byte, cross-host redirects, a gated
//! repository, pagination, resume after the process dies, and one download per digest.

mod support;

use std::{sync::Arc, time::Duration};

use gpustack_model_manager::{
    download::{DownloadLimits, Tuning},
    failure::Reason,
    filter::FileFilter,
    hashing::digest_of,
    hub::{HubSettings, HubToken},
    manifest::{Manifest, ManifestDigest, ManifestEntry},
    materializer::{Ensure, Materializer, Source, StoreConfig},
    store::Store,
};
use jiff::Timestamp;
use support::fault_hub::{COMMIT, Fault, FaultHub, HubFile};

const DEADLINE: Duration = Duration::from_secs(60);

fn files() -> Vec<HubFile> {
    let weights: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(7) % 253) as u8)
        .collect();
    vec![
        HubFile::new("config.json", br#"{"model_type":"test"}"#.to_vec(), false),
        HubFile::new("model.safetensors", weights, true),
        HubFile::new("sub/a.txt", b"hello\n".to_vec(), false),
    ]
}

fn digest_of_files(files: &[HubFile]) -> ManifestDigest {
    Manifest::new(
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
    .digest()
}

fn tuning() -> Tuning {
    Tuning {
        segment_bytes: 64 * 1024,
        window: 4,
        stall_timeout: Duration::from_millis(500),
        retries: 5,
        retry_step: Duration::from_millis(20),
        retry_cap: Duration::from_millis(100),
        checkpoint_bytes: 64 * 1024,
        files_in_parallel: 16,
        ..Tuning::default()
    }
}

fn materializer(root: &std::path::Path, hub: &FaultHub) -> Arc<Materializer> {
    materializer_with(root, hub, tuning())
}

fn materializer_with(root: &std::path::Path, hub: &FaultHub, tuning: Tuning) -> Arc<Materializer> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StoreConfig {
        hub: HubSettings {
            endpoint: hub.url.clone(),
            ..Default::default()
        },
        // Tests share the machine's disk: capacity is exercised elsewhere.
        watermarks: gpustack_model_manager::gc::Watermarks {
            high_percent: 100,
            low_percent: 99,
        },
        pinned: vec![],
    };
    Materializer::new(
        Store::open(root).unwrap(),
        DownloadLimits::new(8, 0),
        tuning,
        config,
    )
}

fn source(token: Option<&str>) -> Source {
    Source {
        repository: "org/model".into(),
        commit: COMMIT.into(),
        filter: FileFilter::default(),
        token: token.and_then(HubToken::new),
    }
}

/// Starts (or joins) the digest's attempt and waits for it to end.
async fn materialize(
    m: &Arc<Materializer>,
    d: &ManifestDigest,
    src: Source,
) -> Result<(), gpustack_model_manager::failure::Failure> {
    match m.ensure(d, src, Timestamp::now()) {
        Ensure::InProgress(msg) => assert!(msg.starts_with("materializing sha256:"), "{msg}"),
        other => panic!("expected a download to start, got {other:?}"),
    }
    tokio::time::timeout(DEADLINE, m.wait(d))
        .await
        .expect("the attempt ends in time")
        .expect("an attempt was running")
}

fn assert_tree_matches(m: &Materializer, d: &ManifestDigest, files: &[HubFile]) {
    let tree = m.store().published_tree(d).expect("published");
    for f in files {
        assert_eq!(
            std::fs::read(tree.join(&f.path)).unwrap(),
            f.bytes,
            "{}",
            f.path
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranged_download_publishes_the_verified_tree() {
    let files = files();
    let hub = FaultHub::start("127.0.0.1", files.clone());
    let dir = tempfile::tempdir().unwrap();
    let m = materializer(dir.path(), &hub);
    let d = digest_of_files(&files);
    materialize(&m, &d, source(Some("hf_sekrit")))
        .await
        .expect("published");
    assert_tree_matches(&m, &d, &files);
    assert_eq!(
        m.ensure(&d, source(None), Timestamp::now()),
        Ensure::Published(m.store().published_tree(&d).unwrap())
    );
    let reqs = hub.requests();
    let weights: Vec<_> = reqs
        .iter()
        .filter(|r| r.path.ends_with("model.safetensors"))
        .collect();
    // 300000 bytes in 64 KiB segments: a probe and four more ranged requests.
    assert_eq!(weights.len(), 5, "{weights:?}");
    assert_eq!(
        weights[0].range.as_deref(),
        Some("bytes=0-65535"),
        "the probe goes first, alone"
    );
    assert!(
        reqs.iter()
            .all(|r| r.authorization.as_deref() == Some("Bearer hf_sekrit"))
    );
    assert_eq!(
        hub.bytes_sent("model.safetensors"),
        300_000,
        "no byte fetched twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_faults_are_retried_from_the_last_byte() {
    let files = files();
    let hub = FaultHub::start("127.0.0.1", files.clone());
    hub.fault("model.safetensors", Fault::Status(429));
    hub.fault("model.safetensors", Fault::Status(503));
    hub.fault("model.safetensors", Fault::StallAfter(20_000));
    hub.fault("model.safetensors", Fault::TruncateAfter(30_000));
    hub.fault("config.json", Fault::Status(500));
    let dir = tempfile::tempdir().unwrap();
    let m = materializer(dir.path(), &hub);
    let d = digest_of_files(&files);
    materialize(&m, &d, source(None))
        .await
        .expect("published despite the faults");
    assert_tree_matches(&m, &d, &files);
    // The probe: 429, 503, then 20000 bytes and a stall, then resumed at 20000 and cut at
    // 50000, then resumed at 50000: nothing is fetched twice.
    let probe_ranges: Vec<_> = hub
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("model.safetensors"))
        .filter_map(|r| r.range.clone())
        .take(5)
        .collect();
    assert_eq!(
        probe_ranges,
        [
            "bytes=0-65535",
            "bytes=0-65535",
            "bytes=0-65535",
            "bytes=20000-65535",
            "bytes=50000-65535"
        ]
    );
    assert_eq!(hub.bytes_sent("model.safetensors"), 300_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_byte_publishes_nothing_and_backs_off() {
    let files = files();
    let hub = FaultHub::start("127.0.0.1", files.clone());
    hub.corrupt("model.safetensors", 123_456);
    let dir = tempfile::tempdir().unwrap();
    let m = materializer(dir.path(), &hub);
    let d = digest_of_files(&files);
    let err = materialize(&m, &d, source(None)).await.unwrap_err();
    assert_eq!(err.reason, Reason::IntegrityMismatch, "{err}");
    assert!(m.store().published_tree(&d).is_none());
    match m.ensure(&d, source(None), Timestamp::now()) {
        Ensure::BackingOff {
            reason, retry_time, ..
        } => {
            assert_eq!(reason, Reason::IntegrityMismatch);
            assert!(retry_time.unwrap() > Timestamp::now());
        }
        other => panic!("expected a backoff, got {other:?}"),
    }
    let rec = m.store().digest_record(&d).unwrap();
    assert_eq!(
        (rec.failures, rec.reason.as_str()),
        (1, "IntegrityMismatch")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_does_not_follow_a_cross_host_redirect() {
    let files = files();
    // The CDN is reached as `localhost`, the hub as `127.0.0.1`: another host.
    let cdn = FaultHub::start("localhost", files.clone());
    let hub = FaultHub::start("127.0.0.1", files.clone());
    hub.redirect_downloads(&cdn.url);
    let dir = tempfile::tempdir().unwrap();
    let m = materializer(dir.path(), &hub);
    let d = digest_of_files(&files);
    materialize(&m, &d, source(Some("hf_sekrit")))
        .await
        .expect("published via the CDN");
    assert_tree_matches(&m, &d, &files);
    assert!(
        hub.requests()
            .iter()
            .all(|r| r.authorization.as_deref() == Some("Bearer hf_sekrit"))
    );
    let cdn_reqs = cdn.requests();
    assert!(!cdn_reqs.is_empty());
    assert!(
        cdn_reqs.iter().all(|r| r.authorization.is_none()),
        "{cdn_reqs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gated_repositories_and_digest_mismatches_are_refused() {
    let files = files();
    let hub = FaultHub::start("127.0.0.1", files.clone());
    hub.gated();
    let dir = tempfile::tempdir().unwrap();
    let m = materializer(dir.path(), &hub);
    let d = digest_of_files(&files);
    let err = materialize(&m, &d, source(None)).await.unwrap_err();
    assert_eq!(err.reason, Reason::AccessDenied, "{err}");

    let hub = FaultHub::start("127.0.0.1", files.clone());
    let dir = tempfile::tempdir().unwrap();
    let m = materializer(dir.path(), &hub);
    let other = ManifestDigest::parse(&format!("sha256:{}", "0".repeat(64))).unwrap();
    let err = materialize(&m, &other, source(None)).await.unwrap_err();
    assert_eq!(err.reason, Reason::IntegrityMismatch, "{err}");
    assert!(
        hub.requests().iter().all(|r| !r.path.contains("/resolve/")),
        "no file is fetched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_without_ranges_and_a_paginated_listing_work() {
    let files = files();
    let hub = FaultHub::start("127.0.0.1", files.clone());
    hub.without_ranges();
    hub.paginate(1);
    let dir = tempfile::tempdir().unwrap();
    let m = materializer(dir.path(), &hub);
    let d = digest_of_files(&files);
    materialize(&m, &d, source(None)).await.expect("published");
    assert_tree_matches(&m, &d, &files);
    let tree_pages = hub
        .requests()
        .iter()
        .filter(|r| r.path.contains("/tree/"))
        .count();
    assert_eq!(tree_pages, 4, "a directory and three files, one per page");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_mounts_of_one_digest_share_one_download() {
    let files = files();
    let hub = FaultHub::start("127.0.0.1", files.clone());
    hub.fault("model.safetensors", Fault::Status(503));
    let dir = tempfile::tempdir().unwrap();
    let m = materializer(dir.path(), &hub);
    let d = digest_of_files(&files);
    let first = m.ensure(&d, source(Some("a")), Timestamp::now());
    let second = m.ensure(&d, source(Some("b")), Timestamp::now());
    assert!(matches!(first, Ensure::InProgress(_)));
    assert!(
        matches!(second, Ensure::InProgress(_)),
        "the second mount joins: {second:?}"
    );
    tokio::time::timeout(DEADLINE, m.wait(&d)).await.unwrap();
    assert!(m.store().published_tree(&d).is_some());
    assert_eq!(
        hub.requests()
            .iter()
            .filter(|r| r.path.contains("/tree/"))
            .count(),
        1
    );
    assert_eq!(hub.bytes_sent("model.safetensors"), 300_000);
}

/// No mount asks for a stalled download any more: it is cancelled, recorded without backoff,
/// and its partial is kept; the next mount resumes it from the checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_no_mount_asks_for_is_cancelled_and_its_partial_kept() {
    let files = files();
    let hub = FaultHub::start("127.0.0.1", files.clone());
    hub.stall_from("model.safetensors", 128 * 1024);
    let dir = tempfile::tempdir().unwrap();
    let m = materializer_with(
        dir.path(),
        &hub,
        Tuning {
            stall_timeout: Duration::from_secs(120),
            window: 1,
            idle_cancel: Duration::from_millis(300),
            idle_check: Duration::from_millis(50),
            ..tuning()
        },
    );
    let d = digest_of_files(&files);
    let err = materialize(&m, &d, source(None)).await.unwrap_err();
    assert_eq!(err.reason, Reason::Canceled, "{err}");
    let rec = m.store().digest_record(&d).unwrap();
    assert_eq!(
        (rec.reason.as_str(), rec.retry_time, rec.failures),
        ("Canceled", None, 0),
        "a cancel does not back off"
    );
    assert_eq!(
        m.store().partial_attempts(&d).len(),
        1,
        "the partial is kept"
    );
    assert!(m.jobs().is_empty());

    // A mount that keeps asking (as the kubelet retries) sees it resume and publish.
    hub.clear_stalls();
    let sent_before = hub.bytes_sent("model.safetensors");
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        match m.ensure(&d, source(None), Timestamp::now()) {
            Ensure::Published(_) => break,
            Ensure::InProgress(_) => {}
            other => panic!("expected the download to resume, got {other:?}"),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not published in time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_tree_matches(&m, &d, &files);
    let resumed = hub.bytes_sent("model.safetensors") - sent_before;
    assert!(
        resumed <= 300_000 - 128 * 1024,
        "resumed from the checkpoint at 128 KiB, fetched {resumed}"
    );
}

/// The attempt's runtime is torn down mid-file (as a killed process would be); a new
/// materializer on the same cache resumes from the last checkpoint.
#[test]
fn a_killed_attempt_resumes_from_its_checkpoint() {
    let files = files();
    let hub = FaultHub::start("127.0.0.1", files.clone());
    let dir = tempfile::tempdir().unwrap();
    let d = digest_of_files(&files);
    {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let hub2 = hub.clone();
        rt.block_on(async {
            let mut t = tuning();
            t.stall_timeout = Duration::from_secs(120);
            t.window = 1;
            let _ = rustls::crypto::ring::default_provider().install_default();
            let config = StoreConfig {
                hub: HubSettings {
                    endpoint: hub2.url.clone(),
                    ..Default::default()
                },
                watermarks: gpustack_model_manager::gc::Watermarks {
                    high_percent: 100,
                    low_percent: 99,
                },
                pinned: vec![],
            };
            let m = Materializer::new(
                Store::open(dir.path()).unwrap(),
                DownloadLimits::new(8, 0),
                t,
                config,
            );
            // Stall the third segment, so two (128 KiB) are checkpointed first.
            hub2.fault("model.safetensors", Fault::Pass);
            hub2.fault("model.safetensors", Fault::Pass);
            hub2.fault("model.safetensors", Fault::StallAfter(0));
            let _ = m.ensure(&d, source(None), Timestamp::now());
            let deadline = std::time::Instant::now() + DEADLINE;
            loop {
                let ckpts = std::fs::read_dir(dir.path().join("partial").join(d.hex()))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .flat_map(|a| {
                        std::fs::read_dir(a.path().join("state"))
                            .into_iter()
                            .flatten()
                            .flatten()
                    })
                    .any(|c| {
                        std::fs::read_to_string(c.path())
                            .unwrap_or_default()
                            .contains("\"offset\": 131072")
                    });
                if ckpts {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "no checkpoint at 128 KiB"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        // Tasks are dropped mid-file as in a killed process; waiting for the runtime's threads
        // to stop keeps its last moments from racing the next materializer on the same cache.
        rt.shutdown_timeout(Duration::from_secs(10));
    }
    let before = hub.bytes_sent("model.safetensors");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let m = materializer(dir.path(), &hub);
        materialize(&m, &d, source(None))
            .await
            .expect("resumed and published");
        assert_tree_matches(&m, &d, &files);
        let rec = m.store().digest_record(&d).unwrap();
        assert_eq!(
            rec.last_attempt, 2,
            "the second attempt resumed the first's partial"
        );
    });
    let after = hub.bytes_sent("model.safetensors") - before;
    assert_eq!(
        after,
        300_000 - 131_072,
        "only the bytes after the checkpoint are fetched again"
    );
}
