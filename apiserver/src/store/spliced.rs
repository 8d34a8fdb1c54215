//! Full lists read as page texts: each page's stored objects joined with commas by SQLite, so
//! that a page crosses from the database's thread in one row, not one row per object (sqlx
//! hands rows over one at a time through a bounded channel: a wake-up of one thread or the
//! other per object), and reaches the response as one allocation, not one per object.

use sqlx::{Row, sqlite::SqliteConnection};
use tokio::sync::mpsc;

use super::{
    Store, StoreError, fleet,
    read::{Collection, RawPage, ReplayError},
    to_i64, to_u64,
};

/// How many objects a page holds. With one row per page the per-object hand-offs are gone, and
/// what is left per page is its transaction (six statements): 512 (about 1 MB at ~2 KB an
/// object) makes that a few per cent of a page's time. At most three pages per open list are
/// held at once (the one being read, the one queued, the one being written out).
const PAGE: usize = 512;

/// A page of a collection as text.
#[derive(Debug)]
struct TextPage {
    /// The page's objects as stored, joined with commas; after the first page of a stream it
    /// begins with a comma, so that pages concatenate into a JSON array's elements.
    text: String,
    /// The key (namespace, name) of its last object, where more may follow.
    last: Option<(String, String)>,
}

/// The objects of a page, in key order, joined with commas (`?8` before them), and how many
/// there are. The subquery's LIMIT keeps its ORDER BY (SQLite drops a subquery's ORDER BY
/// only where it cannot change the result), so the aggregate sees the rows in key order.
/// Parameters: ?1 to ?3 the collection, ?4 the namespace (NULL: all), ?5 and ?6 the key to
/// start after, ?7 the page size, ?8 what goes before the first object.
const PAGE_TEXT: &str = "\
    SELECT count(*), ?8 || group_concat(body, ',') FROM ( \
      SELECT body FROM objects \
       WHERE cluster = ?1 AND grp = ?2 AND resource = ?3 AND (?4 IS NULL OR namespace = ?4) \
       AND (namespace, name) > (?5, ?6) ORDER BY namespace, name LIMIT ?7)";

/// The key of the page's last object (the `?7`th after ?5, ?6), from the key's index alone.
const NTH_KEY: &str = "\
    SELECT namespace, name FROM objects \
     WHERE cluster = ?1 AND grp = ?2 AND resource = ?3 AND (?4 IS NULL OR namespace = ?4) \
     AND (namespace, name) > (?5, ?6) ORDER BY namespace, name LIMIT 1 OFFSET ?7";

/// Whether an object of the collection after ?6, ?7 changed since version ?4 (?5 the
/// namespace, NULL: all).
const CHANGED_SINCE: &str = "\
    SELECT 1 FROM events \
     WHERE cluster = ?1 AND grp = ?2 AND resource = ?3 AND rv > ?4 \
     AND (?5 IS NULL OR namespace = ?5) AND (namespace, name) > (?6, ?7) LIMIT 1";

impl Store {
    /// [`Store::stream_raw`] with each page as one text: the stored objects joined with commas,
    /// every page after the first beginning with a comma, so that the pages concatenated are
    /// the elements of a JSON array in key order. Returns the snapshot's resourceVersion and
    /// the pages (never empty); an error ends the stream. Dropping the receiver ends the read.
    pub async fn stream_text(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Result<(u64, mpsc::Receiver<Result<String, StoreError>>), StoreError> {
        if fleet::derived(cluster, group, resource) || self.postgres_for(cluster).is_some() {
            return self
                .stream_joined(cluster, group, resource, namespace)
                .await;
        }
        let c = Collection {
            cluster,
            group,
            resource,
            namespace,
        };
        let (snapshot, first) = self.first_text_page(c).await?;
        let (send, receive) = mpsc::channel(1);
        let store = self.clone();
        let (cluster, group, resource) =
            (cluster.to_owned(), group.to_owned(), resource.to_owned());
        let namespace = namespace.map(str::to_owned);
        tokio::spawn(async move {
            let c = Collection {
                cluster: &cluster,
                group: &group,
                resource: &resource,
                namespace: namespace.as_deref(),
            };
            let mut page = first;
            loop {
                let TextPage { text, last } = page;
                if !text.is_empty() && send.send(Ok(text)).await.is_err() {
                    return;
                }
                let Some((ns, name)) = last else {
                    return;
                };
                page = match store.text_page_at(c, (&ns, &name), snapshot).await {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = send.send(Err(StoreError::from(e))).await;
                        return;
                    }
                };
            }
        });
        Ok((snapshot, receive))
    }

