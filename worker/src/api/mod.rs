//! The worker's aggregated API: discovery, OpenAPI, the `worker.gpustack.ai/v1` views and
//! `gpustack.ai/v1` settings, behind delegated authentication and authorization, with
//! `/livez`, `/readyz` and `/metrics`. Each request's span (opened around the listener, see
//! [`route_template`]) joins the caller's trace, and the cluster requests it makes carry it on.

pub mod cors;
pub mod flavors;
pub mod instance_accelerators;
pub mod instance_device_snapshots;
pub mod instance_events;
pub mod instance_log;
pub mod instance_lookup;
pub mod instance_metrics;
pub mod metrics;
pub mod resources;
pub mod settings;
pub mod views;

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Instant,
};

use axum::{
    Router,
    body::Body,
    extract::{ConnectInfo, Request, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use gpustack_kube_rest::{
    discovery::ServerVersion,
    documents,
    path::{Route, parse},
    status::ApiError,
};

use crate::{
    audit::{Audit, Entry},
    auth::{Auth, PeerCertificates, identity},
};
use views::{Asked, View};

/// Everything a request needs.
pub struct ApiServer {
    /// The cluster client.
    pub client: kube::Client,
    /// Everything served, described once (building the views' schemas is not free).
    pub defs: Vec<gpustack_kube_rest::resource::ResourceDef>,
    /// The served views of the custom resources.
    pub views: Vec<View>,
    /// The settings resource.
    pub settings: settings::Settings,
    /// The flavors resource.
    pub flavors: flavors::Flavors,
    /// Authentication and authorization.
    pub auth: Arc<Auth>,
    /// The audit log, when one is configured.
    pub audit: Option<Audit>,
    /// The CORS policy.
    pub cors: cors::Cors,
    /// The request metrics.
    pub metrics: metrics::Metrics,
    /// `/metrics` asks the cluster who may read it (else anyone may).
    pub metrics_auth_delegated: bool,
    /// Turns true once the install pass has succeeded once.
    pub ready: Arc<AtomicBool>,
    /// `fleet.gpustack.ai/v1`, when a gateway is configured.
    pub fleet: Option<Arc<crate::fleet::Fleet>>,
    /// What `/readyz?verbose` says of the applications (image mode).
    pub applications: Arc<crate::applications::Health>,
    /// Nodes' kubelet stats, kept briefly for `instances/metrics`.
    pub node_stats: instance_metrics::NodeStats,
    /// Nodes' device manager snapshots, kept briefly for `instances/metrics`.
    pub device_snapshots: instance_device_snapshots::DeviceSnapshots,
    /// Instances and their Pods as the worker caches them, for the `instances/*` subresources.
    pub instances: Arc<crate::controllers::instance_cache::InstanceCache>,
}

impl ApiServer {
    /// What discovery and OpenAPI describe: the worker's groups, and the fleet's once the gateway
    /// has answered (a worker without a hub announces no group it cannot serve).
    fn served_defs(&self) -> Vec<gpustack_kube_rest::resource::ResourceDef> {
        let mut defs = self.defs.clone();
        if let Some(fleet) = self.fleet.as_ref().filter(|f| f.has_answered()) {
            defs.extend(fleet.defs.iter().cloned());
        }
        defs
    }
}

/// What `/version` answers.
pub fn server_version() -> ServerVersion {
    ServerVersion {
        major: "1".into(),
        minor: "33".into(),
        git_version: concat!("v1.33.0+gpustack-worker-", env!("CARGO_PKG_VERSION")).into(),
    }
}

/// `/readyz`: `ok` once the install is done; with `?verbose`, a line per check as
/// kube-apiserver writes them, and the applications the worker carries on without (`[!]`).
fn readyz(server: &ApiServer, query: Option<&str>) -> Response {
    let ready = server.ready.load(Ordering::Relaxed);
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let verbose = query.is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    });
    if !verbose {
        let body = if ready { "ok" } else { "install not finished" };
        return (status, body).into_response();
    }
    let mut lines = vec![if ready {
        "[+]install ok".to_owned()
    } else {
        "[-]install failed: install not finished".to_owned()
    }];
    lines.extend(server.applications.readyz_lines());
    lines.push(if ready {
        "readyz check passed".to_owned()
    } else {
        "readyz check failed".to_owned()
    });
    (status, lines.join("\n") + "\n").into_response()
}

/// The route of `path` as its span names it: a webhook's or `/metrics` as they are, anything
/// else as a Kubernetes path with what names objects left out
/// ([`gpustack_kube_rest::path::template`]).
pub fn route_template(path: &str) -> String {
    let fixed = path == "/metrics"
        || crate::admission::hooks::Hook::ALL
            .iter()
            .any(|h| h.path() == path);
    if fixed {
        path.to_owned()
    } else {
        gpustack_kube_rest::path::template(path)
    }
}

/// The HTTP routes of the worker API.
pub fn router(server: Arc<ApiServer>) -> Router {
    Router::new().fallback(handle).with_state(server)
}

