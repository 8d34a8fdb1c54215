//! The hub's mirrored objects, their event log and the fleet view's members on PostgreSQL
//! (`worker-gateway --store=postgres://...`), for several replicas sharing one database: the
//! same rows and events as the SQLite store keeps (`objects`, `events`, `sequence`,
//! `fleet_members`), in `migrations/postgres/`'s `mirror_*` tables.
//!
//! - [`writer`]: the mirror's upserts and removals, a batch per transaction, each batch taking
//!   its versions from the one sequence row while it holds that row's lock, so versions are
//!   committed in order on every replica;
//! - [`tailer`]: reads what any replica committed, in version order, into the store's fan-out
//!   (woken by `LISTEN`, by this replica's own commits, and by a slow poll as a safety net);
//! - [`fence`]: with several replicas, each upstream's writes made under its lease;
//! - [`reads`]: gets, pages of a collection (now or at a snapshot), the log since a version;
//! - [`compaction`]: the log trimmed to its newest events.
//!
//! Embedded clusters stay on SQLite: a hub on PostgreSQL mirrors only.

mod compaction;
mod fence;
mod handle;
mod reads;
mod tailer;
mod writer;

pub use fence::Fencing;
pub use handle::PgMirror;
pub use reads::Collection;
pub use tailer::Wakeup;
pub use writer::MirrorChange;

#[cfg(test)]
mod tests;
