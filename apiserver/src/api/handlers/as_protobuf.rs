//! Answers in Kubernetes protobuf for clients that accept nothing else: the JSON answer of a
//! get, list, create, update, patch or delete, re-encoded. Kinds without a protobuf form
//! (custom resources) were refused before the verb ran; an answer that does not fit its
//! kind's message is refused here.

use axum::{
    body::{Body, to_bytes},
    http::header,
    response::Response,
};
use serde_json::Value;

use crate::api::{protobuf, status::ApiError};

/// The largest JSON answer re-encoded (a list bigger than this is refused, not buffered).
const MAX_ANSWER_BYTES: usize = 256 << 20;

pub(super) async fn transcode(response: Response) -> Result<Response, ApiError> {
    let (mut parts, body) = response.into_parts();
    let body = to_bytes(body, MAX_ANSWER_BYTES)
        .await
        .map_err(|e| ApiError::internal(format!("reading the answer to re-encode: {e}")))?;
    let refuse = |why: String| {
        ApiError::new(
            406,
            "NotAcceptable",
            format!("only application/json and application/yaml are available here: {why}"),
        )
    };
    let obj: Value = serde_json::from_slice(&body).map_err(|e| refuse(e.to_string()))?;
    let encoded = protobuf::encode(&obj).map_err(|e| refuse(e.to_string()))?;
    parts.headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(protobuf::MEDIA_TYPE),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Ok(Response::from_parts(parts, Body::from(encoded)))
}
