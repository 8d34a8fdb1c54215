//! The SQLite store behind embedded clusters: current objects, the event log that watches resume
//! from, a cluster-wide monotonic resourceVersion, and the in-process fan-out of committed changes.
//!
//! The store knows keys, versions and JSON bodies; Kubernetes semantics (generation, finalizers,
//! status) live in [`crate::api`]. A write returns only after its transaction committed with
//! `synchronous=FULL`, so an acknowledged write survives a crash.

mod clusters;
mod collection_queue;
pub mod compaction;
mod credentials;
mod expiry;
pub mod fleet;
mod fleet_view;
pub use clusters::token_hash;
pub mod mirror;
mod read;
mod subscriptions;
pub mod tokens;
mod write;

use std::{path::Path, sync::Arc, time::Duration};

use serde_json::Value;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tokio::sync::{Mutex, broadcast, mpsc, watch};

pub use read::{ListPage, RawObject, RawPage, ReplayError};
pub use write::{Precondition, WriteOp};

/// Where an object lives. `namespace` is empty for cluster-scoped kinds; `group` is empty for the
/// core group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    pub cluster: String,
    pub group: String,
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

/// What a watch event says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "ADDED" => Some(EventType::Added),
            "MODIFIED" => Some(EventType::Modified),
            "DELETED" => Some(EventType::Deleted),
            _ => None,
        }
    }
}

/// One committed change, as fanned out to watchers and kept in the event log.
#[derive(Clone, Debug)]
pub struct StoredEvent {
    pub rv: u64,
    pub key: ObjectKey,
    pub kind: EventType,
    /// The object after the change (for `Deleted`, its last state), `metadata.resourceVersion`
    /// set to `rv`.
    pub body: Arc<Value>,
    /// The object before the change as stored JSON text, on live events (not on replayed
    /// ones); parsed only by watchers whose selectors need it.
    pub prev: Option<Arc<str>>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("opening the database at {path}")]
    Open {
        path: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("migrating the database schema")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    #[error("database operation failed")]
    Database(#[from] sqlx::Error),
    #[error("stored object is not valid JSON")]
    Corrupt(#[from] serde_json::Error),
    #[error("the object already exists")]
    AlreadyExists,
    #[error("the object does not exist")]
    NotFound,
    /// The object's current resourceVersion is not the one the write was based on.
    #[error("the object has been modified (now at {current})")]
    Conflict { current: u64 },
    /// The batch this change was committed with failed; nothing of it was written.
    #[error("the write batch failed")]
    Batch(#[source] Arc<StoreError>),
    #[error("the store is closed")]
    Closed,
    /// The object nests deeper than objects may (they must stay readable).
    #[error("the object nests {depth} levels deep; at most {max} are allowed")]
    TooDeep { depth: usize, max: usize },
    /// A list read page by page outlived its snapshot: the event log was compacted past it.
    #[error(
        "the list's snapshot at {requested} was compacted away (now {compacted}) while it was read"
    )]
    SnapshotCompacted { requested: u64, compacted: u64 },
    /// The log has an event whose body neither it nor its object holds any longer.
    #[error("the logged event at {0} has lost its body")]
    LostEvent(u64),
    /// A health check's query took longer than it may.
    #[error("the database did not answer within {0:?}")]
    Slow(std::time::Duration),
}

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

/// Each pooled (reading) connection's page cache, in KiB.
const READER_CACHE_KIB: u32 = 512;

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
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
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
        sqlx::migrate!("../migrations")
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
        let writer_conn = sqlx::ConnectOptions::connect(&options)
            .await
            .map_err(|source| StoreError::Open {
                path: display,
                source,
            })?;
        tokio::spawn(write::run_writer(
            writer_conn,
            writer.clone(),
            fanout.clone(),
            pending,
        ));
        Ok(Store {
            inner: Arc::new(Inner {
                pool,
                writer,
                queue,
                fanout,
                watch_epoch,
                fleet_members: std::sync::RwLock::new(members.into_iter().collect()),
            }),
        })
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
    pub async fn close(&self) {
        let _writer = self.inner.writer.lock().await;
        self.inner.pool.close().await;
    }

    /// Whether the database answers a query within `within` (for `/readyz`).
    pub async fn ping(&self, within: std::time::Duration) -> Result<(), StoreError> {
        let query = sqlx::query("SELECT 1").fetch_one(self.pool());
        match tokio::time::timeout(within, query).await {
            Ok(r) => r.map(|_| ()).map_err(StoreError::from),
            Err(_) => Err(StoreError::Slow(within)),
        }
    }

    fn pool(&self) -> &SqlitePool {
        &self.inner.pool
    }
}

pub(crate) fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

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
