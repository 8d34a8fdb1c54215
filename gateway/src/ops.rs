//! The hub's operations API, its own router in front of the clusters' on every listener: the
//! upstream subscriptions (`/apis/workers`, at the root or under a served cluster's prefix:
//! status, subscribe, unsubscribe) and Prometheus metrics (`/metrics`, at the root). Every
//! other path is the API server's.
//!
//! Who may do what over HTTPS (the unix socket's file mode is its access control): the token of
//! `--token-file` may do everything; a served cluster's token may read its own cluster's status
//! and metrics; only the `--token-file` token may subscribe or unsubscribe.

use std::{path::PathBuf, sync::Arc};

use axum::{
    Router,
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header, request::Parts},
    response::{IntoResponse, Response},
    routing::any,
};
use gpustack_apiserver::{
    api::{
        caller::{Caller, TokenAccess},
        too_large,
    },
    store::Store,
};
use gpustack_kube_rest::{path::split_cluster, response::json_response, status::ApiError};
use serde_json::json;
use tower::ServiceExt;

use crate::{
    metrics::{HubMetrics, encode, own_cluster_only},
    mirror::{
        SubscribeError, Subscriptions,
        kubeconfig_policy::{self, Origin},
        request::{SubscribeRequest, unsubscribe_clusters},
    },
};

/// Where the upstreams' status and the subscription API are served (under any served
/// cluster's prefix, or at the root).
const WORKERS_PATH: &str = "/apis/workers";

/// Where Prometheus scrapes the gateway (at the root only).
const METRICS_PATH: &str = "/metrics";

/// What the operations API works on, shared by every listener.
pub struct Ops {
    /// The upstream mirrors.
    pub subscriptions: Subscriptions,
    /// The object store the API serves.
    pub store: Store,
    /// The hub's series, in the registry the API server counts its requests in too.
    pub metrics: HubMetrics,
    /// Directories whose kubeconfigs run-time subscriptions may name (`--data-dir` is always
    /// one; `--subscription-kubeconfig-dir` adds more).
    pub subscription_kubeconfig_dirs: Vec<PathBuf>,
    /// The largest request body accepted.
    pub max_body_bytes: usize,
}

/// The operations API on one listener.
struct Listener {
    ops: Arc<Ops>,
    access: TokenAccess,
    /// The clusters: every path that is not the hub's.
    api: Router,
}

/// One listener's router: the hub's endpoints, and `api` for every other path.
pub fn router(ops: Arc<Ops>, access: TokenAccess, api: Router) -> Router {
    let listener = Arc::new(Listener { ops, access, api });
    Router::new()
        .route(METRICS_PATH, any(metrics))
        .route(WORKERS_PATH, any(workers))
        .fallback(cluster_workers_or_api)
        .with_state(listener)
}

