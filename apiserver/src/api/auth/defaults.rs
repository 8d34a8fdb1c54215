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
    let mut role = json!({"metadata": {"name": name, "labels": labels}});
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

/// The default ClusterRoles.
pub fn cluster_roles() -> Vec<Value> {
    let core_read = json!([
        "configmaps",
        "endpoints",
        "persistentvolumeclaims",
        "pods",
        "pods/status",
        "replicationcontrollers",
        "services",
        "services/status",
        "serviceaccounts",
        "events",
        "namespaces",
        "namespaces/status",
        "limitranges",
        "resourcequotas"
    ]);
    let apps = json!([
        "deployments",
        "deployments/status",
        "daemonsets",
        "daemonsets/status",
        "replicasets",
        "replicasets/status",
        "statefulsets",
        "statefulsets/status",
        "deployments/scale",
        "replicasets/scale",
        "statefulsets/scale"
    ]);
    let batch = json!(["jobs", "jobs/status", "cronjobs", "cronjobs/status"]);
    let core_write = json!([
        "configmaps",
        "persistentvolumeclaims",
        "pods",
        "replicationcontrollers",
        "services",
        "serviceaccounts",
        "secrets"
    ]);
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
        aggregated_into(
            "view",
            json!([
                {"apiGroups": [""], "resources": core_read, "verbs": READ},
                {"apiGroups": ["apps"], "resources": apps, "verbs": READ},
                {"apiGroups": ["batch"], "resources": batch, "verbs": READ},
            ]),
        ),
        aggregated_into(
            "edit",
            json!([
                {"apiGroups": [""], "resources": core_write, "verbs": WRITE},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": READ},
                {"apiGroups": [""], "resources": ["serviceaccounts/token", "pods/eviction"], "verbs": ["create"]},
                {"apiGroups": ["apps"], "resources": ["deployments", "daemonsets", "replicasets", "statefulsets",
                    "deployments/scale", "replicasets/scale", "statefulsets/scale"], "verbs": WRITE},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": WRITE},
                {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": WRITE},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            ]),
        ),
        aggregated_into(
            "admin",
            json!([
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["*"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]},
            ]),
        ),
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
