//! Pods: readiness, the status kube-apiserver derives from the phase and the containers'
//! states, restarts, and where the pod runs.

use jiff::Timestamp;
use serde_json::Value;

use super::format::{between, condition, count, items, non_empty_or, or_none, text, timestamp};
use super::{AGE, Col, col, wide};

/// The columns `kubectl get` shows for Pods, as kube-apiserver prints them.
pub const POD: &[Col] = &[
    col("Ready", "string", pod_ready),
    col("Status", "string", pod_status),
    col("Restarts", "string", pod_restarts),
    AGE,
    wide("IP", "string", pod_ip),
    wide("Node", "string", pod_node),
    wide("Nominated Node", "string", pod_nominated_node),
    wide("Readiness Gates", "string", pod_readiness_gates),
];

/// What the Ready, Status and Restarts cells say, from one pass over the containers (each of
/// the three cells makes that pass: a cell is computed on its own).
#[derive(Debug, PartialEq)]
struct Summary {
    ready: usize,
    total: usize,
    reason: String,
    restarts: i64,
    /// When a container last terminated before restarting.
    last_restart: Option<Timestamp>,
}

fn condition_true(pod: &Value, kind: &str) -> bool {
    items(pod, "/status/conditions")
        .iter()
        .any(|c| text(c, "/type") == kind && text(c, "/status") == "True")
}

/// When the container's previous run ended, if it ended.
fn last_terminated(status: &Value) -> Option<Timestamp> {
    timestamp(text(status, "/lastState/terminated/finishedAt"))
}

fn keep_later(latest: &mut Option<Timestamp>, t: Option<Timestamp>) {
    if t > *latest {
        *latest = t;
    }
}

/// A terminated state with no reason: `Signal:N` or `ExitCode:N`.
fn exit_description(terminated: &Value) -> String {
    match count(terminated, "/signal") {
        0 => format!("ExitCode:{}", count(terminated, "/exitCode")),
        signal => format!("Signal:{signal}"),
    }
}

fn is_ready(status: &Value) -> bool {
    status.get("ready").and_then(Value::as_bool) == Some(true)
}

