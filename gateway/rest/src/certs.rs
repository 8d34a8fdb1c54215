//! Serving certificates: a CA and a leaf signed by it for the names a server answers to, and
//! the rustls server configuration (ring provider only) built from PEM.

use std::{net::IpAddr, sync::Arc};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::{
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::danger::ClientCertVerifier,
};

/// A generated CA and serving certificate, as PEM.
#[derive(Clone, Debug)]
pub struct Generated {
    pub ca_pem: String,
    pub ca_key_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Who the certificates are for: the CA's and the leaf's common names, and the leaf's names
/// (DNS names, and IP addresses written as such).
pub struct Names<'a> {
    pub ca_common_name: &'a str,
    pub common_name: &'a str,
    pub subject_alt_names: &'a [&'a str],
}

/// A CA's parameters: named `common_name`, valid from 2025 to 2035.
pub fn ca_params(common_name: &str) -> Result<CertificateParams, rcgen::Error> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, common_name);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = rcgen::date_time_ymd(2025, 1, 1);
    ca.not_after = rcgen::date_time_ymd(2035, 1, 1);
    Ok(ca)
}

/// A leaf certificate's parameters: named `common_name` with `dns_names`, for `purpose`
/// (serving or client), valid from 2025 to 2035.
pub fn leaf_params(
    common_name: &str,
    dns_names: Vec<String>,
    purpose: ExtendedKeyUsagePurpose,
) -> Result<CertificateParams, rcgen::Error> {
    let mut leaf = CertificateParams::new(dns_names)?;
    leaf.distinguished_name
        .push(DnType::CommonName, common_name);
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![purpose];
    leaf.not_before = rcgen::date_time_ymd(2025, 1, 1);
    leaf.not_after = rcgen::date_time_ymd(2035, 1, 1);
    Ok(leaf)
}

/// A fresh CA and a serving certificate it signed, valid 2025–2035.
pub fn generate(names: &Names<'_>) -> Result<Generated, rcgen::Error> {
    let ca = ca_params(names.ca_common_name)?;
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let mut leaf = leaf_params(
        names.common_name,
        Vec::new(),
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    for name in names.subject_alt_names {
        leaf.subject_alt_names.push(match name.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName((*name).try_into()?),
        });
    }
    let leaf_key = KeyPair::generate()?;
    let issuer = Issuer::from_params(&ca, &ca_key);
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
    Ok(Generated {
        ca_pem: ca_cert.pem(),
        ca_key_pem: ca_key.serialize_pem(),
        cert_pem: leaf_cert.pem(),
        key_pem: leaf_key.serialize_pem(),
    })
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("the certificate chain is not valid PEM: {0}")]
    Chain(rustls::pki_types::pem::Error),
    #[error("the private key is not valid PEM: {0}")]
    Key(rustls::pki_types::pem::Error),
    #[error(transparent)]
    Rustls(#[from] rustls::Error),
}

/// The server configuration for a PEM chain (leaf first) and key, speaking HTTP/2 and 1.1,
/// optionally asking clients for certificates.
pub fn server_config(
    cert_pem: &str,
    key_pem: &str,
    client_verifier: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<Arc<rustls::ServerConfig>, ConfigError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(ConfigError::Chain)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(ConfigError::Key)?;
    let builder = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?;
    let builder = match client_verifier {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_material_serves() {
        let g = generate(&Names {
            ca_common_name: "test-ca",
            common_name: "svc",
            subject_alt_names: &["svc.ns.svc", "127.0.0.1", "::1"],
        })
        .unwrap();
        assert!(g.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(server_config(&g.cert_pem, &g.key_pem, None).is_ok());
        assert!(server_config(&g.cert_pem, "nonsense", None).is_err());
    }
}
