//! The store with the hub's mirrored objects on PostgreSQL ([`pg_mirror`]): which collections
//! are read there, and their pages in the store's own shapes. Once attached, every mirror
//! write goes to PostgreSQL, and every read of the fleet view or of a fleet member's cluster
//! is answered from it; whatever else the store holds stays in SQLite.

use futures::future::BoxFuture;

use super::{
    RawObject, RawPage, Store, StoreError,
    fleet::FLEET,
    pg_mirror::{Collection, Fencing, PgMirror, Wakeup},
};

impl Store {
    /// Keeps the mirrored objects, their event log and the fleet view's members in the
    /// PostgreSQL database behind `pool` (its schema migrated) from now on; this replica's
    /// watchers are sent what any replica commits there. Called once, before mirroring.
    /// With `fencing` (several replicas sharing the database), each upstream's mirror writes
    /// only while this replica holds that upstream's lease.
    pub fn mirror_on_postgres<'a>(
        &'a self,
        pool: sqlx::PgPool,
        fencing: Option<std::sync::Arc<Fencing>>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.mirror_on_postgres_waking(pool, Wakeup::Listen, fencing)
                .await
        })
    }

    /// [`Store::mirror_on_postgres`], its tailer woken as `wakeup` says.
    pub(super) async fn mirror_on_postgres_waking(
        &self,
        pool: sqlx::PgPool,
        wakeup: Wakeup,
        fencing: Option<std::sync::Arc<Fencing>>,
    ) -> Result<(), StoreError> {
        let pg = PgMirror::start(
            pool,
            self.inner.fanout.clone(),
            self.inner.watch_epoch.clone(),
            wakeup,
            fencing,
        )
        .await?;
        let members = pg.members().await?;
        if self.inner.postgres.set(pg).is_err() {
            return Err(StoreError::Closed);
        }
        *self.members_mut() = members.into_iter().collect();
        Ok(())
    }

    /// The PostgreSQL mirror, if attached.
    pub(super) fn postgres(&self) -> Option<&PgMirror> {
        self.inner.postgres.get()
    }

    /// The PostgreSQL mirror, if `cluster`'s objects are kept there.
    pub(super) fn postgres_for(&self, cluster: &str) -> Option<&PgMirror> {
        self.postgres()
            .filter(|_| cluster == FLEET || self.in_fleet(cluster))
    }

    /// A page of `c` from PostgreSQL after `after`, at most `limit` objects (0: all), as of
    /// `snapshot` (`None`: now).
    pub(super) async fn postgres_page(
        pg: &PgMirror,
        c: Collection<'_>,
        after: Option<(&str, &str)>,
        limit: usize,
        snapshot: Option<u64>,
    ) -> Result<RawPage, StoreError> {
        let fetch = (limit != 0).then(|| i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1);
        let (rv, rows) = pg.page(c, after, fetch, snapshot).await?;
        let mut items: Vec<RawObject> = rows
            .into_iter()
            .map(|r| RawObject {
                namespace: r.namespace,
                name: r.name,
                body: r.body,
            })
            .collect();
        let more = limit != 0 && items.len() > limit;
        items.truncate(if more { limit } else { items.len() });
        Ok(RawPage { items, rv, more })
    }
}
