//! Resource requests: get, list, create, update, patch, delete, deletecollection (watch is in
//! [`super::watch`]). This module resolves the target and dispatches; the verbs live in
//! [`read`], [`write`] and [`delete`] (subresources besides `status` in [`subresources`]),
//! written in what [`target`] shares, and none of them imports this dispatcher. Every write
//! ends in [`commit`]; the garbage collector is a scheduler ([`collector`]) running passes
//! ([`gc`]) over what [`owners`] finds, and the modules import one another in that one
//! direction only.

mod as_protobuf;
mod collector;
mod commit;
mod delete;
mod gc;
mod owners;
mod read;
mod subresources;
pub(crate) mod target;
mod write;

pub(crate) use collector::{Collector, resume_once as resume_collection};
use target::Target;

use delete::{delete, delete_collection};
use read::{get, list};
use write::{create, patch, update};

use axum::{
    http::{Method, header},
    response::Response,
};

use super::{ApiState, Ctx, Writes, auth, path::ResourcePath, status::ApiError, watch};

/// The garbage collector of one opening of the store, working with the collector's passes.
pub(crate) fn new_collector() -> Collector {
    Collector::new(gc::pass)
}

pub(crate) async fn resource(
    st: &ApiState,
    ctx: Ctx,
    p: ResourcePath,
) -> Result<Response, ApiError> {
    let writes = st.writes();
    collector::resume_once(&writes);
    let watching = p.watch || ctx.flag("watch");
    // A client that takes protobuf alone (client-go's typed clients may ask so) gets every
    // answer in it, subresources' and errors included, as kube-apiserver answers; a watch
    // frames its own. A 406 (no protobuf form) stays JSON: it is the answer that says so.
    let in_protobuf = !watching && super::negotiate::protobuf_only(ctx.header(header::ACCEPT));
    let mut response = match dispatch(st, &writes, &ctx, p, watching, in_protobuf).await {
        Ok(r) => r,
        Err(e) if in_protobuf && e.code != 406 => axum::response::IntoResponse::into_response(e),
        Err(e) => return Err(e),
    };
    if in_protobuf {
        response = as_protobuf::transcode(response).await?;
    }
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

/// Resolves the target of a resource request and runs its verb: reads take the core, watches
/// and reviews the callers' state too, writes what the write pipelines use.
async fn dispatch(
    st: &ApiState,
    writes: &Writes,
    ctx: &Ctx,
    p: ResourcePath,
    watching: bool,
    in_protobuf: bool,
) -> Result<Response, ApiError> {
    let core = &*st.core;
    let def = core
        .registry
        .find(&ctx.cluster, &p.group, &p.version, &p.resource)
        .ok_or_else(ApiError::not_found_path)?;
    if !def.namespaced && p.namespace.is_some() {
        return Err(ApiError::not_found_path());
    }
    let kind = crate::api::kinds::of(&def);
    // A create answered by a subresource of the object (TokenRequest: `serviceaccounts/NAME/token`).
    if let Some(create) = p
        .subresource
        .as_deref()
        .and_then(|s| kind.subresource_create(s))
    {
        return match (&ctx.method, &p.namespace, &p.name) {
            (&Method::POST, Some(ns), Some(name)) => {
                let body = write::object_body(ctx).await?;
                create(core, ctx, ns, name, body).await
            }
            (m, _, _) => Err(ApiError::method_not_allowed(m.as_str())),
        };
    }
    let (status, other) = match p.subresource.as_deref() {
        None => (false, None),
        Some("status") if def.status_subresource() => (true, None),
        Some(s) if def.subresource(s).is_some() => (false, Some(s.to_owned())),
        Some(_) => return Err(ApiError::not_found_path()),
    };
    if def.is_review() {
        return match (&ctx.method, &p.name, &p.subresource) {
            (&Method::POST, None, None) => {
                let body = write::object_body(ctx).await?;
                auth::reviews::answer(
                    core,
                    &st.auth,
                    ctx,
                    &def,
                    &p.version,
                    p.namespace.as_deref(),
                    body,
                )
                .await
            }
            (m, _, _) => Err(ApiError::method_not_allowed(m.as_str())),
        };
    }
    let t = Target {
        def,
        kind,
        version: p.version,
        namespace: p.namespace,
        name: p.name,
        status,
    };
    if let Some(sub) = other.as_deref() {
        return subresources::serve(writes, ctx, &t, sub).await;
    }
    // Answered in protobuf: a kind without that form is refused before the verb runs (a write
    // refused after it was stored would be stored all the same).
    let api_version = t.def.api_version(&t.version);
    if in_protobuf && !super::protobuf::knows(&api_version, &t.def.kind) {
        return Err(ApiError::no_protobuf_form(&api_version, &t.def.kind));
    }
    match (&ctx.method, t.name.clone()) {
        (&Method::GET, _) if watching => watch::serve(core, &st.auth, ctx, &t).await,
        (&Method::GET, Some(name)) => get(core, ctx, &t, &name).await,
        (&Method::GET, None) => list(core, ctx, &t).await,
        (&Method::POST, None) if !t.status => create(writes, ctx, &t).await,
        (&Method::PUT, Some(name)) => update(writes, ctx, &t, &name).await,
        (&Method::PATCH, Some(name)) => patch(writes, ctx, &t, &name).await,
        (&Method::DELETE, Some(name)) if !t.status => delete(writes, ctx, &t, &name).await,
        (&Method::DELETE, None) => delete_collection(writes, ctx, &t).await,
        (m, _) => Err(ApiError::method_not_allowed(m.as_str())),
    }
}
