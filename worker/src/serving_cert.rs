//! The worker's serving certificate: `--cert-dir` when given, else a CA and certificate
//! generated once and kept in a Secret of the system namespace, so that every replica and every
//! restart serves the same one and the APIServices' `caBundle` stays true.

use std::{collections::BTreeMap, path::Path};

use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::api::{Api, ObjectMeta, PostParams};

use crate::names;

/// PEM material to serve with.
#[derive(Clone, Debug)]
pub struct Material {
    /// What clients (the APIServices' `caBundle`) trust.
    pub ca_pem: String,
    /// The certificate (PEM).
    pub cert_pem: String,
    /// Its private key (PEM).
    pub key_pem: String,
}

/// Why there is no serving certificate.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A certificate could not be generated.
    #[error("generating the serving certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The Secret could not be read or written.
    #[error("secret {namespace}/{}: {source}", names::SERVING_SECRET)]
    Kube {
        /// The Secret's namespace.
        namespace: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The Secret lacks a key.
    #[error(
        "secret {namespace}/{}: key {key} is missing or not text",
        names::SERVING_SECRET
    )]
    Incomplete {
        /// The Secret's namespace.
        namespace: String,
        /// The key.
        key: &'static str,
    },
}

/// The names the certificate answers to: the Service's, in every form, and loopback.
pub fn subject_alt_names(namespace: &str) -> Vec<String> {
    let svc = names::SERVICE;
    vec![
        format!("{svc}.{namespace}.svc"),
        format!("{svc}.{namespace}.svc.cluster.local"),
        format!("{svc}.{namespace}"),
        svc.to_owned(),
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ]
}

/// `--cert-dir`: `tls.crt` (chain, leaf first) and `tls.key`; clients trust `ca.crt` there when
/// present, else `tls.crt` itself.
pub fn from_dir(dir: &Path) -> Result<Material, CertError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|source| CertError::Read {
            path: path.display().to_string(),
            source,
        })
    };
    let cert_pem = read("tls.crt")?;
    let key_pem = read("tls.key")?;
    let ca_pem = if dir.join("ca.crt").exists() {
        read("ca.crt")?
    } else {
        cert_pem.clone()
    };
    Ok(Material {
        ca_pem,
        cert_pem,
        key_pem,
    })
}

fn from_secret(secret: &Secret, namespace: &str) -> Result<Material, CertError> {
    let get = |key: &'static str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .ok_or(CertError::Incomplete {
                namespace: namespace.to_owned(),
                key,
            })
    };
    Ok(Material {
        ca_pem: get("ca.crt")?,
        cert_pem: get("tls.crt")?,
        key_pem: get("tls.key")?,
    })
}

/// The shared material from the Secret, generating and storing it when there is none yet (the
/// first replica to store it wins; the others read what it stored).
pub async fn shared(client: &kube::Client, namespace: &str) -> Result<Material, CertError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let kube_err = |source| CertError::Kube {
        namespace: namespace.to_owned(),
        source,
    };
    if let Some(s) = api.get_opt(names::SERVING_SECRET).await.map_err(kube_err)? {
        return from_secret(&s, namespace);
    }
    let sans = subject_alt_names(namespace);
    let sans: Vec<&str> = sans.iter().map(String::as_str).collect();
    let g = gpustack_serving::certs::generate(&gpustack_serving::certs::Names {
        ca_common_name: "gpustack-operator-worker-ca",
        common_name: names::SERVICE,
        subject_alt_names: &sans,
    })?;
    let data = BTreeMap::from([
        (
            "ca.crt".to_owned(),
            ByteString(g.ca_pem.clone().into_bytes()),
        ),
        (
            "tls.crt".to_owned(),
            ByteString(g.cert_pem.clone().into_bytes()),
        ),
        (
            "tls.key".to_owned(),
            ByteString(g.key_pem.clone().into_bytes()),
        ),
    ]);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(names::SERVING_SECRET.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(s) => from_secret(&s, namespace),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let s = api.get(names::SERVING_SECRET).await.map_err(kube_err)?;
            from_secret(&s, namespace)
        }
        Err(e) => Err(kube_err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cover_the_service_and_loopback() {
        let sans = subject_alt_names("gpustack-system");
        assert!(sans.contains(&"gpustack-operator-worker.gpustack-system.svc".to_owned()));
        assert!(sans.contains(&"127.0.0.1".to_owned()));
    }

    #[test]
    fn cert_dir_without_a_ca_trusts_the_certificate_itself() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tls.crt"), "CERT").unwrap();
        std::fs::write(dir.path().join("tls.key"), "KEY").unwrap();
        let m = from_dir(dir.path()).unwrap();
        assert_eq!(m.ca_pem, "CERT");
        std::fs::write(dir.path().join("ca.crt"), "CA").unwrap();
        assert_eq!(from_dir(dir.path()).unwrap().ca_pem, "CA");
        let missing = from_dir(&dir.path().join("nope")).unwrap_err().to_string();
        assert!(missing.starts_with("reading "), "{missing}");
    }
}
