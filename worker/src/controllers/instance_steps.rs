//! What an Instance needs next (instances.md §4.5), decided from what is observed: a pure
//! function the reconcile loop ([`super::instances`]) asks again after each step it takes, until
//! the answer is to wait.
//!
//! In order: a deleted Instance takes its Pod with it before its finalizer goes; a stopped one
//! has no Pod; a pool that is gone, deleting or draining stops its Instances (an admin `Hold`
//! does not: it only keeps new ones queued); a Pod the kubelet refused at admission is rebuilt
//! for a bounded time; then the Pod, its Service and the status follow.

use std::time::Duration;

use gpustack_api::{
    instance::{Instance, InstanceStatus},
    instance_type::InstanceType,
    kueue::ClusterQueue,
    labels::CONTROLLED,
};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::ResourceExt;

use super::{instance_pod::PART_OF, instance_status};

/// How often a step that waits on another party looks again.
pub const AGAIN: Duration = Duration::from_secs(2);
/// How long after its Instance's creation a Pod the kubelet refused is still rebuilt; after
/// that the failed Pod stays, as the visible error.
pub const REBUILD_FOR: Duration = Duration::from_secs(5 * 60);
/// The reason the kubelet gives a Pod it refused at admission.
pub const ADMISSION_ERROR: &str = "UnexpectedAdmissionError";

/// What the loop sees of one Instance.
pub struct Observed<'a> {
    /// The Instance.
    pub instance: &'a Instance,
    /// The Pod of the same name (whoever owns it).
    pub pod: Option<&'a Pod>,
    /// The NodePort Service of the same name.
    pub service: Option<&'a Service>,
    /// `None`: the pool does not exist.
    pub instance_type: Option<&'a InstanceType>,
    /// The pool's ClusterQueue.
    pub queue: Option<&'a ClusterQueue>,
    /// The Pod's node.
    pub node: Option<&'a Node>,
    /// `instance-access-static-address` and `instance-access-wildcard-dns`.
    pub access: (&'a str, &'a str),
}

/// The controller's next write for one Instance.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Nothing to do until something changes.
    Idle,
    /// Look again after a while (another party acts meanwhile).
    Wait(Duration),
    /// Add the `gpustack.ai/controlled` finalizer.
    AddFinalizer,
    /// Remove the finalizer: nothing is left to clean up.
    RemoveFinalizer,
    /// Replace the status with this one.
    Status(InstanceStatus),
    /// Delete the Pod.
    DeletePod,
    /// Set `spec.stop`: the pool is gone, deleting or draining.
    Stop(&'static str),
    /// Create the Pod.
    CreatePod,
    /// Create the NodePort Service.
    CreateService,
}

fn phase(status: &str, message: Option<String>) -> InstanceStatus {
    InstanceStatus {
        phase: Some(status.to_owned()),
        phase_message: message,
        ..InstanceStatus::default()
    }
}

/// Moves the phase to `to` (keeping what else is known), unless it already is.
fn enter(current: &InstanceStatus, to: &str, message: Option<String>) -> Option<Step> {
    (current.phase() != to || current.phase_message != message).then(|| {
        Step::Status(InstanceStatus {
            phase: Some(to.to_owned()),
            phase_message: message,
            ..current.clone()
        })
    })
}

/// Takes the Pod away, showing `during` while it goes.
fn remove_pod(current: &InstanceStatus, pod: &Pod, during: &str) -> Step {
    if let Some(s) = enter(current, during, None) {
        return s;
    }
    if pod.metadata.deletion_timestamp.is_some() {
        Step::Wait(AGAIN)
    } else {
        Step::DeletePod
    }
}

/// Why the pool stops its Instances, if it does.
pub fn pool_stops(it: Option<&InstanceType>, queue: Option<&ClusterQueue>) -> Option<&'static str> {
    match it {
        None => Some("its instance type is gone"),
        Some(it) if it.metadata.deletion_timestamp.is_some() => {
            Some("its instance type is being deleted")
        }
        _ if queue.and_then(|q| q.spec.stop_policy.as_deref()) == Some("HoldAndDrain") => {
            Some("its instance type is draining")
        }
        _ => None,
    }
}

