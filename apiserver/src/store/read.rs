//! Reads: single objects, pages of a collection at one snapshot, and the event log since a version.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;
use sqlx::{Row, sqlite::SqliteConnection};
use tokio::sync::mpsc;

use super::{EventType, ObjectKey, Store, StoreError, StoredEvent, fleet, to_i64, to_u64};

/// A page of a collection.
#[derive(Debug)]
pub struct ListPage {
    /// The objects, parsed.
    pub items: Vec<Value>,
    /// The store's version when the page was read.
    pub rv: u64,
    /// Whether more objects follow the last one returned.
    pub more: bool,
}

/// A stored object as text.
#[derive(Debug)]
pub struct RawObject {
    /// The object's namespace (empty: cluster-scoped).
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The JSON object as stored (at the storage version).
    pub body: String,
}

/// How many objects a streamed list reads per short transaction: pages much smaller than this
/// make a long list pay for many more transactions (32 took a 10,000-object list from 170 to
/// 283 ms).
const STREAM_PAGE: usize = 128;

/// How many read pages wait for the client: each is handed over whole (one channel operation,
/// one wake-up of the reader, per page rather than per object). With the page waiting to be
/// queued and the one its reader is writing out, at most four pages, about 1 MB at ~2 KB an
/// object, are held per open list whatever the collection's size (before, about 450 KB).
const STREAM_AHEAD: usize = 1;

/// A page of a collection, unparsed.
#[derive(Debug)]
pub struct RawPage {
    /// The objects, as stored.
    pub items: Vec<RawObject>,
    /// The store's version when the page was read (or the snapshot it was read at).
    pub rv: u64,
    /// Whether more objects follow the last one returned.
    pub more: bool,
}

/// Why a read at an earlier version failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Events after `requested` are no longer all in the log.
    #[error("too old resource version: {requested} ({compacted})")]
    Expired {
        /// The version the read was asked at.
        requested: u64,
        /// The oldest version the log still reaches back to.
        compacted: u64,
    },
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
}

/// A store error as a read's: a snapshot compacted away (as a mirror on PostgreSQL reports
/// it) is the read's version being too old.
impl From<StoreError> for ReplayError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::SnapshotCompacted {
                requested,
                compacted,
            } => ReplayError::Expired {
                requested,
                compacted,
            },
            e => ReplayError::Store(e),
        }
    }
}

/// A read's failure as a store error: a log too short for the version read at (only a read at
/// a snapshot can find it so) is the snapshot's compaction.
impl From<ReplayError> for StoreError {
    fn from(e: ReplayError) -> Self {
        match e {
            ReplayError::Store(e) => e,
            ReplayError::Expired {
                requested,
                compacted,
            } => StoreError::SnapshotCompacted {
                requested,
                compacted,
            },
        }
    }
}

/// The oldest version the event log reaches back to, as `tx` sees it; [`ReplayError::Expired`]
/// where that is after `requested`, since a read at `requested` could miss changes.
pub(super) async fn log_reaches(
    tx: &mut sqlx::SqliteConnection,
    requested: u64,
) -> Result<u64, ReplayError> {
    let compacted: i64 = sqlx::query_scalar("SELECT compacted_rv FROM sequence WHERE id = 0")
        .fetch_one(tx)
        .await
        .map_err(StoreError::from)?;
    let compacted = to_u64(compacted);
    if requested < compacted {
        return Err(ReplayError::Expired {
            requested,
            compacted,
        });
    }
    Ok(compacted)
}

impl Store {
    /// The object at `key` and its resourceVersion.
    pub async fn get(&self, key: &ObjectKey) -> Result<Option<(u64, Value)>, StoreError> {
        if fleet::derived(&key.cluster, &key.group, &key.resource) {
            return self.fleet_get(key).await;
        }
        if let Some(pg) = self.postgres_for(&key.cluster) {
            return match pg.get(key).await? {
                Some((rv, body)) => Ok(Some((rv, serde_json::from_str(&body)?))),
                None => Ok(None),
            };
        }
        let row = sqlx::query(
            "SELECT rv, body FROM objects WHERE cluster = ? AND grp = ? AND resource = ? AND namespace = ? AND name = ?",
        )
        .bind(&key.cluster)
        .bind(&key.group)
        .bind(&key.resource)
        .bind(&key.namespace)
        .bind(&key.name)
        .fetch_optional(self.pool())
        .await?;
        match row {
            None => Ok(None),
            Some(row) => {
                let rv: i64 = row.try_get("rv")?;
                let body: String = row.try_get("body")?;
                Ok(Some((to_u64(rv), serde_json::from_str(&body)?)))
            }
        }
    }

