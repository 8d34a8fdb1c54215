//! The hub's store: what the mirrors keep besides objects (API-made subscriptions, each
//! mirrored kind's watch progress, each upstream's last sync time).
//!
//! These are small bookkeeping writes, not objects: they produce no watch events. The mirrored
//! objects themselves go through the object store ([`HubStore::objects`]) like every other
//! write, so the API serves them; on PostgreSQL the object store keeps them in the same
//! database ([`Store::mirror_on_postgres`]).
//!
//! Two backends behind the same methods, chosen by `--store` ([`setting`]): SQLite, in tables
//! beside the objects in the embedded API server's database (its pool, its migrations under
//! `migrations/sqlite/`), and PostgreSQL ([`postgres`]: its connection and migrations under
//! `migrations/postgres/`). The statements are written once, in SQLite's dialect; what differs
//! between the two is each backend's to say ([`postgres::dialect`]).

pub mod leases;
mod postgres;
pub mod setting;

use gpustack_apiserver::store::{Store, StoreError};
use serde_json::Value;
use sqlx::{
    AssertSqlSafe, ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row,
    SqlSafeStr, Type, postgres::PgPool, sqlite::SqlitePool,
};

pub use leases::Leasing;
pub use postgres::OpenError;
pub use setting::{PostgresSetting, SettingError, StoreSetting};

/// The hub's bookkeeping and the object store it sits beside. Cheap to clone.
#[derive(Clone)]
pub struct HubStore {
    objects: Store,
    backend: Backend,
    /// With replicas on PostgreSQL: this replica's leases of upstreams.
    leasing: Option<Leasing>,
}

#[derive(Clone)]
enum Backend {
    /// The object store's own database.
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl HubStore {
    /// The bookkeeping in the object store's SQLite database.
    pub fn on_sqlite(objects: Store) -> Self {
        HubStore {
            backend: Backend::Sqlite(objects.database().clone()),
            objects,
            leasing: None,
        }
    }

    /// The bookkeeping where `setting` says: for PostgreSQL, connects and brings the schema up
    /// to this binary's (refusing a newer one).
    /// One process writes the database: no leases (tests; see [`HubStore::open_replica`]).
    pub async fn open(objects: Store, setting: &StoreSetting) -> Result<Self, OpenError> {
        Self::open_leasing(objects, setting, None).await
    }

    /// [`HubStore::open`] for a hub that may run as several replicas on PostgreSQL: each
    /// upstream is then mirrored under a lease of `lease` (see [`Leasing`]). SQLite (one
    /// process) takes no leases.
    pub async fn open_replica(
        objects: Store,
        setting: &StoreSetting,
        lease: std::time::Duration,
    ) -> Result<Self, OpenError> {
        Self::open_leasing(objects, setting, Some(lease)).await
    }

    async fn open_leasing(
        objects: Store,
        setting: &StoreSetting,
        lease: Option<std::time::Duration>,
    ) -> Result<Self, OpenError> {
        Ok(match setting {
            StoreSetting::Sqlite => Self::on_sqlite(objects),
            StoreSetting::Postgres(p) => {
                let pool = postgres::open(p).await?;
                let leasing = match lease {
                    Some(lease) => {
                        let replica = leases::new_replica_id();
                        let leasing = Leasing::new(pool.clone(), replica, lease)
                            .map_err(|cause| OpenError::Metrics { cause })?;
                        tracing::info!(replica = %leasing.replica(), lease = ?lease, "this hub replica mirrors each upstream under a lease kept in PostgreSQL");
                        Some(leasing)
                    }
                    None => None,
                };
                // The mirrored objects go to the same database (the schema is migrated).
                let fencing = leasing.as_ref().map(|l| l.fencing().clone());
                objects
                    .mirror_on_postgres(postgres::mirror_pool(p), fencing)
                    .await
                    .map_err(|cause| OpenError::Mirror {
                        setting: p.clone(),
                        cause,
                    })?;
                HubStore {
                    backend: Backend::Postgres(pool),
                    objects,
                    leasing,
                }
            }
        })
    }

    /// This replica's leases of upstreams, where replicas share a PostgreSQL database.
    pub fn leasing(&self) -> Option<&Leasing> {
        self.leasing.as_ref()
    }

    /// Closes the bookkeeping's own connections (the object store closes its own).
    pub async fn close(&self) {
        if let Backend::Postgres(pool) = &self.backend {
            pool.close().await;
        }
    }

    /// The object store the hub's tables sit beside.
    pub fn objects(&self) -> &Store {
        &self.objects
    }

    /// Runs `sql` (SQLite's dialect, text parameters) and returns its rows' columns as text.
    async fn rows(
        &self,
        sql: &'static str,
        binds: &[&str],
    ) -> Result<Vec<Vec<String>>, StoreError> {
        Ok(match &self.backend {
            Backend::Sqlite(pool) => text_rows(pool, sql, binds).await?,
            Backend::Postgres(pool) => {
                text_rows(pool, AssertSqlSafe(postgres::dialect(sql)), binds).await?
            }
        })
    }

    /// The first column of the first row of `sql`, if any.
    async fn value(&self, sql: &'static str, binds: &[&str]) -> Result<Option<String>, StoreError> {
        Ok(self
            .rows(sql, binds)
            .await?
            .into_iter()
            .next()
            .and_then(|row| row.into_iter().next()))
    }

    /// The stored subscriptions: (name, spec).
    pub async fn subscriptions(&self) -> Result<Vec<(String, Value)>, StoreError> {
        let rows = self
            .rows("SELECT name, spec FROM subscriptions ORDER BY name", &[])
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let (name, spec) = pair(row)?;
            out.push((name, serde_json::from_str(&spec)?));
        }
        Ok(out)
    }

