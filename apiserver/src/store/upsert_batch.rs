//! Mirrored objects written a run at a time. A burst from the upstreams reaches the writer as
//! runs of upserts; written one by one, each costs a round trip to the connection's thread and
//! eight statements. Here a run of any length costs two round trips and a fixed set of
//! statements, the run passed as JSON and unpacked by SQLite's `json_each`:
//!
//! 1. a probe: which of the run's objects are stored, at which version, and whether their
//!    stored content hash differs (then with their stored body, the event's previous state);
//! 2. the writes, for the objects that are new or changed, each at its own version: the event
//!    that referred to a replaced row for its body gets that body, the owner rows are replaced,
//!    the rows upserted and the events logged, ADDED or MODIFIED.
//!
//! What is stored, and the events, are those of [`super::write`]'s one-object upsert.

use std::{collections::HashSet, sync::Arc};

use serde_json::Value;
use sqlx::{Row, sqlite::SqliteConnection};

use super::{
    body::{owner_uids, set_resource_version},
    types::{EventType, ObjectKey, StoreError, StoredEvent, to_i64},
};

/// One mirrored object to upsert: its key, its body and the hash of its content.
pub(super) struct Upsert {
    pub key: ObjectKey,
    pub body: Value,
    pub hash: i64,
}

/// Whether `run` can be written together: its keys are distinct (a key twice would need its
/// changes applied in order).
pub(super) fn distinct(run: &[Upsert]) -> bool {
    let mut keys = HashSet::with_capacity(run.len());
    run.iter().all(|u| keys.insert(&u.key))
}

/// Finds which of the run's objects are stored: `?1` is a JSON array of [cluster, group,
/// resource, namespace, name, hash]; a row per stored object: its index in the run, whether
/// its content differs, its version, and its body where it differs.
macro_rules! probe_sql {
    () => {
        "SELECT j.key, o.hash IS NOT (j.value ->> 5), o.rv, \
           CASE WHEN o.hash IS NOT (j.value ->> 5) THEN o.body END \
         FROM json_each(?1) AS j JOIN objects AS o \
         ON o.cluster = (j.value ->> 0) AND o.grp = (j.value ->> 1) \
           AND o.resource = (j.value ->> 2) AND o.namespace = (j.value ->> 3) \
           AND o.name = (j.value ->> 4)"
    };
}

/// Writes the run's new and changed objects. `?1` is a JSON array of [cluster, group,
/// resource, namespace, name, hash, version, event type, [owner uids]], `?2` the array of their
/// bodies (element `i` is row `i`'s), `?3` the versions of the rows being replaced.
const WRITE_SQL: &str = "\
    UPDATE events SET body = ( \
       SELECT o.body FROM objects AS o \
        WHERE o.cluster = events.cluster AND o.grp = events.grp \
        AND o.resource = events.resource AND o.namespace = events.namespace \
        AND o.name = events.name) \
     WHERE rv IN (SELECT value FROM json_each(?3)) AND body IS NULL; \
    DELETE FROM owner_refs WHERE (cluster, grp, resource, namespace, name) IN ( \
       SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4 \
        FROM json_each(?1) AS j WHERE (j.value ->> 7) = 'MODIFIED'); \
    INSERT INTO objects (cluster, grp, resource, namespace, name, rv, body, hash) \
     SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4, \
            j.value ->> 6, ?2 -> j.key, j.value ->> 5 \
     FROM json_each(?1) AS j WHERE true \
     ON CONFLICT (cluster, grp, resource, namespace, name) \
     DO UPDATE SET rv = excluded.rv, body = excluded.body, hash = excluded.hash; \
    INSERT INTO events (rv, cluster, grp, resource, namespace, name, type, body) \
     SELECT j.value ->> 6, j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, \
            j.value ->> 4, j.value ->> 7, NULL \
     FROM json_each(?1) AS j; \
    INSERT OR IGNORE INTO owner_refs (cluster, owner_uid, grp, resource, namespace, name) \
     SELECT j.value ->> 0, u.value, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4 \
     FROM json_each(?1) AS j, json_each(j.value, '$[8]') AS u";

/// What the probe found of one object.
struct Stored {
    changed: bool,
    rv: i64,
    body: Option<String>,
}

