//! The hub's store: what the mirrors keep besides objects (API-made subscriptions, each
//! mirrored kind's watch progress, each upstream's last sync time), in tables of its own beside
//! the embedded API server's objects, in the same database.
//!
//! These are small bookkeeping writes made through the pool, not the object writer: they are
//! not objects and produce no watch events. The mirrored objects themselves go through the
//! object store ([`HubStore::objects`]) like every other write, so the API serves them.
//!
//! One type with its own interface, so that a second backend for the hub (PostgreSQL, past one
//! machine) can stand behind the same methods.

use gpustack_apiserver::store::{Store, StoreError};
use serde_json::Value;
use sqlx::{Row, sqlite::SqlitePool};

/// The hub's tables over the object store's database. Cheap to clone.
#[derive(Clone)]
pub struct HubStore {
    objects: Store,
}

impl HubStore {
    pub fn new(objects: Store) -> Self {
        HubStore { objects }
    }

    /// The object store the hub's tables sit beside.
    pub fn objects(&self) -> &Store {
        &self.objects
    }

    fn pool(&self) -> &SqlitePool {
        self.objects.database()
    }

    /// The stored subscriptions: (name, spec).
    pub async fn subscriptions(&self) -> Result<Vec<(String, Value)>, StoreError> {
        let rows = sqlx::query("SELECT name, spec FROM subscriptions ORDER BY name")
            .fetch_all(self.pool())
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let spec: String = row.try_get("spec")?;
            out.push((row.try_get("name")?, serde_json::from_str(&spec)?));
        }
        Ok(out)
    }

    pub async fn save_subscription(&self, name: &str, spec: &Value) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO subscriptions (name, spec, created_at) VALUES (?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET spec = excluded.spec",
        )
        .bind(name)
        .bind(spec.to_string())
        .bind(jiff::Timestamp::now().to_string())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// When the stored subscription `name` was first made (a forced re-subscribe keeps it).
    pub async fn subscribed_at(&self, name: &str) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT created_at FROM subscriptions WHERE name = ?")
                .bind(name)
                .fetch_optional(self.pool())
                .await?,
        )
    }

    /// Removes the stored subscription `name` only; whether there was one.
    pub async fn forget_subscription(&self, name: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM subscriptions WHERE name = ?")
            .bind(name)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Forgets everything kept for upstream `name` besides its objects: its subscription, its
    /// watch progress, its last sync time and its reader token.
    pub async fn forget_upstream(&self, name: &str) -> Result<(), StoreError> {
        self.objects.forget_cluster_token(name).await?;
        for query in [
            "DELETE FROM subscriptions WHERE name = ?",
            "DELETE FROM upstream_sync WHERE cluster = ?",
        ] {
            sqlx::query(query).bind(name).execute(self.pool()).await?;
        }
        sqlx::query("DELETE FROM mirror_progress WHERE cluster = ?")
            .bind(name)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// The upstream resourceVersion the watch of (`cluster`, `group`, `resource`) got to.
    pub async fn mirror_progress(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT rv FROM mirror_progress WHERE cluster = ? AND grp = ? AND resource = ?",
        )
        .bind(cluster)
        .bind(group)
        .bind(resource)
        .fetch_optional(self.pool())
        .await?)
    }

    /// Records (or, with `None`, forgets) how far the watch of a mirrored kind got.
    pub async fn set_mirror_progress(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        rv: Option<&str>,
    ) -> Result<(), StoreError> {
        let query = match rv {
            Some(_) => {
                "INSERT INTO mirror_progress (cluster, grp, resource, rv) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (cluster, grp, resource) DO UPDATE SET rv = excluded.rv"
            }
            None => "DELETE FROM mirror_progress WHERE cluster = ? AND grp = ? AND resource = ?",
        };
        let mut q = sqlx::query(query).bind(cluster).bind(group).bind(resource);
        if let Some(rv) = rv {
            q = q.bind(rv);
        }
        q.execute(self.pool()).await?;
        Ok(())
    }

    /// Every upstream's stored last sync time (RFC 3339).
    pub async fn upstream_sync_times(&self) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query("SELECT cluster, last_sync_time FROM upstream_sync")
            .fetch_all(self.pool())
            .await?;
        rows.into_iter()
            .map(|r| Ok((r.try_get("cluster")?, r.try_get("last_sync_time")?)))
            .collect()
    }

    pub async fn set_upstream_sync_time(&self, cluster: &str, at: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO upstream_sync (cluster, last_sync_time) VALUES (?, ?) \
             ON CONFLICT (cluster) DO UPDATE SET last_sync_time = excluded.last_sync_time",
        )
        .bind(cluster)
        .bind(at)
        .execute(self.pool())
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use gpustack_apiserver::store::ObjectKey;
    use serde_json::json;

    use super::*;

    fn key(cluster: &str, name: &str) -> ObjectKey {
        ObjectKey {
            cluster: cluster.into(),
            group: "worker.gpustack.ai".into(),
            resource: "devices".into(),
            namespace: String::new(),
            name: name.into(),
        }
    }

    #[tokio::test]
    async fn bookkeeping_round_trips_and_a_dropped_mirror_is_gone_from_the_fleet_too() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Store::open(&dir.path().join("db")).await.unwrap();
        let store = HubStore::new(objects.clone());
        store
            .save_subscription("east", &json!({"name": "east"}))
            .await
            .unwrap();
        assert_eq!(store.subscriptions().await.unwrap()[0].0, "east");
        let first = store.subscribed_at("east").await.unwrap().expect("a time");
        store
            .save_subscription("east", &json!({"name": "east", "again": true}))
            .await
            .unwrap();
        assert_eq!(store.subscribed_at("east").await.unwrap(), Some(first));
        assert_eq!(store.subscribed_at("west").await.unwrap(), None);
        store
            .set_mirror_progress("east", "g", "r", Some("42"))
            .await
            .unwrap();
        assert_eq!(
            store.mirror_progress("east", "g", "r").await.unwrap(),
            Some("42".into())
        );
        store
            .set_upstream_sync_time("east", "2026-01-01T00:00:00Z")
            .await
            .unwrap();
        assert_eq!(store.upstream_sync_times().await.unwrap().len(), 1);
        for c in ["east", "west"] {
            objects.join_fleet(c).await.unwrap();
            objects
                .mirror_put(&key(c, "a"), json!({"metadata": {"name": "a"}}))
                .await
                .unwrap();
        }
        assert!(
            objects
                .get(&key("_fleet", "east.a"))
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(objects.drop_mirror("east").await.unwrap(), 1);
        assert!(
            objects
                .get(&key("_fleet", "east.a"))
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            objects
                .get(&key("_fleet", "west.a"))
                .await
                .unwrap()
                .is_some()
        );
        assert!(objects.get(&key("west", "a")).await.unwrap().is_some());
        store.forget_upstream("east").await.unwrap();
        assert!(store.subscriptions().await.unwrap().is_empty());
        assert_eq!(store.mirror_progress("east", "g", "r").await.unwrap(), None);
        assert!(store.upstream_sync_times().await.unwrap().is_empty());
    }
}
