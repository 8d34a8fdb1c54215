//! The front-proxy identity of an embedded cluster, as kube-apiserver's
//! `--requestheader-*`/`--proxy-client-*` flags make it: a CA created once per cluster and kept
//! in the store (never served), a client certificate (CN `front-proxy-client`) it signs at
//! every start, presented to APIService backends, and the ConfigMap
//! `kube-system/extension-apiserver-authentication` that tells backends whom to trust.

use std::{collections::BTreeMap, sync::Arc};

use rcgen::{ExtendedKeyUsagePurpose, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use serde_json::{Value, json};

use crate::{
    store::{Store, StoreError},
    tls,
};

/// The common name of the client certificate (what `requestheader-allowed-names` lists).
pub const CLIENT_NAME: &str = "front-proxy-client";
/// The common name of the front-proxy CA.
pub const CA_NAME: &str = "front-proxy-ca";
/// The header naming the user.
pub const USER_HEADER: &str = "X-Remote-User";
/// The header naming one group (repeated per group).
pub const GROUP_HEADER: &str = "X-Remote-Group";
/// The prefix of the headers carrying the user's extra values.
pub const EXTRA_PREFIX: &str = "X-Remote-Extra-";
/// The ConfigMap extension API servers read, in `kube-system`.
pub const CONFIGMAP: &str = "extension-apiserver-authentication";

/// The key the CA (certificate and key, PEM) is kept under in the store.
const CREDENTIAL: &str = "front-proxy-ca";

/// Why a cluster's front-proxy certificates could not be made or loaded.
#[derive(Debug, thiserror::Error)]
pub enum FrontProxyError {
    /// Generating a certificate or key failed.
    #[error("generating the front-proxy certificates")]
    Generate(#[from] rcgen::Error),
    /// The stored CA could not be loaded as a signer.
    #[error("the stored front-proxy CA")]
    Stored(#[source] rcgen::Error),
    /// The stored CA is not valid PEM.
    #[error("reading the stored front-proxy CA")]
    Pem(#[from] rustls::pki_types::pem::Error),
    /// Reading or writing the stored CA failed.
    #[error("the store")]
    Store(#[from] StoreError),
}

/// The certificate a cluster presents to backends, and the CA that signed it.
pub struct FrontProxy {
    /// The CA (PEM) that backends check the client certificate against (`requestheader-client-ca-file`).
    pub ca_pem: String,
    /// The client certificate chain presented to backends.
    pub client_chain: Vec<CertificateDer<'static>>,
    /// The client certificate's private key.
    pub client_key: Arc<PrivateKeyDer<'static>>,
}

/// A new CA: its certificate and key, PEM, one after the other.
fn new_ca() -> Result<String, rcgen::Error> {
    let key = KeyPair::generate()?;
    let cert = tls::ca_params(CA_NAME)?.self_signed(&key)?;
    Ok(format!("{}{}", cert.pem(), key.serialize_pem()))
}

/// The client certificate signed by the CA in `ca_pem` (certificate then key).
fn client_of(ca_pem: &str) -> Result<FrontProxy, FrontProxyError> {
    let end = "-----END CERTIFICATE-----";
    let at = ca_pem.find(end).map_or(ca_pem.len(), |i| i + end.len());
    let (ca_only, key_pem) = ca_pem.split_at(at);
    let ca_key = KeyPair::from_pem(key_pem.trim_start()).map_err(FrontProxyError::Stored)?;
    // The CA's subject and key identifier follow from its parameters and key: the issuer
    // they make signs certificates that chain to the stored CA certificate.
    let ca = tls::ca_params(CA_NAME)?;
    let issuer = Issuer::from_params(&ca, &ca_key);
    let leaf = tls::leaf_params(CLIENT_NAME, Vec::new(), ExtendedKeyUsagePurpose::ClientAuth)?;
    let key = KeyPair::generate()?;
    let cert = leaf.signed_by(&key, &issuer)?;
    Ok(FrontProxy {
        ca_pem: format!("{ca_only}\n"),
        client_chain: vec![cert.der().clone()],
        client_key: Arc::new(PrivateKeyDer::from_pem_slice(
            key.serialize_pem().as_bytes(),
        )?),
    })
}

/// The front-proxy identity of `cluster`: its stored CA (created on first use) and a fresh
/// client certificate.
pub async fn load(store: &Store, cluster: &str) -> Result<FrontProxy, FrontProxyError> {
    let candidate = new_ca()?;
    let ca = store
        .cluster_credential(cluster, CREDENTIAL, &candidate)
        .await?;
    client_of(&ca)
}

/// The data of `kube-system/extension-apiserver-authentication`, as kube-apiserver writes it:
/// `client_ca` is the CA of the cluster's serving certificate.
pub fn configmap_data(client_ca: &str, front_proxy_ca: &str) -> BTreeMap<&'static str, String> {
    let list = |s: &str| json!([s]).to_string();
    BTreeMap::from([
        ("client-ca-file", client_ca.to_owned()),
        ("requestheader-client-ca-file", front_proxy_ca.to_owned()),
        ("requestheader-allowed-names", list(CLIENT_NAME)),
        ("requestheader-username-headers", list(USER_HEADER)),
        ("requestheader-group-headers", list(GROUP_HEADER)),
        ("requestheader-extra-headers-prefix", list(EXTRA_PREFIX)),
    ])
}

/// The ConfigMap's body.
pub fn configmap(data: &BTreeMap<&'static str, String>) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP, "namespace": "kube-system"}, "data": data})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_certificate_chains_to_the_ca() {
        let ca = new_ca().unwrap();
        let fp = client_of(&ca).unwrap();
        assert!(fp.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!fp.ca_pem.contains("PRIVATE KEY"));
        // A server trusting only the CA accepts the client certificate.
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(fp.ca_pem.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        let now = rustls::pki_types::UnixTime::now();
        verifier
            .verify_client_cert(&fp.client_chain[0], &[], now)
            .unwrap();
    }

    #[test]
    fn the_configmap_holds_what_kube_apiserver_writes() {
        let data = configmap_data("CLUSTER-CA", "PROXY-CA");
        assert_eq!(
            data["requestheader-allowed-names"],
            r#"["front-proxy-client"]"#
        );
        assert_eq!(
            data["requestheader-username-headers"],
            r#"["X-Remote-User"]"#
        );
        assert_eq!(data["requestheader-group-headers"], r#"["X-Remote-Group"]"#);
        assert_eq!(
            data["requestheader-extra-headers-prefix"],
            r#"["X-Remote-Extra-"]"#
        );
        assert_eq!(data["client-ca-file"], "CLUSTER-CA");
        assert_eq!(data["requestheader-client-ca-file"], "PROXY-CA");
        assert_eq!(configmap(&data)["metadata"]["namespace"], "kube-system");
    }
}