/// `/clusters/NAME/apis/workers` of a served cluster is the hub's; anything else (an unknown
/// cluster's name included, which the API answers 404 or 401) is the API server's.
async fn cluster_workers_or_api(State(l): State<Arc<Listener>>, req: Request) -> Response {
    let (named, rest) = split_cluster(req.uri().path());
    let served = named.is_some_and(|n| l.access.served.get(n).is_some());
    if served && rest == WORKERS_PATH {
        let (parts, body) = req.into_parts();
        return answer_workers(&l, &parts, body).await;
    }
    match l.api.clone().oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

fn query_pairs(parts: &Parts) -> Vec<(String, String)> {
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
        .map(|q| q.0)
        .unwrap_or_default()
}

async fn workers(State(l): State<Arc<Listener>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    answer_workers(&l, &parts, body).await
}

/// `/apis/workers`: `GET` every upstream's status (or those named by `cluster`), `POST`
/// subscribes, `DELETE` unsubscribes.
async fn answer_workers(l: &Listener, parts: &Parts, body: axum::body::Body) -> Response {
    // Who asks is settled before anything is read: an anonymous client cannot make the
    // gateway buffer a body.
    let who = l.access.caller(&parts.headers);
    if who == Caller::Unknown {
        return ApiError::unauthorized().into_response();
    }
    let pairs = query_pairs(parts);
    match parts.method {
        Method::GET => {
            let mut only: Vec<String> = pairs
                .iter()
                .filter(|(k, _)| k == "cluster")
                .map(|(_, v)| v.clone())
                .collect();
            // A cluster's token sees its own cluster's status only (another's last error
            // could carry what that cluster's subscriber should see alone).
            if let Caller::ClusterReader(own) = &who {
                only.retain(|c| c == own);
                if only.is_empty() {
                    only.push(own.clone());
                }
            }
            let filter = (!only.is_empty()).then_some(only.as_slice());
            json_response(StatusCode::OK, &l.ops.subscriptions.board().to_json(filter))
        }
        Method::POST | Method::DELETE if who != Caller::Admin => ApiError::new(
            403,
            "Forbidden",
            "subscribing and unsubscribing need the gateway's admin token (--token-file)",
        )
        .into_response(),
        Method::POST => match axum::body::to_bytes(body, l.ops.max_body_bytes).await {
            Ok(body) => subscribe(&l.ops, &pairs, &body).await,
            Err(_) => too_large(),
        },
        Method::DELETE => unsubscribe(&l.ops, &pairs).await,
        ref m => ApiError::method_not_allowed(m.as_str()).into_response(),
    }
}

async fn subscribe(ops: &Ops, pairs: &[(String, String)], body: &[u8]) -> Response {
    let request = if body.is_empty() {
        SubscribeRequest::from_query(pairs)
    } else if pairs.is_empty() {
        SubscribeRequest::from_json(body)
    } else {
        return ApiError::bad_request(
            "give the subscription either as query parameters or as a JSON body, not both",
        )
        .into_response();
    };
    let mut request = match request {
        Ok(r) => r,
        Err(message) => return ApiError::bad_request(message).into_response(),
    };
    // A subscription may only name a kubeconfig under the allowed directories, and one that
    // carries its credentials inline and runs no plugin.
    if let Some(path) = &request.kubeconfig {
        let allowed = &ops.subscription_kubeconfig_dirs;
        let checked = kubeconfig_policy::check_location(path, allowed)
            .and_then(|real| kubeconfig_policy::load(&real, Origin::Subscription).map(|_| real));
        match checked {
            Ok(real) => request.kubeconfig = Some(real),
            Err(e) => return ApiError::bad_request(e.to_string()).into_response(),
        }
    }
    let subs = &ops.subscriptions;
    let mut items = Vec::new();
    for upstream in request.upstreams(subs.mode()) {
        let name = upstream.name.clone();
        match subs.subscribe(upstream, request.force, true).await {
            Ok(outcome) => items.push(json!({"cluster": name, "outcome": outcome.as_str()})),
            Err(e @ SubscribeError::Embedded(_)) => {
                return ApiError::new(409, "Conflict", e.to_string()).into_response();
            }
            Err(e) => return ApiError::internal(e.to_string()).into_response(),
        }
    }
    json_response(
        StatusCode::ACCEPTED,
        &json!({"kind": "WorkerSubscription", "apiVersion": "gateway.gpustack.ai/v1", "items": items}),
    )
}

async fn unsubscribe(ops: &Ops, pairs: &[(String, String)]) -> Response {
    let clusters = match unsubscribe_clusters(pairs) {
        Ok(c) => c,
        Err(message) => return ApiError::bad_request(message).into_response(),
    };
    // Refused before anything is removed.
    for c in &clusters {
        if let Err(e) = ops.subscriptions.may_unsubscribe(c).await {
            return ApiError::new(409, "Conflict", e.to_string()).into_response();
        }
    }
    let mut removed = Vec::new();
    for c in &clusters {
        match ops.subscriptions.unsubscribe(c).await {
            Ok(true) => removed.push(c.clone()),
            Ok(false) => {}
            Err(e) => return ApiError::internal(e.to_string()).into_response(),
        }
    }
    if removed.is_empty() {
        return ApiError::new(
            404,
            "NotFound",
            format!("no subscription to {}", clusters.join(", ")),
        )
        .into_response();
    }
    json_response(StatusCode::OK, &json!({"removed": removed}))
}

/// `GET /metrics`: the Prometheus text exposition of the upstreams' state, the store and the
/// requests served. A cluster's token sees its own cluster's series only: the other clusters'
/// names and counts are theirs, and the gateway-wide series (the store's version, requests by
/// code) sum every cluster's activity, so they are the admin's.
async fn metrics(State(l): State<Arc<Listener>>, headers: HeaderMap) -> Response {
    let who = l.access.caller(&headers);
    if who == Caller::Unknown {
        return ApiError::unauthorized().into_response();
    }
    let families = l.ops.metrics.gather(l.ops.store.current_rv().await);
    let families = match &who {
        Caller::ClusterReader(own) => own_cluster_only(families, own),
        _ => families,
    };
    match encode(&families) {
        Ok(text) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => ApiError::internal(format!("encoding the metrics: {e}")).into_response(),
    }
}
