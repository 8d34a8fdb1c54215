//! Trimming the mirror's event log on PostgreSQL to its newest events, as the SQLite store
//! trims its own: without it every change any upstream ever made would stay in
//! `mirror_events`. Any replica may trim; trimming twice deletes nothing more.

use sqlx::{PgExecutor, PgPool};

use crate::store::types::{StoreError, to_i64, to_u64};

/// Events deleted per statement: no one statement holds many row locks or a long transaction.
const STEP: u64 = 10_000;

/// The newest version trimmed from the log, as `db` sees it: reads at an older version cannot
/// be answered whole.
pub async fn compacted<'e>(db: impl PgExecutor<'e>) -> Result<u64, StoreError> {
    let rv: i64 = sqlx::query_scalar("SELECT rv FROM mirror_compaction WHERE id = 0")
        .fetch_one(db)
        .await?;
    Ok(to_u64(rv))
}

/// Drops every event but the newest `keep`; returns the newest version dropped.
pub async fn compact(pool: &PgPool, keep: u64) -> Result<u64, StoreError> {
    let newest: i64 = sqlx::query_scalar("SELECT rv FROM mirror_sequence WHERE id = 0")
        .fetch_one(pool)
        .await?;
    let target = to_u64(newest).saturating_sub(keep);
    // Nothing new to trim (the usual case between two trims): no write.
    let already = compacted(pool).await?;
    if target <= already {
        return Ok(already);
    }
    // Published before any event goes: a reader that misses a deleted event sees the new
    // version when it checks after reading, and refuses instead of answering short.
    let compacted: i64 = sqlx::query_scalar(
        "UPDATE mirror_compaction SET rv = GREATEST(rv, $1) WHERE id = 0 RETURNING rv",
    )
    .bind(to_i64(target))
    .fetch_one(pool)
    .await?;
    let compacted = to_u64(compacted);
    // From the oldest event left: where an earlier trim (here or on another replica) stopped.
    let oldest: Option<i64> = sqlx::query_scalar("SELECT min(rv) FROM mirror_events")
        .fetch_one(pool)
        .await?;
    let mut from = oldest.map_or(compacted, |rv| to_u64(rv).saturating_sub(1));
    while from < compacted {
        let to = compacted.min(from + STEP);
        sqlx::query("DELETE FROM mirror_events WHERE rv > $1 AND rv <= $2")
            .bind(to_i64(from))
            .bind(to_i64(to))
            .execute(pool)
            .await?;
        from = to;
    }
    Ok(compacted)
}
