//! Serving a cluster by name: its bearer token (kept across restarts: the one in its kubeconfig
//! if the store knows its hash), its kubeconfig file `<data-dir>/<NAME>.kubeconfig` (mode 0600),
//! and its entry in the table of served clusters. Embedded clusters are hosted at start; upstream
//! mirrors as they are subscribed and unhosted as they are unsubscribed.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
};

use crate::{
    api::clusters::{Served, ServedClusters},
    kubeconfig,
    store::{Store, StoreError, token_hash},
};

/// Why a cluster could not be hosted.
#[derive(Debug, thiserror::Error)]
pub enum HostingError {
    /// The cluster's token could not be stored or read.
    #[error("the store: {0}")]
    Store(#[from] StoreError),
    /// The kubeconfig could not be written.
    #[error("writing the kubeconfig {path}: {source}")]
    Kubeconfig {
        /// Where it was written to.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
}

/// The name of the admin kubeconfig (`_admin.kubeconfig`) and its context. Not a DNS label, so
/// no cluster's kubeconfig can take its file.
const ADMIN: &str = "_admin";

/// Where the kubeconfig of `cluster` is written.
pub fn kubeconfig_path(data_dir: &Path, cluster: &str) -> PathBuf {
    data_dir.join(format!("{cluster}.kubeconfig"))
}

/// The URL a kubeconfig names: the root for the cluster served there, else its prefix.
pub fn server_url(addr: SocketAddr, cluster: &str, at_root: bool) -> String {
    let host = match addr {
        SocketAddr::V4(a) if a.ip().is_unspecified() => "127.0.0.1".to_owned(),
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) if a.ip().is_unspecified() => "[::1]".to_owned(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    };
    if at_root {
        format!("https://{host}:{}", addr.port())
    } else {
        format!("https://{host}:{}/clusters/{cluster}", addr.port())
    }
}

/// The cluster's token: the one in its kubeconfig if the store knows it, else a new one.
async fn cluster_token(store: &Store, cluster: &str, path: &Path) -> Result<String, StoreError> {
    let stored = store.cluster_token_hash(cluster).await?;
    if let (Some(token), Some(hash)) = (kubeconfig::read_token(path), stored.as_ref())
        && token_hash(&token) == *hash
    {
        return Ok(token);
    }
    let token = kubeconfig::new_token();
    store.set_cluster_token(cluster, &token).await?;
    Ok(token)
}

/// What hosting a cluster needs. Cheap to clone.
#[derive(Clone)]
pub struct Hosting {
    /// The store every hosted cluster's objects and tokens live in.
    pub store: Store,
    /// Where kubeconfigs are written (beside the database).
    pub data_dir: PathBuf,
    /// The HTTPS address kubeconfigs point at.
    pub addr: SocketAddr,
    /// The CA certificate (PEM) that kubeconfigs tell clients to trust.
    pub ca_pem: String,
    /// The clusters served now, which hosting adds to and removes from.
    pub served: ServedClusters,
    /// The cluster also served at the root (the only embedded cluster), if any.
    pub root: Option<String>,
}

impl Hosting {
    /// Serves `cluster` (read-only for a mirror) and writes its kubeconfig; returns its path.
    pub async fn host(&self, cluster: &str, read_only: bool) -> Result<PathBuf, HostingError> {
        let path = kubeconfig_path(&self.data_dir, cluster);
        let token = cluster_token(&self.store, cluster, &path).await?;
        if !read_only {
            // The name is an embedded cluster's now: its objects are not an upstream's.
            self.store.leave_fleet(cluster).await?;
        }
        let at_root = self.root.as_deref() == Some(cluster);
        let text = kubeconfig::render(
            cluster,
            &server_url(self.addr, cluster, at_root),
            &self.ca_pem,
            &token,
        );
        kubeconfig::write(&path, &text).map_err(|source| HostingError::Kubeconfig {
            path: path.clone(),
            source,
        })?;
        self.served.insert(
            cluster,
            Served {
                token_hash: token_hash(&token),
                read_only,
            },
        );
        Ok(path)
    }

    /// Writes `<data-dir>/_admin.kubeconfig`: the gateway's root (where `/apis/workers` and
    /// `/metrics` are, and the only embedded cluster if there is one) with the `--token-file`
    /// token.
    pub fn write_admin_kubeconfig(&self, token: &str) -> Result<PathBuf, HostingError> {
        let path = kubeconfig_path(&self.data_dir, ADMIN);
        let text = kubeconfig::render(
            ADMIN,
            &server_url(self.addr, ADMIN, true),
            &self.ca_pem,
            token,
        );
        kubeconfig::write(&path, &text).map_err(|source| HostingError::Kubeconfig {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Stops serving `cluster` and removes its kubeconfig.
    pub fn unhost(&self, cluster: &str) {
        self.served.remove(cluster);
        let _ = std::fs::remove_file(kubeconfig_path(&self.data_dir, cluster));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls() {
        let a: SocketAddr = "0.0.0.0:9443".parse().unwrap();
        assert_eq!(server_url(a, "demo", true), "https://127.0.0.1:9443");
        assert_eq!(
            server_url(a, "demo", false),
            "https://127.0.0.1:9443/clusters/demo"
        );
        let b: SocketAddr = "[::]:1".parse().unwrap();
        assert_eq!(server_url(b, "x", true), "https://[::1]:1");
    }
}
