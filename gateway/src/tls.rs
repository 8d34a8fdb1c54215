//! The serving certificate: a CA and a leaf for 127.0.0.1, ::1 and localhost, generated once and
//! kept in the data directory (keys with mode 0600). rustls with the ring provider only.

use std::{
    fs,
    io::Write,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    sync::Arc,
};

use gpustack_kube_rest::certs::ConfigError;
pub use gpustack_kube_rest::certs::{ca_params, leaf_params};

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

/// A fresh CA and serving certificate for the loopback names, as PEM: (ca cert, ca key,
/// serving cert, serving key).
pub fn generate() -> Result<[String; 4], rcgen::Error> {
    let g = gpustack_kube_rest::certs::generate(&gpustack_kube_rest::certs::Names {
        ca_common_name: "gpustack-gateway-ca",
        common_name: "gpustack-gateway",
        subject_alt_names: &["localhost", "127.0.0.1", "::1"],
    })?;
    Ok([g.ca_pem, g.ca_key_pem, g.cert_pem, g.key_pem])
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
    let read = |path: &Path| {
        fs::read_to_string(path).map_err(|source| TlsError::Io {
            path: path.to_owned(),
            source,
        })
    };
    let pem_error = |path: &Path, e| match e {
        ConfigError::Chain(source) | ConfigError::Key(source) => TlsError::Pem {
            path: path.to_owned(),
            source,
        },
        ConfigError::Rustls(e) => TlsError::Rustls(e),
    };
    let (cert, key) = (read(cert_path)?, read(key_path)?);
    gpustack_kube_rest::certs::server_config(&cert, &key, None).map_err(|e| match e {
        ConfigError::Key(_) => pem_error(key_path, e),
        e => pem_error(cert_path, e),
    })
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
        assert!(
            matches!(&missing, TlsError::Io { path, .. } if path.ends_with("tls.key")),
            "a missing key names its file: {missing}"
        );
        fs::write(dir.path().join("tls.key"), "not a key").unwrap();
        let bad = load_cert_dir(dir.path()).err().unwrap();
        assert!(matches!(&bad, TlsError::Pem { path, .. } if path.ends_with("tls.key")));
        fs::write(dir.path().join("tls.key"), &key).unwrap();
        assert_eq!(load_cert_dir(dir.path()).unwrap().ca_pem, leaf);
        fs::write(dir.path().join("ca.crt"), &ca).unwrap();
        assert_eq!(load_cert_dir(dir.path()).unwrap().ca_pem, ca);
    }
}
