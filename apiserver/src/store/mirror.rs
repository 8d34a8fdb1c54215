//! Writes of upstream mirrors: the upstream's object body is kept, but the gateway assigns its
//! own resourceVersion (one monotonic sequence across every cluster it serves, so watches on the
//! mirror resume like watches on embedded clusters). A relist ends with a sweep that deletes
//! what the upstream no longer has.
//!
//! These go through the writer like every other write, so they are durable, ordered, batched
//! and fanned out to watchers; but nothing is read before writing: an object is upserted by
//! key, and left as it is where its stored content hash (a digest of the body without its
//! resourceVersion) equals the new one, so a relist of unchanged objects wakes no watcher.

use std::{
    collections::HashSet,
    hash::{BuildHasher, RandomState},
};

use futures::{
    TryStreamExt,
    future::{BoxFuture, join_all},
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::Row;

use super::{
    ObjectKey, Precondition, Store, StoreError, StoredEvent, WriteOp,
    pg_mirror::MirrorChange,
    to_u64,
    write::{Change, Queued},
};

/// How many deletions [`Store::delete_keys`] queues together.
const DELETE_CHUNK: usize = 256;

/// The (namespace, name) pairs a relist saw, kept as 128-bit digests rather than the names
/// themselves: every upstream may relist at once, and with names a 5,000-object list held about
/// 0.8 MB until its sweep (a tenth of that as digests). The two halves come from two hashers
/// keyed at random per set, so a collision (which would spare one stale object from the sweep)
/// is as unlikely as a 128-bit guess, and an upstream cannot craft one.
#[derive(Debug, Default)]
pub struct SeenNames {
    keys: (RandomState, RandomState),
    digests: HashSet<u128>,
}

impl SeenNames {
    fn digest(&self, namespace: &str, name: &str) -> u128 {
        let pair = (namespace, name);
        (u128::from(self.keys.0.hash_one(pair)) << 64) | u128::from(self.keys.1.hash_one(pair))
    }

    /// Notes that the relist holds `namespace`/`name`.
    pub fn insert(&mut self, namespace: &str, name: &str) {
        let d = self.digest(namespace, name);
        self.digests.insert(d);
    }

    /// Whether the relist held `namespace`/`name` (a 128-bit digest's match).
    pub fn contains(&self, namespace: &str, name: &str) -> bool {
        self.digests.contains(&self.digest(namespace, name))
    }
}

/// A digest of `body`'s content, `metadata.resourceVersion` (which the gateway rewrites) left
/// out: what decides whether a mirrored object changed. The version is taken out of `body`
/// itself, which is about to be stored with the gateway's own.
fn content_hash(body: &mut Value) -> Result<i64, serde_json::Error> {
    if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    let digest = Sha256::digest(serde_json::to_vec(&*body)?);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    Ok(i64::from_be_bytes(first))
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
        self.queue_mirror_put(key, body).await?.outcome().await
    }

    /// [`Store::mirror_put`], returning once the write is queued: a mirror reads on while the
    /// writer commits.
    pub fn queue_mirror_put<'a>(
        &'a self,
        key: &'a ObjectKey,
        mut body: Value,
    ) -> BoxFuture<'a, Result<Queued, StoreError>> {
        Box::pin(async move {
            super::write::readable(&body)?;
            let hash = content_hash(&mut body)?;
            if let Some(pg) = self.postgres() {
                let change = MirrorChange::Upsert { body, hash };
                return Ok(Queued::from_reply(pg.queue(key, change, true).await?));
            }
            self.queue(key, Change::Upsert { body, hash }).await
        })
    }

    /// Deletes the mirrored object at `key`, if stored. Returns the DELETED event.
    pub async fn mirror_delete(&self, key: &ObjectKey) -> Result<Option<StoredEvent>, StoreError> {
        self.queue_mirror_delete(key).await?.outcome().await
    }

    /// [`Store::mirror_delete`], returning once the deletion is queued.
    pub fn queue_mirror_delete<'a>(
        &'a self,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, Result<Queued, StoreError>> {
        Box::pin(async move { self.queue_removal(key, true).await })
    }

    /// Queues the removal of `key`; `fenced`: made under its upstream's lease where replicas
    /// lease upstreams (the mirror's own removals; not an unsubscribe's).
    async fn queue_removal(&self, key: &ObjectKey, fenced: bool) -> Result<Queued, StoreError> {
        if let Some(pg) = self.postgres() {
            return Ok(Queued::from_reply(
                pg.queue(key, MirrorChange::Remove, fenced).await?,
            ));
        }
        self.queue(key, Change::Remove).await
    }

    /// Deletes every object of (`cluster`, `group`, `resource`) whose (namespace, name) is not
    /// in `keep`: the sweep that ends a relist. Only the names are read to decide, and only the
    /// doomed objects' bodies (for their DELETED events): many upstreams relist at once. The
    /// deletions are queued together, so the writer commits them in as few transactions as its
    /// batch size allows. Returns how many went.
    pub async fn mirror_sweep(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        keep: &SeenNames,
    ) -> Result<usize, StoreError> {
        if let Some(pg) = self.postgres() {
            let doomed = pg
                .names(cluster, group, resource)
                .await?
                .into_iter()
                .filter(|(namespace, name)| !keep.contains(namespace, name))
                .map(|(namespace, name)| ObjectKey {
                    cluster: cluster.to_owned(),
                    group: group.to_owned(),
                    resource: resource.to_owned(),
                    namespace,
                    name,
                })
                .collect();
            return self.delete_keys(doomed, true).await;
        }
        // Streamed, not fetched whole: only the doomed keys are held, not a row per object.
        let mut rows = sqlx::query(
            "SELECT namespace, name FROM objects WHERE cluster = ? AND grp = ? AND resource = ?",
        )
        .bind(cluster)
        .bind(group)
        .bind(resource)
        .fetch(self.pool());
        let mut doomed = Vec::new();
        while let Some(row) = rows.try_next().await? {
            let namespace: &str = row.try_get("namespace")?;
            let name: &str = row.try_get("name")?;
            if keep.contains(namespace, name) {
                continue;
            }
            doomed.push(ObjectKey {
                cluster: cluster.to_owned(),
                group: group.to_owned(),
                resource: resource.to_owned(),
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            });
        }
        drop(rows);
        self.delete_keys(doomed, true).await
    }

    /// Deletes the objects at `keys` that are still stored, queued together so the writer
    /// commits them in as few transactions as its batch size allows (nothing is read first: each
    /// removal takes its stored state along into its DELETED event). Returns how many went.
    /// `fenced`: see [`Store::queue_removal`].
    pub(super) async fn delete_keys(
        &self,
        keys: Vec<ObjectKey>,
        fenced: bool,
    ) -> Result<usize, StoreError> {
        let mut deleted = 0;
        // A few hundred at a time: a large set's events are never all in memory.
        for chunk in keys.chunks(DELETE_CHUNK) {
            let outcomes =
                join_all(chunk.iter().map(|key| async move {
                    self.queue_removal(key, fenced).await?.outcome().await
                }))
                .await;
            for outcome in outcomes {
                if outcome?.is_some() {
                    deleted += 1;
                }
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
        if let Some(pg) = self.postgres() {
            return pg.count(cluster, group, resource).await;
        }
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

    /// Returns once every write queued before the call has been committed (or refused): the
    /// writer takes the queue in order, and this queues a delete of an object no cluster can
    /// have. Used after stopping a mirror, before removing what it wrote.
    pub fn barrier<'a>(&'a self) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let nothing = ObjectKey {
                cluster: String::new(),
                group: String::new(),
                resource: String::new(),
                namespace: String::new(),
                name: String::new(),
            };
            if self.postgres().is_some() {
                // The PostgreSQL writer takes its queue in order too.
                self.queue_removal(&nothing, false).await?.outcome().await?;
            }
            match self
                .commit(&nothing, Precondition::At(0), WriteOp::Delete(Value::Null))
                .await
            {
                Ok(_) | Err(StoreError::NotFound | StoreError::Conflict { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        })
    }

    /// Deletes every object of `cluster`, through the writer, so watchers (of the cluster and
    /// of the fleet view) see each go. Returns how many went.
    pub fn drop_mirror<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<usize, StoreError>> {
        Box::pin(async move {
            if let Some(pg) = self.postgres() {
                // Unsubscribed: whoever mirrored it, its objects go.
                let keys = pg.keys(cluster).await?;
                return self.delete_keys(keys, false).await;
            }
            let rows = sqlx::query(
                "SELECT cluster, grp, resource, namespace, name FROM objects WHERE cluster = ?",
            )
            .bind(cluster)
            .fetch_all(self.pool())
            .await?;
            let mut keys = Vec::with_capacity(rows.len());
            for row in rows {
                keys.push(ObjectKey {
                    cluster: row.try_get("cluster")?,
                    group: row.try_get("grp")?,
                    resource: row.try_get("resource")?,
                    namespace: row.try_get("namespace")?,
                    name: row.try_get("name")?,
                });
            }
            self.delete_keys(keys, false).await
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::EventType;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::device(name)
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
        let hash = |v: &Value| content_hash(&mut v.clone()).unwrap();
        let a = device("n", "5", json!({"x": 1}));
        assert_eq!(hash(&a), hash(&device("n", "9", json!({"x": 1}))));
        assert_ne!(hash(&a), hash(&device("n", "5", json!({"x": 2}))));
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
    async fn the_log_refers_to_stored_bodies_and_still_replays_every_state() {
        let (_dir, store) = store().await;
        for x in [1, 2] {
            store
                .mirror_put(&key("a"), device("a", "u", json!({"x": x})))
                .await
                .unwrap();
        }
        let logged: Vec<Option<String>> = sqlx::query_scalar("SELECT body FROM events ORDER BY rv")
            .fetch_all(store.pool())
            .await
            .unwrap();
        // The superseded version's body moved into the log; the current one is referred to.
        assert!(logged[0].is_some() && logged[1].is_none(), "{logged:?}");
        let snapshot = store.current_rv().await;
        store.mirror_delete(&key("a")).await.unwrap().unwrap();
        let replay = store
            .events_since("up", "worker.gpustack.ai", "devices", 0)
            .await
            .unwrap();
        let got: Vec<_> = replay
            .iter()
            .map(|e| {
                assert_eq!(e.body["metadata"]["resourceVersion"], e.rv.to_string());
                (e.kind, e.body["spec"]["x"].clone())
            })
            .collect();
        assert_eq!(
            got,
            [
                (EventType::Added, json!(1)),
                (EventType::Modified, json!(2)),
                (EventType::Deleted, json!(2))
            ]
        );
        // A list at the snapshot still has the deleted object, at its version then.
        let page = store
            .list_at(
                "up",
                "worker.gpustack.ai",
                "devices",
                None,
                None,
                0,
                snapshot,
            )
            .await
            .unwrap();
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.items[0]["spec"]["x"], 2);
        assert_eq!(
            page.items[0]["metadata"]["resourceVersion"],
            snapshot.to_string()
        );
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

    #[test]
    fn seen_names_tell_pairs_apart_where_their_joined_text_is_the_same() {
        let mut seen = SeenNames::default();
        seen.insert("ns", "a");
        seen.insert("", "b");
        assert!(seen.contains("ns", "a"));
        assert!(seen.contains("", "b"));
        assert!(!seen.contains("n", "sa"));
        assert!(!seen.contains("nsa", ""));
        assert!(!seen.contains("b", ""));
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
        let mut keep = SeenNames::default();
        keep.insert("", "b");
        let mut events = store.subscribe();
        let n = store
            .mirror_sweep("up", "worker.gpustack.ai", "devices", &keep)
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
    }
}
