//! Bearer tokens of an embedded cluster: its admin token (and the gateway's `--token-file`
//! token), in `system:masters`; and ServiceAccount tokens issued by TokenRequest
//! (`serviceaccounts/NAME/token`), kept only as hashes, bound to their cluster, their
//! ServiceAccount's uid and an expiry. Tokens never reach logs.

use std::collections::BTreeMap;

use axum::{http::StatusCode, response::Response};
use serde_json::{Value, json};

use super::{AUTHENTICATED, UserInfo};
use crate::{
    api::{ApiState, Ctx, clusters::Served, json_response, status::ApiError},
    kubeconfig,
    store::{ObjectKey, StoreError, token_hash, tokens::TokenRecord},
};

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

fn now_seconds() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// Who `token` is on `cluster`, with the token's audiences; `None` when it proves nothing there.
pub async fn authenticate(
    st: &ApiState,
    cluster: &str,
    served: &Served,
    token: &str,
) -> Result<Option<(UserInfo, Vec<String>)>, ApiError> {
    let hash = token_hash(token);
    if hash == served.token_hash || st.admin_token_hash.as_deref() == Some(hash.as_str()) {
        return Ok(Some((UserInfo::admin(), vec![API_AUDIENCE.to_owned()])));
    }
    if served.read_only {
        return Ok(None);
    }
    let Some(t) = st.store.token(&hash).await.map_err(store_error)? else {
        return Ok(None);
    };
    if t.cluster != cluster || t.expires_at <= now_seconds() {
        return Ok(None);
    }
    // A deleted (or deleted and recreated) ServiceAccount's tokens prove nothing.
    let key = ObjectKey {
        cluster: cluster.to_owned(),
        group: String::new(),
        resource: "serviceaccounts".into(),
        namespace: t.namespace.clone(),
        name: t.name.clone(),
    };
    let account = st.store.get(&key).await.map_err(store_error)?;
    let live = account.is_some_and(|(_, sa)| sa["metadata"]["uid"] == t.uid.as_str());
    Ok(live.then(|| {
        (
            service_account_user(&t.namespace, &t.name, &t.uid),
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

/// `POST .../namespaces/NS/serviceaccounts/NAME/token`: a new token for an existing
/// ServiceAccount.
pub(crate) async fn token_request(
    st: &ApiState,
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
    let Some((_, account)) = st.store.get(&key).await.map_err(store_error)? else {
        return Err(ApiError::not_found("", "serviceaccounts", name));
    };
    let uid = account["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let spec = &body["spec"];
    let seconds = expiration(spec)?;
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
    };
    st.store
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
        "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": null},
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
