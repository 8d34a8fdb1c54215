//! Serving certificates: a CA and a leaf signed by it for the names a server answers to, and
//! the rustls server configuration (ring provider only) built from PEM.

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::{
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::{ClientHello, ResolvesServerCert, danger::ClientCertVerifier},
    sign::CertifiedKey,
};

/// A generated CA and serving certificate, as PEM.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The CA's certificate, which clients trust.
    pub ca_pem: String,
    /// The CA's private key, which signs renewed leaves.
    pub ca_key_pem: String,
    /// The serving (leaf) certificate.
    pub cert_pem: String,
    /// The serving certificate's private key.
    pub key_pem: String,
}

/// Who the certificates are for: the CA's and the leaf's common names, and the leaf's names
/// (DNS names, and IP addresses written as such).
pub struct Names<'a> {
    /// The CA's common name.
    pub ca_common_name: &'a str,
    /// The leaf's common name.
    pub common_name: &'a str,
    /// The leaf's DNS names and IP addresses.
    pub subject_alt_names: &'a [&'a str],
}

/// How long a CA is valid from its issue.
pub const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 86_400);
/// How long a leaf is valid from its issue, unless its issuer says otherwise.
pub const LEAF_LIFETIME: Duration = Duration::from_secs(10 * 365 * 86_400);
/// How far back a certificate's validity starts, for peers whose clocks are behind ours.
pub const BACKDATE: Duration = Duration::from_secs(3600);

/// Sets `params` valid from (a little before) now for `lifetime`.
pub fn valid_for(params: &mut CertificateParams, lifetime: Duration) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - BACKDATE;
    params.not_after = now + lifetime;
}

/// When a certificate whose validity is (not before, not after), as Unix seconds, is due for
/// renewal: two thirds of the way from its issue (not before, less [`BACKDATE`]) to its end.
pub fn renewal_due((from, to): (i64, i64)) -> i64 {
    let issued = (from + BACKDATE.as_secs() as i64).min(to);
    issued + (to - issued) * 2 / 3
}

/// A certificate's validity (not before, not after) as Unix seconds, read from its PEM (the
/// first certificate of a chain).
pub fn validity(cert_pem: &str) -> Result<(i64, i64), ValidityError> {
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(ValidityError::Pem)?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der)
        .map_err(|e| ValidityError::Parse(e.to_string()))?;
    let validity = cert.validity();
    Ok((
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    ))
}

/// Why a certificate's validity could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ValidityError {
    /// The PEM text is not a certificate.
    #[error("certificate PEM: {0}")]
    Pem(rustls::pki_types::pem::Error),
    /// The DER does not parse as X.509.
    #[error("certificate: {0}")]
    Parse(String),
}

/// A CA's parameters: named `common_name`, valid for [`CA_LIFETIME`] from now.
pub fn ca_params(common_name: &str) -> Result<CertificateParams, rcgen::Error> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, common_name);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    valid_for(&mut ca, CA_LIFETIME);
    Ok(ca)
}

/// A leaf certificate's parameters: named `common_name` with `dns_names`, for `purpose`
/// (serving or client), valid for [`LEAF_LIFETIME`] from now.
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
    valid_for(&mut leaf, LEAF_LIFETIME);
    Ok(leaf)
}

/// A fresh CA and a serving certificate it signed, each valid for its lifetime from now.
pub fn generate(names: &Names<'_>) -> Result<Generated, rcgen::Error> {
    generate_for(names, LEAF_LIFETIME)
}

/// A fresh CA and a serving certificate it signed, valid for `leaf_lifetime` from now.
pub fn generate_for(names: &Names<'_>, leaf_lifetime: Duration) -> Result<Generated, rcgen::Error> {
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params(names.ca_common_name)?.self_signed(&ca_key)?;
    let ca_pem = ca_cert.pem();
    let (cert_pem, key_pem) = issue_serving(&ca_pem, &ca_key, names, leaf_lifetime)?;
    Ok(Generated {
        ca_pem,
        ca_key_pem: ca_key.serialize_pem(),
        cert_pem,
        key_pem,
    })
}

/// A new serving certificate for `names`, valid for `lifetime` from now, signed by the CA
/// `ca_pem` whose key is `ca_key`: (certificate, key) as PEM. Clients that trust the CA trust
/// it at once, so a server can renew its certificate without touching their configuration.
pub fn issue_serving(
    ca_pem: &str,
    ca_key: &KeyPair,
    names: &Names<'_>,
    lifetime: Duration,
) -> Result<(String, String), rcgen::Error> {
    let mut leaf = leaf_params(
        names.common_name,
        Vec::new(),
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    valid_for(&mut leaf, lifetime);
    for name in names.subject_alt_names {
        leaf.subject_alt_names.push(match name.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName((*name).try_into()?),
        });
    }
    let leaf_key = KeyPair::generate()?;
    let issuer = Issuer::from_ca_cert_pem(ca_pem, ca_key)?;
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
    Ok((leaf_cert.pem(), leaf_key.serialize_pem()))
}

/// Why a certificate and key cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The chain's PEM does not parse.
    #[error("the certificate chain is not valid PEM: {0}")]
    Chain(rustls::pki_types::pem::Error),
    /// The key's PEM does not parse.
    #[error("the private key is not valid PEM: {0}")]
    Key(rustls::pki_types::pem::Error),
    /// rustls refused the pair (unsupported key, or a key that does not match the leaf).
    #[error(transparent)]
    Rustls(#[from] rustls::Error),
}

/// A PEM chain (leaf first) and key as rustls serves them.
fn certified_key(cert_pem: &str, key_pem: &str) -> Result<CertifiedKey, ConfigError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(ConfigError::Chain)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(ConfigError::Key)?;
    let signing = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(key)?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match()?;
    Ok(certified)
}

