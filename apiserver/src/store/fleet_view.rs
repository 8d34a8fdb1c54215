//! Reads of the fleet view (see [`super::fleet`]): its members' rows, renamed at read time.

use futures::future::BoxFuture;
use serde_json::Value;
use sqlx::sqlite::SqliteConnection;

use super::{
    ObjectKey, ReplayError, Store, StoreError, StoredEvent,
    fleet::{self, FLEET, fleet_body, fleet_name, fleet_text},
    read::{Collection, RawObject, Reading, cluster_rows, fetch},
};

/// The fleet view's key for a mirrored object's key.
pub fn fleet_key(key: &ObjectKey) -> ObjectKey {
    ObjectKey {
        cluster: FLEET.to_owned(),
        name: fleet_name(&key.cluster, &key.name),
        ..key.clone()
    }
}

/// The member's key a fleet view key stands for.
pub fn member_key(key: &ObjectKey) -> Option<ObjectKey> {
    let (cluster, name) = fleet::original(&key.name)?;
    Some(ObjectKey {
        cluster: cluster.to_owned(),
        name: name.to_owned(),
        ..key.clone()
    })
}

impl StoredEvent {
    /// A member's event as the fleet view's event.
    pub fn as_fleet_event(&self) -> StoredEvent {
        let cluster = self.key.cluster.as_str();
        StoredEvent {
            rv: self.rv,
            key: fleet_key(&self.key),
            kind: self.kind,
            body: std::sync::Arc::new(fleet_body(cluster, (*self.body).clone())),
            prev: self
                .prev
                .as_deref()
                .and_then(|p| fleet_text(cluster, p).ok())
                .map(|p| p.as_str().into()),
        }
    }
}

