//! RBAC as kube-apiserver evaluates it, as pure functions over the stored Roles, ClusterRoles,
//! RoleBindings and ClusterRoleBindings: a request is allowed when a binding whose subjects
//! include the user (by name, group or ServiceAccount) refers to a role with a rule that covers
//! it. ClusterRoleBindings apply everywhere; RoleBindings only inside their namespace (and never
//! to non-resource URLs). `system:masters` may do anything. Every authenticated user also has
//! what kube-apiserver's bootstrap roles `system:discovery`, `system:basic-user` and
//! `system:public-info-viewer` grant to `system:authenticated`.

use serde_json::Value;

use super::{AUTHENTICATED, UserInfo};

/// What a request asks to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attributes {
    /// A request for a resource (or a collection of one).
    Resource {
        /// The Kubernetes verb (`get`, `list`, `create`, ...).
        verb: String,
        /// The API group (empty: the core group).
        group: String,
        /// The resource (plural).
        resource: String,
        /// The subresource (empty: none).
        subresource: String,
        /// Empty for cluster-scoped requests.
        namespace: String,
        /// Empty for lists, creates and collections.
        name: String,
    },
    /// A request for a path that names no resource (discovery, health, `/version`).
    NonResource {
        /// The HTTP verb in lower case (`get`, `post`, ...).
        verb: String,
        /// The request's path.
        path: String,
    },
}

/// The stored RBAC objects of one cluster.
#[derive(Clone, Debug, Default)]
pub struct Policy<'a> {
    /// Every ClusterRole of the cluster.
    pub cluster_roles: &'a [Value],
    /// Every ClusterRoleBinding of the cluster.
    pub cluster_role_bindings: &'a [Value],
    /// Every Role, of every namespace.
    pub roles: &'a [Value],
    /// Every RoleBinding, of every namespace.
    pub role_bindings: &'a [Value],
}

/// The answer, with kube-apiserver's reason text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may go ahead.
    pub allowed: bool,
    /// Why, as a SubjectAccessReview's `reason` says it (the binding that allowed it).
    pub reason: String,
}

/// The non-resource URLs every authenticated user may get (`system:discovery`,
/// `system:public-info-viewer`).
const DISCOVERY_URLS: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/healthz/*",
    "/livez",
    "/livez/*",
    "/readyz",
    "/readyz/*",
    "/version",
    "/version/",
    "/openapi",
    "/openapi/*",
];

/// The self-reviews every authenticated user may create (`system:basic-user`).
const SELF_REVIEWS: &[(&str, &str)] = &[
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
];

fn strings(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

fn has(list: &Value, want: &str) -> bool {
    strings(list).any(|s| s == "*" || s == want)
}

/// Whether `rule` (a PolicyRule) covers `a`.
pub fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    match a {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            if !has(&rule["verbs"], verb) || !has(&rule["apiGroups"], group) {
                return false;
            }
            let combined = if subresource.is_empty() {
                resource.clone()
            } else {
                format!("{resource}/{subresource}")
            };
            let resource_ok = strings(&rule["resources"]).any(|r| {
                r == "*"
                    || r == combined
                    || (!subresource.is_empty()
                        && r.strip_prefix("*/") == Some(subresource.as_str()))
            });
            let names: Vec<&str> = strings(&rule["resourceNames"]).collect();
            resource_ok && (names.is_empty() || names.contains(&name.as_str()))
        }
        Attributes::NonResource { verb, path } => {
            has(&rule["verbs"], verb)
                && strings(&rule["nonResourceURLs"]).any(|u| {
                    u == "*"
                        || u == path
                        || u.strip_suffix('*').is_some_and(|p| path.starts_with(p))
                })
        }
    }
}

/// Whether a binding's subjects include `user` (`namespace`: the RoleBinding's own).
fn binds(binding: &Value, user: &UserInfo) -> bool {
    let own_ns = binding["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| {
            let name = s["name"].as_str().unwrap_or_default();
            match s["kind"].as_str() {
                Some("User") => name == user.username,
                Some("Group") => user.groups.iter().any(|g| g == name),
                Some("ServiceAccount") => {
                    let ns = s["namespace"]
                        .as_str()
                        .filter(|n| !n.is_empty())
                        .unwrap_or(own_ns);
                    user.username == format!("system:serviceaccount:{ns}:{name}")
                }
                _ => false,
            }
        })
}

