//! Deletes: finalizers and `deletionTimestamp`, namespaces (emptied by the collector), owner
//! references (background propagation here; foreground and orphan through the collector's
//! finalizers, see [`super::gc`]), deletecollection. The removal itself is
//! [`super::commit::finish_delete`].

use super::collector;
use super::commit::finish_delete;
use super::owners::{FOREGROUND, ORPHAN, Owner, add_finalizer};
use super::read::collect;
use super::target::*;
use crate::api::kinds::namespace;

/// The options of a delete the server makes itself: dependents and namespace contents go in
/// the background, whatever policy the request that set it off asked for.
fn background() -> Value {
    json!({"propagationPolicy": "Background"})
}

/// Deleting an object that holds others (a namespace): it turns terminating, the objects in
/// it are deleted (those with finalizers only marked), and it goes once it is empty and has
/// no finalizers of its own.
async fn delete_holder(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
    name: &str,
) -> Result<(StatusCode, Value), ApiError> {
    let key = t.key(&ctx.cluster, name);
    let (rv, mut current) = t.stored(&st.core, &ctx.cluster, name).await?;
    if dry_run(ctx)? {
        return Ok((StatusCode::OK, t.served(current)));
    }
    if !is_deleting(&current) {
        objects::mark_deleting(&mut current, jiff::Timestamp::now());
        t.kind.terminating(&mut current);
        let ev = st
            .core
            .store
            .commit(&key, Precondition::At(rv), WriteOp::Put(current))
            .await
            .map_err(|e| match e {
                StoreError::Conflict { .. } => {
                    ApiError::conflict(&t.def.group, &t.def.plural, name)
                }
                StoreError::NotFound => ApiError::not_found(&t.def.group, &t.def.plural, name),
                e => store_error(e),
            })?;
        current = (*ev.body).clone();
    }
    // An empty one goes at once; the collector empties the others (and resumes that after a
    // restart: it looks for terminating namespaces).
    namespace::finish_if_empty(&st.core, &ctx.cluster, name).await?;
    collector::sweep(st, &ctx.cluster);
    match st.core.store.get(&key).await.map_err(store_error)? {
        Some((_, still)) => Ok((StatusCode::OK, t.served(still))),
        None => Ok((StatusCode::OK, t.served(current))),
    }
}

/// How a delete treats the objects that name the deleted one as their owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Propagation {
    /// Delete the owner, then its dependents.
    Background,
    /// Delete the dependents, then the owner.
    Foreground,
    /// Keep the dependents, without the owner reference.
    Orphan,
}

impl Propagation {
    /// The finalizer that holds the owner while the collector works.
    fn finalizer(self) -> Option<&'static str> {
        match self {
            Propagation::Background => None,
            Propagation::Foreground => Some(FOREGROUND),
            Propagation::Orphan => Some(ORPHAN),
        }
    }
}

pub(super) fn propagation(options: &Value, ctx: &Ctx) -> Result<Propagation, ApiError> {
    let policy = options
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .or_else(|| ctx.param("propagationPolicy"));
    let orphan = options
        .get("orphanDependents")
        .and_then(Value::as_bool)
        .or_else(|| ctx.param("orphanDependents").map(|v| v == "true"));
    match (policy, orphan) {
        (Some("Background") | None, None | Some(false)) => Ok(Propagation::Background),
        (Some("Foreground"), _) => Ok(Propagation::Foreground),
        (Some("Orphan"), _) | (None, Some(true)) => Ok(Propagation::Orphan),
        (Some("Background"), Some(true)) => Ok(Propagation::Orphan),
        (Some(other), _) => Err(ApiError::bad_request(format!(
            "propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
        ))),
    }
}

/// How many objects of a collection are read at a time when emptying a namespace.
const CONTENTS_PAGE: usize = 256;