impl Store {
    /// Makes `cluster` (an upstream mirror) part of the fleet view.
    pub fn join_fleet<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if let Some(pg) = self.postgres() {
                pg.set_member(cluster, true).await?;
            } else {
                sqlx::query("INSERT OR IGNORE INTO fleet_members (cluster) VALUES (?)")
                    .bind(cluster)
                    .execute(self.pool())
                    .await?;
            }
            self.members_mut().insert(cluster.to_owned());
            Ok(())
        })
    }

    /// Takes `cluster` out of the fleet view (its name now serves an embedded cluster).
    pub async fn leave_fleet(&self, cluster: &str) -> Result<(), StoreError> {
        if let Some(pg) = self.postgres() {
            pg.set_member(cluster, false).await?;
        }
        sqlx::query("DELETE FROM fleet_members WHERE cluster = ?")
            .bind(cluster)
            .execute(self.pool())
            .await?;
        self.members_mut().remove(cluster);
        Ok(())
    }

    /// Whether `cluster`'s objects are in the fleet view.
    pub fn in_fleet(&self, cluster: &str) -> bool {
        self.members().contains(cluster)
    }

    /// A committed event as a watcher of `cluster` sees it: itself, the fleet view's form of
    /// it (`cluster` is the fleet, the event a member's), or nothing.
    pub fn seen_from<'e>(
        &self,
        cluster: &str,
        ev: &'e StoredEvent,
    ) -> Option<std::borrow::Cow<'e, StoredEvent>> {
        let key = &ev.key;
        if fleet::derived(cluster, &key.group, &key.resource) {
            return self
                .in_fleet(&key.cluster)
                .then(|| std::borrow::Cow::Owned(ev.as_fleet_event()));
        }
        (key.cluster == cluster).then_some(std::borrow::Cow::Borrowed(ev))
    }

    fn members(&self) -> std::sync::RwLockReadGuard<'_, std::collections::BTreeSet<String>> {
        self.inner
            .fleet_members
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn members_mut(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, std::collections::BTreeSet<String>> {
        self.inner
            .fleet_members
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The fleet view's object at `key` (named `CLUSTER.NAME`).
    pub(super) async fn fleet_get(
        &self,
        key: &ObjectKey,
    ) -> Result<Option<(u64, Value)>, StoreError> {
        let Some(member) = member_key(key).filter(|k| self.in_fleet(&k.cluster)) else {
            return Ok(None);
        };
        Ok(Box::pin(self.get(&member))
            .await?
            .map(|(rv, body)| (rv, fleet_body(&member.cluster, body))))
    }

    /// The rows of a page of the fleet view's collection `c`, member after member (in name
    /// order), after `after` (a fleet view position), at most `limit` + 1 (0: all).
    pub(super) async fn fleet_rows(
        &self,
        conn: &mut SqliteConnection,
        c: Collection<'_>,
        after: Option<(&str, &str)>,
        limit: usize,
        reading: Reading,
    ) -> Result<Vec<RawObject>, ReplayError> {
        let members: Vec<String> = self.members().iter().cloned().collect();
        // The position (cluster, namespace, name) to continue after.
        let from = after.and_then(|(ns, name)| fleet::original(name).map(|(c, n)| (c, ns, n)));
        let want = usize::try_from(fetch(limit)).unwrap_or(usize::MAX);
        let mut out = Vec::new();
        for member in &members {
            let after_here = match from {
                Some((cluster, _, _)) if member.as_str() < cluster => continue,
                Some((cluster, ns, name)) if member == cluster => (ns, name),
                _ => ("", ""),
            };
            let left = want - out.len();
            let fetch_here = if limit == 0 {
                -1
            } else {
                i64::try_from(left).unwrap_or(i64::MAX)
            };
            let collection = Collection {
                cluster: member,
                ..c
            };
            for row in cluster_rows(conn, collection, after_here, fetch_here, reading).await? {
                out.push(RawObject {
                    body: fleet_text(member, &row.body).map_err(StoreError::from)?,
                    name: fleet_name(member, &row.name),
                    namespace: row.namespace,
                });
            }
            if out.len() >= want {
                break;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::EventType;

    #[test]
    fn fleet_keys_and_member_keys_correspond() {
        let key = ObjectKey {
            cluster: "east".into(),
            group: "".into(),
            resource: "nodes".into(),
            namespace: "".into(),
            name: "n.x".into(),
        };
        let f = fleet_key(&key);
        assert_eq!((f.cluster.as_str(), f.name.as_str()), (FLEET, "east.n.x"));
        assert_eq!(f.resource, "nodes");
        assert_eq!(member_key(&f), Some(key));
    }

    fn key(cluster: &str, namespace: &str, name: &str) -> ObjectKey {
        ObjectKey {
            cluster: cluster.into(),
            group: "worker.gpustack.ai".into(),
            resource: "instances".into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn body(namespace: &str, name: &str, x: u32) -> Value {
        json!({"metadata": {"name": name, "namespace": namespace, "labels": {"app": "a"}},
               "spec": {"x": x}})
    }

    async fn rows(store: &Store, count: &'static str) -> i64 {
        sqlx::query_scalar(count)
            .fetch_one(store.pool())
            .await
            .unwrap()
    }

    async fn fleet_names(store: &Store, limit: usize) -> Vec<String> {
        let mut names = Vec::new();
        let mut after: Option<(String, String)> = None;
        loop {
            let at = after.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
            let page = store
                .list_raw(FLEET, "worker.gpustack.ai", "instances", None, at, limit)
                .await
                .unwrap();
            names.extend(page.items.iter().map(|o| o.name.clone()));
            let last = page
                .items
                .last()
                .map(|o| (o.namespace.clone(), o.name.clone()));
            match (page.more, last) {
                (true, Some(last)) => after = Some(last),
                _ => return names,
            }
        }
    }

    #[tokio::test]
    async fn the_fleet_view_and_its_member_share_one_stored_row_and_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        store.join_fleet("east").await.unwrap();
        let mut live = store.subscribe();
        let first = store
            .mirror_put(&key("east", "ns", "a"), body("ns", "a", 1))
            .await
            .unwrap()
            .unwrap();
        let second = store
            .mirror_put(&key("east", "ns", "a"), body("ns", "a", 2))
            .await
            .unwrap()
            .unwrap();
        // One row, one logged event per update, whichever view reads it.
        assert_eq!(rows(&store, "SELECT COUNT(*) FROM objects").await, 1);
        assert_eq!(rows(&store, "SELECT COUNT(*) FROM events").await, 2);
        let (rv, seen) = store
            .get(&key(FLEET, "ns", "east.a"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(rv, second.rv);
        assert_eq!(seen["metadata"]["name"], "east.a");
        assert_eq!(seen["metadata"]["labels"][fleet::CLUSTER_LABEL], "east");
        assert_eq!(seen["metadata"]["annotations"][fleet::ORIGINAL_NAME], "a");
        assert_eq!(seen["metadata"]["resourceVersion"], second.rv.to_string());
        assert_eq!(seen["spec"]["x"], 2);
        // Its history, replayed and live, under its fleet name and the same versions.
        let replay = store
            .events_since(FLEET, "worker.gpustack.ai", "instances", 0)
            .await
            .unwrap();
        let got: Vec<_> = replay
            .iter()
            .map(|e| {
                (
                    e.rv,
                    e.kind,
                    e.key.name.as_str(),
                    e.body["spec"]["x"].clone(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (first.rv, EventType::Added, "east.a", json!(1)),
                (second.rv, EventType::Modified, "east.a", json!(2))
            ]
        );
        let ev = live.recv().await.unwrap();
        let fleet_ev = store.seen_from(FLEET, &ev).unwrap();
        assert_eq!(
            (fleet_ev.rv, fleet_ev.key.name.as_str()),
            (first.rv, "east.a")
        );
        assert!(store.seen_from("west", &ev).is_none());
        // A cluster outside the fleet is not in it.
        store
            .mirror_put(&key("embedded", "ns", "b"), body("ns", "b", 1))
            .await
            .unwrap();
        assert_eq!(fleet_names(&store, 0).await, ["east.a"]);
        assert!(
            store
                .get(&key(FLEET, "ns", "embedded.b"))
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn fleet_pages_run_across_members_and_keep_their_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        let mut want = Vec::new();
        for c in ["a-b", "a", "c"] {
            store.join_fleet(c).await.unwrap();
            for (ns, n) in [("x", "1"), ("y", "2"), ("x", "3")] {
                store
                    .mirror_put(&key(c, ns, n), body(ns, n, 1))
                    .await
                    .unwrap();
            }
        }
        for c in ["a", "a-b", "c"] {
            for (ns, n) in [("x", "1"), ("x", "3"), ("y", "2")] {
                want.push((ns.to_owned(), format!("{c}.{n}")));
            }
        }
        let names: Vec<_> = want.iter().map(|(_, n)| n.clone()).collect();
        for limit in [0, 1, 2, 4, 100] {
            assert_eq!(fleet_names(&store, limit).await, names, "limit {limit}");
        }
        // A second page at the first page's snapshot does not see later changes.
        let first = store
            .list_raw(FLEET, "worker.gpustack.ai", "instances", None, None, 4)
            .await
            .unwrap();
        store.mirror_delete(&key("c", "x", "1")).await.unwrap();
        store
            .mirror_put(&key("c", "z", "9"), body("z", "9", 1))
            .await
            .unwrap();
        let last = first.items.last().unwrap();
        let rest = store
            .list_raw_at(
                FLEET,
                "worker.gpustack.ai",
                "instances",
                None,
                Some((&last.namespace, &last.name)),
                0,
                first.rv,
            )
            .await
            .unwrap();
        let got: Vec<_> = first
            .items
            .iter()
            .chain(&rest.items)
            .map(|o| (o.namespace.clone(), o.name.clone()))
            .collect();
        assert_eq!(got, want);
        let seen: Value = serde_json::from_str(&rest.items.last().unwrap().body).unwrap();
        assert_eq!(seen["metadata"]["labels"][fleet::CLUSTER_LABEL], "c");
    }
}
