//! The store's vocabulary: object keys, events and errors. It imports nothing else of the
//! store, so that any of the store's modules can use it without joining an import cycle.

use std::sync::Arc;

use serde_json::Value;

/// Where an object lives. `namespace` is empty for cluster-scoped kinds; `group` is empty for the
/// core group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    /// The cluster the object belongs to.
    pub cluster: String,
    /// The API group as stored (empty: the core group).
    pub group: String,
    /// The resource (plural).
    pub resource: String,
    /// The namespace (empty: cluster-scoped).
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

#[cfg(test)]
impl ObjectKey {
    /// A Devices object's key in the cluster `up`: what the store's tests write.
    pub(super) fn device(name: &str) -> Self {
        ObjectKey {
            cluster: "up".into(),
            group: "worker.gpustack.ai".into(),
            resource: "devices".into(),
            namespace: String::new(),
            name: name.into(),
        }
    }
}

/// What a watch event says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was deleted.
    Deleted,
}

impl EventType {
    /// The event type as watches spell it (`ADDED`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }

    pub(super) fn parse(s: &str) -> Option<Self> {
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
    /// The resourceVersion the change took.
    pub rv: u64,
    /// The object changed.
    pub key: ObjectKey,
    /// What kind of change it was.
    pub kind: EventType,
    /// The object after the change (for `Deleted`, its last state), `metadata.resourceVersion`
    /// set to `rv`.
    pub body: Arc<Value>,
    /// The object before the change as stored JSON text, on live events (not on replayed
    /// ones); parsed only by watchers whose selectors need it.
    pub prev: Option<Arc<str>>,
}

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file could not be opened.
    #[error("opening the database at {path}")]
    Open {
        /// The database's path.
        path: String,
        /// Why it failed.
        #[source]
        source: sqlx::Error,
    },
    /// The schema migrations failed.
    #[error("migrating the database schema")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    /// A statement failed.
    #[error("database operation failed")]
    Database(#[from] sqlx::Error),
    /// A stored body (or one to store) is not JSON.
    #[error("stored object is not valid JSON")]
    Corrupt(#[from] serde_json::Error),
    /// A create found the key taken.
    #[error("the object already exists")]
    AlreadyExists,
    /// The object to change or delete is not stored.
    #[error("the object does not exist")]
    NotFound,
    /// The object's current resourceVersion is not the one the write was based on.
    #[error("the object has been modified (now at {current})")]
    Conflict {
        /// The object's resourceVersion now.
        current: u64,
    },
    /// The batch this change was committed with failed; nothing of it was written.
    #[error("the write batch failed")]
    Batch(#[source] Arc<StoreError>),
    /// A mirror write of an upstream whose lease this hub replica does not hold (any more):
    /// another replica mirrors it; nothing was written.
    #[error("refused: this replica does not hold the lease of upstream {upstream}{}", epoch.map(|e| format!(" at epoch {e}")).unwrap_or_default())]
    Fenced {
        /// The upstream.
        upstream: String,
        /// The epoch the write was made under, if this replica held the lease when it queued.
        epoch: Option<i64>,
    },
    /// The writer has stopped (the store was closed).
    #[error("the store is closed")]
    Closed,
    /// The object nests deeper than objects may (they must stay readable).
    #[error("the object nests {depth} levels deep; at most {max} are allowed")]
    TooDeep {
        /// How deep the object nests.
        depth: usize,
        /// The most allowed.
        max: usize,
    },
    /// A list read page by page outlived its snapshot: the event log was compacted past it.
    #[error(
        "the list's snapshot at {requested} was compacted away (now {compacted}) while it was read"
    )]
    SnapshotCompacted {
        /// The snapshot's version.
        requested: u64,
        /// The oldest version the log reaches back to now.
        compacted: u64,
    },
    /// The log has an event whose body neither it nor its object holds any longer.
    #[error("the logged event at {0} has lost its body")]
    LostEvent(u64),
    /// A health check's query took longer than it may.
    #[error("the database did not answer within {0:?}")]
    Slow(std::time::Duration),
}

impl StoreError {
    /// Whether the database is out of reach (stopped, restarting, no connection within the
    /// pool's wait) rather than anything being wrong with what was asked: the caller may try
    /// again, and the API answers 503.
    pub fn unavailable(&self) -> bool {
        match self {
            StoreError::Database(e) => unreachable(e),
            StoreError::Batch(inner) => inner.unavailable(),
            StoreError::Slow(_) | StoreError::Closed => true,
            _ => false,
        }
    }
}

/// A connection that could not be made or was lost, or the server refusing sessions
/// (PostgreSQL's classes 08, connection exception, and 57P, an operator's shutdown or a
/// server not yet accepting connections).
fn unreachable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed => true,
        sqlx::Error::Database(d) => d
            .code()
            .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")),
        _ => false,
    }
}

pub(crate) fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