    /// The first page at the store's current version, and that version.
    async fn first_text_page(&self, c: Collection<'_>) -> Result<(u64, TextPage), StoreError> {
        let mut tx = self.pool().begin().await?;
        let rv: i64 = sqlx::query_scalar("SELECT rv FROM sequence WHERE id = 0")
            .fetch_one(&mut *tx)
            .await?;
        let page = text_page(&mut tx, c, ("", ""), "").await?;
        tx.commit().await?;
        Ok((to_u64(rv), page))
    }

    /// The page after `after` as it was at `snapshot`: read as one text where nothing in its
    /// range changed since (every stored object there is then at most at the snapshot), else
    /// from the rows as [`Store::list_raw_at`] reads them, joined here.
    async fn text_page_at(
        &self,
        c: Collection<'_>,
        after: (&str, &str),
        snapshot: u64,
    ) -> Result<TextPage, ReplayError> {
        let mut tx = self.pool().begin().await.map_err(StoreError::from)?;
        super::read::log_reaches(&mut tx, snapshot).await?;
        let changed = sqlx::query(CHANGED_SINCE)
            .bind(c.cluster)
            .bind(c.group)
            .bind(c.resource)
            .bind(to_i64(snapshot))
            .bind(c.namespace)
            .bind(after.0)
            .bind(after.1)
            .fetch_optional(&mut *tx)
            .await
            .map_err(StoreError::from)?
            .is_some();
        if !changed {
            let page = text_page(&mut tx, c, after, ",").await?;
            tx.commit().await.map_err(StoreError::from)?;
            return Ok(page);
        }
        tx.commit().await.map_err(StoreError::from)?;
        let rows = self
            .list_raw_at(
                c.cluster,
                c.group,
                c.resource,
                c.namespace,
                Some(after),
                PAGE,
                snapshot,
            )
            .await?;
        Ok(joined(rows, ","))
    }

