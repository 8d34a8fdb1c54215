//! Trusting the cluster's front proxy (the aggregator): its client certificate, signed by the
//! request-header CA the cluster publishes in `kube-system/extension-apiserver-authentication`,
//! makes its `X-Remote-*` headers believable. Without that certificate they are ignored.

use std::sync::{Arc, RwLock};

use rustls::{
    DistinguishedName, RootCertStore, SignatureScheme,
    client::danger::HandshakeSignatureValid,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, UnixTime, pem::PemObject},
    server::{
        WebPkiClientVerifier,
        danger::{ClientCertVerified, ClientCertVerifier},
    },
};
use serde_json::Value;

use super::identity::HeaderNames;

/// The namespace of the cluster's authentication ConfigMap.
pub const CONFIGMAP_NAMESPACE: &str = "kube-system";
/// The cluster's authentication ConfigMap, which names the front proxy's CA and headers.
pub const CONFIGMAP_NAME: &str = "extension-apiserver-authentication";

/// What the ConfigMap says about the front proxy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trust {
    /// The CA the front proxy's client certificates are signed by (PEM).
    pub ca_pem: String,
    /// Common names the proxy's certificate may carry; empty allows any the CA signed.
    pub allowed_names: Vec<String>,
    /// The headers the proxy names the user in.
    pub headers: HeaderNames,
}

/// Why the front proxy's settings could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The ConfigMap names no CA.
    #[error("{CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} has no requestheader-client-ca-file")]
    NoCa,
    /// The CA does not parse (the cause).
    #[error("{CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}: requestheader-client-ca-file: {0}")]
    BadCa(String),
    /// A list setting is not a JSON list of strings.
    #[error("{CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}: {key} is not a JSON list of strings")]
    BadList {
        /// The ConfigMap's key.
        key: &'static str,
    },
}

fn list(data: &Value, key: &'static str) -> Result<Option<Vec<String>>, TrustError> {
    match data.get(key).and_then(Value::as_str) {
        None | Some("") => Ok(None),
        Some(s) => serde_json::from_str(s)
            .map(Some)
            .map_err(|_| TrustError::BadList { key }),
    }
}

/// Reads the ConfigMap's `data`.
pub fn parse(data: &Value) -> Result<Trust, TrustError> {
    let ca_pem = data
        .get("requestheader-client-ca-file")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or(TrustError::NoCa)?
        .to_owned();
    let defaults = HeaderNames::default();
    Ok(Trust {
        ca_pem,
        allowed_names: list(data, "requestheader-allowed-names")?.unwrap_or_default(),
        headers: HeaderNames {
            username: list(data, "requestheader-username-headers")?.unwrap_or(defaults.username),
            group: list(data, "requestheader-group-headers")?.unwrap_or(defaults.group),
            extra_prefix: list(data, "requestheader-extra-headers-prefix")?
                .unwrap_or(defaults.extra_prefix),
        },
    })
}

/// The common name of a DER certificate.
pub fn common_name(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let cn = parsed
        .subject()
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_owned();
    Some(cn)
}

/// Whether a verified certificate chain belongs to an allowed front proxy.
pub fn allowed(trust: &Trust, chain: &[CertificateDer<'static>]) -> bool {
    let Some(leaf) = chain.first() else {
        return false;
    };
    trust.allowed_names.is_empty()
        || common_name(leaf).is_some_and(|cn| trust.allowed_names.contains(&cn))
}

/// A client-certificate verifier whose CA can change while the server runs (the ConfigMap is
/// read at start and again on every install pass). Clients without a certificate are let
/// through to token authentication.
#[derive(Debug)]
pub struct Verifier {
    provider: Arc<CryptoProvider>,
    inner: RwLock<Option<Arc<dyn ClientCertVerifier>>>,
}

impl Verifier {
    /// A verifier that accepts no client certificate until a trust is set.
    pub fn new(provider: Arc<CryptoProvider>) -> Self {
        Verifier {
            provider,
            inner: RwLock::new(None),
        }
    }

    /// Trusts `ca_pem` from now on.
    pub fn set_ca(&self, ca_pem: &str) -> Result<(), TrustError> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| TrustError::BadCa(e.to_string()))?;
            roots
                .add(cert)
                .map_err(|e| TrustError::BadCa(e.to_string()))?;
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(|e| TrustError::BadCa(e.to_string()))?;
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = Some(verifier);
        Ok(())
    }

    fn current(&self) -> Option<Arc<dyn ClientCertVerifier>> {
        self.inner.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl ClientCertVerifier for Verifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    /// No hints: the proxy sends its certificate whatever the hints say, and the CA can change.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        match self.current() {
            Some(v) => v.verify_client_cert(end_entity, intermediates, now),
            None => Err(rustls::Error::General(
                "no front-proxy CA is known yet".into(),
            )),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configmap_keys_are_read_with_defaults() {
        let data = json!({
            "requestheader-client-ca-file": "-----BEGIN CERTIFICATE-----\n",
            "requestheader-allowed-names": "[\"front-proxy-client\"]",
            "requestheader-username-headers": "[\"X-Remote-User\"]",
        });
        let t = parse(&data).unwrap();
        assert_eq!(t.allowed_names, ["front-proxy-client"]);
        assert_eq!(t.headers.group, ["X-Remote-Group"]);
        assert!(matches!(parse(&json!({})), Err(TrustError::NoCa)));
        let bad =
            json!({"requestheader-client-ca-file": "x", "requestheader-allowed-names": "front"});
        assert_eq!(
            parse(&bad).unwrap_err().to_string(),
            "kube-system/extension-apiserver-authentication: requestheader-allowed-names is not a JSON list of strings"
        );
    }

    #[test]
    fn only_allowed_common_names_pass() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "front-proxy-client");
        let cert = params.self_signed(&key).unwrap();
        let chain = vec![cert.der().clone()];
        assert_eq!(
            common_name(&chain[0]).as_deref(),
            Some("front-proxy-client")
        );
        let mut trust = Trust {
            allowed_names: vec!["front-proxy-client".into()],
            ..Default::default()
        };
        assert!(allowed(&trust, &chain));
        trust.allowed_names = vec!["someone-else".into()];
        assert!(!allowed(&trust, &chain));
        trust.allowed_names.clear();
        assert!(allowed(&trust, &chain));
        assert!(!allowed(&trust, &[]));
    }
}
