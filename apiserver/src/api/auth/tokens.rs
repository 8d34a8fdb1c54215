//! Bearer tokens of an embedded cluster: its admin token (and the gateway's `--token-file`
//! token), in `system:masters`; and ServiceAccount tokens issued by TokenRequest
//! (`serviceaccounts/NAME/token`), kept only as hashes, bound to their cluster, their
//! ServiceAccount's uid and an expiry, and optionally to a Pod (`spec.boundObjectRef`): such a
//! token dies with its Pod, and its user carries the Pod and its node in `extra`, under the keys
//! kube-apiserver uses. Tokens never reach logs.

use std::collections::BTreeMap;

use axum::{http::StatusCode, response::Response};
use serde_json::{Value, json};

use super::{AUTHENTICATED, UserInfo};
use crate::{
    api::{AuthState, Core, Ctx, clusters::Served, json_response, status::ApiError},
    kubeconfig,
    store::{
        ObjectKey, StoreError, token_hash,
        tokens::{BoundPod, TokenRecord},
    },
};

/// The `extra` keys of a Pod-bound token's user, as kube-apiserver names them.
pub const EXTRA_POD_NAME: &str = "authentication.kubernetes.io/pod-name";
/// The `extra` key holding the uid of the Pod a token is bound to.
pub const EXTRA_POD_UID: &str = "authentication.kubernetes.io/pod-uid";
/// The `extra` key holding the Node the token's Pod ran on.
pub const EXTRA_NODE_NAME: &str = "authentication.kubernetes.io/node-name";
/// The `extra` key holding the uid of the Node the token's Pod ran on.
pub const EXTRA_NODE_UID: &str = "authentication.kubernetes.io/node-uid";

/// A token's lifetime when the request names none.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest lifetime a request may ask for (as kube-apiserver).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The longest lifetime granted; longer requests get this.
pub const MAX_EXPIRATION_SECONDS: i64 = 48 * 3600;
/// The audience of tokens that name none (kube-apiserver's default API audience).
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

fn store_error(e: StoreError) -> ApiError {
    ApiError::internal(format!("storage error: {e}"))
}

/// The identity of a ServiceAccount.
pub fn service_account_user(namespace: &str, name: &str, uid: &str) -> UserInfo {
    UserInfo {
        username: format!("system:serviceaccount:{namespace}:{name}"),
        uid: uid.to_owned(),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}"),
            AUTHENTICATED.into(),
        ],
        extra: BTreeMap::new(),
    }
}

/// The user of a token of ServiceAccount `namespace/name` bound to `pod`.
pub fn bound_user(namespace: &str, name: &str, uid: &str, pod: Option<&BoundPod>) -> UserInfo {
    let mut user = service_account_user(namespace, name, uid);
    if let Some(p) = pod {
        for (key, value) in [
            (EXTRA_POD_NAME, &p.name),
            (EXTRA_POD_UID, &p.uid),
            (EXTRA_NODE_NAME, &p.node_name),
            (EXTRA_NODE_UID, &p.node_uid),
        ] {
            if !value.is_empty() {
                user.extra.insert(key.to_owned(), vec![value.clone()]);
            }
        }
    }
    user
}

fn core_key(cluster: &str, resource: &str, namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        cluster: cluster.to_owned(),
        group: String::new(),
        resource: resource.into(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    }
}

