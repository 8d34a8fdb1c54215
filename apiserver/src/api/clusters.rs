//! The clusters a gateway serves right now: embedded clusters, fixed at start, and upstream
//! mirrors, which come and go with subscriptions. Each has the hash of the token that reads
//! (or, for an embedded cluster, administers) it.

use std::{
    collections::BTreeMap,
    sync::{Arc, RwLock},
};

/// One served cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// SHA-256 (hex) of the cluster's bearer token.
    pub token_hash: String,
    /// A mirror: writes answer 405.
    pub read_only: bool,
}

/// Cheap to clone; shared by the API and the subscriptions.
#[derive(Clone, Default)]
pub struct ServedClusters {
    inner: Arc<RwLock<BTreeMap<String, Served>>>,
}

impl ServedClusters {
    /// Serves `name` (or replaces how it is served).
    pub fn insert(&self, name: &str, served: Served) {
        let mut m = self.inner.write().unwrap_or_else(|e| e.into_inner());
        m.insert(name.to_owned(), served);
    }

    /// Stops serving `name`.
    pub fn remove(&self, name: &str) {
        let mut m = self.inner.write().unwrap_or_else(|e| e.into_inner());
        m.remove(name);
    }

    /// How `name` is served, if it is.
    pub fn get(&self, name: &str) -> Option<Served> {
        let m = self.inner.read().unwrap_or_else(|e| e.into_inner());
        m.get(name).cloned()
    }

    /// The names of the clusters served, in order.
    pub fn names(&self) -> Vec<String> {
        let m = self.inner.read().unwrap_or_else(|e| e.into_inner());
        m.keys().cloned().collect()
    }

    /// Whether `hash` is the token hash of any served cluster.
    /// The cluster whose token hashes to `hash`.
    pub fn cluster_of_token(&self, hash: &str) -> Option<String> {
        let m = self.inner.read().unwrap_or_else(|e| e.into_inner());
        m.iter()
            .find(|(_, s)| s.token_hash == hash)
            .map(|(name, _)| name.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_come_and_go() {
        let c = ServedClusters::default();
        let s = Served {
            token_hash: "h".into(),
            read_only: true,
        };
        c.insert("east", s.clone());
        assert_eq!(c.get("east"), Some(s));
        assert_eq!(c.cluster_of_token("h").as_deref(), Some("east"));
        assert_eq!(c.cluster_of_token("x"), None);
        c.remove("east");
        assert!(c.names().is_empty());
    }
}
