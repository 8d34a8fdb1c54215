//! Hosted clusters and the hashes of their admin tokens.

use futures::future::BoxFuture;
use sha2::{Digest, Sha256};

use super::{Store, StoreError};

/// SHA-256 of a bearer token, hex encoded: what the store keeps instead of the token.
pub fn token_hash(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

impl Store {
    /// The stored token hash of `cluster`, if the cluster exists.
    pub async fn cluster_token_hash(&self, cluster: &str) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT token_sha256 FROM clusters WHERE name = ?")
                .bind(cluster)
                .fetch_optional(self.pool())
                .await?,
        )
    }

    /// Records `cluster` with the hash of its admin token (replacing an older one).
    pub async fn set_cluster_token(&self, cluster: &str, token: &str) -> Result<(), StoreError> {
        let now = jiff::Timestamp::now().to_string();
        sqlx::query(
            "INSERT INTO clusters (name, token_sha256, created_at) VALUES (?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET token_sha256 = excluded.token_sha256",
        )
        .bind(cluster)
        .bind(token_hash(token))
        .bind(now)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Forgets `cluster`'s token (an unsubscribed mirror's reader token).
    pub fn forget_cluster_token<'a>(
        &'a self,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            sqlx::query("DELETE FROM clusters WHERE name = ?")
                .bind(cluster)
                .execute(self.pool())
                .await?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::token_hash;

    #[test]
    fn hash_is_hex_sha256() {
        assert_eq!(
            token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
