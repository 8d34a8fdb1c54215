//! Writes: a single writer task applies queued changes in batches (group commit), each change
//! taking the next resourceVersion and appending its event to the log; callers are answered and
//! the fan-out fed only after the batch committed.

use std::sync::Arc;

use serde_json::Value;

use sqlx::{Row, sqlite::SqliteConnection};
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
        // Every write path ends here: nothing is stored that could not be read back. (A
        // delete carries the stored state, which must stay deletable whatever it is.)
        if let WriteOp::Put(body) = &op {
            let depth = gpustack_kube_rest::bounded::depth(body);
            if depth > gpustack_kube_rest::bounded::MAX_DEPTH {
                return Err(StoreError::TooDeep {
                    depth,
                    max: gpustack_kube_rest::bounded::MAX_DEPTH,
                });
            }
        }
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
    mut conn: SqliteConnection,
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
        match apply_batch(&mut conn, *last, work).await {
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
///
/// The transaction is begun and committed by statements sent along with the changes, not by
/// sqlx's `begin` and `commit`: each of those is a round trip of its own to the connection's
/// worker thread (two thread wake-ups, tens of microseconds), and a batch of one create, the
/// sequential case, is then a single round trip. The connection is the writer's alone, so no
/// one else sees it between statements.
async fn apply_batch(
    conn: &mut SqliteConnection,
    last: u64,
    work: Vec<(ObjectKey, Precondition, WriteOp)>,
) -> Result<(u64, Vec<Result<StoredEvent, StoreError>>), StoreError> {
    let outcome = apply_in_transaction(conn, last, work).await;
    if outcome.is_err() {
        // Discards whatever the batch wrote. It fails harmlessly when no transaction is open
        // (it never began, or a failed COMMIT already ended it).
        let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
    }
    outcome
}

/// Where a change stands in its batch's transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bounds {
    /// The transaction is not open yet: the change begins it.
    begin: bool,
    /// The change is the batch's last: it may commit the transaction itself.
    last: bool,
}

