//! The PostgreSQL mirror as the store holds it: its pool, its writer's queue and what its
//! tailer has sent.

use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::{Notify, broadcast, mpsc, oneshot, watch};

use super::{
    compaction,
    fence::Fencing,
    reads::{self, Collection, Row},
    tailer::{self, Wakeup},
    writer::{self, MirrorChange, Outcome, Pending},
};
use crate::store::{
    fleet::FLEET,
    types::{ObjectKey, StoreError, StoredEvent, to_u64},
};

/// How many changes may wait for the writer before callers wait to queue theirs.
const WRITE_QUEUE: usize = 1024;

/// The mirrored objects on PostgreSQL. Its tasks end when it is dropped.
pub struct PgMirror {
    pool: PgPool,
    queue: mpsc::Sender<Pending>,
    sent: watch::Receiver<u64>,
    fencing: Option<Arc<Fencing>>,
}

impl PgMirror {
    /// Starts the writer, and the tailer feeding `fanout` with what is committed from now on.
    /// The schema must be migrated (`migrations/postgres/`). With `fencing` (several
    /// replicas), an upstream's writes are made under its lease (see [`Fencing`]).
    pub async fn start(
        pool: PgPool,
        fanout: broadcast::Sender<StoredEvent>,
        watch_epoch: watch::Sender<u64>,
        wakeup: Wakeup,
        fencing: Option<Arc<Fencing>>,
    ) -> Result<Self, StoreError> {
        let now: i64 = sqlx::query_scalar("SELECT rv FROM mirror_sequence WHERE id = 0")
            .fetch_one(&pool)
            .await?;
        let committed = Arc::new(Notify::new());
        let (queue, pending) = mpsc::channel(WRITE_QUEUE);
        let (sent_tx, sent) = watch::channel(to_u64(now));
        tokio::spawn(writer::run(
            pool.clone(),
            pending,
            committed.clone(),
            fencing.clone(),
        ));
        tokio::spawn(tailer::run(
            pool.clone(),
            to_u64(now),
            fanout,
            sent_tx,
            committed,
            wakeup,
            watch_epoch,
        ));
        Ok(PgMirror {
            pool,
            queue,
            sent,
            fencing,
        })
    }

    /// The last version this replica's watchers were sent.
    pub fn current_rv(&self) -> u64 {
        *self.sent.borrow()
    }

    /// Queues `change` for the writer; its outcome once committed. A `fenced` change of an
    /// upstream (not of the fleet view) is made under its lease where replicas lease
    /// upstreams: refused at once when this replica does not hold it.
    pub async fn queue(
        &self,
        key: &ObjectKey,
        change: MirrorChange,
        fenced: bool,
    ) -> Result<oneshot::Receiver<Outcome>, StoreError> {
        let fence = match &self.fencing {
            Some(f) if fenced && key.cluster != FLEET => Some(f.fence(&key.cluster)?),
            _ => None,
        };
        let (reply, outcome) = oneshot::channel();
        let pending = Pending {
            key: key.clone(),
            change,
            fence,
            reply,
        };
        self.queue
            .send(pending)
            .await
            .map_err(|_| StoreError::Closed)?;
        Ok(outcome)
    }

    /// The object at `key` (JSON text) and its version.
    pub async fn get(&self, key: &ObjectKey) -> Result<Option<(u64, String)>, StoreError> {
        reads::get(&self.pool, key).await
    }

    /// A page of `c`: see [`reads::page`].
    pub async fn page(
        &self,
        c: Collection<'_>,
        after: Option<(&str, &str)>,
        fetch: Option<i64>,
        snapshot: Option<u64>,
    ) -> Result<(u64, Vec<Row>), StoreError> {
        reads::page(&self.pool, c, after, fetch, snapshot).await
    }

    /// Drops every logged event but the newest `keep`: see [`compaction::compact`].
    pub async fn compact(&self, keep: u64) -> Result<u64, StoreError> {
        compaction::compact(&self.pool, keep).await
    }

    /// Logged events of `c` after `after`: see [`reads::events`].
    pub async fn events(
        &self,
        c: Collection<'_>,
        after: u64,
        limit: Option<i64>,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        reads::events(&self.pool, c, after, limit).await
    }

    /// The (namespace, name) of every stored object of one collection of `cluster`.
    pub async fn names(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        reads::names(&self.pool, cluster, group, resource).await
    }

    /// The key of every stored object of `cluster`.
    pub async fn keys(&self, cluster: &str) -> Result<Vec<ObjectKey>, StoreError> {
        reads::keys(&self.pool, cluster).await
    }

    /// How many objects one collection of `cluster` holds.
    pub async fn count(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
    ) -> Result<u64, StoreError> {
        reads::count(&self.pool, cluster, group, resource).await
    }

    /// The fleet view's members.
    pub async fn members(&self) -> Result<Vec<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT cluster FROM mirror_fleet_members ORDER BY cluster")
                .fetch_all(&self.pool)
                .await?,
        )
    }

    /// Makes `cluster` a member of the fleet view (`true`) or not.
    pub async fn set_member(&self, cluster: &str, member: bool) -> Result<(), StoreError> {
        let sql = if member {
            "INSERT INTO mirror_fleet_members (cluster) VALUES ($1) ON CONFLICT DO NOTHING"
        } else {
            "DELETE FROM mirror_fleet_members WHERE cluster = $1"
        };
        sqlx::query(sql).bind(cluster).execute(&self.pool).await?;
        Ok(())
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}