fn now_seconds() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// Who `token` is on `cluster`, with the token's audiences; `None` when it proves nothing there.
pub async fn authenticate(
    core: &Core,
    callers: &AuthState,
    cluster: &str,
    served: &Served,
    token: &str,
) -> Result<Option<(UserInfo, Vec<String>)>, ApiError> {
    let hash = token_hash(token);
    if hash == served.token_hash || callers.admin_token_hash.as_deref() == Some(hash.as_str()) {
        return Ok(Some((UserInfo::admin(), vec![API_AUDIENCE.to_owned()])));
    }
    if served.read_only {
        return Ok(None);
    }
    let Some(t) = core.store.token(&hash).await.map_err(store_error)? else {
        return Ok(None);
    };
    if t.cluster != cluster || t.expires_at <= now_seconds() {
        return Ok(None);
    }
    // A deleted (or deleted and recreated) ServiceAccount's tokens prove nothing.
    let key = core_key(cluster, "serviceaccounts", &t.namespace, &t.name);
    let account = core.store.get(&key).await.map_err(store_error)?;
    let mut live = account.is_some_and(|(_, sa)| sa["metadata"]["uid"] == t.uid.as_str());
    // A Pod-bound token dies with its Pod (or a new Pod of the same name), as in Kubernetes.
    if let (true, Some(p)) = (live, &t.pod) {
        let key = core_key(cluster, "pods", &t.namespace, &p.name);
        let pod = core.store.get(&key).await.map_err(store_error)?;
        live = pod.is_some_and(|(_, pod)| {
            pod["metadata"]["uid"] == p.uid.as_str()
                && pod["metadata"]["deletionTimestamp"].is_null()
        });
    }
    Ok(live.then(|| {
        (
            bound_user(&t.namespace, &t.name, &t.uid, t.pod.as_ref()),
            t.audiences.clone(),
        )
    }))
}

/// How long a token asked for by `spec` lives.
pub fn expiration(spec: &Value) -> Result<i64, ApiError> {
    match spec["expirationSeconds"].as_i64() {
        None => Ok(DEFAULT_EXPIRATION_SECONDS),
        Some(s) if s < MIN_EXPIRATION_SECONDS => Err(ApiError::new(
            422,
            "Invalid",
            format!(
                "TokenRequest.authentication.k8s.io is invalid: spec.expirationSeconds: Invalid value: {s}: may not specify a duration less than 10 minutes"
            ),
        )),
        Some(s) => Ok(s.min(MAX_EXPIRATION_SECONDS)),
    }
}

/// The Pod `spec.boundObjectRef` names (in the ServiceAccount's namespace), checked as
/// kube-apiserver checks it: it exists, its uid is the one named (if any), and it runs as the
/// ServiceAccount. `None` when the token is bound to nothing.
async fn bound_pod(
    core: &Core,
    cluster: &str,
    namespace: &str,
    account: &str,
    reference: &Value,
) -> Result<Option<BoundPod>, ApiError> {
    if reference.is_null() {
        return Ok(None);
    }
    let text = |k: &str| reference[k].as_str().unwrap_or_default();
    let invalid = |field: &str, message: String| {
        ApiError::new(
            422,
            "Invalid",
            format!(
                "TokenRequest.authentication.k8s.io is invalid: spec.boundObjectRef.{field}: {message}"
            ),
        )
    };
    if text("kind") != "Pod" || !matches!(text("apiVersion"), "v1" | "") {
        return Err(invalid(
            "kind",
            format!(
                "Unsupported value: \"{}\": supported values: \"Pod\" (v1)",
                text("kind")
            ),
        ));
    }
    let name = text("name");
    if name.is_empty() {
        return Err(invalid("name", "Required value".into()));
    }
    let Some((_, pod)) = core
        .store
        .get(&core_key(cluster, "pods", namespace, name))
        .await
        .map_err(store_error)?
    else {
        return Err(ApiError::not_found("", "pods", name));
    };
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    if !text("uid").is_empty() && text("uid") != uid {
        return Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "the UID in the bound object reference ({}) does not match the UID in record. The object might have been deleted and then recreated",
                text("uid")
            ),
        ));
    }
    let runs_as = pod["spec"]["serviceAccountName"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or("default");
    if runs_as != account {
        return Err(ApiError::bad_request(format!(
            "cannot bind token for serviceaccount \"{account}\" to pod running with different serviceaccount name."
        )));
    }
    let node_name = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    let node_uid = if node_name.is_empty() {
        String::new()
    } else {
        core.store
            .get(&core_key(cluster, "nodes", "", node_name))
            .await
            .map_err(store_error)?
            .and_then(|(_, n)| n["metadata"]["uid"].as_str().map(String::from))
            .unwrap_or_default()
    };
    Ok(Some(BoundPod {
        name: name.to_owned(),
        uid: uid.to_owned(),
        node_name: node_name.to_owned(),
        node_uid,
    }))
}

