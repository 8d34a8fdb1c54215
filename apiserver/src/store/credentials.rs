//! Per-cluster key material kept outside the API's objects (the front-proxy CA): created once,
//! then the same on every start.

use super::{Store, StoreError};

impl Store {
    /// The credential `name` of `cluster`: the stored one, or else `candidate`, stored now. Two
    /// racing callers get the same answer (the first insert wins).
    pub async fn cluster_credential(
        &self,
        cluster: &str,
        name: &str,
        candidate: &str,
    ) -> Result<String, StoreError> {
        sqlx::query(
            "INSERT OR IGNORE INTO cluster_credentials (cluster, name, pem) VALUES (?, ?, ?)",
        )
        .bind(cluster)
        .bind(name)
        .bind(candidate)
        .execute(self.pool())
        .await?;
        Ok(
            sqlx::query_scalar(
                "SELECT pem FROM cluster_credentials WHERE cluster = ? AND name = ?",
            )
            .bind(cluster)
            .bind(name)
            .fetch_one(self.pool())
            .await?,
        )
    }
}
