//! The garbage collector's passes: deleting or orphaning the dependents of an owner deleted in
//! the foreground or with its dependents orphaned (owners that carry a collector's finalizer,
//! `foregroundDeletion` or `orphan`, until their dependents are dealt with), and sweeping a
//! cluster's queue of deleted owners and its terminating namespaces. When and how often a pass
//! runs is the scheduler's ([`super::collector`]).

use std::sync::Arc;

use super::collector::{Job, PassFuture};
use super::commit::{By, guaranteed_update};
use super::delete::{delete_namespace_contents, delete_one};
use super::owners::{
    FOREGROUND, ORPHAN, Owner, another_owner_remains, blocks, dependents, has_finalizer, uid_of,
    without_finalizer,
};
use super::target::*;
use crate::api::kinds::namespace;

/// One pass over `job`: what the collector ([`super::collector::Collector`]) runs.
pub(super) fn pass(st: Writes, job: Arc<Job>) -> PassFuture {
    Box::pin(async move {
        match &*job {
            Job::Collect(owner) => collect(&st, &Ctx::internal(&owner.cluster), owner).await,
            Job::Sweep { cluster } => sweep_pass(&st, &Ctx::internal(cluster)).await,
        }
    })
}

/// How many queued owners are read at a time.
const QUEUE_PAGE: usize = 64;

/// One sweep: every queued owner's dependents are deleted, or released where another owner
/// of theirs remains (a dependent's own deletion queues it in turn, so a chain of any length
/// is worked off in a loop), then each terminating namespace is emptied.
async fn sweep_pass(st: &Writes, ctx: &Ctx) -> Result<(), ApiError> {
    loop {
        let owners = st
            .core
            .store
            .queued_owners(&ctx.cluster, QUEUE_PAGE)
            .await
            .map_err(store_error)?;
        if owners.is_empty() {
            break;
        }
        for uid in owners {
            release_dependents(st, ctx, &uid).await?;
            st.core
                .store
                .collected(&ctx.cluster, &uid)
                .await
                .map_err(store_error)?;
        }
    }
    for ns in namespace::terminating(&st.core, &ctx.cluster).await? {
        delete_namespace_contents(st, ctx, &ns).await?;
        namespace::finish_if_empty(&st.core, &ctx.cluster, &ns).await?;
    }
    Ok(())
}

/// Deals with each dependent of the deleted owner `owner_uid`: one that still has another
/// owner loses only its reference to this one (as kube's collector does); the others are
/// deleted in the background (or marked, while they have finalizers).
async fn release_dependents(st: &Writes, ctx: &Ctx, owner_uid: &str) -> Result<(), ApiError> {
    for (t, name) in dependents(&st.core, ctx, owner_uid).await? {
        let Some((_, dependent)) = st
            .core
            .store
            .get(&t.key(&ctx.cluster, &name))
            .await
            .map_err(store_error)?
        else {
            continue;
        };
        let result = if another_owner_remains(&st.core, ctx, &dependent, owner_uid).await? {
            drop_owner_reference(st, ctx, &t, &name, owner_uid).await
        } else {
            delete_one(
                st,
                ctx,
                &t,
                &name,
                &json!({"propagationPolicy": "Background"}),
            )
            .await
            .map(drop)
        };
        match result {
            Ok(()) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Removes the reference to `owner_uid` from the dependent `name`.
pub(super) async fn drop_owner_reference(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
    name: &str,
    owner_uid: &str,
) -> Result<(), ApiError> {
    guaranteed_update(st, ctx, t, name, By::Server, |current| {
        let mut new = current.clone();
        if let Some(refs) = new
            .pointer_mut("/metadata/ownerReferences")
            .and_then(Value::as_array_mut)
        {
            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
        }
        Ok(new)
    })
    .await
    .map(drop)
}

/// One pass over `owner`: orphans or deletes its dependents, and drops the collector's
/// finalizers once their work is done.
pub(super) async fn collect(st: &Writes, ctx: &Ctx, owner: &Owner) -> Result<(), ApiError> {
    let t = owner.target();
    let key = t.key(&ctx.cluster, &owner.name);
    let Some((_, current)) = st.core.store.get(&key).await.map_err(store_error)? else {
        return Ok(());
    };
    if !is_deleting(&current) || uid_of(&current) != owner.uid {
        return Ok(());
    }
    if has_finalizer(&current, ORPHAN) {
        orphan_dependents(st, ctx, &owner.uid).await?;
        drop_finalizer(st, ctx, owner, ORPHAN).await?;
    }
    if has_finalizer(&current, FOREGROUND) && !delete_dependents_first(st, ctx, &owner.uid).await? {
        drop_finalizer(st, ctx, owner, FOREGROUND).await?;
    }
    Ok(())
}

/// Deletes each dependent of `owner_uid` not yet being deleted; whether any that blocks the
/// owner's deletion is still there.
async fn delete_dependents_first(
    st: &Writes,
    ctx: &Ctx,
    owner_uid: &str,
) -> Result<bool, ApiError> {
    let mut blocked = false;
    for (t, name) in dependents(&st.core, ctx, owner_uid).await? {
        let key = t.key(&ctx.cluster, &name);
        let Some((_, dependent)) = st.core.store.get(&key).await.map_err(store_error)? else {
            continue;
        };
        if !is_deleting(&dependent) {
            // A dependent with dependents of its own goes in the foreground too: the owner
            // waits for the whole chain beneath it.
            let own = st
                .core
                .store
                .dependents(&ctx.cluster, uid_of(&dependent))
                .await
                .map_err(store_error)?;
            let policy = if own.is_empty() {
                "Background"
            } else {
                "Foreground"
            };
            let options = json!({"propagationPolicy": policy});
            match delete_one(st, ctx, &t, &name, &options).await {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        if let Some((_, left)) = st.core.store.get(&key).await.map_err(store_error)? {
            blocked |= blocks(&left, owner_uid);
        }
    }
    Ok(blocked)
}

/// Removes `finalizer` from `owner` (which then goes if it was the last one).
async fn drop_finalizer(
    st: &Writes,
    ctx: &Ctx,
    owner: &Owner,
    finalizer: &str,
) -> Result<(), ApiError> {
    let t = owner.target();
    let result = guaranteed_update(st, ctx, &t, &owner.name, By::Server, |current| {
        // A namesake created since is another object.
        if uid_of(current) != owner.uid {
            return Ok(current.clone());
        }
        Ok(without_finalizer(current, finalizer))
    })
    .await;
    match result {
        Err(e) if e.code != 404 => Err(e),
        _ => Ok(()),
    }
}

/// Removes the owner reference to `owner_uid` from every dependent.
pub(super) async fn orphan_dependents(
    st: &Writes,
    ctx: &Ctx,
    owner_uid: &str,
) -> Result<(), ApiError> {
    for (t, name) in dependents(&st.core, ctx, owner_uid).await? {
        match drop_owner_reference(st, ctx, &t, &name, owner_uid).await {
            Ok(()) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
