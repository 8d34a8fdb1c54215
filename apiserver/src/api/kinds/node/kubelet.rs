//! Forwarding to a node's kubelet, as kube-apiserver does for `pods/log` and `nodes/proxy`:
//! where to go is decided in [`crate::api::kubelet_location`]; the connection is one of the
//! aggregator's kept-alive pools.

use axum::http::header;
use serde_json::Value;

use crate::api::{
    Ctx, Writes,
    aggregation::{chain, proxy},
    kept_alive::Lease,
    kubelet_location::{KubeletAddress, kubelet_address},
    status::ApiError,
    store_error::store_error,
};
use crate::store::ObjectKey;

/// How much of a kubelet's refusal is read into the error it becomes.
pub(in crate::api::kinds) const MAX_REFUSAL_BYTES: usize = 64 << 10;

/// The stored Node `name`.
pub(in crate::api::kinds) async fn node(
    st: &Writes,
    ctx: &Ctx,
    name: &str,
) -> Result<Value, ApiError> {
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
pub(in crate::api::kinds) async fn send(
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
