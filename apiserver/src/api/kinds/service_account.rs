//! ServiceAccounts: a namespace's `default` one is put back once deleted
//! ([`super::namespace::KeptInEveryNamespace`]), and `serviceaccounts/NAME/token` answers a
//! TokenRequest ([`crate::api::auth::tokens`]).

use super::{
    namespace::KeptInEveryNamespace,
    strategy::{Committed, Hook, KindStrategy, SubresourceCreate, Write},
};
use crate::{
    api::{Core, Ctx, auth::tokens, objects::KindRules, status::ApiError},
    store::ObjectKey,
};
use axum::response::Response;
use futures::future::BoxFuture;
use serde_json::Value;

pub(super) struct ServiceAccount;

impl KindRules for ServiceAccount {}

impl KindStrategy for ServiceAccount {
    fn after_commit<'a>(
        &'a self,
        w: &'a Write<'a>,
        key: &'a ObjectKey,
        change: Committed<'a>,
    ) -> Hook<'a> {
        KeptInEveryNamespace.after_commit(w, key, change)
    }

    fn subresource_create(&self, sub: &str) -> Option<SubresourceCreate> {
        (sub == "token").then_some(token as SubresourceCreate)
    }
}

/// `serviceaccounts/NAME/token`: a TokenRequest.
fn token<'a>(
    core: &'a Core,
    ctx: &'a Ctx,
    namespace: &'a str,
    name: &'a str,
    body: Value,
) -> BoxFuture<'a, Result<Response, ApiError>> {
    Box::pin(tokens::token_request(core, ctx, namespace, name, body))
}
