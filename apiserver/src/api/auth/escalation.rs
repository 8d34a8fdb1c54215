//! RBAC escalation prevention, as kube-apiserver's RBAC storage does it: a user may write a
//! Role or ClusterRole only with rules it already holds (or with the `escalate` verb on it), may
//! give a ClusterRole an `aggregationRule` only holding every permission (it can gather
//! anything), and may write a RoleBinding or ClusterRoleBinding only to a role whose rules it
//! already holds where the binding applies (or with the `bind` verb on that role). Without
//! this, a user allowed to create bindings binds `cluster-admin` to itself.
//!
//! "Holds" is rule coverage: each requested rule is broken into single (group, resource, verb,
//! name) or (URL, verb) pieces, and every piece must be allowed by one of the user's rules.

use serde_json::Value;

use super::{
    UserInfo,
    rbac::{self, Attributes, Policy},
};

/// The RBAC API group, whose writes are checked for escalation.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// The RBAC kinds whose writes are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A namespaced Role.
    Role,
    /// A ClusterRole.
    ClusterRole,
    /// A RoleBinding.
    RoleBinding,
    /// A ClusterRoleBinding.
    ClusterRoleBinding,
}

impl Kind {
    /// The kind of a resource of `group`/`plural`, when it is one of RBAC's four.
    pub fn of(group: &str, plural: &str) -> Option<Kind> {
        if group != GROUP {
            return None;
        }
        match plural {
            "roles" => Some(Kind::Role),
            "clusterroles" => Some(Kind::ClusterRole),
            "rolebindings" => Some(Kind::RoleBinding),
            "clusterrolebindings" => Some(Kind::ClusterRoleBinding),
            _ => None,
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Kind::Role => "roles",
            Kind::ClusterRole => "clusterroles",
            Kind::RoleBinding => "rolebindings",
            Kind::ClusterRoleBinding => "clusterrolebindings",
        }
    }
}

/// Why a write was refused, in kube-apiserver's words (a 403).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Escalation {
    /// The kind of RBAC object refused.
    pub kind: Kind,
    /// The refused object's name.
    pub name: String,
    /// Why it was refused, as kube-apiserver words it.
    pub message: String,
}

/// Decides whether `user` may write `obj` (a `kind` object, as it will be stored) under
/// `policy`, the cluster's RBAC objects before the write.
pub fn check(
    policy: &Policy<'_>,
    user: &UserInfo,
    kind: Kind,
    obj: &Value,
) -> Result<(), Escalation> {
    if user.is_master() {
        return Ok(());
    }
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let namespace = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    let refuse = |reason: String| Escalation {
        kind,
        name: name.clone(),
        message: format!(
            "{}.{GROUP} \"{name}\" is forbidden: {reason}",
            kind.plural()
        ),
    };
    match kind {
        Kind::Role | Kind::ClusterRole => {
            if allowed(policy, user, "escalate", kind.plural(), namespace, &name) {
                return Ok(());
            }
            let held = held_rules(policy, user, namespace);
            let missing = uncovered(&held, rules_of(obj));
            if !missing.is_empty() {
                return Err(refuse(not_held(user, &missing)));
            }
            if kind == Kind::ClusterRole && obj.get("aggregationRule").is_some_and(|a| !a.is_null())
            {
                let everything = [
                    serde_json::json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
                    serde_json::json!({"nonResourceURLs": ["*"], "verbs": ["*"]}),
                ];
                if !uncovered(&held, &everything).is_empty() {
                    return Err(refuse(
                        "must have cluster-admin privileges to use the aggregationRule".into(),
                    ));
                }
            }
            Ok(())
        }
        Kind::RoleBinding | Kind::ClusterRoleBinding => {
            let role_ref = &obj["roleRef"];
            let role_name = role_ref["name"].as_str().unwrap_or_default();
            let (role_plural, role) = match role_ref["kind"].as_str() {
                Some("ClusterRole") => {
                    ("clusterroles", find(policy.cluster_roles, role_name, None))
                }
                Some("Role") if kind == Kind::RoleBinding => {
                    ("roles", find(policy.roles, role_name, Some(namespace)))
                }
                _ => {
                    return Err(refuse(format!(
                        "roleRef.kind {:?} is not allowed here",
                        role_ref["kind"].as_str().unwrap_or_default()
                    )));
                }
            };
            if allowed(policy, user, "bind", role_plural, namespace, role_name) {
                return Ok(());
            }
            let Some(role) = role else {
                let singular = role_plural.trim_end_matches('s');
                return Err(refuse(format!(
                    "{singular}.{GROUP} \"{role_name}\" not found"
                )));
            };
            let held = held_rules(policy, user, namespace);
            let missing = uncovered(&held, rules_of(role));
            if missing.is_empty() {
                Ok(())
            } else {
                Err(refuse(not_held(user, &missing)))
            }
        }
    }
}