    /// [`Store::stream_text`] from [`Store::stream_raw`]'s pages, joined here (the fleet view
    /// and mirrors on PostgreSQL).
    async fn stream_joined(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Result<(u64, mpsc::Receiver<Result<String, StoreError>>), StoreError> {
        let (snapshot, mut pages) = self.stream_raw(cluster, group, resource, namespace).await?;
        let (send, receive) = mpsc::channel(1);
        tokio::spawn(async move {
            let mut lead = "";
            while let Some(page) = pages.recv().await {
                let text = page.map(|items| {
                    let page = RawPage {
                        items,
                        rv: snapshot,
                        more: false,
                    };
                    joined(page, std::mem::replace(&mut lead, ",")).text
                });
                if send.send(text).await.is_err() {
                    return;
                }
            }
        });
        Ok((snapshot, receive))
    }
}

/// A page's texts joined with commas, `lead` before them.
fn joined(page: RawPage, lead: &str) -> TextPage {
    let size: usize = page.items.iter().map(|o| o.body.len() + 1).sum();
    let mut text = String::with_capacity(size + lead.len());
    for (i, o) in page.items.iter().enumerate() {
        text.push_str(if i == 0 { lead } else { "," });
        text.push_str(&o.body);
    }
    let last = page
        .items
        .last()
        .filter(|_| page.more)
        .map(|o| (o.namespace.clone(), o.name.clone()));
    TextPage { text, last }
}

/// The current page of `c` after `after`, `lead` before its first object: its text in one row,
/// then, when the page is full (more may follow), its last key.
async fn text_page(
    conn: &mut SqliteConnection,
    c: Collection<'_>,
    after: (&str, &str),
    lead: &str,
) -> Result<TextPage, StoreError> {
    let size = to_i64(PAGE as u64);
    let row = sqlx::query(PAGE_TEXT)
        .bind(c.cluster)
        .bind(c.group)
        .bind(c.resource)
        .bind(c.namespace)
        .bind(after.0)
        .bind(after.1)
        .bind(size)
        .bind(lead)
        .fetch_one(&mut *conn)
        .await?;
    let count: i64 = row.try_get(0)?;
    let text: Option<String> = row.try_get(1)?;
    let last = if count < size {
        None
    } else {
        sqlx::query_as::<_, (String, String)>(NTH_KEY)
            .bind(c.cluster)
            .bind(c.group)
            .bind(c.resource)
            .bind(c.namespace)
            .bind(after.0)
            .bind(after.1)
            .bind(size - 1)
            .fetch_optional(&mut *conn)
            .await?
    };
    Ok(TextPage {
        text: text.unwrap_or_default(),
        last,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::store::{ObjectKey, Precondition, Store, WriteOp};

    fn key(namespace: &str, name: &str) -> ObjectKey {
        ObjectKey {
            cluster: "c".into(),
            group: "".into(),
            resource: "configmaps".into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    async fn put(store: &Store, namespace: &str, name: &str) -> u64 {
        let body = json!({"metadata": {"name": name, "namespace": namespace}});
        store
            .commit(
                &key(namespace, name),
                Precondition::Absent,
                WriteOp::Put(body),
            )
            .await
            .unwrap()
            .rv
    }

    /// Stores the objects (namespace, name) of `keys`, many to a commit.
    async fn put_all(store: &Store, keys: &[(String, String)]) {
        futures::future::join_all(keys.iter().map(|(ns, name)| put(store, ns, name))).await;
    }

    /// The stream's pages as the JSON array they make, and the keys in it.
    async fn streamed(store: &Store, namespace: Option<&str>) -> (u64, Vec<(String, String)>) {
        let (rv, mut pages) = store
            .stream_text("c", "", "configmaps", namespace)
            .await
            .unwrap();
        let mut text = String::from("[");
        while let Some(page) = pages.recv().await {
            let page = page.unwrap();
            assert!(!page.is_empty());
            text.push_str(&page);
        }
        text.push(']');
        let items: Vec<Value> = serde_json::from_str(&text).unwrap();
        let keys = items
            .iter()
            .map(|o| {
                let m = &o["metadata"];
                (
                    m["namespace"].as_str().unwrap().to_owned(),
                    m["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        (rv, keys)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pages_join_into_every_object_in_key_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        assert_eq!(streamed(&store, None).await.1, vec![]);
        // Two full pages and a part, written out of key order, in two namespaces.
        let mut want: Vec<(String, String)> = (0..super::PAGE * 2 + 7)
            .rev()
            .map(|i| {
                let ns = if i % 3 == 0 { "a" } else { "b" };
                (ns.to_owned(), format!("o{i:05}"))
            })
            .collect();
        put_all(&store, &want).await;
        want.sort();
        let (rv, keys) = streamed(&store, None).await;
        assert_eq!(rv, store.current_rv().await);
        assert_eq!(keys, want);
        let in_a: Vec<_> = want.iter().filter(|(ns, _)| ns == "a").cloned().collect();
        assert_eq!(streamed(&store, Some("a")).await.1, in_a);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_page_at_the_end_ends_the_stream() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        let keys: Vec<_> = (0..super::PAGE)
            .map(|i| ("a".to_owned(), format!("o{i:05}")))
            .collect();
        put_all(&store, &keys).await;
        assert_eq!(streamed(&store, None).await.1.len(), super::PAGE);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn later_pages_are_read_at_the_first_pages_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        let keys: Vec<_> = (0..super::PAGE + 3)
            .map(|i| ("a".to_owned(), format!("o{i:05}")))
            .collect();
        put_all(&store, &keys).await;
        let (rv, mut pages) = store
            .stream_text("c", "", "configmaps", None)
            .await
            .unwrap();
        // The first page is read; the second is read after these changes.
        let first = pages.recv().await.unwrap().unwrap();
        put(&store, "a", "zz-added-later").await;
        let last = key("a", &format!("o{:05}", super::PAGE + 2));
        let (at, gone) = store.get(&last).await.unwrap().unwrap();
        store
            .commit(&last, Precondition::At(at), WriteOp::Delete(gone))
            .await
            .unwrap();
        let mut text = format!("[{first}");
        while let Some(page) = pages.recv().await {
            text.push_str(&page.unwrap());
        }
        text.push(']');
        let items: Vec<Value> = serde_json::from_str(&text).unwrap();
        assert_eq!(items.len(), super::PAGE + 3);
        assert_eq!(
            items.last().unwrap()["metadata"]["name"],
            format!("o{:05}", super::PAGE + 2)
        );
        assert!(items.iter().all(|o| {
            o["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
                <= rv
        }));
    }
}
