//! The Kubernetes-compatible REST surface of embedded clusters: discovery, CRUD, patch, watch,
//! tables and OpenAPI documents over the [`crate::store`].

pub mod admission;
pub mod aggregation;
pub mod apply;
pub mod auth;
pub mod caller;
pub mod cel_bounds;
pub mod cel_cost;
pub mod cel_names;
pub mod cel_rules;
pub mod cel_rules_crd;
pub mod cluster_defaults;
pub mod clusters;
pub mod conversion;
pub mod csr;
pub mod disruption;
pub mod ephemeral_containers;
pub mod field_errors;
pub(crate) mod handlers;
pub mod kept_alive;
pub(crate) mod kinds;
pub mod kubelet_location;
pub mod metadata_rules;
pub mod node_ports;
pub mod objects;
pub mod patch;
pub mod pipeline;
pub mod pod_resources;
pub mod pod_update;
pub mod request_metrics;
pub mod requested_version;
pub mod scale;
pub mod services;
pub(crate) mod store_error;
pub mod stored_kinds;
pub mod strategic;
pub mod validation;
mod watch;

// The wire layer, shared with other servers (see the `gpustack-kube-rest` crate).
/// The kinds each cluster serves (kept here under its old name for callers).
pub use crate::registry as resources;
pub(crate) use gpustack_kube_rest::response::json_response;
pub use gpustack_kube_rest::{
    discovery, jsonpath, negotiate, openapi, openapi_proto, pagination, path, protobuf, schema,
    selectors, status, table,
};

use std::{collections::HashMap, sync::Arc, time::Duration};

use axum::{
    Router,
    body::Bytes,
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    response::{IntoResponse, Response},
};

use crate::registry::{self, Registry};
use crate::store::{Store, StoreError};
use caller::TokenAccess;
use clusters::ServedClusters;
use path::Route;
use serde_json::Value;
use status::ApiError;

/// Tunables of the API surface.
#[derive(Clone, Debug)]
pub struct ApiOptions {
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// How long a watch lasts when the client sets no `timeoutSeconds`.
    pub default_watch_timeout: Duration,
    /// The longest a watch may last, whatever `timeoutSeconds` asks.
    pub max_watch_timeout: Duration,
    /// Watches one token (or the unix socket's owner) may hold open at once.
    pub max_watches_per_token: usize,
    /// The largest request body accepted.
    pub max_body_bytes: usize,
    /// APIService checks and proxying.
    pub aggregation: aggregation::AggregationOptions,
}

impl Default for ApiOptions {
    fn default() -> Self {
        ApiOptions {
            bookmark_interval: Duration::from_secs(10),
            default_watch_timeout: Duration::from_secs(1800),
            max_watch_timeout: Duration::from_secs(3600),
            max_watches_per_token: 1000,
            max_body_bytes: MAX_BODY_BYTES,
            aggregation: Default::default(),
        }
    }
}

/// What every request reads: the objects, the kinds each cluster serves, the clusters served,
/// and what is kept between requests for them. One part of [`ApiState`].
pub struct Core {
    /// The objects of every hosted cluster.
    pub store: Store,
    /// The kinds each cluster serves.
    pub registry: Registry,
    /// The clusters served now (embedded and mirrored), with their token hashes.
    pub served: ServedClusters,
    /// The cluster also served at the root, if any (the only embedded cluster).
    pub root: Option<String>,
    /// Tunables of the API surface.
    pub options: ApiOptions,
    /// The CA certificate (PEM) clients of the hosted clusters trust; every namespace
    /// publishes it ([`cluster_defaults`]).
    pub root_ca_pem: String,
    /// APIServices, webhook configurations and RBAC objects, kept between requests.
    pub kinds: stored_kinds::StoredKinds,
    /// The garbage collector's running passes.
    pub(crate) collector: Arc<handlers::Collector>,
    /// Compiled schema patterns.
    pub patterns: Arc<validation::Patterns>,
}

