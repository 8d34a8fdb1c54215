//! The stored objects of a few kinds, per cluster, read once and kept until a committed change
//! to that kind invalidates them (seen on the store's event fan-out, drained on each read): what
//! every request consults (APIServices, RBAC objects) costs an in-memory lookup.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
};

use serde_json::Value;
use tokio::sync::broadcast::{self, error::TryRecvError};

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
    pub fn new(store: Store) -> Self {
        StoredKinds {
            entries: Arc::new(Mutex::new(Entries {
                events: store.subscribe(),
                lists: HashMap::new(),
                kinds: HashSet::new(),
                generation: 0,
            })),
            store,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
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
