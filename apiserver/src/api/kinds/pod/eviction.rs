//! `pods/NAME/eviction`: deletes the Pod unless its PodDisruptionBudget allows no disruption
//! now (429), counting it against the budget's status where a controller keeps one
//! ([`crate::api::disruption`]).

use axum::{http::Method, response::Response};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::api::{
    disruption,
    kinds::subresource::{ObjectRequest, not_allowed, success},
    objects,
    status::ApiError,
    store_error::store_error,
};
use crate::store::{ObjectKey, Precondition, StoreError, WriteOp};

/// How often an eviction is tried again when its budget changed under it.
const EVICTION_ATTEMPTS: usize = 8;

const BUDGETS_GROUP: &str = "policy";
const BUDGETS: &str = "poddisruptionbudgets";

pub(super) fn serve<'a>(r: &'a ObjectRequest<'a>) -> BoxFuture<'a, Result<Response, ApiError>> {
    Box::pin(async move {
        match r.ctx.method {
            Method::POST => evict(r).await,
            _ => Err(not_allowed(r)),
        }
    })
}

async fn evict(r: &ObjectRequest<'_>) -> Result<Response, ApiError> {
    let (ctx, name, core) = (r.ctx, r.name, &*r.writes.core);
    let body = r.verbs.body().await?;
    if let Some(given) = body.pointer("/metadata/name").and_then(Value::as_str)
        && !given.is_empty()
        && given != name
    {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let options = body
        .get("deleteOptions")
        .filter(|o| o.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let dry = r.verbs.dry_run()?
        || options["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|v| v == "All"));
    let ns = r.namespace;
    let budgets = core
        .registry
        .find_stored(&ctx.cluster, BUDGETS_GROUP, BUDGETS)
        .ok_or_else(|| ApiError::internal(format!("{BUDGETS}.{BUDGETS_GROUP} is not served")))?;
    for _ in 0..EVICTION_ATTEMPTS {
        let (_, pod) = r.verbs.stored().await?;
        let mut counted = None;
        if !disruption::ignores_budgets(&pod) {
            let pdbs = core
                .store
                .list(&ctx.cluster, BUDGETS_GROUP, BUDGETS, Some(ns), None, 0)
                .await
                .map_err(store_error)?;
            let covering: Vec<&Value> = pdbs
                .items
                .iter()
                .filter(|b| disruption::selects(b, &pod))
                .collect();
            if covering.len() > 1 {
                return Err(ApiError::internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                ));
            }
            if let Some(pdb) = covering.first() {
                let pods = core
                    .store
                    .list(
                        &ctx.cluster,
                        &r.def.storage_group,
                        &r.def.plural,
                        Some(ns),
                        None,
                        0,
                    )
                    .await
                    .map_err(store_error)?;
                let budget = disruption::budget(pdb, &pods.items);
                match disruption::decide(&pod, &budget) {
                    disruption::Outcome::Delete => {}
                    disruption::Outcome::Disrupt => counted = Some((*pdb).clone()),
                    disruption::Outcome::Refuse(cause) => {
                        let mut e = ApiError::new(
                            429,
                            "TooManyRequests",
                            "Cannot evict pod as it would violate the pod's disruption budget.",
                        );
                        e.details = Some(
                            json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]}),
                        );
                        return Err(e);
                    }
                }
            }
        }
        if dry {
            return Ok(success());
        }
        if let Some(pdb) = counted {
            let key = ObjectKey {
                cluster: ctx.cluster.clone(),
                group: budgets.storage_group.clone(),
                resource: budgets.plural.clone(),
                namespace: ns.to_owned(),
                name: objects::name_of(&pdb).to_owned(),
            };
            // Counted against the budget as it was weighed, or weighed again.
            let (rv, stored) = match core.store.get(&key).await.map_err(store_error)? {
                Some(found) => found,
                None => continue,
            };
            if !objects::same_content(&stored, &pdb) {
                continue;
            }
            let now = objects::rfc3339(jiff::Timestamp::now());
            let mut new = stored;
            new["status"] = disruption::disrupted_status(&pdb, name, &now);
            match core
                .store
                .commit(&key, Precondition::At(rv), WriteOp::Put(new))
                .await
            {
                Ok(_) => {}
                // The budget changed (another eviction counted against it): weigh it again.
                Err(StoreError::Conflict { .. } | StoreError::NotFound) => continue,
                Err(e) => return Err(store_error(e)),
            }
        }
        r.verbs.delete(&options).await?;
        return Ok(success());
    }
    Err(ApiError::conflict(BUDGETS_GROUP, BUDGETS, name))
}
