//! The PostgreSQL mirror's writer: queued upserts and removals applied a batch per
//! transaction. A batch locks the sequence row first, reads what it needs of the stored
//! objects, hands out its versions in queue order, writes the events and the objects' final
//! states with one statement each (arrays unnested), and moves the sequence and notifies
//! listeners in the same transaction: version order is commit order on every replica.
//!
//! With several replicas ([`Fencing`]), a batch also checks, right after taking the sequence
//! row, that this replica still holds the lease of every upstream it writes for (at its epoch,
//! unexpired by the database's clock), locking those lease rows until it commits so that no
//! take-over lands in between; the changes of an upstream that fails the check are refused.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use serde_json::Value;
use sqlx::{PgPool, Postgres, Row, Transaction};
use tokio::sync::{Notify, mpsc, oneshot};

use super::fence::{self, Fence, Fencing};
use crate::store::{
    body::set_resource_version,
    types::{EventType, ObjectKey, StoreError, StoredEvent, to_i64, to_u64},
};

/// The channel every replica's tailer listens on.
pub const CHANNEL: &str = "gpustack_mirror";

/// The most changes one transaction carries.
const MAX_BATCH: usize = 512;

/// A change to a mirrored object.
#[derive(Debug)]
pub enum MirrorChange {
    /// Stores `body` unless the stored object's content hash is `hash` already.
    Upsert {
        /// The object.
        body: Value,
        /// Its content hash (without its resourceVersion).
        hash: i64,
    },
    /// Removes the object if stored; its last state goes with the DELETED event.
    Remove,
}

/// What a change's caller is answered.
pub type Outcome = Result<Option<StoredEvent>, StoreError>;

/// A queued change and where its outcome goes.
pub struct Pending {
    pub key: ObjectKey,
    pub change: MirrorChange,
    /// The lease it is written under (`None`: a write of no upstream's, never refused).
    pub fence: Option<Fence>,
    pub reply: oneshot::Sender<Outcome>,
}

/// Applies queued changes until every sender is gone; after each commit wakes `committed`
/// (this replica's tailer). With `fencing`, refused batches are reported to it.
pub async fn run(
    pool: PgPool,
    mut queue: mpsc::Receiver<Pending>,
    committed: Arc<Notify>,
    fencing: Option<Arc<Fencing>>,
) {
    while let Some(first) = queue.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let (work, replies): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|p| ((p.key, p.change, p.fence), p.reply))
            .unzip();
        let replica = fencing.as_ref().map(|f| f.replica());
        match apply(&pool, work, replica).await {
            Ok((results, refused)) => {
                committed.notify_one();
                if let Some(f) = &fencing {
                    refused.iter().for_each(|r| f.refused(r));
                }
                for (reply, result) in replies.into_iter().zip(results) {
                    let _ = reply.send(result);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "a mirror write batch failed on PostgreSQL");
                let shared = Arc::new(e);
                for reply in replies {
                    let _ = reply.send(Err(StoreError::Batch(shared.clone())));
                }
            }
        }
    }
}

/// What a batch knows of one object: its version, content hash and (where a removal needs
/// it) its body.
#[derive(Clone)]
struct Known {
    rv: i64,
    hash: i64,
    body: Option<String>,
}

/// The columns of a set of rows, one array per column, as PostgreSQL unnests them.
#[derive(Default)]
struct Keys {
    cluster: Vec<String>,
    group: Vec<String>,
    resource: Vec<String>,
    namespace: Vec<String>,
    name: Vec<String>,
}

impl Keys {
    fn push(&mut self, k: &ObjectKey) {
        self.cluster.push(k.cluster.clone());
        self.group.push(k.group.clone());
        self.resource.push(k.resource.clone());
        self.namespace.push(k.namespace.clone());
        self.name.push(k.name.clone());
    }
}

/// The stored state of the batch's distinct keys: `?1`..`?5` their columns, `?6` whether the
/// body is wanted; a row per stored object, by its 1-based position.
const PROBE: &str = "\
    SELECT k.i, o.rv, o.hash, CASE WHEN k.need THEN o.body END \
    FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bool[]) \
      WITH ORDINALITY AS k(cluster, grp, resource, namespace, name, need, i) \
    JOIN mirror_objects o ON o.cluster = k.cluster AND o.grp = k.grp \
      AND o.resource = k.resource AND o.namespace = k.namespace AND o.name = k.name";

const INSERT_EVENTS: &str = "\
    INSERT INTO mirror_events \
      (rv, cluster, grp, resource, namespace, name, type, prev_rv, body, epoch) \
    SELECT rv, cluster, grp, resource, namespace, name, type, NULLIF(prev_rv, 0), body, \
      NULLIF(epoch, 0) \
    FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
                $7::text[], $8::bigint[], $9::text[], $10::bigint[]) \
      AS e(rv, cluster, grp, resource, namespace, name, type, prev_rv, body, epoch)";

