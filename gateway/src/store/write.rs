//! Writes: a single writer task applies queued changes in batches (group commit), each change
//! taking the next resourceVersion and appending its event to the log; callers are answered and
//! the fan-out fed only after the batch committed.

use std::sync::Arc;

use serde_json::Value;

use sqlx::sqlite::SqlitePool;
use tokio::sync::{Mutex, broadcast, mpsc, oneshot};

use super::{EventType, ObjectKey, Store, StoreError, StoredEvent, to_i64, to_u64};

/// What the write expects of the object's current state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precondition {
    /// The object must not exist (create).
    Absent,
    /// The object must exist at exactly this resourceVersion (update, delete).
    At(u64),
}

/// The change to make.
#[derive(Clone, Debug)]
pub enum WriteOp {
    /// Store this body (create or replace).
    Put(Value),
    /// Remove the object; `Value` is its final state, sent with the DELETED event.
    Delete(Value),
}

impl Store {
    /// Commits one change and returns the event it produced, once it is durable. The body's
    /// `metadata.resourceVersion` is set to the new version. Changes queued together are
    /// committed in one transaction (group commit): one fsync acknowledges them all.
    pub async fn commit(
        &self,
        key: &ObjectKey,
        precondition: Precondition,
        op: WriteOp,
    ) -> Result<StoredEvent, StoreError> {
        let (reply, outcome) = oneshot::channel();
        let pending = Pending {
            key: key.clone(),
            precondition,
            op,
            reply,
        };
        self.inner
            .queue
            .send(pending)
            .await
            .map_err(|_| StoreError::Closed)?;
        outcome.await.map_err(|_| StoreError::Closed)?
    }
}

impl Store {
    /// Drops events so that at most `keep` of the newest remain; watches from versions older
    /// than the oldest kept one then get 410 Gone. Returns the new compacted version.
    pub async fn compact(&self, keep: u64) -> Result<u64, StoreError> {
        let last_rv = self.inner.writer.lock().await;
        let compacted = last_rv.saturating_sub(keep);
        let mut tx = self.pool().begin().await?;
        sqlx::query("DELETE FROM events WHERE rv <= ?")
            .bind(to_i64(compacted))
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE sequence SET compacted_rv = MAX(compacted_rv, ?) WHERE id = 0")
            .bind(to_i64(compacted))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(compacted)
    }

    /// The last resourceVersion handed out.
    pub async fn current_rv(&self) -> u64 {
        *self.inner.writer.lock().await
    }
}

/// The owner uids an object names in `metadata.ownerReferences`.
fn owner_uids(body: &Value) -> Vec<&str> {
    body.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default()
}

/// One queued change and where its outcome goes.
pub(super) struct Pending {
    key: ObjectKey,
    precondition: Precondition,
    op: WriteOp,
    reply: oneshot::Sender<Result<StoredEvent, StoreError>>,
}

/// The most changes one transaction carries.
const MAX_BATCH: usize = 256;

/// The writer: takes queued changes in batches, applies each batch in one transaction, and only
/// after the commit answers each caller and feeds the fan-out, in resourceVersion order. Ends
/// when the store (the queue's sender) is dropped.
pub(super) async fn run_writer(
    pool: SqlitePool,
    last_rv: Arc<Mutex<u64>>,
    fanout: broadcast::Sender<StoredEvent>,
    mut queue: mpsc::Receiver<Pending>,
) {
    while let Some(first) = queue.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let mut last = last_rv.lock().await;
        let (work, replies): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|p| ((p.key, p.precondition, p.op), p.reply))
            .unzip();
        match apply_batch(&pool, *last, work).await {
            Ok((new_last, results)) => {
                *last = new_last;
                for (reply, result) in replies.into_iter().zip(results) {
                    if let Ok(ev) = &result {
                        // No receivers is fine: nobody is watching.
                        let _ = fanout.send(ev.clone());
                    }
                    let _ = reply.send(result);
                }
            }
            Err(e) => {
                let shared = Arc::new(e);
                for reply in replies {
                    let _ = reply.send(Err(StoreError::Batch(shared.clone())));
                }
            }
        }
    }
}

/// Applies `work` in one transaction. A change whose precondition fails is answered with that
/// failure and the others go ahead; any other error fails the whole batch (nothing is written).
async fn apply_batch(
    pool: &SqlitePool,
    mut last: u64,
    work: Vec<(ObjectKey, Precondition, WriteOp)>,
) -> Result<(u64, Vec<Result<StoredEvent, StoreError>>), StoreError> {
    let mut tx = pool.begin().await?;
    let mut results = Vec::with_capacity(work.len());
    for (key, precondition, op) in work {
        match apply_one(&mut tx, last + 1, key, precondition, op).await {
            Ok(ev) => {
                last = ev.rv;
                results.push(Ok(ev));
            }
            Err(
                e
                @ (StoreError::AlreadyExists | StoreError::NotFound | StoreError::Conflict { .. }),
            ) => results.push(Err(e)),
            Err(e) => return Err(e),
        }
    }
    sqlx::query("UPDATE sequence SET rv = ? WHERE id = 0")
        .bind(to_i64(last))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok((last, results))
}

