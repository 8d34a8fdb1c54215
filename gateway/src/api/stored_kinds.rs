//! The stored objects of a few kinds, per cluster, read once and kept until a committed change
//! to that kind invalidates them (seen on the store's event fan-out, drained on each read): what
//! every request consults (APIServices, RBAC objects) costs an in-memory lookup.
//!
//! The fan-out keeps each event until every receiver has taken it, so the receiver is also
//! drained whenever an event is sent ([`drain_on_every_event`]): one drained only on reads would
//! hold the last thousand committed objects whenever no request came (a few MB on a hub that
//! mirrors a burst).

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, Weak},
};

use serde_json::Value;
use tokio::sync::broadcast::{
    self,
    error::{RecvError, TryRecvError},
};

use crate::store::{ObjectKey, Precondition, Store, StoreError, StoredEvent, WriteOp};

/// (cluster, group, resource).
type Kind = (String, String, String);

struct Entries {
    events: broadcast::Receiver<StoredEvent>,
    lists: HashMap<Kind, Arc<Vec<Value>>>,
    /// The (group, resource) pairs ever read: a change to one of them invalidates reads in
    /// flight, cached or not.
    kinds: HashSet<(String, String)>,
    /// Bumped on every invalidation: a read that saw it change keeps its answer to itself.
    generation: u64,
}

impl Entries {
    fn drain(&mut self) {
        loop {
            match self.events.try_recv() {
                Ok(ev) => {
                    let k = &ev.key;
                    if self.kinds.contains(&(k.group.clone(), k.resource.clone())) {
                        let kind = (k.cluster.clone(), k.group.clone(), k.resource.clone());
                        self.lists.remove(&kind);
                        self.generation += 1;
                    }
                }
                Err(TryRecvError::Lagged(_)) => {
                    self.lists.clear();
                    self.generation += 1;
                }
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
            }
        }
    }
}

/// Cheap to clone.
#[derive(Clone)]
pub struct StoredKinds {
    store: Store,
    entries: Arc<Mutex<Entries>>,
}

impl StoredKinds {
    /// Must be called inside a Tokio runtime: it spawns the task that keeps the fan-out
    /// receiver drained.
    pub fn new(store: Store) -> Self {
        let entries = Arc::new(Mutex::new(Entries {
            events: store.subscribe(),
            lists: HashMap::new(),
            kinds: HashSet::new(),
            generation: 0,
        }));
        tokio::spawn(drain_on_every_event(
            Arc::downgrade(&entries),
            store.subscribe(),
        ));
        StoredKinds { store, entries }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        lock(&self.entries)
    }

    /// Every stored object of `group`/`resource` in `cluster`.
    pub async fn list(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
    ) -> Result<Arc<Vec<Value>>, StoreError> {
        let kind = (cluster.to_owned(), group.to_owned(), resource.to_owned());
        let generation = {
            let mut e = self.lock();
            e.drain();
            if let Some(list) = e.lists.get(&kind) {
                return Ok(list.clone());
            }
            e.kinds.insert((group.to_owned(), resource.to_owned()));
            e.generation
        };
        let items = Arc::new(
            self.store
                .list(cluster, group, resource, None, None, 0)
                .await?
                .items,
        );
        let mut e = self.lock();
        e.drain();
        if e.generation == generation {
            e.lists.insert(kind, items.clone());
        }
        Ok(items)
    }
}

fn lock(entries: &Mutex<Entries>) -> std::sync::MutexGuard<'_, Entries> {
    entries.lock().unwrap_or_else(|e| e.into_inner())
}

/// Drains `entries`' receiver each time `wake` (a receiver of its own, always waited on, so it
/// holds nothing) sees an event. Reads still drain first, so that a read after a committed
/// change never finds the list from before it. Ends with the entries or the store.
async fn drain_on_every_event(
    entries: Weak<Mutex<Entries>>,
    mut wake: broadcast::Receiver<StoredEvent>,
) {
    loop {
        match wake.recv().await {
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => return,
        }
        let Some(entries) = entries.upgrade() else {
            return;
        };
        lock(&entries).drain();
    }
}

/// Replaces `read` (an object of `group`/`resource` in `cluster`, as it was read) with
/// `updated`, unless it changed or went since it was read (that change brings another pass of
/// whatever computed `updated`); whether it was written.
pub async fn replace_as_read(
    store: &Store,
    cluster: &str,
    (group, resource): (&str, &str),
    read: &Value,
    updated: Value,
) -> Result<bool, StoreError> {
    let meta = &read["metadata"];
    let Some(rv) = meta["resourceVersion"]
        .as_str()
        .and_then(|r| r.parse::<u64>().ok())
    else {
        return Ok(false);
    };
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let key = ObjectKey {
        cluster: cluster.to_owned(),
        group: group.to_owned(),
        resource: resource.to_owned(),
        namespace: text(&meta["namespace"]),
        name: text(&meta["name"]),
    };
    match store
        .commit(&key, Precondition::At(rv), WriteOp::Put(updated))
        .await
    {
        Ok(_) => Ok(true),
        Err(StoreError::Conflict { .. } | StoreError::NotFound) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const RBAC: &str = "rbac.authorization.k8s.io";

    fn role_key(name: &str) -> ObjectKey {
        ObjectKey {
            cluster: "c".into(),
            group: RBAC.into(),
            resource: "clusterroles".into(),
            namespace: String::new(),
            name: name.into(),
        }
    }

    async fn put_role(store: &Store, name: &str) {
        let body = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": []});
        store
            .commit(&role_key(name), Precondition::Absent, WriteOp::Put(body))
            .await
            .unwrap();
    }

    fn waiting_events(kinds: &StoredKinds) -> usize {
        kinds.lock().events.len()
    }

    #[tokio::test]
    async fn committed_events_are_not_held_while_nothing_reads() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        let kinds = StoredKinds::new(store.clone());
        for i in 0..50 {
            put_role(&store, &format!("r{i}")).await;
        }
        // Each commit was sent before it was acknowledged; the drain follows at once.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while waiting_events(&kinds) > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} committed events still held by the cache's receiver",
                waiting_events(&kinds)
            );
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_read_after_a_commit_sees_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        let kinds = StoredKinds::new(store.clone());
        assert!(
            kinds
                .list("c", RBAC, "clusterroles")
                .await
                .unwrap()
                .is_empty()
        );
        for i in 0..20 {
            put_role(&store, &format!("r{i}")).await;
            let listed = kinds.list("c", RBAC, "clusterroles").await.unwrap();
            assert_eq!(
                listed.len(),
                i + 1,
                "the cached list missed a committed role"
            );
        }
    }
}
