//! The hub's operations API, its own router in front of the clusters' on every listener: the
//! upstream subscriptions (`/apis/workers`, at the root or under a served cluster's prefix:
//! status, subscribe, unsubscribe) and Prometheus metrics (`/metrics`, at the root). Every
//! other path is the API server's.
//!
//! Who may do what over HTTPS (the unix socket's file mode is its access control): the token of
//! `--token-file` may do everything; a served cluster's token may read its own cluster's status
//! and metrics; only the `--token-file` token may subscribe or unsubscribe.

use std::{collections::BTreeMap, fmt::Write as _, path::PathBuf, sync::Arc};

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
        request_metrics::RequestMetrics,
        too_large,
    },
    store::Store,
};
use gpustack_kube_rest::{path::split_cluster, response::json_response, status::ApiError};
use serde_json::json;
use tower::ServiceExt;

use crate::mirror::{
    FailurePhase, Phase, SubscribeError, Subscriptions,
    kubeconfig_policy::{self, Origin},
    request::{SubscribeRequest, unsubscribe_clusters},
};

/// Where the upstreams' status and the subscription API are served (under any served
/// cluster's prefix, or at the root).
const WORKERS_PATH: &str = "/apis/workers";

/// Where Prometheus scrapes the gateway (at the root only).
const METRICS_PATH: &str = "/metrics";

/// What the operations API works on, shared by every listener.
pub struct Ops {
    pub subscriptions: Subscriptions,
    pub store: Store,
    /// The API server's count of the requests answered.
    pub requests: RequestMetrics,
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

/// A label value in the exposition format.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
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
    let mut upstreams = l.ops.subscriptions.board().all();
    let text = match &who {
        Caller::ClusterReader(own) => {
            upstreams.retain(|(cluster, _)| cluster == own);
            render_metrics(&upstreams, None)
        }
        _ => {
            let requests = l.ops.requests.snapshot();
            let gateway = GatewaySeries {
                resource_version: l.ops.store.current_rv().await,
                requests: &requests,
            };
            render_metrics(&upstreams, Some(&gateway))
        }
    };
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// The series about the gateway as a whole rather than one cluster.
pub struct GatewaySeries<'a> {
    /// The newest resourceVersion the store handed out.
    pub resource_version: u64,
    /// Requests answered, by method and status code.
    pub requests: &'a BTreeMap<(String, u16), u64>,
}

/// The `# HELP` and `# TYPE` lines of a metric family.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

const PHASES: [Phase; 4] = [
    Phase::Pending,
    Phase::Syncing,
    Phase::Ready,
    Phase::Degraded,
];

/// The exposition text (pure, so its shape is tested without a server).
pub fn render_metrics(
    upstreams: &[(String, crate::mirror::status::UpstreamStatus)],
    gateway: Option<&GatewaySeries>,
) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "gpustack_gateway_upstream_phase",
        "gauge",
        "1 for the phase each upstream's mirror is in, 0 for the others.",
    );
    for (c, s) in upstreams {
        for p in PHASES {
            let on = u8::from(s.phase == p);
            let _ = writeln!(
                out,
                "gpustack_gateway_upstream_phase{{cluster=\"{}\",phase=\"{}\"}} {on}",
                escape(c),
                p.as_str()
            );
        }
    }
    family(
        &mut out,
        "gpustack_gateway_upstream_last_sync_timestamp_seconds",
        "gauge",
        "When each upstream's mirror was last known to match it (Unix time).",
    );
    for (c, s) in upstreams {
        if let Some(t) = s.last_sync_time {
            let _ = writeln!(
                out,
                "gpustack_gateway_upstream_last_sync_timestamp_seconds{{cluster=\"{}\"}} {}",
                escape(c),
                t.as_second()
            );
        }
    }
    family(
        &mut out,
        "gpustack_gateway_upstream_objects",
        "gauge",
        "Mirrored objects per upstream and kind.",
    );
    for (c, s) in upstreams {
        for (kind, n) in &s.counts {
            let _ = writeln!(
                out,
                "gpustack_gateway_upstream_objects{{cluster=\"{}\",kind=\"{}\"}} {n}",
                escape(c),
                escape(kind)
            );
        }
    }
    family(
        &mut out,
        "gpustack_gateway_upstream_failures_total",
        "counter",
        "Mirror failures per upstream since the gateway started, by the phase that failed (discovery, list, watch, write, sweep).",
    );
    for (c, s) in upstreams {
        for phase in FailurePhase::ALL {
            let _ = writeln!(
                out,
                "gpustack_gateway_upstream_failures_total{{cluster=\"{}\",phase=\"{}\"}} {}",
                escape(c),
                phase.as_str(),
                s.failures.get(&phase).copied().unwrap_or(0)
            );
        }
    }
    family(
        &mut out,
        "gpustack_gateway_upstream_relists_total",
        "counter",
        "Lists of a mirrored kind that had been synced before (its stored version could not be resumed, or its watch expired), per upstream since the gateway started.",
    );
    for (c, s) in upstreams {
        let _ = writeln!(
            out,
            "gpustack_gateway_upstream_relists_total{{cluster=\"{}\"}} {}",
            escape(c),
            s.relists
        );
    }
    family(
        &mut out,
        "gpustack_gateway_upstream_resumes_total",
        "counter",
        "Watches of a mirrored kind resumed from a stored version per upstream since the gateway started.",
    );
    for (c, s) in upstreams {
        let _ = writeln!(
            out,
            "gpustack_gateway_upstream_resumes_total{{cluster=\"{}\"}} {}",
            escape(c),
            s.resumes
        );
    }
    if let Some(g) = gateway {
        render_gateway(&mut out, g);
    }
    out
}

