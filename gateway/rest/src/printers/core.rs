//! Core kinds: ConfigMap, Secret, ServiceAccount, Namespace, Node, Service, Event,
//! ResourceQuota.

use jiff::Timestamp;
use serde_json::Value;

use super::format::{count, items, label_map, len_at, non_empty_or, or_none, since, text};
use super::{AGE, Col, col, wide};

/// The columns `kubectl get` shows for ConfigMaps, as kube-apiserver prints them.
pub const CONFIG_MAP: &[Col] = &[col("Data", "string", config_map_data), AGE];
/// The columns `kubectl get` shows for Secrets, as kube-apiserver prints them.
pub const SECRET: &[Col] = &[
    col("Type", "string", secret_type),
    col("Data", "string", secret_data),
    AGE,
];
/// The columns `kubectl get` shows for ServiceAccounts, as kube-apiserver prints them.
pub const SERVICE_ACCOUNT: &[Col] = &[col("Secrets", "string", service_account_secrets), AGE];
/// The columns `kubectl get` shows for Namespaces, as kube-apiserver prints them.
pub const NAMESPACE: &[Col] = &[col("Status", "string", namespace_status), AGE];
/// The columns `kubectl get` shows for Nodes, as kube-apiserver prints them.
pub const NODE: &[Col] = &[
    col("Status", "string", node_status),
    col("Roles", "string", node_roles),
    AGE,
    col("Version", "string", node_version),
    wide("Internal-IP", "string", node_internal_ip),
    wide("External-IP", "string", node_external_ip),
    wide("OS-Image", "string", node_os_image),
    wide("Kernel-Version", "string", node_kernel_version),
    wide("Container-Runtime", "string", node_container_runtime),
];
/// The columns `kubectl get` shows for Services, as kube-apiserver prints them.
pub const SERVICE: &[Col] = &[
    col("Type", "string", service_type),
    col("Cluster-IP", "string", service_cluster_ip),
    col("External-IP", "string", service_external_ip),
    col("Port(s)", "string", service_ports),
    AGE,
    wide("Selector", "string", service_selector),
];
/// Events lead with when they were last seen; their name is a wide column, last.
pub const EVENT: &[Col] = &[
    col("Last Seen", "string", event_last_seen),
    col("Type", "string", event_type),
    col("Reason", "string", event_reason),
    col("Object", "string", event_object),
    wide("Subobject", "string", event_subobject),
    wide("Source", "string", event_source),
    col("Message", "string", event_message),
    wide("First Seen", "string", event_first_seen),
    wide("Count", "string", event_count),
    Col {
        format: "name",
        ..wide("Name", "string", crate::columns::object_name)
    },
];
/// The columns `kubectl get` shows for ResourceQuotas, as kube-apiserver prints them.
pub const RESOURCE_QUOTA: &[Col] = &[
    col("Request", "string", quota_requests),
    col("Limit", "string", quota_limits),
    AGE,
];

fn config_map_data(cm: &Value, _: Timestamp) -> Value {
    (len_at(cm, "/data") + len_at(cm, "/binaryData")).into()
}

fn secret_type(s: &Value, _: Timestamp) -> Value {
    // `Opaque` is what the API defaults an unset type to.
    non_empty_or(text(s, "/type"), "Opaque").into()
}

fn secret_data(s: &Value, _: Timestamp) -> Value {
    len_at(s, "/data").into()
}

fn service_account_secrets(sa: &Value, _: Timestamp) -> Value {
    len_at(sa, "/secrets").into()
}

fn namespace_status(ns: &Value, _: Timestamp) -> Value {
    text(ns, "/status/phase").into()
}

