//! ServiceAccount tokens of embedded clusters, kept by hash (see [`super::token_hash`]).

use super::{Store, StoreError};

/// What a token was issued for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRecord {
    pub cluster: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub audiences: Vec<String>,
    /// Unix seconds.
    pub expires_at: i64,
}

impl Store {
    /// Records the token whose hash is `hash`.
    pub async fn save_token(&self, hash: &str, t: &TokenRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO service_account_tokens \
             (token_sha256, cluster, namespace, name, uid, audiences, expires_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(hash)
        .bind(&t.cluster)
        .bind(&t.namespace)
        .bind(&t.name)
        .bind(&t.uid)
        .bind(serde_json::to_string(&t.audiences)?)
        .bind(t.expires_at)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The token whose hash is `hash`, expired or not.
    pub async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let row: Option<(String, String, String, String, String, i64)> = sqlx::query_as(
            "SELECT cluster, namespace, name, uid, audiences, expires_at \
             FROM service_account_tokens WHERE token_sha256 = ?",
        )
        .bind(hash)
        .fetch_optional(self.pool())
        .await?;
        let Some((cluster, namespace, name, uid, audiences, expires_at)) = row else {
            return Ok(None);
        };
        Ok(Some(TokenRecord {
            cluster,
            namespace,
            name,
            uid,
            audiences: serde_json::from_str(&audiences)?,
            expires_at,
        }))
    }

    /// Forgets tokens that expired before `now` (Unix seconds); how many.
    pub async fn expire_tokens(&self, now: i64) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM service_account_tokens WHERE expires_at < ?")
            .bind(now)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }
}