impl Core {
    /// Registers the kinds of every stored CRD of each hosted cluster.
    pub async fn load_crds(&self) -> Result<(), StoreError> {
        for cluster in self.served.names() {
            let cluster = cluster.as_str();
            let page = self
                .store
                .list(
                    cluster,
                    "apiextensions.k8s.io",
                    "customresourcedefinitions",
                    None,
                    None,
                    0,
                )
                .await?;
            for crd in page.items {
                match registry::from_crd(&crd) {
                    Ok(def) => self.registry.register(cluster, objects::name_of(&crd), def),
                    Err(e) => {
                        tracing::warn!(cluster, crd = objects::name_of(&crd), error = %e, "stored CRD not registered")
                    }
                }
            }
        }
        Ok(())
    }
}

/// Who may call one listener, and what each caller holds open. One part of [`ApiState`].
pub struct AuthState {
    /// Whether requests must carry a bearer token (not on the owner-only unix socket).
    pub require_token: bool,
    /// SHA-256 of the `--token-file` token, which may do anything.
    pub admin_token_hash: Option<String>,
    /// Open watches per caller, for [`ApiOptions::max_watches_per_token`]; the listeners share
    /// them.
    pub watches: watch::OpenWatches,
}

impl AuthState {
    /// What tells this listener's callers of `served` apart by their tokens.
    pub fn access(&self, served: &ServedClusters) -> TokenAccess {
        TokenAccess {
            require_token: self.require_token,
            admin_token_hash: self.admin_token_hash.clone(),
            served: served.clone(),
        }
    }
}

/// What admits a write besides its kind's own rules: the clusters' admission webhooks and room
/// for CRD validation rules to run. One part of [`ApiState`].
#[derive(Default)]
pub struct AdmissionState {
    /// The admission webhooks of each cluster, with their kept-alive connections.
    pub webhooks: admission::Admission,
    /// Room for CRD validation rules to run.
    pub cel_slots: cel_rules::Slots,
}

/// What every request handler shares, one part per concern: the [`Core`] every request reads,
/// the callers' [`AuthState`], the writes' [`AdmissionState`] and the [`aggregation::Aggregator`].
/// Each handler, layer and helper takes the parts it uses (the write pipelines their
/// [`Writes`]). Cheap to clone.
#[derive(Clone)]
pub struct ApiState {
    /// The store, the kinds and the served clusters.
    pub core: Arc<Core>,
    /// Tokens and open watches of this listener's callers.
    pub auth: Arc<AuthState>,
    /// Webhooks and validation rules' room.
    pub admission: Arc<AdmissionState>,
    /// APIServices with a backend and their forwarding, as kube-aggregator (cheap to clone).
    pub aggregator: aggregation::Aggregator,
}

impl ApiState {
    /// What tells this listener's callers apart by their tokens.
    pub fn access(&self) -> TokenAccess {
        self.auth.access(&self.core.served)
    }

    /// The parts the write pipelines use.
    pub(crate) fn writes(&self) -> Writes {
        Writes {
            core: self.core.clone(),
            admission: self.admission.clone(),
            aggregator: self.aggregator.clone(),
        }
    }
}

/// What the write pipelines use (create, update, patch, apply, delete, the subresources and the
/// garbage collector): the core, admission, and the aggregator, whose front-proxy identity calls
/// the webhooks and whose pools reach the kubelets. Cheap to clone: the collector's passes hold
/// one.
#[derive(Clone)]
pub(crate) struct Writes {
    /// The store, the kinds and the served clusters.
    pub core: Arc<Core>,
    /// Webhooks and validation rules' room.
    pub admission: Arc<AdmissionState>,
    /// The front-proxy identities and kept-alive connections.
    pub aggregator: aggregation::Aggregator,
}

/// Starts the garbage collection a previous run left pending (owners still marked for
/// foreground or orphan deletion); otherwise the first request starts it.
pub fn resume_collection(st: &ApiState) {
    handlers::resume_collection(&st.writes());
}