/// `Ready`, `NotReady` or `Unknown` from the Ready condition, then `SchedulingDisabled` when
/// the node is cordoned.
fn node_status(node: &Value, _: Timestamp) -> Value {
    let ready = items(node, "/status/conditions")
        .iter()
        .rfind(|c| text(c, "/type") == "Ready");
    let mut status = vec![match ready {
        Some(c) if text(c, "/status") == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled");
    }
    status.join(",").into()
}

const ROLE_PREFIX: &str = "node-role.kubernetes.io/";
const ROLE_LABEL: &str = "kubernetes.io/role";

/// Roles from `node-role.kubernetes.io/ROLE` label keys and a `kubernetes.io/role` value,
/// sorted, without repeats.
fn node_roles(node: &Value, _: Timestamp) -> Value {
    let mut roles: Vec<&str> = node
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match k.strip_prefix(ROLE_PREFIX) {
            Some(role) if !role.is_empty() => Some(role),
            Some(_) => None,
            None => (k == ROLE_LABEL)
                .then(|| v.as_str().unwrap_or(""))
                .filter(|r| !r.is_empty()),
        })
        .collect();
    roles.sort_unstable();
    roles.dedup();
    or_none(roles.join(",")).into()
}

fn node_version(node: &Value, _: Timestamp) -> Value {
    text(node, "/status/nodeInfo/kubeletVersion").into()
}

fn node_address(node: &Value, kind: &str) -> String {
    let found = items(node, "/status/addresses")
        .iter()
        .find(|a| text(a, "/type") == kind);
    or_none(found.map(|a| text(a, "/address")).unwrap_or(""))
}

fn node_internal_ip(node: &Value, _: Timestamp) -> Value {
    node_address(node, "InternalIP").into()
}

fn node_external_ip(node: &Value, _: Timestamp) -> Value {
    node_address(node, "ExternalIP").into()
}

fn node_info_or_unknown(node: &Value, ptr: &str) -> Value {
    non_empty_or(text(node, ptr), "<unknown>").into()
}

fn node_os_image(node: &Value, _: Timestamp) -> Value {
    node_info_or_unknown(node, "/status/nodeInfo/osImage")
}

fn node_kernel_version(node: &Value, _: Timestamp) -> Value {
    node_info_or_unknown(node, "/status/nodeInfo/kernelVersion")
}

fn node_container_runtime(node: &Value, _: Timestamp) -> Value {
    node_info_or_unknown(node, "/status/nodeInfo/containerRuntimeVersion")
}

/// The service's type; `ClusterIP`, the API's default, when unset.
fn type_of(svc: &Value) -> &str {
    non_empty_or(text(svc, "/spec/type"), "ClusterIP")
}

fn service_type(svc: &Value, _: Timestamp) -> Value {
    type_of(svc).into()
}

fn service_cluster_ip(svc: &Value, _: Timestamp) -> Value {
    let first = items(svc, "/spec/clusterIPs")
        .first()
        .and_then(Value::as_str)
        .unwrap_or_else(|| text(svc, "/spec/clusterIP"));
    or_none(first).into()
}

/// Load-balancer ingress points (IP, else hostname), sorted, without repeats.
pub(super) fn load_balancer_points(status: &Value) -> Vec<&str> {
    let mut points: Vec<&str> = items(status, "/loadBalancer/ingress")
        .iter()
        .map(|i| non_empty_or(text(i, "/ip"), text(i, "/hostname")))
        .filter(|p| !p.is_empty())
        .collect();
    points.sort_unstable();
    points.dedup();
    points
}

fn service_external_ip(svc: &Value, _: Timestamp) -> Value {
    let external: Vec<&str> = items(svc, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let cell = match type_of(svc) {
        "ClusterIP" | "NodePort" => or_none(external.join(",")),
        "LoadBalancer" => {
            let status = svc.get("status").unwrap_or(&Value::Null);
            let mut all = load_balancer_points(status);
            all.extend(&external);
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => text(svc, "/spec/externalName").into(),
        _ => "<unknown>".into(),
    };
    cell.into()
}

/// `80/TCP`, or `80:30080/TCP` with a node port, for each port.
fn service_ports(svc: &Value, _: Timestamp) -> Value {
    let ports: Vec<String> = items(svc, "/spec/ports")
        .iter()
        .map(|p| {
            let port = count(p, "/port");
            // TCP is what the API defaults an unset protocol to.
            let protocol = non_empty_or(text(p, "/protocol"), "TCP");
            match count(p, "/nodePort") {
                0 => format!("{port}/{protocol}"),
                node => format!("{port}:{node}/{protocol}"),
            }
        })
        .collect();
    or_none(ports.join(",")).into()
}

fn service_selector(svc: &Value, _: Timestamp) -> Value {
    label_map(svc.pointer("/spec/selector")).into()
}

/// A field of an Event under its core `v1` name or its `events.k8s.io/v1` name: the table
/// serves both APIs' Events.
fn event_field<'a>(ev: &'a Value, core: &str, events_v1: &str) -> &'a Value {
    ev.get(core)
        .or_else(|| ev.get(events_v1))
        .unwrap_or(&Value::Null)
}

