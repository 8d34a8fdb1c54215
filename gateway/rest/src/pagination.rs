//! `continue` tokens: where the next page of a list starts.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde::{Deserialize, Serialize};

/// The position after the last object of a page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Continue {
    /// The resourceVersion of the first page.
    pub rv: u64,
    /// The last object's namespace; empty at the cluster scope.
    pub namespace: String,
    /// The last object's name.
    pub name: String,
}

/// Why a `continue` token was refused (the client's own words for it are not echoed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ContinueError {
    /// The token is not URL-safe base64.
    #[error("continue key is not valid: not base64")]
    NotBase64,
    /// The token decodes to no position.
    #[error("continue key is not valid")]
    Unreadable,
}

impl Continue {
    /// The opaque token a list answers in `metadata.continue`.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    /// The position a client's `continue` token names.
    pub fn decode(token: &str) -> Result<Self, ContinueError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|_| ContinueError::NotBase64)?;
        serde_json::from_slice(&bytes).map_err(|_| ContinueError::Unreadable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let c = Continue {
            rv: 9,
            namespace: "ns".into(),
            name: "a/b".into(),
        };
        assert_eq!(Continue::decode(&c.encode()).unwrap(), c);
        assert!(Continue::decode("!!").is_err());
        assert!(Continue::decode("e30").is_err());
    }
}