/// Writes `run` (distinct keys, see [`distinct`]) at the versions after `last`, beginning the
/// batch's transaction first if `begin`. Returns the last version handed out and each
/// object's event, `None` where its stored content was the same.
pub(super) async fn upsert_run(
    conn: &mut SqliteConnection,
    begin: bool,
    mut last: u64,
    run: Vec<Upsert>,
) -> Result<(u64, Vec<Option<StoredEvent>>), StoreError> {
    let keys: Vec<_> = run
        .iter()
        .map(|u| {
            let k = &u.key;
            (
                &k.cluster,
                &k.group,
                &k.resource,
                &k.namespace,
                &k.name,
                u.hash,
            )
        })
        .collect();
    let probe = if begin {
        concat!("BEGIN IMMEDIATE; ", probe_sql!())
    } else {
        probe_sql!()
    };
    let mut stored: Vec<Option<Stored>> = run.iter().map(|_| None).collect();
    for row in sqlx::query(probe)
        .bind(serde_json::to_string(&keys)?)
        .fetch_all(&mut *conn)
        .await?
    {
        let i: i64 = row.try_get(0)?;
        if let Some(slot) = usize::try_from(i).ok().and_then(|i| stored.get_mut(i)) {
            *slot = Some(Stored {
                changed: row.try_get(1)?,
                rv: row.try_get(2)?,
                body: row.try_get(3)?,
            });
        }
    }

    // The new and changed objects, each at its version; the unchanged ones' place kept.
    let mut written = Vec::with_capacity(run.len());
    let mut replaced = Vec::new();
    for (u, found) in run.into_iter().zip(stored) {
        let (kind, prev) = match found {
            Some(Stored { changed: false, .. }) => {
                written.push(None);
                continue;
            }
            Some(Stored { rv, body, .. }) => {
                replaced.push(rv);
                (EventType::Modified, body.map(|b| Arc::from(b.as_str())))
            }
            None => (EventType::Added, None),
        };
        last += 1;
        let Upsert {
            key,
            mut body,
            hash,
        } = u;
        set_resource_version(&mut body, last);
        written.push(Some((
            hash,
            StoredEvent {
                rv: last,
                key,
                kind,
                body: Arc::new(body),
                prev,
            },
        )));
    }
    let mut rows = Vec::new();
    let mut bodies = String::from("[");
    for (hash, ev) in written.iter().flatten() {
        if !rows.is_empty() {
            bodies.push(',');
        }
        bodies.push_str(&serde_json::to_string(&*ev.body)?);
        let k = &ev.key;
        rows.push((
            &k.cluster,
            &k.group,
            &k.resource,
            &k.namespace,
            &k.name,
            *hash,
            to_i64(ev.rv),
            ev.kind.as_str(),
            owner_uids(&ev.body),
        ));
    }
    bodies.push(']');
    if !rows.is_empty() {
        sqlx::query(WRITE_SQL)
            .bind(serde_json::to_string(&rows)?)
            .bind(bodies)
            .bind(serde_json::to_string(&replaced)?)
            .execute(&mut *conn)
            .await?;
    }
    let events = written.into_iter().map(|w| w.map(|(_, ev)| ev)).collect();
    Ok((last, events))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sqlx::{ConnectOptions, sqlite::SqliteConnectOptions};

    use super::*;
    use crate::store::{Store, write::Change};

    fn key(name: &str) -> ObjectKey {
        ObjectKey::device(name)
    }

    fn device(name: &str, x: i64, owners: &[&str]) -> Value {
        let refs: Vec<Value> = owners.iter().map(|u| json!({"uid": u})).collect();
        json!({"kind": "Devices", "metadata": {"name": name, "ownerReferences": refs},
               "spec": {"x": x}})
    }

    fn upsert(name: &str, x: i64, owners: &[&str]) -> (ObjectKey, Change) {
        (
            key(name),
            Change::Upsert {
                body: device(name, x, owners),
                hash: x,
            },
        )
    }

    /// A store (its schema migrated) and a connection of its own to apply batches with, as
    /// the writer does: each call is one batch, whatever the timing.
    async fn store() -> (tempfile::TempDir, Store, SqliteConnection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = Store::open(&path).await.unwrap();
        let conn = SqliteConnectOptions::new()
            .filename(&path)
            .connect()
            .await
            .unwrap();
        (dir, store, conn)
    }

    /// Each change's (type, version, previous spec.x), `None` where nothing was written.
    async fn apply(
        conn: &mut SqliteConnection,
        last: u64,
        work: Vec<(ObjectKey, Change)>,
    ) -> Vec<Option<(EventType, u64, Option<Value>)>> {
        let (_, results) = crate::store::write::apply_batch(conn, last, work)
            .await
            .unwrap();
        results
            .into_iter()
            .map(|r| {
                r.unwrap().map(|ev| {
                    assert_eq!(ev.body["metadata"]["resourceVersion"], ev.rv.to_string());
                    let prev = ev
                        .prev
                        .map(|p| serde_json::from_str::<Value>(&p).unwrap()["spec"]["x"].clone());
                    (ev.kind, ev.rv, prev)
                })
            })
            .collect()
    }

    #[test]
    fn a_run_with_a_key_twice_is_not_written_together() {
        let run = |names: &[&str]| -> Vec<Upsert> {
            names
                .iter()
                .map(|n| Upsert {
                    key: key(n),
                    body: json!({}),
                    hash: 0,
                })
                .collect()
        };
        assert!(distinct(&run(&["a", "b", "c"])));
        assert!(!distinct(&run(&["a", "b", "a"])));
    }

    #[tokio::test]
    async fn a_run_adds_changes_and_skips_as_one_at_a_time_would() {
        let (_dir, store, mut conn) = store().await;
        let first = apply(
            &mut conn,
            0,
            vec![upsert("a", 1, &[]), upsert("b", 1, &["u-1"])],
        )
        .await;
        assert_eq!(
            first,
            [
                Some((EventType::Added, 1, None)),
                Some((EventType::Added, 2, None))
            ]
        );
        assert_eq!(store.dependents("up", "u-1").await.unwrap(), [key("b")]);

        // Unchanged, changed (its owner too) and new, together: only the written ones take a
        // version, in order.
        let second = apply(
            &mut conn,
            2,
            vec![
                upsert("a", 1, &[]),
                upsert("b", 2, &["u-2"]),
                upsert("c", 1, &[]),
            ],
        )
        .await;
        assert_eq!(
            second,
            [
                None,
                Some((EventType::Modified, 3, Some(json!(1)))),
                Some((EventType::Added, 4, None))
            ]
        );
        let (rv, body) = store.get(&key("b")).await.unwrap().unwrap();
        assert_eq!((rv, &body["spec"]["x"]), (3, &json!(2)));
        assert_eq!(body["metadata"]["resourceVersion"], "3");
        assert!(store.dependents("up", "u-1").await.unwrap().is_empty());
        assert_eq!(store.dependents("up", "u-2").await.unwrap(), [key("b")]);

        // The log replays every state, the replaced one from the body it was given.
        let log = store
            .events_since("up", "worker.gpustack.ai", "devices", 0)
            .await
            .unwrap();
        let got: Vec<_> = log
            .iter()
            .map(|e| {
                (
                    e.rv,
                    e.key.name.as_str(),
                    e.kind,
                    e.body["spec"]["x"].clone(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (1, "a", EventType::Added, json!(1)),
                (2, "b", EventType::Added, json!(1)),
                (3, "b", EventType::Modified, json!(2)),
                (4, "c", EventType::Added, json!(1)),
            ]
        );
    }

    #[tokio::test]
    async fn a_key_twice_in_one_batch_is_written_in_order() {
        let (_dir, store, mut conn) = store().await;
        let got = apply(
            &mut conn,
            0,
            vec![
                upsert("a", 1, &[]),
                upsert("b", 1, &[]),
                upsert("a", 2, &[]),
            ],
        )
        .await;
        assert_eq!(
            got,
            [
                Some((EventType::Added, 1, None)),
                Some((EventType::Added, 2, None)),
                Some((EventType::Modified, 3, Some(json!(1))))
            ]
        );
        let (rv, body) = store.get(&key("a")).await.unwrap().unwrap();
        assert_eq!((rv, &body["spec"]["x"]), (3, &json!(2)));
    }
}