/// The router serving every hosted cluster (under `/clusters/NAME/`, and at the root when there
/// is only one).
///
/// A request passes the [`pipeline`]'s layers in order (resolve the cluster, authenticate,
/// health, authorize, aggregate) before the verbs; `layer` wraps what is already there, so they
/// are added innermost first. Each layer holds the parts of the state it uses.
pub fn router(state: ApiState) -> Router {
    use axum::middleware::from_fn_with_state as layer;
    let callers = (state.core.clone(), state.auth.clone());
    let forwarding = (
        state.core.clone(),
        state.auth.clone(),
        state.aggregator.clone(),
    );
    Router::new()
        .fallback(handle)
        .layer(layer(forwarding, pipeline::aggregate))
        .layer(layer(state.core.clone(), pipeline::authorize))
        .layer(layer(state.core.clone(), pipeline::health))
        .layer(layer(callers.clone(), pipeline::authenticate))
        .layer(layer(callers, pipeline::resolve))
        .with_state(Arc::new(state))
}

/// The largest request body, and the largest a YAML body may expand to.
pub const MAX_BODY_BYTES: usize = 16 << 20;

/// A request after routing and authentication.
pub(crate) struct Ctx {
    /// Who asked (authenticated).
    pub user: auth::UserInfo,
    /// The cluster the request is for.
    pub cluster: String,
    /// A mirror (or the fleet view): served read-only, and discovery says so.
    pub read_only: bool,
    /// The request's HTTP method.
    pub method: Method,
    /// The path under the cluster's prefix (a proxy subresource forwards what follows it).
    pub path: String,
    /// The query parameters (the last of each name).
    pub query: HashMap<String, String>,
    /// The request's headers.
    pub headers: HeaderMap,
    /// The request body, read whole.
    pub body: Bytes,
    /// `Warning` headers for the response.
    pub warnings: std::sync::Mutex<Vec<String>>,
}

impl Ctx {
    /// The context of the server's own work in `cluster` (the garbage collector's deletes
    /// and updates), which no client asked for: the cluster's own authority, no options, no
    /// body. What it writes commits as the server's ([`handlers`] `By::Server`), which no
    /// webhook admits; its method is never read.
    pub fn internal(cluster: &str) -> Self {
        Ctx {
            user: auth::UserInfo::admin(),
            cluster: cluster.to_owned(),
            read_only: false,
            method: Method::DELETE,
            path: String::new(),
            query: HashMap::new(),
            headers: HeaderMap::new(),
            body: Bytes::new(),
            warnings: Default::default(),
        }
    }

    /// Adds `messages` to the response's `Warning` headers.
    pub fn warn(&self, messages: impl IntoIterator<Item = String>) {
        self.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(messages);
    }

    /// The query parameter `k`, if given.
    pub fn param(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str)
    }

    /// The header `k` as text; empty when missing or not text.
    pub fn header(&self, k: header::HeaderName) -> &str {
        self.headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// Whether the query parameter `k` is set to true (`1`, `true`, `True`).
    pub fn flag(&self, k: &str) -> bool {
        matches!(self.param(k), Some("1") | Some("true") | Some("True"))
    }
}

/// The verbs, for a request the [`pipeline`] let through.
async fn handle(State(st): State<Arc<ApiState>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let found = (
        parts.extensions.get::<pipeline::Target>().cloned(),
        parts.extensions.get::<auth::UserInfo>().cloned(),
    );
    let (Some(target), Some(user)) = found else {
        return pipeline::out_of_order();
    };
    let pipeline::Target {
        cluster,
        served,
        route,
        rest,
    } = target;
    // A mirror changes only with its upstream.
    if served.read_only && !matches!(parts.method, Method::GET | Method::HEAD) {
        return ApiError::method_not_allowed(parts.method.as_str()).into_response();
    }
    let body = match axum::body::to_bytes(body, st.core.options.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => return too_large(),
    };
    let query: HashMap<String, String> =
        axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
            .map(|q| q.0.into_iter().collect())
            .unwrap_or_default();
    let ctx = Ctx {
        user,
        cluster,
        read_only: served.read_only,
        method: parts.method,
        path: rest,
        query,
        headers: parts.headers,
        body,
        warnings: Default::default(),
    };
    match dispatch(&st, ctx, route).await {
        Ok(r) => r,
        Err(e) => {
            if e.code >= 500 {
                tracing::error!(code = e.code, message = %e.message, "request failed");
            }
            e.into_response()
        }
    }
}