/// `POST .../namespaces/NS/serviceaccounts/NAME/token`: a new token for an existing
/// ServiceAccount, bound to a Pod when `spec.boundObjectRef` names one.
pub(crate) async fn token_request(
    core: &Core,
    ctx: &Ctx,
    namespace: &str,
    name: &str,
    body: Value,
) -> Result<Response, ApiError> {
    let key = ObjectKey {
        cluster: ctx.cluster.clone(),
        group: String::new(),
        resource: "serviceaccounts".into(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    };
    let Some((_, account)) = core.store.get(&key).await.map_err(store_error)? else {
        return Err(ApiError::not_found("", "serviceaccounts", name));
    };
    let uid = account["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let spec = &body["spec"];
    let seconds = expiration(spec)?;
    let pod = bound_pod(core, &ctx.cluster, namespace, name, &spec["boundObjectRef"]).await?;
    let audiences: Vec<String> = match spec["audiences"].as_array() {
        Some(a) if !a.is_empty() => a
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => vec![API_AUDIENCE.to_owned()],
    };
    let now = jiff::Timestamp::now();
    let expires_at = now.as_second() + seconds;
    let token = kubeconfig::new_token();
    let record = TokenRecord {
        cluster: ctx.cluster.clone(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        uid: uid.clone(),
        audiences: audiences.clone(),
        expires_at,
        pod: pod.clone(),
    };
    core.store
        .save_token(&token_hash(&token), &record)
        .await
        .map_err(store_error)?;
    let expiry = jiff::Timestamp::from_second(expires_at)
        .map(|t| t.to_string())
        .unwrap_or_default();
    let answer = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": {"name": name, "namespace": namespace,
            "creationTimestamp": now.round(jiff::Unit::Second).unwrap_or(now).to_string()},
        "spec": {"audiences": audiences, "expirationSeconds": seconds,
            "boundObjectRef": pod.map(|p| json!({"kind": "Pod", "apiVersion": "v1", "name": p.name, "uid": p.uid}))},
        "status": {"token": token, "expirationTimestamp": expiry},
    });
    Ok(json_response(StatusCode::CREATED, &answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_are_bounded() {
        assert_eq!(expiration(&json!({})).unwrap(), 3600);
        assert_eq!(
            expiration(&json!({"expirationSeconds": 7200})).unwrap(),
            7200
        );
        assert_eq!(
            expiration(&json!({"expirationSeconds": 10_000_000})).unwrap(),
            MAX_EXPIRATION_SECONDS
        );
        assert_eq!(
            expiration(&json!({"expirationSeconds": 60}))
                .unwrap_err()
                .code,
            422
        );
    }

    #[test]
    fn pod_bound_users_carry_the_pod_and_its_node() {
        let pod = BoundPod {
            name: "mm-a".into(),
            uid: "p-1".into(),
            node_name: "node-a".into(),
            node_uid: String::new(),
        };
        let u = bound_user("sys", "mm", "u-1", Some(&pod));
        assert_eq!(u.username, "system:serviceaccount:sys:mm");
        assert_eq!(u.extra[EXTRA_POD_NAME], ["mm-a"]);
        assert_eq!(u.extra[EXTRA_POD_UID], ["p-1"]);
        assert_eq!(u.extra[EXTRA_NODE_NAME], ["node-a"]);
        assert!(!u.extra.contains_key(EXTRA_NODE_UID), "unknown: left out");
        assert!(bound_user("sys", "mm", "u-1", None).extra.is_empty());
    }

    #[test]
    fn service_accounts_are_named_as_in_kubernetes() {
        let u = service_account_user("team", "bot", "u-1");
        assert_eq!(u.username, "system:serviceaccount:team:bot");
        assert_eq!(
            u.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:team",
                "system:authenticated"
            ]
        );
    }
}
