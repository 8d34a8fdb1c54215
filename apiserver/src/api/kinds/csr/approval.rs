//! `certificatesigningrequests/NAME/approval`: read as the request, written by an update or
//! patch of which only the `Approved`/`Denied` conditions count ([`crate::api::csr::approved`]).

use axum::{
    http::{Method, StatusCode},
    response::Response,
};
use futures::future::BoxFuture;

use crate::api::{
    apply, csr, json_response,
    kinds::subresource::{ObjectRequest, not_allowed},
    objects::{rfc3339, rv_of},
    status::ApiError,
};

pub(super) fn serve<'a>(r: &'a ObjectRequest<'a>) -> BoxFuture<'a, Result<Response, ApiError>> {
    Box::pin(async move {
        match r.ctx.method {
            Method::GET => r.verbs.get().await,
            Method::PUT | Method::PATCH => approve(r).await,
            _ => Err(not_allowed(r)),
        }
    })
}

async fn approve(r: &ObjectRequest<'_>) -> Result<Response, ApiError> {
    let name = r.name;
    let body = r.put_body().await?;
    let mut w = r.verbs.writer("approval");
    w.part = apply::Part::Status;
    let obj = r
        .verbs
        .update(&|current| {
            let wanted = r.verbs.requested(body.as_ref(), current)?;
            r.verbs.pinned_rv_matches(rv_of(&wanted), current)?;
            let now = rfc3339(jiff::Timestamp::now());
            let new = csr::approved(current, &wanted, &now)
                .map_err(|e| ApiError::invalid(&r.def.kind, name, e.to_string()))?;
            let mut new = r.verbs.prepare_update(current, new, true)?;
            apply::own_updated(current, &mut new, &w, jiff::Timestamp::now());
            Ok(new)
        })
        .await?;
    Ok(json_response(StatusCode::OK, &obj))
}
