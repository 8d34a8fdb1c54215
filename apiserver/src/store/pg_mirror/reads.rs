//! Reads of the PostgreSQL mirror: one object, pages of one collection (now, or as of a
//! snapshot version), the fleet view's pages across its members, and the event log since a
//! version. A page is read in one repeatable-read transaction, so its rows and its version
//! are one snapshot.

use std::sync::Arc;

use serde_json::Value;
use sqlx::{PgConnection, PgPool, Row as _, postgres::PgRow};

use super::compaction::compacted;
use crate::store::{
    body::set_resource_version,
    fleet::{self, fleet_name, fleet_text},
    types::{EventType, ObjectKey, StoreError, StoredEvent, to_i64, to_u64},
};

/// One collection of one cluster (the fleet view's: of its members).
#[derive(Clone, Copy, Debug)]
pub struct Collection<'a> {
    /// The cluster, or [`fleet::FLEET`].
    pub cluster: &'a str,
    /// The API group.
    pub group: &'a str,
    /// The resource (plural).
    pub resource: &'a str,
    /// `None`: every namespace.
    pub namespace: Option<&'a str>,
}

/// A stored object as text, under the name its view gives it.
#[derive(Debug)]
pub struct Row {
    /// Its namespace.
    pub namespace: String,
    /// Its name (in the fleet view: `CLUSTER.NAME`).
    pub name: String,
    /// The JSON object.
    pub body: String,
}

/// The object at `key` and its version.
pub async fn get(pool: &PgPool, key: &ObjectKey) -> Result<Option<(u64, String)>, StoreError> {
    let row: Option<(i64, String)> = sqlx::query_as(
        "SELECT rv, body FROM mirror_objects WHERE cluster = $1 AND grp = $2 AND resource = $3 \
         AND namespace = $4 AND name = $5",
    )
    .bind(&key.cluster)
    .bind(&key.group)
    .bind(&key.resource)
    .bind(&key.namespace)
    .bind(&key.name)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(rv, body)| (to_u64(rv), body)))
}

/// A version to read at, and the newest version trimmed from the log as the read sees it.
#[derive(Clone, Copy, Debug)]
struct At {
    rv: u64,
    compacted: u64,
}

impl At {
    /// A read at `rv` within `tx`'s snapshot, refused where the log was trimmed past it.
    async fn checked(tx: &mut PgConnection, rv: u64) -> Result<Self, StoreError> {
        let at = At {
            rv,
            compacted: compacted(&mut *tx).await?,
        };
        if rv < at.compacted {
            return Err(at.expired());
        }
        Ok(at)
    }

    /// The refusal of a read whose history was trimmed away.
    fn expired(self) -> StoreError {
        StoreError::SnapshotCompacted {
            requested: self.rv,
            compacted: self.compacted,
        }
    }
}

/// A read-only transaction whose reads all see one snapshot.
async fn snapshot_tx(
    pool: &PgPool,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    Ok(tx)
}

/// A page of `c` after (namespace, name) `after` (in the fleet view, after its name there),
/// at most `fetch` rows (`None`: all), as of `snapshot` (`None`: now). Returns the page's
/// version (the snapshot's, or the newest committed) and its rows;
/// [`StoreError::SnapshotCompacted`] where the log no longer reaches back to `snapshot`.
pub async fn page(
    pool: &PgPool,
    c: Collection<'_>,
    after: Option<(&str, &str)>,
    fetch: Option<i64>,
    snapshot: Option<u64>,
) -> Result<(u64, Vec<Row>), StoreError> {
    let mut tx = snapshot_tx(pool).await?;
    let (rv, snapshot) = match snapshot {
        Some(rv) => (rv, Some(At::checked(&mut tx, rv).await?)),
        None => {
            let now: i64 = sqlx::query_scalar("SELECT rv FROM mirror_sequence WHERE id = 0")
                .fetch_one(&mut *tx)
                .await?;
            (to_u64(now), None)
        }
    };
    let rows = if fleet::derived(c.cluster, c.group, c.resource) {
        fleet_rows(&mut tx, c, after, fetch, snapshot).await?
    } else {
        let at = after.unwrap_or(("", ""));
        cluster_rows(&mut tx, c, at, fetch, snapshot).await?
    };
    tx.commit().await?;
    Ok((rv, rows))
}

