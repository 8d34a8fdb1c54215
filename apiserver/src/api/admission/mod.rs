//! Admission webhooks of embedded clusters, called as kube-apiserver calls them: the
//! MutatingWebhookConfigurations' webhooks first (by configuration name, then in order), their
//! JSON patches applied to the object; then the schema, validation and defaulting of the
//! write; then the ValidatingWebhookConfigurations' webhooks, concurrently.
//!
//! Writes to the webhook configurations themselves are never sent to webhooks (as in
//! Kubernetes, so that a broken webhook cannot lock itself in). The configurations are read
//! through [`super::stored_kinds`] (kept until a write to either kind), and the webhooks built
//! from them are kept in [`Admission`], with their compiled `matchConditions` and their kept-alive
//! connections, until the configurations change: a cluster without webhooks costs an in-memory
//! check per write.
//!
//! Reviews name the authenticated requester (`userInfo`: username, uid, groups, extra), as
//! kube-apiserver does. `matchPolicy: Equivalent` matches as `Exact`. Webhooks are trusted
//! through their `caBundle` only: no system roots are loaded, so a webhook without one fails
//! (as its `failurePolicy` says).

pub mod call_metrics;
pub mod client;
pub mod conditions;
pub mod matching;

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
};

use serde_json::{Value, json};

pub use matching::{Attributes, Hook, Operation};

use super::{
    Ctx, Writes,
    patch::{self, PatchKind},
    selectors::labels_of,
    status::ApiError,
};
use crate::registry::ResourceDef;
use crate::store::{ObjectKey, StoreError};

const GROUP: &str = "admissionregistration.k8s.io";
const MUTATING: &str = "mutatingwebhookconfigurations";
const VALIDATING: &str = "validatingwebhookconfigurations";

/// The webhooks of one cluster, built from the configuration lists they hold.
struct Loaded {
    mutating_from: Arc<Vec<Value>>,
    validating_from: Arc<Vec<Value>>,
    mutating: Vec<Hook>,
    validating: Vec<Hook>,
    /// Dropped with these configurations: a changed `caBundle` or endpoint is called on new
    /// connections.
    clients: client::Clients,
}

/// The admission caller's state: the webhooks of each cluster and their connections, and the
/// calls' series when a registry was given. Held by the API state (cheap to clone; clones share
/// it).
#[derive(Clone, Default)]
pub struct Admission {
    clusters: Arc<Mutex<HashMap<String, Arc<Loaded>>>>,
    metrics: Option<call_metrics::CallMetrics>,
}

