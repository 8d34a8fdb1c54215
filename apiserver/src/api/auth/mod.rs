//! Who a request is (the identity its bearer token proves: [`tokens`]) and whether it may do
//! what it asks ([`rbac`], over the cluster's stored RBAC objects); the review kinds that ask
//! the same questions ([`reviews`]).

pub mod defaults;
pub mod escalation;
pub mod impersonation;
pub mod rbac;
pub mod reviews;
pub mod role_aggregation;
pub mod tokens;

use std::{collections::BTreeMap, sync::Arc};

use axum::http::Method;
use serde_json::{Value, json};

use super::{
    Core,
    path::{ResourcePath, Route},
    status::ApiError,
};

/// The group every authenticated caller is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group allowed everything.
pub const MASTERS: &str = "system:masters";
/// The user name of an embedded cluster's admin token (and of the gateway's `--token-file`
/// token, and of the owner-only unix socket).
pub const ADMIN: &str = "admin";

/// An authenticated caller, as Kubernetes' `UserInfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    /// The user's name (`admin`, `system:serviceaccount:NS:NAME`, ...).
    pub username: String,
    /// The user's uid (empty when it has none).
    pub uid: String,
    /// The groups the user is in.
    pub groups: Vec<String>,
    /// Extra attributes (from impersonation or a bound token), by key.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The cluster's administrator: in `system:masters`.
    pub fn admin() -> Self {
        UserInfo {
            username: ADMIN.into(),
            uid: String::new(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
            extra: BTreeMap::new(),
        }
    }

    /// Whether the user is in `system:masters`, which RBAC lets do anything.
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }

    /// The `userInfo` of reviews.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"username": self.username, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        if !self.extra.is_empty() {
            v["extra"] = json!(self.extra);
        }
        v
    }
}

const RBAC: &str = "rbac.authorization.k8s.io";

/// The RBAC objects of one cluster, as read from [`crate::api::stored_kinds`].
pub struct LoadedPolicy {
    cluster_roles: Arc<Vec<Value>>,
    cluster_role_bindings: Arc<Vec<Value>>,
    roles: Arc<Vec<Value>>,
    role_bindings: Arc<Vec<Value>>,
}

impl LoadedPolicy {
    /// The policy as RBAC evaluates it.
    pub fn view(&self) -> rbac::Policy<'_> {
        rbac::Policy {
            cluster_roles: &self.cluster_roles,
            cluster_role_bindings: &self.cluster_role_bindings,
            roles: &self.roles,
            role_bindings: &self.role_bindings,
        }
    }
}

/// The RBAC objects of `cluster`.
pub async fn load_policy(core: &Core, cluster: &str) -> Result<LoadedPolicy, ApiError> {
    let list = |resource: &'static str| core.kinds.list(cluster, RBAC, resource);
    let failed = |e: crate::store::StoreError| ApiError::internal(format!("storage error: {e}"));
    Ok(LoadedPolicy {
        cluster_roles: list("clusterroles").await.map_err(failed)?,
        cluster_role_bindings: list("clusterrolebindings").await.map_err(failed)?,
        roles: list("roles").await.map_err(failed)?,
        role_bindings: list("rolebindings").await.map_err(failed)?,
    })
}

/// Decides `a` for `user` on `cluster`.
pub async fn authorize(
    core: &Core,
    cluster: &str,
    user: &UserInfo,
    a: &rbac::Attributes,
) -> Result<rbac::Decision, ApiError> {
    if user.is_master() {
        return Ok(rbac::authorize(&rbac::Policy::default(), user, a));
    }
    let policy = load_policy(core, cluster).await?;
    Ok(rbac::authorize(&policy.view(), user, a))
}

/// Refuses a client's write of an RBAC object (`group`/`plural`) that would grant more than
/// `user` holds: see [`escalation`]. Other kinds pass untouched.
pub async fn refuse_escalation(
    core: &Core,
    cluster: &str,
    user: &UserInfo,
    group: &str,
    plural: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    let Some(kind) = escalation::Kind::of(group, plural) else {
        return Ok(());
    };
    if user.is_master() {
        return Ok(());
    }
    let policy = load_policy(core, cluster).await?;
    escalation::check(&policy.view(), user, kind, obj).map_err(|e| {
        let mut err = ApiError::new(403, "Forbidden", e.message);
        err.details = Some(json!({"name": e.name, "group": escalation::GROUP, "kind": plural}));
        err
    })
}

