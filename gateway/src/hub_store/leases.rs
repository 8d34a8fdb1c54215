//! Per-upstream leases in PostgreSQL (`mirror_leases`), for hub replicas sharing one database:
//! the statements that take, renew and give back a lease. Every expiry is computed and
//! compared with the database's clock (`clock_timestamp()`), never a replica's. When to call
//! them is [`crate::mirror::lease`]'s to decide.

use std::{sync::Arc, time::Duration};

use gpustack_apiserver::store::{Fencing, StoreError};
use prometheus::{IntGaugeVec, Opts};
use sqlx::postgres::PgPool;

/// A lease that is free, expired, or this replica's own is taken: the epoch counts take-overs
/// (the fencing token). A replica asks for a lease it holds only once the mirror under it has
/// stopped (restarted by a forced or changed subscription, or given up): it mirrors again at
/// once rather than a lease time later, and the new epoch fences whatever the stopped mirror
/// left queued. Returns the new epoch when taken.
const TAKE: &str = "\
    INSERT INTO mirror_leases (upstream, holder, epoch, expires_at) \
    VALUES ($1, $2, 1, clock_timestamp() + make_interval(secs => $3)) \
    ON CONFLICT (upstream) DO UPDATE \
      SET holder = excluded.holder, epoch = mirror_leases.epoch + 1, \
          expires_at = excluded.expires_at \
    WHERE mirror_leases.expires_at <= clock_timestamp() \
       OR mirror_leases.holder = excluded.holder \
    RETURNING epoch";

/// Moves the expiry on, only while the lease is still this replica's at its epoch and has not
/// expired.
const RENEW: &str = "\
    UPDATE mirror_leases SET expires_at = clock_timestamp() + make_interval(secs => $4) \
    WHERE upstream = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp()";

/// Every lease of `$1` expires now (a replica stopping).
const GIVE_BACK_ALL: &str =
    "UPDATE mirror_leases SET expires_at = clock_timestamp() WHERE holder = $1";

/// An unsubscribed upstream's lease: held by no replica and never expiring, so that no
/// replica mirrors it while its objects are removed (a batch that already holds the lease row
/// commits first; any later one is refused) nor after, until it is subscribed again.
const RETIRE: &str = "\
    INSERT INTO mirror_leases (upstream, holder, epoch, expires_at) \
    VALUES ($1, '', 1, 'infinity') \
    ON CONFLICT (upstream) DO UPDATE \
      SET holder = '', epoch = mirror_leases.epoch + 1, expires_at = 'infinity'";

/// A retired lease made free again (expired: the next take moves the epoch on).
const REOPEN: &str =
    "UPDATE mirror_leases SET expires_at = clock_timestamp() WHERE upstream = $1 AND holder = ''";

/// This replica's leases: its id, the lease time, the fencing of its writes, and the gauge
/// that tells which upstreams it mirrors. Cheap to clone.
#[derive(Clone)]
pub struct Leasing {
    pool: PgPool,
    lease: Duration,
    fencing: Arc<Fencing>,
    held: IntGaugeVec,
}

impl Leasing {
    /// Leases on `pool`'s database for replica `replica`, each lasting `lease`.
    pub fn new(pool: PgPool, replica: String, lease: Duration) -> Result<Self, prometheus::Error> {
        let held = IntGaugeVec::new(
            Opts::new(
                "gpustack_gateway_mirror_lease_held",
                "1 where this hub replica holds the upstream's lease (it mirrors it), else 0.",
            ),
            &["cluster"],
        )?;
        Ok(Leasing {
            pool,
            lease,
            fencing: Arc::new(Fencing::new(replica)?),
            held,
        })
    }

    /// This replica's id.
    pub fn replica(&self) -> &str {
        self.fencing.replica()
    }

    /// How long a lease lasts unless renewed.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The fencing of this replica's mirror writes.
    pub fn fencing(&self) -> &Arc<Fencing> {
        &self.fencing
    }

    /// The gauge of held leases, by upstream (label `cluster`).
    pub fn held_gauge(&self) -> &IntGaugeVec {
        &self.held
    }

    /// The lease time in seconds, as the statements add it to the database's clock.
    fn lease_secs(&self) -> f64 {
        self.lease.as_secs_f64()
    }

    /// Takes `upstream`'s lease if it is free or expired: its new epoch, `None` while another
    /// replica holds it.
    pub async fn take(&self, upstream: &str) -> Result<Option<i64>, StoreError> {
        Ok(sqlx::query_scalar(TAKE)
            .bind(upstream)
            .bind(self.replica())
            .bind(self.lease_secs())
            .fetch_optional(&self.pool)
            .await?)
    }

    /// Renews `upstream`'s lease held at `epoch`: `false` when it is no longer this replica's
    /// (expired, or taken over).
    pub async fn renew(&self, upstream: &str, epoch: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(RENEW)
            .bind(upstream)
            .bind(self.replica())
            .bind(epoch)
            .bind(self.lease_secs())
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Retires `upstream`'s lease (it is unsubscribed): once this returns, no replica writes
    /// its mirror any more, until [`Leasing::reopen`].
    pub async fn retire(&self, upstream: &str) -> Result<(), StoreError> {
        sqlx::query(RETIRE)
            .bind(upstream)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Frees `upstream`'s lease if it was retired (it is subscribed again).
    pub async fn reopen(&self, upstream: &str) -> Result<(), StoreError> {
        sqlx::query(REOPEN)
            .bind(upstream)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Gives every lease this replica holds back (it is stopping, its mirrors stopped).
    pub async fn give_back_all(&self) -> Result<(), StoreError> {
        sqlx::query(GIVE_BACK_ALL)
            .bind(self.replica())
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

/// A replica id: the host's name (a Pod's name in Kubernetes), the process id, and a random
/// part, so a restarted replica never passes for the one before it.
pub fn new_replica_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| "hub".to_owned());
    // std's hasher keys are random per process: a random part without another dependency.
    let random =
        std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u8);
    format!("{host}-{}-{:08x}", std::process::id(), random >> 32)
}
