//! A hub served over HTTPS by a private CA: the node trusts it only through the CA bundle that
//! `spec.hub.caBundleConfigMap` names (key `ca.crt`). The ConfigMap object is read as the
//! plugin reads it from the API, turned into the materializer's configuration by the same
//! function the status pass uses, and a download over TLS publishes; without the bundle the
//! handshake fails and the attempt says so.

mod support;

use std::{collections::BTreeMap, net::SocketAddr, sync::Arc, time::Duration};

use gpustack_api::model_store::{self as api, NodeModelStoreSpec};
use gpustack_model_manager::{
    download::{DownloadLimits, Tuning},
    failure::Reason,
    filter::FileFilter,
    hashing::digest_of,
    manifest::{Manifest, ManifestDigest, ManifestEntry},
    materializer::{Ensure, Materializer, Source},
    serve::{CA_BUNDLE_KEY, ConfigError, ca_of_config_map, store_config},
    store::Store,
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use support::{
    fault_hub::{COMMIT, FaultHub, HubFile},
    tls_front,
};

const DEADLINE: Duration = Duration::from_secs(60);

fn files() -> Vec<HubFile> {
    let weights: Vec<u8> = (0..150_000u32).map(|i| (i % 239) as u8).collect();
    vec![
        HubFile::new("config.json", br#"{"model_type":"tls"}"#.to_vec(), false),
        HubFile::new("model.safetensors", weights, true),
    ]
}

fn digest(files: &[HubFile]) -> ManifestDigest {
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

fn spec(endpoint: &str) -> NodeModelStoreSpec {
    NodeModelStoreSpec {
        // Capacity is exercised elsewhere: the store gets a filesystem of its own
        // (`store_root`) where it can, and the highest watermarks a spec allows.
        watermarks: api::Watermarks {
            high_percent: 95,
            low_percent: 94,
        },
        hub: api::HubSettings {
            hugging_face_endpoint: endpoint.to_owned(),
            ca_bundle_config_map: "hub-ca".into(),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn config_map(data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

/// Where a download's store lives: a 64 MiB tmpfs of its own, so that the watermarks do not
/// measure the host's disk (a nearly full build machine refused the download once); the host's
/// filesystem where mounting is not permitted.
fn store_root(dir: &std::path::Path) -> (std::path::PathBuf, Option<support::tmpfs::Tmpfs>) {
    let root = dir.join("store");
    match support::tmpfs::mount(&root, "64m") {
        Ok(fs) => (root, Some(fs)),
        Err(e) => {
            eprintln!("the store shares the host's disk: mounting a tmpfs is not permitted ({e})");
            (root, None)
        }
    }
}

async fn download(
    root: &std::path::Path,
    config: gpustack_model_manager::materializer::StoreConfig,
    d: &ManifestDigest,
) -> (
    Arc<Materializer>,
    Result<(), gpustack_model_manager::failure::Failure>,
) {
    let m = Materializer::new(
        Store::open(root).unwrap(),
        DownloadLimits::new(8, 0),
        Tuning {
            segment_bytes: 64 * 1024,
            ..Tuning::default()
        },
        config,
    );
    let source = Source {
        repository: "org/model".into(),
        commit: COMMIT.into(),
        filter: FileFilter::default(),
        token: None,
    };
    assert!(matches!(
        m.ensure(d, source, Timestamp::now()),
        Ensure::InProgress(_)
    ));
    let outcome = tokio::time::timeout(DEADLINE, m.wait(d))
        .await
        .expect("the attempt ends in time")
        .expect("an attempt ran");
    (m, outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ca_bundle_config_map_lets_the_node_trust_an_https_hub() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let files = files();
    let d = digest(&files);
    let hub = FaultHub::start("127.0.0.1", files.clone());
    let backend: SocketAddr = hub.url.trim_start_matches("http://").parse().unwrap();
    let front = tls_front::start(backend).await;

    // Without the bundle the hub's certificate is not trusted: the attempt fails in the
    // handshake, and the reason carries no URL.
    let untrusted = tempfile::tempdir().unwrap();
    let (untrusted_root, _untrusted_fs) = store_root(untrusted.path());
    let failure = download(
        &untrusted_root,
        store_config(&spec(&front.url), None).unwrap(),
        &d,
    )
    .await
    .1
    .expect_err("an untrusted certificate must fail the download");
    assert_eq!(failure.reason, Reason::SourceUnavailable, "{failure:?}");
    assert!(
        failure.message.ends_with(": TLS failure") && !failure.message.contains("127.0.0.1"),
        "{}",
        failure.message
    );
    assert!(
        hub.requests().is_empty(),
        "nothing reached the hub through an untrusted handshake"
    );

    // The ConfigMap as the API returns it: `ca.crt` holds the issuing CA.
    let cm = config_map(&[(CA_BUNDLE_KEY, &front.ca_pem)]);
    let pem = ca_of_config_map(&cm, "gpustack-system", "hub-ca").unwrap();
    let trusted = tempfile::tempdir().unwrap();
    let (trusted_root, _trusted_fs) = store_root(trusted.path());
    let (m, outcome) = download(
        &trusted_root,
        store_config(&spec(&front.url), Some(pem)).unwrap(),
        &d,
    )
    .await;
    outcome.expect("published over HTTPS with the bundle's CA trusted");
    let tree = m.store().published_tree(&d).expect("published");
    for f in &files {
        assert_eq!(std::fs::read(tree.join(&f.path)).unwrap(), f.bytes);
    }
    assert!(
        hub.requests()
            .iter()
            .any(|r| r.path.contains("/resolve/") && r.path.ends_with("model.safetensors")),
        "the files came through the TLS front"
    );
}

#[test]
fn a_ca_bundle_config_map_without_its_key_is_a_configuration_error() {
    let cm = config_map(&[("tls.crt", "-----BEGIN CERTIFICATE-----")]);
    let err = ca_of_config_map(&cm, "gpustack-system", "hub-ca").unwrap_err();
    assert!(matches!(err, ConfigError::CaBundle { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "spec.hub.caBundleConfigMap gpustack-system/hub-ca: has no key ca.crt"
    );
    assert!(ca_of_config_map(&ConfigMap::default(), "ns", "hub-ca").is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_bundle_without_certificates_stops_the_download_as_invalid() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let files = files();
    let d = digest(&files);
    let hub = FaultHub::start("127.0.0.1", files);
    let backend: SocketAddr = hub.url.trim_start_matches("http://").parse().unwrap();
    let front = tls_front::start(backend).await;
    let cm = config_map(&[(CA_BUNDLE_KEY, "not a certificate")]);
    let pem = ca_of_config_map(&cm, "gpustack-system", "hub-ca").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (root, _fs) = store_root(dir.path());
    let failure = download(
        &root,
        store_config(&spec(&front.url), Some(pem)).unwrap(),
        &d,
    )
    .await
    .1
    .expect_err("a bundle with no certificate cannot make a client");
    assert_eq!(failure.reason, Reason::InvalidRequest, "{failure:?}");
    assert!(failure.message.contains("ca.crt"), "{}", failure.message);
}