    /// Stores (or replaces) the subscription `name` with its request `spec`, so it survives a restart.
    pub async fn save_subscription(&self, name: &str, spec: &Value) -> Result<(), StoreError> {
        let now = jiff::Timestamp::now().to_string();
        self.rows(
            "INSERT INTO subscriptions (name, spec, created_at) VALUES (?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET spec = excluded.spec",
            &[name, &spec.to_string(), &now],
        )
        .await?;
        Ok(())
    }

    /// When the stored subscription `name` was first made (a forced re-subscribe keeps it).
    pub async fn subscribed_at(&self, name: &str) -> Result<Option<String>, StoreError> {
        self.value(
            "SELECT created_at FROM subscriptions WHERE name = ?",
            &[name],
        )
        .await
    }

    /// Removes the stored subscription `name` only; whether there was one.
    pub async fn forget_subscription(&self, name: &str) -> Result<bool, StoreError> {
        let gone = self
            .value(
                "DELETE FROM subscriptions WHERE name = ? RETURNING name",
                &[name],
            )
            .await?;
        Ok(gone.is_some())
    }

    /// Forgets everything kept for upstream `name` besides its objects: its subscription, its
    /// watch progress, its last sync time and its reader token.
    pub async fn forget_upstream(&self, name: &str) -> Result<(), StoreError> {
        self.objects.forget_cluster_token(name).await?;
        for sql in [
            "DELETE FROM subscriptions WHERE name = ?",
            "DELETE FROM upstream_sync WHERE cluster = ?",
            "DELETE FROM mirror_progress WHERE cluster = ?",
        ] {
            self.rows(sql, &[name]).await?;
        }
        Ok(())
    }

    /// The upstream resourceVersion the watch of (`cluster`, `group`, `resource`) got to.
    pub async fn mirror_progress(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
    ) -> Result<Option<String>, StoreError> {
        self.value(
            "SELECT rv FROM mirror_progress WHERE cluster = ? AND grp = ? AND resource = ?",
            &[cluster, group, resource],
        )
        .await
    }

