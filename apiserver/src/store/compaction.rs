//! Keeping the database's size bounded: the event log trimmed to a number of events and of
//! bytes, and the space that frees (and that mass deletions free) given back to the file
//! system, with the WAL truncated after checkpoints.

use futures::TryStreamExt;

use super::{Store, StoreError, to_i64, to_u64};

/// What the migration's triggers count per event besides its body (its key, type and
/// version, roughly), in `sequence.event_bytes`.
const EVENT_ROW_BYTES: u64 = 64;

/// One [`Store::reclaim`] step: it gives back at most 16,384 free pages (4 KB each), so a mass
/// deletion's space returns over a few rounds without holding the writer for long.
const VACUUM_STEP: &str = "PRAGMA incremental_vacuum(16384)";

/// The size on disk of the database at `path` with its WAL, in bytes.
pub fn files_bytes(path: &std::path::Path) -> u64 {
    ["", "-wal"]
        .iter()
        .filter_map(|suffix| {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            std::fs::metadata(name).ok()
        })
        .map(|m| m.len())
        .sum()
}

impl Store {
    /// Drops events so that at most `keep` of the newest remain; watches from versions older
    /// than the oldest kept one then get 410 Gone. Returns the new compacted version.
    pub async fn compact(&self, keep: u64) -> Result<u64, StoreError> {
        self.compact_within(keep, u64::MAX).await
    }

    /// [`Store::compact`], also dropping the oldest events until the log holds at most
    /// `max_bytes` (bodies it holds itself, plus a fixed amount per event). A mirror on
    /// PostgreSQL has its log there trimmed to its newest `keep` events too.
    pub async fn compact_within(&self, keep: u64, max_bytes: u64) -> Result<u64, StoreError> {
        let last_rv = self.inner.writer.lock().await;
        let mut compacted = last_rv.saturating_sub(keep);
        let mut tx = self.pool().begin().await?;
        let total: i64 = sqlx::query_scalar("SELECT event_bytes FROM sequence WHERE id = 0")
            .fetch_one(&mut *tx)
            .await?;
        let total = to_u64(total);
        if total > max_bytes {
            // Only the oldest events are read, as many as must go.
            let mut sizes = sqlx::query_as::<_, (i64, i64)>(
                "SELECT rv, COALESCE(length(CAST(body AS BLOB)), 0) FROM events ORDER BY rv",
            )
            .fetch(&mut *tx);
            // The newest version to drop so that what follows it fits.
            let mut excess = total - max_bytes;
            while let Some((rv, bytes)) = sizes.try_next().await? {
                let bytes = to_u64(bytes) + EVENT_ROW_BYTES;
                compacted = compacted.max(to_u64(rv));
                if bytes >= excess {
                    break;
                }
                excess -= bytes;
            }
            drop(sizes);
        }
        sqlx::query("DELETE FROM events WHERE rv <= ?")
            .bind(to_i64(compacted))
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE sequence SET compacted_rv = MAX(compacted_rv, ?) WHERE id = 0")
            .bind(to_i64(compacted))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        drop(last_rv);
        if let Some(pg) = self.postgres() {
            pg.compact(keep).await?;
        }
        Ok(compacted)
    }

    /// Gives free pages back to the file system (a bounded step of incremental vacuum) and
    /// truncates the WAL after checkpointing it, so neither grows past what the data needs.
    /// Returns how many free pages remain.
    pub async fn reclaim(&self) -> Result<u64, StoreError> {
        // Held so that no batch is committing meanwhile: the checkpoint then completes.
        let _writer = self.inner.writer.lock().await;
        let mut conn = self.pool().acquire().await?;
        sqlx::query(VACUUM_STEP).execute(&mut *conn).await?;
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&mut *conn)
            .await?;
        let free: i64 = sqlx::query_scalar("PRAGMA freelist_count")
            .fetch_one(&mut *conn)
            .await?;
        Ok(to_u64(free))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::ObjectKey;

    async fn fill(store: &Store, cluster: &str, n: usize) {
        let writes = (0..n).map(|i| {
            let key = ObjectKey {
                cluster: cluster.into(),
                group: "worker.gpustack.ai".into(),
                resource: "devices".into(),
                namespace: String::new(),
                name: format!("node-{i}"),
            };
            let body =
                json!({"metadata": {"name": key.name}, "spec": {"pad": "x".repeat(2000), "i": i}});
            async move { store.mirror_put(&key, body).await.unwrap() }
        });
        futures::future::join_all(writes).await;
    }

    async fn reclaim_all(store: &Store) {
        for _ in 0..64 {
            if store.reclaim().await.unwrap() == 0 {
                return;
            }
        }
        panic!("free pages remain after 64 rounds");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unsubscribed_cluster_gives_its_space_back() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let store = Store::open(&db).await.unwrap();
        store.join_fleet("big").await.unwrap();
        store.join_fleet("small").await.unwrap();
        fill(&store, "small", 100).await;
        let bound = 1 << 20;
        store.compact_within(100_000, bound).await.unwrap();
        reclaim_all(&store).await;
        let small = files_bytes(&db);
        fill(&store, "big", 5_000).await;
        store.compact_within(100_000, bound).await.unwrap();
        reclaim_all(&store).await;
        let full = files_bytes(&db);
        // ~2 KB objects, stored once each (the log refers to them).
        assert!(full - small < 5_000 * 3 * 2_000, "{small} -> {full} bytes");

        assert_eq!(store.drop_mirror("big").await.unwrap(), 5_000);
        // The DELETED events hold the bodies now; the byte bound drops them.
        store.compact_within(100_000, bound).await.unwrap();
        let left: i64 = sqlx::query_scalar("SELECT event_bytes FROM sequence")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert!(to_u64(left) <= bound, "{left} bytes of events");
        reclaim_all(&store).await;
        let after = files_bytes(&db);
        assert!(
            after < small + (full - small) / 4,
            "{small} -> {full} -> {after} bytes"
        );
        // The rest is still served.
        assert_eq!(
            store
                .count("small", "worker.gpustack.ai", "devices")
                .await
                .unwrap(),
            100
        );
    }

    #[tokio::test]
    async fn the_byte_bound_drops_the_oldest_events_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).await.unwrap();
        let key = |n: &str| ObjectKey {
            cluster: "c".into(),
            group: String::new(),
            resource: "configmaps".into(),
            namespace: "ns".into(),
            name: n.into(),
        };
        // Ten versions of one object: nine superseded ones hold their ~1 KB bodies.
        for i in 0..10 {
            let body =
                json!({"metadata": {"name": "a"}, "data": {"i": i, "pad": "x".repeat(1000)}});
            store.mirror_put(&key("a"), body).await.unwrap();
        }
        let compacted = store.compact_within(1_000, 3_700).await.unwrap();
        let kept = store
            .events_since("c", "", "configmaps", compacted)
            .await
            .unwrap();
        // The newest refers to the object; three superseded bodies fit beside it.
        assert_eq!(kept.len(), 4, "compacted to {compacted}");
        for (ev, i) in kept.iter().zip(6..) {
            assert_eq!(ev.body["data"]["i"], i);
            assert_eq!(ev.body["metadata"]["resourceVersion"], ev.rv.to_string());
        }
        assert!(matches!(
            store
                .events_since("c", "", "configmaps", compacted - 1)
                .await,
            Err(crate::store::ReplayError::Expired { .. })
        ));
    }
}
