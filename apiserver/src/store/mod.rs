//! The SQLite store behind embedded clusters and mirrors: current objects, the event log that
//! watches resume from, a cluster-wide monotonic resourceVersion, and the in-process fan-out of
//! committed changes. The hub keeps its own tables in the same database (`gpustack-gateway`'s
//! hub store, over [`Store::database`]).
//!
//! The store knows keys, versions and JSON bodies; Kubernetes semantics (generation, finalizers,
//! status) live in [`crate::api`]. A write returns only after its transaction committed with
//! `synchronous=FULL`, so an acknowledged write survives a crash.
//!
//! The methods the hub awaits (opening, closing, its mirrors' writes and reads) return futures
//! boxed here: rustc compiles an async body in the crate that polls it, and the hub's crate
//! compiled the writer, the PostgreSQL mirror and sqlx's queries again for itself.

mod body;
mod checkpointer;
mod clusters;
mod collection_queue;
pub mod commit_metrics;
pub mod compaction;
mod credentials;
mod expiry;
pub mod fleet;
mod fleet_view;
pub mod migrations;
mod on_postgres;
mod pg_mirror;
pub use clusters::token_hash;
pub mod mirror;
mod read;
mod spliced;
pub mod tokens;
mod types;
mod upsert_batch;
mod write;

use std::{path::Path, sync::Arc, time::Duration};

use futures::future::BoxFuture;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tokio::sync::{Mutex, broadcast, mpsc, watch};

pub use pg_mirror::Fencing;
pub use read::{ListPage, RawObject, RawPage, ReplayError};
pub use types::{EventType, ObjectKey, StoreError, StoredEvent};
pub(crate) use types::{to_i64, to_u64};
pub use write::{Precondition, Queued, WriteOp};

/// The size the WAL is truncated to after a checkpoint.
const WAL_LIMIT_BYTES: u64 = 64 << 20;

/// Switches the database to incremental vacuum (free pages can then be given back, see
/// [`Store::reclaim`]), rebuilding it once if it was made without: the mode can only change
/// with a VACUUM.
async fn incremental_vacuum(pool: &SqlitePool) -> Result<(), StoreError> {
    const INCREMENTAL: i64 = 2;
    let mode: i64 = sqlx::query_scalar("PRAGMA auto_vacuum")
        .fetch_one(pool)
        .await?;
    if mode != INCREMENTAL {
        let mut conn = pool.acquire().await?;
        sqlx::query("PRAGMA auto_vacuum = INCREMENTAL")
            .execute(&mut *conn)
            .await?;
        sqlx::query("VACUUM").execute(&mut *conn).await?;
    }
    Ok(())
}

/// How many changes may wait for the writer before callers wait to queue theirs.
const WRITE_QUEUE: usize = 1024;

/// How many committed events a slow watcher may lag behind before its watch is ended (it then
/// resumes from the event log).
const FANOUT_CAPACITY: usize = 1024;

/// Each pooled (reading) connection's page cache, in KiB. Reads mostly stream rows once (the
/// OS keeps the file's pages anyway). With 512 KiB the readers' pages were 5 MB of a hub's
/// peak heap through a sync of 50,000 mirrored objects, with 128 KiB 2 MB (heaptrack, issue
/// 17's mirror bench); that still holds the upper levels of the indexes a lookup walks.
const READER_CACHE_KIB: u32 = 128;

/// The store. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    pool: SqlitePool,
    /// Held by the writer while it applies a batch (and by compaction); the last
    /// resourceVersion handed out.
    writer: Arc<Mutex<u64>>,
    /// Changes waiting for the writer task.
    queue: mpsc::Sender<write::Pending>,
    fanout: broadcast::Sender<StoredEvent>,
    /// Bumped to end every open watch (shutdown, tests standing in for a restart).
    watch_epoch: watch::Sender<u64>,
    /// The clusters the fleet view is made of (see [`fleet`]), as stored in `fleet_members`.
    fleet_members: std::sync::RwLock<std::collections::BTreeSet<String>>,
    /// The writer's batches, measured.
    commits: commit_metrics::CommitMetrics,
    /// Where the hub's mirrored objects are kept instead, when on PostgreSQL (see
    /// [`Store::mirror_on_postgres`]).
    postgres: std::sync::OnceLock<pg_mirror::PgMirror>,
}

/// Creates `path` readable by its owner only, or narrows an existing one to that: the store
/// holds Secrets and subscription tokens. SQLite gives its `-wal` and `-shm` files the
/// database file's mode.
fn private_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
}

