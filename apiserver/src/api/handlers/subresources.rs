//! Subresources besides `status` (and `serviceaccounts/token`, answered by
//! [`crate::api::auth::tokens`]): each is served by the object's kind
//! ([`crate::api::kinds::KindStrategy::subresource`]; `scale`, `pods/eviction`,
//! `nodes/proxy`...), which reads and writes the object through the verbs lent here: a read,
//! the same write loop as an update ([`guaranteed_update`]), the same delete.

use futures::future::BoxFuture;

use super::commit::{By, guaranteed_update};
use super::delete::delete_one;
use super::read::get;
use super::target::*;
use super::write::{object_body, pinned_rv_matches, writer};
use crate::api::kinds::{Mutation, ObjectRequest, ObjectVerbs};

/// Serves subresource `sub` (one `t`'s resource declares) of the object `t` names, as its kind
/// does; 405 when the kind serves no such subresource.
pub(super) async fn serve(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
    sub: &str,
) -> Result<Response, ApiError> {
    let name = match &t.name {
        Some(n) if !(t.def.namespaced && t.namespace.is_none()) => n.clone(),
        _ => return Err(ApiError::not_found_path()),
    };
    let Some(serve) = t.kind.subresource(sub) else {
        return Err(ApiError::method_not_allowed(ctx.method.as_str()));
    };
    let verbs = OnObject {
        st,
        ctx,
        t,
        name: &name,
    };
    serve(&ObjectRequest {
        writes: st,
        ctx,
        def: &t.def,
        version: &t.version,
        namespace: t.namespace.as_deref().unwrap_or_default(),
        name: &name,
        verbs: &verbs,
    })
    .await
}

/// The verbs on the one object a subresource request names.
struct OnObject<'a> {
    st: &'a Writes,
    ctx: &'a Ctx,
    t: &'a Target,
    name: &'a str,
}

impl ObjectVerbs for OnObject<'_> {
    fn stored(&self) -> BoxFuture<'_, Result<(u64, Value), ApiError>> {
        Box::pin(self.t.stored(&self.st.core, &self.ctx.cluster, self.name))
    }

    fn served(&self, obj: Value) -> Value {
        self.t.served(obj)
    }

    fn body(&self) -> BoxFuture<'_, Result<Value, ApiError>> {
        Box::pin(object_body(self.ctx))
    }

    fn get(&self) -> BoxFuture<'_, Result<Response, ApiError>> {
        Box::pin(get(&self.st.core, self.ctx, self.t, self.name))
    }

    fn update<'a>(&'a self, mutate: Mutation<'a>) -> BoxFuture<'a, Result<Value, ApiError>> {
        Box::pin(guaranteed_update(
            self.st,
            self.ctx,
            self.t,
            self.name,
            By::Client,
            mutate,
        ))
    }

    fn update_as_server<'a>(
        &'a self,
        mutate: Mutation<'a>,
    ) -> BoxFuture<'a, Result<Value, ApiError>> {
        Box::pin(guaranteed_update(
            self.st,
            self.ctx,
            self.t,
            self.name,
            By::Server,
            mutate,
        ))
    }

    fn delete<'a>(&'a self, options: &'a Value) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            delete_one(self.st, self.ctx, self.t, self.name, options).await?;
            Ok(())
        })
    }

    fn writer(&self, sub: &'static str) -> apply::Writer {
        let mut w = writer(self.ctx, self.t);
        w.subresource = Some(sub);
        w
    }

    fn pinned_rv_matches(&self, given: Option<&str>, current: &Value) -> Result<(), ApiError> {
        pinned_rv_matches(self.t, self.name, given, current)
    }

    fn dry_run(&self) -> Result<bool, ApiError> {
        dry_run(self.ctx)
    }

    fn prepare_update(&self, current: &Value, new: Value, status: bool) -> Result<Value, ApiError> {
        let t = self.t;
        objects::prepare_update(&t.def, t.kind, &t.version, current, new, status)
    }

    fn validated(&self, obj: Value, old: Option<&Value>) -> Result<Value, ApiError> {
        let t = self.t;
        crate::api::validation::validated(&self.st.core.patterns, &t.def, t.kind, obj, old)
    }

    /// A PUT's body, or the current form patched; an apply patch is merged as a merge patch
    /// (ownership is recorded as for an update).
    fn requested(&self, body: Option<&Value>, current: &Value) -> Result<Value, ApiError> {
        if let Some(body) = body {
            return Ok(body.clone());
        }
        let ctx = self.ctx;
        let ct = ctx.header(header::CONTENT_TYPE);
        let kind = match PatchKind::from_content_type(ct) {
            Some(PatchKind::Apply) => PatchKind::Merge,
            Some(k) => k,
            None => return Err(ApiError::unsupported_media_type(ct)),
        };
        let patch_body = if ct.contains("apply-patch") {
            // An apply configuration may be YAML.
            serde_json::to_vec(&patch::parse_body(&ctx.body).map_err(ApiError::bad_request)?)
                .map_err(|e| ApiError::bad_request(e.to_string()))?
        } else {
            ctx.body.to_vec()
        };
        patch::apply(current, kind, &patch_body).map_err(|e| match e {
            patch::PatchError::TooLarge => crate::api::validation::object_too_large(),
            patch::PatchError::Invalid(m) => ApiError::bad_request(m),
        })
    }
}
