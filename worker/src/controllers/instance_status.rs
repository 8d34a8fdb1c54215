//! An Instance's status read off its Pod, Service and Node (instances.md §3, §4.5 step 9), as
//! pure functions: the phase summarised from the Pod's conditions with a readable message, and
//! once it runs, where it runs and the node ports it is reached at. Also the access addresses
//! the v1 view shows (§4.8).

use gpustack_api::{
    devices::DevicesStatusGroup,
    instance::{InstanceStatus, InstanceStatusPort, Ip},
    labels::ACCELERATOR_ALLOCATED,
};
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition, Service};

use super::instance_pod::MAIN;

/// A phase and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The phase (`Starting`, `Ready`, ...).
    pub phase: &'static str,
    /// Why, for people.
    pub message: String,
}

fn summary(phase: &'static str, message: impl Into<String>) -> Summary {
    Summary {
        phase,
        message: message.into(),
    }
}

fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The first container (init containers first) that waits for a reason, as `name: reason:
/// message`; what a user needs to see when a Pod does not come up (`ErrImagePull`, say).
fn waiting(pod: &Pod, init: bool) -> Option<String> {
    let status = pod.status.as_ref()?;
    let list = if init {
        status.init_container_statuses.as_ref()
    } else {
        status.container_statuses.as_ref()
    }?;
    list.iter().find_map(|c| {
        let w = c.state.as_ref()?.waiting.as_ref()?;
        let reason = w.reason.as_deref().filter(|r| *r != "ContainerCreating")?;
        Some(match w.message.as_deref().filter(|m| !m.is_empty()) {
            Some(m) => format!("container {}: {reason}: {m}", c.name),
            None => format!("container {}: {reason}", c.name),
        })
    })
}

fn said(c: &PodCondition) -> String {
    c.message
        .clone()
        .filter(|m| !m.is_empty())
        .or_else(|| c.reason.clone())
        .unwrap_or_default()
}

/// The Pod's phase as an Instance shows it: a walk through PodScheduled, Initialized and Ready,
/// each missing or false condition naming where the Pod stands.
pub fn summarize(pod: &Pod) -> Summary {
    let status = pod.status.clone().unwrap_or_default();
    match status.phase.as_deref() {
        Some("Failed") => {
            let why = [status.reason.as_deref(), status.message.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(": ");
            return summary("Failed", why);
        }
        Some("Succeeded") => return summary("Completed", "every container exited"),
        _ => {}
    }
    let gated = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty());
    match condition(pod, "PodScheduled") {
        None if gated => {
            return summary(
                "Scheduling",
                "queued: waiting for the pool's queue to admit it",
            );
        }
        None => return summary("Pending", "waiting to be scheduled"),
        Some(c) if c.status != "True" => {
            let msg = if c.reason.as_deref() == Some("SchedulingGated") || gated {
                "queued: waiting for the pool's queue to admit it".to_owned()
            } else {
                said(c)
            };
            return summary("Scheduling", msg);
        }
        Some(_) => {}
    }
    match condition(pod, "Initialized") {
        None => return summary("Scheduled", "scheduled to a node"),
        Some(c) if c.status != "True" => {
            return match waiting(pod, true) {
                Some(w) => summary("InitializeFailed", w),
                None => summary(
                    "Initializing",
                    format!("{}; check the events for details", said(c)),
                ),
            };
        }
        Some(_) => {}
    }
    match condition(pod, "Ready") {
        None => summary("Initialized", "initialized"),
        Some(c) if c.status == "True" => summary("Ready", ""),
        Some(c) if c.reason.as_deref() == Some("ContainersNotReady") => summary(
            "Starting",
            waiting(pod, false)
                .unwrap_or_else(|| format!("{}; check the events for details", said(c))),
        ),
        Some(c) => summary("NotReady", said(c)),
    }
}

/// Whether the Pod's phase is `Running`.
pub fn running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// The node's addresses users can reach: external first, then internal.
pub fn host_ips(node: &Node) -> Vec<Ip> {
    let addresses = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default();
    ["ExternalIP", "InternalIP"]
        .iter()
        .flat_map(|t| addresses.iter().filter(move |a| a.type_ == *t))
        .map(|a| Ip {
            ip: a.address.clone(),
        })
        .collect()
}

