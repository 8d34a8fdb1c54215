//! Subresources besides `status` (and `serviceaccounts/token`, answered by
//! [`crate::api::auth::tokens`]): `scale` of the built-in workloads and of custom kinds that
//! declare it, `pods/eviction`, `pods/binding`, `pods/ephemeralcontainers`, and
//! `certificatesigningrequests/approval`.
//! Each is a read or a read-modify-write of the object itself, through the same write loop
//! as an update ([`guaranteed_update`]).

use super::commit::{By, guaranteed_update};
use super::delete::delete_one;
use super::read::get;
use super::target::*;
use super::write::{object_body, pinned_rv_matches, writer};
use crate::api::{
    csr, disruption, ephemeral_containers,
    scale::{self, ScalePaths},
};

/// Serves subresource `sub` (one `t`'s kind declares) of the object `t` names.
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
    match (sub, &ctx.method) {
        ("scale", &Method::GET) => get_scale(st, ctx, t, &name).await,
        ("scale", &Method::PUT | &Method::PATCH) => write_scale(st, ctx, t, &name).await,
        ("eviction", &Method::POST) => evict(st, ctx, t, &name).await,
        ("binding", &Method::POST) => bind(st, ctx, t, &name).await,
        ("approval" | "ephemeralcontainers", &Method::GET) => get(&st.core, ctx, t, &name).await,
        ("ephemeralcontainers", &Method::PUT | &Method::PATCH) => {
            add_ephemeral(st, ctx, t, &name).await
        }
        ("log", &Method::GET) => super::kubelet::pod_log(st, ctx, t, &name).await,
        ("proxy", _) if t.def.plural == "nodes" => {
            super::kubelet::node_proxy(st, ctx, t, &name).await
        }
        ("approval", &Method::PUT | &Method::PATCH) => approve(st, ctx, t, &name).await,
        (_, m) => Err(ApiError::method_not_allowed(m.as_str())),
    }
}

/// What a create-like subresource answers on success, as kube-apiserver does.
fn success() -> Response {
    json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201}),
    )
}

/// Where `t`'s kind keeps its replicas: fixed for the built-ins, declared by a custom kind's
/// CRD.
async fn scale_paths(st: &Writes, ctx: &Ctx, t: &Target) -> Result<ScalePaths, ApiError> {
    if !t.def.custom {
        return Ok(scale::builtin());
    }
    let key = ObjectKey {
        cluster: ctx.cluster.clone(),
        group: "apiextensions.k8s.io".into(),
        resource: "customresourcedefinitions".into(),
        namespace: String::new(),
        name: format!("{}.{}", t.def.plural, t.def.group),
    };
    let (_, crd) = st
        .core
        .store
        .get(&key)
        .await
        .map_err(store_error)?
        .ok_or_else(ApiError::not_found_path)?;
    scale::of_crd(&crd, &t.version).ok_or_else(ApiError::not_found_path)
}

async fn get_scale(st: &Writes, ctx: &Ctx, t: &Target, name: &str) -> Result<Response, ApiError> {
    let paths = scale_paths(st, ctx, t).await?;
    let (_, obj) = t.stored(&st.core, &ctx.cluster, name).await?;
    let served = t.served(obj);
    Ok(json_response(
        StatusCode::OK,
        &scale::scale_of(&served, &paths),
    ))
}

