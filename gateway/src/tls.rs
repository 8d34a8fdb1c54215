//! The serving certificate: a CA and a leaf for 127.0.0.1, ::1 and localhost, generated once and
//! kept in the data directory (keys with mode 0600). rustls with the ring provider only.

use std::{
    fs,
    io::Write,
    net::IpAddr,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    sync::Arc,
};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating certificates")]
    Generate(#[from] rcgen::Error),
    #[error("reading or writing {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing PEM in {path}")]
    Pem {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("building the TLS configuration")]
    Rustls(#[from] rustls::Error),
}

/// What serving needs: the server configuration and the CA clients should trust.
pub struct ServingTls {
    pub ca_pem: String,
    pub config: Arc<rustls::ServerConfig>,
}

const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const SERVING_CERT: &str = "serving.crt";
const SERVING_KEY: &str = "serving.key";

fn write_file(path: &Path, text: &str, mode: u32) -> Result<(), TlsError> {
    let io = |source| TlsError::Io {
        path: path.to_owned(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let mut f = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    fs::rename(&tmp, path).map_err(io)
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

/// A fresh CA and serving certificate, as PEM: (ca cert, ca key, serving cert, serving key).
pub fn generate() -> Result<[String; 4], rcgen::Error> {
    let ca = ca_params("gpustack-gateway-ca")?;
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;

    let mut leaf = leaf_params(
        "gpustack-gateway",
        vec!["localhost".to_owned()],
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    for ip in ["127.0.0.1", "::1"] {
        leaf.subject_alt_names.push(SanType::IpAddress(
            ip.parse::<IpAddr>().expect("literal address"),
        ));
    }
    let leaf_key = KeyPair::generate()?;
    let issuer = Issuer::from_params(&ca, &ca_key);
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
    Ok([
        ca_cert.pem(),
        ca_key.serialize_pem(),
        leaf_cert.pem(),
        leaf_key.serialize_pem(),
    ])
}

/// Loads the certificates under `dir`, generating them first if any is missing.
pub fn load_or_create(dir: &Path) -> Result<ServingTls, TlsError> {
    fs::create_dir_all(dir).map_err(|source| TlsError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let names = [CA_CERT, CA_KEY, SERVING_CERT, SERVING_KEY];
    if !names.iter().all(|n| dir.join(n).exists()) {
        let pems = generate()?;
        for (name, pem) in names.iter().zip(pems.iter()) {
            let mode = if name.ends_with(".key") { 0o600 } else { 0o644 };
            write_file(&dir.join(name), pem, mode)?;
        }
        tracing::info!(dir = %dir.display(), "generated a CA and serving certificate");
    }
    let read = |name: &str| {
        let path = dir.join(name);
        fs::read_to_string(&path).map_err(|source| TlsError::Io { path, source })
    };
    let ca_pem = read(CA_CERT)?;
    let config = server_config(&dir.join(SERVING_CERT), &dir.join(SERVING_KEY))?;
    Ok(ServingTls { ca_pem, config })
}

/// Serves the certificate of `--cert-dir`: `tls.crt` (the chain, leaf first) and `tls.key`.
/// Kubeconfigs then trust `ca.crt` from the same directory when there is one, else `tls.crt`
/// itself (enough for a self-signed certificate).
pub fn load_cert_dir(dir: &Path) -> Result<ServingTls, TlsError> {
    let cert = dir.join("tls.crt");
    let config = server_config(&cert, &dir.join("tls.key"))?;
    let ca = dir.join("ca.crt");
    let trusted = if ca.exists() { ca } else { cert };
    let ca_pem = fs::read_to_string(&trusted).map_err(|source| TlsError::Io {
        path: trusted,
        source,
    })?;
    Ok(ServingTls { ca_pem, config })
}

/// A rustls server configuration (HTTP/2 and HTTP/1.1) for the PEM chain and key at these paths.
fn server_config(cert_path: &Path, key_path: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_path)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|source| TlsError::Pem {
            path: cert_path.to_owned(),
            source,
        })?;
    let key = PrivateKeyDer::from_pem_file(key_path).map_err(|source| TlsError::Pem {
        path: key_path.to_owned(),
        source,
    })?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_once_and_reuses() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(dir.path()).unwrap();
        let second = load_or_create(dir.path()).unwrap();
        assert_eq!(first.ca_pem, second.ca_pem);
        assert!(first.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let mode = fs::metadata(dir.path().join(SERVING_KEY))
            .unwrap()
            .permissions();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.mode() & 0o777, 0o600);
    }

    #[test]
    fn cert_dir_serves_its_pair_and_trusts_its_ca() {
        let dir = tempfile::tempdir().unwrap();
        let [ca, _, leaf, key] = generate().unwrap();
        fs::write(dir.path().join("tls.crt"), &leaf).unwrap();
        let missing = load_cert_dir(dir.path()).err().unwrap();
        assert!(matches!(&missing, TlsError::Pem { path, .. } if path.ends_with("tls.key")));
        fs::write(dir.path().join("tls.key"), &key).unwrap();
        assert_eq!(load_cert_dir(dir.path()).unwrap().ca_pem, leaf);
        fs::write(dir.path().join("ca.crt"), &ca).unwrap();
        assert_eq!(load_cert_dir(dir.path()).unwrap().ca_pem, ca);
    }
}