/// The status of an Instance whose Pod is `pod`: its summary, and once it runs, its node,
/// addresses and node ports (the ports only once every one is assigned).
pub fn observed(pod: &Pod, service: Option<&Service>, node: Option<&Node>) -> InstanceStatus {
    let s = summarize(pod);
    let mut status = InstanceStatus {
        phase: Some(s.phase.to_owned()),
        phase_message: Some(s.message).filter(|m| !m.is_empty()),
        ..InstanceStatus::default()
    };
    if !running(pod) {
        return status;
    }
    status.node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    status.host_ips = node.map(host_ips).unwrap_or_default();
    let ps = pod.status.clone().unwrap_or_default();
    status.pod_ips = match ps.pod_ips {
        Some(ips) if !ips.is_empty() => ips.into_iter().map(|i| Ip { ip: i.ip }).collect(),
        _ => ps.pod_ip.into_iter().map(|ip| Ip { ip }).collect(),
    };
    let ports: Vec<InstanceStatusPort> = service
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.ports.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|p| InstanceStatusPort {
            port: p.port,
            protocol: p.protocol,
            name: p.name,
            node_port: p.node_port,
        })
        .collect();
    if ports.iter().all(|p| p.node_port.is_some()) {
        status.ports = ports;
    }
    status.allocations = allocations(pod);
    status
}

/// What the device plugin granted the Pod's `main` container, as its allocation annotation
/// records it (container name → `{devices: {groups}}`); none when absent or unreadable.
pub fn allocations(pod: &Pod) -> Vec<DevicesStatusGroup> {
    let text = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ACCELERATOR_ALLOCATED));
    let Some(record) = text.and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok()) else {
        return Vec::new();
    };
    crate::typed::from_json(&record[MAIN]["devices"]["groups"]).unwrap_or_default()
}

/// Whether the Service still waits for node ports.
pub fn ports_pending(service: Option<&Service>) -> bool {
    service
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.ports.as_ref())
        .is_some_and(|ports| ports.iter().any(|p| p.node_port.is_none()))
}

