//! The garbage collector's asynchronous side: owners deleted in the foreground or with their
//! dependents orphaned carry a finalizer of the collector's (`foregroundDeletion`, `orphan`),
//! and a task works each one off: it deletes (or orphans) the dependents, then drops its
//! finalizer, and the owner goes once no finalizer is left.
//!
//! All the collector needs to know is in the stored objects: a pass is started by the delete
//! that marked an owner, again whenever one of its dependents goes, and, after a restart, for
//! every owner still marked (once per opening of the store, on its first request).

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{body::Bytes, http::HeaderMap};

use super::delete::{delete_one, dependents, orphan_dependents};
use super::*;

/// The finalizer of an owner waiting for its blocking dependents to go.
pub(super) const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer of an owner waiting for its dependents to be orphaned.
pub(super) const ORPHAN: &str = "orphan";

/// An owner the collector works on.
pub(super) struct Owner {
    pub cluster: String,
    pub def: ResourceDef,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
}

impl Owner {
    /// The owner `obj` of kind `def` in `cluster`.
    pub fn of(cluster: &str, def: &ResourceDef, obj: &Value) -> Self {
        Owner {
            cluster: cluster.to_owned(),
            def: def.clone(),
            namespace: obj
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|ns| !ns.is_empty())
                .map(String::from),
            name: name_of(obj).to_owned(),
            uid: uid_of(obj).to_owned(),
        }
    }

    fn target(&self) -> Target {
        Target {
            def: self.def.clone(),
            version: self.def.versions[0].clone(),
            namespace: self.namespace.clone(),
            name: None,
            status: false,
        }
    }
}

pub(super) fn uid_of(obj: &Value) -> &str {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub(super) fn has_finalizer(obj: &Value, finalizer: &str) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|fs| fs.iter().any(|f| f.as_str() == Some(finalizer)))
}

/// Adds `finalizer` to `obj`; whether it was missing.
pub(super) fn add_finalizer(obj: &mut Value, finalizer: &str) -> bool {
    if has_finalizer(obj, finalizer) {
        return false;
    }
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    let meta = &mut obj["metadata"];
    match meta.get_mut("finalizers").and_then(Value::as_array_mut) {
        Some(fs) => fs.push(json!(finalizer)),
        None => meta["finalizers"] = json!([finalizer]),
    }
    true
}

fn without_finalizer(obj: &Value, finalizer: &str) -> Value {
    let mut new = obj.clone();
    if let Some(fs) = new
        .pointer_mut("/metadata/finalizers")
        .and_then(Value::as_array_mut)
    {
        fs.retain(|f| f.as_str() != Some(finalizer));
    }
    new
}

/// Whether `dependent` holds back the foreground deletion of the owner `owner_uid`.
pub(super) fn blocks(dependent: &Value, owner_uid: &str) -> bool {
    dependent
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                r.get("uid").and_then(Value::as_str) == Some(owner_uid)
                    && r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
            })
        })
}

/// The request context of the collector's own writes: no dry run, no propagation policy
/// beyond what each write states.
pub(super) fn collector_ctx(cluster: &str) -> Ctx {
    Ctx {
        // The collector is the cluster's own: internal writes are not authorized.
        user: crate::api::auth::UserInfo::admin(),
        cluster: cluster.to_owned(),
        read_only: false,
        method: Method::DELETE,
        query: HashMap::new(),
        headers: HeaderMap::new(),
        body: Bytes::new(),
        warnings: Default::default(),
        pending_owners: Default::default(),
    }
}

/// (cluster, owner uid) → whether another pass was asked for meanwhile.
type Passes = HashMap<(String, String), bool>;

/// What the collector keeps for one opening of the store, shared by every API state serving
/// it (the TCP and unix-socket routers).
#[derive(Default)]
pub(crate) struct Collector {
    /// The owners a pass is running for: one task per owner, another pass asked for while it
    /// runs is run by that task after the current one (so a pass that started before a
    /// dependent went is always followed by one that sees it gone).
    running: Mutex<Passes>,
    /// Whether the collection the stored objects call for was resumed.
    resumed: AtomicBool,
}