    /// Objects of one resource, ordered by (namespace, name), starting after `after` and at most
    /// `limit` of them (0: all). `namespace` `None` reads every namespace.
    pub fn list<'a>(
        &'a self,
        cluster: &'a str,
        group: &'a str,
        resource: &'a str,
        namespace: Option<&'a str>,
        after: Option<(&'a str, &'a str)>,
        limit: usize,
    ) -> BoxFuture<'a, Result<ListPage, StoreError>> {
        Box::pin(async move {
            let raw = self
                .list_raw(cluster, group, resource, namespace, after, limit)
                .await?;
            let mut items = Vec::with_capacity(raw.items.len());
            for o in raw.items {
                items.push(serde_json::from_str(&o.body)?);
            }
            Ok(ListPage {
                items,
                rv: raw.rv,
                more: raw.more,
            })
        })
    }

    /// [`Store::list`] without parsing the stored JSON.
    pub async fn list_raw(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<RawPage, StoreError> {
        if let Some(pg) = self.postgres_for(cluster) {
            let c = super::pg_mirror::Collection {
                cluster,
                group,
                resource,
                namespace,
            };
            return Store::postgres_page(pg, c, after, limit, None).await;
        }
        let mut tx = self.pool().begin().await?;
        let rv: i64 = sqlx::query_scalar("SELECT rv FROM sequence WHERE id = 0")
            .fetch_one(&mut *tx)
            .await?;
        let collection = Collection {
            cluster,
            group,
            resource,
            namespace,
        };
        let items = self
            .rows(&mut tx, collection, after, limit, Reading::Current)
            .await
            .map_err(StoreError::from)?;
        tx.commit().await?;
        Ok(page(items, to_u64(rv), limit))
    }

    /// Shows `visit` every stored object of a cluster-wide collection, `page` objects per
    /// short read, for the scans that look for the few objects of many that need them.
    pub async fn scan_raw(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        page: usize,
        mut visit: impl FnMut(&RawObject),
    ) -> Result<(), StoreError> {
        let mut after: Option<(String, String)> = None;
        loop {
            let at = after.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
            let read = self
                .list_raw(cluster, group, resource, None, at, page)
                .await?;
            read.items.iter().for_each(&mut visit);
            match read.items.last() {
                Some(last) if read.more => {
                    after = Some((last.namespace.clone(), last.name.clone()));
                }
                _ => return Ok(()),
            }
        }
    }

    /// The rows of a page of `c` after `after`, at most `limit` + 1 of them (0: all), for
    /// any cluster: the fleet view's come from its members.
    async fn rows(
        &self,
        conn: &mut SqliteConnection,
        c: Collection<'_>,
        after: Option<(&str, &str)>,
        limit: usize,
        reading: Reading,
    ) -> Result<Vec<RawObject>, ReplayError> {
        if fleet::derived(c.cluster, c.group, c.resource) {
            self.fleet_rows(conn, c, after, limit, reading).await
        } else {
            cluster_rows(conn, c, after.unwrap_or(("", "")), fetch(limit), reading).await
        }
    }

    /// Every object of one resource as stored, ordered by (namespace, name), as of one
    /// snapshot, handed over a page at a time: a full list of a large collection never sits in
    /// memory at once. The first page fixes the snapshot; each later page is read at it (the
    /// event log fills in what changed since) in a short transaction of its own, so a client
    /// that reads slowly, or not at all, holds no pooled connection while it waits. Returns the
    /// snapshot's resourceVersion and the objects, a page (never empty) at a time; an error
    /// ends the stream. Dropping the receiver ends the read.
    pub async fn stream_raw(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Result<(u64, mpsc::Receiver<Result<Vec<RawObject>, StoreError>>), StoreError> {
        let first = self
            .list_raw(cluster, group, resource, namespace, None, STREAM_PAGE)
            .await?;
        let snapshot = first.rv;
        let (send, receive) = mpsc::channel(STREAM_AHEAD);
        let store = self.clone();
        let (cluster, group, resource) =
            (cluster.to_owned(), group.to_owned(), resource.to_owned());
        let namespace = namespace.map(str::to_owned);
        tokio::spawn(async move {
            let mut page = first;
            loop {
                let last = page
                    .items
                    .last()
                    .map(|o| (o.namespace.clone(), o.name.clone()));
                if !page.items.is_empty() && send.send(Ok(page.items)).await.is_err() {
                    return;
                }
                let (true, Some((ns, name))) = (page.more, last) else {
                    return;
                };
                let next = store
                    .list_raw_at(
                        &cluster,
                        &group,
                        &resource,
                        namespace.as_deref(),
                        Some((&ns, &name)),
                        STREAM_PAGE,
                        snapshot,
                    )
                    .await;
                page = match next {
                    Ok(p) => p,
                    Err(ReplayError::Store(e)) => {
                        let _ = send.send(Err(e)).await;
                        return;
                    }
                    Err(ReplayError::Expired {
                        requested,
                        compacted,
                    }) => {
                        let e = StoreError::SnapshotCompacted {
                            requested,
                            compacted,
                        };
                        let _ = send.send(Err(e)).await;
                        return;
                    }
                };
            }
        });
        Ok((snapshot, receive))
    }

    /// A page of a collection as it was at resourceVersion `snapshot` (the version of its first
    /// page): objects changed since are read back from the event log. `Expired` when the log
    /// no longer reaches back to `snapshot`.
    #[allow(clippy::too_many_arguments)]
    pub async fn list_raw_at(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        after: Option<(&str, &str)>,
        limit: usize,
        snapshot: u64,
    ) -> Result<RawPage, ReplayError> {
        if let Some(pg) = self.postgres_for(cluster) {
            let c = super::pg_mirror::Collection {
                cluster,
                group,
                resource,
                namespace,
            };
            return Ok(Store::postgres_page(pg, c, after, limit, Some(snapshot)).await?);
        }
        let mut tx = self.pool().begin().await.map_err(StoreError::from)?;
        let compacted = log_reaches(&mut tx, snapshot).await?;
        let collection = Collection {
            cluster,
            group,
            resource,
            namespace,
        };
        let reading = Reading::At {
            snapshot,
            compacted,
        };
        let items = self
            .rows(&mut tx, collection, after, limit, reading)
            .await?;
        tx.commit().await.map_err(StoreError::from)?;
        Ok(page(items, snapshot, limit))
    }

    /// [`Store::list_raw_at`], parsed.
    #[allow(clippy::too_many_arguments)]
    pub async fn list_at(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        after: Option<(&str, &str)>,
        limit: usize,
        snapshot: u64,
    ) -> Result<ListPage, ReplayError> {
        let raw = self
            .list_raw_at(cluster, group, resource, namespace, after, limit, snapshot)
            .await?;
        let mut items = Vec::with_capacity(raw.items.len());
        for o in raw.items {
            items.push(serde_json::from_str(&o.body).map_err(StoreError::from)?);
        }
        Ok(ListPage {
            items,
            rv: raw.rv,
            more: raw.more,
        })
    }

    /// The objects of `cluster` whose ownerReferences name `owner_uid`.
    pub async fn dependents(
        &self,
        cluster: &str,
        owner_uid: &str,
    ) -> Result<Vec<ObjectKey>, StoreError> {
        let rows: Vec<(String, String, String, String)> = sqlx::query_as(
            "SELECT grp, resource, namespace, name FROM owner_refs WHERE cluster = ? AND owner_uid = ? \
             ORDER BY grp, resource, namespace, name",
        )
        .bind(cluster)
        .bind(owner_uid)
        .fetch_all(self.pool())
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

    /// Logged events of one resource with a version above `after`, oldest first, or `Expired`
    /// when the log no longer reaches back that far.
    pub async fn events_since(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        after: u64,
    ) -> Result<Vec<StoredEvent>, ReplayError> {
        self.events_page(cluster, group, resource, after, 0).await
    }

    /// [`Store::events_since`], at most `limit` of them (0: all): a watch replays the log a
    /// page at a time, so it holds a page, not the log, in memory.
    pub async fn events_page(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, ReplayError> {
        if let Some(pg) = self.postgres_for(cluster) {
            let c = super::pg_mirror::Collection {
                cluster,
                group,
                resource,
                namespace: None,
            };
            let limit = (limit != 0).then(|| i64::try_from(limit).unwrap_or(i64::MAX));
            let events = pg.events(c, after, limit).await?;
            return Ok(if fleet::derived(cluster, group, resource) {
                events.iter().map(StoredEvent::as_fleet_event).collect()
            } else {
                events
            });
        }
        let mut tx = self.pool().begin().await.map_err(StoreError::from)?;
        log_reaches(&mut tx, after).await?;
        let fleet = fleet::derived(cluster, group, resource);
        let query = if fleet {
            sqlx::query(FLEET_EVENTS_SINCE)
        } else {
            sqlx::query(EVENTS_SINCE).bind(cluster)
        };
        let limit = if limit == 0 {
            -1
        } else {
            i64::try_from(limit).unwrap_or(i64::MAX)
        };
        let rows = query
            .bind(group)
            .bind(resource)
            .bind(to_i64(after))
            .bind(limit)
            .fetch_all(&mut *tx)
            .await
            .map_err(StoreError::from)?;
        tx.commit().await.map_err(StoreError::from)?;
        let mut events = Vec::with_capacity(rows.len());
        for row in rows {
            let ev = logged_event(&row, group, resource)?;
            events.push(if fleet { ev.as_fleet_event() } else { ev });
        }
        Ok(events)
    }
}

/// An event as read from the log.
fn logged_event(
    row: &sqlx::sqlite::SqliteRow,
    group: &str,
    resource: &str,
) -> Result<StoredEvent, StoreError> {
    let rv = to_u64(row.try_get("rv")?);
    let kind: String = row.try_get("type")?;
    let body: Option<String> = row.try_get("body")?;
    let mut body: Value = serde_json::from_str(&body.ok_or(StoreError::LostEvent(rv))?)?;
    // A body taken from the DELETED event after it carries that event's version.
    super::body::set_resource_version(&mut body, rv);
    Ok(StoredEvent {
        rv,
        key: ObjectKey {
            cluster: row.try_get("cluster")?,
            group: group.to_owned(),
            resource: resource.to_owned(),
            namespace: row.try_get("namespace")?,
            name: row.try_get("name")?,
        },
        kind: EventType::parse(&kind).unwrap_or(EventType::Modified),
        body: Arc::new(body),
        prev: None,
    })
}

/// An event's body (in a query over `events e`): its own, else its object's row at its
/// version, else the next event of its object, which is then the DELETED event holding the
/// same state (see the migration `compact_storage`).
macro_rules! event_body {
    () => {
        "COALESCE(e.body, \
         (SELECT o.body FROM objects o WHERE o.cluster = e.cluster AND o.grp = e.grp \
           AND o.resource = e.resource AND o.namespace = e.namespace AND o.name = e.name \
           AND o.rv = e.rv), \
         (SELECT d.body FROM events d WHERE d.cluster = e.cluster AND d.grp = e.grp \
           AND d.resource = e.resource AND d.namespace = e.namespace AND d.name = e.name \
           AND d.rv > e.rv ORDER BY d.rv LIMIT 1))"
    };
}

/// Logged events of one resource of one cluster (`?1`) after a version.
const EVENTS_SINCE: &str = concat!(
    "SELECT e.rv, e.cluster, e.namespace, e.name, e.type, ",
    event_body!(),
    " AS body FROM events e WHERE e.cluster = ? AND e.grp = ? AND e.resource = ? AND e.rv > ? \
     ORDER BY e.rv LIMIT ?"
);

/// [`EVENTS_SINCE`] for the fleet view: its members' events.
const FLEET_EVENTS_SINCE: &str = concat!(
    "SELECT e.rv, e.cluster, e.namespace, e.name, e.type, ",
    event_body!(),
    " AS body FROM events e WHERE e.cluster IN (SELECT cluster FROM fleet_members) \
     AND e.grp = ? AND e.resource = ? AND e.rv > ? ORDER BY e.rv LIMIT ?"
);

/// The latest logged state of one object at or before a version.
const STATE_AT: &str = concat!(
    "SELECT e.rv, e.type, ",
    event_body!(),
    " FROM events e WHERE e.cluster = ? AND e.grp = ? AND e.resource = ? \
     AND e.namespace = ? AND e.name = ? AND e.rv <= ? ORDER BY e.rv DESC LIMIT 1"
);

/// The type of the first logged event of one object after a version.
const FIRST_AFTER: &str = "SELECT type FROM events WHERE cluster = ? AND grp = ? AND resource = ? \
     AND namespace = ? AND name = ? AND rv > ? ORDER BY rv LIMIT 1";

/// The row `sql` (one of [`STATE_AT`], [`FIRST_AFTER`]) finds for the object (namespace, name)
/// of `c` relative to version `rv`.
async fn object_event(
    conn: &mut SqliteConnection,
    sql: &'static str,
    c: Collection<'_>,
    (namespace, name): (&str, &str),
    rv: i64,
) -> Result<Option<sqlx::sqlite::SqliteRow>, StoreError> {
    Ok(sqlx::query(sql)
        .bind(c.cluster)
        .bind(c.group)
        .bind(c.resource)
        .bind(namespace)
        .bind(name)
        .bind(rv)
        .fetch_optional(&mut *conn)
        .await?)
}

/// `text` with `metadata.resourceVersion` set to `rv`, rewritten only where it differs.
fn at_version(text: String, rv: u64) -> Result<String, StoreError> {
    let mut body: Value = serde_json::from_str(&text)?;
    let want = rv.to_string();
    if body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        == Some(&want)
    {
        return Ok(text);
    }
    super::body::set_resource_version(&mut body, rv);
    Ok(serde_json::to_string(&body)?)
}

/// One collection of one cluster.
#[derive(Clone, Copy, Debug)]
pub(super) struct Collection<'a> {
    pub cluster: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    /// `None`: every namespace.
    pub namespace: Option<&'a str>,
}

/// Which state of a collection a read sees.
#[derive(Clone, Copy, Debug)]
pub(super) enum Reading {
    /// The current objects.
    Current,
    /// The objects as they were at `snapshot` (the event log reaches back to `compacted`).
    At { snapshot: u64, compacted: u64 },
}

/// How many rows to fetch for a page of `limit` (one more, to know whether more follow; -1: all).
pub(super) fn fetch(limit: usize) -> i64 {
    if limit == 0 {
        -1
    } else {
        i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1
    }
}

/// A page from the rows read for it (at most one more than `limit`).
fn page(mut items: Vec<RawObject>, rv: u64, limit: usize) -> RawPage {
    let more = limit != 0 && items.len() > limit;
    if more {
        items.truncate(limit);
    }
    RawPage { items, rv, more }
}

/// The rows of one cluster's collection after (namespace, name) `after`, ordered by
/// (namespace, name), at most `fetch` of them (-1: all).
pub(super) async fn cluster_rows(
    conn: &mut SqliteConnection,
    c: Collection<'_>,
    after: (&str, &str),
    fetch: i64,
    reading: Reading,
) -> Result<Vec<RawObject>, ReplayError> {
    match reading {
        Reading::Current => current_rows(conn, c, after, fetch)
            .await
            .map_err(ReplayError::from),
        Reading::At {
            snapshot,
            compacted,
        } => rows_at(conn, c, after, fetch, snapshot, compacted).await,
    }
}

async fn current_rows(
    conn: &mut SqliteConnection,
    c: Collection<'_>,
    after: (&str, &str),
    fetch: i64,
) -> Result<Vec<RawObject>, StoreError> {
    rows_up_to(conn, c, after, fetch, i64::MAX).await
}

/// The objects of `c` after (namespace, name) `after` whose version is at most `max_rv`.
async fn rows_up_to(
    conn: &mut SqliteConnection,
    c: Collection<'_>,
    (after_ns, after_name): (&str, &str),
    fetch: i64,
    max_rv: i64,
) -> Result<Vec<RawObject>, StoreError> {
    // No `after`: ("", "") precedes every key (names are never empty). The row-value
    // comparison lets SQLite seek in the key's index, so each page costs its own length
    // (an OR of the same conditions scanned from the collection's start every page).
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT namespace, name, body FROM objects \
         WHERE cluster = ? AND grp = ? AND resource = ? AND (? IS NULL OR namespace = ?) \
         AND (namespace, name) > (?, ?) AND rv <= ? \
         ORDER BY namespace, name LIMIT ?",
    )
    .bind(c.cluster)
    .bind(c.group)
    .bind(c.resource)
    .bind(c.namespace)
    .bind(c.namespace)
    .bind(after_ns)
    .bind(after_name)
    .bind(max_rv)
    .bind(fetch)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(namespace, name, body)| RawObject {
            namespace,
            name,
            body,
        })
        .collect())
}

