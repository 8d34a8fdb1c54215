//! The RBAC objects every cluster starts with, as kube-apiserver's bootstrap policy writes
//! them (for the kinds an embedded cluster serves): `cluster-admin`; the user-facing `admin`,
//! `edit` and `view`, aggregated from the ClusterRoles labelled
//! `rbac.authorization.k8s.io/aggregate-to-{admin,edit,view}` (the `system:aggregate-to-*`
//! ones below, and whatever an installer adds); `system:auth-delegator`; `system:discovery`,
//! `system:basic-user` and `system:public-info-viewer` with their bindings to every
//! authenticated caller; and the Role `kube-system/extension-apiserver-authentication-reader`.
//! Pure data.

use serde_json::{Value, json};

const BOOTSTRAP: &str = "kubernetes.io/bootstrapping";

fn role(name: &str, labels: Value, body: Value) -> Value {
    let mut labels = labels;
    labels[BOOTSTRAP] = json!("rbac-defaults");
    // kube-apiserver's reconciler keeps objects with this annotation up to date on start.
    let annotations = json!({"rbac.authorization.kubernetes.io/autoupdate": "true"});
    let mut role =
        json!({"metadata": {"name": name, "labels": labels, "annotations": annotations}});
    for (k, v) in body.as_object().into_iter().flatten() {
        role[k] = v.clone();
    }
    role
}

/// A user-facing role aggregated from the ClusterRoles labelled for it; `into` names the role it
/// is in turn aggregated into (`view` into `edit`, `edit` into `admin`), as kube-apiserver's
/// bootstrap labels them, so that admin ⊇ edit ⊇ view.
fn aggregating(name: &str, into: Option<&str>) -> Value {
    let selector = format!("rbac.authorization.k8s.io/aggregate-to-{name}");
    let labels = match into {
        Some(to) => json!({format!("rbac.authorization.k8s.io/aggregate-to-{to}"): "true"}),
        None => json!({}),
    };
    role(
        name,
        labels,
        json!({"aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {selector: "true"}}]},
            "rules": []}),
    )
}

fn aggregated_into(into: &str, rules: Value) -> Value {
    let label = format!("rbac.authorization.k8s.io/aggregate-to-{into}");
    role(
        &format!("system:aggregate-to-{into}"),
        json!({label: "true"}),
        json!({"rules": rules}),
    )
}

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
/// Every verb of a stored kind.
const ALL: &[&str] = gpustack_kube_rest::resource::ALL_VERBS;

/// A rule for `verbs` on `resources` of one API group.
fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
}

/// What `view` holds: read access to everything in a namespace but Secrets and the
/// subresources that reach into a Pod (kube-apiserver's `system:aggregate-to-view`).
fn view_rules() -> Value {
    json!([
        rule(
            "",
            &[
                "configmaps",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status"
            ],
            READ
        ),
        rule(
            "",
            &[
                "bindings",
                "events",
                "limitranges",
                "namespaces/status",
                "pods/log",
                "pods/status",
                "replicationcontrollers/status",
                "resourcequotas",
                "resourcequotas/status"
            ],
            READ
        ),
        rule("", &["namespaces"], READ),
        rule("discovery.k8s.io", &["endpointslices"], READ),
        rule(
            "apps",
            &[
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status"
            ],
            READ
        ),
        rule(
            "autoscaling",
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status"
            ],
            READ
        ),
        rule(
            "batch",
            &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
            READ
        ),
        rule(
            "extensions",
            &[
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "ingresses",
                "ingresses/status",
                "networkpolicies",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "replicationcontrollers/scale"
            ],
            READ
        ),
        rule(
            "policy",
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
            READ
        ),
        rule(
            "networking.k8s.io",
            &["ingresses", "ingresses/status", "networkpolicies"],
            READ
        ),
    ])
}

/// What `edit` adds to `view`: writes to the namespace's workloads and configuration,
/// Secrets, and the Pod subresources that run code in a Pod (kube-apiserver's
/// `system:aggregate-to-edit`; RBAC objects are left to `admin`).
fn edit_rules() -> Value {
    let pod_access = ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy"];
    let mut pods_write = vec!["pods"];
    pods_write.extend(pod_access);
    let mut reads = pod_access.to_vec();
    reads.extend(["secrets", "services/proxy"]);
    json!([
        rule("", &reads, READ),
        rule("", &["serviceaccounts"], &["impersonate"]),
        rule("", &pods_write, WRITE),
        rule("", &["pods/eviction"], &["create"]),
        rule(
            "",
            &[
                "configmaps",
                "events",
                "persistentvolumeclaims",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "secrets",
                "serviceaccounts",
                "services",
                "services/proxy"
            ],
            WRITE
        ),
        rule("", &["serviceaccounts/token"], &["create"]),
        rule(
            "apps",
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/scale"
            ],
            WRITE
        ),
        rule("autoscaling", &["horizontalpodautoscalers"], WRITE),
        rule("batch", &["cronjobs", "jobs"], WRITE),
        rule(
            "extensions",
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "ingresses",
                "networkpolicies",
                "replicasets",
                "replicasets/scale",
                "replicationcontrollers/scale"
            ],
            WRITE
        ),
        rule("policy", &["poddisruptionbudgets"], WRITE),
        rule(
            "networking.k8s.io",
            &["ingresses", "networkpolicies"],
            WRITE
        ),
        rule("coordination.k8s.io", &["leases"], ALL),
    ])
}