fn event_first_seen_text(ev: &Value, now: Timestamp) -> String {
    match event_field(ev, "firstTimestamp", "deprecatedFirstTimestamp").as_str() {
        Some(t) if !t.is_empty() => since(t, now),
        _ => since(text(ev, "/eventTime"), now),
    }
}

fn event_last_seen(ev: &Value, now: Timestamp) -> Value {
    if let Some(t) = ev
        .pointer("/series/lastObservedTime")
        .and_then(Value::as_str)
    {
        return since(t, now).into();
    }
    match event_field(ev, "lastTimestamp", "deprecatedLastTimestamp").as_str() {
        Some(t) if !t.is_empty() => since(t, now).into(),
        _ => event_first_seen_text(ev, now).into(),
    }
}

fn event_first_seen(ev: &Value, now: Timestamp) -> Value {
    event_first_seen_text(ev, now).into()
}

fn event_type(ev: &Value, _: Timestamp) -> Value {
    text(ev, "/type").into()
}

fn event_reason(ev: &Value, _: Timestamp) -> Value {
    text(ev, "/reason").into()
}

/// `kind/name` of the object the event is about, the kind in lower case.
fn event_object(ev: &Value, _: Timestamp) -> Value {
    let about = event_field(ev, "involvedObject", "regarding");
    let kind = text(about, "/kind").to_lowercase();
    match text(about, "/name") {
        "" => kind.into(),
        name => format!("{kind}/{name}").into(),
    }
}

fn event_subobject(ev: &Value, _: Timestamp) -> Value {
    text(event_field(ev, "involvedObject", "regarding"), "/fieldPath").into()
}

/// `component, host` of the event's source, from the reporting fields when the source is
/// unset.
fn event_source(ev: &Value, _: Timestamp) -> Value {
    let source = event_field(ev, "source", "deprecatedSource");
    let reporter = non_empty_or(
        text(ev, "/reportingComponent"),
        text(ev, "/reportingController"),
    );
    let component = non_empty_or(text(source, "/component"), reporter);
    let host = non_empty_or(text(source, "/host"), text(ev, "/reportingInstance"));
    if host.is_empty() {
        component.into()
    } else {
        format!("{component}, {host}").into()
    }
}

fn event_message(ev: &Value, _: Timestamp) -> Value {
    event_field(ev, "message", "note")
        .as_str()
        .unwrap_or("")
        .trim()
        .into()
}

/// How often the event happened: its series' count, else its count; a singleton event of the
/// newer API has none, and counts once.
fn event_count(ev: &Value, _: Timestamp) -> Value {
    if let Some(n) = ev.pointer("/series/count").and_then(Value::as_i64) {
        return n.into();
    }
    match event_field(ev, "count", "deprecatedCount").as_i64() {
        None | Some(0) => 1.into(),
        Some(n) => n.into(),
    }
}

/// `resource: used/hard` for each resource of the quota's status, sorted, those named
/// `limits.*` in the Limit column and the others in the Request column. Until a status is
/// written (no quota controller runs here) the spec's limits show, with nothing used, as a
/// real cluster shows them once its controller has copied them.
fn quota_usage(quota: &Value, limits: bool) -> String {
    let hard = quota
        .pointer("/status/hard")
        .or_else(|| quota.pointer("/spec/hard"))
        .and_then(Value::as_object);
    let mut names: Vec<(&String, &Value)> = hard.into_iter().flatten().collect();
    names.sort_unstable_by_key(|(name, _)| *name);
    let parts: Vec<String> = names
        .into_iter()
        .filter(|(name, _)| name.split_once('.').is_some_and(|(p, _)| p == "limits") == limits)
        .map(|(name, hard)| {
            let used = quota
                .pointer("/status/used")
                .and_then(|u| u.get(name.as_str()))
                .and_then(Value::as_str)
                .unwrap_or("0");
            format!("{name}: {used}/{}", hard.as_str().unwrap_or(""))
        })
        .collect();
    parts.join(", ")
}