fn named<'a>(objs: &'a [Value], name: &str, namespace: Option<&str>) -> Option<&'a Value> {
    objs.iter().find(|o| {
        o["metadata"]["name"] == name && namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns)
    })
}

/// The rules `binding` grants (empty when its role does not exist).
fn granted<'a>(policy: &Policy<'a>, binding: &Value, namespace: Option<&str>) -> &'a [Value] {
    let role_ref = &binding["roleRef"];
    let name = role_ref["name"].as_str().unwrap_or_default();
    let role = match role_ref["kind"].as_str() {
        Some("ClusterRole") => named(policy.cluster_roles, name, None),
        Some("Role") => namespace.and_then(|ns| named(policy.roles, name, Some(ns))),
        _ => None,
    };
    role.and_then(|r| r["rules"].as_array())
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Which binding and role allowed, in kube-apiserver's words.
fn because(binding: &Value, kind: &str) -> String {
    let role = &binding["roleRef"];
    let where_ = match binding["metadata"]["namespace"].as_str() {
        Some(ns) => format!(" in namespace \"{ns}\""),
        None => String::new(),
    };
    format!(
        "RBAC: allowed by {kind} \"{}\" of {} \"{}\"{where_}",
        binding["metadata"]["name"].as_str().unwrap_or_default(),
        role["kind"].as_str().unwrap_or_default(),
        role["name"].as_str().unwrap_or_default(),
    )
}

/// Whether the bootstrap roles bound to every authenticated user allow `a`.
fn bootstrap_allows(user: &UserInfo, a: &Attributes) -> bool {
    if !user.groups.iter().any(|g| g == AUTHENTICATED) {
        return false;
    }
    match a {
        Attributes::NonResource { verb, path } => {
            (verb == "get" || verb == "head")
                && DISCOVERY_URLS.iter().any(|u| match u.strip_suffix('*') {
                    Some(prefix) => path.starts_with(prefix),
                    None => path == u,
                })
        }
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            ..
        } => {
            verb == "create"
                && subresource.is_empty()
                && SELF_REVIEWS
                    .iter()
                    .any(|(g, r)| g == group && r == resource)
        }
    }
}

/// Decides `a` for `user` under `policy`.
pub fn authorize(policy: &Policy<'_>, user: &UserInfo, a: &Attributes) -> Decision {
    if user.is_master() {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    if bootstrap_allows(user, a) {
        return Decision {
            allowed: true,
            reason: "RBAC: allowed to every authenticated user".into(),
        };
    }
    for b in policy
        .cluster_role_bindings
        .iter()
        .filter(|b| binds(b, user))
    {
        if granted(policy, b, None).iter().any(|r| rule_allows(r, a)) {
            return Decision {
                allowed: true,
                reason: because(b, "ClusterRoleBinding"),
            };
        }
    }
    if let Attributes::Resource { namespace, .. } = a
        && !namespace.is_empty()
    {
        let in_ns = policy
            .role_bindings
            .iter()
            .filter(|b| b["metadata"]["namespace"] == namespace.as_str() && binds(b, user));
        for b in in_ns {
            if granted(policy, b, Some(namespace))
                .iter()
                .any(|r| rule_allows(r, a))
            {
                return Decision {
                    allowed: true,
                    reason: because(b, "RoleBinding"),
                };
            }
        }
    }
    Decision {
        allowed: false,
        reason: String::new(),
    }
}

/// kube-apiserver's 403 message for a denied request.
pub fn forbidden_message(user: &UserInfo, a: &Attributes) -> String {
    match a {
        Attributes::NonResource { verb, path } => {
            gpustack_kube_rest::status::forbidden_path_message(&user.username, verb, path)
        }
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
        } => gpustack_kube_rest::status::ResourceRequest {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
        }
        .forbidden_message(&user.username),
    }
}