impl Collector {
    fn running(&self) -> std::sync::MutexGuard<'_, Passes> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Ends the claim on an owner when its task ends, however it ends.
struct Claim {
    collector: Arc<Collector>,
    key: (String, String),
    released: bool,
}

impl Claim {
    /// Whether another pass was asked for; if not, the claim is given up (under the same lock,
    /// so no request for a pass falls between the two).
    fn again(&mut self) -> bool {
        let mut r = self.collector.running();
        match r.get_mut(&self.key) {
            Some(again) if *again => {
                *again = false;
                true
            }
            _ => {
                r.remove(&self.key);
                self.released = true;
                false
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.released {
            self.collector.running().remove(&self.key);
        }
    }
}

/// How many times a failed pass is retried (a storage error; conflicts are retried within).
const PASS_ATTEMPTS: u32 = 4;

/// Runs passes over `owner` in the background until nothing is left to do for now.
pub(super) fn schedule(st: &ApiState, owner: Owner) {
    let key = (owner.cluster.clone(), owner.uid.clone());
    {
        let mut r = st.collector.running();
        if let Some(again) = r.get_mut(&key) {
            *again = true;
            return;
        }
        r.insert(key.clone(), false);
    }
    let st = st.clone();
    tokio::spawn(async move {
        let mut claim = Claim {
            collector: st.collector.clone(),
            key,
            released: false,
        };
        let ctx = collector_ctx(&owner.cluster);
        loop {
            for attempt in 1..=PASS_ATTEMPTS {
                match collect(&st, &ctx, &owner).await {
                    Ok(()) => break,
                    Err(e) => {
                        tracing::warn!(cluster = %owner.cluster, owner = %owner.name, attempt, error = %e.message, "garbage collection pass failed");
                        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                    }
                }
            }
            if !claim.again() {
                break;
            }
        }
    });
}

/// One pass over `owner`: orphans or deletes its dependents, and drops the collector's
/// finalizers once their work is done.
pub(super) async fn collect(st: &ApiState, ctx: &Ctx, owner: &Owner) -> Result<(), ApiError> {
    let t = owner.target();
    let key = t.key(&ctx.cluster, &owner.name);
    let Some((_, current)) = st.store.get(&key).await.map_err(store_error)? else {
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
    st: &ApiState,
    ctx: &Ctx,
    owner_uid: &str,
) -> Result<bool, ApiError> {
    let mut blocked = false;
    for (t, name) in dependents(st, ctx, owner_uid).await? {
        let key = t.key(&ctx.cluster, &name);
        let Some((_, dependent)) = st.store.get(&key).await.map_err(store_error)? else {
            continue;
        };
        if !is_deleting(&dependent) {
            // A dependent with dependents of its own goes in the foreground too: the owner
            // waits for the whole chain beneath it.
            let own = st
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
        if let Some((_, left)) = st.store.get(&key).await.map_err(store_error)? {
            blocked |= blocks(&left, owner_uid);
        }
    }
    Ok(blocked)
}

/// Removes `finalizer` from `owner` (which then goes if it was the last one).
async fn drop_finalizer(
    st: &ApiState,
    ctx: &Ctx,
    owner: &Owner,
    finalizer: &str,
) -> Result<(), ApiError> {
    let t = owner.target();
    let result = guaranteed_update(st, ctx, &t, &owner.name, |current| {
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

/// The served kind an owner reference names.
fn owner_def(st: &ApiState, cluster: &str, reference: &Value) -> Option<ResourceDef> {
    let api_version = reference.get("apiVersion").and_then(Value::as_str)?;
    let kind = reference.get("kind").and_then(Value::as_str)?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    st.registry
        .all(cluster)
        .into_iter()
        .find(|d| d.group == group && d.kind == kind && d.serves(version))
}

/// Starts a pass for each owner of `removed` (an object just deleted) that waits, in the
/// foreground, for its dependents to go.
pub(super) async fn wake_owners(st: &ApiState, ctx: &Ctx, removed: &Value) -> Result<(), ApiError> {
    let refs = removed
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let namespace = removed
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty());
    for r in refs {
        let (Some(def), Some(name), Some(uid)) = (
            owner_def(st, &ctx.cluster, &r),
            r.get("name").and_then(Value::as_str),
            r.get("uid").and_then(Value::as_str),
        ) else {
            continue;
        };
        let t = Target {
            version: def.versions[0].clone(),
            namespace: namespace.filter(|_| def.namespaced).map(String::from),
            def,
            name: None,
            status: false,
        };
        let Some((_, owner)) = st
            .store
            .get(&t.key(&ctx.cluster, name))
            .await
            .map_err(store_error)?
        else {
            continue;
        };
        if uid_of(&owner) == uid && is_deleting(&owner) && has_finalizer(&owner, FOREGROUND) {
            schedule(st, Owner::of(&ctx.cluster, &t.def, &owner));
        }
    }
    Ok(())
}

/// Resumes, once per opening of the store, the collection its objects call for: every owner
/// still carrying a collector's finalizer gets a pass.
pub(crate) fn resume_once(st: &ApiState) {
    // Every request asks; a plain load answers all but the first.
    if st.collector.resumed.load(Ordering::Relaxed)
        || st.collector.resumed.swap(true, Ordering::AcqRel)
    {
        return;
    }
    let st = st.clone();
    tokio::spawn(async move {
        // Mirrors are collected upstream.
        let hosted = st
            .served
            .names()
            .into_iter()
            .filter(|c| st.served.get(c).is_some_and(|s| !s.read_only));
        for cluster in hosted {
            if let Err(e) = resume(&st, &cluster).await {
                tracing::warn!(cluster, error = %e.message, "resuming garbage collection failed");
            }
        }
    });
}

/// How many stored objects are read at a time when looking for pending owners.
const RESUME_PAGE: usize = 500;

async fn resume(st: &ApiState, cluster: &str) -> Result<(), ApiError> {
    let collections = st
        .registry
        .all(cluster)
        .into_iter()
        .filter(|d| d.storage_group == d.group && !d.is_review());
    for def in collections {
        let mut after: Option<(String, String)> = None;
        loop {
            let page = st
                .store
                .list_raw(
                    cluster,
                    &def.storage_group,
                    &def.plural,
                    None,
                    after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
                    RESUME_PAGE,
                )
                .await
                .map_err(store_error)?;
            for raw in &page.items {
                // Only the few objects naming a collector's finalizer are parsed.
                if !(raw.body.contains(FOREGROUND) || raw.body.contains("\"orphan\"")) {
                    continue;
                }
                let Ok(obj) = serde_json::from_str::<Value>(&raw.body) else {
                    continue;
                };
                if is_deleting(&obj)
                    && (has_finalizer(&obj, FOREGROUND) || has_finalizer(&obj, ORPHAN))
                {
                    schedule(st, Owner::of(cluster, &def, &obj));
                }
            }
            match page.items.last() {
                Some(last) if page.more => {
                    after = Some((last.namespace.clone(), last.name.clone()));
                }
                _ => break,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizers_and_blocking_references() {
        let mut o = json!({"metadata": {"name": "o"}});
        assert!(add_finalizer(&mut o, FOREGROUND));
        assert!(!add_finalizer(&mut o, FOREGROUND));
        assert!(add_finalizer(&mut o, "x/y"));
        assert_eq!(o["metadata"]["finalizers"], json!([FOREGROUND, "x/y"]));
        assert!(has_finalizer(&o, "x/y") && !has_finalizer(&o, ORPHAN));
        assert_eq!(
            without_finalizer(&o, FOREGROUND)["metadata"]["finalizers"],
            json!(["x/y"])
        );
        let d = json!({"metadata": {"ownerReferences": [
            {"uid": "a", "blockOwnerDeletion": true},
            {"uid": "b"}
        ]}});
        assert!(blocks(&d, "a"));
        assert!(!blocks(&d, "b"));
        assert!(!blocks(&d, "c"));
    }
}
