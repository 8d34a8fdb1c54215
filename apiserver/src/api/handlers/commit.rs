//! Where every write ends: the read-modify-write of one object (admission of a client's update
//! included) and the removal of one object with what follows from it (its kind's
//! [`crate::api::kinds::KindStrategy::after_commit`], an emptied namespace, owners and
//! dependents handed to the collector). Create, update, patch,
//! apply, the subresources, deletes and the collector's own writes all commit here.

use super::collector;
use super::target::*;
use crate::api::kinds::namespace;

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
    st: &Writes,
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
        let (rv, current) = t.stored(&st.core, &ctx.cluster, name).await?;
        // `mutate` sees and returns the served form; the store keeps the stored one.
        // Shared with the validation rules' thread, which reads it as `oldSelf`.
        let served = std::sync::Arc::new(t.served(current.clone()));
        let new = mutate(&served)?;
        let new = if by == By::Client {
            let new = crate::api::cel_rules::check(
                &st.admission.cel_slots,
                &t.def,
                new,
                Some(served.clone()),
            )
            .await?;
            admit_update(st, ctx, t, name, &served, new, dry).await?
        } else {
            new
        };
        let mut new = t.to_storage(new);
        t.kind.prepare_for_update(&current, &mut new, t.status)?;
        if objects::same_content(&new, &current) || dry {
            return Ok(t.served(new));
        }
        match st
            .core
            .store
            .commit(&key, Precondition::At(rv), WriteOp::Put(new))
            .await
        {
            Ok(ev) => {
                let body = (*ev.body).clone();
                if is_deleting(&body) && finalizers_of(&body) == 0 {
                    finish_delete(st, ctx, t, &key, ev.rv, body.clone()).await?;
                } else {
                    let hooks = t.write(&st.core, ctx, jiff::Timestamp::now());
                    t.kind
                        .after_commit(&hooks, &key, Committed::Updated(&body))
                        .await?;
                }
                return Ok(t.served(body));
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
    st: &Writes,
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
        new = crate::api::validation::validated(
            &st.core.patterns,
            &t.def,
            t.kind,
            new,
            Some(current),
        )?;
        let old = std::sync::Arc::new(current.clone());
        new = crate::api::cel_rules::check(&st.admission.cel_slots, &t.def, new, Some(old)).await?;
    }
    crate::api::auth::refuse_escalation(
        &st.core,
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

/// Removes an object for good, with what follows for its kind, its owners and dependents, and
/// its namespace. An object that holds others (a namespace) waits until it is empty.
pub(super) async fn finish_delete(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
    key: &crate::store::ObjectKey,
    rv: u64,
    body: Value,
) -> Result<Value, ApiError> {
    if t.kind.holds_objects() && !namespace::is_empty(&st.core, &ctx.cluster, &key.name).await? {
        // The collector empties it first, then lets it go.
        collector::sweep(st, &ctx.cluster);
        return Ok(body);
    }
    let ev = st
        .core
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
    let hooks = t.write(&st.core, ctx, jiff::Timestamp::now());
    t.kind.after_commit(&hooks, key, Committed::Deleted).await?;
    // Background propagation: whatever still names this object as its owner goes too. The
    // commit queued it for the collector, which works the queue in a task of its own, so the
    // work neither holds up this answer nor stops when its client goes away.
    collector::sweep(st, &ctx.cluster);
    // An owner deleted in the foreground may have been waiting for this one.
    collector::wake_owners(st, ctx, &ev.body).await?;
    // The last object of a terminating namespace lets the namespace go.
    if t.def.namespaced && !key.namespace.is_empty() {
        namespace::finish_if_empty(&st.core, &ctx.cluster, &key.namespace).await?;
    }
    Ok((*ev.body).clone())
}
