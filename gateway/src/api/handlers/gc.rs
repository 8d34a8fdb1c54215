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

use tokio_util::task::TaskTracker;

use super::delete::{
    delete_namespace_contents, delete_one, dependents, finish_namespace_if_empty, orphan_dependents,
};
use super::target::*;
use super::write::guaranteed_update;

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
    }
}

/// What a collector task works on: one owner waiting (foreground, orphan) for its dependents,
/// or one cluster's queue of deleted owners and terminating namespaces.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Work {
    Owner { cluster: String, uid: String },
    Sweep { cluster: String },
}

/// Work being done → whether another pass was asked for meanwhile.
type Passes = HashMap<Work, bool>;

/// What the collector keeps for one opening of the store, shared by every API state serving
/// it (the TCP and unix-socket routers).
#[derive(Default)]
pub(crate) struct Collector {
    /// The work a task is running for: one task per owner or sweep; another pass asked for
    /// while it runs is run by that task after the current one (so a pass that started before
    /// a dependent went is always followed by one that sees it gone).
    running: Mutex<Passes>,
    /// Whether the collection the stored objects call for was resumed.
    resumed: AtomicBool,
    /// The collector's tasks, so that a shutdown can let them finish.
    tasks: TaskTracker,
}

impl Collector {
    fn running(&self) -> std::sync::MutexGuard<'_, Passes> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits up to `grace` for the running passes (new ones are still taken meanwhile: a
    /// pass's own deletes start others). What is left then is resumed after a restart.
    pub(crate) async fn finish(&self, grace: Duration) {
        let idle = async {
            while !self.running().is_empty() {
                self.tasks.close();
                self.tasks.wait().await;
                self.tasks.reopen();
            }
        };
        if tokio::time::timeout(grace, idle).await.is_err() {
            tracing::info!(
                passes = self.running().len(),
                "garbage collection left to resume after a restart"
            );
        }
    }
}

/// Ends the claim on a piece of work when its task ends, however it ends.
struct Claim {
    collector: Arc<Collector>,
    work: Work,
    released: bool,
}

