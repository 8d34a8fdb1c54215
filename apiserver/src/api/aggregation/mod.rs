//! API aggregation, as kube-aggregator does it: APIServices with a `spec.service` are served by
//! their backends. Their groups and versions appear in the cluster's discovery ([`discovery`]),
//! every request under `/apis/GROUP/VERSION` is forwarded to the backend with the caller's
//! identity ([`proxy`]) and the caller's trace continued (W3C `traceparent`) over the cluster's
//! front-proxy certificate ([`front_proxy`]), and a periodic check keeps each APIService's
//! `Available` condition and its backend's kinds ([`availability`]).

pub mod availability;
pub mod discovery;
pub mod front_proxy;
pub mod proxy;
pub mod registry;

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::Duration,
};

use axum::{
    body::Bytes,
    http::request::Parts,
    response::{IntoResponse, Response},
};
use gpustack_serving::trace_context;
use serde_json::Value;
use tracing::Instrument;

use super::{
    auth::UserInfo,
    kept_alive::{Endpoint, Pool, Pools, Trust},
    services,
    status::ApiError,
    stored_kinds::StoredKinds,
};
use crate::registry::ResourceDef;
use front_proxy::FrontProxy;
use registry::ApiService;

/// Tunables of aggregation.
#[derive(Clone, Debug)]
pub struct AggregationOptions {
    /// How often every APIService's backend is checked (also at once on a change).
    pub check_interval: Duration,
    /// Connecting to a backend (TCP and TLS) may take this long.
    pub connect_timeout: Duration,
    /// A backend's response headers must arrive within this.
    pub response_header_timeout: Duration,
}

impl Default for AggregationOptions {
    fn default() -> Self {
        AggregationOptions {
            check_interval: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            response_header_timeout: Duration::from_secs(60),
        }
    }
}

/// APIService backends kept connections to; past it the least recently added is dropped.
const MAX_BACKENDS: usize = 256;

struct Inner {
    /// Per cluster.
    identities: RwLock<HashMap<String, Arc<FrontProxy>>>,
    /// (cluster, APIService name) → the backend's `APIResourceList`.
    discovered: RwLock<HashMap<(String, String), Arc<Value>>>,
    timeouts: proxy::Timeouts,
    /// Kept-alive connections to the backends.
    pools: Pools,
}

impl Inner {
    /// One place that builds the state: the pools connect within `timeouts.connect`.
    fn with(timeouts: proxy::Timeouts) -> Self {
        Inner {
            identities: RwLock::default(),
            discovered: RwLock::default(),
            pools: Pools::new(MAX_BACKENDS, timeouts.connect),
            timeouts,
        }
    }
}

impl Default for Inner {
    fn default() -> Self {
        Inner::with(proxy::Timeouts::default())
    }
}

/// What aggregation keeps between requests. Cheap to clone.
#[derive(Clone, Default)]
pub struct Aggregator {
    inner: Arc<Inner>,
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// An error with its sources, one after the other (what a 503 and a condition say).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

impl Aggregator {
    /// An aggregator that forwards with `options`' timeouts, a forwarded request lasting at most `longest`.
    pub fn new(options: &AggregationOptions, longest: Duration) -> Self {
        Aggregator {
            inner: Arc::new(Inner::with(proxy::Timeouts {
                connect: options.connect_timeout,
                response_headers: options.response_header_timeout,
                longest,
            })),
        }
    }

    /// The timeouts forwarded requests run under.
    pub fn timeouts(&self) -> proxy::Timeouts {
        self.inner.timeouts.clone()
    }

    /// Sets the client certificate `cluster` presents to its backends.
    pub fn set_identity(&self, cluster: &str, identity: FrontProxy) {
        write(&self.inner.identities).insert(cluster.to_owned(), Arc::new(identity));
    }

    /// The client certificate `cluster` presents to its backends, if set.
    pub fn identity(&self, cluster: &str) -> Option<Arc<FrontProxy>> {
        read(&self.inner.identities).get(cluster).cloned()
    }

    /// Keeps (or, with `None`, forgets) the discovery list a backend of `cluster`'s `apiservice` served.
    pub fn set_discovered(&self, cluster: &str, apiservice: &str, list: Option<Value>) {
        let key = (cluster.to_owned(), apiservice.to_owned());
        let mut d = write(&self.inner.discovered);
        match list {
            Some(l) => d.insert(key, Arc::new(l)),
            None => d.remove(&key),
        };
    }

    /// Forgets the kinds of `cluster`'s APIServices that `keep` does not name.
    pub fn retain_discovered(&self, cluster: &str, keep: impl Fn(&str) -> bool) {
        write(&self.inner.discovered).retain(|(c, name), _| c != cluster || keep(name));
    }

    /// The APIServices of `cluster`.
    pub async fn services(
        &self,
        kinds: &StoredKinds,
        cluster: &str,
    ) -> Result<Vec<ApiService>, ApiError> {
        let stored = kinds
            .list(cluster, "apiregistration.k8s.io", "apiservices")
            .await
            .map_err(|e| ApiError::internal(format!("storage error: {e}")))?;
        Ok(stored.iter().filter_map(registry::parse).collect())
    }

