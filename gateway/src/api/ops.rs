//! The gateway's own endpoints beside the Kubernetes surface: the upstream subscriptions
//! (`/apis/workers`: status, subscribe, unsubscribe) and Prometheus metrics (`/metrics`).
//!
//! Who may do what over HTTPS (the unix socket's file mode is its access control): the token of
//! `--token-file` may do everything; any served cluster's token may read status and metrics;
//! only the `--token-file` token may subscribe or unsubscribe.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    sync::{Arc, Mutex},
};

use axum::{
    http::{HeaderMap, Method, StatusCode, header, request::Parts},
    response::{IntoResponse, Response},
};
use serde_json::json;

use super::{ApiState, bearer, json_response, status::ApiError};
use crate::{
    mirror::kubeconfig_policy::{self, Origin},
    mirror::{
        FailurePhase, Phase, SubscribeError,
        request::{SubscribeRequest, unsubscribe_clusters},
    },
    store::token_hash,
};

/// Who is asking, by bearer token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// No token needed (the unix socket) or the `--token-file` token.
    Admin,
    /// This served cluster's token: it reads what concerns that cluster.
    ClusterReader(String),
    Unknown,
}

pub fn caller(st: &ApiState, headers: &HeaderMap) -> Caller {
    if !st.require_token {
        return Caller::Admin;
    }
    let Some(hash) = bearer(headers).map(token_hash) else {
        return Caller::Unknown;
    };
    if st.admin_token_hash.as_deref() == Some(hash.as_str()) {
        Caller::Admin
    } else if let Some(cluster) = st.served.cluster_of_token(&hash) {
        Caller::ClusterReader(cluster)
    } else {
        Caller::Unknown
    }
}

fn query_pairs(parts: &Parts) -> Vec<(String, String)> {
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
        .map(|q| q.0)
        .unwrap_or_default()
}

/// `/apis/workers`: `GET` every upstream's status (or those named by `cluster`), `POST`
/// subscribes, `DELETE` unsubscribes.
pub async fn workers(st: &ApiState, parts: &Parts, body: axum::body::Body) -> Response {
    // Who asks is settled before anything is read: an anonymous client cannot make the
    // gateway buffer a body.
    let who = caller(st, &parts.headers);
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
            json_response(StatusCode::OK, &st.subscriptions.board().to_json(filter))
        }
        Method::POST | Method::DELETE if who != Caller::Admin => ApiError::new(
            403,
            "Forbidden",
            "subscribing and unsubscribing need the gateway's admin token (--token-file)",
        )
        .into_response(),
        Method::POST => match axum::body::to_bytes(body, st.options.max_body_bytes).await {
            Ok(body) => subscribe(st, &pairs, &body).await,
            Err(_) => super::too_large(),
        },
        Method::DELETE => unsubscribe(st, &pairs).await,
        ref m => ApiError::method_not_allowed(m.as_str()).into_response(),
    }
}

async fn subscribe(st: &ApiState, pairs: &[(String, String)], body: &[u8]) -> Response {
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
        let allowed = &st.options.subscription_kubeconfig_dirs;
        let checked = kubeconfig_policy::check_location(path, allowed)
            .and_then(|real| kubeconfig_policy::load(&real, Origin::Subscription).map(|_| real));
        match checked {
            Ok(real) => request.kubeconfig = Some(real),
            Err(e) => return ApiError::bad_request(e.to_string()).into_response(),
        }
    }
    let subs = &st.subscriptions;
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

async fn unsubscribe(st: &ApiState, pairs: &[(String, String)]) -> Response {
    let clusters = match unsubscribe_clusters(pairs) {
        Ok(c) => c,
        Err(message) => return ApiError::bad_request(message).into_response(),
    };
    let mut removed = Vec::new();
    for c in &clusters {
        match st.subscriptions.unsubscribe(c).await {
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

/// Requests answered, by method and status code.
#[derive(Clone, Default)]
pub struct RequestMetrics {
    counts: Arc<Mutex<BTreeMap<(String, u16), u64>>>,
}

impl RequestMetrics {
    pub fn count(&self, method: &Method, code: StatusCode) {
        let mut m = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry((method_label(method).to_owned(), code.as_u16()))
            .or_default() += 1;
    }

    fn snapshot(&self) -> BTreeMap<(String, u16), u64> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The `method` label: the methods HTTP defines, and `other` for anything a client invents, so
/// that the label set stays bounded whatever is sent.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// Whether HTTP defines `method` (anything else is a client's invention).
pub fn is_standard_method(method: &Method) -> bool {
    method_label(method) != "other"
}

/// A label value in the exposition format.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `GET /metrics`: the Prometheus text exposition of the upstreams' state, the store and the
/// requests served.
pub async fn metrics(st: &ApiState, headers: &HeaderMap) -> Response {
    if caller(st, headers) == Caller::Unknown {
        return ApiError::unauthorized().into_response();
    }
    let upstreams = st.subscriptions.board().all();
    let rv = st.store.current_rv().await;
    let text = render_metrics(&upstreams, rv, &st.metrics.snapshot());
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
    resource_version: u64,
    requests: &BTreeMap<(String, u16), u64>,
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
    family(
        &mut out,
        "gpustack_gateway_store_resource_version",
        "gauge",
        "The newest resourceVersion the store handed out.",
    );
    let _ = writeln!(
        out,
        "gpustack_gateway_store_resource_version {resource_version}"
    );
    family(
        &mut out,
        "gpustack_gateway_http_requests_total",
        "counter",
        "HTTP requests answered, by method and status code.",
    );
    for ((method, code), n) in requests {
        let _ = writeln!(
            out,
            "gpustack_gateway_http_requests_total{{method=\"{method}\",code=\"{code}\"}} {n}"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::{StatusBoard, status::Happening};

    #[test]
    fn metrics_name_each_upstream_phase_count_and_failure() {
        let board = StatusBoard::new(std::time::Duration::from_secs(1));
        board.add("east", None);
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
        let text = render_metrics(&board.all(), 42, &requests);
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
        }
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
