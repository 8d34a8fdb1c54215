//! Resource requests: get, list, create, update, patch, delete, deletecollection (watch is in
//! [`super::watch`]). This module resolves the target and dispatches; the verbs live in
//! [`read`], [`write`] and [`delete`].

mod delete;
mod gc;

pub(crate) use gc::{Collector, resume_once as resume_collection};
mod read;
mod write;

use delete::{delete, delete_collection, finish_delete};
pub(crate) use read::{Filter, collect};
use read::{get, list};
use write::{create, guaranteed_update, namespace_key, patch, update};

use axum::{
    http::{Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::{
    ApiState, Ctx, apply, auth, conversion, json_response, negotiate,
    negotiate::Representation,
    objects::{self, finalizers_of, is_deleting, name_of, name_suffix, new_uid, rv_of},
    pagination::Continue,
    patch::{self, PatchKind},
    path::ResourcePath,
    schema::{self, FieldValidation},
    selectors::{FieldSelector, LabelSelector, labels_of},
    status::ApiError,
    table::{self, IncludeObject},
    watch,
};
use crate::registry::{self as resources, ResourceDef};
use crate::store::{ObjectKey, Precondition, StoreError, WriteOp};

/// How many times a write without a client-given resourceVersion retries after losing a race.
pub(super) const WRITE_ATTEMPTS: usize = 16;

/// A resolved resource request.
pub(crate) struct Target {
    pub def: ResourceDef,
    pub version: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub status: bool,
}

impl Target {
    fn key(&self, cluster: &str, name: &str) -> ObjectKey {
        ObjectKey {
            cluster: cluster.to_owned(),
            group: self.def.storage_group.clone(),
            resource: self.def.plural.clone(),
            namespace: self.namespace.clone().unwrap_or_default(),
            name: name.to_owned(),
        }
    }
}

pub(crate) fn store_error(e: StoreError) -> ApiError {
    match e {
        e @ StoreError::TooDeep { .. } => ApiError::bad_request(e.to_string()),
        e => ApiError::internal(format!("storage error: {e}")),
    }
}

pub(crate) async fn resource(
    st: &ApiState,
    ctx: Ctx,
    p: ResourcePath,
) -> Result<Response, ApiError> {
    gc::resume_once(st);
    let def = st
        .registry
        .find(&ctx.cluster, &p.group, &p.version, &p.resource)
        .ok_or_else(ApiError::not_found_path)?;
    if !def.namespaced && p.namespace.is_some() {
        return Err(ApiError::not_found_path());
    }
    // TokenRequest: `serviceaccounts/NAME/token`.
    if def.group.is_empty()
        && def.plural == "serviceaccounts"
        && p.subresource.as_deref() == Some("token")
    {
        return match (&ctx.method, &p.namespace, &p.name) {
            (&Method::POST, Some(ns), Some(name)) => {
                let body = write::object_body(&ctx).await?;
                auth::tokens::token_request(st, &ctx, ns, name, body).await
            }
            (m, _, _) => Err(ApiError::method_not_allowed(m.as_str())),
        };
    }
    let status = match p.subresource.as_deref() {
        None => false,
        Some("status") if def.status_subresource() => true,
        Some(_) => return Err(ApiError::not_found_path()),
    };
    if def.is_review() {
        return match (&ctx.method, &p.name, &p.subresource) {
            (&Method::POST, None, None) => {
                let body = write::object_body(&ctx).await?;
                auth::reviews::answer(st, &ctx, &def, &p.version, p.namespace.as_deref(), body)
                    .await
            }
            (m, _, _) => Err(ApiError::method_not_allowed(m.as_str())),
        };
    }
    let t = Target {
        def,
        version: p.version,
        namespace: p.namespace,
        name: p.name,
        status,
    };
    let watching = p.watch || ctx.flag("watch");
    let result = match (&ctx.method, t.name.clone()) {
        (&Method::GET, _) if watching => watch::serve(st, &ctx, &t).await,
        (&Method::GET, Some(name)) => get(st, &ctx, &t, &name).await,
        (&Method::GET, None) => list(st, &ctx, &t).await,
        (&Method::POST, None) if !t.status => create(st, &ctx, &t).await,
        (&Method::PUT, Some(name)) => update(st, &ctx, &t, &name).await,
        (&Method::PATCH, Some(name)) => patch(st, &ctx, &t, &name).await,
        (&Method::DELETE, Some(name)) if !t.status => delete(st, &ctx, &t, &name).await,
        (&Method::DELETE, None) => delete_collection(st, &ctx, &t).await,
        (m, _) => Err(ApiError::method_not_allowed(m.as_str())),
    };
    let mut response = result?;
    let mut warnings = std::mem::take(&mut *ctx.warnings.lock().unwrap_or_else(|e| e.into_inner()));
    // A write retried after losing a race warns again about the same fields.
    warnings.dedup();
    for w in &warnings {
        if let Ok(v) = header::HeaderValue::from_str(&format!("299 - {w:?}")) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    Ok(response)
}

/// Sets the `apiVersion` a client asked for (objects are stored once per group and resource),
/// with the defaults a custom kind's schema gained since the object was stored.
pub(crate) fn at_version(def: &ResourceDef, version: &str, obj: Value) -> Value {
    let mut obj = conversion::from_storage(def, obj);
    if let Some(s) = def.schema.as_deref().filter(|_| def.custom) {
        schema::apply_defaults(s, &mut obj);
    }
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(def.api_version(version)));
    }
    obj
}

pub(super) fn representation(ctx: &Ctx) -> Result<Representation, ApiError> {
    let accept = ctx.header(header::ACCEPT);
    negotiate::for_resource(accept, true).ok_or_else(|| ApiError::not_acceptable(accept))
}

pub(super) fn include_object(ctx: &Ctx) -> Result<IncludeObject, ApiError> {
    IncludeObject::parse(ctx.param("includeObject")).map_err(ApiError::bad_request)
}

pub(super) fn dry_run(ctx: &Ctx) -> Result<bool, ApiError> {
    match ctx.param("dryRun") {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
        ))),
    }
}

pub(super) fn check_field_validation(ctx: &Ctx) -> Result<FieldValidation, ApiError> {
    FieldValidation::parse(ctx.param("fieldValidation")).map_err(ApiError::bad_request)
}

/// Applies a custom kind's schema defaults and prunes what the schema does not define,
/// refusing (`Strict`) or warning about (`Warn`) it as the request asked.
pub(super) fn apply_schema(ctx: &Ctx, t: &Target, obj: &mut Value) -> Result<(), ApiError> {
    let mode = check_field_validation(ctx)?;
    let Some(schema) = t.def.schema.as_ref().filter(|_| t.def.custom) else {
        return Ok(());
    };
    // Defaults first: a default is a field the schema knows, never an unknown one.
    schema::apply_defaults(schema, obj);
    let unknown = schema::prune(schema, obj);
    if unknown.is_empty() {
        return Ok(());
    }
    let messages = unknown.iter().map(|f| format!("unknown field \"{f}\""));
    match mode {
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            messages.collect::<Vec<_>>().join(", ")
        ))),
        FieldValidation::Warn => {
            ctx.warn(messages);
            Ok(())
        }
        FieldValidation::Ignore => Ok(()),
    }
}

pub(super) fn is_crd(def: &ResourceDef) -> bool {
    def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_look_like_uuids() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(u.matches('-').count(), 4);
        assert_ne!(new_uid(), u);
        assert_eq!(name_suffix().len(), 5);
    }
}
