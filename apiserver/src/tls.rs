//! The serving certificate: a CA and a leaf for 127.0.0.1, ::1 and localhost, generated once and
//! kept in the data directory (keys with mode 0600), or the pair of `--cert-dir`. Either is kept
//! fresh while serving: a generated leaf is re-signed by the same CA at two thirds of its
//! lifetime (clients trust the CA, so nothing changes for them), a `--cert-dir` pair is reloaded
//! when its files change. rustls with the ring provider only.

use std::{
    fs,
    io::Write,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime},
};

use gpustack_serving::certs::{self, CertSlot, ConfigError, Names, ValidityError};
pub use gpustack_serving::certs::{ca_params, leaf_params};
use tokio::sync::watch;

/// Why serving certificates could not be made, loaded or renewed.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Generating a certificate or key failed.
    #[error("generating certificates")]
    Generate(#[from] rcgen::Error),
    /// A certificate or key file could not be read or written.
    #[error("reading or writing {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no valid PEM.
    #[error("parsing PEM in {path}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// Why it is not valid.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// rustls refused the certificate or key.
    #[error("building the TLS configuration")]
    Rustls(#[from] rustls::Error),
    /// A certificate's validity could not be read.
    #[error("reading the validity of {path}")]
    Validity {
        /// The certificate's file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: ValidityError,
    },
}

/// What serving needs: the server configuration, the CA clients should trust, and how the
/// certificate presented is kept fresh.
pub struct ServingTls {
    /// The CA certificate (PEM) that clients should trust.
    pub ca_pem: String,
    /// The rustls configuration listeners accept connections with.
    pub config: Arc<rustls::ServerConfig>,
    /// What keeps the presented certificate fresh (renewal or reloading).
    pub renewal: Renewal,
}

/// How the presented certificate is kept fresh (see [`keep_fresh`]).
pub struct Renewal {
    slot: Arc<CertSlot>,
    dir: PathBuf,
    source: Source,
}

enum Source {
    /// Generated under `dir`: re-signed with `ca.key` for `lifetime` when due.
    Generated { lifetime: Duration },
    /// The `tls.crt`/`tls.key` of `--cert-dir`: reloaded when they change.
    CertDir,
}

/// The names a generated serving certificate carries.
const NAMES: Names<'static> = Names {
    ca_common_name: "gpustack-gateway-ca",
    common_name: "gpustack-gateway",
    subject_alt_names: &["localhost", "127.0.0.1", "::1"],
};

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
pub fn generate(lifetime: Duration) -> Result<[String; 4], rcgen::Error> {
    let g = certs::generate_for(&NAMES, lifetime)?;
    Ok([g.ca_pem, g.ca_key_pem, g.cert_pem, g.key_pem])
}