/// Whether `pod` belongs to this incarnation of `inst` (not to an earlier Instance of the
/// same name whose Pod has not gone yet).
fn ours(pod: &Pod, inst: &Instance) -> bool {
    let uid = inst.uid().unwrap_or_default();
    pod.labels().get(PART_OF) == Some(&uid)
        || pod
            .owner_references()
            .iter()
            .any(|o| o.uid == uid && o.controller == Some(true))
}

/// How long after its Instance's creation the Pod was made, when both are known.
fn age_gap(pod: &Pod, inst: &Instance) -> Option<Duration> {
    let made = pod.metadata.creation_timestamp.as_ref()?.0;
    let born = inst.metadata.creation_timestamp.as_ref()?.0;
    let gap = made.duration_since(born);
    Duration::try_from(gap).ok()
}

/// Whether `o` is a new Instance that runs and has no Pod yet, on a pool that takes it.
fn fresh_pod_due(o: &Observed) -> bool {
    let inst = o.instance;
    o.pod.is_none()
        && inst.status.as_ref().is_none_or(|s| s.phase().is_empty())
        && !inst.spec.stopped()
        && pool_stops(o.instance_type, o.queue).is_none()
        && o.instance_type
            .and_then(|it| it.status.as_ref())
            .and_then(|s| s.entrance.as_deref())
            .is_some_and(|e| !e.is_empty())
}