/// The fleet view's rows: member after member, in name order, each renamed.
async fn fleet_rows(
    conn: &mut PgConnection,
    c: Collection<'_>,
    after: Option<(&str, &str)>,
    fetch: Option<i64>,
    snapshot: Option<At>,
) -> Result<Vec<Row>, StoreError> {
    let members: Vec<String> =
        sqlx::query_scalar("SELECT cluster FROM mirror_fleet_members ORDER BY cluster")
            .fetch_all(&mut *conn)
            .await?;
    let from = after.and_then(|(ns, name)| fleet::original(name).map(|(c, n)| (c, ns, n)));
    let mut out = Vec::new();
    for member in &members {
        let after_here = match from {
            Some((cluster, _, _)) if member.as_str() < cluster => continue,
            Some((cluster, ns, name)) if member == cluster => (ns, name),
            _ => ("", ""),
        };
        let left = fetch.map(|f| f - i64::try_from(out.len()).unwrap_or(i64::MAX));
        let here = Collection {
            cluster: member,
            ..c
        };
        for row in cluster_rows(conn, here, after_here, left, snapshot).await? {
            out.push(Row {
                body: fleet_text(member, &row.body)?,
                name: fleet_name(member, &row.name),
                namespace: row.namespace,
            });
        }
        if fetch.is_some_and(|f| i64::try_from(out.len()).unwrap_or(i64::MAX) >= f) {
            break;
        }
    }
    Ok(out)
}

/// One cluster's rows of `c` after (namespace, name) `after`, in that order.
async fn cluster_rows(
    conn: &mut PgConnection,
    c: Collection<'_>,
    (after_ns, after_name): (&str, &str),
    fetch: Option<i64>,
    snapshot: Option<At>,
) -> Result<Vec<Row>, StoreError> {
    let max_rv = snapshot.map_or(i64::MAX, |at| to_i64(at.rv));
    // The row comparison lets PostgreSQL seek in the primary key, so a page costs its length.
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT namespace, name, body FROM mirror_objects \
         WHERE cluster = $1 AND grp = $2 AND resource = $3 \
         AND ($4::text IS NULL OR namespace = $4) \
         AND (namespace, name) > ($5, $6) AND rv <= $7 \
         ORDER BY namespace, name LIMIT $8",
    )
    .bind(c.cluster)
    .bind(c.group)
    .bind(c.resource)
    .bind(c.namespace)
    .bind(after_ns)
    .bind(after_name)
    .bind(max_rv)
    .bind(fetch)
    .fetch_all(&mut *conn)
    .await?;
    let mut items: Vec<Row> = rows
        .into_iter()
        .map(|(namespace, name, body)| Row {
            namespace,
            name,
            body,
        })
        .collect();
    let Some(snap) = snapshot else {
        return Ok(items);
    };
    // Objects changed since the snapshot: the first change after it replaced the state it
    // had then (its `prev_rv`'s event), unless it created the object.
    let changed: Vec<(String, String, String, Option<String>)> = sqlx::query_as(
        "SELECT DISTINCT ON (e.namespace, e.name) e.namespace, e.name, e.type, p.body \
         FROM mirror_events e LEFT JOIN mirror_events p ON p.rv = e.prev_rv \
         WHERE e.cluster = $1 AND e.grp = $2 AND e.resource = $3 AND e.rv > $4 \
         AND ($5::text IS NULL OR e.namespace = $5) AND (e.namespace, e.name) > ($6, $7) \
         ORDER BY e.namespace, e.name, e.rv",
    )
    .bind(c.cluster)
    .bind(c.group)
    .bind(c.resource)
    .bind(to_i64(snap.rv))
    .bind(c.namespace)
    .bind(after_ns)
    .bind(after_name)
    .fetch_all(&mut *conn)
    .await?;
    if changed.is_empty() {
        return Ok(items);
    }
    for (namespace, name, kind, then) in changed {
        if kind == EventType::Added.as_str() {
            continue;
        }
        // The state it had then was trimmed from the log (the log reaches back to the
        // snapshot, not to every object's state at it).
        let body = then.ok_or_else(|| snap.expired())?;
        items.push(Row {
            namespace,
            name,
            body,
        });
    }
    items.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    if let Some(n) = fetch.and_then(|f| usize::try_from(f).ok()) {
        items.truncate(n);
    }
    Ok(items)
}