/// Of the batch's fences (`$1` upstreams, `$2` epochs), those whose lease `$3` still holds
/// at that epoch, unexpired by the database's clock; their rows stay locked until the batch
/// commits, so a take-over waits for it.
const HELD: &str = "\
    SELECT l.upstream, l.epoch FROM mirror_leases l \
    JOIN UNNEST($1::text[], $2::bigint[]) AS f(upstream, epoch) \
      ON l.upstream = f.upstream AND l.epoch = f.epoch \
    WHERE l.holder = $3 AND l.expires_at > clock_timestamp() \
    FOR SHARE OF l";

const UPSERT_OBJECTS: &str = "\
    INSERT INTO mirror_objects (cluster, grp, resource, namespace, name, rv, hash, body) \
    SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
                         $6::bigint[], $7::bigint[], $8::text[]) \
    ON CONFLICT (cluster, grp, resource, namespace, name) \
    DO UPDATE SET rv = excluded.rv, hash = excluded.hash, body = excluded.body";

const DELETE_OBJECTS: &str = "\
    DELETE FROM mirror_objects o \
    USING UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) \
      AS k(cluster, grp, resource, namespace, name) \
    WHERE o.cluster = k.cluster AND o.grp = k.grp AND o.resource = k.resource \
      AND o.namespace = k.namespace AND o.name = k.name";

/// Moves the sequence to the batch's last version and tells every replica's tailer.
const ADVANCE: &str = "\
    WITH s AS (UPDATE mirror_sequence SET rv = $1 WHERE id = 0 RETURNING rv) \
    SELECT pg_notify($2, rv::text) FROM s";

/// Applies `work` in one transaction: each change's outcome (its event, `None` where it
/// changed nothing; `Fenced` where its lease failed the check), and the fences that failed.
async fn apply(
    pool: &PgPool,
    work: Vec<(ObjectKey, MirrorChange, Option<Fence>)>,
    replica: Option<&str>,
) -> Result<(Vec<Outcome>, Vec<Fence>), StoreError> {
    let mut tx = pool.begin().await?;
    let last: i64 = sqlx::query_scalar("SELECT rv FROM mirror_sequence WHERE id = 0 FOR UPDATE")
        .fetch_one(&mut *tx)
        .await?;
    let fences = work.iter().filter_map(|(_, _, f)| f.as_ref());
    let refused = check_leases(&mut tx, fences, replica.unwrap_or_default()).await?;
    // The refused changes are left out; their places keep their outcome.
    let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(work.len());
    let mut kept = Vec::with_capacity(work.len());
    for (key, change, fence) in work {
        match fence {
            Some(f) if refused.contains(&f) => outcomes.push(Some(Err(StoreError::Fenced {
                upstream: f.upstream,
                epoch: Some(f.epoch),
            }))),
            fence => {
                outcomes.push(None);
                kept.push((key, change, fence.map_or(0, |f| f.epoch)));
            }
        }
    }
    let events = write(&mut tx, last, kept).await?;
    tx.commit().await?;
    let mut events = events.into_iter();
    let outcomes = outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Ok(events.next().flatten())))
        .collect();
    Ok((outcomes, refused.into_iter().collect()))
}

/// The fences among `fences` whose lease `replica` no longer holds (see [`HELD`]); the held
/// ones' lease rows are locked until the transaction ends.
async fn check_leases<'a>(
    tx: &mut Transaction<'_, Postgres>,
    fences: impl Iterator<Item = &'a Fence>,
    replica: &str,
) -> Result<HashSet<Fence>, StoreError> {
    let (upstreams, epochs) = fence::distinct(fences);
    if upstreams.is_empty() {
        return Ok(HashSet::new());
    }
    let wanted: HashSet<Fence> = upstreams
        .iter()
        .zip(&epochs)
        .map(|(u, e)| Fence {
            upstream: u.clone(),
            epoch: *e,
        })
        .collect();
    let held: Vec<(String, i64)> = sqlx::query_as(HELD)
        .bind(upstreams)
        .bind(epochs)
        .bind(replica)
        .fetch_all(&mut **tx)
        .await?;
    let held: HashSet<Fence> = held
        .into_iter()
        .map(|(upstream, epoch)| Fence { upstream, epoch })
        .collect();
    Ok(wanted.difference(&held).cloned().collect())
}