    /// The kinds the backends of `services` serve, as far as their checks found.
    pub fn backend_defs(&self, cluster: &str, services: &[ApiService]) -> Vec<ResourceDef> {
        let discovered = read(&self.inner.discovered);
        services
            .iter()
            .filter(|s| s.backend.is_some())
            .filter_map(|s| {
                let list = discovered.get(&(cluster.to_owned(), s.name.clone()))?;
                Some(discovery::defs_of(list, &s.group, &s.version))
            })
            .flatten()
            .collect()
    }
}

/// Why a backend cannot be reached before anything is sent.
#[derive(Debug, thiserror::Error)]
pub enum Unreachable {
    /// The backend's Service could not be resolved.
    #[error(transparent)]
    Service(#[from] services::ResolveError),
    /// The cluster has no client certificate to present to backends.
    #[error("the cluster has no front-proxy identity")]
    NoIdentity,
    /// The connection to the backend could not be set up.
    #[error("{}", chain(.0))]
    Tls(#[from] proxy::ProxyError),
}

impl Aggregator {
    /// The connections to `backend`: at its Service's address, checked as the APIService
    /// says, presenting `cluster`'s front-proxy certificate.
    pub async fn connection(
        &self,
        store: &crate::store::Store,
        cluster: &str,
        backend: &registry::Backend,
    ) -> Result<Arc<Pool>, Unreachable> {
        let identity = self.identity(cluster).ok_or(Unreachable::NoIdentity)?;
        let addr = services::resolve(
            store,
            cluster,
            &backend.namespace,
            &backend.name,
            backend.port,
        )
        .await?;
        let trust = match (&backend.ca_bundle, backend.insecure_skip_tls_verify) {
            (_, true) => Trust::SkipVerification,
            (Some(ca), false) => Trust::Bundle(ca.clone()),
            (None, false) => return Err(proxy::ProxyError::NoTrust.into()),
        };
        let endpoint = Endpoint {
            host: addr.host,
            port: addr.port,
            server_name: addr.server_name,
        };
        let pool = self
            .inner
            .pools
            .pool(&endpoint, &trust, Some(&identity))
            .map_err(proxy::ProxyError::Send)?;
        Ok(pool)
    }
}

impl Aggregator {
    /// The connections to a kubelet at `host:port`. As kube-apiserver given no
    /// `--kubelet-certificate-authority` and no `--kubelet-client-certificate`: the kubelet's
    /// certificate is not checked and none is presented.
    pub fn kubelet(&self, host: &str, port: u16) -> Result<Arc<Pool>, proxy::ProxyError> {
        let endpoint = Endpoint {
            host: host.to_owned(),
            port,
            server_name: host.to_owned(),
        };
        self.inner
            .pools
            .pool(&endpoint, &Trust::SkipVerification, None)
            .map_err(proxy::ProxyError::Send)
    }
}

/// A 503 naming the APIService, as kube-aggregator answers when its backend cannot be reached.
fn unavailable(s: &ApiService, why: &str) -> ApiError {
    ApiError::new(
        503,
        "ServiceUnavailable",
        format!(
            "the server is currently unable to handle the request: APIService \"{}\" is not available: {why}",
            s.name
        ),
    )
}

/// Forwards a request of `user` under `s`'s group and version to its backend.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn forward(
    core: &super::Core,
    callers: &super::AuthState,
    aggregator: &Aggregator,
    cluster: &str,
    s: &ApiService,
    user: &UserInfo,
    parts: Parts,
    path: &str,
    body: Bytes,
) -> Response {
    let Some(backend) = &s.backend else {
        return ApiError::not_found_path().into_response();
    };
    let pool = match aggregator.connection(&core.store, cluster, backend).await {
        Ok(c) => c,
        Err(e) => return unavailable(s, &e.to_string()).into_response(),
    };
    let query = parts.uri.query().unwrap_or_default();
    let slot = if proxy::is_watch(&parts.method, path, query) {
        match super::watch::claim_slot(core, callers, &parts.headers) {
            Ok(slot) => Some(slot),
            Err(e) => return e.into_response(),
        }
    } else {
        None
    };
    let target = match parts.uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    // The backend's spans join the caller's trace under this one (until the answer's headers).
    let span = tracing::debug_span!(
        "aggregation proxy",
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        apiservice = %s.name,
        http.response.status_code = tracing::field::Empty,
    );
    let mut headers = proxy::forwarded_headers(&parts.headers, user);
    trace_context::inject(&span, &mut headers);
    let timeouts = aggregator.timeouts();
    let sent = proxy::send(&pool, parts.method, &target, headers, body, &timeouts)
        .instrument(span.clone())
        .await;
    match sent {
        Ok(r) => {
            span.record("http.response.status_code", r.0.status().as_u16());
            proxy::respond(r, timeouts.longest, slot)
        }
        Err(e) => {
            span.record("otel.status_code", "ERROR");
            tracing::debug!(parent: &span, apiservice = %s.name, error = %chain(&e), "proxying failed");
            unavailable(s, &format!("error trying to reach service: {}", chain(&e))).into_response()
        }
    }
}
