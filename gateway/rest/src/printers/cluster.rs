//! Cluster-level and API kinds: RBAC bindings, APIService, webhook configurations,
//! PriorityClass, Lease, CSIDriver, CSINode, CertificateSigningRequest, Ingress, IngressClass,
//! NetworkPolicy.

use jiff::Timestamp;
use serde_json::Value;

use super::core::load_balancer_points;
use super::format::{
    condition, count, human_duration, int_at, items, len_at, non_empty_or, or_none,
    selector_or_none, text,
};
use super::{AGE, Col, col, wide};

/// The columns `kubectl get` shows for RoleBindings and ClusterRoleBindings, as kube-apiserver prints them.
pub const ROLE_BINDING: &[Col] = &[
    col("Role", "string", binding_role),
    AGE,
    wide("Users", "string", binding_users),
    wide("Groups", "string", binding_groups),
    wide("ServiceAccounts", "string", binding_service_accounts),
];
/// The columns `kubectl get` shows for APIServices, as kube-apiserver prints them.
pub const API_SERVICE: &[Col] = &[
    col("Service", "string", api_service_backend),
    col("Available", "string", api_service_available),
    AGE,
];
/// The columns `kubectl get` shows for webhook configurations, as kube-apiserver prints them.
pub const WEBHOOKS: &[Col] = &[col("Webhooks", "integer", webhook_count), AGE];
/// The columns `kubectl get` shows for PriorityClasses, as kube-apiserver prints them.
pub const PRIORITY_CLASS: &[Col] = &[
    col("Value", "integer", priority_value),
    col("Global-Default", "boolean", priority_global_default),
    AGE,
    col("PreemptionPolicy", "string", priority_preemption_policy),
];
/// The columns `kubectl get` shows for Leases, as kube-apiserver prints them.
pub const LEASE: &[Col] = &[col("Holder", "string", lease_holder), AGE];
/// The columns `kubectl get` shows for CSIDrivers, as kube-apiserver prints them.
pub const CSI_DRIVER: &[Col] = &[
    col("AttachRequired", "boolean", csi_attach_required),
    col("PodInfoOnMount", "boolean", csi_pod_info_on_mount),
    col("StorageCapacity", "boolean", csi_storage_capacity),
    col("TokenRequests", "string", csi_token_requests),
    col("RequiresRepublish", "boolean", csi_requires_republish),
    col("Modes", "string", csi_modes),
    AGE,
];
/// The columns `kubectl get` shows for CSINodes, as kube-apiserver prints them.
pub const CSI_NODE: &[Col] = &[col("Drivers", "integer", csi_node_drivers), AGE];
/// Certificate requests show their age before the request's details.
pub const CERTIFICATE_SIGNING_REQUEST: &[Col] = &[
    AGE,
    col("SignerName", "string", csr_signer),
    col("Requestor", "string", csr_requestor),
    col("RequestedDuration", "string", csr_requested_duration),
    col("Condition", "string", csr_condition),
];
/// The columns `kubectl get` shows for Ingresses, as kube-apiserver prints them.
pub const INGRESS: &[Col] = &[
    col("Class", "string", ingress_class),
    col("Hosts", "string", ingress_hosts),
    col("Address", "string", ingress_address),
    col("Ports", "string", ingress_ports),
    AGE,
];
/// The columns `kubectl get` shows for NetworkPolicies, as kube-apiserver prints them.
pub const NETWORK_POLICY: &[Col] = &[col("Pod-Selector", "string", network_policy_pods), AGE];
/// The columns `kubectl get` shows for IngressClasses, as kube-apiserver prints them.
pub const INGRESS_CLASS: &[Col] = &[
    col("Controller", "string", ingress_class_controller),
    col("Parameters", "string", ingress_class_parameters),
    AGE,
];

/// `Kind/name` of the bound role.
fn binding_role(b: &Value, _: Timestamp) -> Value {
    format!("{}/{}", text(b, "/roleRef/kind"), text(b, "/roleRef/name")).into()
}

/// The binding's subjects of `kind`, comma-separated; service accounts as `namespace/name`.
fn subjects(b: &Value, kind: &str) -> String {
    let names: Vec<String> = items(b, "/subjects")
        .iter()
        .filter(|s| text(s, "/kind") == kind)
        .map(|s| match kind {
            "ServiceAccount" => format!("{}/{}", text(s, "/namespace"), text(s, "/name")),
            _ => text(s, "/name").to_owned(),
        })
        .collect();
    names.join(", ")
}

