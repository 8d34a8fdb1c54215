//! The collector's queue of deleted owners (see the migration `collection_queue`): rows are
//! added by the deleting write itself (`write::queue_for_collection`) and removed here once
//! their dependents have been dealt with.

use super::{Store, StoreError};

impl Store {
    /// Up to `limit` owners of `cluster` deleted while objects still named them.
    pub async fn queued_owners(
        &self,
        cluster: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT owner_uid FROM collection_queue WHERE cluster = ? ORDER BY owner_uid LIMIT ?",
        )
        .bind(cluster)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?)
    }

    /// Takes `owner_uid` off the queue: each of its dependents has been deleted, marked for
    /// deletion or released.
    pub async fn collected(&self, cluster: &str, owner_uid: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM collection_queue WHERE cluster = ? AND owner_uid = ?")
            .bind(cluster)
            .bind(owner_uid)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Whether the queue holds anything for `cluster`.
    pub async fn collection_pending(&self, cluster: &str) -> Result<bool, StoreError> {
        Ok(!self.queued_owners(cluster, 1).await?.is_empty())
    }
}