/// Deletes (or marks, while they have finalizers) every object in namespace `ns`, a page at a
/// time.
pub(super) async fn delete_namespace_contents(
    st: &Writes,
    ctx: &Ctx,
    ns: &str,
) -> Result<(), ApiError> {
    for def in namespace::namespaced_collections(&st.core, &ctx.cluster) {
        let t = Target::stored_form(&def, Some(ns.to_owned()));
        let mut after: Option<String> = None;
        loop {
            let page = st
                .core
                .store
                .list_raw(
                    &ctx.cluster,
                    &def.storage_group,
                    &def.plural,
                    Some(ns),
                    after.as_deref().map(|name| (ns, name)),
                    CONTENTS_PAGE,
                )
                .await
                .map_err(store_error)?;
            for obj in &page.items {
                match delete_one(st, ctx, &t, &obj.name, &background()).await {
                    Ok(_) => {}
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            match page.items.last() {
                Some(last) if page.more => after = Some(last.name.clone()),
                _ => break,
            }
        }
    }
    Ok(())
}

/// Refuses a delete whose preconditions (resourceVersion, uid) `current` does not meet.
fn check_preconditions(
    t: &Target,
    name: &str,
    options: &Value,
    current: &Value,
) -> Result<(), ApiError> {
    for (pointer, field) in [
        (
            "/preconditions/resourceVersion",
            "/metadata/resourceVersion",
        ),
        ("/preconditions/uid", "/metadata/uid"),
    ] {
        if let Some(want) = options.pointer(pointer).and_then(Value::as_str)
            && Some(want) != current.pointer(field).and_then(Value::as_str)
        {
            return Err(ApiError::conflict(&t.def.group, &t.def.plural, name));
        }
    }
    Ok(())
}

/// Deletes one object (or marks it, while finalizers remain); the response body. Foreground
/// and orphan deletions mark the object with the collector's finalizer: the collector deletes
/// (in the background) or orphans (before answering) its dependents, then lets it go.
pub(super) async fn delete_one(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
    name: &str,
    options: &Value,
) -> Result<(StatusCode, Value), ApiError> {
    if t.kind.holds_objects() {
        return delete_holder(st, ctx, t, name).await;
    }
    let key = t.key(&ctx.cluster, name);
    let dry = dry_run(ctx)?;
    let policy = propagation(options, ctx)?;
    for _ in 0..WRITE_ATTEMPTS {
        let (rv, current) = t.stored(&st.core, &ctx.cluster, name).await?;
        check_preconditions(t, name, options, &current)?;
        let mut marked = current.clone();
        let added = policy
            .finalizer()
            .is_some_and(|f| add_finalizer(&mut marked, f));
        if finalizers_of(&marked) > 0 {
            let unchanged = is_deleting(&current) && !added;
            objects::mark_deleting(&mut marked, jiff::Timestamp::now());
            if dry || unchanged {
                return Ok((StatusCode::OK, t.served(marked)));
            }
            match st
                .core
                .store
                .commit(&key, Precondition::At(rv), WriteOp::Put(marked))
                .await
            {
                Ok(ev) => {
                    let body = (*ev.body).clone();
                    let owner = Owner::of(&ctx.cluster, &t.def, &body);
                    match policy {
                        Propagation::Background => {}
                        Propagation::Foreground => collector::schedule(st, owner),
                        // Orphaned before the answer: clients expect the dependents' owner
                        // references gone once the delete returns.
                        Propagation::Orphan => collector::orphan_now(st, owner).await?,
                    }
                    return Ok((StatusCode::OK, t.served(body)));
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(StoreError::NotFound) => {
                    return Err(ApiError::not_found(&t.def.group, &t.def.plural, name));
                }
                Err(e) => return Err(store_error(e)),
            }
        }
        if dry {
            return Ok((StatusCode::OK, t.served(current)));
        }
        match finish_delete(st, ctx, t, &key, rv, current).await {
            Ok(body) => return Ok((StatusCode::OK, t.served(body))),
            Err(e) if e.reason == "Conflict" => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::conflict(&t.def.group, &t.def.plural, name))
}

/// The request's `DeleteOptions`: none, JSON, YAML, or protobuf as client-go's typed clients
/// send it (Helm's release storage among them).
pub(super) fn delete_options(ctx: &Ctx) -> Result<Value, ApiError> {
    if ctx.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    let ct = ctx.header(axum::http::header::CONTENT_TYPE);
    if ct.split(';').next().unwrap_or("").trim() != gpustack_kube_rest::protobuf::MEDIA_TYPE {
        return patch::parse_body(&ctx.body).map_err(ApiError::bad_request);
    }
    let options = gpustack_kube_rest::protobuf::decode(&ctx.body)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    if options["kind"] != "DeleteOptions" {
        return Err(ApiError::bad_request(format!(
            "the request body is a {}, not DeleteOptions",
            options["kind"].as_str().unwrap_or("message of no kind")
        )));
    }
    Ok(options)
}

/// Runs the admission webhooks on a client's delete of `name` (nothing when it is gone: the
/// delete answers 404).
async fn admit_delete(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
    name: &str,
    options: &Value,
) -> Result<(), ApiError> {
    use crate::api::admission::{self, Operation};
    let Some((_, current)) = st
        .core
        .store
        .get(&t.key(&ctx.cluster, name))
        .await
        .map_err(store_error)?
    else {
        return Ok(());
    };
    let old = t.served(current);
    let mut options = options.clone();
    if let Some(m) = options.as_object_mut() {
        m.insert("apiVersion".into(), json!("meta.k8s.io/v1"));
        m.insert("kind".into(), json!("DeleteOptions"));
    }
    let a = admission::attributes(
        ctx,
        &t.def,
        &t.version,
        t.namespace.as_deref(),
        false,
        name,
        Operation::Delete,
        dry_run(ctx)?,
        Some(options),
    );
    // A delete has no object to patch: the mutating webhooks are called, their patches unused.
    admission::mutate(st, ctx, &a, &mut Value::Null, Some(&old)).await?;
    admission::validate(st, ctx, &a, None, Some(&old)).await
}

pub(super) async fn delete(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
    name: &str,
) -> Result<Response, ApiError> {
    if t.def.namespaced && t.namespace.is_none() {
        return Err(ApiError::not_found_path());
    }
    let options = delete_options(ctx)?;
    admit_delete(st, ctx, t, name, &options).await?;
    let (code, body) = delete_one(st, ctx, t, name, &options).await?;
    Ok(json_response(code, &body))
}

pub(super) async fn delete_collection(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
) -> Result<Response, ApiError> {
    let options = delete_options(ctx)?;
    let filter = Filter::from_ctx(ctx, t)?;
    let (items, _, _) = collect(&st.core, ctx, t, &filter, 0, None).await?;
    let mut deleted = Vec::new();
    for obj in items {
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(String::from);
        let one = Target::new(t.def.clone(), t.version.clone(), ns, None, false);
        admit_delete(st, ctx, &one, name_of(&obj), &options).await?;
        match delete_one(st, ctx, &one, name_of(&obj), &options).await {
            Ok((_, body)) => deleted.push(body),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "kind": t.def.list_kind,
            "apiVersion": t.def.api_version(&t.version),
            "metadata": {},
            "items": deleted,
        }),
    ))
}