fn binding_users(b: &Value, _: Timestamp) -> Value {
    subjects(b, "User").into()
}

fn binding_groups(b: &Value, _: Timestamp) -> Value {
    subjects(b, "Group").into()
}

fn binding_service_accounts(b: &Value, _: Timestamp) -> Value {
    subjects(b, "ServiceAccount").into()
}

/// `namespace/name` of the Service an APIService proxies to, or `Local`.
fn api_service_backend(svc: &Value, _: Timestamp) -> Value {
    match svc.pointer("/spec/service") {
        Some(s) if !s.is_null() => format!("{}/{}", text(s, "/namespace"), text(s, "/name")).into(),
        _ => "Local".into(),
    }
}

/// The Available condition's status, with its reason when not true (`False (MissingEndpoints)`).
fn api_service_available(svc: &Value, _: Timestamp) -> Value {
    let Some(c) = condition(svc, "Available") else {
        return "Unknown".into();
    };
    match (text(c, "/status"), text(c, "/reason")) {
        ("True", _) => "True".into(),
        (status, "") => status.into(),
        (status, reason) => format!("{status} ({reason})").into(),
    }
}

fn webhook_count(cfg: &Value, _: Timestamp) -> Value {
    len_at(cfg, "/webhooks").into()
}

fn priority_value(pc: &Value, _: Timestamp) -> Value {
    count(pc, "/value").into()
}

fn priority_global_default(pc: &Value, _: Timestamp) -> Value {
    let global = pc.get("globalDefault").and_then(Value::as_bool);
    global.unwrap_or(false).into()
}

fn priority_preemption_policy(pc: &Value, _: Timestamp) -> Value {
    // The API defaults an unset policy to preempting lower priorities.
    non_empty_or(text(pc, "/preemptionPolicy"), "PreemptLowerPriority").into()
}

fn lease_holder(lease: &Value, _: Timestamp) -> Value {
    text(lease, "/spec/holderIdentity").into()
}

/// A boolean setting of a CSI driver, or the API's default for it when unset.
fn csi_flag(driver: &Value, ptr: &str, default: bool) -> Value {
    let set = driver.pointer(ptr);
    set.and_then(Value::as_bool).unwrap_or(default).into()
}

fn csi_attach_required(d: &Value, _: Timestamp) -> Value {
    csi_flag(d, "/spec/attachRequired", true)
}

fn csi_pod_info_on_mount(d: &Value, _: Timestamp) -> Value {
    csi_flag(d, "/spec/podInfoOnMount", false)
}

fn csi_storage_capacity(d: &Value, _: Timestamp) -> Value {
    csi_flag(d, "/spec/storageCapacity", false)
}

fn csi_requires_republish(d: &Value, _: Timestamp) -> Value {
    csi_flag(d, "/spec/requiresRepublish", false)
}

/// The audiences of the driver's token requests, or `<unset>`.
fn csi_token_requests(d: &Value, _: Timestamp) -> Value {
    match d.pointer("/spec/tokenRequests").and_then(Value::as_array) {
        None => "<unset>".into(),
        Some(requests) => requests
            .iter()
            .map(|r| text(r, "/audience"))
            .collect::<Vec<_>>()
            .join(",")
            .into(),
    }
}