/// Where users reach the instance: the static address when one is set, else the node's first
/// address, spelled under the wildcard DNS domain when one is set (`1-2-3-4.traefik.me`).
pub fn access_addresses(
    status: &InstanceStatus,
    static_address: &str,
    wildcard: &str,
) -> Vec<String> {
    if !static_address.is_empty() {
        return vec![static_address.to_owned()];
    }
    let Some(ip) = status.host_ips.first() else {
        return vec![];
    };
    if wildcard.is_empty() {
        return vec![ip.ip.clone()];
    }
    vec![format!("{}.{wildcard}", ip.ip.replace(['.', ':'], "-"))]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(status: Value, gates: bool) -> Pod {
        let mut spec = json!({"containers": [{"name": "main"}], "nodeName": "gpu-a"});
        if gates {
            spec["schedulingGates"] = json!([{"name": "kueue.x-k8s.io/admission"}]);
        }
        serde_json::from_value(json!({"metadata": {"name": "box"}, "spec": spec, "status": status}))
            .unwrap()
    }

    fn cond(t: &str, s: &str, reason: &str, message: &str) -> Value {
        json!({"type": t, "status": s, "reason": reason, "message": message})
    }

    #[test]
    fn the_walk_through_the_conditions() {
        let cases = [
            (
                json!({"phase": "Pending"}),
                true,
                "Scheduling",
                "queued: waiting for the pool's queue to admit it",
            ),
            (
                json!({"phase": "Pending", "conditions": [cond("PodScheduled", "False", "SchedulingGated", "gated")]}),
                true,
                "Scheduling",
                "queued: waiting for the pool's queue to admit it",
            ),
            (
                json!({"phase": "Pending"}),
                false,
                "Pending",
                "waiting to be scheduled",
            ),
            (
                json!({"phase": "Pending", "conditions": [cond("PodScheduled", "False", "Unschedulable", "0/3 nodes are available")]}),
                false,
                "Scheduling",
                "0/3 nodes are available",
            ),
            (
                json!({"phase": "Pending", "conditions": [cond("PodScheduled", "True", "", "")]}),
                false,
                "Scheduled",
                "scheduled to a node",
            ),
            (
                json!({"phase": "Pending", "conditions": [cond("PodScheduled", "True", "", ""), cond("Initialized", "True", "", ""),
                cond("Ready", "False", "ContainersNotReady", "containers with unready status: [main]")],
                "containerStatuses": [{"name": "main", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": "ErrImagePull", "message": "pull access denied for nope"}}}]}),
                false,
                "Starting",
                "container main: ErrImagePull: pull access denied for nope",
            ),
            (
                json!({"phase": "Running", "conditions": [cond("PodScheduled", "True", "", ""), cond("Initialized", "True", "", ""),
                cond("Ready", "True", "", "")]}),
                false,
                "Ready",
                "",
            ),
            (
                json!({"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": "Allocate failed"}),
                false,
                "Failed",
                "UnexpectedAdmissionError: Allocate failed",
            ),
        ];
        for (status, gates, phase, message) in cases {
            let got = summarize(&pod(status.clone(), gates));
            assert_eq!(
                (got.phase, got.message.as_str()),
                (phase, message),
                "{status}"
            );
        }
    }

    #[test]
    fn running_fills_where_it_runs() {
        let p = pod(
            json!({"phase": "Running", "podIP": "10.0.0.7",
            "conditions": [cond("PodScheduled", "True", "", ""), cond("Initialized", "True", "", ""), cond("Ready", "True", "", "")]}),
            false,
        );
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "gpu-a"}, "status": {"addresses": [
            {"type": "InternalIP", "address": "192.168.0.2"}, {"type": "Hostname", "address": "gpu-a"},
            {"type": "ExternalIP", "address": "1.2.3.4"}]}})).unwrap();
        let svc = |node_port: Option<i32>| -> Service {
            serde_json::from_value(json!({"metadata": {"name": "box"}, "spec": {"ports": [
                {"name": "tcp-22", "port": 22, "protocol": "TCP", "nodePort": node_port}]}}))
            .unwrap()
        };
        let pending = svc(None);
        let s = observed(&p, Some(&pending), Some(&node));
        assert!(s.ports.is_empty() && ports_pending(Some(&pending)));
        let assigned = svc(Some(30022));
        let s = observed(&p, Some(&assigned), Some(&node));
        assert_eq!(s.phase.as_deref(), Some("Ready"));
        assert_eq!(s.node_name.as_deref(), Some("gpu-a"));
        assert_eq!(
            s.host_ips.iter().map(|i| i.ip.as_str()).collect::<Vec<_>>(),
            ["1.2.3.4", "192.168.0.2"]
        );
        assert_eq!(
            s.pod_ips,
            [Ip {
                ip: "10.0.0.7".into()
            }]
        );
        assert_eq!(s.ports[0].node_port, Some(30022));
        assert!(!ports_pending(Some(&assigned)));

        assert_eq!(access_addresses(&s, "", ""), ["1.2.3.4"]);
        assert_eq!(
            access_addresses(&s, "", "traefik.me"),
            ["1-2-3-4.traefik.me"]
        );
        assert_eq!(
            access_addresses(&s, "gw.example", "traefik.me"),
            ["gw.example"]
        );
        assert!(access_addresses(&InstanceStatus::default(), "", "traefik.me").is_empty());
        assert!(s.allocations.is_empty());
    }

    #[test]
    fn allocations_are_the_main_containers_grant() {
        let mut p = pod(json!({"phase": "Running"}), false);
        let grant = json!({
            "main": {"devices": {"groups": [{"id": "g", "manufacturer": "nvidia", "accelerators": [
                {"id": "GPU-1", "index": 1, "mode": 3, "allocated": 320000}]}]},
                "deviceIDs": ["GPU-1::0"]},
            "sshd": {"devices": {"groups": [{"id": "g", "manufacturer": "nvidia", "accelerators": [
                {"id": "GPU-1", "index": 1, "mode": 5}]}]}},
        });
        p.metadata.annotations = Some(
            [(ACCELERATOR_ALLOCATED.to_owned(), grant.to_string())]
                .into_iter()
                .collect(),
        );
        let groups = allocations(&p);
        assert_eq!(groups.len(), 1);
        let card = &groups[0].accelerators[0];
        assert_eq!(
            (card.id.as_str(), card.index, card.allocated),
            ("GPU-1", 1, 320000)
        );
        p.metadata.annotations = Some(
            [(ACCELERATOR_ALLOCATED.to_owned(), "not json".to_owned())]
                .into_iter()
                .collect(),
        );
        assert!(allocations(&p).is_empty());
    }
}