/// Writes `work` (each change with its lease epoch, 0 for none) after version `last`: each
/// change's event, `None` where it changed nothing. Nothing is written when nothing changed.
async fn write(
    tx: &mut Transaction<'_, Postgres>,
    last: i64,
    work: Vec<(ObjectKey, MirrorChange, i64)>,
) -> Result<Vec<Option<StoredEvent>>, StoreError> {
    let (work, epochs): (Vec<_>, Vec<_>) = work
        .into_iter()
        .map(|(key, change, epoch)| ((key, change), epoch))
        .unzip();
    let mut known = probe(tx, &work).await?;
    let mut last = to_u64(last);
    let first = last;
    let mut events = Vec::with_capacity(work.len());
    // The events' columns, and each touched key's state at the end of the batch.
    let (mut ev_keys, mut ev_rv, mut ev_type, mut ev_prev, mut ev_body, mut ev_epoch) = (
        Keys::default(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    let mut finals: HashMap<ObjectKey, Option<Known>> = HashMap::new();
    for ((key, change), epoch) in work.into_iter().zip(epochs) {
        let state = known.get(&key).cloned().flatten();
        let event = match (change, state) {
            (MirrorChange::Upsert { hash, .. }, Some(s)) if s.hash == hash => None,
            (MirrorChange::Upsert { mut body, hash }, state) => {
                last += 1;
                set_resource_version(&mut body, last);
                let text = serde_json::to_string(&body)?;
                let (kind, prev) = match &state {
                    Some(s) => (EventType::Modified, s.rv),
                    None => (EventType::Added, 0),
                };
                let now = Known {
                    rv: to_i64(last),
                    hash,
                    body: Some(text.clone()),
                };
                known.insert(key.clone(), Some(now.clone()));
                finals.insert(key.clone(), Some(now));
                Some((key, kind, prev, text, body))
            }
            (MirrorChange::Remove, None) => None,
            (MirrorChange::Remove, Some(s)) => {
                last += 1;
                let stored = s.body.ok_or(StoreError::LostEvent(to_u64(s.rv)))?;
                let mut body: Value = serde_json::from_str(&stored)?;
                set_resource_version(&mut body, last);
                let text = serde_json::to_string(&body)?;
                known.insert(key.clone(), None);
                finals.insert(key.clone(), None);
                Some((key, EventType::Deleted, s.rv, text, body))
            }
        };
        events.push(event.map(|(key, kind, prev, text, body)| {
            ev_keys.push(&key);
            ev_rv.push(to_i64(last));
            ev_type.push(kind.as_str());
            ev_prev.push(prev);
            ev_body.push(text);
            ev_epoch.push(epoch);
            StoredEvent {
                rv: last,
                key,
                kind,
                body: Arc::new(body),
                prev: None,
            }
        }));
    }
    if last == first {
        // Nothing changed: nothing to write (the commit only ends the transaction).
        return Ok(events);
    }
    sqlx::query(INSERT_EVENTS)
        .bind(ev_rv)
        .bind(ev_keys.cluster)
        .bind(ev_keys.group)
        .bind(ev_keys.resource)
        .bind(ev_keys.namespace)
        .bind(ev_keys.name)
        .bind(ev_type)
        .bind(ev_prev)
        .bind(ev_body)
        .bind(ev_epoch)
        .execute(&mut **tx)
        .await?;
    let (mut up, mut up_rv, mut up_hash, mut up_body, mut gone) = (
        Keys::default(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Keys::default(),
    );
    for (key, state) in finals {
        match state {
            Some(s) => {
                up.push(&key);
                up_rv.push(s.rv);
                up_hash.push(s.hash);
                up_body.push(s.body.unwrap_or_default());
            }
            None => gone.push(&key),
        }
    }
    if !up_rv.is_empty() {
        sqlx::query(UPSERT_OBJECTS)
            .bind(up.cluster)
            .bind(up.group)
            .bind(up.resource)
            .bind(up.namespace)
            .bind(up.name)
            .bind(up_rv)
            .bind(up_hash)
            .bind(up_body)
            .execute(&mut **tx)
            .await?;
    }
    if !gone.name.is_empty() {
        sqlx::query(DELETE_OBJECTS)
            .bind(gone.cluster)
            .bind(gone.group)
            .bind(gone.resource)
            .bind(gone.namespace)
            .bind(gone.name)
            .execute(&mut **tx)
            .await?;
    }
    sqlx::query(ADVANCE)
        .bind(to_i64(last))
        .bind(CHANNEL)
        .execute(&mut **tx)
        .await?;
    Ok(events)
}

/// The stored state of every distinct key of `work` (`None`: not stored), bodies only for the
/// keys a removal needs them for.
async fn probe(
    tx: &mut Transaction<'_, Postgres>,
    work: &[(ObjectKey, MirrorChange)],
) -> Result<HashMap<ObjectKey, Option<Known>>, StoreError> {
    let mut index: HashMap<&ObjectKey, usize> = HashMap::new();
    let mut keys = Keys::default();
    let mut need = Vec::new();
    for (key, change) in work {
        let removal = matches!(change, MirrorChange::Remove);
        match index.get(key) {
            Some(&i) => need[i] |= removal,
            None => {
                index.insert(key, need.len());
                keys.push(key);
                need.push(removal);
            }
        }
    }
    let mut by_position: Vec<Option<Known>> = vec![None; need.len()];
    let rows = sqlx::query(PROBE)
        .bind(keys.cluster)
        .bind(keys.group)
        .bind(keys.resource)
        .bind(keys.namespace)
        .bind(keys.name)
        .bind(need)
        .fetch_all(&mut **tx)
        .await?;
    for row in rows {
        let i: i64 = row.try_get(0)?;
        if let Some(slot) = usize::try_from(i - 1)
            .ok()
            .and_then(|i| by_position.get_mut(i))
        {
            *slot = Some(Known {
                rv: row.try_get(1)?,
                hash: row.try_get(2)?,
                body: row.try_get(3)?,
            });
        }
    }
    Ok(index
        .into_iter()
        .map(|(key, i)| (key.clone(), by_position[i].take()))
        .collect())
}