/// [`current_rows`] as of resourceVersion `snapshot`: objects changed since are read back from
/// the event log. `Expired` when the log no longer reaches back to `snapshot`.
async fn rows_at(
    conn: &mut SqliteConnection,
    c: Collection<'_>,
    (after_ns, after_name): (&str, &str),
    fetch: i64,
    snapshot: u64,
    compacted: u64,
) -> Result<Vec<RawObject>, ReplayError> {
    let snap = to_i64(snapshot);
    let expired = ReplayError::Expired {
        requested: snapshot,
        compacted,
    };
    // Objects unchanged since the snapshot.
    let mut items = rows_up_to(conn, c, (after_ns, after_name), fetch, snap).await?;
    // Objects changed (or created, or deleted) since: their state at the snapshot, if any.
    let changed: Vec<(String, String)> = sqlx::query_as(
        "SELECT DISTINCT namespace, name FROM events \
         WHERE cluster = ? AND grp = ? AND resource = ? AND rv > ? AND (? IS NULL OR namespace = ?) \
         AND (namespace, name) > (?, ?)",
    )
    .bind(c.cluster)
    .bind(c.group)
    .bind(c.resource)
    .bind(snap)
    .bind(c.namespace)
    .bind(c.namespace)
    .bind(after_ns)
    .bind(after_name)
    .fetch_all(&mut *conn)
    .await
    .map_err(StoreError::from)?;
    for (ns, name) in changed {
        let at = object_event(conn, STATE_AT, c, (&ns, &name), snap).await?;
        match at {
            Some(row) => {
                let rv = to_u64(row.try_get(0).map_err(StoreError::from)?);
                let kind: String = row.try_get(1).map_err(StoreError::from)?;
                if kind != "DELETED" {
                    let body: Option<String> = row.try_get(2).map_err(StoreError::from)?;
                    let body = body.ok_or(StoreError::LostEvent(rv))?;
                    items.push(RawObject {
                        namespace: ns,
                        name,
                        body: at_version(body, rv)?,
                    });
                }
            }
            None => {
                // Nothing at or before the snapshot: created after it, unless its earlier
                // history was compacted away.
                let first = object_event(conn, FIRST_AFTER, c, (&ns, &name), snap).await?;
                let kind: Option<String> = first
                    .map(|row| row.try_get(0))
                    .transpose()
                    .map_err(StoreError::from)?;
                if kind.as_deref() != Some("ADDED") {
                    return Err(expired);
                }
            }
        }
    }
    items.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    if let Ok(n) = usize::try_from(fetch) {
        items.truncate(n);
    }
    Ok(items)
}
