//! The subresources a kind serves itself (`pods/binding`, `pods/eviction`, `nodes/proxy`,
//! `certificatesigningrequests/approval`, `scale`...): each is a [`Subresource`] its strategy
//! names ([`super::KindStrategy::subresource`]). A subresource reads and writes its object
//! through the [`ObjectVerbs`] the verbs lend it (the one read-modify-write, the one delete),
//! so that the kinds never import the verbs, which import the kinds.

use axum::{http::StatusCode, response::Response};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::api::{Ctx, Writes, apply, json_response, status::ApiError};
use crate::registry::ResourceDef;

/// Serves a request to a subresource of one object.
pub(crate) type Subresource =
    for<'a> fn(&'a ObjectRequest<'a>) -> BoxFuture<'a, Result<Response, ApiError>>;

/// How a read-modify-write turns the object's current served form into the new one (or
/// refuses).
pub(crate) type Mutation<'a> = &'a (dyn Fn(&Value) -> Result<Value, ApiError> + Send + Sync);

/// What the verbs do to the one object a subresource request names.
pub(crate) trait ObjectVerbs: Send + Sync {
    /// The stored object and its resourceVersion; 404 naming it when there is none.
    fn stored(&self) -> BoxFuture<'_, Result<(u64, Value), ApiError>>;
    /// The served form of the stored `obj`, at the request's version.
    fn served(&self, obj: Value) -> Value;
    /// The request's body, decoded (JSON, YAML or protobuf).
    fn body(&self) -> BoxFuture<'_, Result<Value, ApiError>>;
    /// The object as a GET of it answers.
    fn get(&self) -> BoxFuture<'_, Result<Response, ApiError>>;
    /// A client's read-modify-write (the admission webhooks see it), retried when it loses a
    /// race; the object as served after it.
    fn update<'a>(&'a self, mutate: Mutation<'a>) -> BoxFuture<'a, Result<Value, ApiError>>;
    /// The server's own read-modify-write (no webhook sees it); the object as served after it.
    fn update_as_server<'a>(
        &'a self,
        mutate: Mutation<'a>,
    ) -> BoxFuture<'a, Result<Value, ApiError>>;
    /// Deletes the object with the delete `options` given.
    fn delete<'a>(&'a self, options: &'a Value) -> BoxFuture<'a, Result<(), ApiError>>;
    /// Who writes, for field ownership: the request's manager, at subresource `sub`, over what
    /// the main endpoint owns.
    fn writer(&self, sub: &'static str) -> apply::Writer;
    /// 409 when the client pinned a resourceVersion (`given`) that `current` no longer has.
    fn pinned_rv_matches(&self, given: Option<&str>, current: &Value) -> Result<(), ApiError>;
    /// Whether the request is a dry run (400 for a value Kubernetes refuses).
    fn dry_run(&self) -> Result<bool, ApiError>;
    /// What the server keeps of `current` in an update to `new` (`status` through `/status`),
    /// with the kind's rules: the update as it will be validated.
    fn prepare_update(&self, current: &Value, new: Value, status: bool) -> Result<Value, ApiError>;
    /// `obj` validated as the kind's (as an update of `old`, when given).
    fn validated(&self, obj: Value, old: Option<&Value>) -> Result<Value, ApiError>;
    /// What a subresource write asks for, given the current form: a PUT's `body`, or the
    /// current form patched by the request's body.
    fn requested(&self, body: Option<&Value>, current: &Value) -> Result<Value, ApiError>;
}

/// A request to a subresource of one object, as the object's kind serves it.
pub(crate) struct ObjectRequest<'a> {
    /// What the write pipelines share (store, registry, admission, kept-alive connections).
    pub writes: &'a Writes,
    /// The request.
    pub ctx: &'a Ctx,
    /// The object's resource.
    pub def: &'a ResourceDef,
    /// The version the request is at.
    pub version: &'a str,
    /// The object's namespace ("" when cluster-scoped).
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// What the verbs do to the object.
    pub verbs: &'a dyn ObjectVerbs,
}

impl ObjectRequest<'_> {
    /// A PUT's body; `None` for a patch.
    pub async fn put_body(&self) -> Result<Option<Value>, ApiError> {
        match self.ctx.method {
            axum::http::Method::PUT => Ok(Some(self.verbs.body().await?)),
            _ => Ok(None),
        }
    }
}

/// What a create-like subresource answers on success, as kube-apiserver does.
pub(super) fn success() -> Response {
    json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201}),
    )
}

/// The answer (405) to a method the subresource does not take.
pub(super) fn not_allowed(r: &ObjectRequest<'_>) -> ApiError {
    ApiError::method_not_allowed(r.ctx.method.as_str())
}
