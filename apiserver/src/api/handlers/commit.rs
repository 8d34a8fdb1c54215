//! Where every write ends: the read-modify-write of one object (admission of a client's update
//! included) and the removal of one object with what follows from it (a CRD's objects, an
//! emptied namespace, owners and dependents handed to the collector). Create, update, patch,
//! apply, the subresources, deletes and the collector's own writes all commit here.

use super::collector;
use super::target::*;
use crate::api::cluster_defaults;

/// Whose update it is: a client's (an update, a patch, an apply, a `status`, `scale` or
/// `approval` write), which the admission webhooks see, or the server's own (the collector
/// dropping a finalizer or an owner reference, a binding placing a pod), which they do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum By {
    Client,
    Server,
}

/// Read-modify-write of one object: `mutate` turns the current object into the new one (and
/// may refuse with 409 when the client pinned a resourceVersion), then admission when `by` a
/// client, then the commit. Retries lost races. A no-op stores nothing. An object being deleted
/// whose last finalizer went away is deleted.
pub(super) async fn guaranteed_update<F>(
    st: &ApiState,
    ctx: &Ctx,
    t: &Target,
    name: &str,
    by: By,
    mutate: F,
) -> Result<Value, ApiError>
where
    F: Fn(&Value) -> Result<Value, ApiError>,
{
    let key = t.key(&ctx.cluster, name);
    let dry = dry_run(ctx)?;
    for _ in 0..WRITE_ATTEMPTS {
        let (rv, current) = t.stored(st, &ctx.cluster, name).await?;
        // `mutate` sees and returns the served form; the store keeps the stored one.
        // Shared with the validation rules' thread, which reads it as `oldSelf`.
        let served = std::sync::Arc::new(at_version(&t.def, &t.version, current.clone()));
        let new = mutate(&served)?;
        let new = if by == By::Client {
            let new =
                crate::api::cel_rules::check(&st.cel_slots, &t.def, new, Some(served.clone()))
                    .await?;
            admit_update(st, ctx, t, name, &served, new, dry).await?
        } else {
            new
        };
        let mut new = conversion::to_storage(&t.def, new);
        // A CRD's kind changes only once its new definition is committed.
        let mut crd = None;
        if is_crd(&t.def) {
            let def = resources::from_crd(&new)
                .map_err(|m| ApiError::invalid("CustomResourceDefinition", name, m.0))?;
            if !t.status && current.get("status").is_some() {
                new["status"] = current["status"].clone();
            }
            crd = Some(def);
        }
        if objects::same_content(&new, &current) || dry {
            return Ok(at_version(&t.def, &t.version, new));
        }
        match st
            .store
            .commit(&key, Precondition::At(rv), WriteOp::Put(new))
            .await
        {
            Ok(ev) => {
                if let Some(def) = crd {
                    st.registry.register(&ctx.cluster, name, def);
                }
                let body = (*ev.body).clone();
                if is_deleting(&body) && finalizers_of(&body) == 0 {
                    finish_delete(st, ctx, t, &key, ev.rv, body.clone()).await?;
                } else {
                    restore_namespace_defaults(st, ctx, t, &key).await?;
                }
                return Ok(at_version(&t.def, &t.version, body));
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(StoreError::NotFound) => {
                return Err(ApiError::not_found(&t.def.group, &t.def.plural, name));
            }
            Err(e) => return Err(store_error(e)),
        }
    }
    Err(ApiError::conflict(&t.def.group, &t.def.plural, name))
}

/// Runs the admission webhooks on an update of `current` to `new`: the mutating ones (their
/// changes validated again), then the validating ones.
async fn admit_update(
    st: &ApiState,
    ctx: &Ctx,
    t: &Target,
    name: &str,
    current: &Value,
    mut new: Value,
    dry: bool,
) -> Result<Value, ApiError> {
    use crate::api::admission::{self, Operation};
    let a = admission::attributes(
        ctx,
        &t.def,
        &t.version,
        t.namespace.as_deref(),
        t.status,
        name,
        Operation::Update,
        dry,
        None,
    );
    if admission::mutate(st, ctx, &a, &mut new, Some(current)).await? {
        apply_schema(ctx, t, &mut new, Some(current))?;
        new = crate::api::validation::validated(&st.patterns, &t.def, new, Some(current))?;
        let old = std::sync::Arc::new(current.clone());
        new = crate::api::cel_rules::check(&st.cel_slots, &t.def, new, Some(old)).await?;
    }
    crate::api::auth::refuse_escalation(
        st,
        &ctx.cluster,
        &ctx.user,
        &t.def.group,
        &t.def.plural,
        &new,
    )
    .await?;
    admission::validate(st, ctx, &a, Some(&new), Some(current)).await?;
    Ok(new)
}

/// Removes an object for good, with what that implies for namespaces and CRDs.
pub(super) async fn finish_delete(
    st: &ApiState,
    ctx: &Ctx,
    t: &Target,
    key: &crate::store::ObjectKey,
    rv: u64,
    body: Value,
) -> Result<Value, ApiError> {
    if is_namespace(&t.def) && !namespace_is_empty(st, ctx, &key.name).await? {
        // The collector empties it first, then lets it go.
        collector::sweep(st, &ctx.cluster);
        return Ok(body);
    }
    let ev = st
        .store
        .commit(key, Precondition::At(rv), WriteOp::Delete(body))
        .await
        .map_err(|e| match e {
            StoreError::NotFound => ApiError::not_found(&t.def.group, &t.def.plural, &key.name),
            StoreError::Conflict { .. } => {
                ApiError::conflict(&t.def.group, &t.def.plural, &key.name)
            }
            e => store_error(e),
        })?;
    restore_namespace_defaults(st, ctx, t, key).await?;
    if is_crd(&t.def)
        && let Some(def) = st
            .registry
            .all(&ctx.cluster)
            .into_iter()
            .find(|d| d.custom && format!("{}.{}", d.plural, d.group) == key.name)
    {
        st.registry.unregister(&ctx.cluster, &key.name);
        delete_all_of(st, ctx, &def, None).await?;
    }
    // Background propagation: whatever still names this object as its owner goes too. The
    // commit queued it for the collector, which works the queue in a task of its own, so the
    // work neither holds up this answer nor stops when its client goes away.
    collector::sweep(st, &ctx.cluster);
    // An owner deleted in the foreground may have been waiting for this one.
    collector::wake_owners(st, ctx, &ev.body).await?;
    // The last object of a terminating namespace lets the namespace go.
    if t.def.namespaced && !key.namespace.is_empty() {
        finish_namespace_if_empty(st, ctx, &key.namespace).await?;
    }
    Ok((*ev.body).clone())
}

pub(super) fn is_namespace(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.plural == "namespaces"
}

/// The namespaced resources, once per stored collection.
pub(super) fn namespaced_collections(st: &ApiState, ctx: &Ctx) -> Vec<ResourceDef> {
    st.registry
        .all(&ctx.cluster)
        .into_iter()
        .filter(|d| d.namespaced && d.storage_group == d.group)
        .collect()
}

async fn namespace_is_empty(st: &ApiState, ctx: &Ctx, ns: &str) -> Result<bool, ApiError> {
    for def in namespaced_collections(st, ctx) {
        let page = st
            .store
            .list_raw(
                &ctx.cluster,
                &def.storage_group,
                &def.plural,
                Some(ns),
                None,
                1,
            )
            .await
            .map_err(store_error)?;
        if !page.items.is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Removes namespace `ns` if it is terminating, has no finalizers and holds nothing any more.
pub(super) async fn finish_namespace_if_empty(
    st: &ApiState,
    ctx: &Ctx,
    ns: &str,
) -> Result<(), ApiError> {
    let key = namespace_key(&ctx.cluster, ns);
    let Some((rv, namespace)) = st.store.get(&key).await.map_err(store_error)? else {
        return Ok(());
    };
    if !is_deleting(&namespace)
        || finalizers_of(&namespace) > 0
        || !namespace_is_empty(st, ctx, ns).await?
    {
        return Ok(());
    }
    match st
        .store
        .commit(&key, Precondition::At(rv), WriteOp::Delete(namespace))
        .await
    {
        Ok(_) | Err(StoreError::NotFound) | Err(StoreError::Conflict { .. }) => Ok(()),
        Err(e) => Err(store_error(e)),
    }
}

/// Deletes (or marks, when they have finalizers) every object of `def` (in `namespace`).
pub(super) async fn delete_all_of(
    st: &ApiState,
    ctx: &Ctx,
    def: &ResourceDef,
    namespace: Option<&str>,
) -> Result<(), ApiError> {
    let page = st
        .store
        .list(
            &ctx.cluster,
            &def.storage_group,
            &def.plural,
            namespace,
            None,
            0,
        )
        .await
        .map_err(store_error)?;
    for obj in page.items {
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(String::from);
        let t = Target {
            def: def.clone(),
            version: def.versions[0].clone(),
            namespace: ns,
            name: None,
            status: false,
        };
        // Force: objects of a removed kind go regardless of finalizers.
        let key = t.key(&ctx.cluster, name_of(&obj));
        let rv: u64 = rv_of(&obj).and_then(|r| r.parse().ok()).unwrap_or(0);
        match st
            .store
            .commit(&key, Precondition::At(rv), WriteOp::Delete(obj.clone()))
            .await
        {
            Ok(_) | Err(StoreError::NotFound) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => return Err(store_error(e)),
        }
    }
    Ok(())
}

/// Puts back at once what a real cluster's controllers restore: a namespace's `default`
/// ServiceAccount once deleted, its `kube-root-ca.crt` once deleted or holding another CA
/// (nothing in a namespace on its way out).
async fn restore_namespace_defaults(
    st: &ApiState,
    ctx: &Ctx,
    t: &Target,
    key: &ObjectKey,
) -> Result<(), ApiError> {
    if !t.def.group.is_empty()
        || !cluster_defaults::kept_in_every_namespace(&t.def.plural, &key.name)
    {
        return Ok(());
    }
    match st
        .store
        .get(&namespace_key(&ctx.cluster, &key.namespace))
        .await
        .map_err(store_error)?
    {
        Some((_, ns)) if !is_deleting(&ns) => {}
        _ => return Ok(()),
    }
    cluster_defaults::seed_namespace(&st.store, &ctx.cluster, &key.namespace, &st.root_ca_pem)
        .await
        .map_err(store_error)
}
