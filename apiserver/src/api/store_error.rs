//! A store failure as the API answers it.

use super::status::ApiError;
use crate::store::StoreError;

/// 400 for an object nested too deep to store, else 500.
pub(crate) fn store_error(e: StoreError) -> ApiError {
    match e {
        e @ StoreError::TooDeep { .. } => ApiError::bad_request(e.to_string()),
        e => ApiError::internal(format!("storage error: {e}")),
    }
}
