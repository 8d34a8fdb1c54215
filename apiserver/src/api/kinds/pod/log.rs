//! `GET pods/NAME/log`: the container's log from its node's kubelet, streamed; what the
//! kubelet refuses becomes an error with its code and words.

use axum::{
    http::{Method, header},
    response::Response,
};
use futures::future::BoxFuture;
use http_body_util::BodyExt;

use crate::api::{
    aggregation::proxy,
    kinds::node::kubelet::{MAX_REFUSAL_BYTES, node, send},
    kinds::subresource::{ObjectRequest, not_allowed},
    kubelet_location::log_location,
    status::ApiError,
};

pub(super) fn serve<'a>(r: &'a ObjectRequest<'a>) -> BoxFuture<'a, Result<Response, ApiError>> {
    Box::pin(async move {
        match r.ctx.method {
            Method::GET => pod_log(r).await,
            _ => Err(not_allowed(r)),
        }
    })
}

async fn pod_log(r: &ObjectRequest<'_>) -> Result<Response, ApiError> {
    let (st, ctx) = (r.writes, r.ctx);
    let (_, pod) = r.verbs.stored().await?;
    let (node_name, path) = log_location(&pod, &ctx.query)?;
    let node = node(st, ctx, &node_name).await?;
    let (_, (response, lease)) = send(st, ctx, &node, &path).await?;
    let status = response.status();
    if !status.is_success() {
        drop(lease);
        let body = http_body_util::Limited::new(response.into_body(), MAX_REFUSAL_BYTES)
            .collect()
            .await
            .map(|b| String::from_utf8_lossy(&b.to_bytes()).trim().to_owned())
            .unwrap_or_default();
        let reason = match status.as_u16() {
            400 => "BadRequest",
            403 => "Forbidden",
            404 => "NotFound",
            _ => "InternalError",
        };
        return Err(ApiError::new(status.as_u16(), reason, body));
    }
    let mut out = proxy::respond((response, lease), st.aggregator.timeouts().longest, ());
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    Ok(out)
}