impl Store {
    /// Opens (creating if needed) the database file at `path` in WAL mode and applies migrations.
    pub fn open<'a>(path: &'a Path) -> BoxFuture<'a, Result<Self, StoreError>> {
        Box::pin(async move {
            let display = path.display().to_string();
            private_file(path).map_err(|source| StoreError::Open {
                path: display.clone(),
                source: sqlx::Error::Io(source),
            })?;
            // The path as a file name, never through a `sqlite://` URL: a data directory with `?`,
            // `#` or `%` in its name would otherwise be read as URL syntax (another file, or options).
            let options = SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(true)
                // After a checkpoint the WAL is cut back to this size, whatever a burst grew it to.
                .pragma("journal_size_limit", WAL_LIMIT_BYTES.to_string());
            // Readers mostly stream long runs of rows that the OS page cache holds anyway: a small
            // cache each keeps eight of them from holding 2 MiB apiece (SQLite's default) after a
            // large list. The writer keeps the default: its batches revisit the same index pages.
            let readers = options
                .clone()
                .pragma("cache_size", format!("-{READER_CACHE_KIB}"));
            let pool = SqlitePoolOptions::new()
                .max_connections(8)
                // A ping before each acquire is a round trip to the connection's worker thread on
                // every read and every write batch; a local file's connection does not go stale.
                .test_before_acquire(false)
                .connect_with(readers)
                .await
                .map_err(|source| StoreError::Open {
                    path: display.clone(),
                    source,
                })?;
            migrations::sqlite()
                .run(&pool)
                .await
                .map_err(StoreError::Migrate)?;
            incremental_vacuum(&pool).await?;
            let rv: i64 = sqlx::query_scalar("SELECT rv FROM sequence WHERE id = 0")
                .fetch_one(&pool)
                .await?;
            let members: Vec<String> = sqlx::query_scalar("SELECT cluster FROM fleet_members")
                .fetch_all(&pool)
                .await?;
            let (fanout, _) = broadcast::channel(FANOUT_CAPACITY);
            let (watch_epoch, _) = watch::channel(0);
            let writer = Arc::new(Mutex::new(rv as u64));
            let (queue, pending) = mpsc::channel(WRITE_QUEUE);
            // The writer keeps a connection of its own: as the only writer, its page cache stays
            // valid from batch to batch, where a pooled one (a different one each time) would first
            // re-read what the previous batches changed.
            // Its commits leave checkpoints to the checkpointer (see [`checkpointer`]). A statement
            // that writes many rows keeps the pages it changed until it completes (so that it can
            // be undone alone): in memory, not in a temporary file written for every batch.
            let writer_options = options
                .pragma("wal_autocheckpoint", "0")
                .pragma("temp_store", "MEMORY");
            let writer_conn = sqlx::ConnectOptions::connect(&writer_options)
                .await
                .map_err(|source| StoreError::Open {
                    path: display,
                    source,
                })?;
            let (commits, committed) = mpsc::channel(1);
            let commit_metrics = commit_metrics::CommitMetrics::new();
            tokio::spawn(checkpointer::run(pool.clone(), writer.clone(), committed));
            tokio::spawn(write::run_writer(
                writer_conn,
                writer.clone(),
                fanout.clone(),
                pending,
                commits,
                commit_metrics.clone(),
            ));
            Ok(Store {
                inner: Arc::new(Inner {
                    pool,
                    writer,
                    queue,
                    fanout,
                    watch_epoch,
                    fleet_members: std::sync::RwLock::new(members.into_iter().collect()),
                    commits: commit_metrics,
                    postgres: std::sync::OnceLock::new(),
                }),
            })
        })
    }

    /// The writer's commit series, for the server to register.
    pub fn commit_metrics(&self) -> &commit_metrics::CommitMetrics {
        &self.inner.commits
    }

    /// Receives every event committed from now on, in resourceVersion order.
    pub fn subscribe(&self) -> broadcast::Receiver<StoredEvent> {
        self.inner.fanout.subscribe()
    }

    /// Changes whenever open watches must end.
    pub fn watch_epoch(&self) -> watch::Receiver<u64> {
        self.inner.watch_epoch.subscribe()
    }

    /// Ends every open watch; clients resume from their last resourceVersion.
    pub fn end_watches(&self) {
        self.inner.watch_epoch.send_modify(|e| *e += 1);
    }

    /// Waits for in-flight writes, then closes the database (checkpointing the WAL).
    pub fn close<'a>(&'a self) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let _writer = self.inner.writer.lock().await;
            self.inner.pool.close().await;
        })
    }

    /// Whether the database answers a query within `within` (for `/readyz`).
    pub fn ping<'a>(
        &'a self,
        within: std::time::Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let query = async {
                sqlx::query("SELECT 1").fetch_one(self.pool()).await?;
                if let Some(pg) = self.postgres() {
                    pg.ping().await?;
                }
                Ok::<_, StoreError>(())
            };
            match tokio::time::timeout(within, query).await {
                Ok(r) => r,
                Err(_) => Err(StoreError::Slow(within)),
            }
        })
    }

    fn pool(&self) -> &SqlitePool {
        &self.inner.pool
    }

    /// The database, for a store that keeps tables of its own beside the objects (the hub's
    /// bookkeeping); objects are written only through [`Store::commit`] and the mirror writes.
    pub fn database(&self) -> &SqlitePool {
        self.pool()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_database_of_a_newer_schema_is_refused_and_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.db");
        Store::open(&path).await.unwrap().close().await;
        // What a newer binary's migration leaves behind.
        let pool = SqlitePool::connect_with(SqliteConnectOptions::new().filename(&path))
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES (29991231000000, 'from a newer binary', true, x'00', 1)",
        )
        .execute(&pool)
        .await
        .unwrap();
        let applied = "SELECT count(*) FROM _sqlx_migrations";
        let before: i64 = sqlx::query_scalar(applied).fetch_one(&pool).await.unwrap();
        let refused = Store::open(&path).await;
        assert!(
            matches!(
                refused,
                Err(StoreError::Migrate(
                    sqlx::migrate::MigrateError::VersionMissing(29991231000000)
                ))
            ),
            "{:?}",
            refused.err()
        );
        let after: i64 = sqlx::query_scalar(applied).fetch_one(&pool).await.unwrap();
        assert_eq!(after, before, "nothing applied, nothing undone");
    }

    #[tokio::test]
    async fn a_data_directory_with_url_syntax_in_its_name_is_just_a_path() {
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join("data?mode=ro#frag%20x");
        std::fs::create_dir(&odd).unwrap();
        let path = odd.join("gateway.db");
        let store = Store::open(&path).await.unwrap();
        store.close().await;
        // The database is the file named, created where it was asked for and nowhere else.
        assert!(path.is_file());
        let made: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(made, [std::ffi::OsString::from("data?mode=ro#frag%20x")]);
    }
}
