//! What the node's kubelet answers, forwarded to it as kube-apiserver forwards it: `pods/log`
//! (the container log, streamed as the kubelet writes it) and `nodes/proxy` (any kubelet path,
//! passed through). Where to go is decided in [`crate::api::kubelet_location`].

use super::target::*;
use crate::api::{
    aggregation::{chain, proxy},
    kept_alive::Lease,
    kubelet_location::{KubeletAddress, kubelet_address, log_location},
};
use http_body_util::BodyExt;

/// How much of a kubelet's refusal is read into the error it becomes.
const MAX_REFUSAL_BYTES: usize = 64 << 10;

/// The stored Node `name`.
async fn node(st: &Writes, ctx: &Ctx, name: &str) -> Result<Value, ApiError> {
    let key = ObjectKey {
        cluster: ctx.cluster.clone(),
        group: String::new(),
        resource: "nodes".into(),
        namespace: String::new(),
        name: name.to_owned(),
    };
    st.core
        .store
        .get(&key)
        .await
        .map_err(store_error)?
        .map(|(_, n)| n)
        .ok_or_else(|| ApiError::not_found("", "nodes", name))
}

fn unreachable(address: &KubeletAddress, e: &proxy::ProxyError) -> ApiError {
    ApiError::new(
        503,
        "ServiceUnavailable",
        format!(
            "error trying to reach the kubelet at {}:{}: {}",
            address.host,
            address.port,
            chain(e)
        ),
    )
}

/// Sends `method path_and_query` to the kubelet of `node`.
async fn send(
    st: &Writes,
    ctx: &Ctx,
    node: &Value,
    path_and_query: &str,
) -> Result<
    (
        KubeletAddress,
        (hyper::Response<hyper::body::Incoming>, Lease),
    ),
    ApiError,
> {
    // A mirror's nodes are reached through their own cluster, never through the hub.
    if ctx.read_only {
        return Err(ApiError::not_found_path());
    }
    let address = kubelet_address(node)?;
    let pool = st
        .aggregator
        .kubelet(&address.host, address.port)
        .map_err(|e| ApiError::internal(chain(&e)))?;
    let mut headers = axum::http::HeaderMap::new();
    for name in [header::ACCEPT, header::CONTENT_TYPE] {
        if let Some(v) = ctx.headers.get(&name) {
            headers.insert(name, v.clone());
        }
    }
    let response = proxy::send(
        &pool,
        ctx.method.clone(),
        path_and_query,
        headers,
        ctx.body.clone(),
        &st.aggregator.timeouts(),
    )
    .await
    .map_err(|e| unreachable(&address, &e))?;
    Ok((address, response))
}

/// `GET pods/NAME/log`: the container's log from its node's kubelet, streamed; what the
/// kubelet refuses becomes an error with its code and words.
pub(super) async fn pod_log(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
    name: &str,
) -> Result<Response, ApiError> {
    let (_, pod) = t.stored(&st.core, &ctx.cluster, name).await?;
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

/// `nodes/NAME/proxy/PATH`: the request passed to the node's kubelet at `PATH` (with its
/// query), and its answer passed back as it is.
pub(super) async fn node_proxy(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
    name: &str,
) -> Result<Response, ApiError> {
    let node = node(st, ctx, name).await?;
    let marker = format!("/{}/{name}/proxy", t.def.plural);
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
