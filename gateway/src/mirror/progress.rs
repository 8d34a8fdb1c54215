//! How far each mirrored kind's watch got upstream (the upstream's resourceVersion), kept in
//! the store so that a restarted gateway resumes the watch instead of relisting, as long as the
//! upstream still has that version. Noted in memory on every event and flushed every second:
//! a resume from a slightly older version replays a few events, which the mirror's unchanged-
//! content check turns into no writes.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use crate::hub_store::HubStore;

#[derive(Default)]
struct Latest {
    rv: Option<String>,
    dirty: bool,
}

/// One mirrored kind's progress. Cheap to clone.
#[derive(Clone)]
pub struct Progress {
    store: HubStore,
    cluster: String,
    group: String,
    resource: String,
    latest: Arc<Mutex<Latest>>,
}

impl Progress {
    /// The watch progress of one kind of one upstream, kept in `store`.
    pub fn new(store: HubStore, cluster: &str, group: &str, resource: &str) -> Self {
        Progress {
            store,
            cluster: cluster.to_owned(),
            group: group.to_owned(),
            resource: resource.to_owned(),
            latest: Default::default(),
        }
    }

    /// The version a previous run got to, if any.
    pub async fn stored(&self) -> Option<String> {
        let found = self
            .store
            .mirror_progress(&self.cluster, &self.group, &self.resource)
            .await;
        found.ok().flatten()
    }

    /// Records `rv`, the version of the newest event applied.
    pub fn note(&self, rv: Option<&str>) {
        let Some(rv) = rv.filter(|v| !v.is_empty()) else {
            return;
        };
        let mut l = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        l.rv = Some(rv.to_owned());
        l.dirty = true;
    }

    /// Writes the newest noted version, if it changed since the last flush.
    pub async fn flush(&self) {
        let rv = {
            let mut l = self.latest.lock().unwrap_or_else(|e| e.into_inner());
            if !l.dirty {
                return;
            }
            l.dirty = false;
            l.rv.clone()
        };
        let written = self
            .store
            .set_mirror_progress(&self.cluster, &self.group, &self.resource, rv.as_deref())
            .await;
        if let Err(e) = written {
            tracing::debug!(cluster = %self.cluster, resource = %self.resource, error = %e, "recording watch progress failed");
            self.latest.lock().unwrap_or_else(|e| e.into_inner()).dirty = true;
        }
    }

    /// Forgets the stored version (the upstream is another cluster now): the next run lists.
    pub async fn forget(&self) {
        *self.latest.lock().unwrap_or_else(|e| e.into_inner()) = Latest::default();
        let written = self
            .store
            .set_mirror_progress(&self.cluster, &self.group, &self.resource, None)
            .await;
        if let Err(e) = written {
            tracing::warn!(cluster = %self.cluster, resource = %self.resource, error = %e, "forgetting watch progress failed");
        }
    }

    /// Flushes every `period` until aborted.
    pub async fn flush_every(self, period: Duration) {
        let mut tick = tokio::time::interval(period);
        loop {
            tick.tick().await;
            self.flush().await;
        }
    }
}

/// The newest of the resourceVersions of a listed set of objects, where all are numbers (as
/// etcd's and this gateway's are): a watch from it replays at most what the list already had.
/// `None` when any is not a number (an opaque version cannot be ordered). Kept as the versions
/// arrive, so that a list of any length holds one number rather than every version it saw.
#[derive(Default)]
pub struct NewestListed {
    max: Option<u64>,
    /// A version that is not a number was seen: no checkpoint.
    opaque: bool,
}

impl NewestListed {
    /// Takes in one listed object's resource version.
    pub fn see(&mut self, rv: &str) {
        match rv.parse::<u64>() {
            Ok(n) => self.max = Some(self.max.map_or(n, |m| m.max(n))),
            Err(_) => self.opaque = true,
        }
    }

    /// The newest version seen, unless a version was not a number (then none can be trusted).
    pub fn get(&self) -> Option<String> {
        self.max.filter(|_| !self.opaque).map(|n| n.to_string())
    }
}

/// Aborts a task when dropped: ties a helper task's life to the future that spawned it.
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_listed_is_the_largest_number_or_nothing() {
        let newest_listed = |rvs: &[&str]| {
            let mut n = NewestListed::default();
            rvs.iter().for_each(|rv| n.see(rv));
            n.get()
        };
        assert_eq!(newest_listed(&["3", "12", "7"]), Some("12".into()));
        assert_eq!(newest_listed(&[]), None);
        assert_eq!(newest_listed(&["3", "abc"]), None);
        assert_eq!(newest_listed(&["abc", "3"]), None);
    }

    #[tokio::test]
    async fn progress_is_flushed_only_when_it_moved() {
        let dir = tempfile::tempdir().unwrap();
        let objects = gpustack_apiserver::store::Store::open(&dir.path().join("db"))
            .await
            .unwrap();
        let store = HubStore::on_sqlite(objects);
        let p = Progress::new(store.clone(), "east", "g", "r");
        assert_eq!(p.stored().await, None);
        p.note(Some("5"));
        p.note(Some(""));
        p.flush().await;
        assert_eq!(p.stored().await, Some("5".into()));
        store
            .set_mirror_progress("east", "g", "r", Some("9"))
            .await
            .unwrap();
        p.flush().await;
        assert_eq!(p.stored().await, Some("9".into()), "nothing new to flush");
    }
}
