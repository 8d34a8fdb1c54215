//! ServiceAccount tokens of embedded clusters, kept by hash (see [`super::token_hash`]).

use super::{Store, StoreError};

/// The Pod a token is bound to (`spec.boundObjectRef`), and where it ran when the token was
/// issued.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BoundPod {
    /// The Pod's name.
    pub name: String,
    /// The Pod's uid.
    pub uid: String,
    /// Empty when the Pod was not scheduled yet.
    pub node_name: String,
    /// Empty when the node is not known.
    pub node_uid: String,
}

/// What a token was issued for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRecord {
    /// The cluster the token is for.
    pub cluster: String,
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount's name.
    pub name: String,
    /// The ServiceAccount's uid: a token outlives no recreated account of the same name.
    pub uid: String,
    /// Who the token is for (`aud`): the API server accepts only its own audience.
    pub audiences: Vec<String>,
    /// Unix seconds.
    pub expires_at: i64,
    /// The Pod the token is bound to, if any: it dies with that Pod.
    pub pod: Option<BoundPod>,
}

impl Store {
    /// Records the token whose hash is `hash`.
    pub async fn save_token(&self, hash: &str, t: &TokenRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO service_account_tokens \
             (token_sha256, cluster, namespace, name, uid, audiences, expires_at, \
              bound_pod_name, bound_pod_uid, bound_node_name, bound_node_uid) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(hash)
        .bind(&t.cluster)
        .bind(&t.namespace)
        .bind(&t.name)
        .bind(&t.uid)
        .bind(serde_json::to_string(&t.audiences)?)
        .bind(t.expires_at)
        .bind(t.pod.as_ref().map(|p| p.name.as_str()))
        .bind(t.pod.as_ref().map(|p| p.uid.as_str()))
        .bind(t.pod.as_ref().map(|p| p.node_name.as_str()))
        .bind(t.pod.as_ref().map(|p| p.node_uid.as_str()))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The token whose hash is `hash`, expired or not.
    pub async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        type Row = (
            String,
            String,
            String,
            String,
            String,
            i64,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
        );
        let row: Option<Row> = sqlx::query_as(
            "SELECT cluster, namespace, name, uid, audiences, expires_at, \
             bound_pod_name, bound_pod_uid, bound_node_name, bound_node_uid \
             FROM service_account_tokens WHERE token_sha256 = ?",
        )
        .bind(hash)
        .fetch_optional(self.pool())
        .await?;
        let Some((
            cluster,
            namespace,
            name,
            uid,
            audiences,
            expires_at,
            pod,
            pod_uid,
            node,
            node_uid,
        )) = row
        else {
            return Ok(None);
        };
        Ok(Some(TokenRecord {
            cluster,
            namespace,
            name,
            uid,
            audiences: serde_json::from_str(&audiences)?,
            expires_at,
            pod: pod.map(|name| BoundPod {
                name,
                uid: pod_uid.unwrap_or_default(),
                node_name: node.unwrap_or_default(),
                node_uid: node_uid.unwrap_or_default(),
            }),
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
