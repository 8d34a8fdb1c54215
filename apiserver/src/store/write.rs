//! Writes: a single writer task applies queued changes in batches (group commit), each change
//! taking the next resourceVersion and appending its event to the log; callers are answered and
//! the fan-out fed only after the batch committed.

use std::sync::Arc;

use serde_json::Value;

use sqlx::{Row, sqlite::SqliteConnection};
use tokio::sync::{Mutex, broadcast, mpsc, oneshot};
use tracing::Instrument;

use super::{
    EventType, ObjectKey, Store, StoreError, StoredEvent,
    body::{owner_uids, set_resource_version},
    to_i64, to_u64,
    upsert_batch::{Upsert, distinct, upsert_run},
};

/// Refuses a body nested deeper than objects may be (they must stay readable).
pub(super) fn readable(body: &Value) -> Result<(), StoreError> {
    let depth = gpustack_kube_rest::bounded::depth(body);
    if depth > gpustack_kube_rest::bounded::MAX_DEPTH {
        return Err(StoreError::TooDeep {
            depth,
            max: gpustack_kube_rest::bounded::MAX_DEPTH,
        });
    }
    Ok(())
}

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
            readable(body)?;
        }
        // A checked change always reports its event.
        self.enqueue(key, Change::Checked(precondition, op))
            .await?
            .ok_or(StoreError::Closed)
    }

    /// Queues `change` for the writer and waits for its outcome: its event, or none when it
    /// changed nothing.
    pub(super) async fn enqueue(
        &self,
        key: &ObjectKey,
        change: Change,
    ) -> Result<Option<StoredEvent>, StoreError> {
        self.queue(key, change).await?.outcome().await
    }

    /// Queues `change` for the writer (waiting only for room in the queue). Changes are
    /// applied in the order they were queued.
    pub(super) async fn queue(
        &self,
        key: &ObjectKey,
        change: Change,
    ) -> Result<Queued, StoreError> {
        let (reply, outcome) = oneshot::channel();
        let pending = Pending {
            key: key.clone(),
            change,
            reply,
        };
        self.inner
            .queue
            .send(pending)
            .await
            .map_err(|_| StoreError::Closed)?;
        Ok(Queued(outcome))
    }
}

/// A change in the writer's queue: its outcome once committed.
pub struct Queued(oneshot::Receiver<Result<Option<StoredEvent>, StoreError>>);

impl Queued {
    /// Its event once durable, or none when it changed nothing.
    pub async fn outcome(self) -> Result<Option<StoredEvent>, StoreError> {
        self.0.await.map_err(|_| StoreError::Closed)?
    }

    /// The outcome another writer (the PostgreSQL mirror's) answers on `reply`.
    pub(super) fn from_reply(
        reply: oneshot::Receiver<Result<Option<StoredEvent>, StoreError>>,
    ) -> Self {
        Queued(reply)
    }
}

/// A queued change.
pub(super) enum Change {
    /// A write that expects the object's current state (the API's writes).
    Checked(Precondition, WriteOp),
    /// A mirrored object, stored unless its content (`hash`, see [`super::mirror`]) is what is
    /// stored already; nothing is read back to decide.
    Upsert { body: Value, hash: i64 },
    /// Removes the object, if stored, its stored state going with the DELETED event.
    Remove,
}

impl Store {
    /// The last resourceVersion handed out.
    pub async fn current_rv(&self) -> u64 {
        // A hub on PostgreSQL serves its mirrors' versions (it has no embedded clusters).
        if let Some(pg) = self.postgres() {
            return pg.current_rv();
        }
        *self.inner.writer.lock().await
    }
}

/// One queued change and where its outcome goes.
pub(super) struct Pending {
    key: ObjectKey,
    change: Change,
    reply: oneshot::Sender<Result<Option<StoredEvent>, StoreError>>,
}

/// The most changes one transaction carries.
const MAX_BATCH: usize = 256;