    /// Records (or, with `None`, forgets) how far the watch of a mirrored kind got. Where
    /// replicas lease upstreams, only while this replica holds `cluster`'s lease (checked in
    /// the same statement, as the object writes are): a replica that lost it never moves
    /// the progress its successor resumes from.
    pub async fn set_mirror_progress(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
        rv: Option<&str>,
    ) -> Result<(), StoreError> {
        if let Some(leasing) = &self.leasing {
            let Some(epoch) = leasing.fencing().epoch_of(cluster) else {
                return Ok(());
            };
            let (epoch, holder) = (epoch.to_string(), leasing.replica());
            let sql = match rv {
                Some(_) => {
                    "INSERT INTO mirror_progress (cluster, grp, resource, rv) \
                     SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM mirror_leases \
                       WHERE upstream = ? AND holder = ? AND epoch = CAST(? AS BIGINT) \
                       AND expires_at > clock_timestamp()) \
                     ON CONFLICT (cluster, grp, resource) DO UPDATE SET rv = excluded.rv"
                }
                None => {
                    "DELETE FROM mirror_progress WHERE cluster = ? AND grp = ? AND resource = ? \
                     AND ? IS NOT NULL AND EXISTS (SELECT 1 FROM mirror_leases \
                       WHERE upstream = ? AND holder = ? AND epoch = CAST(? AS BIGINT) \
                       AND expires_at > clock_timestamp())"
                }
            };
            let rv = rv.unwrap_or_default();
            self.rows(
                sql,
                &[cluster, group, resource, rv, cluster, holder, &epoch],
            )
            .await?;
            return Ok(());
        }
        match rv {
            Some(rv) => {
                self.rows(
                    "INSERT INTO mirror_progress (cluster, grp, resource, rv) VALUES (?, ?, ?, ?) \
                     ON CONFLICT (cluster, grp, resource) DO UPDATE SET rv = excluded.rv",
                    &[cluster, group, resource, rv],
                )
                .await?
            }
            None => {
                self.rows(
                    "DELETE FROM mirror_progress WHERE cluster = ? AND grp = ? AND resource = ?",
                    &[cluster, group, resource],
                )
                .await?
            }
        };
        Ok(())
    }

    /// Every upstream's stored last sync time (RFC 3339).
    pub async fn upstream_sync_times(&self) -> Result<Vec<(String, String)>, StoreError> {
        let rows = self
            .rows("SELECT cluster, last_sync_time FROM upstream_sync", &[])
            .await?;
        rows.into_iter().map(pair).collect()
    }

    /// Records when the mirror of `cluster` last matched its upstream (RFC 3339).
    pub async fn set_upstream_sync_time(&self, cluster: &str, at: &str) -> Result<(), StoreError> {
        self.rows(
            "INSERT INTO upstream_sync (cluster, last_sync_time) VALUES (?, ?) \
             ON CONFLICT (cluster) DO UPDATE SET last_sync_time = excluded.last_sync_time",
            &[cluster, at],
        )
        .await?;
        Ok(())
    }
}

/// A row of two columns as a pair.
fn pair(row: Vec<String>) -> Result<(String, String), StoreError> {
    let len = row.len();
    let mut columns = row.into_iter();
    match (columns.next(), columns.next()) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(sqlx::Error::ColumnIndexOutOfBounds { index: 1, len }.into()),
    }
}

