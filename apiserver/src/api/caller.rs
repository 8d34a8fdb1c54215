//! Who is asking, by the server's own bearer tokens (the `--token-file` token and each served
//! cluster's token), before any cluster is chosen: what decides whether an unknown cluster's
//! name is answered 404 or 401, and who may use the endpoints the hub adds beside the clusters.

use axum::http::{HeaderMap, header};

use super::clusters::ServedClusters;
use crate::store::token_hash;

/// Who is asking, by bearer token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// No token needed (the unix socket) or the `--token-file` token.
    Admin,
    /// This served cluster's token: it reads what concerns that cluster.
    ClusterReader(String),
    /// A token that is none of the above, or none at all.
    Unknown,
}

/// What tells callers apart on one listener. Cheap to clone.
#[derive(Clone)]
pub struct TokenAccess {
    /// Whether requests must carry a bearer token (not on the owner-only unix socket).
    pub require_token: bool,
    /// SHA-256 of the `--token-file` token, which may do anything.
    pub admin_token_hash: Option<String>,
    /// The clusters served now, with their token hashes.
    pub served: ServedClusters,
}

impl TokenAccess {
    /// Who `headers` say the caller is, from the bearer token alone (no store read).
    pub fn caller(&self, headers: &HeaderMap) -> Caller {
        if !self.require_token {
            return Caller::Admin;
        }
        let Some(hash) = bearer(headers).map(token_hash) else {
            return Caller::Unknown;
        };
        if self.admin_token_hash.as_deref() == Some(hash.as_str()) {
            Caller::Admin
        } else if let Some(cluster) = self.served.cluster_of_token(&hash) {
            Caller::ClusterReader(cluster)
        } else {
            Caller::Unknown
        }
    }
}

/// The bearer token of a request, if it carries one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}
