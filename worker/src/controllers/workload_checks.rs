//! The admission checks' loop: the node-devices and the joint verdicts written on every
//! Workload that holds quota and awaits them. It runs apart from the node and chain loop, so a
//! Workload waiting for its checks waits for no node or chain pass nor for their coalescing;
//! each pass writes its verdicts concurrently (one after another, a thousand queued Workloads
//! took tens of seconds to be answered).

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use futures::StreamExt;
use gpustack_api::{devices::Devices, kueue::Workload};
use kube::{
    Resource, ResourceExt,
    api::{Api, Patch, PatchParams},
    runtime::reflector::Store,
};
use serde_json::json;
use tokio::sync::Notify;

use super::{
    ledger::DevicesByNode,
    manufacturers::Resolve,
    node_devices,
    queues::{JOINT_CHECK, NODE_DEVICES_CHECK},
    reconcile_metrics::{Counters, Loop, ReconcileMetrics},
};

/// Field manager of the node-devices verdicts (as the reference names it).
const CHECK_MANAGER: &str = "gpustack-node-devices";

/// Workloads whose verdicts are written at once.
const VERDICTS_IN_FLIGHT: usize = 32;

/// The time now as a condition's `lastTransitionTime` (whole seconds, UTC).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The cached `Devices` by name, shared rather than copied.
pub fn devices_of(store: &Store<Devices>) -> DevicesByNode {
    store
        .state()
        .into_iter()
        .map(|d| (d.name_any(), d))
        .collect()
}

/// The version of each Workload this loop last wrote verdicts for: until the cache shows a
/// newer one, the write is on its way and the Workload is not judged again (a pass woken by
/// another Workload's change would otherwise write the same verdict twice).
#[derive(Default)]
pub struct Judged(HashMap<(String, String), String>);

/// What the loop reads, when it runs and where it reports.
pub struct Checks {
    /// The cluster client.
    pub client: kube::Client,
    /// The cached Workloads.
    pub workloads: Store<Workload>,
    /// The cached Devices.
    pub devices: Store<Devices>,
    /// The manufacturers' facts.
    pub resolve: Arc<Resolve>,
    /// Reconcile metrics.
    pub metrics: ReconcileMetrics,
    /// Counts of the writes.
    pub counters: Arc<Counters>,
    /// Notified when a Workload or a Devices changes.
    pub wake: Arc<Notify>,
    /// Verdicts in `Retry` are judged again this often.
    pub retry_every: Duration,
}

/// Runs a pass once the caches are listed, then whenever `wake` is notified (a change during a
/// pass makes one more after it) and every `retry_every`, until the task is dropped.
pub async fn run(c: Checks) {
    let _ = tokio::join!(c.workloads.wait_until_ready(), c.devices.wait_until_ready());
    let mut retry = tokio::time::interval(c.retry_every);
    let mut judged = Judged::default();
    loop {
        c.metrics.set_workloads_depth(true);
        let started = Instant::now();
        let (done, failed) = pass(&c, &mut judged).await;
        c.metrics
            .observe(Loop::Workloads, failed == 0, started.elapsed());
        c.counters
            .writes
            .fetch_add(done as u64, std::sync::atomic::Ordering::Relaxed);
        c.metrics.set_workloads_depth(false);
        tokio::select! {
            () = c.wake.notified() => {}
            _ = retry.tick() => {}
        }
    }
}

/// The verdicts one Workload is owed: (check, state, message).
type Answers = Vec<(String, String, String)>;

/// Answers the checks on every Workload that holds quota and awaits them; (writes, failures).
#[tracing::instrument(level = "debug", name = "reconcile", parent = None, skip_all, fields(controller = "workloads"))]
async fn pass(c: &Checks, judged: &mut Judged) -> (usize, usize) {
    // Copied once, and only when a Workload awaits a verdict: every Devices change wakes this.
    let mut devices = None;
    let mut due: Vec<(Arc<Workload>, Answers)> = Vec::new();
    let mut seen = HashMap::new();
    for wl in c.workloads.state() {
        let key = (wl.namespace().unwrap_or_default(), wl.name_any());
        let rv = wl.resource_version().unwrap_or_default();
        if judged.0.get(&key) == Some(&rv) {
            seen.insert(key.clone(), rv);
            continue;
        }
        if !wl.quota_reserved() || wl.evicted() {
            continue;
        }
        let Some(status) = wl.status.as_ref() else {
            continue;
        };
        let mut answers = Vec::new();
        for current in &status.admission_checks {
            let (state, message) = match current.name.as_str() {
                NODE_DEVICES_CHECK => {
                    let devices = devices.get_or_insert_with(|| devices_of(&c.devices));
                    node_devices::verdict(&wl, devices, c.resolve.as_ref())
                }
                JOINT_CHECK => super::joint_check::verdict(&wl),
                _ => continue,
            };
            if current.state == state && current.message == message {
                continue;
            }
            answers.push((current.name.clone(), state.to_owned(), message));
        }
        if !answers.is_empty() {
            due.push((wl, answers));
        }
    }
    // Versions the cache has moved past, and Workloads gone, are forgotten.
    judged.0 = seen;
    let mut answering = Vec::with_capacity(due.len());
    for (wl, answers) in due {
        answering.push(answer(c.client.clone(), wl, answers));
    }
    let mut writes = futures::stream::iter(answering).buffer_unordered(VERDICTS_IN_FLIGHT);
    let (mut done, mut failed) = (0, 0);
    while let Some((wl, n, ok)) = writes.next().await {
        done += n;
        if ok {
            let key = (wl.namespace().unwrap_or_default(), wl.name_any());
            judged
                .0
                .insert(key, wl.resource_version().unwrap_or_default());
        } else {
            // Not noted: the next pass writes it again.
            failed += 1;
        }
    }
    (done, failed)
}

/// Writes one Workload's verdicts in turn (each is its own apply of the same object); how
/// many it wrote and whether all were.
async fn answer(
    client: kube::Client,
    wl: Arc<Workload>,
    answers: Answers,
) -> (Arc<Workload>, usize, bool) {
    let mut done = 0;
    for (check, state, message) in answers {
        if let Err(e) = write(&client, &wl, &check, &state, &message).await {
            tracing::warn!(
                "workload {}/{}: {e}",
                wl.namespace().unwrap_or_default(),
                wl.name_any()
            );
            return (wl, done, false);
        }
        done += 1;
    }
    (wl, done, true)
}

/// Applies one check's verdict, as the check's own field manager.
async fn write(
    client: &kube::Client,
    wl: &Workload,
    check: &str,
    state: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let manager = if check == NODE_DEVICES_CHECK {
        CHECK_MANAGER
    } else {
        super::joint_check::MANAGER
    };
    let patch = json!({
        "apiVersion": Workload::api_version(&()), "kind": "Workload",
        "status": {"admissionChecks": [{
            "name": check, "state": state, "message": message,
            "lastTransitionTime": now_rfc3339(),
        }]},
    });
    let api: Api<Workload> = Api::namespaced(client.clone(), &wl.namespace().unwrap_or_default());
    api.patch_status(
        &wl.name_any(),
        &PatchParams::apply(manager).force(),
        &Patch::Apply(patch),
    )
    .await
    .map(drop)
}
