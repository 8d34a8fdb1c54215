//! `pods/NAME/ephemeralcontainers`: read as the Pod, written by an update or patch of which
//! only the Pod's ephemeral containers count, and only additions
//! ([`crate::api::ephemeral_containers::updated`]).

use axum::{
    http::{Method, StatusCode},
    response::Response,
};
use futures::future::BoxFuture;

use crate::api::{
    apply, ephemeral_containers, field_errors, json_response,
    kinds::subresource::{ObjectRequest, not_allowed},
    objects::rv_of,
    status::ApiError,
};

pub(super) fn serve<'a>(r: &'a ObjectRequest<'a>) -> BoxFuture<'a, Result<Response, ApiError>> {
    Box::pin(async move {
        match r.ctx.method {
            Method::GET => r.verbs.get().await,
            Method::PUT | Method::PATCH => add_ephemeral(r).await,
            _ => Err(not_allowed(r)),
        }
    })
}

async fn add_ephemeral(r: &ObjectRequest<'_>) -> Result<Response, ApiError> {
    let name = r.name;
    let body = r.put_body().await?;
    let w = r.verbs.writer("ephemeralcontainers");
    let obj = r
        .verbs
        .update(&|current| {
            let wanted = r.verbs.requested(body.as_ref(), current)?;
            r.verbs.pinned_rv_matches(rv_of(&wanted), current)?;
            let new = ephemeral_containers::updated(current, &wanted)
                .map_err(|e| field_errors::invalid(&r.def.kind, "", name, &e))?;
            let new = r.verbs.prepare_update(current, new, false)?;
            // Validated as a new Pod would be: the update rules of the main endpoint forbid
            // exactly the change this subresource exists to make.
            let mut new = r.verbs.validated(new, None)?;
            apply::own_updated(current, &mut new, &w, jiff::Timestamp::now());
            Ok(new)
        })
        .await?;
    Ok(json_response(StatusCode::OK, &obj))
}