fn quota_requests(quota: &Value, _: Timestamp) -> Value {
    quota_usage(quota, false).into()
}

fn quota_limits(quota: &Value, _: Timestamp) -> Value {
    quota_usage(quota, true).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-01-01T01:00:00Z".parse().unwrap()
    }

    #[test]
    fn config_maps_count_data_and_binary_data() {
        let cm = json!({"data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        assert_eq!(config_map_data(&cm, now()), 3);
        assert_eq!(config_map_data(&json!({}), now()), 0);
    }

    #[test]
    fn secrets_show_type_and_data_count() {
        let s = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        assert_eq!(secret_type(&s, now()), "kubernetes.io/tls");
        assert_eq!(secret_type(&json!({}), now()), "Opaque");
        assert_eq!(secret_data(&s, now()), 2);
    }

    #[test]
    fn service_accounts_count_secrets() {
        let sa = json!({"secrets": [{"name": "a"}]});
        assert_eq!(service_account_secrets(&sa, now()), 1);
        assert_eq!(service_account_secrets(&json!({}), now()), 0);
    }

    #[test]
    fn namespaces_show_phase() {
        let ns = json!({"status": {"phase": "Terminating"}});
        assert_eq!(namespace_status(&ns, now()), "Terminating");
    }

    #[test]
    fn node_status_from_ready_and_cordon() {
        let ready = json!({"status": {"conditions": [
            {"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(node_status(&ready, now()), "Ready");
        let cordoned = json!({"spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        assert_eq!(node_status(&cordoned, now()), "NotReady,SchedulingDisabled");
        assert_eq!(node_status(&json!({}), now()), "Unknown");
    }

    #[test]
    fn node_roles_from_labels() {
        let node = json!({"metadata": {"labels": {
            "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/": "x",
            "kubernetes.io/role": "gpu", "node-role.kubernetes.io/gpu": "", "zone": "a"}}});
        assert_eq!(node_roles(&node, now()), "control-plane,gpu");
        assert_eq!(node_roles(&json!({"metadata": {}}), now()), "<none>");
    }

    #[test]
    fn node_wide_cells() {
        let node = json!({"status": {
            "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.5"}],
            "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "Ubuntu 24.04", "kernelVersion": "6.8.0"}}});
        assert_eq!(node_version(&node, now()), "v1.32.0");
        assert_eq!(node_internal_ip(&node, now()), "10.0.0.5");
        assert_eq!(node_external_ip(&node, now()), "<none>");
        assert_eq!(node_os_image(&node, now()), "Ubuntu 24.04");
        assert_eq!(node_kernel_version(&node, now()), "6.8.0");
        assert_eq!(node_container_runtime(&node, now()), "<unknown>");
    }

    #[test]
    fn services_show_type_addresses_and_ports() {
        let svc = json!({"spec": {"type": "NodePort", "clusterIPs": ["10.96.0.9"], "clusterIP": "10.96.0.9",
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}, {"port": 53, "protocol": "UDP"}],
            "selector": {"app": "web"}}});
        assert_eq!(service_type(&svc, now()), "NodePort");
        assert_eq!(service_cluster_ip(&svc, now()), "10.96.0.9");
        assert_eq!(service_external_ip(&svc, now()), "<none>");
        assert_eq!(service_ports(&svc, now()), "80:30080/TCP,53/UDP");
        assert_eq!(service_selector(&svc, now()), "app=web");

        let bare = json!({"spec": {"ports": [{"port": 80}]}});
        assert_eq!(service_type(&bare, now()), "ClusterIP");
        assert_eq!(service_cluster_ip(&bare, now()), "<none>");
        assert_eq!(service_ports(&bare, now()), "80/TCP");
        assert_eq!(service_ports(&json!({}), now()), "<none>");
        assert_eq!(service_selector(&bare, now()), "<none>");
    }

    #[test]
    fn external_ips_by_service_type() {
        let lb = |status: Value| json!({"spec": {"type": "LoadBalancer", "externalIPs": ["1.2.3.4"]}, "status": status});
        assert_eq!(
            service_external_ip(
                &lb(
                    json!({"loadBalancer": {"ingress": [{"hostname": "lb.example"}, {"ip": "5.6.7.8"}]}})
                ),
                now()
            ),
            "5.6.7.8,lb.example,1.2.3.4"
        );
        let pending = json!({"spec": {"type": "LoadBalancer"}});
        assert_eq!(service_external_ip(&pending, now()), "<pending>");
        let name = json!({"spec": {"type": "ExternalName", "externalName": "db.example"}});
        assert_eq!(service_external_ip(&name, now()), "db.example");
        let cluster = json!({"spec": {"externalIPs": ["1.1.1.1", "2.2.2.2"]}});
        assert_eq!(service_external_ip(&cluster, now()), "1.1.1.1,2.2.2.2");
    }

    #[test]
    fn core_events() {
        let ev = json!({"metadata": {"name": "web.1"}, "type": "Warning", "reason": "BackOff",
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
            "source": {"component": "kubelet", "host": "n1"}, "message": " Back-off restarting \n",
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:58:00Z", "count": 7});
        assert_eq!(event_last_seen(&ev, now()), "2m");
        assert_eq!(event_first_seen(&ev, now()), "60m");
        assert_eq!(event_type(&ev, now()), "Warning");
        assert_eq!(event_reason(&ev, now()), "BackOff");
        assert_eq!(event_object(&ev, now()), "pod/web");
        assert_eq!(event_subobject(&ev, now()), "spec.containers{app}");
        assert_eq!(event_source(&ev, now()), "kubelet, n1");
        assert_eq!(event_message(&ev, now()), "Back-off restarting");
        assert_eq!(event_count(&ev, now()), 7);
    }

    #[test]
    fn newer_api_events() {
        let ev = json!({"eventTime": "2026-01-01T00:59:30.000000Z", "reportingController": "ctl",
            "reportingInstance": "ctl-1", "regarding": {"kind": "Node"}, "note": "hello",
            "series": {"count": 4, "lastObservedTime": "2026-01-01T00:59:50.000000Z"}});
        assert_eq!(event_first_seen(&ev, now()), "30s");
        assert_eq!(event_last_seen(&ev, now()), "10s");
        assert_eq!(event_count(&ev, now()), 4);
        assert_eq!(event_object(&ev, now()), "node");
        assert_eq!(event_source(&ev, now()), "ctl, ctl-1");
        assert_eq!(event_message(&ev, now()), "hello");
        let single = json!({"eventTime": "2026-01-01T00:59:30Z"});
        assert_eq!(event_count(&single, now()), 1);
        assert_eq!(event_last_seen(&single, now()), "30s");
        assert_eq!(event_source(&single, now()), "");
    }

    #[test]
    fn quotas_split_requests_and_limits() {
        let q = json!({"status": {
            "hard": {"pods": "10", "requests.cpu": "2", "limits.memory": "1Gi", "limits.cpu": "4"},
            "used": {"pods": "3", "limits.cpu": "1"}}});
        assert_eq!(quota_requests(&q, now()), "pods: 3/10, requests.cpu: 0/2");
        assert_eq!(
            quota_limits(&q, now()),
            "limits.cpu: 1/4, limits.memory: 0/1Gi"
        );
        assert_eq!(quota_limits(&json!({}), now()), "");
        let unwatched = json!({"spec": {"hard": {"pods": "4", "limits.cpu": "1"}}});
        assert_eq!(quota_requests(&unwatched, now()), "pods: 0/4");
        assert_eq!(quota_limits(&unwatched, now()), "limits.cpu: 0/1");
    }
}