/// The next step for `o`.
pub fn next(o: &Observed) -> Step {
    let inst = o.instance;
    let current = inst.status.clone().unwrap_or_default();
    let locked = inst.finalizers().iter().any(|f| f == CONTROLLED);
    if inst.metadata.deletion_timestamp.is_some() {
        return match (locked, o.pod) {
            (false, _) => Step::Idle,
            (true, Some(pod)) => remove_pod(&current, pod, "Deleting"),
            (true, None) => Step::RemoveFinalizer,
        };
    }
    if !locked {
        // A fresh Instance's Pod comes first: it is owned, so it goes with the Instance even
        // before the lock, and each write before it is time a user waits for nothing.
        return if fresh_pod_due(o) {
            Step::CreatePod
        } else {
            Step::AddFinalizer
        };
    }
    if inst.spec.stopped() {
        return match o.pod {
            Some(pod) => remove_pod(&current, pod, "Stopping"),
            None if current != phase("Stopped", None) => Step::Status(phase("Stopped", None)),
            None => Step::Idle,
        };
    }
    if let Some(why) = pool_stops(o.instance_type, o.queue) {
        return Step::Stop(why);
    }
    let Some(pod) = o.pod else {
        if matches!(current.phase(), "Stopping" | "Stopped" | "Ready") {
            return Step::Status(phase("Starting", None));
        }
        let entrance = o
            .instance_type
            .and_then(|it| it.status.as_ref())
            .and_then(|s| s.entrance.as_deref())
            .filter(|e| !e.is_empty());
        return match entrance {
            Some(_) => Step::CreatePod,
            None => {
                let msg = format!(
                    "waiting for instance type {} to publish its queue entrance",
                    inst.spec.instance_type
                );
                enter(&current, "Starting", Some(msg)).unwrap_or(Step::Wait(AGAIN))
            }
        };
    };
    if !ours(pod, inst) || pod.metadata.deletion_timestamp.is_some() {
        let msg = format!("waiting for the previous Pod {} to go", pod.name_any());
        return enter(&current, "Starting", Some(msg)).unwrap_or(Step::Wait(AGAIN));
    }
    let refused = pod.status.as_ref().is_some_and(|s| {
        s.phase.as_deref() == Some("Failed") && s.reason.as_deref() == Some(ADMISSION_ERROR)
    });
    if refused && age_gap(pod, inst).is_some_and(|g| g < REBUILD_FOR) {
        return Step::DeletePod;
    }
    if o.service.is_none() && super::instance_pod::service(pod).is_some() {
        return Step::CreateService;
    }
    let mut want = instance_status::observed(pod, o.service, o.node);
    if instance_status::running(pod) {
        want.access_addresses = instance_status::access_addresses(&want, o.access.0, o.access.1);
    }
    if want != current {
        return Step::Status(want);
    }
    if instance_status::running(pod) && instance_status::ports_pending(o.service) {
        return Step::Wait(AGAIN);
    }
    Step::Idle
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn inst(spec: Value, status: Value, finalizer: bool, deleting: bool) -> Instance {
        let mut meta = json!({"name": "box", "namespace": "team", "uid": "u-1",
            "creationTimestamp": "2026-12-06T08:00:00Z"});
        if finalizer {
            meta["finalizers"] = json!([CONTROLLED]);
        }
        if deleting {
            meta["deletionTimestamp"] = json!("2026-12-06T09:00:00Z");
        }
        serde_json::from_value(json!({"metadata": meta, "spec": spec, "status": status})).unwrap()
    }

    fn pool(entrance: Option<&str>, deleting: bool) -> InstanceType {
        let mut it =
            json!({"metadata": {"name": "h100"}, "spec": {}, "status": {"entrance": entrance}});
        if deleting {
            it["metadata"]["deletionTimestamp"] = json!("2026-12-06T09:00:00Z");
        }
        serde_json::from_value(it).unwrap()
    }

    fn queue(policy: &str) -> ClusterQueue {
        serde_json::from_value(
            json!({"metadata": {"name": "h100"}, "spec": {"stopPolicy": policy}}),
        )
        .unwrap()
    }

    fn pod(status: Value, uid: &str, created: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "box", "labels": {PART_OF: uid}, "creationTimestamp": created},
            "spec": {"containers": [{"name": "main"}], "nodeName": "gpu-a"}, "status": status,
        }))
        .unwrap()
    }

    fn step(
        i: &Instance,
        p: Option<&Pod>,
        it: Option<&InstanceType>,
        q: Option<&ClusterQueue>,
    ) -> Step {
        next(&Observed {
            instance: i,
            pod: p,
            service: None,
            instance_type: it,
            queue: q,
            node: None,
            access: ("gw.example", ""),
        })
    }

    const RUN: &str = "2026-12-06T08:00:01Z";

    #[test]
    fn from_creation_to_ready() {
        let it = pool(Some("gpustack-fnv64-0"), false);
        // The Pod first, then the lock; no `Starting` written on the way.
        let fresh = inst(json!({"type": "h100"}), json!({}), false, false);
        assert_eq!(step(&fresh, None, Some(&it), None), Step::CreatePod);
        let gated = pod(json!({"phase": "Pending"}), "u-1", RUN);
        assert_eq!(
            step(&fresh, Some(&gated), Some(&it), None),
            Step::AddFinalizer
        );
        let unpublished = pool(None, false);
        assert_eq!(
            step(&fresh, None, Some(&unpublished), None),
            Step::AddFinalizer
        );
        let locked = inst(json!({"type": "h100"}), json!({}), true, false);
        assert_eq!(step(&locked, None, Some(&it), None), Step::CreatePod);
        let starting = inst(
            json!({"type": "h100"}),
            json!({"phase": "Starting"}),
            true,
            false,
        );
        assert_eq!(step(&starting, None, Some(&it), None), Step::CreatePod);
        assert!(
            matches!(step(&starting, None, Some(&unpublished), None), Step::Status(s)
            if s.phase_message.as_deref() == Some("waiting for instance type h100 to publish its queue entrance"))
        );
        assert!(
            matches!(step(&starting, Some(&gated), Some(&it), None), Step::Status(s) if s.phase.as_deref() == Some("Pending"))
        );
        let ready = inst(
            json!({"type": "h100"}),
            json!({"phase": "Ready"}),
            true,
            false,
        );
        let running = pod(
            json!({"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}]}),
            "u-1",
            RUN,
        );
        assert!(
            matches!(step(&ready, Some(&running), Some(&it), None), Step::Status(s) if s.node_name.as_deref() == Some("gpu-a") && s.access_addresses == ["gw.example"])
        );
        // A Pod of an earlier Instance of the same name: waited out.
        let old = pod(json!({"phase": "Running"}), "u-0", RUN);
        assert!(
            matches!(step(&starting, Some(&old), Some(&it), None), Step::Status(s)
            if s.phase_message.as_deref() == Some("waiting for the previous Pod box to go"))
        );
    }

    #[test]
    fn stop_start_and_delete() {
        let it = pool(Some("q"), false);
        let running = pod(json!({"phase": "Running"}), "u-1", RUN);
        let stop = inst(
            json!({"type": "h100", "stop": true}),
            json!({"phase": "Ready", "nodeName": "gpu-a"}),
            true,
            false,
        );
        assert!(
            matches!(step(&stop, Some(&running), Some(&it), None), Step::Status(s)
            if s.phase.as_deref() == Some("Stopping") && s.node_name.as_deref() == Some("gpu-a"))
        );
        let stopping = inst(
            json!({"type": "h100", "stop": true}),
            json!({"phase": "Stopping"}),
            true,
            false,
        );
        assert_eq!(
            step(&stopping, Some(&running), Some(&it), None),
            Step::DeletePod
        );
        assert_eq!(
            step(&stopping, None, Some(&it), None),
            Step::Status(phase("Stopped", None))
        );
        let stopped = inst(
            json!({"type": "h100", "stop": true}),
            json!({"phase": "Stopped"}),
            true,
            false,
        );
        assert_eq!(
            step(&stopped, None, None, None),
            Step::Idle,
            "a stopped instance needs no pool"
        );
        let started = inst(
            json!({"type": "h100"}),
            json!({"phase": "Stopped"}),
            true,
            false,
        );
        assert_eq!(
            step(&started, None, Some(&it), None),
            Step::Status(phase("Starting", None))
        );

        let deleting = inst(
            json!({"type": "h100"}),
            json!({"phase": "Ready"}),
            true,
            true,
        );
        assert!(
            matches!(step(&deleting, Some(&running), Some(&it), None), Step::Status(s) if s.phase.as_deref() == Some("Deleting"))
        );
        let deleting = inst(
            json!({"type": "h100"}),
            json!({"phase": "Deleting"}),
            true,
            true,
        );
        assert_eq!(
            step(&deleting, Some(&running), Some(&it), None),
            Step::DeletePod
        );
        assert_eq!(
            step(&deleting, None, Some(&it), None),
            Step::RemoveFinalizer
        );
        let gone = inst(json!({"type": "h100"}), json!({}), false, true);
        assert_eq!(step(&gone, None, None, None), Step::Idle);
    }

    #[test]
    fn the_pool_stops_its_instances_but_a_hold_does_not() {
        let i = inst(
            json!({"type": "h100"}),
            json!({"phase": "Ready"}),
            true,
            false,
        );
        let it = pool(Some("q"), false);
        assert_eq!(
            step(&i, None, None, None),
            Step::Stop("its instance type is gone")
        );
        assert_eq!(
            step(&i, None, Some(&pool(Some("q"), true)), None),
            Step::Stop("its instance type is being deleted")
        );
        assert_eq!(
            step(&i, None, Some(&it), Some(&queue("HoldAndDrain"))),
            Step::Stop("its instance type is draining")
        );
        assert_eq!(
            step(&i, None, Some(&it), Some(&queue("Hold"))),
            Step::Status(phase("Starting", None))
        );
    }

    #[test]
    fn a_refused_pod_is_rebuilt_for_a_while() {
        let i = inst(
            json!({"type": "h100"}),
            json!({"phase": "Starting"}),
            true,
            false,
        );
        let it = pool(Some("q"), false);
        let refused = |created: &str| {
            pod(
                json!({"phase": "Failed", "reason": ADMISSION_ERROR, "message": "Allocate failed"}),
                "u-1",
                created,
            )
        };
        assert_eq!(
            step(&i, Some(&refused(RUN)), Some(&it), None),
            Step::DeletePod
        );
        let late = refused("2026-12-06T08:06:00Z");
        assert!(
            matches!(step(&i, Some(&late), Some(&it), None), Step::Status(s)
            if s.phase.as_deref() == Some("Failed") && s.phase_message.as_deref() == Some("UnexpectedAdmissionError: Allocate failed"))
        );
    }
}