impl Claim {
    /// Whether another pass was asked for; if not, the claim is given up (under the same lock,
    /// so no request for a pass falls between the two).
    fn again(&mut self) -> bool {
        let mut r = self.collector.running();
        match r.get_mut(&self.work) {
            Some(again) if *again => {
                *again = false;
                true
            }
            _ => {
                r.remove(&self.work);
                self.released = true;
                false
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.released {
            self.collector.running().remove(&self.work);
        }
    }
}

/// How many times a failed pass is retried (a storage error; conflicts are retried within).
const PASS_ATTEMPTS: u32 = 4;

/// Runs `pass` in a task of the collector's until no other pass of `work` is asked for; a
/// second call while it runs only asks for one more.
fn start<F, Fut>(st: &ApiState, work: Work, pass: F)
where
    F: Fn(ApiState) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), ApiError>> + Send,
{
    {
        let mut r = st.collector.running();
        if let Some(again) = r.get_mut(&work) {
            *again = true;
            return;
        }
        r.insert(work.clone(), false);
    }
    let st = st.clone();
    let tasks = st.collector.tasks.clone();
    tasks.spawn(async move {
        let mut claim = Claim {
            collector: st.collector.clone(),
            work,
            released: false,
        };
        loop {
            for attempt in 1..=PASS_ATTEMPTS {
                match pass(st.clone()).await {
                    Ok(()) => break,
                    Err(e) => {
                        tracing::warn!(work = ?claim.work, attempt, error = %e.message, "garbage collection pass failed");
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

/// Runs passes over `owner` in the background until nothing is left to do for now.
pub(super) fn schedule(st: &ApiState, owner: Owner) {
    let work = Work::Owner {
        cluster: owner.cluster.clone(),
        uid: owner.uid.clone(),
    };
    let owner = Arc::new(owner);
    start(st, work, move |st| {
        let owner = owner.clone();
        async move {
            let ctx = collector_ctx(&owner.cluster);
            collect(&st, &ctx, &owner).await
        }
    });
}

/// Orphans the dependents of `owner` in a task of the collector's, and waits for it: the
/// work goes on if the waiting request is dropped (its client went away).
///
/// A boxed future, so that its `Send` is stated rather than inferred: a delete can start a
/// collection whose deletes can (as far as types tell) start another.
pub(super) fn orphan_now(
    st: &ApiState,
    owner: Owner,
) -> std::pin::Pin<Box<dyn Future<Output = Result<(), ApiError>> + Send + '_>> {
    let task_st = st.clone();
    Box::pin(async move {
        st.collector
            .tasks
            .spawn(async move {
                let ctx = collector_ctx(&owner.cluster);
                collect(&task_st, &ctx, &owner).await
            })
            .await
            .map_err(|e| ApiError::internal(format!("orphaning dependents: {e}")))?
    })
}

/// Works off `cluster`'s queue of deleted owners and its terminating namespaces in the
/// background (again, once, if it is already being worked off).
pub(super) fn sweep(st: &ApiState, cluster: &str) {
    let work = Work::Sweep {
        cluster: cluster.to_owned(),
    };
    let cluster = cluster.to_owned();
    start(st, work, move |st| {
        let cluster = cluster.clone();
        async move {
            let ctx = collector_ctx(&cluster);
            sweep_pass(&st, &ctx).await
        }
    });
}

/// How many queued owners are read at a time.
const QUEUE_PAGE: usize = 64;

/// One sweep: every queued owner's dependents are deleted, or released where another owner
/// of theirs remains (a dependent's own deletion queues it in turn, so a chain of any length
/// is worked off in a loop), then each terminating namespace is emptied.
async fn sweep_pass(st: &ApiState, ctx: &Ctx) -> Result<(), ApiError> {
    loop {
        let owners = st
            .store
            .queued_owners(&ctx.cluster, QUEUE_PAGE)
            .await
            .map_err(store_error)?;
        if owners.is_empty() {
            break;
        }
        for uid in owners {
            release_dependents(st, ctx, &uid).await?;
            st.store
                .collected(&ctx.cluster, &uid)
                .await
                .map_err(store_error)?;
        }
    }
    for ns in terminating_namespaces(st, ctx).await? {
        delete_namespace_contents(st, ctx, &ns).await?;
        finish_namespace_if_empty(st, ctx, &ns).await?;
    }
    Ok(())
}

/// The namespaces of `ctx.cluster` marked for deletion.
async fn terminating_namespaces(st: &ApiState, ctx: &Ctx) -> Result<Vec<String>, ApiError> {
    let mut names = Vec::new();
    let mut after: Option<(String, String)> = None;
    loop {
        let page = st
            .store
            .list_raw(
                &ctx.cluster,
                "",
                "namespaces",
                None,
                after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
                RESUME_PAGE,
            )
            .await
            .map_err(store_error)?;
        for raw in &page.items {
            // Only namespaces that say they are being deleted are parsed.
            if raw.body.contains("deletionTimestamp")
                && serde_json::from_str::<Value>(&raw.body).is_ok_and(|ns| is_deleting(&ns))
            {
                names.push(raw.name.clone());
            }
        }
        match page.items.last() {
            Some(last) if page.more => after = Some((last.namespace.clone(), last.name.clone())),
            _ => return Ok(names),
        }
    }
}

/// Deals with each dependent of the deleted owner `owner_uid`: one that still has another
/// owner loses only its reference to this one (as kube's collector does); the others are
/// deleted in the background (or marked, while they have finalizers).
async fn release_dependents(st: &ApiState, ctx: &Ctx, owner_uid: &str) -> Result<(), ApiError> {
    for (t, name) in dependents(st, ctx, owner_uid).await? {
        let Some((_, dependent)) = st
            .store
            .get(&t.key(&ctx.cluster, &name))
            .await
            .map_err(store_error)?
        else {
            continue;
        };
        let result = if another_owner_remains(st, ctx, &dependent, owner_uid).await? {
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

/// Whether `dependent` names an owner other than `gone_uid` that still exists.
async fn another_owner_remains(
    st: &ApiState,
    ctx: &Ctx,
    dependent: &Value,
    gone_uid: &str,
) -> Result<bool, ApiError> {
    let refs = dependent
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let namespace = dependent
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty());
    for r in refs {
        if r.get("uid").and_then(Value::as_str) == Some(gone_uid) {
            continue;
        }
        if referenced_owner(st, ctx, namespace, r).await?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The owner an ownerReference `r` of a dependent in `namespace` names, if it exists with the
/// reference's uid (an owner recreated under its name is another owner).
async fn referenced_owner(
    st: &ApiState,
    ctx: &Ctx,
    namespace: Option<&str>,
    r: &Value,
) -> Result<Option<(Target, Value)>, ApiError> {
    let (Some(def), Some(name), Some(uid)) = (
        owner_def(st, &ctx.cluster, r),
        r.get("name").and_then(Value::as_str),
        r.get("uid").and_then(Value::as_str),
    ) else {
        return Ok(None);
    };
    let t = Target {
        version: def.versions[0].clone(),
        namespace: namespace.filter(|_| def.namespaced).map(String::from),
        def,
        name: None,
        status: false,
    };
    let owner = st
        .store
        .get(&t.key(&ctx.cluster, name))
        .await
        .map_err(store_error)?;
    Ok(owner.filter(|(_, o)| uid_of(o) == uid).map(|(_, o)| (t, o)))
}

/// Removes the reference to `owner_uid` from the dependent `name`.
pub(super) async fn drop_owner_reference(
    st: &ApiState,
    ctx: &Ctx,
    t: &Target,
    name: &str,
    owner_uid: &str,
) -> Result<(), ApiError> {
    guaranteed_update(st, ctx, t, name, |current| {
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
        let Some((t, owner)) = referenced_owner(st, ctx, namespace, &r).await? else {
            continue;
        };
        if is_deleting(&owner) && has_finalizer(&owner, FOREGROUND) {
            schedule(st, Owner::of(&ctx.cluster, &t.def, &owner));
        }
    }
    Ok(())
}

/// Resumes, once per opening of the store, the collection its objects call for: every owner
/// still carrying a collector's finalizer gets a pass, and each cluster's queue a sweep.
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
            // Deleted owners whose dependents were not yet dealt with, and terminating
            // namespaces not yet emptied.
            sweep(&st, &cluster);
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