async fn apply_in_transaction(
    conn: &mut SqliteConnection,
    mut last: u64,
    work: Vec<(ObjectKey, Precondition, WriteOp)>,
) -> Result<(u64, Vec<Result<StoredEvent, StoreError>>), StoreError> {
    let n = work.len();
    let mut results = Vec::with_capacity(n);
    let mut committed = false;
    for (i, (key, precondition, op)) in work.into_iter().enumerate() {
        let bounds = Bounds {
            begin: i == 0,
            last: i + 1 == n,
        };
        let outcome = match (precondition, op) {
            (Precondition::Absent, WriteOp::Put(body)) => {
                let created = create_one(conn, bounds, last, key, body).await?;
                committed = created.committed;
                created.event
            }
            (precondition, op) => {
                if bounds.begin {
                    sqlx::query(BEGIN).execute(&mut *conn).await?;
                }
                apply_one(conn, last + 1, key, precondition, op).await
            }
        };
        match outcome {
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
    if !committed {
        // A create keeps the sequence row current itself; anything else leaves it behind, and
        // setting it again is harmless.
        sqlx::query("UPDATE sequence SET rv = ? WHERE id = 0; COMMIT")
            .bind(to_i64(last))
            .execute(&mut *conn)
            .await?;
    }
    Ok((last, results))
}

/// How a write transaction begins: taking the write lock at once (only compaction, which
/// holds the writer's lock meanwhile, writes through another connection).
const BEGIN: &str = "BEGIN IMMEDIATE";

/// A create in one statement round trip: the object is inserted unless its key is taken, only
/// if it was (`changes()` is the previous statement's row count) its event is logged, and the
/// sequence row is set to the last version handed out either way (?6 if this create took it,
/// else ?8, the one before), returning it. Written out four times: with or without beginning
/// and committing the transaction too.
/// Nothing needs clearing first: an absent object has no `owner_refs` rows, because the delete
/// that removed it removed them in the same transaction.
macro_rules! create_sql {
    ($begin:literal, $commit:literal) => {
        concat!(
            $begin,
            "INSERT INTO objects (cluster, grp, resource, namespace, name, rv, body) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING; \
             INSERT INTO events (rv, cluster, grp, resource, namespace, name, type, body) \
             SELECT ?6, ?1, ?2, ?3, ?4, ?5, 'ADDED', ?7 WHERE changes() = 1; \
             UPDATE sequence SET rv = CASE WHEN changes() = 1 THEN ?6 ELSE ?8 END WHERE id = 0 \
             RETURNING rv",
            $commit
        )
    };
}

/// The create statements, by [`Bounds`].
fn create_sql(begin: bool, commit: bool) -> &'static str {
    match (begin, commit) {
        (false, false) => create_sql!("", ""),
        (true, false) => create_sql!("BEGIN IMMEDIATE; ", ""),
        (false, true) => create_sql!("", "; COMMIT"),
        (true, true) => create_sql!("BEGIN IMMEDIATE; ", "; COMMIT"),
    }
}

/// What [`create_one`] did.
struct Created {
    event: Result<StoredEvent, StoreError>,
    /// The batch's transaction was committed with it.
    committed: bool,
}

/// [`Precondition::Absent`] with [`WriteOp::Put`], at resourceVersion `last + 1`. An error
/// fails the batch; a taken key is only this change's failure.
async fn create_one(
    conn: &mut SqliteConnection,
    bounds: Bounds,
    last: u64,
    key: ObjectKey,
    mut body: Value,
) -> Result<Created, StoreError> {
    let rv = last + 1;
    set_resource_version(&mut body, rv);
    let text = serde_json::to_string(&body)?;
    // Owner rows are written after the object, so then the transaction must stay open.
    let commit = bounds.last && owner_uids(&body).is_empty();
    let rows = sqlx::query(create_sql(bounds.begin, commit))
        .bind(&key.cluster)
        .bind(&key.group)
        .bind(&key.resource)
        .bind(&key.namespace)
        .bind(&key.name)
        .bind(to_i64(rv))
        .bind(&text)
        .bind(to_i64(last))
        .fetch_all(&mut *conn)
        .await?;
    let recorded: i64 = match rows.as_slice() {
        [row] => row.try_get(0)?,
        // Cannot happen with the schema as migrated; refuse rather than acknowledge a create
        // whose version was not recorded (the batch then rolls back).
        _ => {
            return Err(StoreError::Database(sqlx::Error::Protocol(format!(
                "a create returned {} sequence rows, not 1",
                rows.len()
            ))));
        }
    };
    if to_u64(recorded) != rv {
        return Ok(Created {
            event: Err(StoreError::AlreadyExists),
            committed: commit,
        });
    }
    insert_owner_refs(conn, &key, &body).await?;
    Ok(Created {
        event: Ok(StoredEvent {
            rv,
            key,
            kind: EventType::Added,
            body: Arc::new(body),
            prev: None,
        }),
        committed: commit,
    })
}

/// Records which owners `body` names, for the object at `key`.
async fn insert_owner_refs(
    tx: &mut sqlx::SqliteConnection,
    key: &ObjectKey,
    body: &Value,
) -> Result<(), StoreError> {
    for owner in owner_uids(body) {
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
    Ok(())
}

/// One change (other than a create) inside the batch transaction, at resourceVersion `rv`.
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
        insert_owner_refs(tx, &key, &body).await?;
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

    #[test]
    fn creates_begin_and_commit_only_where_their_batch_needs() {
        for (begin, commit) in [(false, false), (true, false), (false, true), (true, true)] {
            let sql = create_sql(begin, commit);
            assert_eq!(sql.starts_with("BEGIN IMMEDIATE; "), begin, "{sql}");
            assert_eq!(sql.ends_with("; COMMIT"), commit, "{sql}");
            assert_eq!(sql.matches("RETURNING").count(), 1, "{sql}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_a_batch_acknowledges_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = Store::open(&path).await.unwrap();
        let put = |name: &str, body: Value| {
            let store = store.clone();
            let name = name.to_owned();
            async move {
                store
                    .commit(&key(&name), Precondition::Absent, WriteOp::Put(body))
                    .await
            }
        };
        put("owner", json!({"metadata": {"name": "owner"}}))
            .await
            .unwrap();
        // Last in its batch and refused: the batch still commits, the version stays put.
        assert!(matches!(
            put("owner", json!({"metadata": {"name": "owner"}})).await,
            Err(StoreError::AlreadyExists)
        ));
        // Last in its batch with an owner: its owner row is in the same transaction.
        let owned = json!({"metadata": {"name": "owned", "ownerReferences": [{"uid": "u-1"}]}});
        let ev = put("owned", owned).await.unwrap();
        assert_eq!(ev.rv, 2);
        // An update, then a create, in whatever batches they fall.
        let (rv, mut body) = store.get(&key("owner")).await.unwrap().unwrap();
        body["data"] = json!({"k": "v"});
        store
            .commit(&key("owner"), Precondition::At(rv), WriteOp::Put(body))
            .await
            .unwrap();
        put("later", json!({"metadata": {"name": "later"}}))
            .await
            .unwrap();
        assert_eq!(store.current_rv().await, 4);
        store.close().await;
        drop(store);

        let store = Store::open(&path).await.unwrap();
        assert_eq!(store.current_rv().await, 4);
        assert_eq!(
            store.get(&key("owner")).await.unwrap().unwrap().1["data"]["k"],
            "v"
        );
        assert_eq!(store.get(&key("later")).await.unwrap().unwrap().0, 4);
        assert_eq!(
            store.dependents("c", "u-1").await.unwrap(),
            vec![key("owned")]
        );
        let log = store.events_since("c", "", "configmaps", 0).await.unwrap();
        assert_eq!(
            log.iter().map(|e| e.rv).collect::<Vec<_>>(),
            vec![1, 2, 3, 4]
        );
        // The next version follows the last one handed out, not a refused create's.
        let ev = store
            .commit(
                &key("next"),
                Precondition::Absent,
                WriteOp::Put(json!({"metadata": {"name": "next"}})),
            )
            .await
            .unwrap();
        assert_eq!(ev.rv, 5);
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
