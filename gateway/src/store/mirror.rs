//! Writes of upstream mirrors: the upstream's object body is kept, but the gateway assigns its
//! own resourceVersion (one monotonic sequence across every cluster it serves, so watches on the
//! mirror resume like watches on embedded clusters). A relist ends with a sweep that deletes
//! what the upstream no longer has.
//!
//! These go through [`Store::commit`] like every other write, so they are durable, ordered and
//! fanned out to watchers; the mirror is the only writer of its cluster's keys, so the
//! read-then-write below only loses a race to itself and retries.

use std::collections::HashSet;

use futures::future::join_all;
use serde_json::Value;
use sqlx::Row;

use super::{ObjectKey, Precondition, Store, StoreError, StoredEvent, WriteOp, to_u64};

/// How often a mirrored write retries after losing a race (only another write to the same key
/// can cause one).
const ATTEMPTS: usize = 8;

/// How many objects [`Store::delete_keys`] reads and deletes together.
const DELETE_CHUNK: usize = 256;

/// Whether two bodies differ in more than `metadata.resourceVersion`, which the gateway
/// rewrites; an unchanged object is not written again (a relist must not wake every watcher).
pub fn same_content(a: &Value, b: &Value) -> bool {
    fn without_rv(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        v
    }
    without_rv(a) == without_rv(b)
}