async fn handle(State(server): State<Arc<ApiServer>>, req: Request) -> Response {
    let received = jiff::Timestamp::now();
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().map(str::to_owned);
    let origin = parts.headers.get(header::ORIGIN).cloned();
    if let Some(preflight) = server.cors.preflight(&parts.method, origin.as_ref()) {
        return preflight;
    }
    match path.as_str() {
        "/livez" | "/healthz" => return (StatusCode::OK, "ok").into_response(),
        "/readyz" => return readyz(&server, query.as_deref()),
        "/metrics" => return scrape(&server, &parts).await,
        _ => {}
    }
    let route = parse(&path);
    let watch =
        views::wants_watch(query.as_deref()) || matches!(&route, Route::Resource(p) if p.watch);
    let attrs = identity::attributes(&parts.method, &path, watch);
    let peer = parts.extensions.get::<PeerCertificates>();
    let answer = match server
        .auth
        .check(peer, &parts.headers, &parts.method, &path, watch)
        .await
    {
        Err(denied) => Err((denied.user.unwrap_or_default(), denied.error)),
        Ok(user) => {
            let asked = Asked {
                method: parts.method.clone(),
                path: path.clone(),
                query: query.clone(),
                headers: parts.headers.clone(),
                watch,
            };
            match serve(&server, &user, route, asked, body).await {
                Ok(r) => Ok((user, r)),
                Err(e) => Err((user, e)),
            }
        }
    };
    let (user, mut response) = match answer {
        Ok((u, r)) => (u, r),
        Err((u, e)) => (u, e.into_response()),
    };
    server.cors.decorate(origin.as_ref(), &mut response);
    if watch && response.status().is_success() {
        response = response.map(|body| server.metrics.watching(&attrs, body));
    }
    let code = response.status().as_u16();
    server.metrics.observe(&attrs, code, started.elapsed());
    if let Some(audit) = &server.audit {
        let source_ip = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_string());
        let uri = parts.uri.to_string();
        let agent = parts
            .headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        audit.record(&Entry {
            user: &user,
            attrs: &attrs,
            request_uri: &uri,
            source_ip,
            user_agent: agent,
            code,
            received,
        });
    }
    response
}

/// `/metrics`, to a caller the cluster allows `get` on it (unless `--metrics-auth=none`): a
/// token without that access gets 403, never the series.
async fn scrape(server: &ApiServer, parts: &axum::http::request::Parts) -> Response {
    if server.metrics_auth_delegated {
        let peer = parts.extensions.get::<PeerCertificates>();
        if let Err(denied) = server.auth.check_metrics(peer, &parts.headers).await {
            return denied.error.into_response();
        }
    }
    server.metrics.render()
}

/// The group a discovery, OpenAPI or resource path is about.
fn fleet_group_of(route: &Route) -> Option<&str> {
    match route {
        Route::Group(g) => Some(g),
        Route::GroupVersion { group, .. } | Route::OpenApiV3 { group, .. } => Some(group),
        Route::Resource(p) => Some(&p.group),
        _ => None,
    }
}

async fn serve(
    server: &ApiServer,
    user: &crate::auth::identity::User,
    route: Route,
    asked: Asked,
    body: Body,
) -> Result<Response, ApiError> {
    let accept = asked.accept().to_owned();
    if let Some(fleet) = &server.fleet
        && let Some(group) = fleet_group_of(&route)
        && crate::fleet::Fleet::serves(group)
        && let Some(e) = fleet.unavailable()
    {
        // The aggregator checks `/apis/fleet.gpustack.ai/v1`: while the gateway is away the
        // APIService turns unavailable, and the worker's own groups are untouched.
        return Err(e);
    }
    if let Some(answer) =
        documents::answer(&route, &accept, &server_version(), || server.served_defs())
    {
        return answer;
    }
    let Route::Resource(p) = route else {
        return Err(ApiError::not_found_path());
    };
    let body = axum::body::to_bytes(body, views::MAX_BODY)
        .await
        .map_err(|_| {
            ApiError::new(
                413,
                "RequestEntityTooLarge",
                "the request body is too large",
            )
        })?;
    if let Some(fleet) = &server.fleet
        && crate::fleet::Fleet::serves(&p.group)
    {
        let caller = crate::fleet::Caller {
            auth: &server.auth,
            user,
        };
        return fleet.handle(&p, asked, body, caller).await;
    }
    if p.group == resources::SETTINGS_GROUP
        && p.version == resources::SERVED_VERSION
        && p.resource == "settings"
    {
        return server.settings.handle(&p, asked, body).await;
    }
    if p.group == resources::WORKER_GROUP
        && p.version == resources::SERVED_VERSION
        && p.resource == "instancetypeflavors"
    {
        return server.flavors.handle(&p, asked).await;
    }
    if p.group == resources::WORKER_GROUP
        && p.version == resources::SERVED_VERSION
        && p.resource == "instances"
        && p.subresource.as_deref() == Some("events")
        && let (Some(ns), Some(name)) = (&p.namespace, &p.name)
    {
        if asked.method != axum::http::Method::GET {
            return Err(ApiError::method_not_allowed(asked.method.as_str()));
        }
        return instance_events::serve(&server.client, &server.instances, ns, name).await;
    }
    if p.group == resources::WORKER_GROUP
        && p.version == resources::SERVED_VERSION
        && p.resource == "instances"
        && let (Some(sub @ ("log" | "metrics")), Some(ns), Some(name)) =
            (p.subresource.as_deref(), &p.namespace, &p.name)
    {
        if asked.method != axum::http::Method::GET {
            return Err(ApiError::method_not_allowed(asked.method.as_str()));
        }
        return match sub {
            "log" => {
                let cache = &server.instances;
                instance_log::serve(&server.client, cache, ns, name, asked.query.as_deref()).await
            }
            _ => {
                let sources = instance_metrics::Sources {
                    client: &server.client,
                    stats: &server.node_stats,
                    devices: &server.device_snapshots,
                    cache: &server.instances,
                };
                instance_metrics::serve(sources, ns, name).await
            }
        };
    }
    let view = server
        .views
        .iter()
        .find(|v| v.def.group == p.group && v.served == p.version && v.def.plural == p.resource)
        .ok_or_else(ApiError::not_found_path)?;
    if let Some(sub) = &p.subresource
        && view.def.subresource(sub).is_none()
    {
        return Err(ApiError::not_found_path());
    }
    views::handle(&server.client, view, asked, body).await
}