/// The certificate a server presents, replaceable while it serves: a renewed certificate is
/// presented from the next handshake on, without a restart or a dropped connection.
#[derive(Debug)]
pub struct CertSlot(std::sync::RwLock<Arc<CertifiedKey>>);

impl CertSlot {
    /// A slot holding the PEM chain (leaf first) and key; refused when they do not match.
    pub fn new(cert_pem: &str, key_pem: &str) -> Result<Arc<Self>, ConfigError> {
        Ok(Arc::new(CertSlot(std::sync::RwLock::new(Arc::new(
            certified_key(cert_pem, key_pem)?,
        )))))
    }

    /// Presents this chain and key from now on; on an error the current pair stays.
    pub fn replace(&self, cert_pem: &str, key_pem: &str) -> Result<(), ConfigError> {
        let new = Arc::new(certified_key(cert_pem, key_pem)?);
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = new;
        Ok(())
    }
}

impl ResolvesServerCert for CertSlot {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// The server configuration presenting what `slot` holds, speaking HTTP/2 and 1.1.
pub fn server_config_with(slot: Arc<CertSlot>) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_cert_resolver(slot);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
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

/// Why a serving configuration could not be made from a directory or generated.
#[derive(Debug, thiserror::Error)]
pub enum ServingConfigError {
    /// A file of the directory could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
    /// The directory's certificate and key cannot be served.
    #[error("{}: {source}", dir.display())]
    Pair {
        /// The directory.
        dir: PathBuf,
        /// What is wrong with the pair.
        #[source]
        source: ConfigError,
    },
    /// rcgen could not generate a certificate.
    #[error("generating a serving certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The generated pair cannot be served.
    #[error("building the TLS configuration: {0}")]
    Config(#[source] ConfigError),
}

/// The serving configuration of a port without a CA of its own: the `tls.crt`/`tls.key` pair in
/// `cert_dir`, else a CA and certificate for `names` generated now (the CA is not kept; such a
/// port's clients are given the pair through `cert_dir` when they verify it).
pub fn serving_config(
    cert_dir: Option<&Path>,
    names: &Names<'_>,
) -> Result<Arc<rustls::ServerConfig>, ServingConfigError> {
    match cert_dir {
        Some(dir) => {
            let read = |name: &str| {
                let path = dir.join(name);
                std::fs::read_to_string(&path)
                    .map_err(|source| ServingConfigError::Read { path, source })
            };
            let (cert_pem, key_pem) = (read("tls.crt")?, read("tls.key")?);
            server_config(&cert_pem, &key_pem, None).map_err(|source| ServingConfigError::Pair {
                dir: dir.to_path_buf(),
                source,
            })
        }
        None => {
            let made = generate(names)?;
            server_config(&made.cert_pem, &made.key_pem, None).map_err(ServingConfigError::Config)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_serving_config_comes_from_a_directory_or_is_generated() {
        let names = Names {
            ca_common_name: "agent-ca",
            common_name: "agent",
            subject_alt_names: &["localhost", "127.0.0.1"],
        };
        assert!(serving_config(None, &names).is_ok());
        let dir = tempfile::tempdir().unwrap();
        let missing = serving_config(Some(dir.path()), &names).unwrap_err();
        assert!(
            matches!(&missing, ServingConfigError::Read { path, .. } if path.ends_with("tls.crt")),
            "{missing}"
        );
        let made = generate(&names).unwrap();
        std::fs::write(dir.path().join("tls.crt"), &made.cert_pem).unwrap();
        std::fs::write(dir.path().join("tls.key"), "not a key").unwrap();
        let bad = serving_config(Some(dir.path()), &names).unwrap_err();
        assert!(matches!(bad, ServingConfigError::Pair { .. }), "{bad}");
        std::fs::write(dir.path().join("tls.key"), &made.key_pem).unwrap();
        assert!(serving_config(Some(dir.path()), &names).is_ok());
    }

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

    #[test]
    fn a_renewed_leaf_comes_from_the_same_ca_for_its_lifetime() {
        let names = Names {
            ca_common_name: "test-ca",
            common_name: "svc",
            subject_alt_names: &["localhost", "127.0.0.1"],
        };
        let g = generate(&names).unwrap();
        let (ca_from, ca_to) = validity(&g.ca_pem).unwrap();
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        assert!(ca_from <= now && ca_from > now - 7200, "{ca_from}");
        assert!(ca_to > now + 9 * 365 * 86_400);
        let ca_key = KeyPair::from_pem(&g.ca_key_pem).unwrap();
        let (cert, key) =
            issue_serving(&g.ca_pem, &ca_key, &names, Duration::from_secs(600)).unwrap();
        let (from, to) = validity(&cert).unwrap();
        assert_eq!(to - from, 600 + 3600);
        // The renewed leaf verifies against the original CA.
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(g.ca_pem.as_bytes()).unwrap())
            .unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let leaf = CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
        use rustls::client::danger::ServerCertVerifier;
        verifier
            .verify_server_cert(
                &leaf,
                &[],
                &rustls::pki_types::ServerName::try_from("localhost").unwrap(),
                &[],
                rustls::pki_types::UnixTime::now(),
            )
            .unwrap();
        assert_eq!(renewal_due((from, to)), from + 3600 + 400);
        let slot = CertSlot::new(&g.cert_pem, &g.key_pem).unwrap();
        slot.replace(&cert, &key).unwrap();
        assert!(
            slot.replace(&cert, &g.key_pem).is_err(),
            "a mismatched key is refused"
        );
        assert!(server_config_with(slot).is_ok());
    }
}
