//! The garbage collector's scheduler: one task per owner waiting on its dependents and one per
//! cluster's queue of deleted owners; a pass asked for while one runs runs once more after it;
//! shutdown waits for what runs. It knows which work to do, not how: the passes themselves
//! ([`super::gc::pass`]) are handed to it when it is made, so that the deletes which start a
//! collection and the collection which deletes do not import each other.
//!
//! All the collector needs to know is in the stored objects: a pass is started by the delete
//! that marked an owner, again whenever one of its dependents goes, and, after a restart, for
//! every owner still marked (once per opening of the store, on its first request).

use std::{
    collections::HashMap,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use gpustack_serving::backoff::Backoff;
use tokio_util::task::TaskTracker;

use super::owners::{FOREGROUND, ORPHAN, Owner, has_finalizer, referenced_owner};
use super::target::*;

/// What a collector task works on: one owner waiting (foreground, orphan) for its dependents,
/// or one cluster's queue of deleted owners and terminating namespaces.
pub(super) enum Job {
    Collect(Box<Owner>),
    Sweep { cluster: String },
}

/// What identifies a job among those running: at most one task works on each.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Work {
    Owner { cluster: String, uid: String },
    Sweep { cluster: String },
}

impl Job {
    fn work(&self) -> Work {
        match self {
            Job::Collect(owner) => Work::Owner {
                cluster: owner.cluster.clone(),
                uid: owner.uid.clone(),
            },
            Job::Sweep { cluster } => Work::Sweep {
                cluster: cluster.clone(),
            },
        }
    }
}

/// A pass in progress. Boxed, so that its `Send` is stated rather than inferred: a pass's
/// deletes can start other passes.
pub(super) type PassFuture = Pin<Box<dyn Future<Output = Result<(), ApiError>> + Send>>;

/// One pass over a job: what the collector runs, given to it when it is made.
pub(super) type Pass = fn(Writes, Arc<Job>) -> PassFuture;

/// Work being done → whether another pass was asked for meanwhile.
type Passes = HashMap<Work, bool>;

/// What the collector keeps for one opening of the store, shared by every API state serving
/// it (the TCP and unix-socket routers).
pub(crate) struct Collector {
    /// How a job is worked off.
    pass: Pass,
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
    pub(super) fn new(pass: Pass) -> Self {
        Collector {
            pass,
            running: Mutex::default(),
            resumed: AtomicBool::default(),
            tasks: TaskTracker::new(),
        }
    }

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
/// The wait after a failed pass: 200 ms doubling, 1.6 s after the last of [`PASS_ATTEMPTS`].
const PASS_RETRY: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_millis(1600));

/// Runs passes over `job` in a task of the collector's until no other pass of it is asked
/// for; a second call while it runs only asks for one more.
fn start(st: &Writes, job: Job) {
    let work = job.work();
    {
        let mut r = st.core.collector.running();
        if let Some(again) = r.get_mut(&work) {
            *again = true;
            return;
        }
        r.insert(work.clone(), false);
    }
    let st = st.clone();
    let job = Arc::new(job);
    let tasks = st.core.collector.tasks.clone();
    tasks.spawn(async move {
        let mut claim = Claim {
            collector: st.core.collector.clone(),
            work,
            released: false,
        };
        loop {
            for attempt in 1..=PASS_ATTEMPTS {
                match (st.core.collector.pass)(st.clone(), job.clone()).await {
                    Ok(()) => break,
                    Err(e) => {
                        tracing::warn!(work = ?claim.work, attempt, error = %e.message, "garbage collection pass failed");
                        tokio::time::sleep(PASS_RETRY.after_failures(attempt.into())).await;
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
pub(super) fn schedule(st: &Writes, owner: Owner) {
    start(st, Job::Collect(Box::new(owner)));
}

/// Orphans the dependents of `owner` in a task of the collector's, and waits for it: the
/// work goes on if the waiting request is dropped (its client went away).
pub(super) async fn orphan_now(st: &Writes, owner: Owner) -> Result<(), ApiError> {
    let pass = (st.core.collector.pass)(st.clone(), Arc::new(Job::Collect(Box::new(owner))));
    st.core
        .collector
        .tasks
        .spawn(pass)
        .await
        .map_err(|e| ApiError::internal(format!("orphaning dependents: {e}")))?
}

/// Works off `cluster`'s queue of deleted owners and its terminating namespaces in the
/// background (again, once, if it is already being worked off).
pub(super) fn sweep(st: &Writes, cluster: &str) {
    start(
        st,
        Job::Sweep {
            cluster: cluster.to_owned(),
        },
    );
}

/// Starts a pass for each owner of `removed` (an object just deleted) that waits, in the
/// foreground, for its dependents to go.
pub(super) async fn wake_owners(st: &Writes, ctx: &Ctx, removed: &Value) -> Result<(), ApiError> {
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
        let Some((t, owner)) = referenced_owner(&st.core, ctx, namespace, &r).await? else {
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
pub(crate) fn resume_once(st: &Writes) {
    // Every request asks; a plain load answers all but the first.
    if st.core.collector.resumed.load(Ordering::Relaxed)
        || st.core.collector.resumed.swap(true, Ordering::AcqRel)
    {
        return;
    }
    let st = st.clone();
    tokio::spawn(async move {
        // Mirrors are collected upstream.
        let hosted = st
            .core
            .served
            .names()
            .into_iter()
            .filter(|c| st.core.served.get(c).is_some_and(|s| !s.read_only));
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

async fn resume(st: &Writes, cluster: &str) -> Result<(), ApiError> {
    let collections = st
        .core
        .registry
        .all(cluster)
        .into_iter()
        .filter(|d| d.storage_group == d.group && !d.is_review());
    for def in collections {
        st.core
            .store
            .scan_raw(
                cluster,
                &def.storage_group,
                &def.plural,
                RESUME_PAGE,
                |raw| {
                    // Only the few objects naming a collector's finalizer are parsed.
                    if !(raw.body.contains(FOREGROUND) || raw.body.contains("\"orphan\"")) {
                        return;
                    }
                    let Ok(obj) = serde_json::from_str::<Value>(&raw.body) else {
                        return;
                    };
                    if is_deleting(&obj)
                        && (has_finalizer(&obj, FOREGROUND) || has_finalizer(&obj, ORPHAN))
                    {
                        schedule(st, Owner::of(cluster, &def, &obj));
                    }
                },
            )
            .await
            .map_err(store_error)?;
    }
    Ok(())
}