/// Whether RBAC allows `verb` on the role `name` (in `namespace`, empty for cluster scope).
fn allowed(
    policy: &Policy<'_>,
    user: &UserInfo,
    verb: &str,
    plural: &str,
    namespace: &str,
    name: &str,
) -> bool {
    rbac::authorize(
        policy,
        user,
        &Attributes::Resource {
            verb: verb.into(),
            group: GROUP.into(),
            resource: plural.into(),
            subresource: String::new(),
            namespace: namespace.into(),
            name: name.into(),
        },
    )
    .allowed
}

/// Every rule `user` holds where a write in `namespace` applies (cluster-wide ones included).
fn held_rules(policy: &Policy<'_>, user: &UserInfo, namespace: &str) -> Vec<Value> {
    let (mut resource, non_resource) = rbac::rules_of(policy, user, namespace);
    resource.extend(non_resource);
    resource
}

fn rules_of(obj: &Value) -> &[Value] {
    obj["rules"].as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn find<'a>(objs: &'a [Value], name: &str, namespace: Option<&str>) -> Option<&'a Value> {
    objs.iter().find(|o| {
        o["metadata"]["name"] == name && namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns)
    })
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// One indivisible piece of a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece<'a> {
    Resource {
        group: &'a str,
        resource: &'a str,
        verb: &'a str,
        name: Option<&'a str>,
    },
    Url {
        url: &'a str,
        verb: &'a str,
    },
}

/// `rule` broken into its pieces, as kube-apiserver's `BreakdownRule` does.
fn pieces(rule: &Value) -> Vec<Piece<'_>> {
    let verbs = strings(&rule["verbs"]);
    let mut out = Vec::new();
    for group in strings(&rule["apiGroups"]) {
        for resource in strings(&rule["resources"]) {
            for &verb in &verbs {
                let names = strings(&rule["resourceNames"]);
                if names.is_empty() {
                    out.push(Piece::Resource {
                        group,
                        resource,
                        verb,
                        name: None,
                    });
                }
                for name in names {
                    out.push(Piece::Resource {
                        group,
                        resource,
                        verb,
                        name: Some(name),
                    });
                }
            }
        }
    }
    for url in strings(&rule["nonResourceURLs"]) {
        for &verb in &verbs {
            out.push(Piece::Url { url, verb });
        }
    }
    out
}

fn has_or_all(list: &[&str], want: &str) -> bool {
    list.iter().any(|s| *s == "*" || *s == want)
}

/// Whether `owner` (one rule) covers `piece`: a wildcard in the piece is covered only by a
/// wildcard, so nobody gains `*` by holding every named thing.
fn covers(owner: &Value, piece: &Piece<'_>) -> bool {
    let verbs = strings(&owner["verbs"]);
    match piece {
        Piece::Resource {
            group,
            resource,
            verb,
            name,
        } => {
            if !has_or_all(&verbs, verb) || !has_or_all(&strings(&owner["apiGroups"]), group) {
                return false;
            }
            let resources = strings(&owner["resources"]);
            let resource_ok = resources.contains(resource)
                || resources.contains(&"*")
                || resource.split_once('/').is_some_and(|(base, sub)| {
                    resources.iter().any(|r| {
                        *r == format!("{base}/*") || *r == format!("*/{sub}") || *r == "*/*"
                    })
                });
            let names = strings(&owner["resourceNames"]);
            resource_ok && (names.is_empty() || name.is_some_and(|n| names.contains(&n)))
        }
        Piece::Url { url, verb } => {
            has_or_all(&verbs, verb)
                && strings(&owner["nonResourceURLs"]).iter().any(|u| {
                    u == url
                        || *u == "*"
                        || u.strip_suffix('*')
                            .is_some_and(|prefix| url.starts_with(prefix))
                })
        }
    }
}