/// `sql` run on `pool` with `binds` as its text parameters; every column read as text. One
/// function for both backends: the bookkeeping's columns are all text.
async fn text_rows<DB>(
    pool: &Pool<DB>,
    sql: impl SqlSafeStr,
    binds: &[&str],
) -> Result<Vec<Vec<String>>, sqlx::Error>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
    DB::Arguments: IntoArguments<DB>,
{
    let mut query = sqlx::query::<DB>(sql);
    for b in binds {
        query = query.bind(*b);
    }
    let rows = query.fetch_all(pool).await?;
    rows.iter()
        .map(|row| (0..row.len()).map(|i| row.try_get(i)).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use gpustack_apiserver::store::ObjectKey;
    use gpustack_tests::postgres::Postgres;
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

    /// Every bookkeeping operation, on whichever backend `store` has; the objects beside it
    /// are SQLite's in both cases.
    async fn round_trip(store: HubStore) {
        let objects = store.objects().clone();
        store
            .save_subscription("east", &json!({"name": "east"}))
            .await
            .unwrap();
        let first = store.subscribed_at("east").await.unwrap().expect("a time");
        store
            .save_subscription("east", &json!({"name": "east", "again": true}))
            .await
            .unwrap();
        store
            .save_subscription("north", &json!({"name": "north"}))
            .await
            .unwrap();
        assert_eq!(
            store.subscriptions().await.unwrap(),
            [
                ("east".to_owned(), json!({"name": "east", "again": true})),
                ("north".to_owned(), json!({"name": "north"})),
            ]
        );
        assert_eq!(store.subscribed_at("east").await.unwrap(), Some(first));
        assert_eq!(store.subscribed_at("west").await.unwrap(), None);
        assert!(store.forget_subscription("north").await.unwrap());
        assert!(!store.forget_subscription("north").await.unwrap());
        for rv in ["41", "42"] {
            store
                .set_mirror_progress("east", "g", "r", Some(rv))
                .await
                .unwrap();
        }
        store
            .set_mirror_progress("east", "g", "other", Some("7"))
            .await
            .unwrap();
        assert_eq!(
            store.mirror_progress("east", "g", "r").await.unwrap(),
            Some("42".into())
        );
        store
            .set_mirror_progress("east", "g", "other", None)
            .await
            .unwrap();
        assert_eq!(
            store.mirror_progress("east", "g", "other").await.unwrap(),
            None
        );
        for at in ["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"] {
            store.set_upstream_sync_time("east", at).await.unwrap();
        }
        assert_eq!(
            store.upstream_sync_times().await.unwrap(),
            [("east".to_owned(), "2026-01-02T00:00:00Z".to_owned())]
        );
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

    async fn objects(dir: &tempfile::TempDir) -> Store {
        Store::open(&dir.path().join("db")).await.unwrap()
    }

    fn setting(url: &str) -> StoreSetting {
        url.parse().unwrap()
    }

    /// The database `hub` made in `pg`, and the bookkeeping opened on it beside objects in `dir`.
    async fn on_postgres(pg: &Postgres, dir: &tempfile::TempDir) -> (String, HubStore) {
        let url = pg.create_database("hub");
        let store = HubStore::open(objects(dir).await, &setting(&url))
            .await
            .unwrap();
        (url, store)
    }

    #[tokio::test]
    async fn bookkeeping_round_trips_on_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let store = HubStore::open(objects(&dir).await, &StoreSetting::Sqlite)
            .await
            .unwrap();
        round_trip(store).await;
    }

    #[tokio::test]
    async fn bookkeeping_round_trips_on_postgres_and_outlives_the_data_directory() {
        let pg = Postgres::start();
        let dir = tempfile::tempdir().unwrap();
        let (url, store) = on_postgres(&pg, &dir).await;
        round_trip(store.clone()).await;
        store.save_subscription("kept", &json!({})).await.unwrap();
        store.close().await;
        // Another gateway (another data directory) opening it again: migrations already
        // applied, the bookkeeping still there.
        let other = tempfile::tempdir().unwrap();
        let again = HubStore::open(objects(&other).await, &setting(&url))
            .await
            .unwrap();
        assert_eq!(again.subscriptions().await.unwrap()[0].0, "kept");
        assert_eq!(
            pg.psql("hub", "SELECT name FROM subscriptions"),
            "kept",
            "the rows are PostgreSQL's"
        );
    }

    #[tokio::test]
    async fn a_replica_records_watch_progress_only_while_it_holds_the_upstreams_lease() {
        let pg = Postgres::start();
        let url = pg.create_database("hub");
        let dir = tempfile::tempdir().unwrap();
        let lease = std::time::Duration::from_secs(30);
        let store = HubStore::open_replica(objects(&dir).await, &setting(&url), lease)
            .await
            .unwrap();
        let leasing = store
            .leasing()
            .expect("replicas on PostgreSQL lease upstreams");
        let progress = || {
            pg.psql(
                "hub",
                "SELECT rv FROM mirror_progress WHERE cluster = 'east'",
            )
        };
        // Not held here: nothing written.
        store
            .set_mirror_progress("east", "g", "r", Some("1"))
            .await
            .unwrap();
        assert_eq!(progress(), "");
        let epoch = leasing.take("east").await.unwrap().expect("a free lease");
        leasing.fencing().hold("east", epoch);
        store
            .set_mirror_progress("east", "g", "r", Some("2"))
            .await
            .unwrap();
        assert_eq!(progress(), "2");
        assert!(leasing.renew("east", epoch).await.unwrap());
        // Taken over meanwhile (this replica still believes it holds it): left as it was.
        pg.psql(
            "hub",
            "UPDATE mirror_leases SET holder = 'other', epoch = epoch + 1",
        );
        for rv in [Some("3"), None] {
            store
                .set_mirror_progress("east", "g", "r", rv)
                .await
                .unwrap();
            assert_eq!(progress(), "2");
        }
        assert!(!leasing.renew("east", epoch).await.unwrap(), "lost");
        assert_eq!(leasing.take("east").await.unwrap(), None, "held by another");
        // Expired: taken again, at the next epoch.
        pg.psql(
            "hub",
            "UPDATE mirror_leases SET expires_at = clock_timestamp()",
        );
        assert_eq!(leasing.take("east").await.unwrap(), Some(epoch + 2));
    }

    #[tokio::test]
    async fn a_replica_takes_its_own_lease_again_at_once_and_fences_the_epoch_before() {
        let pg = Postgres::start();
        let url = pg.create_database("hub");
        let lease = std::time::Duration::from_secs(30);
        let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = HubStore::open_replica(objects(&dir_a).await, &setting(&url), lease)
            .await
            .unwrap();
        let b = HubStore::open_replica(objects(&dir_b).await, &setting(&url), lease)
            .await
            .unwrap();
        let (a, b) = (a.leasing().unwrap(), b.leasing().unwrap());
        let epoch = a.take("east").await.unwrap().expect("a free lease");
        assert_eq!(b.take("east").await.unwrap(), None, "held by A");
        // A mirror restarted on A (a forced subscription) takes the lease at once, not a
        // lease time later; the epoch before is fenced, and B still waits.
        assert_eq!(a.take("east").await.unwrap(), Some(epoch + 1));
        assert!(
            !a.renew("east", epoch).await.unwrap(),
            "the old epoch renewed"
        );
        assert!(a.renew("east", epoch + 1).await.unwrap());
        assert_eq!(b.take("east").await.unwrap(), None, "held by A");
    }

    #[tokio::test]
    async fn a_postgres_schema_newer_than_the_binary_is_refused_and_left_as_it_is() {
        let pg = Postgres::start();
        let dir = tempfile::tempdir().unwrap();
        let (url, store) = on_postgres(&pg, &dir).await;
        store.save_subscription("east", &json!({})).await.unwrap();
        store.close().await;
        pg.pretend_newer_schema("hub", 29991231000000);
        let before = pg.psql("hub", "SELECT count(*) FROM _sqlx_migrations");
        let refused = HubStore::open(objects(&dir).await, &setting(&url)).await;
        let Err(err) = refused else {
            panic!("a newer schema was used")
        };
        assert!(
            matches!(
                err,
                OpenError::NewerSchema {
                    version: 29991231000000,
                    ..
                }
            ),
            "{err}"
        );
        let line = err.to_string();
        assert!(
            line.contains("newer schema") && line.contains("postgres://"),
            "{line}"
        );
        assert!(!line.contains(pg.password()), "{line}");
        // Nothing undone, nothing applied.
        assert_eq!(
            pg.psql("hub", "SELECT count(*) FROM _sqlx_migrations"),
            before
        );
        assert_eq!(pg.psql("hub", "SELECT name FROM subscriptions"), "east");
    }

    #[tokio::test]
    async fn a_refused_connection_names_the_database_and_the_cause_and_never_the_password() {
        let pg = Postgres::start();
        pg.create_database("hub");
        let dir = tempfile::tempdir().unwrap();
        let wrong = pg.url("hub").replace(pg.password(), "not-the-password");
        let Err(err) = HubStore::open(objects(&dir).await, &setting(&wrong)).await else {
            panic!("a wrong password was accepted")
        };
        let line = format!("{err} {err:?}");
        assert!(line.contains("password authentication failed"), "{line}");
        assert!(line.contains("/hub?host="), "{line}");
        assert!(!line.contains("not-the-password"), "{line}");
        // No server at all.
        let gone = pg.url("hub").replace(
            &pg.socket_dir().display().to_string(),
            &dir.path().display().to_string(),
        );
        let Err(err) = HubStore::open(objects(&dir).await, &setting(&gone)).await else {
            panic!("connected to no server")
        };
        assert!(matches!(err, OpenError::Connect { .. }), "{err}");
        assert!(!err.to_string().contains(pg.password()), "{err}");
    }
}
