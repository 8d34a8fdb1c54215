//! `nodes/NAME/proxy/PATH`: the request passed to the node's kubelet at `PATH` (with its
//! query), and its answer passed back as it is.

use axum::response::Response;
use futures::future::BoxFuture;

use super::kubelet::{node, send};
use crate::api::{aggregation::proxy, kinds::subresource::ObjectRequest, status::ApiError};

pub(super) fn serve<'a>(r: &'a ObjectRequest<'a>) -> BoxFuture<'a, Result<Response, ApiError>> {
    Box::pin(node_proxy(r))
}

async fn node_proxy(r: &ObjectRequest<'_>) -> Result<Response, ApiError> {
    let (st, ctx, name) = (r.writes, r.ctx, r.name);
    let node = node(st, ctx, name).await?;
    let marker = format!("/{}/{name}/proxy", r.def.plural);
    let tail = ctx
        .path
        .find(&marker)
        .map(|i| &ctx.path[i + marker.len()..])
        .unwrap_or("");
    let mut path = if tail.starts_with('/') {
        tail.to_owned()
    } else {
        format!("/{tail}")
    };
    let query: Vec<String> = ctx
        .query
        .iter()
        .map(|(k, v)| {
            let enc = |s: &str| {
                percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC)
                    .to_string()
            };
            format!("{}={}", enc(k), enc(v))
        })
        .collect();
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    let (_, response) = send(st, ctx, &node, &path).await?;
    Ok(proxy::respond(
        response,
        st.aggregator.timeouts().longest,
        (),
    ))
}