/// What a subresource write asks for, given the current form: a PUT's body, or the current
/// form patched. An apply patch is merged as a merge patch (ownership is recorded as for an
/// update).
fn requested(ctx: &Ctx, body: Option<&Value>, current: &Value) -> Result<Value, ApiError> {
    if let Some(body) = body {
        return Ok(body.clone());
    }
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

async fn write_scale(st: &Writes, ctx: &Ctx, t: &Target, name: &str) -> Result<Response, ApiError> {
    let paths = scale_paths(st, ctx, t).await?;
    let body = match ctx.method {
        Method::PUT => Some(object_body(ctx).await?),
        _ => None,
    };
    let mut w = writer(ctx, t);
    w.subresource = Some("scale");
    let obj = guaranteed_update(st, ctx, t, name, By::Client, |current| {
        let wanted = requested(ctx, body.as_ref(), &scale::scale_of(current, &paths))?;
        pinned_rv_matches(t, name, rv_of(&wanted), current)?;
        let replicas = scale::requested_replicas(&wanted)
            .map_err(|e| ApiError::invalid("Scale", name, e.to_string()))?;
        let new = scale::with_replicas(current, &paths, replicas);
        let mut new = objects::prepare_update(&t.def, t.kind, &t.version, current, new, false)
            .and_then(|new| {
                crate::api::validation::validated(
                    &st.core.patterns,
                    &t.def,
                    t.kind,
                    new,
                    Some(current),
                )
            })?;
        apply::own_updated(current, &mut new, &w, jiff::Timestamp::now());
        Ok(new)
    })
    .await?;
    Ok(json_response(
        StatusCode::OK,
        &scale::scale_of(&obj, &paths),
    ))
}

/// The Target of another kind of the same cluster (`group`/`plural`, at its first version).
fn other_target(
    st: &Writes,
    ctx: &Ctx,
    group: &str,
    plural: &str,
    namespace: &str,
) -> Result<Target, ApiError> {
    let def = st
        .core
        .registry
        .find_stored(&ctx.cluster, group, plural)
        .ok_or_else(|| ApiError::internal(format!("{plural}.{group} is not served")))?;
    Ok(Target::stored_form(&def, Some(namespace.to_owned())))
}

/// How often an eviction is tried again when its budget changed under it.
const EVICTION_ATTEMPTS: usize = 8;

/// `pods/NAME/eviction`: deletes the Pod unless its PodDisruptionBudget allows no disruption
/// now (429), counting it against the budget's status where a controller keeps one
/// ([`disruption`]).
async fn evict(st: &Writes, ctx: &Ctx, t: &Target, name: &str) -> Result<Response, ApiError> {
    let body = object_body(ctx).await?;
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
    let dry = dry_run(ctx)?
        || options["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|v| v == "All"));
    let ns = t.namespace.clone().unwrap_or_default();
    let budgets = other_target(st, ctx, "policy", "poddisruptionbudgets", &ns)?;
    for _ in 0..EVICTION_ATTEMPTS {
        let (_, pod) = t.stored(&st.core, &ctx.cluster, name).await?;
        let mut counted = None;
        if !disruption::ignores_budgets(&pod) {
            let pdbs = st
                .core
                .store
                .list(
                    &ctx.cluster,
                    "policy",
                    "poddisruptionbudgets",
                    Some(&ns),
                    None,
                    0,
                )
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
                let pods = st
                    .core
                    .store
                    .list(&ctx.cluster, "", "pods", Some(&ns), None, 0)
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
            let key = budgets.key(&ctx.cluster, name_of(&pdb));
            // Counted against the budget as it was weighed, or weighed again.
            let (rv, stored) = match st.core.store.get(&key).await.map_err(store_error)? {
                Some(found) => found,
                None => continue,
            };
            if !objects::same_content(&stored, &pdb) {
                continue;
            }
            let now = objects::rfc3339(jiff::Timestamp::now());
            let mut new = stored;
            new["status"] = disruption::disrupted_status(&pdb, name, &now);
            match st
                .core
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
        delete_one(st, ctx, t, name, &options).await?;
        return Ok(success());
    }
    Err(ApiError::conflict("policy", "poddisruptionbudgets", name))
}

/// `pods/NAME/binding`: assigns an unassigned Pod to the node the Binding names.
async fn bind(st: &Writes, ctx: &Ctx, t: &Target, name: &str) -> Result<Response, ApiError> {
    let body = object_body(ctx).await?;
    let node = body
        .pointer("/target/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::invalid("Binding", name, "target.name: Required value"))?
        .to_owned();
    let annotations = body.pointer("/metadata/annotations").cloned();
    guaranteed_update(st, ctx, t, name, By::Server, |current| {
        if is_deleting(current) {
            return Err(ApiError::new(
                409,
                "Conflict",
                format!("pod {name} is being deleted, cannot be assigned to a host"),
            ));
        }
        if let Some(bound) = current
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            return Err(ApiError::new(
                409,
                "Conflict",
                format!("pod {name} is already assigned to node \"{bound}\""),
            ));
        }
        let mut new = current.clone();
        new["spec"]["nodeName"] = json!(node);
        for (k, v) in annotations.iter().filter_map(Value::as_object).flatten() {
            new["metadata"]["annotations"][k] = v.clone();
        }
        let mut new = objects::prepare_update(&t.def, t.kind, &t.version, current, new, false)?;
        // The scheduler's condition; the main endpoint would keep the current status.
        let scheduled = json!({"type": "PodScheduled", "status": "True",
            "lastTransitionTime": objects::rfc3339(jiff::Timestamp::now())});
        let mut conditions: Vec<Value> = new
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        conditions.retain(|c| c["type"] != "PodScheduled");
        conditions.push(scheduled);
        if !new["status"].is_object() {
            new["status"] = json!({});
        }
        new["status"]["conditions"] = Value::Array(conditions);
        Ok(new)
    })
    .await?;
    Ok(success())
}

/// `certificatesigningrequests/NAME/approval`: an update or patch of which only the
/// `Approved`/`Denied` conditions count ([`csr::approved`]).
async fn approve(st: &Writes, ctx: &Ctx, t: &Target, name: &str) -> Result<Response, ApiError> {
    let body = match ctx.method {
        Method::PUT => Some(object_body(ctx).await?),
        _ => None,
    };
    let mut w = writer(ctx, t);
    w.subresource = Some("approval");
    w.part = apply::Part::Status;
    let obj = guaranteed_update(st, ctx, t, name, By::Client, |current| {
        let wanted = requested(ctx, body.as_ref(), current)?;
        pinned_rv_matches(t, name, rv_of(&wanted), current)?;
        let now = objects::rfc3339(jiff::Timestamp::now());
        let new = csr::approved(current, &wanted, &now)
            .map_err(|e| ApiError::invalid(&t.def.kind, name, e.to_string()))?;
        let mut new = objects::prepare_update(&t.def, t.kind, &t.version, current, new, true)?;
        apply::own_updated(current, &mut new, &w, jiff::Timestamp::now());
        Ok(new)
    })
    .await?;
    Ok(json_response(StatusCode::OK, &obj))
}

/// `pods/NAME/ephemeralcontainers`: an update or patch of which only the Pod's ephemeral
/// containers count, and only additions ([`ephemeral_containers::updated`]).
async fn add_ephemeral(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
    name: &str,
) -> Result<Response, ApiError> {
    let body = match ctx.method {
        Method::PUT => Some(object_body(ctx).await?),
        _ => None,
    };
    let mut w = writer(ctx, t);
    w.subresource = Some("ephemeralcontainers");
    let obj = guaranteed_update(st, ctx, t, name, By::Client, |current| {
        let wanted = requested(ctx, body.as_ref(), current)?;
        pinned_rv_matches(t, name, rv_of(&wanted), current)?;
        let new = ephemeral_containers::updated(current, &wanted)
            .map_err(|e| crate::api::field_errors::invalid("Pod", "", name, &e))?;
        let new = objects::prepare_update(&t.def, t.kind, &t.version, current, new, false)?;
        // Validated as a new Pod would be: the update rules of the main endpoint forbid
        // exactly the change this subresource exists to make.
        let mut new =
            crate::api::validation::validated(&st.core.patterns, &t.def, t.kind, new, None)?;
        apply::own_updated(current, &mut new, &w, jiff::Timestamp::now());
        Ok(new)
    })
    .await?;
    Ok(json_response(StatusCode::OK, &obj))
}