/// What `admin` adds to `edit`: the namespace's Roles and RoleBindings, and asking what
/// others may do there (kube-apiserver's `system:aggregate-to-admin`).
fn admin_rules() -> Value {
    json!([
        rule(
            "authorization.k8s.io",
            &["localsubjectaccessreviews"],
            &["create"]
        ),
        rule("rbac.authorization.k8s.io", &["rolebindings", "roles"], ALL),
    ])
}

/// The default ClusterRoles.
pub fn cluster_roles() -> Vec<Value> {
    vec![
        role(
            "cluster-admin",
            json!({}),
            json!({"rules": [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]}),
        ),
        aggregating("admin", None),
        aggregating("edit", Some("admin")),
        aggregating("view", Some("edit")),
        aggregated_into("view", view_rules()),
        aggregated_into("edit", edit_rules()),
        aggregated_into("admin", admin_rules()),
        role(
            "system:discovery",
            json!({}),
            json!({"rules": [{"nonResourceURLs": [
                "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]}),
        ),
        role(
            "system:public-info-viewer",
            json!({}),
            json!({"rules": [{"nonResourceURLs": [
                "/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]}),
        ),
        role(
            "system:basic-user",
            json!({}),
            json!({"rules": [
                {"apiGroups": ["authorization.k8s.io"],
                 "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ]}),
        ),
        role(
            "system:auth-delegator",
            json!({}),
            json!({"rules": [
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
            ]}),
        ),
    ]
}

/// The default ClusterRoleBindings: `cluster-admin` to `system:masters`, and what every
/// authenticated caller may do (which the authorizer also grants without them: these say so
/// to whoever reads the cluster's RBAC).
pub fn cluster_role_bindings() -> Vec<Value> {
    let group = |name: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name});
    let binding = |name: &str, groups: &[&str]| {
        role(
            name,
            json!({}),
            json!({
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": groups.iter().map(|g| group(g)).collect::<Vec<_>>(),
            }),
        )
    };
    vec![
        binding("cluster-admin", &["system:masters"]),
        binding("system:discovery", &["system:authenticated"]),
        binding("system:basic-user", &["system:authenticated"]),
        binding(
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ]
}

/// The default Roles, each with its namespace.
pub fn roles() -> Vec<(&'static str, Value)> {
    let mut reader = role(
        "extension-apiserver-authentication-reader",
        json!({}),
        json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"],
            "verbs": ["get", "list", "watch"],
            "resourceNames": ["extension-apiserver-authentication"]}]}),
    );
    reader["metadata"]["namespace"] = json!("kube-system");
    vec![("kube-system", reader)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::auth::rbac::aggregated_rules;

    #[test]
    fn admin_edit_and_view_aggregate_their_parts() {
        let roles = cluster_roles();
        let named = |n: &str| roles.iter().find(|r| r["metadata"]["name"] == n).unwrap();
        let view = aggregated_rules(named("view"), &roles).unwrap();
        assert!(
            view.iter()
                .any(|r| r["resources"].as_array().unwrap().contains(&json!("pods")))
        );
        let edit = aggregated_rules(named("edit"), &roles).unwrap();
        assert!(edit.iter().any(|r| r["verbs"] == json!(WRITE)));
        // Names are unique.
        let mut names: Vec<&str> = roles
            .iter()
            .map(|r| r["metadata"]["name"].as_str().unwrap())
            .collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), roles.len());
    }

    /// The rules of every aggregated role once aggregation has settled (what the aggregation
    /// controller reaches by re-running on each change).
    fn settled() -> Vec<Value> {
        let mut roles = cluster_roles();
        for _ in 0..roles.len() {
            let snapshot = roles.clone();
            for r in roles.iter_mut() {
                if let Some(rules) = aggregated_rules(r, &snapshot) {
                    r["rules"] = Value::Array(rules);
                }
            }
        }
        roles
    }

    #[test]
    fn admin_covers_edit_covers_view() {
        let roles = settled();
        let rules = |n: &str| -> Vec<Value> {
            let r = roles.iter().find(|r| r["metadata"]["name"] == n).unwrap();
            r["rules"].as_array().unwrap().clone()
        };
        let (admin, edit, view) = (rules("admin"), rules("edit"), rules("view"));
        use crate::api::auth::escalation::uncovered;
        assert_eq!(uncovered(&edit, &view), Vec::<Value>::new(), "edit ⊇ view");
        assert_eq!(
            uncovered(&admin, &edit),
            Vec::<Value>::new(),
            "admin ⊇ edit"
        );
        // The case that was wrong: edit and admin may read the pods they may create.
        let get_pods =
            [json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "create"]})];
        assert!(uncovered(&edit, &get_pods).is_empty());
        assert!(uncovered(&admin, &get_pods).is_empty());
        // And view may not write.
        assert!(
            !uncovered(
                &view,
                &[json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]})]
            )
            .is_empty()
        );
    }

    #[test]
    fn every_binding_names_a_default_role() {
        let roles = cluster_roles();
        for b in cluster_role_bindings() {
            let name = &b["roleRef"]["name"];
            assert!(roles.iter().any(|r| r["metadata"]["name"] == *name), "{b}");
            assert!(!b["subjects"].as_array().unwrap().is_empty());
        }
    }
}