/// The pieces of `requested` no rule of `held` covers, as rules of one piece each.
pub fn uncovered(held: &[Value], requested: &[Value]) -> Vec<Value> {
    let mut missing: Vec<Value> = Vec::new();
    for rule in requested {
        for piece in pieces(rule) {
            if held.iter().any(|h| covers(h, &piece)) {
                continue;
            }
            let as_rule = match piece {
                Piece::Resource {
                    group,
                    resource,
                    verb,
                    name,
                } => {
                    let mut r = serde_json::json!({"apiGroups": [group], "resources": [resource], "verbs": [verb]});
                    if let Some(n) = name {
                        r["resourceNames"] = serde_json::json!([n]);
                    }
                    r
                }
                Piece::Url { url, verb } => {
                    serde_json::json!({"nonResourceURLs": [url], "verbs": [verb]})
                }
            };
            if !missing.contains(&as_rule) {
                missing.push(as_rule);
            }
        }
    }
    missing
}

/// kube-apiserver's text for rules not held, listing them (the first 20).
fn not_held(user: &UserInfo, missing: &[Value]) -> String {
    const SHOWN: usize = 20;
    let mut listed: Vec<String> = missing.iter().take(SHOWN).map(Value::to_string).collect();
    if missing.len() > SHOWN {
        listed.push(format!("... and {} more", missing.len() - SHOWN));
    }
    format!(
        "user \"{}\" (groups={:?}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.username,
        user.groups,
        listed.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn user(name: &str) -> UserInfo {
        UserInfo {
            username: name.into(),
            uid: String::new(),
            groups: vec!["system:authenticated".into()],
            extra: BTreeMap::new(),
        }
    }

    fn cluster_role(name: &str, rules: Value) -> Value {
        json!({"metadata": {"name": name}, "rules": rules})
    }

    fn crb(name: &str, role: &str, user: &str) -> Value {
        json!({"metadata": {"name": name},
               "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
               "subjects": [{"kind": "User", "name": user}]})
    }

    fn fixture() -> (Vec<Value>, Vec<Value>, Vec<Value>, Vec<Value>) {
        let cluster_roles = vec![
            cluster_role(
                "cluster-admin",
                json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
            ),
            cluster_role(
                "binder",
                json!([
                {"apiGroups": [GROUP], "resources": ["clusterrolebindings", "rolebindings"], "verbs": ["create", "update"]}]),
            ),
            cluster_role(
                "role-editor",
                json!([
                {"apiGroups": [GROUP], "resources": ["clusterroles"], "verbs": ["create", "update", "patch"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]),
            ),
            cluster_role(
                "pod-reader",
                json!([
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]),
            ),
            cluster_role(
                "may-bind-admin",
                json!([
                {"apiGroups": [GROUP], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["cluster-admin"]}]),
            ),
        ];
        let crbs = vec![
            crb("mallory-binds", "binder", "mallory"),
            crb("eve-edits", "role-editor", "eve"),
            crb("trent-binds", "binder", "trent"),
            crb("trent-may", "may-bind-admin", "trent"),
            crb("eve-binds", "binder", "eve"),
        ];
        let roles = vec![json!({"metadata": {"name": "secrets", "namespace": "team"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]})];
        (cluster_roles, crbs, roles, vec![])
    }

    fn with<T>(f: impl FnOnce(&Policy<'_>) -> T) -> T {
        let (cr, crb, r, rb) = fixture();
        f(&Policy {
            cluster_roles: &cr,
            cluster_role_bindings: &crb,
            roles: &r,
            role_bindings: &rb,
        })
    }

    #[test]
    fn binding_a_role_one_does_not_hold_is_refused() {
        with(|p| {
            let obj = crb("escalate", "cluster-admin", "mallory");
            let e = check(p, &user("mallory"), Kind::ClusterRoleBinding, &obj).unwrap_err();
            assert!(e.message.starts_with(
                "clusterrolebindings.rbac.authorization.k8s.io \"escalate\" is forbidden: user \"mallory\""
            ), "{}", e.message);
            assert!(e.message.contains("not currently held"), "{}", e.message);
            // The same binding by an admin, and by one granted `bind` on that role.
            assert!(check(p, &UserInfo::admin(), Kind::ClusterRoleBinding, &obj).is_ok());
            assert!(check(p, &user("trent"), Kind::ClusterRoleBinding, &obj).is_ok());
            // A role whose rules one holds may be bound: eve reads pods.
            let reader = crb("readers", "pod-reader", "bob");
            assert!(check(p, &user("eve"), Kind::ClusterRoleBinding, &reader).is_ok());
            assert!(check(p, &user("mallory"), Kind::ClusterRoleBinding, &reader).is_err());
        });
    }

    #[test]
    fn a_role_binding_is_judged_in_its_namespace() {
        with(|p| {
            let rb = json!({"metadata": {"name": "x", "namespace": "team"},
                "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "secrets"},
                "subjects": [{"kind": "User", "name": "mallory"}]});
            assert!(check(p, &user("mallory"), Kind::RoleBinding, &rb).is_err());
            let missing = json!({"metadata": {"name": "x", "namespace": "team"},
                "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "nope"}});
            let e = check(p, &user("mallory"), Kind::RoleBinding, &missing).unwrap_err();
            assert!(
                e.message
                    .ends_with("role.rbac.authorization.k8s.io \"nope\" not found"),
                "{}",
                e.message
            );
        });
    }

    #[test]
    fn a_role_with_rules_one_does_not_hold_is_refused() {
        with(|p| {
            let everything = cluster_role(
                "mine",
                json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
            );
            let e = check(p, &user("eve"), Kind::ClusterRole, &everything).unwrap_err();
            assert!(
                e.message
                    .contains(r#"{"apiGroups":["*"],"resources":["*"],"verbs":["*"]}"#),
                "{}",
                e.message
            );
            // Rules she holds pass; one verb more does not.
            let ok = cluster_role(
                "mine",
                json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]),
            );
            assert!(check(p, &user("eve"), Kind::ClusterRole, &ok).is_ok());
            let more = cluster_role(
                "mine",
                json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]}]),
            );
            let e = check(p, &user("eve"), Kind::ClusterRole, &more).unwrap_err();
            assert!(e.message.contains(r#""verbs":["delete"]"#), "{}", e.message);
            assert!(
                !e.message.contains(r#""verbs":["list"]"#),
                "only the missing piece: {}",
                e.message
            );
        });
    }

    #[test]
    fn an_aggregation_rule_needs_every_permission() {
        with(|p| {
            let aggregating = json!({"metadata": {"name": "gather"}, "rules": [],
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}});
            let e = check(p, &user("eve"), Kind::ClusterRole, &aggregating).unwrap_err();
            assert!(
                e.message
                    .ends_with("must have cluster-admin privileges to use the aggregationRule")
            );
            assert!(check(p, &UserInfo::admin(), Kind::ClusterRole, &aggregating).is_ok());
        });
    }

    #[test]
    fn wildcards_are_covered_only_by_wildcards() {
        let held = [json!({"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get"]})];
        assert!(
            uncovered(
                &held,
                &[json!({"apiGroups": [""], "resources": ["*"], "verbs": ["get"]})]
            )
            .len()
                == 1
        );
        let names = [
            json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]}),
        ];
        assert!(
            uncovered(
                &names,
                &[json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]})]
            )
            .len()
                == 1
        );
        assert!(uncovered(&names, &[json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]})]).is_empty());
        let sub = [json!({"apiGroups": [""], "resources": ["pods/*"], "verbs": ["get"]})];
        assert!(
            uncovered(
                &sub,
                &[json!({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]})]
            )
            .is_empty()
        );
        let urls = [json!({"nonResourceURLs": ["/metrics*"], "verbs": ["get"]})];
        assert!(
            uncovered(
                &urls,
                &[json!({"nonResourceURLs": ["/metrics/x"], "verbs": ["get"]})]
            )
            .is_empty()
        );
        assert!(
            uncovered(
                &urls,
                &[json!({"nonResourceURLs": ["*"], "verbs": ["get"]})]
            )
            .len()
                == 1
        );
    }
}