/// One change inside the batch transaction, at resourceVersion `rv`.
async fn apply_one(
    tx: &mut sqlx::SqliteConnection,
    rv: u64,
    key: ObjectKey,
    precondition: Precondition,
    op: WriteOp,
) -> Result<StoredEvent, StoreError> {
    let row: Option<(i64, String)> = sqlx::query_as(
            "SELECT rv, body FROM objects WHERE cluster = ? AND grp = ? AND resource = ? AND namespace = ? AND name = ?",
        )
        .bind(&key.cluster)
        .bind(&key.group)
        .bind(&key.resource)
        .bind(&key.namespace)
        .bind(&key.name)
        .fetch_optional(&mut *tx)
        .await?;
    let current = row.as_ref().map(|(rv, _)| *rv);
    let prev: Option<Arc<str>> = row.as_ref().map(|(_, body)| Arc::from(body.as_str()));
    match (precondition, current) {
        (Precondition::Absent, Some(_)) => return Err(StoreError::AlreadyExists),
        (Precondition::At(_), None) => return Err(StoreError::NotFound),
        (Precondition::At(want), Some(have)) if want != to_u64(have) => {
            return Err(StoreError::Conflict {
                current: to_u64(have),
            });
        }
        _ => {}
    }
    let (kind, mut body) = match op {
        WriteOp::Put(body) if current.is_none() => (EventType::Added, body),
        WriteOp::Put(body) => (EventType::Modified, body),
        WriteOp::Delete(body) => (EventType::Deleted, body),
    };
    set_resource_version(&mut body, rv);
    let text = serde_json::to_string(&body)?;
    if kind == EventType::Deleted {
        sqlx::query(
                "DELETE FROM objects WHERE cluster = ? AND grp = ? AND resource = ? AND namespace = ? AND name = ?",
            )
            .bind(&key.cluster)
            .bind(&key.group)
            .bind(&key.resource)
            .bind(&key.namespace)
            .bind(&key.name)
            .execute(&mut *tx)
            .await?;
    } else {
        sqlx::query(
                "INSERT INTO objects (cluster, grp, resource, namespace, name, rv, body) VALUES (?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (cluster, grp, resource, namespace, name) DO UPDATE SET rv = excluded.rv, body = excluded.body",
            )
            .bind(&key.cluster)
            .bind(&key.group)
            .bind(&key.resource)
            .bind(&key.namespace)
            .bind(&key.name)
            .bind(to_i64(rv))
            .bind(&text)
            .execute(&mut *tx)
            .await?;
    }
    sqlx::query(
            "DELETE FROM owner_refs WHERE cluster = ? AND grp = ? AND resource = ? AND namespace = ? AND name = ?",
        )
        .bind(&key.cluster)
        .bind(&key.group)
        .bind(&key.resource)
        .bind(&key.namespace)
        .bind(&key.name)
        .execute(&mut *tx)
        .await?;
    if kind != EventType::Deleted {
        for owner in owner_uids(&body) {
            sqlx::query(
                    "INSERT OR IGNORE INTO owner_refs (cluster, owner_uid, grp, resource, namespace, name) VALUES (?, ?, ?, ?, ?, ?)",
                )
                .bind(&key.cluster)
                .bind(owner)
                .bind(&key.group)
                .bind(&key.resource)
                .bind(&key.namespace)
                .bind(&key.name)
                .execute(&mut *tx)
                .await?;
        }
    }
    sqlx::query(
            "INSERT INTO events (rv, cluster, grp, resource, namespace, name, type, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(to_i64(rv))
        .bind(&key.cluster)
        .bind(&key.group)
        .bind(&key.resource)
        .bind(&key.namespace)
        .bind(&key.name)
        .bind(kind.as_str())
        .bind(&text)
        .execute(&mut *tx)
        .await?;
    Ok(StoredEvent {
        rv,
        key,
        kind,
        body: Arc::new(body),
        prev,
    })
}

/// Sets `metadata.resourceVersion` (creating `metadata` if needed).
pub fn set_resource_version(body: &mut Value, rv: u64) {
    if let Some(obj) = body.as_object_mut() {
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            cluster: "c".into(),
            group: "".into(),
            resource: "configmaps".into(),
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_share_batches_and_keep_their_own_outcomes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        let mut tasks = Vec::new();
        for i in 0..64 {
            let store = store.clone();
            // Two writers race for "dup": exactly one wins.
            let name = if i < 2 {
                "dup".to_owned()
            } else {
                format!("o{i}")
            };
            tasks.push(tokio::spawn(async move {
                store
                    .commit(
                        &key(&name),
                        Precondition::Absent,
                        WriteOp::Put(json!({"metadata": {"name": name}})),
                    )
                    .await
            }));
        }
        let mut rvs = BTreeSet::new();
        let mut already = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(ev) => {
                    assert_eq!(ev.body["metadata"]["resourceVersion"], ev.rv.to_string());
                    assert!(
                        rvs.insert(ev.rv),
                        "resourceVersion {} handed out twice",
                        ev.rv
                    );
                }
                Err(StoreError::AlreadyExists) => already += 1,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(already, 1);
        assert_eq!(rvs.len(), 63);
        assert_eq!(
            rvs.iter().copied().collect::<Vec<_>>(),
            (1..=63).collect::<Vec<_>>()
        );
        let log = store.events_since("c", "", "configmaps", 0).await.unwrap();
        assert_eq!(
            log.iter().map(|e| e.rv).collect::<Vec<_>>(),
            (1..=63).collect::<Vec<_>>()
        );

        // Stale preconditions fail alone; the version moves on only for what was written.
        let err = store
            .commit(
                &key("o5"),
                Precondition::At(1_000),
                WriteOp::Delete(json!({})),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Conflict { .. }));
        assert_eq!(store.current_rv().await, 63);

        // Compaction: replay from before the compacted version is refused.
        store.compact(10).await.unwrap();
        assert!(matches!(
            store.events_since("c", "", "configmaps", 5).await,
            Err(crate::store::ReplayError::Expired { .. })
        ));
        assert_eq!(
            store
                .events_since("c", "", "configmaps", 60)
                .await
                .unwrap()
                .len(),
            3
        );
    }
}