fn render_gateway(out: &mut String, g: &GatewaySeries) {
    family(
        out,
        "gpustack_gateway_store_resource_version",
        "gauge",
        "The newest resourceVersion the store handed out.",
    );
    let _ = writeln!(
        out,
        "gpustack_gateway_store_resource_version {}",
        g.resource_version
    );
    family(
        out,
        "gpustack_gateway_http_requests_total",
        "counter",
        "HTTP requests answered, by method and status code.",
    );
    for ((method, code), n) in g.requests {
        let _ = writeln!(
            out,
            "gpustack_gateway_http_requests_total{{method=\"{method}\",code=\"{code}\"}} {n}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::{StatusBoard, status::Happening};

    #[test]
    fn metrics_name_each_upstream_phase_count_and_failure() {
        let board = StatusBoard::new(std::time::Duration::from_secs(1));
        board.add("east", None, jiff::Timestamp::UNIX_EPOCH, None);
        board.record(
            "east",
            Happening::Reached {
                served: vec![],
                not_served: vec![],
            },
        );
        board.set_count("east", "Devices.worker.gpustack.ai", 7);
        board.record(
            "east",
            Happening::Failed {
                phase: FailurePhase::Sweep,
                message: "down".into(),
            },
        );
        let mut requests = BTreeMap::new();
        requests.insert(("GET".to_owned(), 200), 3);
        let gateway = GatewaySeries {
            resource_version: 42,
            requests: &requests,
        };
        let text = render_metrics(&board.all(), Some(&gateway));
        for line in [
            "gpustack_gateway_upstream_phase{cluster=\"east\",phase=\"Degraded\"} 1",
            "gpustack_gateway_upstream_phase{cluster=\"east\",phase=\"Ready\"} 0",
            "gpustack_gateway_upstream_objects{cluster=\"east\",kind=\"Devices.worker.gpustack.ai\"} 7",
            "gpustack_gateway_upstream_failures_total{cluster=\"east\",phase=\"sweep\"} 1",
            "gpustack_gateway_upstream_failures_total{cluster=\"east\",phase=\"watch\"} 0",
            "gpustack_gateway_store_resource_version 42",
            "gpustack_gateway_http_requests_total{method=\"GET\",code=\"200\"} 3",
            "# TYPE gpustack_gateway_upstream_failures_total counter",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(
            text.contains(
                "gpustack_gateway_upstream_last_sync_timestamp_seconds{cluster=\"east\"}"
            )
        );
        // Every sample line belongs to a declared family.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let name = l.split(['{', ' ']).next().unwrap();
            assert!(text.contains(&format!("# TYPE {name} ")), "{l}");
        } // Without the gateway's own series (a cluster's reader): the upstreams' alone.
        let text = render_metrics(&board.all(), None);
        assert!(text.contains("cluster=\"east\""), "{text}");
        assert!(!text.contains("gpustack_gateway_store_"), "{text}");
        assert!(!text.contains("gpustack_gateway_http_"), "{text}");
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