/// The writer: takes queued changes in batches, applies each batch in one transaction, and only
/// after the commit answers each caller, feeds the fan-out, in resourceVersion order, and tells
/// the checkpointer (`commits`). Ends when the store (the queue's sender) is dropped.
pub(super) async fn run_writer(
    mut conn: SqliteConnection,
    last_rv: Arc<Mutex<u64>>,
    fanout: broadcast::Sender<StoredEvent>,
    mut queue: mpsc::Receiver<Pending>,
    commits: mpsc::Sender<()>,
    metrics: super::commit_metrics::CommitMetrics,
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
            .map(|p| ((p.key, p.change), p.reply))
            .unzip();
        // A root span per batch: it commits the changes of many requests at once.
        let (changes, started) = (work.len(), std::time::Instant::now());
        let span = tracing::debug_span!(parent: None, "store commit", batch.size = changes);
        match apply_batch(&mut conn, *last, work).instrument(span).await {
            Ok((new_last, results)) => {
                metrics.observe(changes, started.elapsed());
                *last = new_last;
                // Full means a checkpoint is already due.
                let _ = commits.try_send(());
                for (reply, result) in replies.into_iter().zip(results) {
                    if let Ok(Some(ev)) = &result {
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
pub(super) async fn apply_batch(
    conn: &mut SqliteConnection,
    last: u64,
    work: Vec<(ObjectKey, Change)>,
) -> Result<(u64, Vec<Result<Option<StoredEvent>, StoreError>>), StoreError> {
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
    work: Vec<(ObjectKey, Change)>,
) -> Result<(u64, Vec<Result<Option<StoredEvent>, StoreError>>), StoreError> {
    let mut results = Vec::with_capacity(work.len());
    let steps = steps(work);
    let n = steps.len();
    let mut committed = false;
    for (i, step) in steps.into_iter().enumerate() {
        let bounds = Bounds {
            begin: i == 0,
            last: i + 1 == n,
        };
        let (key, change) = match step {
            Step::One(key, change) => (key, change),
            Step::Upserts(run) => {
                let (now, events) = upsert_run(conn, bounds.begin, last, run).await?;
                last = now;
                results.extend(events.into_iter().map(Ok));
                continue;
            }
        };
        if let Change::Checked(Precondition::Absent, WriteOp::Put(body)) = change {
            let created = create_one(conn, bounds, last, key, body).await?;
            committed = created.committed;
            match created.event {
                Ok(ev) => {
                    last = ev.rv;
                    results.push(Ok(Some(ev)));
                }
                Err(e) => results.push(Err(e)),
            }
            continue;
        }
        if bounds.begin {
            sqlx::query(BEGIN).execute(&mut *conn).await?;
        }
        let outcome = match change {
            Change::Checked(precondition, op) => apply_one(conn, last + 1, key, precondition, op)
                .await
                .map(Some),
            Change::Upsert { body, hash } => upsert_one(conn, last + 1, key, body, hash).await,
            Change::Remove => remove_one(conn, last + 1, key).await,
        };
        match outcome {
            Ok(ev) => {
                if let Some(ev) = &ev {
                    last = ev.rv;
                }
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

/// A batch's changes as they are applied: one at a time, or a run of mirrored upserts together
/// (see [`super::upsert_batch`]).
enum Step {
    One(ObjectKey, Change),
    Upserts(Vec<Upsert>),
}

/// `work` as [`Step`]s, in order: consecutive upserts of distinct objects form one run.
fn steps(work: Vec<(ObjectKey, Change)>) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut run = Vec::new();
    for (key, change) in work {
        match change {
            Change::Upsert { body, hash } => run.push(Upsert { key, body, hash }),
            other => {
                end_run(&mut steps, &mut run);
                steps.push(Step::One(key, other));
            }
        }
    }
    end_run(&mut steps, &mut run);
    steps
}

/// Adds the upserts collected in `run` to `steps`: together where there are several of
/// distinct objects, else one by one. A lone upsert keeps its one-query path (one round trip
/// where a run takes two): it is what a quiet watch writes, one change at a time.
fn end_run(steps: &mut Vec<Step>, run: &mut Vec<Upsert>) {
    if run.len() > 1 && distinct(run) {
        steps.push(Step::Upserts(std::mem::take(run)));
        return;
    }
    steps.extend(
        run.drain(..)
            .map(|Upsert { key, body, hash }| Step::One(key, Change::Upsert { body, hash })),
    );
}

/// How a write transaction begins: taking the write lock at once (only compaction, which
/// holds the writer's lock meanwhile, writes through another connection).
const BEGIN: &str = "BEGIN IMMEDIATE";

/// A create in one statement round trip: the object is inserted unless its key is taken, only
/// if it was (`changes()` is the previous statement's row count) its event is logged (referring
/// to the object's row for its body), and the
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
             SELECT ?6, ?1, ?2, ?3, ?4, ?5, 'ADDED', NULL WHERE changes() = 1; \
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

/// Queues the deleted `body` for the collector when objects still name it as their owner (see
/// the migration `collection_queue`): in the deleting transaction, so that nothing is lost.
async fn queue_for_collection(
    tx: &mut sqlx::SqliteConnection,
    cluster: &str,
    body: &Value,
) -> Result<(), StoreError> {
    let Some(uid) = body.pointer("/metadata/uid").and_then(Value::as_str) else {
        return Ok(());
    };
    sqlx::query(
        "INSERT OR IGNORE INTO collection_queue (cluster, owner_uid) SELECT ?1, ?2 \
         WHERE EXISTS (SELECT 1 FROM owner_refs WHERE cluster = ?1 AND owner_uid = ?2)",
    )
    .bind(cluster)
    .bind(uid)
    .execute(&mut *tx)
    .await?;
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
    if let Some((old_rv, old_body)) = &row {
        // The event that referred to the row for its body gets it before the row changes.
        sqlx::query("UPDATE events SET body = ? WHERE rv = ? AND body IS NULL")
            .bind(old_body)
            .bind(old_rv)
            .execute(&mut *tx)
            .await?;
    }
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
                 ON CONFLICT (cluster, grp, resource, namespace, name) DO UPDATE SET rv = excluded.rv, body = excluded.body, hash = NULL",
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
    if kind == EventType::Deleted {
        queue_for_collection(tx, &key.cluster, &body).await?;
    } else {
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
        // A DELETED event holds the final state; others refer to the object's row.
        .bind((kind == EventType::Deleted).then_some(&text))
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

/// An upsert in one round trip, keyed by the object's key, with no read to decide: the object's
/// row is replaced only where its stored hash differs (first giving the event that referred to
/// the row its body), inserted where there is none, and the event logged as MODIFIED or ADDED
/// accordingly. The first statement hands back the state being replaced (for watchers'
/// selector transitions), the last the type of the event logged, if any, each tagged (rows of
/// several statements share the first one's column names). Owner rows are cleared here and
/// written again after (the same owners when nothing changed).
///
/// Parameters: ?1 to ?5 the key, ?6 the hash, ?7 the version, ?8 the body. Each statement
/// names its parameters from ?1 up without a gap (hence the `?6 IS NOT NULL`, true of every
/// hash): sqlx binds the unnamed ones of a gap by position, and later statements then lose
/// theirs.
const UPSERT_SQL: &str = "\
    SELECT 'prev', body FROM objects \
     WHERE cluster = ?1 AND grp = ?2 AND resource = ?3 AND namespace = ?4 AND name = ?5 \
     AND hash IS NOT ?6; \
    DELETE FROM owner_refs \
     WHERE cluster = ?1 AND grp = ?2 AND resource = ?3 AND namespace = ?4 AND name = ?5; \
    UPDATE events SET body = o.body FROM ( \
       SELECT rv, body FROM objects \
        WHERE cluster = ?1 AND grp = ?2 AND resource = ?3 AND namespace = ?4 AND name = ?5 \
        AND hash IS NOT ?6) AS o \
     WHERE events.rv = o.rv AND events.body IS NULL; \
    UPDATE objects SET rv = ?7, body = ?8, hash = ?6 \
     WHERE cluster = ?1 AND grp = ?2 AND resource = ?3 AND namespace = ?4 AND name = ?5 \
     AND hash IS NOT ?6; \
    INSERT INTO events (rv, cluster, grp, resource, namespace, name, type, body) \
     SELECT ?7, ?1, ?2, ?3, ?4, ?5, 'MODIFIED', NULL WHERE changes() = 1 AND ?6 IS NOT NULL; \
    INSERT INTO objects (cluster, grp, resource, namespace, name, rv, body, hash) \
     SELECT ?1, ?2, ?3, ?4, ?5, ?7, ?8, ?6 WHERE changes() = 0 ON CONFLICT DO NOTHING; \
    INSERT INTO events (rv, cluster, grp, resource, namespace, name, type, body) \
     SELECT ?7, ?1, ?2, ?3, ?4, ?5, 'ADDED', NULL WHERE changes() = 1 AND ?6 IS NOT NULL; \
    SELECT 'type', type FROM events \
     WHERE rv = ?7 AND cluster = ?1 AND grp = ?2 AND resource = ?3 AND namespace = ?4 \
     AND name = ?5 AND ?6 IS NOT NULL";

/// [`Change::Upsert`] at resourceVersion `rv`; `None` when the stored content was the same.
async fn upsert_one(
    conn: &mut SqliteConnection,
    rv: u64,
    key: ObjectKey,
    mut body: Value,
    hash: i64,
) -> Result<Option<StoredEvent>, StoreError> {
    set_resource_version(&mut body, rv);
    let text = serde_json::to_string(&body)?;
    let rows = keyed(UPSERT_SQL, &key)
        .bind(hash)
        .bind(to_i64(rv))
        .bind(&text)
        .fetch_all(&mut *conn)
        .await?;
    insert_owner_refs(conn, &key, &body).await?;
    let mut prev = None;
    let mut kind = None;
    for row in &rows {
        let (tag, value): (String, String) = (row.try_get(0)?, row.try_get(1)?);
        match tag.as_str() {
            "prev" => prev = Some(Arc::from(value.as_str())),
            _ => kind = EventType::parse(&value),
        }
    }
    Ok(kind.map(|kind| StoredEvent {
        rv,
        key,
        kind,
        body: Arc::new(body),
        prev,
    }))
}

/// Removes an object without reading it first: its row's state (at the new version) becomes
/// the DELETED event's body, which the event that referred to the row now refers to.
/// Parameters: ?1 to ?5 the key, ?6 the version as text, ?7 as a number (see [`UPSERT_SQL`]
/// on gaps).
const REMOVE_SQL: &str = "\
    DELETE FROM owner_refs \
     WHERE cluster = ?1 AND grp = ?2 AND resource = ?3 AND namespace = ?4 AND name = ?5; \
    INSERT INTO events (rv, cluster, grp, resource, namespace, name, type, body) \
     SELECT ?7, ?1, ?2, ?3, ?4, ?5, 'DELETED', json_set(body, '$.metadata.resourceVersion', ?6) \
     FROM objects \
     WHERE cluster = ?1 AND grp = ?2 AND resource = ?3 AND namespace = ?4 AND name = ?5; \
    DELETE FROM objects \
     WHERE cluster = ?1 AND grp = ?2 AND resource = ?3 AND namespace = ?4 AND name = ?5 \
     RETURNING json_set(body, '$.metadata.resourceVersion', ?6)";

/// [`Change::Remove`] at resourceVersion `rv`; `None` when nothing was stored.
async fn remove_one(
    conn: &mut SqliteConnection,
    rv: u64,
    key: ObjectKey,
) -> Result<Option<StoredEvent>, StoreError> {
    let row = keyed(REMOVE_SQL, &key)
        .bind(rv.to_string())
        .bind(to_i64(rv))
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let text: String = row.try_get(0)?;
    Ok(Some(StoredEvent {
        rv,
        key,
        kind: EventType::Deleted,
        body: Arc::new(serde_json::from_str(&text)?),
        prev: None,
    }))
}

/// `sql` with `key` bound as its parameters ?1 to ?5 (cluster, group, resource, namespace,
/// name).
fn keyed<'q>(
    sql: &'static str,
    key: &'q ObjectKey,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    sqlx::query(sql)
        .bind(&key.cluster)
        .bind(&key.group)
        .bind(&key.resource)
        .bind(&key.namespace)
        .bind(&key.name)
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
