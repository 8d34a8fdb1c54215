//! `instances/<name>/log` (instances.md §5): the log of the Instance's `main` container, read
//! through the cluster's `pods/log` of its same-named Pod and streamed back as it comes (with
//! `follow`, until the container ends or the caller goes). The options are `PodLogOptions`'
//! subset the reference serves (`follow`, `sinceSeconds`, `sinceTime`, `timestamps`,
//! `tailLines`, `limitBytes`); the cluster checks them, and what it refuses is refused here with
//! its code and words.

use axum::{
    body::Body,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use gpustack_kube_rest::status::ApiError;
use http_body_util::BodyExt;

use super::instance_lookup::{instance_and_pod, unavailable};
use crate::controllers::instance_cache::InstanceCache;

/// The options passed on to `pods/log`.
pub const OPTIONS: [&str; 6] = [
    "follow",
    "sinceSeconds",
    "sinceTime",
    "timestamps",
    "tailLines",
    "limitBytes",
];
/// The container whose log an Instance's is.
pub const CONTAINER: &str = "main";
/// How much of a refusal is read into the error it becomes.
const MAX_REFUSAL_BYTES: usize = 64 << 10;

/// A log query that does not decode.
#[derive(Debug, thiserror::Error)]
#[error("the query: {0}")]
pub struct BadQuery(#[from] serde_urlencoded::de::Error);

/// The `pods/log` path (with its query) of the Instance `namespace/name`'s log asked by `query`.
pub fn pod_log_path(namespace: &str, name: &str, query: Option<&str>) -> Result<String, BadQuery> {
    let asked: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or(""))?;
    let mut pairs = vec![("container".to_owned(), CONTAINER.to_owned())];
    pairs.extend(
        asked
            .into_iter()
            .filter(|(k, _)| OPTIONS.contains(&k.as_str())),
    );
    let query = serde_urlencoded::to_string(&pairs).unwrap_or_default();
    Ok(format!(
        "/api/v1/namespaces/{namespace}/pods/{name}/log?{query}"
    ))
}

/// The reason word Kubernetes gives `code`.
fn reason_of(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        403 => "Forbidden",
        404 => "NotFound",
        422 => "Invalid",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    }
}

/// Serves `GET .../namespaces/<namespace>/instances/<name>/log`.
pub async fn serve(
    client: &kube::Client,
    cache: &InstanceCache,
    namespace: &str,
    name: &str,
    query: Option<&str>,
) -> Result<Response, ApiError> {
    let path =
        pod_log_path(namespace, name, query).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let (instance, pod) = instance_and_pod(client, cache, namespace, name).await?;
    if pod.is_none() {
        let phase = instance
            .status
            .as_ref()
            .map(|s| s.phase().to_owned())
            .unwrap_or_default();
        return Err(ApiError::bad_request(format!(
            "instance \"{name}\" has no Pod to read a log from (phase {phase:?})"
        )));
    }
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .map_err(unavailable)?;
    let status = response.status();
    if !status.is_success() {
        let body = http_body_util::Limited::new(response.into_body(), MAX_REFUSAL_BYTES)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let message = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&body).trim().to_owned());
        return Err(ApiError::new(
            status.as_u16(),
            reason_of(status.as_u16()),
            message,
        ));
    }
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        Body::new(response.into_body()),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_main_containers_log_is_asked_with_the_served_options_only() {
        assert_eq!(
            pod_log_path("team", "box", None).unwrap(),
            "/api/v1/namespaces/team/pods/box/log?container=main"
        );
        assert_eq!(
            pod_log_path(
                "team",
                "box",
                Some("follow=true&container=sshd&tailLines=3&sinceTime=2026-01-01T00%3A00%3A00Z")
            )
            .unwrap(),
            "/api/v1/namespaces/team/pods/box/log?container=main&follow=true&tailLines=3&sinceTime=2026-01-01T00%3A00%3A00Z"
        );
    }
}