fn csi_modes(d: &Value, _: Timestamp) -> Value {
    let modes: Vec<&str> = items(d, "/spec/volumeLifecycleModes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // `Persistent` is what the API defaults an empty list to.
    if modes.is_empty() {
        return "Persistent".into();
    }
    modes.join(",").into()
}

fn csi_node_drivers(n: &Value, _: Timestamp) -> Value {
    len_at(n, "/spec/drivers").into()
}

fn csr_signer(csr: &Value, _: Timestamp) -> Value {
    or_none(text(csr, "/spec/signerName")).into()
}

fn csr_requestor(csr: &Value, _: Timestamp) -> Value {
    text(csr, "/spec/username").into()
}

fn csr_requested_duration(csr: &Value, _: Timestamp) -> Value {
    match int_at(csr, "/spec/expirationSeconds") {
        Some(secs) => human_duration(secs).into(),
        None => "<none>".into(),
    }
}

/// `Approved`, `Denied` or `Pending`, then `,Failed` and `,Issued` as they apply.
fn csr_condition(csr: &Value, _: Timestamp) -> Value {
    let has = |kind: &str| condition(csr, kind).is_some();
    let mut status = if has("Denied") {
        "Denied".to_owned()
    } else if has("Approved") {
        "Approved".to_owned()
    } else {
        "Pending".to_owned()
    };
    if has("Failed") {
        status.push_str(",Failed");
    }
    if !text(csr, "/status/certificate").is_empty() {
        status.push_str(",Issued");
    }
    status.into()
}

fn ingress_class(ing: &Value, _: Timestamp) -> Value {
    or_none(text(ing, "/spec/ingressClassName")).into()
}

/// The first three hosts the rules name, then `+ N more...` when rules follow them; `*` when
/// no rule names a host.
fn ingress_hosts(ing: &Value, _: Timestamp) -> Value {
    const SHOWN: usize = 3;
    let rules = items(ing, "/spec/rules");
    let mut hosts = Vec::new();
    let mut more = false;
    for rule in rules {
        if hosts.len() == SHOWN {
            more = true;
            break;
        }
        match text(rule, "/host") {
            "" => {}
            host => hosts.push(host),
        }
    }
    if hosts.is_empty() {
        return "*".into();
    }
    let shown = hosts.join(",");
    if more {
        format!("{shown} + {} more...", rules.len() - SHOWN).into()
    } else {
        shown.into()
    }
}

fn ingress_address(ing: &Value, _: Timestamp) -> Value {
    load_balancer_points(ing.get("status").unwrap_or(&Value::Null))
        .join(",")
        .into()
}

/// `80`, and `443` when the ingress terminates TLS.
fn ingress_ports(ing: &Value, _: Timestamp) -> Value {
    if items(ing, "/spec/tls").is_empty() {
        "80".into()
    } else {
        "80, 443".into()
    }
}

/// The policy's pod selector, `<none>` when it selects every Pod (kubectl's rendering).
fn network_policy_pods(np: &Value, _: Timestamp) -> Value {
    selector_or_none(np.pointer("/spec/podSelector")).into()
}

fn ingress_class_controller(ic: &Value, _: Timestamp) -> Value {
    text(ic, "/spec/controller").into()
}

/// `Kind.group/name` of the class's parameters, or `<none>`.
fn ingress_class_parameters(ic: &Value, _: Timestamp) -> Value {
    let Some(p) = ic.pointer("/spec/parameters").filter(|p| !p.is_null()) else {
        return "<none>".into();
    };
    let kind = match p.get("apiGroup").and_then(Value::as_str) {
        None => text(p, "/kind").to_owned(),
        Some(group) => format!("{}.{group}", text(p, "/kind")),
    };
    format!("{kind}/{}", text(p, "/name")).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-01-01T01:00:00Z".parse().unwrap()
    }

    #[test]
    fn bindings_show_role_and_subjects() {
        let b = json!({"roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": [
            {"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "namespace": "kube-system", "name": "ctl"}]});
        assert_eq!(binding_role(&b, now()), "ClusterRole/view");
        assert_eq!(binding_users(&b, now()), "alice, bob");
        assert_eq!(binding_groups(&b, now()), "devs");
        assert_eq!(binding_service_accounts(&b, now()), "kube-system/ctl");
        assert_eq!(binding_users(&json!({}), now()), "");
    }

    #[test]
    fn api_services() {
        let local = json!({"spec": {}, "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}});
        assert_eq!(api_service_backend(&local, now()), "Local");
        assert_eq!(api_service_available(&local, now()), "True");
        let remote = json!({"spec": {"service": {"namespace": "gpustack", "name": "worker"}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]}});
        assert_eq!(api_service_backend(&remote, now()), "gpustack/worker");
        assert_eq!(
            api_service_available(&remote, now()),
            "False (MissingEndpoints)"
        );
        assert_eq!(api_service_available(&json!({}), now()), "Unknown");
    }

    #[test]
    fn webhooks_and_csi_nodes_count() {
        let cfg = json!({"webhooks": [{"name": "a"}, {"name": "b"}]});
        assert_eq!(webhook_count(&cfg, now()), 2);
        assert_eq!(webhook_count(&json!({}), now()), 0);
        let node = json!({"spec": {"drivers": [{"name": "model.csi.gpustack.ai"}]}});
        assert_eq!(csi_node_drivers(&node, now()), 1);
    }

    #[test]
    fn priority_classes() {
        let pc = json!({"value": 1000, "globalDefault": true, "preemptionPolicy": "Never"});
        assert_eq!(priority_value(&pc, now()), 1000);
        assert_eq!(priority_global_default(&pc, now()), true);
        assert_eq!(priority_preemption_policy(&pc, now()), "Never");
        let bare = json!({"value": 5});
        assert_eq!(priority_global_default(&bare, now()), false);
        assert_eq!(
            priority_preemption_policy(&bare, now()),
            "PreemptLowerPriority"
        );
    }

    #[test]
    fn leases_show_their_holder() {
        let lease = json!({"spec": {"holderIdentity": "worker-0"}});
        assert_eq!(lease_holder(&lease, now()), "worker-0");
        assert_eq!(lease_holder(&json!({}), now()), "");
    }

    #[test]
    fn csi_drivers() {
        let d = json!({"spec": {"attachRequired": false, "podInfoOnMount": true,
            "tokenRequests": [{"audience": "a"}, {"audience": "b"}],
            "volumeLifecycleModes": ["Persistent", "Ephemeral"]}});
        assert_eq!(csi_attach_required(&d, now()), false);
        assert_eq!(csi_pod_info_on_mount(&d, now()), true);
        assert_eq!(csi_storage_capacity(&d, now()), false);
        assert_eq!(csi_requires_republish(&d, now()), false);
        assert_eq!(csi_token_requests(&d, now()), "a,b");
        assert_eq!(csi_modes(&d, now()), "Persistent,Ephemeral");
        let bare = json!({"spec": {}});
        assert_eq!(csi_attach_required(&bare, now()), true);
        assert_eq!(csi_token_requests(&bare, now()), "<unset>");
        assert_eq!(csi_modes(&bare, now()), "Persistent");
    }

    #[test]
    fn certificate_signing_requests() {
        let csr = json!({"spec": {"signerName": "kubernetes.io/kube-apiserver-client",
                "username": "alice", "expirationSeconds": 86400},
            "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "LS0t"}});
        assert_eq!(
            csr_signer(&csr, now()),
            "kubernetes.io/kube-apiserver-client"
        );
        assert_eq!(csr_requestor(&csr, now()), "alice");
        assert_eq!(csr_requested_duration(&csr, now()), "24h");
        assert_eq!(csr_condition(&csr, now()), "Approved,Issued");
        let bare = json!({"spec": {}});
        assert_eq!(csr_signer(&bare, now()), "<none>");
        assert_eq!(csr_requested_duration(&bare, now()), "<none>");
        assert_eq!(csr_condition(&bare, now()), "Pending");
        let denied = json!({"status": {"conditions": [{"type": "Denied"}, {"type": "Failed"}]}});
        assert_eq!(csr_condition(&denied, now()), "Denied,Failed");
    }

    #[test]
    fn ingresses() {
        let ing = json!({"spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a.example"]}],
                "rules": [{"host": "a.example"}, {"host": "b.example"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}});
        assert_eq!(ingress_class(&ing, now()), "nginx");
        assert_eq!(ingress_hosts(&ing, now()), "a.example,b.example");
        assert_eq!(ingress_address(&ing, now()), "192.0.2.1");
        assert_eq!(ingress_ports(&ing, now()), "80, 443");
        let bare = json!({"spec": {"rules": [{"http": {}}]}});
        assert_eq!(ingress_class(&bare, now()), "<none>");
        assert_eq!(ingress_hosts(&bare, now()), "*");
        assert_eq!(ingress_address(&bare, now()), "");
        assert_eq!(ingress_ports(&bare, now()), "80");
        let many = json!({"spec": {"rules": [{"host": "a"}, {"host": "b"}, {"host": "c"}, {"host": "d"}, {}]}});
        assert_eq!(ingress_hosts(&many, now()), "a,b,c + 2 more...");
        let hostless_first =
            json!({"spec": {"rules": [{}, {"host": "a"}, {"host": "b"}, {"host": "c"}]}});
        assert_eq!(ingress_hosts(&hostless_first, now()), "a,b,c");
    }

    #[test]
    fn ingress_classes() {
        let ic = json!({"spec": {"controller": "example.com/ingress",
            "parameters": {"apiGroup": "k8s.example.com", "kind": "Params", "name": "p1"}}});
        assert_eq!(ingress_class_controller(&ic, now()), "example.com/ingress");
        assert_eq!(
            ingress_class_parameters(&ic, now()),
            "Params.k8s.example.com/p1"
        );
        let core = json!({"spec": {"parameters": {"kind": "ConfigMap", "name": "cfg"}}});
        assert_eq!(ingress_class_parameters(&core, now()), "ConfigMap/cfg");
        assert_eq!(
            ingress_class_parameters(&json!({"spec": {}}), now()),
            "<none>"
        );
    }
}
