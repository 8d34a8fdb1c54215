//! A store failure as the API answers it.

use super::status::ApiError;
use crate::store::StoreError;

/// 400 for an object nested too deep to store; 503 naming the cause while the database cannot
/// be reached (a hub's PostgreSQL restarting: the client retries, and is never answered from
/// anywhere else); else 500.
pub(crate) fn store_error(e: StoreError) -> ApiError {
    match e {
        e @ StoreError::TooDeep { .. } => ApiError::bad_request(e.to_string()),
        e if e.unavailable() => ApiError::new(
            503,
            "ServiceUnavailable",
            format!(
                "the store's database cannot be reached ({}); try again when it is back",
                causes(&e)
            ),
        ),
        e => ApiError::internal(format!("storage error: {e}")),
    }
}

/// `e` and its sources, innermost last.
fn causes(e: &StoreError) -> String {
    let mut text = e.to_string();
    let mut next = std::error::Error::source(e);
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_out_of_reach_is_503_with_its_cause_and_other_failures_500() {
        let gone = StoreError::Database(sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::NotFound,
        )));
        let e = store_error(StoreError::Batch(std::sync::Arc::new(gone)));
        assert_eq!((e.code, e.reason), (503, "ServiceUnavailable"));
        assert!(
            e.message.contains("cannot be reached") && e.message.contains("not found"),
            "{}",
            e.message
        );
        let e = store_error(StoreError::Database(sqlx::Error::PoolTimedOut));
        assert_eq!(e.code, 503, "{}", e.message);
        let e = store_error(StoreError::Database(sqlx::Error::RowNotFound));
        assert_eq!(e.code, 500, "{}", e.message);
        assert_eq!(store_error(StoreError::NotFound).code, 500);
    }
}
