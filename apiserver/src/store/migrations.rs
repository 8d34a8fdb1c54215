//! The schema migrations of both store backends, embedded at build time (`build.rs`), as
//! sqlx's [`Migrator`]s. Each file `<version>_<description>.sql` is one migration, read as
//! sqlx's own directory reader reads it (same version, description and checksum), so a
//! database migrated by an earlier build is recognised as such.

use std::borrow::Cow;

use sqlx::{
    SqlStr,
    migrate::{Migration, MigrationType, Migrator},
};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/migrations.rs"));
}

/// The embedded-cluster and mirror store's migrations (`migrations/sqlite/`).
pub fn sqlite() -> Migrator {
    migrator(embedded::SQLITE)
}

/// The hub store's migrations on PostgreSQL (`migrations/postgres/`).
pub fn postgres() -> Migrator {
    migrator(embedded::POSTGRES)
}

fn migrator(files: &'static [(&'static str, &'static str)]) -> Migrator {
    Migrator::with_migrations(
        files
            .iter()
            .map(|&(file, sql)| migration(file, sql))
            .collect(),
    )
}

/// One embedded file as a migration. The build script only embeds `*.sql` files and the
/// tests below check every name, so a malformed one cannot reach a running store.
fn migration(file: &str, sql: &'static str) -> Migration {
    let (version, rest) = file
        .split_once('_')
        .expect("a migration's file name is <version>_<description>.sql");
    let version = version
        .parse()
        .expect("a migration's file name starts with its numeric version");
    let migration_type = MigrationType::from_filename(rest);
    let description = rest
        .trim_end_matches(migration_type.suffix())
        .replace('_', " ");
    Migration::new(
        version,
        Cow::Owned(description),
        migration_type,
        SqlStr::from_static(sql),
        sql.starts_with("-- no-transaction"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What sqlx's own reader makes of the directory: the same migrations, versions,
    /// descriptions and checksums (the checksums are what an existing database is checked
    /// against).
    #[tokio::test]
    async fn embedded_migrations_are_the_directories_read_by_sqlx() {
        for (migrator, dir) in [(sqlite(), "sqlite"), (postgres(), "postgres")] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../migrations")
                .join(dir);
            let read = Migrator::new(dir.as_path()).await.unwrap();
            let embedded: Vec<_> = migrator.iter().collect();
            let read: Vec<_> = read.iter().collect();
            assert_eq!(embedded.len(), read.len(), "{}", dir.display());
            assert!(!embedded.is_empty());
            for (ours, theirs) in embedded.iter().zip(&read) {
                assert_eq!(ours.version, theirs.version);
                assert_eq!(ours.description, theirs.description);
                assert_eq!(ours.migration_type, theirs.migration_type);
                assert_eq!(ours.checksum, theirs.checksum);
                assert_eq!(ours.no_tx, theirs.no_tx);
                assert_eq!(ours.sql.as_str(), theirs.sql.as_str());
            }
        }
    }
}