impl Store {
    /// Creates or replaces the mirrored object at `key` with `body` (its resourceVersion is
    /// replaced by the gateway's). Returns `None` when the stored object already had this
    /// content.
    pub async fn mirror_put(
        &self,
        key: &ObjectKey,
        body: Value,
    ) -> Result<Option<StoredEvent>, StoreError> {
        let mut last = StoreError::Conflict { current: 0 };
        for _ in 0..ATTEMPTS {
            let precondition = match self.get(key).await? {
                Some((_, stored)) if same_content(&stored, &body) => return Ok(None),
                Some((rv, _)) => Precondition::At(rv),
                None => Precondition::Absent,
            };
            match self
                .commit(key, precondition, WriteOp::Put(body.clone()))
                .await
            {
                Ok(ev) => return Ok(Some(ev)),
                Err(e @ (StoreError::AlreadyExists | StoreError::Conflict { .. })) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// Deletes the mirrored object at `key`, if stored. Returns the DELETED event.
    pub async fn mirror_delete(&self, key: &ObjectKey) -> Result<Option<StoredEvent>, StoreError> {
        for _ in 0..ATTEMPTS {
            let Some((rv, stored)) = self.get(key).await? else {
                return Ok(None);
            };
            match self
                .commit(key, Precondition::At(rv), WriteOp::Delete(stored))
                .await
            {
                Ok(ev) => return Ok(Some(ev)),
                Err(StoreError::NotFound) => return Ok(None),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Conflict { current: 0 })
    }

    /// Deletes every object of (`cluster`, `group`, `resource`) whose name starts with
    /// `name_prefix` and whose (namespace, name) is not in `keep`: the sweep that ends a relist
    /// (the prefix confines it to one upstream's objects in the fleet view). Only the names are
    /// read to decide, and only the doomed objects' bodies (for their DELETED events): many
    /// upstreams relist at once, and the fleet view holds every upstream's objects. The
    /// deletions are queued together, so the writer commits them in as few transactions as its
    /// batch size allows. Returns how many went.
    pub async fn mirror_sweep(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        name_prefix: &str,
        keep: &HashSet<(String, String)>,
    ) -> Result<usize, StoreError> {
        let rows = sqlx::query(
            "SELECT namespace, name FROM objects \
             WHERE cluster = ? AND grp = ? AND resource = ? AND substr(name, 1, ?) = ?",
        )
        .bind(cluster)
        .bind(group)
        .bind(resource)
        .bind(i64::try_from(name_prefix.len()).unwrap_or(i64::MAX))
        .bind(name_prefix)
        .fetch_all(self.pool())
        .await?;
        let mut doomed = Vec::new();
        for row in rows {
            let namespace: String = row.try_get("namespace")?;
            let name: String = row.try_get("name")?;
            if keep.contains(&(namespace.clone(), name.clone())) {
                continue;
            }
            doomed.push(ObjectKey {
                cluster: cluster.to_owned(),
                group: group.to_owned(),
                resource: resource.to_owned(),
                namespace,
                name,
            });
        }
        self.delete_keys(doomed).await
    }

    /// Deletes the objects at `keys` that are still stored, reading their bodies (for the
    /// DELETED events) a few hundred at a time, so that a large set is never all in memory.
    /// Returns how many went.
    pub(super) async fn delete_keys(&self, keys: Vec<ObjectKey>) -> Result<usize, StoreError> {
        let mut deleted = 0;
        for chunk in keys.chunks(DELETE_CHUNK) {
            let mut doomed = Vec::with_capacity(chunk.len());
            for key in chunk {
                if let Some((rv, body)) = self.get(key).await? {
                    doomed.push((key.clone(), rv, body));
                }
            }
            deleted += self.delete_stored(doomed).await?;
        }
        Ok(deleted)
    }

    /// Deletes each (key, resourceVersion, body) if still at that version, queued together so
    /// the writer commits them in as few transactions as its batch size allows. Returns how
    /// many went.
    pub(super) async fn delete_stored(
        &self,
        doomed: Vec<(ObjectKey, u64, Value)>,
    ) -> Result<usize, StoreError> {
        let outcomes = join_all(doomed.into_iter().map(|(key, rv, body)| async move {
            self.commit(&key, Precondition::At(rv), WriteOp::Delete(body))
                .await
        }))
        .await;
        let mut deleted = 0;
        for outcome in outcomes {
            match outcome {
                Ok(_) => deleted += 1,
                // Changed or removed meanwhile by a newer event of the same mirror: that one wins.
                Err(StoreError::NotFound | StoreError::Conflict { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    /// How many objects of (`cluster`, `group`, `resource`) are stored.
    pub async fn count(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
    ) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM objects WHERE cluster = ? AND grp = ? AND resource = ?",
        )
        .bind(cluster)
        .bind(group)
        .bind(resource)
        .fetch_one(self.pool())
        .await?;
        Ok(to_u64(n))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::EventType;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            cluster: "up".into(),
            group: "worker.gpustack.ai".into(),
            resource: "devices".into(),
            namespace: String::new(),
            name: name.into(),
        }
    }

    fn device(name: &str, rv: &str, spec: Value) -> Value {
        json!({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices",
               "metadata": {"name": name, "resourceVersion": rv}, "spec": spec})
    }

    async fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        (dir, store)
    }

    #[test]
    fn content_ignores_resource_version_only() {
        let a = device("n", "5", json!({"x": 1}));
        assert!(same_content(&a, &device("n", "9", json!({"x": 1}))));
        assert!(!same_content(&a, &device("n", "5", json!({"x": 2}))));
    }

    #[tokio::test]
    async fn put_keeps_the_body_assigns_own_version_and_skips_unchanged() {
        let (_dir, store) = store().await;
        let ev = store
            .mirror_put(&key("a"), device("a", "upstream-7", json!({"x": 1})))
            .await
            .unwrap()
            .expect("written");
        assert_eq!(ev.kind, EventType::Added);
        let (rv, body) = store.get(&key("a")).await.unwrap().unwrap();
        assert_eq!(rv, ev.rv);
        assert_eq!(body["metadata"]["resourceVersion"], json!(rv.to_string()));
        assert_eq!(body["spec"], json!({"x": 1}));
        // A relist of the same content writes nothing.
        let again = store
            .mirror_put(&key("a"), device("a", "upstream-8", json!({"x": 1})))
            .await
            .unwrap();
        assert!(again.is_none());
        let changed = store
            .mirror_put(&key("a"), device("a", "upstream-9", json!({"x": 2})))
            .await
            .unwrap()
            .expect("written");
        assert_eq!(changed.kind, EventType::Modified);
        assert!(changed.rv > ev.rv);
    }

    #[tokio::test]
    async fn delete_reports_whether_anything_went() {
        let (_dir, store) = store().await;
        assert!(store.mirror_delete(&key("a")).await.unwrap().is_none());
        store
            .mirror_put(&key("a"), device("a", "1", json!({})))
            .await
            .unwrap();
        let ev = store.mirror_delete(&key("a")).await.unwrap().unwrap();
        assert_eq!(ev.kind, EventType::Deleted);
        assert!(store.get(&key("a")).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn sweep_deletes_only_what_is_not_kept_in_that_resource_and_cluster() {
        let (_dir, store) = store().await;
        for n in ["a", "b", "c"] {
            store
                .mirror_put(&key(n), device(n, "1", json!({})))
                .await
                .unwrap();
        }
        let mut other = key("a");
        other.cluster = "other".into();
        store
            .mirror_put(&other, device("a", "1", json!({})))
            .await
            .unwrap();
        let keep: HashSet<(String, String)> = [(String::new(), "b".to_owned())].into();
        let mut events = store.subscribe();
        let n = store
            .mirror_sweep("up", "worker.gpustack.ai", "devices", "", &keep)
            .await
            .unwrap();
        assert_eq!(n, 2);
        let mut gone: Vec<String> = Vec::new();
        for _ in 0..2 {
            let ev = events.recv().await.unwrap();
            assert_eq!(ev.kind, EventType::Deleted);
            gone.push(ev.key.name);
        }
        gone.sort();
        assert_eq!(gone, ["a", "c"]);
        assert_eq!(
            store
                .count("up", "worker.gpustack.ai", "devices")
                .await
                .unwrap(),
            1
        );
        assert!(store.get(&other).await.unwrap().is_some());
        // A prefix confines the sweep.
        for n in ["x.1", "y.1"] {
            store
                .mirror_put(&key(n), device(n, "1", json!({})))
                .await
                .unwrap();
        }
        let n = store
            .mirror_sweep("up", "worker.gpustack.ai", "devices", "x.", &keep)
            .await
            .unwrap();
        assert_eq!(n, 1);
        assert!(store.get(&key("y.1")).await.unwrap().is_some());
        assert!(store.get(&key("b")).await.unwrap().is_some());
    }
}
