//! Reads: single objects, pages of a collection at one snapshot, and the event log since a version.

use std::sync::Arc;

use serde_json::Value;
use sqlx::Row;
use tokio::sync::mpsc;

use super::{EventType, ObjectKey, Store, StoreError, StoredEvent, to_i64, to_u64};

/// A page of a collection.
#[derive(Debug)]
pub struct ListPage {
    pub items: Vec<Value>,
    /// The store's version when the page was read.
    pub rv: u64,
    /// Whether more objects follow the last one returned.
    pub more: bool,
}

/// A stored object as text.
#[derive(Debug)]
pub struct RawObject {
    pub namespace: String,
    pub name: String,
    /// The JSON object as stored (at the storage version).
    pub body: String,
}

/// How many objects a streamed list reads ahead of the client (at ~2 KB each, a few hundred
/// KB held per open list, whatever the collection's size).
const STREAM_AHEAD: usize = 128;

/// A page of a collection, unparsed.
#[derive(Debug)]
pub struct RawPage {
    pub items: Vec<RawObject>,
    pub rv: u64,
    pub more: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Events after `requested` are no longer all in the log.
    #[error("too old resource version: {requested} ({compacted})")]
    Expired { requested: u64, compacted: u64 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Store {
    /// The object at `key` and its resourceVersion.
    pub async fn get(&self, key: &ObjectKey) -> Result<Option<(u64, Value)>, StoreError> {
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
    pub async fn list(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<ListPage, StoreError> {
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
        let mut tx = self.pool().begin().await?;
        let rv: i64 = sqlx::query_scalar("SELECT rv FROM sequence WHERE id = 0")
            .fetch_one(&mut *tx)
            .await?;
        let (after_ns, after_name) = after.unwrap_or(("", ""));
        // No `after`: ("", "") precedes every key (names are never empty). The row-value
        // comparison lets SQLite seek in the primary key, so each page costs its own length
        // (an OR of the same conditions scanned from the collection's start every page).
        let fetch = if limit == 0 {
            -1
        } else {
            i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1
        };
        let rows = sqlx::query(
            "SELECT namespace, name, body FROM objects \
             WHERE cluster = ? AND grp = ? AND resource = ? AND (? IS NULL OR namespace = ?) \
             AND (namespace, name) > (?, ?) \
             ORDER BY namespace, name LIMIT ?",
        )
        .bind(cluster)
        .bind(group)
        .bind(resource)
        .bind(namespace)
        .bind(namespace)
        .bind(after_ns)
        .bind(after_name)
        .bind(fetch)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            items.push(RawObject {
                namespace: row.try_get("namespace")?,
                name: row.try_get("name")?,
                body: row.try_get("body")?,
            });
        }
        let more = limit != 0 && items.len() > limit;
        if more {
            items.truncate(limit);
        }
        Ok(RawPage {
            items,
            rv: to_u64(rv),
            more,
        })
    }

    /// Every object of one resource as stored, ordered by (namespace, name), as of one
    /// snapshot, handed over a page at a time: a full list of a large collection never sits in
    /// memory at once. The first page fixes the snapshot; each later page is read at it (the
    /// event log fills in what changed since) in a short transaction of its own, so a client
    /// that reads slowly, or not at all, holds no pooled connection while it waits. Returns the
    /// snapshot's resourceVersion and the objects; an error ends the stream. Dropping the
    /// receiver ends the read.
    pub async fn stream_raw(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Result<(u64, mpsc::Receiver<Result<RawObject, StoreError>>), StoreError> {
        let first = self
            .list_raw(cluster, group, resource, namespace, None, STREAM_AHEAD)
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
                for obj in page.items {
                    if send.send(Ok(obj)).await.is_err() {
                        return;
                    }
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
                        STREAM_AHEAD,
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
        let mut tx = self.pool().begin().await.map_err(StoreError::from)?;
        let compacted: i64 = sqlx::query_scalar("SELECT compacted_rv FROM sequence WHERE id = 0")
            .fetch_one(&mut *tx)
            .await
            .map_err(StoreError::from)?;
        if snapshot < to_u64(compacted) {
            return Err(ReplayError::Expired {
                requested: snapshot,
                compacted: to_u64(compacted),
            });
        }
        let (after_ns, after_name) = after.unwrap_or(("", ""));
        let fetch = if limit == 0 {
            -1
        } else {
            i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1
        };
        let snap = to_i64(snapshot);
        // Objects unchanged since the snapshot.
        let unchanged: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT namespace, name, body FROM objects \
             WHERE cluster = ? AND grp = ? AND resource = ? AND (? IS NULL OR namespace = ?) \
             AND (namespace, name) > (?, ?) AND rv <= ? \
             ORDER BY namespace, name LIMIT ?",
        )
        .bind(cluster)
        .bind(group)
        .bind(resource)
        .bind(namespace)
        .bind(namespace)
        .bind(after_ns)
        .bind(after_name)
        .bind(snap)
        .bind(fetch)
        .fetch_all(&mut *tx)
        .await
        .map_err(StoreError::from)?;
        // Objects changed (or created, or deleted) since: their state at the snapshot, if any.
        let changed: Vec<(String, String)> = sqlx::query_as(
            "SELECT DISTINCT namespace, name FROM events \
             WHERE cluster = ? AND grp = ? AND resource = ? AND rv > ? AND (? IS NULL OR namespace = ?) \
             AND (namespace, name) > (?, ?)",
        )
        .bind(cluster)
        .bind(group)
        .bind(resource)
        .bind(snap)
        .bind(namespace)
        .bind(namespace)
        .bind(after_ns)
        .bind(after_name)
        .fetch_all(&mut *tx)
        .await
        .map_err(StoreError::from)?;
        let mut items: Vec<RawObject> = unchanged
            .into_iter()
            .map(|(namespace, name, body)| RawObject {
                namespace,
                name,
                body,
            })
            .collect();
        for (ns, name) in changed {
            let at: Option<(String, String)> = sqlx::query_as(
                "SELECT type, body FROM events WHERE cluster = ? AND grp = ? AND resource = ? \
                 AND namespace = ? AND name = ? AND rv <= ? ORDER BY rv DESC LIMIT 1",
            )
            .bind(cluster)
            .bind(group)
            .bind(resource)
            .bind(&ns)
            .bind(&name)
            .bind(snap)
            .fetch_optional(&mut *tx)
            .await
            .map_err(StoreError::from)?;
            match at {
                Some((kind, body)) if kind != "DELETED" => items.push(RawObject {
                    namespace: ns,
                    name,
                    body,
                }),
                Some(_) => {}
                None => {
                    // Nothing at or before the snapshot: created after it, unless its earlier
                    // history was compacted away.
                    let first: Option<String> = sqlx::query_scalar(
                        "SELECT type FROM events WHERE cluster = ? AND grp = ? AND resource = ? \
                         AND namespace = ? AND name = ? AND rv > ? ORDER BY rv LIMIT 1",
                    )
                    .bind(cluster)
                    .bind(group)
                    .bind(resource)
                    .bind(&ns)
                    .bind(&name)
                    .bind(snap)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(StoreError::from)?;
                    if first.as_deref() != Some("ADDED") {
                        return Err(ReplayError::Expired {
                            requested: snapshot,
                            compacted: to_u64(compacted),
                        });
                    }
                }
            }
        }
        tx.commit().await.map_err(StoreError::from)?;
        items.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let more = limit != 0 && items.len() > limit;
        if more {
            items.truncate(limit);
        }
        Ok(RawPage {
            items,
            rv: snapshot,
            more,
        })
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
        let mut tx = self.pool().begin().await.map_err(StoreError::from)?;
        let compacted: i64 = sqlx::query_scalar("SELECT compacted_rv FROM sequence WHERE id = 0")
            .fetch_one(&mut *tx)
            .await
            .map_err(StoreError::from)?;
        if after < to_u64(compacted) {
            return Err(ReplayError::Expired {
                requested: after,
                compacted: to_u64(compacted),
            });
        }
        let rows = sqlx::query(
            "SELECT rv, namespace, name, type, body FROM events \
             WHERE cluster = ? AND grp = ? AND resource = ? AND rv > ? ORDER BY rv",
        )
        .bind(cluster)
        .bind(group)
        .bind(resource)
        .bind(to_i64(after))
        .fetch_all(&mut *tx)
        .await
        .map_err(StoreError::from)?;
        tx.commit().await.map_err(StoreError::from)?;
        let mut events = Vec::with_capacity(rows.len());
        for row in rows {
            let rv: i64 = row.try_get("rv").map_err(StoreError::from)?;
            let kind: String = row.try_get("type").map_err(StoreError::from)?;
            let body: String = row.try_get("body").map_err(StoreError::from)?;
            events.push(StoredEvent {
                rv: to_u64(rv),
                key: ObjectKey {
                    cluster: cluster.to_owned(),
                    group: group.to_owned(),
                    resource: resource.to_owned(),
                    namespace: row.try_get("namespace").map_err(StoreError::from)?,
                    name: row.try_get("name").map_err(StoreError::from)?,
                },
                kind: EventType::parse(&kind).unwrap_or(EventType::Modified),
                body: Arc::new(serde_json::from_str(&body).map_err(StoreError::from)?),
                prev: None,
            });
        }
        Ok(events)
    }
}