/// `/healthz`, `/livez`, `/readyz` (and their `/NAME` checks): ready only while the store
/// answers; live while the process serves.
pub(crate) async fn health(core: &Core, path: &str) -> Response {
    if path.trim_start_matches('/').starts_with("readyz")
        && let Err(e) = core.store.ping(std::time::Duration::from_secs(5)).await
    {
        tracing::warn!(error = %e, "not ready: the store does not answer");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "text/plain")],
            "[-]store failed: the database does not answer\nreadyz check failed",
        )
            .into_response();
    }
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], "ok").into_response()
}

/// The answer to a body larger than the server takes (413).
pub fn too_large() -> Response {
    ApiError::new(
        413,
        "RequestEntityTooLarge",
        "the request body is too large",
    )
    .into_response()
}

/// What `/version` answers: the Kubernetes release the embedded clusters follow, and this build.
fn server_version() -> discovery::ServerVersion {
    discovery::ServerVersion {
        major: "1".into(),
        minor: "33".into(),
        git_version: concat!("v1.33.0+gpustack-embedded-", env!("CARGO_PKG_VERSION")).into(),
    }
}

async fn dispatch(st: &ApiState, ctx: Ctx, route: Route) -> Result<Response, ApiError> {
    let defs = || {
        let defs = st.core.registry.all(&ctx.cluster);
        if ctx.read_only {
            gpustack_kube_rest::resource::read_only(defs)
        } else {
            defs
        }
    };
    let accept = ctx.header(header::ACCEPT).to_owned();
    let ok = |v: Option<Value>| {
        v.map(|v| json_response(StatusCode::OK, &v))
            .ok_or_else(ApiError::not_found_path)
    };
    let discovery_form = |route: &Route| {
        negotiate::for_discovery(
            &accept,
            matches!(route, Route::CoreVersions | Route::Groups),
        )
        .ok_or_else(|| ApiError::not_acceptable(&accept))
    };
    // Discovery and the OpenAPI root also list the APIServices' backends; the other documents
    // are the toolkit's.
    match route {
        Route::CoreVersions | Route::Groups | Route::Group(_) | Route::GroupVersion { .. } => {
            let form = discovery_form(&route)?;
            let local = defs();
            let services = if ctx.read_only {
                Vec::new()
            } else {
                st.aggregator.services(&st.core.kinds, &ctx.cluster).await?
            };
            let mut all = local.clone();
            all.extend(st.aggregator.backend_defs(&ctx.cluster, &services));
            use aggregation::discovery as agg;
            match (form, route) {
                (negotiate::Discovery::Aggregated(v), route) => {
                    let core = route == Route::CoreVersions;
                    let mut doc = discovery::aggregated(&all, core, v);
                    if !core {
                        agg::arrange_aggregated(&mut doc, &services, &local);
                    }
                    Ok(gpustack_kube_rest::documents::aggregated_response(&doc, v))
                }
                (_, Route::CoreVersions) => ok(Some(discovery::core_versions())),
                (_, Route::Groups) => {
                    let mut doc = discovery::group_list(&all);
                    agg::arrange_group_list(&mut doc, &services, &local);
                    ok(Some(doc))
                }
                (_, Route::Group(g)) => ok(agg::arrange_group_doc(
                    discovery::group(&all, &g),
                    &g,
                    &services,
                )),
                (_, Route::GroupVersion { group, version }) => {
                    ok(discovery::resource_list(&local, &group, &version))
                }
                _ => Err(ApiError::not_found_path()),
            }
        }
        Route::OpenApiV3Root => {
            let mut doc = openapi::v3_root(&defs());
            if !ctx.read_only {
                let services = st.aggregator.services(&st.core.kinds, &ctx.cluster).await?;
                aggregation::discovery::add_openapi_paths(&mut doc, &services);
            }
            ok(Some(doc))
        }
        Route::Resource(p) => handlers::resource(st, ctx, p).await,
        other => gpustack_kube_rest::documents::answer(&other, &accept, &server_version(), defs)
            .unwrap_or_else(|| Err(ApiError::not_found_path())),
    }
}