impl Admission {
    /// The caller, its calls counted in `registry`.
    pub fn with_metrics(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        Ok(Admission {
            clusters: Arc::default(),
            metrics: Some(call_metrics::CallMetrics::register(registry)?),
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn store_error(e: StoreError) -> ApiError {
    ApiError::internal(format!("storage error: {e}"))
}

async fn hooks(st: &Writes, cluster: &str) -> Result<Arc<Loaded>, ApiError> {
    let mutating = st
        .core
        .kinds
        .list(cluster, GROUP, MUTATING)
        .await
        .map_err(store_error)?;
    let validating = st
        .core
        .kinds
        .list(cluster, GROUP, VALIDATING)
        .await
        .map_err(store_error)?;
    if let Some(l) = lock(&st.admission.webhooks.clusters).get(cluster)
        && Arc::ptr_eq(&l.mutating_from, &mutating)
        && Arc::ptr_eq(&l.validating_from, &validating)
    {
        return Ok(l.clone());
    }
    let loaded = Arc::new(Loaded {
        mutating: matching::hooks_of(&mutating, true),
        validating: matching::hooks_of(&validating, false),
        mutating_from: mutating,
        validating_from: validating,
        clients: client::Clients::default(),
    });
    lock(&st.admission.webhooks.clusters).insert(cluster.to_owned(), loaded.clone());
    Ok(loaded)
}

/// The attributes of a write to `def` (at `version`; its `/status` when `status`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn attributes(
    ctx: &Ctx,
    def: &ResourceDef,
    version: &str,
    namespace: Option<&str>,
    status: bool,
    name: &str,
    operation: Operation,
    dry_run: bool,
    options: Option<Value>,
) -> Attributes {
    let options = options.unwrap_or_else(|| {
        let kind = match (operation, &ctx.method) {
            (Operation::Create, _) => "CreateOptions",
            (Operation::Delete, _) => "DeleteOptions",
            (_, m) if m == axum::http::Method::PATCH => "PatchOptions",
            _ => "UpdateOptions",
        };
        let mut o = json!({"apiVersion": "meta.k8s.io/v1", "kind": kind});
        if let Some(m) = ctx.param("fieldManager") {
            o["fieldManager"] = json!(m);
        }
        o
    });
    let mut options = options;
    if dry_run && let Some(m) = options.as_object_mut() {
        m.insert("dryRun".into(), json!(["All"]));
    }
    Attributes {
        group: def.group.clone(),
        version: version.to_owned(),
        kind: def.kind.clone(),
        resource: def.plural.clone(),
        subresource: status.then(|| "status".to_owned()),
        namespaced: def.namespaced,
        namespace: namespace.map(String::from),
        name: name.to_owned(),
        operation,
        dry_run,
        options,
    }
}

fn exempt(a: &Attributes) -> bool {
    a.group == GROUP && (a.resource == MUTATING || a.resource == VALIDATING)
}

/// Runs the mutating webhooks that match, applying their patches to `object`; whether any
/// patch was applied.
pub(crate) async fn mutate(
    st: &Writes,
    ctx: &Ctx,
    a: &Attributes,
    object: &mut Value,
    old: Option<&Value>,
) -> Result<bool, ApiError> {
    if exempt(a) {
        return Ok(false);
    }
    let hooks = hooks(st, &ctx.cluster).await?;
    if hooks.mutating.is_empty() {
        return Ok(false);
    }
    let mut namespace_labels = None;
    let mut patched = false;
    for hook in &hooks.mutating {
        if !applies(st, ctx, hook, a, Some(object), old, &mut namespace_labels).await? {
            continue;
        }
        let Some(verdict) = call(st, ctx, &hooks.clients, hook, a, Some(object), old).await? else {
            continue;
        };
        if let Some(p) = verdict.patch.filter(|_| a.operation != Operation::Delete) {
            *object = patch::apply(object, PatchKind::Json, &p).map_err(|e| {
                ApiError::internal(format!(
                    "Internal error occurred: the patch of webhook \"{}\" could not be applied: {e}",
                    hook.name
                ))
            })?;
            patched = true;
        }
    }
    Ok(patched)
}

/// Runs the validating webhooks that match, concurrently; the first refusal (in webhook order)
/// refuses the request.
pub(crate) async fn validate(
    st: &Writes,
    ctx: &Ctx,
    a: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if exempt(a) {
        return Ok(());
    }
    let hooks = hooks(st, &ctx.cluster).await?;
    if hooks.validating.is_empty() {
        return Ok(());
    }
    let mut namespace_labels = None;
    let mut matched = Vec::new();
    for hook in &hooks.validating {
        if applies(st, ctx, hook, a, object, old, &mut namespace_labels).await? {
            matched.push(hook);
        }
    }
    let results = futures::future::join_all(
        matched
            .into_iter()
            .map(|h| call(st, ctx, &hooks.clients, h, a, object, old)),
    )
    .await;
    for r in results {
        r?;
    }
    Ok(())
}

/// Whether `hook` is for this request: its rules, then its object and namespace selectors.
async fn applies(
    st: &Writes,
    ctx: &Ctx,
    hook: &Hook,
    a: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
    namespace_labels: &mut Option<BTreeMap<String, String>>,
) -> Result<bool, ApiError> {
    if !matching::rules_match(&hook.rules, a) {
        return Ok(false);
    }
    let either = |selector: &Value| {
        [object, old]
            .into_iter()
            .flatten()
            .filter(|o| !o.is_null())
            .any(|o| matching::selector_matches(selector, &labels_of(o)))
    };
    if !matching::selects_all(&hook.object_selector) && !either(&hook.object_selector) {
        return Ok(false);
    }
    if matching::selects_all(&hook.namespace_selector) {
        return Ok(true);
    }
    // A Namespace is matched on its own labels; other cluster-scoped objects always match.
    if a.group.is_empty() && a.resource == "namespaces" {
        return Ok(either(&hook.namespace_selector));
    }
    let Some(ns) = a.namespace.as_deref().filter(|_| a.namespaced) else {
        return Ok(true);
    };
    if namespace_labels.is_none() {
        let key = ObjectKey {
            cluster: ctx.cluster.clone(),
            group: String::new(),
            resource: "namespaces".into(),
            namespace: String::new(),
            name: ns.to_owned(),
        };
        let found = st.core.store.get(&key).await.map_err(store_error)?;
        *namespace_labels = Some(found.map(|(_, n)| labels_of(&n)).unwrap_or_default());
    }
    Ok(matching::selector_matches(
        &hook.namespace_selector,
        namespace_labels.as_ref().unwrap_or(&BTreeMap::new()),
    ))
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
enum CallFailure {
    #[error("admissionReviewVersions does not include v1, the only version sent")]
    NoV1,
    #[error(transparent)]
    Endpoint(#[from] matching::EndpointError),
    #[error(transparent)]
    Service(#[from] super::services::ResolveError),
    #[error("the webhook has no caBundle, and the embedded cluster trusts no system roots")]
    NoCaBundle,
    #[error("encoding the review: {0}")]
    Encode(#[source] serde_json::Error),
    #[error(transparent)]
    Client(#[from] client::CallError),
    #[error(transparent)]
    Response(#[from] matching::ResponseError),
}

/// Calls `hook` (when its `matchConditions` hold): its verdict, `None` when it was skipped or
/// the call failed and the webhook's failures are ignored, an error when it refused or failed
/// otherwise. Its span is the parent of the webhook's own (see [`client`]).
#[tracing::instrument(
    level = "debug",
    name = "admission webhook",
    skip_all,
    fields(
        otel.kind = "client",
        webhook = %hook.name,
        operation = ?a.operation,
        resource = %a.resource,
    )
)]
async fn call(
    st: &Writes,
    ctx: &Ctx,
    clients: &client::Clients,
    hook: &Hook,
    a: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<Option<matching::Verdict>, ApiError> {
    let uid = super::objects::new_uid();
    let review = matching::review(&uid, a, object, old, &ctx.user.to_json());
    if !hook.conditions.is_empty() {
        let mut request = review["request"].clone();
        if let Some(r) = request.as_object_mut() {
            r.remove("object");
            r.remove("oldObject");
        }
        let (object, old) = (
            object.cloned().unwrap_or(Value::Null),
            old.cloned().unwrap_or(Value::Null),
        );
        match conditions::evaluate_bounded(hook.conditions.clone(), object, old, request).await {
            Ok(conditions::Outcome::Call) => {}
            Ok(conditions::Outcome::Skip(_)) => return Ok(None),
            Err(e) if hook.ignore_failures => {
                tracing::warn!(webhook = %hook.name, error = %e, "failed evaluating match conditions, skipping the webhook (failurePolicy Ignore)");
                return Ok(None);
            }
            // As kube-apiserver: fails closed with a Forbidden naming the object.
            Err(e) => {
                let resource = if a.group.is_empty() {
                    a.resource.clone()
                } else {
                    format!("{}.{}", a.resource, a.group)
                };
                let mut err = ApiError::new(
                    403,
                    "Forbidden",
                    format!("{resource} \"{}\" is forbidden: {e}", a.name),
                );
                err.details = Some(json!({"name": a.name, "group": a.group, "kind": a.resource}));
                return Err(err);
            }
        }
    }
    if a.dry_run && !hook.dry_run_safe {
        return Err(ApiError::bad_request(format!(
            "admission webhook \"{}\" does not support dry run",
            hook.name
        )));
    }
    let started = std::time::Instant::now();
    let exchanged = exchange(st, ctx, clients, hook, &uid, &review).await;
    if let Some(m) = &st.admission.webhooks.metrics {
        let result = match &exchanged {
            Ok(v) if !v.allowed => call_metrics::CallResult::Denied,
            Ok(v) if v.patch.is_some() && hook.mutating => call_metrics::CallResult::Patched,
            Ok(_) => call_metrics::CallResult::Allowed,
            Err(_) if hook.ignore_failures => call_metrics::CallResult::Ignored,
            Err(_) => call_metrics::CallResult::Error,
        };
        m.observe(&hook.name, hook.mutating, result, started.elapsed());
    }
    let verdict = match exchanged {
        Ok(v) => v,
        Err(e) if hook.ignore_failures => {
            tracing::warn!(webhook = %hook.name, error = %e, "failed calling webhook, ignoring it (failurePolicy Ignore)");
            return Ok(None);
        }
        Err(e) => {
            return Err(ApiError::internal(format!(
                "Internal error occurred: failed calling webhook \"{}\": failed to call webhook: {e}",
                hook.name
            )));
        }
    };
    ctx.warn(verdict.warnings.iter().cloned());
    if !verdict.allowed {
        let d = matching::denial(&hook.name, &verdict.status);
        let mut err = ApiError::new(d.code, d.reason, d.message);
        err.details = d.details;
        return Err(err);
    }
    Ok(Some(verdict))
}

/// Sends the review and reads the answer; an error is a failed call.
async fn exchange(
    st: &Writes,
    ctx: &Ctx,
    clients: &client::Clients,
    hook: &Hook,
    uid: &str,
    review: &Value,
) -> Result<matching::Verdict, CallFailure> {
    if !hook.speaks_v1 {
        return Err(CallFailure::NoV1);
    }
    let addr = match hook.endpoint.clone()? {
        matching::Endpoint::Url(url) => client::parse_url(&url)?,
        matching::Endpoint::Service {
            namespace,
            name,
            port,
            path,
        } => {
            let a = super::services::resolve(&st.core.store, &ctx.cluster, &namespace, &name, port)
                .await?;
            let path = if path.starts_with('/') {
                path
            } else {
                format!("/{path}")
            };
            client::Address {
                host: a.host,
                port: a.port,
                path,
                server_name: a.server_name,
            }
        }
    };
    let ca = hook.ca_bundle.as_deref().ok_or(CallFailure::NoCaBundle)?;
    let identity = st.aggregator.identity(&ctx.cluster);
    let pool = clients.pool(&addr, ca, identity.as_deref())?;
    let body = serde_json::to_vec(review).map_err(CallFailure::Encode)?;
    let answer = client::post(&pool, &addr, body, hook.timeout).await?;
    Ok(matching::read_response(&answer, uid, hook.mutating)?)
}
