//! The materializer against a real Hugging Face-compatible server: olah from PyPI serving a
//! local git repository offline (revision, tree listing with its same-host redirect, chunked
//! whole-file downloads that ignore Range).

mod support;

use std::time::Duration;

use gpustack_model_manager::{
    download::{DownloadLimits, Tuning},
    filter::FileFilter,
    hashing::digest_of,
    hub::{HubClient, HubSettings},
    manifest::{Manifest, ManifestEntry},
    materializer::{Ensure, Materializer, Source, StoreConfig},
    store::Store,
};
use jiff::Timestamp;
use support::olah::{self, RepoFile};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn olah_repository_is_listed_downloaded_and_published() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let work = tempfile::tempdir().unwrap();
    let weights: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 253) as u8).collect();
    let files = [
        RepoFile {
            path: "config.json",
            bytes: br#"{"model_type":"test"}"#,
            lfs: false,
        },
        RepoFile {
            path: "model.safetensors",
            bytes: &weights,
            lfs: true,
        },
        RepoFile {
            path: "sub/a.txt",
            bytes: b"hello\n",
            lfs: false,
        },
        RepoFile {
            path: "README.md",
            bytes: b"# not wanted\n",
            lfs: false,
        },
    ];
    let commit = olah::make_repo(&work.path().join("mirrors"), "org/model", &files);
    let hub = olah::start(work.path(), "org/model");

    let settings = HubSettings {
        endpoint: hub.url.clone(),
        ..Default::default()
    };
    let client = HubClient::new(&settings).unwrap();
    assert_eq!(
        client
            .resolve_revision("org/model", "main", None)
            .await
            .unwrap(),
        commit
    );

    // The digest the worker would have resolved: computed here from the files themselves.
    let filter = FileFilter::new(&[], &["*.md".into()]);
    let want = Manifest::new(
        files
            .iter()
            .filter(|f| filter.keeps(f.path))
            .map(|f| ManifestEntry {
                path: f.path.into(),
                size: f.bytes.len() as u64,
                digest: digest_of(f.bytes, f.lfs),
            })
            .collect(),
    )
    .unwrap()
    .digest();

    let cache = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        hub: settings,
        watermarks: gpustack_model_manager::gc::Watermarks {
            high_percent: 100,
            low_percent: 99,
        },
        pinned: vec![],
    };
    let m = Materializer::new(
        Store::open(cache.path()).unwrap(),
        DownloadLimits::new(8, 0),
        Tuning {
            segment_bytes: 64 * 1024,
            ..Tuning::default()
        },
        config,
    );
    let source = Source {
        repository: "org/model".into(),
        commit,
        filter,
        token: None,
    };
    assert!(matches!(
        m.ensure(&want, source.clone(), Timestamp::now()),
        Ensure::InProgress(_)
    ));
    let outcome = tokio::time::timeout(Duration::from_secs(60), m.wait(&want))
        .await
        .unwrap();
    assert_eq!(outcome, Some(Ok(())));
    let tree = m.store().published_tree(&want).expect("published");
    assert_eq!(
        std::fs::read(tree.join("model.safetensors")).unwrap(),
        weights
    );
    assert_eq!(std::fs::read(tree.join("sub/a.txt")).unwrap(), b"hello\n");
    assert!(
        !tree.join("README.md").exists(),
        "ignored files are not fetched"
    );
    assert!(matches!(
        m.ensure(&want, source, Timestamp::now()),
        Ensure::Published(_)
    ));
}