/// Logged events of `c` (every namespace) after version `after`, oldest first, at most
/// `limit` (`None`: all); the fleet view's are its members' (not renamed here).
/// [`StoreError::SnapshotCompacted`] where events after `after` were trimmed.
pub async fn events(
    pool: &PgPool,
    c: Collection<'_>,
    after: u64,
    limit: Option<i64>,
) -> Result<Vec<StoredEvent>, StoreError> {
    let columns = "SELECT rv, cluster, grp, resource, namespace, name, type, body \
                   FROM mirror_events";
    // The events and the trimmed version as of one snapshot.
    let mut tx = snapshot_tx(pool).await?;
    At::checked(&mut tx, after).await?;
    let rows = if fleet::derived(c.cluster, c.group, c.resource) {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "{columns} WHERE cluster IN (SELECT cluster FROM mirror_fleet_members) \
             AND grp = $1 AND resource = $2 AND rv > $3 ORDER BY rv LIMIT $4"
        )))
        .bind(c.group)
        .bind(c.resource)
        .bind(to_i64(after))
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?
    } else {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "{columns} WHERE cluster = $1 AND grp = $2 AND resource = $3 AND rv > $4 \
             ORDER BY rv LIMIT $5"
        )))
        .bind(c.cluster)
        .bind(c.group)
        .bind(c.resource)
        .bind(to_i64(after))
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?
    };
    tx.commit().await?;
    rows.iter().map(|r| event(r, None)).collect()
}

/// Every event after `after`, oldest first, at most `limit`, each MODIFIED one with the
/// state it replaced (while the log holds it): what the tailer fans out.
pub async fn tail(pool: &PgPool, after: u64, limit: i64) -> Result<Vec<StoredEvent>, StoreError> {
    let rows = sqlx::query(
        "SELECT e.rv, e.cluster, e.grp, e.resource, e.namespace, e.name, e.type, e.body, \
           p.body AS prev \
         FROM mirror_events e LEFT JOIN mirror_events p \
           ON p.rv = e.prev_rv AND e.type = 'MODIFIED' \
         WHERE e.rv > $1 ORDER BY e.rv LIMIT $2",
    )
    .bind(to_i64(after))
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            let prev: Option<String> = r.try_get("prev")?;
            event(r, prev.map(|p| Arc::from(p.as_str())))
        })
        .collect()
}

/// An event as logged.
fn event(row: &PgRow, prev: Option<Arc<str>>) -> Result<StoredEvent, StoreError> {
    let rv = to_u64(row.try_get("rv")?);
    let kind: String = row.try_get("type")?;
    let body: String = row.try_get("body")?;
    let mut body: Value = serde_json::from_str(&body)?;
    set_resource_version(&mut body, rv);
    Ok(StoredEvent {
        rv,
        key: ObjectKey {
            cluster: row.try_get("cluster")?,
            group: row.try_get("grp")?,
            resource: row.try_get("resource")?,
            namespace: row.try_get("namespace")?,
            name: row.try_get("name")?,
        },
        kind: EventType::parse(&kind).unwrap_or(EventType::Modified),
        body: Arc::new(body),
        prev,
    })
}

/// The (namespace, name) of every stored object of one collection of `cluster`.
pub async fn names(
    pool: &PgPool,
    cluster: &str,
    group: &str,
    resource: &str,
) -> Result<Vec<(String, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT namespace, name FROM mirror_objects \
         WHERE cluster = $1 AND grp = $2 AND resource = $3",
    )
    .bind(cluster)
    .bind(group)
    .bind(resource)
    .fetch_all(pool)
    .await?)
}

/// The key of every stored object of `cluster`.
pub async fn keys(pool: &PgPool, cluster: &str) -> Result<Vec<ObjectKey>, StoreError> {
    let rows: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT grp, resource, namespace, name FROM mirror_objects WHERE cluster = $1",
    )
    .bind(cluster)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(group, resource, namespace, name)| ObjectKey {
            cluster: cluster.to_owned(),
            group,
            resource,
            namespace,
            name,
        })
        .collect())
}

/// How many objects one collection of `cluster` holds.
pub async fn count(
    pool: &PgPool,
    cluster: &str,
    group: &str,
    resource: &str,
) -> Result<u64, StoreError> {
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM mirror_objects WHERE cluster = $1 AND grp = $2 AND resource = $3",
    )
    .bind(cluster)
    .bind(group)
    .bind(resource)
    .fetch_one(pool)
    .await?;
    Ok(to_u64(n))
}