fn summarize(pod: &Value) -> Summary {
    let init_specs = items(pod, "/spec/initContainers");
    // Sidecars: init containers that keep running (`restartPolicy: Always`) count as
    // containers of the pod.
    let is_sidecar = |name: &str| {
        init_specs
            .iter()
            .any(|c| text(c, "/name") == name && text(c, "/restartPolicy") == "Always")
    };
    let sidecars = init_specs
        .iter()
        .filter(|c| text(c, "/restartPolicy") == "Always")
        .count();
    let total = items(pod, "/spec/containers").len() + sidecars;
    let phase = text(pod, "/status/phase");
    let mut reason = non_empty_or(text(pod, "/status/reason"), phase).to_owned();
    let gated = items(pod, "/status/conditions")
        .iter()
        .any(|c| text(c, "/type") == "PodScheduled" && text(c, "/reason") == "SchedulingGated");
    if gated {
        reason = "SchedulingGated".into();
    }

    let mut ready = 0;
    let mut restarts = 0;
    let mut last_restart = None;
    let mut sidecar_restarts = 0;
    let mut sidecar_last_restart = None;
    let mut initializing = false;
    for (i, c) in items(pod, "/status/initContainerStatuses")
        .iter()
        .enumerate()
    {
        restarts += count(c, "/restartCount");
        keep_later(&mut last_restart, last_terminated(c));
        let sidecar = is_sidecar(text(c, "/name"));
        if sidecar {
            sidecar_restarts += count(c, "/restartCount");
            keep_later(&mut sidecar_last_restart, last_terminated(c));
        }
        let terminated = c.pointer("/state/terminated");
        if terminated.is_some_and(|t| count(t, "/exitCode") == 0) {
            continue;
        }
        if sidecar && c.get("started").and_then(Value::as_bool) == Some(true) {
            if is_ready(c) {
                ready += 1;
            }
            continue;
        }
        let waiting = text(c, "/state/waiting/reason");
        reason = match terminated {
            Some(t) => match text(t, "/reason") {
                "" => format!("Init:{}", exit_description(t)),
                r => format!("Init:{r}"),
            },
            None if !waiting.is_empty() && waiting != "PodInitializing" => {
                format!("Init:{waiting}")
            }
            None => format!("Init:{i}/{}", init_specs.len()),
        };
        initializing = true;
        break;
    }

    if !initializing || condition_true(pod, "Initialized") {
        restarts = sidecar_restarts;
        last_restart = sidecar_last_restart;
        let mut running = false;
        // The first container's state wins: it is looked at last.
        for c in items(pod, "/status/containerStatuses").iter().rev() {
            restarts += count(c, "/restartCount");
            keep_later(&mut last_restart, last_terminated(c));
            let waiting = text(c, "/state/waiting/reason");
            if !waiting.is_empty() {
                reason = waiting.to_owned();
            } else if let Some(t) = c.pointer("/state/terminated") {
                reason = match text(t, "/reason") {
                    "" => exit_description(t),
                    r => r.to_owned(),
                };
            } else if is_ready(c) && c.pointer("/state/running").is_some() {
                running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && running {
            reason = if condition_true(pod, "Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }

    let deleting = pod
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    if deleting && text(pod, "/status/reason") == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".into();
    }
    Summary {
        ready,
        total,
        reason,
        restarts,
        last_restart,
    }
}

/// `ready/total` containers.
fn pod_ready(pod: &Value, _: Timestamp) -> Value {
    let s = summarize(pod);
    format!("{}/{}", s.ready, s.total).into()
}

fn pod_status(pod: &Value, _: Timestamp) -> Value {
    summarize(pod).reason.into()
}

/// The restart count, with how long ago the last restart was when known (`3 (5m ago)`).
fn pod_restarts(pod: &Value, now: Timestamp) -> Value {
    let s = summarize(pod);
    match s.last_restart {
        Some(t) if s.restarts != 0 => format!("{} ({} ago)", s.restarts, between(t, now)).into(),
        _ => s.restarts.to_string().into(),
    }
}

fn pod_ip(pod: &Value, _: Timestamp) -> Value {
    // `podIPs` mirrors `podIP` on a real cluster; objects written here may carry only the latter.
    let first = items(pod, "/status/podIPs")
        .first()
        .map(|ip| text(ip, "/ip"))
        .unwrap_or_else(|| text(pod, "/status/podIP"));
    or_none(first).into()
}

fn pod_node(pod: &Value, _: Timestamp) -> Value {
    or_none(text(pod, "/spec/nodeName")).into()
}

fn pod_nominated_node(pod: &Value, _: Timestamp) -> Value {
    or_none(text(pod, "/status/nominatedNodeName")).into()
}

/// `true/all` of the pod's readiness gates, by their conditions.
fn pod_readiness_gates(pod: &Value, _: Timestamp) -> Value {
    let gates = items(pod, "/spec/readinessGates");
    if gates.is_empty() {
        return "<none>".into();
    }
    let passed = gates
        .iter()
        .filter(|g| {
            condition(pod, text(g, "/conditionType")).is_some_and(|c| text(c, "/status") == "True")
        })
        .count();
    format!("{passed}/{}", gates.len()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-01-01T01:00:00Z".parse().unwrap()
    }

    fn running(name: &str, ready: bool, restarts: i64) -> Value {
        json!({"name": name, "ready": ready, "restartCount": restarts,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}})
    }

    #[test]
    fn a_pod_with_one_of_two_containers_ready() {
        let mut flaky = running("b", false, 3);
        flaky["lastState"] =
            json!({"terminated": {"exitCode": 1, "finishedAt": "2026-01-01T00:55:00Z"}});
        let pod = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "containerStatuses": [running("a", true, 0), flaky]}});
        assert_eq!(pod_ready(&pod, now()), "1/2");
        assert_eq!(pod_status(&pod, now()), "Running");
        assert_eq!(pod_restarts(&pod, now()), "3 (5m ago)");
    }

    #[test]
    fn restarts_without_a_known_time_are_a_bare_count() {
        let pod = json!({"spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Running", "containerStatuses": [running("a", true, 2)]}});
        assert_eq!(pod_restarts(&pod, now()), "2");
        assert_eq!(pod_restarts(&json!({}), now()), "0");
    }

    #[test]
    fn status_is_the_phase_without_container_states() {
        let pod = json!({"spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending"}});
        assert_eq!(pod_status(&pod, now()), "Pending");
        assert_eq!(pod_ready(&pod, now()), "0/1");
        assert_eq!(pod_status(&json!({}), now()), "");
        let evicted = json!({"status": {"phase": "Failed", "reason": "Evicted"}});
        assert_eq!(pod_status(&evicted, now()), "Evicted");
    }

    #[test]
    fn waiting_and_terminated_reasons() {
        let waiting = |reason: &str| {
            json!({"spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending",
                "containerStatuses": [{"name": "a", "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": reason}}}]}})
        };
        assert_eq!(
            pod_status(&waiting("ContainerCreating"), now()),
            "ContainerCreating"
        );
        assert_eq!(
            pod_status(&waiting("CrashLoopBackOff"), now()),
            "CrashLoopBackOff"
        );
        let done = |exit: i64, reason: &str| {
            json!({"spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Succeeded",
                "containerStatuses": [{"name": "a", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": exit, "reason": reason}}}]}})
        };
        assert_eq!(pod_status(&done(0, "Completed"), now()), "Completed");
        assert_eq!(pod_status(&done(2, ""), now()), "ExitCode:2");
        let mut signalled = done(137, "");
        signalled["status"]["containerStatuses"][0]["state"]["terminated"]["signal"] = json!(9);
        assert_eq!(pod_status(&signalled, now()), "Signal:9");
    }

    #[test]
    fn a_completed_container_beside_a_running_one() {
        let status = |ready_condition: &str| {
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}, "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": ready_condition}],
                "containerStatuses": [
                    {"name": "a", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    running("b", true, 0)]}})
        };
        assert_eq!(pod_status(&status("True"), now()), "Running");
        assert_eq!(pod_status(&status("False"), now()), "NotReady");
    }

    #[test]
    fn init_containers() {
        let pod = |init_status: Value| {
            json!({"spec": {"initContainers": [{"name": "i0"}, {"name": "i1"}], "containers": [{"name": "a"}]},
                "status": {"phase": "Pending", "initContainerStatuses": [
                    {"name": "i0", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}, init_status]}})
        };
        let running = json!({"name": "i1", "restartCount": 0, "state": {"running": {}}});
        assert_eq!(pod_status(&pod(running), now()), "Init:1/2");
        let crashing = json!({"name": "i1", "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}}});
        assert_eq!(
            pod_status(&pod(crashing.clone()), now()),
            "Init:CrashLoopBackOff"
        );
        assert_eq!(pod_restarts(&pod(crashing), now()), "4");
        let failed =
            json!({"name": "i1", "restartCount": 0, "state": {"terminated": {"exitCode": 3}}});
        assert_eq!(pod_status(&pod(failed), now()), "Init:ExitCode:3");
        let initializing = json!({"name": "i1", "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}});
        assert_eq!(pod_status(&pod(initializing), now()), "Init:1/2");
    }

    #[test]
    fn sidecars_count_as_containers() {
        let pod = json!({"spec": {"initContainers": [{"name": "proxy", "restartPolicy": "Always"}],
                "containers": [{"name": "a"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
                "initContainerStatuses": [{"name": "proxy", "ready": true, "started": true, "restartCount": 1,
                    "state": {"running": {}}}],
                "containerStatuses": [running("a", true, 0)]}});
        assert_eq!(pod_ready(&pod, now()), "2/2");
        assert_eq!(pod_status(&pod, now()), "Running");
        assert_eq!(pod_restarts(&pod, now()), "1");
    }

    #[test]
    fn deleting_pods_are_terminating() {
        let pod = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:59:00Z"},
            "status": {"phase": "Running"}});
        assert_eq!(pod_status(&pod, now()), "Terminating");
        let done = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:59:00Z"},
            "status": {"phase": "Succeeded"}});
        assert_eq!(pod_status(&done, now()), "Succeeded");
        let lost = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:59:00Z"},
            "status": {"phase": "Running", "reason": "NodeLost"}});
        assert_eq!(pod_status(&lost, now()), "Unknown");
    }

    #[test]
    fn scheduling_gated_pods() {
        let pod = json!({"status": {"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}});
        assert_eq!(pod_status(&pod, now()), "SchedulingGated");
    }

    #[test]
    fn wide_cells() {
        let pod = json!({"spec": {"nodeName": "n1", "readinessGates": [
                {"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}]},
            "status": {"podIPs": [{"ip": "10.1.0.7"}, {"ip": "fd00::7"}], "podIP": "10.1.0.7",
                "conditions": [{"type": "example.com/lb", "status": "True"}]}});
        assert_eq!(pod_ip(&pod, now()), "10.1.0.7");
        assert_eq!(pod_node(&pod, now()), "n1");
        assert_eq!(pod_nominated_node(&pod, now()), "<none>");
        assert_eq!(pod_readiness_gates(&pod, now()), "1/2");
        let bare = json!({"status": {"podIP": "10.1.0.8"}});
        assert_eq!(pod_ip(&bare, now()), "10.1.0.8");
        assert_eq!(pod_node(&bare, now()), "<none>");
        assert_eq!(pod_readiness_gates(&bare, now()), "<none>");
        assert_eq!(pod_ip(&json!({}), now()), "<none>");
    }
}