/// The identity a request of `actor` runs as: `actor` itself, or the one its `Impersonate-*`
/// headers ask for when RBAC allows `actor` to impersonate each part of it (403 naming the
/// first part it may not; 400 for headers that ask for groups without a user).
pub async fn impersonated(
    core: &Core,
    cluster: &str,
    actor: UserInfo,
    headers: &axum::http::HeaderMap,
) -> Result<UserInfo, ApiError> {
    let requested = match impersonation::requested(headers) {
        Ok(None) => return Ok(actor),
        Ok(Some(r)) => r,
        Err(e) => return Err(ApiError::bad_request(e.to_string())),
    };
    let policy = if actor.is_master() {
        None
    } else {
        Some(load_policy(core, cluster).await?)
    };
    for a in impersonation::checks(&requested) {
        let allowed = match &policy {
            None => true,
            Some(p) => rbac::authorize(&p.view(), &actor, &a).allowed,
        };
        if !allowed {
            return Err(forbidden(&actor, &a));
        }
    }
    Ok(impersonation::identity(&requested))
}

/// The verb of a request for a resource path: from the method, `list` and `watch` for
/// collections; empty for a method no verb maps.
pub fn resource_verb(method: &Method, p: &ResourcePath, query: &str) -> &'static str {
    let watch_param = query
        .split('&')
        .any(|kv| matches!(kv, "watch=true" | "watch=1" | "watch=True"));
    let named = p.name.is_some();
    match *method {
        Method::GET | Method::HEAD if p.watch || watch_param => "watch",
        Method::GET | Method::HEAD if named => "get",
        Method::GET | Method::HEAD => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "",
    }
}

/// What a request asks to do, as the authorizer sees it: a resource request for a resource
/// path (the verb from the method, `list` and `watch` for collections), else a non-resource
/// request for the path.
pub fn request_attributes(
    method: &Method,
    route: &Route,
    path: &str,
    query: &str,
) -> rbac::Attributes {
    if let Route::Resource(p) = route {
        let verb = resource_verb(method, p, query);
        // A Namespace is in itself, as kube-apiserver sees it.
        let namespace = match (
            &p.namespace,
            p.group.is_empty() && p.resource == "namespaces",
        ) {
            (Some(ns), _) => ns.clone(),
            (None, true) => p.name.clone().unwrap_or_default(),
            (None, false) => String::new(),
        };
        return rbac::Attributes::Resource {
            verb: verb.to_owned(),
            group: p.group.clone(),
            resource: p.resource.clone(),
            subresource: p.subresource.clone().unwrap_or_default(),
            namespace,
            name: p.name.clone().unwrap_or_default(),
        };
    }
    rbac::Attributes::NonResource {
        verb: method.as_str().to_ascii_lowercase(),
        path: path.to_owned(),
    }
}

/// The 403 of a denied request.
pub fn forbidden(user: &UserInfo, a: &rbac::Attributes) -> ApiError {
    let mut e = ApiError::new(403, "Forbidden", rbac::forbidden_message(user, a));
    if let rbac::Attributes::Resource {
        group,
        resource,
        name,
        ..
    } = a
    {
        let mut d = json!({"name": name, "kind": resource});
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        e.details = Some(d);
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::path::parse;

    #[test]
    fn requests_become_attributes() {
        let at = |m: Method, p: &str, q: &str| request_attributes(&m, &parse(p), p, q);
        let r = |verb: &str, ns: &str, name: &str, sub: &str| rbac::Attributes::Resource {
            verb: verb.into(),
            group: String::new(),
            resource: "pods".into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        };
        assert_eq!(
            at(Method::GET, "/api/v1/namespaces/a/pods", ""),
            r("list", "a", "", "")
        );
        assert_eq!(
            at(Method::GET, "/api/v1/namespaces/a/pods", "watch=true"),
            r("watch", "a", "", "")
        );
        assert_eq!(at(Method::GET, "/api/v1/pods", ""), r("list", "", "", ""));
        assert_eq!(
            at(Method::PATCH, "/api/v1/namespaces/a/pods/p/status", ""),
            r("patch", "a", "p", "status")
        );
        assert_eq!(
            at(Method::DELETE, "/api/v1/namespaces/a/pods", ""),
            r("deletecollection", "a", "", "")
        );
        assert_eq!(
            at(Method::GET, "/apis", ""),
            rbac::Attributes::NonResource {
                verb: "get".into(),
                path: "/apis".into()
            }
        );
    }
}