/// The rules an aggregated ClusterRole (one with `aggregationRule.clusterRoleSelectors`) gets:
/// those of every other ClusterRole whose labels one of the selectors matches, in name order,
/// without repeats; `None` for a ClusterRole that aggregates nothing.
pub fn aggregated_rules(role: &Value, cluster_roles: &[Value]) -> Option<Vec<Value>> {
    let selectors = role["aggregationRule"]["clusterRoleSelectors"].as_array()?;
    let mut sources: Vec<&Value> = cluster_roles
        .iter()
        .filter(|r| r["metadata"]["name"] != role["metadata"]["name"])
        .filter(|r| {
            let labels = gpustack_kube_rest::selectors::labels_of(r);
            selectors
                .iter()
                .any(|s| crate::api::admission::matching::selector_matches(s, &labels))
        })
        .collect();
    sources.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    let mut rules: Vec<Value> = Vec::new();
    for r in sources
        .iter()
        .flat_map(|r| r["rules"].as_array().into_iter().flatten())
    {
        if !rules.contains(r) {
            rules.push(r.clone());
        }
    }
    Some(rules)
}

/// The rules `user` holds in `namespace` (cluster-wide ones included), for
/// SelfSubjectRulesReview: (resource rules, non-resource rules).
pub fn rules_of(policy: &Policy<'_>, user: &UserInfo, namespace: &str) -> (Vec<Value>, Vec<Value>) {
    use serde_json::json;
    if user.is_master() {
        return (
            vec![json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
            vec![json!({"verbs": ["*"], "nonResourceURLs": ["*"]})],
        );
    }
    let mut all: Vec<Value> = Vec::new();
    if user.groups.iter().any(|g| g == AUTHENTICATED) {
        for (g, r) in SELF_REVIEWS {
            all.push(json!({"verbs": ["create"], "apiGroups": [g], "resources": [r]}));
        }
        all.push(json!({"verbs": ["get"], "nonResourceURLs": DISCOVERY_URLS}));
    }
    for b in policy
        .cluster_role_bindings
        .iter()
        .filter(|b| binds(b, user))
    {
        all.extend(granted(policy, b, None).iter().cloned());
    }
    let in_ns = policy
        .role_bindings
        .iter()
        .filter(|b| b["metadata"]["namespace"] == namespace && binds(b, user));
    for b in in_ns {
        // Non-resource rules of a RoleBinding's role grant nothing.
        let rules = granted(policy, b, Some(namespace));
        all.extend(
            rules
                .iter()
                .filter(|r| r.get("nonResourceURLs").is_none())
                .cloned(),
        );
    }
    all.into_iter()
        .partition(|r| r.get("nonResourceURLs").is_none())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sa(ns: &str, name: &str) -> UserInfo {
        UserInfo {
            username: format!("system:serviceaccount:{ns}:{name}"),
            uid: String::new(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                AUTHENTICATED.into(),
            ],
            extra: Default::default(),
        }
    }

    fn res(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
        Attributes::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    #[test]
    fn rules_match_as_kubernetes_matches_them() {
        let rule =
            json!({"apiGroups": [""], "resources": ["pods", "*/status"], "verbs": ["get", "list"]});
        assert!(rule_allows(&rule, &res("get", "", "pods", "", "a", "p")));
        assert!(rule_allows(
            &rule,
            &res("list", "", "nodes", "status", "", "")
        ));
        assert!(!rule_allows(
            &rule,
            &res("get", "", "pods", "log", "a", "p")
        ));
        assert!(!rule_allows(
            &rule,
            &res("delete", "", "pods", "", "a", "p")
        ));
        assert!(!rule_allows(
            &rule,
            &res("get", "apps", "pods", "", "a", "p")
        ));
        let named = json!({"apiGroups": ["*"], "resources": ["configmaps"], "verbs": ["*"], "resourceNames": ["one"]});
        assert!(rule_allows(
            &named,
            &res("update", "", "configmaps", "", "a", "one")
        ));
        assert!(!rule_allows(
            &named,
            &res("list", "", "configmaps", "", "a", "")
        ));
        let urls = json!({"nonResourceURLs": ["/metrics", "/logs/*"], "verbs": ["get"]});
        let get = |p: &str| Attributes::NonResource {
            verb: "get".into(),
            path: p.into(),
        };
        assert!(rule_allows(&urls, &get("/metrics")));
        assert!(rule_allows(&urls, &get("/logs/a/b")));
        assert!(!rule_allows(&urls, &get("/metricsx")));
    }

    #[test]
    fn bindings_grant_in_their_scope() {
        let roles = [json!({"metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})];
        let rbs = [json!({"metadata": {"name": "b", "namespace": "team"},
            "roleRef": {"kind": "ClusterRole", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "team"}]})];
        let policy = Policy {
            cluster_roles: &roles,
            role_bindings: &rbs,
            ..Default::default()
        };
        let bot = sa("team", "bot");
        let d = authorize(&policy, &bot, &res("list", "", "pods", "", "team", ""));
        assert!(d.allowed, "{d:?}");
        assert!(d.reason.contains("RoleBinding"));
        assert!(!authorize(&policy, &bot, &res("list", "", "pods", "", "other", "")).allowed);
        assert!(!authorize(&policy, &bot, &res("list", "", "pods", "", "", "")).allowed);
        assert!(
            !authorize(
                &policy,
                &sa("team", "other"),
                &res("list", "", "pods", "", "team", "")
            )
            .allowed
        );
        // Discovery and self-reviews for everyone authenticated; masters for everything.
        let disc = Attributes::NonResource {
            verb: "get".into(),
            path: "/apis/apps/v1".into(),
        };
        assert!(authorize(&policy, &bot, &disc).allowed);
        assert!(
            authorize(
                &policy,
                &bot,
                &res(
                    "create",
                    "authorization.k8s.io",
                    "selfsubjectaccessreviews",
                    "",
                    "",
                    ""
                )
            )
            .allowed
        );
        assert!(
            !authorize(
                &policy,
                &bot,
                &res(
                    "create",
                    "authorization.k8s.io",
                    "subjectaccessreviews",
                    "",
                    "",
                    ""
                )
            )
            .allowed
        );
        assert!(
            authorize(
                &policy,
                &UserInfo::admin(),
                &res("delete", "x", "y", "", "", "z")
            )
            .allowed
        );
        // A group binding, cluster-wide.
        let crbs = [json!({"metadata": {"name": "all-sa"},
            "roleRef": {"kind": "ClusterRole", "name": "reader"},
            "subjects": [{"kind": "Group", "name": "system:serviceaccounts"}]})];
        let policy = Policy {
            cluster_roles: &roles,
            cluster_role_bindings: &crbs,
            ..Default::default()
        };
        assert!(authorize(&policy, &bot, &res("get", "", "pods", "", "x", "p")).allowed);
    }

    #[test]
    fn denials_read_as_kube_apiservers() {
        let bot = sa("team", "bot");
        assert_eq!(
            forbidden_message(&bot, &res("list", "", "pods", "", "default", "")),
            "pods is forbidden: User \"system:serviceaccount:team:bot\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        assert_eq!(
            forbidden_message(&bot, &res("get", "apps", "deployments", "scale", "", "web")),
            "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:team:bot\" cannot get resource \"deployments/scale\" in API group \"apps\" at the cluster scope"
        );
    }

    #[test]
    fn aggregated_roles_collect_selected_rules() {
        let roles = [
            json!({"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"to-agg": "true"}}]}}),
            json!({"metadata": {"name": "b", "labels": {"to-agg": "true"}}, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}),
            json!({"metadata": {"name": "a", "labels": {"to-agg": "true"}}, "rules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}, {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}),
            json!({"metadata": {"name": "c"}, "rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]}),
        ];
        let rules = aggregated_rules(&roles[0], &roles).unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0]["verbs"], json!(["list"]));
        assert!(aggregated_rules(&roles[1], &roles).is_none());
    }
}
