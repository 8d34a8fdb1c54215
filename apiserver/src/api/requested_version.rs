//! The `resourceVersion` a list or watch asks to start from, judged as kube-apiserver judges it:
//! not a version at all is a 400; one the store has not reached yet is waited for a moment (a
//! client may have read it from another replica), then answered 504 "Too large resource
//! version" with a hint to retry, never an empty 200.

use std::time::Duration;

use super::status::ApiError;
use crate::store::Store;

/// How long a version ahead of the store is waited for.
const AHEAD_WAIT: Duration = Duration::from_secs(3);
const POLL: Duration = Duration::from_millis(20);

/// The requested version: `None` for none (or `0`: any).
pub fn parse(requested: Option<&str>) -> Result<Option<u64>, ApiError> {
    match requested.filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(text) => match text.parse::<u64>() {
            Ok(0) => Ok(None),
            Ok(rv) => Ok(Some(rv)),
            Err(_) => Err(ApiError::bad_request(format!(
                "resourceVersion: Invalid value: \"{text}\": must be a resource version the server gave"
            ))),
        },
    }
}

/// Waits until `store` has reached `rv`; the 504 when it does not within [`AHEAD_WAIT`].
pub async fn reached(store: &Store, rv: u64) -> Result<(), ApiError> {
    let deadline = tokio::time::Instant::now() + AHEAD_WAIT;
    loop {
        let current = store.current_rv().await;
        if current >= rv {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let mut e = ApiError::new(
                504,
                "Timeout",
                format!("Too large resource version: {rv}, current: {current}"),
            );
            e.details = Some(
                serde_json::json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
            );
            return Err(e);
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_as_kube_apiserver_reads_them() {
        assert_eq!(parse(None).unwrap(), None);
        assert_eq!(parse(Some("")).unwrap(), None);
        assert_eq!(parse(Some("0")).unwrap(), None);
        assert_eq!(parse(Some("42")).unwrap(), Some(42));
        let e = parse(Some("abc")).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("\"abc\""), "{}", e.message);
    }
}