/// Loads the certificates under `dir`, generating them first if any is missing; a serving
/// certificate renewed later is valid for `lifetime`.
pub fn load_or_create(dir: &Path, lifetime: Duration) -> Result<ServingTls, TlsError> {
    fs::create_dir_all(dir).map_err(|source| TlsError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let names = [CA_CERT, CA_KEY, SERVING_CERT, SERVING_KEY];
    if !names.iter().all(|n| dir.join(n).exists()) {
        let pems = generate(lifetime)?;
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
    let (cert, key) = (dir.join(SERVING_CERT), dir.join(SERVING_KEY));
    let slot = match load_slot(&cert, &key) {
        Ok(slot) => slot,
        Err(e @ (TlsError::Pem { .. } | TlsError::Rustls(_))) => {
            // Left half-written by a renewal cut short: the CA can sign another.
            tracing::warn!(error = %e, dir = %dir.display(), "the serving certificate is unusable; issuing a new one");
            reissue(dir, lifetime)?;
            load_slot(&cert, &key)?
        }
        Err(e) => return Err(e),
    };
    serving(ca_pem, slot, dir, Source::Generated { lifetime })
}

/// Serves the certificate of `--cert-dir`: `tls.crt` (the chain, leaf first) and `tls.key`.
/// Kubeconfigs then trust `ca.crt` from the same directory when there is one, else `tls.crt`
/// itself (enough for a self-signed certificate).
pub fn load_cert_dir(dir: &Path) -> Result<ServingTls, TlsError> {
    let cert = dir.join("tls.crt");
    let slot = load_slot(&cert, &dir.join("tls.key"))?;
    let ca = dir.join("ca.crt");
    let trusted = if ca.exists() { ca } else { cert };
    let ca_pem = fs::read_to_string(&trusted).map_err(|source| TlsError::Io {
        path: trusted,
        source,
    })?;
    serving(ca_pem, slot, dir, Source::CertDir)
}

fn serving(
    ca_pem: String,
    slot: Arc<CertSlot>,
    dir: &Path,
    source: Source,
) -> Result<ServingTls, TlsError> {
    Ok(ServingTls {
        ca_pem,
        config: certs::server_config_with(slot.clone())?,
        renewal: Renewal {
            slot,
            dir: dir.to_owned(),
            source,
        },
    })
}

/// How often `--cert-dir` is looked at for a changed pair.
const RELOAD_CHECK: Duration = Duration::from_secs(10);
/// How long after a failed renewal it is tried again.
const RETRY: Duration = Duration::from_secs(60);

/// Keeps the presented certificate fresh until `stop` turns true. Errors are logged and retried;
/// the certificate being served stays until a good replacement exists.
pub async fn keep_fresh(renewal: Renewal, mut stop: watch::Receiver<bool>) {
    let mut seen = pair_modified(&renewal);
    loop {
        let wait = match &renewal.source {
            Source::Generated { lifetime } => match renew_generated(&renewal, *lifetime) {
                Ok(wait) => wait,
                Err(e) => {
                    tracing::warn!(error = %e, dir = %renewal.dir.display(), "renewing the serving certificate failed");
                    RETRY
                }
            },
            Source::CertDir => {
                let now = pair_modified(&renewal);
                if now != seen {
                    match reload(&renewal) {
                        Ok(()) => {
                            seen = now;
                            tracing::info!(dir = %renewal.dir.display(), "serving the changed certificate of --cert-dir");
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, dir = %renewal.dir.display(), "the changed --cert-dir pair is not usable; serving the previous one")
                        }
                    }
                }
                RELOAD_CHECK
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// When the `--cert-dir` pair last changed (either file), to notice a replacement.
fn pair_modified(renewal: &Renewal) -> Option<(SystemTime, SystemTime)> {
    let modified = |name: &str| fs::metadata(renewal.dir.join(name)).and_then(|m| m.modified());
    Some((modified("tls.crt").ok()?, modified("tls.key").ok()?))
}

fn reload(renewal: &Renewal) -> Result<(), TlsError> {
    let (cert, key) = (renewal.dir.join("tls.crt"), renewal.dir.join("tls.key"));
    let (cert_pem, key_pem) = (read_file(&cert)?, read_file(&key)?);
    renewal
        .slot
        .replace(&cert_pem, &key_pem)
        .map_err(|e| config_error(&cert, &key, e))
}

/// Renews the generated serving certificate if two thirds of its validity have passed (or it
/// cannot be read); returns how long until the next renewal is due.
fn renew_generated(renewal: &Renewal, lifetime: Duration) -> Result<Duration, TlsError> {
    let cert = renewal.dir.join(SERVING_CERT);
    let now = jiff::Timestamp::now().as_second();
    let due = certs::renewal_due;
    let current = certs::validity(&read_file(&cert)?).map_err(|source| TlsError::Validity {
        path: cert.clone(),
        source,
    })?;
    if due(current) > now {
        return Ok(Duration::from_secs((due(current) - now) as u64));
    }
    let (cert_pem, key_pem) = reissue(&renewal.dir, lifetime)?;
    renewal
        .slot
        .replace(&cert_pem, &key_pem)
        .map_err(|e| config_error(&cert, &renewal.dir.join(SERVING_KEY), e))?;
    let renewed = certs::validity(&cert_pem).map_err(|source| TlsError::Validity {
        path: cert.clone(),
        source,
    })?;
    tracing::info!(dir = %renewal.dir.display(), not_after = renewed.1, "renewed the serving certificate");
    Ok(Duration::from_secs(
        due(renewed).saturating_sub(now).max(1) as u64
    ))
}

/// Signs a new serving certificate with the CA under `dir` and writes it there: (cert, key).
/// A crash between the two writes leaves a pair that does not match; the next start notices
/// and issues again (see [`load_or_create`]).
fn reissue(dir: &Path, lifetime: Duration) -> Result<(String, String), TlsError> {
    let ca_pem = read_file(&dir.join(CA_CERT))?;
    let ca_key = rcgen::KeyPair::from_pem(&read_file(&dir.join(CA_KEY))?)?;
    let (cert_pem, key_pem) = certs::issue_serving(&ca_pem, &ca_key, &NAMES, lifetime)?;
    write_file(&dir.join(SERVING_KEY), &key_pem, 0o600)?;
    write_file(&dir.join(SERVING_CERT), &cert_pem, 0o644)?;
    Ok((cert_pem, key_pem))
}

fn read_file(path: &Path) -> Result<String, TlsError> {
    fs::read_to_string(path).map_err(|source| TlsError::Io {
        path: path.to_owned(),
        source,
    })
}

/// The presented certificate, initially the PEM chain and key at these paths.
fn load_slot(cert_path: &Path, key_path: &Path) -> Result<Arc<CertSlot>, TlsError> {
    let (cert, key) = (read_file(cert_path)?, read_file(key_path)?);
    CertSlot::new(&cert, &key).map_err(|e| config_error(cert_path, key_path, e))
}

/// A configuration error named by the file it comes from.
fn config_error(cert_path: &Path, key_path: &Path, e: ConfigError) -> TlsError {
    let pem_error = |path: &Path, e| match e {
        ConfigError::Chain(source) | ConfigError::Key(source) => TlsError::Pem {
            path: path.to_owned(),
            source,
        },
        ConfigError::Rustls(e) => TlsError::Rustls(e),
    };
    match e {
        ConfigError::Key(_) => pem_error(key_path, e),
        e => pem_error(cert_path, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_once_and_reuses() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(dir.path(), Duration::from_secs(3600)).unwrap();
        let second = load_or_create(dir.path(), Duration::from_secs(3600)).unwrap();
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
        let [ca, _, leaf, key] = generate(Duration::from_secs(3600)).unwrap();
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
