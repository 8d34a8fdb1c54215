//! `scale`, served by every kind whose resource declares it (the built-in workloads, and the
//! custom kinds whose CRD does): the object's replica count and selector seen as a `Scale`
//! ([`crate::api::scale`]), read and written through the object itself.

use axum::{http::Method, http::StatusCode, response::Response};
use futures::future::BoxFuture;

use super::subresource::{ObjectRequest, Subresource, not_allowed};
use crate::api::{
    apply, json_response,
    scale::{self, ScalePaths},
    status::ApiError,
    store_error::store_error,
};
use crate::store::ObjectKey;

/// The subresources every kind serves when its resource declares them.
pub(super) fn of_any_kind(sub: &str) -> Option<Subresource> {
    (sub == "scale").then_some(serve as Subresource)
}

fn serve<'a>(r: &'a ObjectRequest<'a>) -> BoxFuture<'a, Result<Response, ApiError>> {
    Box::pin(async move {
        match r.ctx.method {
            Method::GET => get_scale(r).await,
            Method::PUT | Method::PATCH => write_scale(r).await,
            _ => Err(not_allowed(r)),
        }
    })
}

/// Where the object's kind keeps its replicas: fixed for the built-ins, declared by a custom
/// kind's CRD.
async fn scale_paths(r: &ObjectRequest<'_>) -> Result<ScalePaths, ApiError> {
    if !r.def.custom {
        return Ok(scale::builtin());
    }
    let key = ObjectKey {
        cluster: r.ctx.cluster.clone(),
        group: "apiextensions.k8s.io".into(),
        resource: "customresourcedefinitions".into(),
        namespace: String::new(),
        name: format!("{}.{}", r.def.plural, r.def.group),
    };
    let (_, crd) = r
        .writes
        .core
        .store
        .get(&key)
        .await
        .map_err(store_error)?
        .ok_or_else(ApiError::not_found_path)?;
    scale::of_crd(&crd, r.version).ok_or_else(ApiError::not_found_path)
}

async fn get_scale(r: &ObjectRequest<'_>) -> Result<Response, ApiError> {
    let paths = scale_paths(r).await?;
    let (_, obj) = r.verbs.stored().await?;
    let served = r.verbs.served(obj);
    Ok(json_response(
        StatusCode::OK,
        &scale::scale_of(&served, &paths),
    ))
}

async fn write_scale(r: &ObjectRequest<'_>) -> Result<Response, ApiError> {
    let paths = scale_paths(r).await?;
    let body = r.put_body().await?;
    let w = r.verbs.writer("scale");
    let name = r.name;
    let obj = r
        .verbs
        .update(&|current| {
            let wanted = r
                .verbs
                .requested(body.as_ref(), &scale::scale_of(current, &paths))?;
            r.verbs
                .pinned_rv_matches(crate::api::objects::rv_of(&wanted), current)?;
            let replicas = scale::requested_replicas(&wanted)
                .map_err(|e| ApiError::invalid("Scale", name, e.to_string()))?;
            let new = scale::with_replicas(current, &paths, replicas);
            let mut new = r
                .verbs
                .prepare_update(current, new, false)
                .and_then(|new| r.verbs.validated(new, Some(current)))?;
            apply::own_updated(current, &mut new, &w, jiff::Timestamp::now());
            Ok(new)
        })
        .await?;
    Ok(json_response(
        StatusCode::OK,
        &scale::scale_of(&obj, &paths),
    ))
}
