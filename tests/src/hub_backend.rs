//! Which store a hub under test keeps its mirror and bookkeeping in, so that one end-to-end
//! test runs against both: SQLite under the hub's data directory (the default) or a fresh
//! database on a throwaway PostgreSQL server of the test's own ([`Postgres`]).
//! [`on_both_backends!`](crate::on_both_backends) turns a test body `fn NAME(Backend)` into
//! the tests `on_sqlite::NAME` and `on_postgres::NAME`.

use crate::postgres::Postgres;

/// A hub's store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `gateway.db` under `--data-dir` (no `--store`).
    Sqlite,
    /// `--store=postgres://...`.
    Postgres,
}

/// The store of a test's hub. Its flags stay the same for the whole test, so a hub restarted
/// with them finds the same database (PostgreSQL) or, through its data directory, the same
/// file (SQLite). Bind it before the hub's processes: it drops (the server stops) after them.
pub struct HubStore {
    /// The server, for PostgreSQL.
    server: Option<Postgres>,
    /// `--store=...`, for PostgreSQL.
    flag: Option<String>,
}

impl HubStore {
    /// Nothing to start for SQLite; for PostgreSQL a server with one fresh database.
    pub fn new(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => HubStore {
                server: None,
                flag: None,
            },
            Backend::Postgres => {
                let server = Postgres::start();
                let url = server.create_database("hub");
                HubStore {
                    server: Some(server),
                    flag: Some(format!("--store={url}")),
                }
            }
        }
    }

    /// `args`, then the flags that put a hub on this store.
    pub fn args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = args.to_vec();
        all.extend(self.flag.as_deref());
        all
    }

    /// On PostgreSQL, asserts that the database holds `n` Devices of `cluster` (the hub's
    /// mirror is there, not in its data directory); SQLite's file is the hub's own, with nothing
    /// to check from outside.
    pub fn assert_devices_in_database(&self, cluster: &str, n: usize) {
        let Some(pg) = &self.server else {
            return;
        };
        let count = pg.psql(
            "hub",
            &format!(
                "SELECT count(*) FROM mirror_objects WHERE cluster = '{cluster}' AND resource = 'devices'"
            ),
        );
        assert_eq!(count, n.to_string(), "{cluster}'s Devices in PostgreSQL");
    }
}

/// Defines, for each named test body `fn NAME(Backend)`, the tests `on_sqlite::NAME` and
/// `on_postgres::NAME`; with `async` first, `async fn NAME(Backend)` bodies run as
/// multi-threaded tokio tests.
#[macro_export]
macro_rules! on_both_backends {
    (async $($test:ident),+ $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread")]
                async fn $test() {
                    super::$test($crate::hub_backend::Backend::Sqlite).await
                }
            )+
        }
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread")]
                async fn $test() {
                    super::$test($crate::hub_backend::Backend::Postgres).await
                }
            )+
        }
    };
    ($($test:ident),+ $(,)?) => {
        mod on_sqlite {
            $(
                #[test]
                fn $test() {
                    super::$test($crate::hub_backend::Backend::Sqlite)
                }
            )+
        }
        mod on_postgres {
            $(
                #[test]
                fn $test() {
                    super::$test($crate::hub_backend::Backend::Postgres)
                }
            )+
        }
    };
}
