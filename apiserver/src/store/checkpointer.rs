//! Checkpoints the WAL beside the writer rather than inside it. SQLite's automatic checkpoint
//! runs in the connection that commits, right after the commit: the writer then copies pages
//! into the database file and waits for its fsync before it can take the next batch, and in a
//! burst that is a large share of its time. Here a pooled connection copies the committed pages
//! while the writer goes on; only the last few pages are copied with the writer held, so that
//! the checkpoint completes and the writer starts the WAL over (it stays bounded).

use std::{sync::Arc, time::Duration};

use sqlx::SqlitePool;
use tokio::sync::{Mutex, mpsc};

/// The least time between two checkpoints: a burst's pages are copied in runs of a few MB
/// (an attempt to start the WAL over each time), not a few pages at a time.
const PAUSE: Duration = Duration::from_millis(50);

/// WAL size, in pages, past which a round ends with the writer held so the WAL starts over:
/// SQLite's own automatic checkpoint threshold.
const RESTART_PAGES: i64 = 1000;

/// Runs until the writer is gone (`commits` closed): after commits, a checkpoint at most every
/// [`PAUSE`]. A notice that arrives meanwhile is kept, so the last commit is checkpointed too.
pub(super) async fn run(
    pool: SqlitePool,
    writer: Arc<Mutex<u64>>,
    mut commits: mpsc::Receiver<()>,
) {
    while commits.recv().await.is_some() {
        if let Err(e) = round(&pool, &writer).await {
            // The next round copies what this one left; a closed pool ends with the writer.
            tracing::debug!(error = %e, "checkpointing the WAL failed");
        }
        tokio::time::sleep(PAUSE).await;
    }
}

/// One checkpoint: the bulk without holding the writer, then, if the WAL has grown large, the
/// rest with it held (no commit in between), so the next batch writes the WAL from its start.
async fn round(pool: &SqlitePool, writer: &Mutex<u64>) -> Result<(), sqlx::Error> {
    let pages = checkpoint(pool).await?;
    if pages >= RESTART_PAGES {
        let _held = writer.lock().await;
        checkpoint(pool).await?;
    }
    Ok(())
}

/// A passive checkpoint (it never waits for readers or the writer); returns the WAL's size in
/// pages.
async fn checkpoint(pool: &SqlitePool) -> Result<i64, sqlx::Error> {
    let (_busy, wal_pages, _copied): (i64, i64, i64) =
        sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(pool)
            .await?;
    Ok(wal_pages)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::store::{ObjectKey, Store};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_starts_over_while_writes_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = Store::open(&path).await.unwrap();
        let wal = dir.path().join("db-wal");
        let pad = "x".repeat(8 << 10);
        // 48 MB of bodies, written 64 at a time: without checkpoints beside the writer (its
        // own are off) the WAL would hold them all.
        let mut largest = 0;
        for round in 0..96 {
            let writes = (0..64).map(|i| {
                let key = ObjectKey::device(&format!("node-{round}-{i}"));
                let body = json!({"metadata": {"name": key.name}, "spec": {"pad": pad}});
                let store = store.clone();
                async move { store.mirror_put(&key, body).await.unwrap() }
            });
            futures::future::join_all(writes).await;
            largest = largest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
        }
        assert!(
            largest < 24 << 20,
            "the WAL grew to {largest} bytes for 48 MB written"
        );
    }
}
