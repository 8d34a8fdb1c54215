//! The review kinds, answered and never stored: TokenReview, SubjectAccessReview,
//! LocalSubjectAccessReview, and the self reviews (`kubectl auth can-i`, `kubectl auth
//! whoami`), all from the same authentication and RBAC the requests themselves go through.

use axum::{http::StatusCode, response::Response};
use serde_json::{Value, json};

use super::{
    UserInfo, load_policy,
    rbac::{self, Attributes},
    tokens,
};
use crate::{
    api::{AuthState, Core, Ctx, json_response, objects, status::ApiError},
    registry::ResourceDef,
};

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

/// The attributes a review's spec asks about; `namespace` overrides the spec's (a
/// LocalSubjectAccessReview's own namespace).
pub fn attributes_of(spec: &Value, namespace: Option<&str>) -> Result<Attributes, ApiError> {
    if let Some(r) = spec.get("resourceAttributes").filter(|r| r.is_object()) {
        return Ok(Attributes::Resource {
            verb: text(&r["verb"]),
            group: text(&r["group"]),
            resource: text(&r["resource"]),
            subresource: text(&r["subresource"]),
            namespace: namespace.map_or_else(|| text(&r["namespace"]), str::to_owned),
            name: text(&r["name"]),
        });
    }
    if let Some(n) = spec.get("nonResourceAttributes").filter(|r| r.is_object()) {
        return Ok(Attributes::NonResource {
            verb: text(&n["verb"]),
            path: text(&n["path"]),
        });
    }
    Err(ApiError::new(
        422,
        "Invalid",
        "spec: Invalid value: exactly one of nonResourceAttributes or resourceAttributes must be specified",
    ))
}

/// The user a SubjectAccessReview asks about.
fn subject_of(spec: &Value) -> UserInfo {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(String::from))
            .collect()
    };
    UserInfo {
        username: text(&spec["user"]),
        uid: text(&spec["uid"]),
        groups: strings(&spec["groups"]),
        extra: spec["extra"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), strings(v)))
            .collect(),
    }
}

async fn access_status(
    core: &Core,
    cluster: &str,
    user: &UserInfo,
    a: &Attributes,
) -> Result<Value, ApiError> {
    let decision = super::authorize(core, cluster, user, a).await?;
    Ok(json!({"allowed": decision.allowed, "reason": decision.reason}))
}

/// Answers a review of `def` at `version` (in `namespace` for a LocalSubjectAccessReview).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn answer(
    core: &Core,
    callers: &AuthState,
    ctx: &Ctx,
    def: &ResourceDef,
    version: &str,
    namespace: Option<&str>,
    mut obj: Value,
) -> Result<Response, ApiError> {
    objects::check_type(def, version, &mut obj)?;
    let spec = obj["spec"].clone();
    let cluster = ctx.cluster.as_str();
    obj["status"] = match def.kind.as_str() {
        "SelfSubjectAccessReview" => {
            access_status(core, cluster, &ctx.user, &attributes_of(&spec, None)?).await?
        }
        "SubjectAccessReview" => {
            access_status(
                core,
                cluster,
                &subject_of(&spec),
                &attributes_of(&spec, None)?,
            )
            .await?
        }
        "LocalSubjectAccessReview" => {
            let ns = namespace.unwrap_or_default();
            if let Some(given) = spec["resourceAttributes"]["namespace"].as_str()
                && given != ns
            {
                return Err(ApiError::bad_request(format!(
                    "spec.resourceAttributes.namespace must match metadata.namespace: \"{given}\" != \"{ns}\""
                )));
            }
            access_status(
                core,
                cluster,
                &subject_of(&spec),
                &attributes_of(&spec, Some(ns))?,
            )
            .await?
        }
        "SelfSubjectRulesReview" => {
            let policy = load_policy(core, cluster).await?;
            let ns = spec["namespace"].as_str().unwrap_or_default();
            let (resource, non_resource) = rbac::rules_of(&policy.view(), &ctx.user, ns);
            json!({"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": false})
        }
        "TokenReview" => token_review(core, callers, ctx, &spec).await?,
        // SelfSubjectReview.
        _ => json!({"userInfo": ctx.user.to_json()}),
    };
    Ok(json_response(StatusCode::CREATED, &obj))
}

async fn token_review(
    core: &Core,
    callers: &AuthState,
    ctx: &Ctx,
    spec: &Value,
) -> Result<Value, ApiError> {
    let token = spec["token"].as_str().unwrap_or_default();
    let refused = |error: &str| json!({"authenticated": false, "user": {}, "error": error});
    let served = core.served.get(&ctx.cluster);
    let found = match served {
        Some(served) if !token.is_empty() => {
            tokens::authenticate(core, callers, &ctx.cluster, &served, token).await?
        }
        _ => None,
    };
    let Some((user, audiences)) = found else {
        return Ok(refused("invalid bearer token"));
    };
    let wanted: Vec<&str> = spec["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let granted: Vec<&String> = if wanted.is_empty() {
        audiences.iter().collect()
    } else {
        audiences
            .iter()
            .filter(|a| wanted.contains(&a.as_str()))
            .collect()
    };
    if granted.is_empty() {
        return Ok(refused(
            "token audiences are invalid for the target audiences",
        ));
    }
    Ok(json!({"authenticated": true, "user": user.to_json(), "audiences": granted}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_specs_become_attributes() {
        let spec = json!({"user": "u", "groups": ["g"], "extra": {"k": ["v"]},
            "resourceAttributes": {"namespace": "a", "verb": "get", "resource": "pods", "name": "p"}});
        let Attributes::Resource {
            namespace, verb, ..
        } = attributes_of(&spec, None).unwrap()
        else {
            panic!("a resource request");
        };
        assert_eq!((namespace.as_str(), verb.as_str()), ("a", "get"));
        // A LocalSubjectAccessReview's namespace is its own.
        let Attributes::Resource { namespace, .. } = attributes_of(&spec, Some("b")).unwrap()
        else {
            panic!("a resource request");
        };
        assert_eq!(namespace, "b");
        let who = subject_of(&spec);
        assert_eq!(
            (who.username.as_str(), who.groups.as_slice()),
            ("u", &["g".to_owned()][..])
        );
        assert_eq!(who.extra["k"], ["v"]);
        let path = json!({"nonResourceAttributes": {"path": "/metrics", "verb": "get"}});
        assert!(matches!(
            attributes_of(&path, None),
            Ok(Attributes::NonResource { .. })
        ));
        assert_eq!(attributes_of(&json!({}), None).unwrap_err().code, 422);
    }
}
