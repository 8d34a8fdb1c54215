//! The PostgreSQL backend of the hub's bookkeeping: connecting, the schema
//! (`migrations/postgres/`, applied at start and never undone), and PostgreSQL's dialect of the
//! statements the hub store writes in SQLite's.

use std::time::Duration;

use sqlx::{
    Connection,
    migrate::MigrateError,
    postgres::{PgConnection, PgPool, PgPoolOptions},
};

use super::setting::PostgresSetting;

/// How long connecting at start may take before the gateway gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a bookkeeping write waits for a connection while the database is away: the
/// mirrors retry theirs, so they fail fast rather than queue.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Bookkeeping is a few small writes a second; more connections would only hold the server's.
const MAX_CONNECTIONS: u32 = 4;

/// The mirrored objects' pool: the writer's batch, the tailer's reads, and the API's lists,
/// gets and watch replays. (The tailer's `LISTEN` holds a connection of its own.)
const MIRROR_CONNECTIONS: u32 = 10;

/// Why the PostgreSQL store could not be opened. Each names the setting (without its password)
/// and the cause, on one line: sqlx's errors say their cause in their own text already, so
/// they are held as `cause`, not chained as a source to be printed twice.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The database refused the connection or the credentials.
    #[error("connecting to {setting}: {cause}")]
    Connect {
        /// The database, password hidden.
        setting: PostgresSetting,
        /// sqlx's error.
        cause: sqlx::Error,
    },
    /// The database did not answer in time.
    #[error("no answer from {setting} within {CONNECT_TIMEOUT:?}")]
    Timeout {
        /// The database, password hidden.
        setting: PostgresSetting,
    },
    /// The database was migrated by a newer binary: running against it could lose what the
    /// newer schema keeps, and migrations are never undone.
    #[error(
        "{setting} has a newer schema than this binary (its migration {version} is unknown here); refused: run the newer gpustack-operator, or name another database"
    )]
    NewerSchema {
        /// The database, password hidden.
        setting: PostgresSetting,
        /// The unknown migration's version.
        version: i64,
    },
    /// The mirrored objects' store could not start on the database.
    #[error("starting the mirrored objects' store on {setting}")]
    Mirror {
        /// The database, password hidden.
        setting: PostgresSetting,
        /// Why.
        #[source]
        cause: gpustack_apiserver::store::StoreError,
    },
    /// The lease metrics could not be made.
    #[error("making the lease metrics")]
    Metrics {
        /// Why.
        #[source]
        cause: prometheus::Error,
    },
    /// Applying a migration failed.
    #[error("migrating the schema of {setting}: {cause}")]
    Migrate {
        /// The database, password hidden.
        setting: PostgresSetting,
        /// The migration's error.
        cause: MigrateError,
    },
}

/// Connects to the database `setting` names, applies the migrations it lacks, and returns a
/// pool for the bookkeeping.
pub async fn open(setting: &PostgresSetting) -> Result<PgPool, OpenError> {
    let options = setting.connect_options();
    // One connection first, so that a refusal is reported with its cause (a pool would only
    // say that it timed out waiting for a connection).
    let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(options))
        .await
        .map_err(|_| OpenError::Timeout {
            setting: setting.clone(),
        })?
        .map_err(|cause| OpenError::Connect {
            setting: setting.clone(),
            cause,
        })?;
    // Several gateways starting at once: sqlx takes an advisory lock around the migrations.
    let migrated = gpustack_apiserver::store::migrations::postgres()
        .run(&mut conn)
        .await;
    let _ = conn.close().await;
    migrated.map_err(|e| match e {
        MigrateError::VersionMissing(version) => OpenError::NewerSchema {
            setting: setting.clone(),
            version,
        },
        cause => OpenError::Migrate {
            setting: setting.clone(),
            cause,
        },
    })?;
    Ok(PgPoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_lazy_with(options.clone()))
}

/// A pool for the mirrored objects on the database `setting` names (migrated by [`open`]);
/// connections are made as they are needed.
pub fn mirror_pool(setting: &PostgresSetting) -> PgPool {
    // A replica paused in the middle of a write batch (SIGSTOP, a frozen VM) holds the
    // sequence row and its leases' rows: the server ends such a session after this, so the
    // other replicas' writes and take-overs wait at most that long.
    let options = setting
        .connect_options()
        .clone()
        .options([("idle_in_transaction_session_timeout", "5s")]);
    PgPoolOptions::new()
        .max_connections(MIRROR_CONNECTIONS)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_lazy_with(options)
}

/// `sql` with SQLite's anonymous parameters (`?`) numbered as PostgreSQL's (`$1`, `$2`, ...).
/// The hub store's statements hold no `?` inside literals (see the test).
pub fn dialect(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_numbered_in_order() {
        assert_eq!(
            dialect("SELECT rv FROM t WHERE a = ? AND b = ? AND c = ?"),
            "SELECT rv FROM t WHERE a = $1 AND b = $2 AND c = $3"
        );
        assert_eq!(dialect("SELECT 1"), "SELECT 1");
    }
}
