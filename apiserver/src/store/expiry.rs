//! Events expire, as in Kubernetes (`--event-ttl`): without it, an embedded cluster's event
//! records, written on every reconcile by every controller, would grow without bound.

use sqlx::Row;

use super::{ObjectKey, Store, StoreError};

impl Store {
    /// Deletes the core Events of `cluster` created before `cutoff` (watchers see each go).
    /// Returns how many went.
    pub async fn expire_events(
        &self,
        cluster: &str,
        cutoff: jiff::Timestamp,
    ) -> Result<usize, StoreError> {
        // Only the timestamps are read to decide; bodies only of what goes.
        let rows = sqlx::query(
            "SELECT namespace, name, json_extract(body, '$.metadata.creationTimestamp') AS created \
             FROM objects WHERE cluster = ? AND grp = '' AND resource = 'events'",
        )
        .bind(cluster)
        .fetch_all(self.pool())
        .await?;
        let mut doomed = Vec::new();
        for row in rows {
            let created: Option<String> = row.try_get("created")?;
            let created = created.and_then(|t| t.parse::<jiff::Timestamp>().ok());
            if created.is_none_or(|t| t >= cutoff) {
                continue;
            }
            doomed.push(ObjectKey {
                cluster: cluster.to_owned(),
                group: String::new(),
                resource: "events".into(),
                namespace: row.try_get("namespace")?,
                name: row.try_get("name")?,
            });
        }
        self.delete_keys(doomed, false).await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn events_older_than_the_cutoff_go_and_others_stay() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        let event = |cluster: &str, name: &str, created: &str| {
            let key = ObjectKey {
                cluster: cluster.into(),
                group: String::new(),
                resource: "events".into(),
                namespace: "default".into(),
                name: name.into(),
            };
            let body = json!({"metadata": {"name": name, "creationTimestamp": created}});
            (key, body)
        };
        for (c, n, t) in [
            ("demo", "old", "2026-01-01T00:00:00Z"),
            ("demo", "new", "2026-01-01T02:00:00Z"),
            ("other", "old", "2026-01-01T00:00:00Z"),
        ] {
            let (key, body) = event(c, n, t);
            store.mirror_put(&key, body).await.unwrap();
        }
        let cutoff: jiff::Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        assert_eq!(store.expire_events("demo", cutoff).await.unwrap(), 1);
        assert!(
            store
                .get(&event("demo", "old", "").0)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            store
                .get(&event("demo", "new", "").0)
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            store
                .get(&event("other", "old", "").0)
                .await
                .unwrap()
                .is_some()
        );
    }
}
