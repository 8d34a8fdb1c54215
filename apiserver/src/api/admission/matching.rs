//! Pure parts of admission: webhooks read from their configuration objects, which requests
//! they apply to (`rules`, `namespaceSelector`, `objectSelector`), the `AdmissionReview` sent
//! and the reading of the one that comes back.
//!
//! `matchPolicy: Equivalent` is treated as `Exact`: the embedded cluster serves each resource
//! under one group and resource name, with no equivalent resources to convert to.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use base64::Engine;
use serde_json::{Value, json};

use super::conditions::{self, Condition};

/// The `timeoutSeconds` of a webhook that sets none, and the most it may set.
const DEFAULT_TIMEOUT: u64 = 10;
const MAX_TIMEOUT: u64 = 30;

/// What a request does, as admission names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// A create.
    Create,
    /// An update, a patch or an apply to an existing object.
    Update,
    /// A delete.
    Delete,
}

impl Operation {
    /// The operation as AdmissionReview and rules spell it (`CREATE`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// Why a webhook's `clientConfig` names no endpoint.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// `clientConfig.url` is not `https://`.
    #[error("clientConfig.url must be https: {0}")]
    NotHttps(String),
    /// `clientConfig.service` lacks its namespace or name.
    #[error("clientConfig.service needs a namespace and a name")]
    ServiceIncomplete,
    /// `clientConfig` names both a URL and a Service, or neither.
    #[error("clientConfig needs exactly one of url and service")]
    NotOne,
}

/// Why a webhook's answer is not one (the call failed).
#[derive(Debug, thiserror::Error)]
pub enum ResponseError {
    /// The response body is not JSON.
    #[error("the response is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// The response is not an `admission.k8s.io/v1` AdmissionReview.
    #[error("expected an admission.k8s.io/v1 AdmissionReview in response")]
    NotReview,
    /// The AdmissionReview has no `response`.
    #[error("the AdmissionReview has no response")]
    NoResponse,
    /// The response answers another request (its uid differs).
    #[error("expected response.uid=\"{want}\", got \"{got}\"")]
    Uid {
        /// The request's uid.
        want: String,
        /// The uid the response carries.
        got: String,
    },
    /// A validating webhook returned a patch.
    #[error("validating webhook may not return a patch")]
    PatchFromValidating,
    /// The patch is not valid base64.
    #[error("the patch is not base64: {0}")]
    PatchNotBase64(#[source] base64::DecodeError),
    /// The patch type is not `JSONPatch`.
    #[error("unsupported patch type {0}")]
    PatchType(Value),
}

/// Where a webhook is served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// An `https://` URL.
    Url(String),
    /// A Service of the cluster, resolved at call time.
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// The Service port called (443 unless given).
        port: u16,
        /// The path called on it.
        path: String,
    },
}

/// One webhook of a Mutating- or ValidatingWebhookConfiguration.
#[derive(Clone, Debug)]
pub struct Hook {
    /// The configuration it is part of.
    pub configuration: String,
    /// The webhook's name.
    pub name: String,
    /// Whether it is a mutating webhook (else validating).
    pub mutating: bool,
    /// Its `rules`, as written.
    pub rules: Vec<Value>,
    /// Its `namespaceSelector` (empty: every namespace).
    pub namespace_selector: Value,
    /// Its `objectSelector` (empty: every object).
    pub object_selector: Value,
    /// Where it is called, or why its `clientConfig` names nowhere usable.
    pub endpoint: Result<Endpoint, EndpointError>,
    /// The PEM `caBundle`, decoded from base64.
    pub ca_bundle: Option<Vec<u8>>,
    /// How long a call may take (`timeoutSeconds`).
    pub timeout: Duration,
    /// `failurePolicy: Ignore`.
    pub ignore_failures: bool,
    /// `sideEffects` is `None` or `NoneOnDryRun`: the webhook may be called on dry runs.
    pub dry_run_safe: bool,
    /// `admissionReviewVersions` includes `v1`.
    pub speaks_v1: bool,
    /// Its `matchConditions`, compiled.
    pub conditions: Arc<Vec<Condition>>,
}

/// The webhooks of `configs` (of one kind), ordered as Kubernetes calls them: by configuration
/// name, then in their order within it.
pub fn hooks_of(configs: &[Value], mutating: bool) -> Vec<Hook> {
    let mut configs: Vec<&Value> = configs.iter().collect();
    configs.sort_by_key(|c| crate::api::objects::name_of(c).to_owned());
    let mut hooks = Vec::new();
    for c in configs {
        let configuration = crate::api::objects::name_of(c).to_owned();
        for w in c
            .get("webhooks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            hooks.push(hook_of(&configuration, w, mutating));
        }
    }
    hooks
}

fn hook_of(configuration: &str, w: &Value, mutating: bool) -> Hook {
    let str_at = |p: &str| w.pointer(p).and_then(Value::as_str);
    let client = &w["clientConfig"];
    let endpoint = match (
        client.get("url").and_then(Value::as_str),
        client.get("service"),
    ) {
        (Some(url), None) if url.starts_with("https://") => Ok(Endpoint::Url(url.to_owned())),
        (Some(url), None) => Err(EndpointError::NotHttps(url.to_owned())),
        (None, Some(s)) => match (
            s.get("namespace").and_then(Value::as_str),
            s.get("name").and_then(Value::as_str),
        ) {
            (Some(namespace), Some(name)) => Ok(Endpoint::Service {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                port: s
                    .get("port")
                    .and_then(Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
                path: s
                    .get("path")
                    .and_then(Value::as_str)
                    .unwrap_or("/")
                    .to_owned(),
            }),
            _ => Err(EndpointError::ServiceIncomplete),
        },
        _ => Err(EndpointError::NotOne),
    };
    let ca_bundle = client
        .get("caBundle")
        .and_then(Value::as_str)
        .filter(|b| !b.is_empty())
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
    let timeout = w
        .get("timeoutSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_TIMEOUT)
        .clamp(1, MAX_TIMEOUT);
    Hook {
        configuration: configuration.to_owned(),
        name: str_at("/name").unwrap_or_default().to_owned(),
        mutating,
        rules: w
            .get("rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        namespace_selector: w.get("namespaceSelector").cloned().unwrap_or(Value::Null),
        object_selector: w.get("objectSelector").cloned().unwrap_or(Value::Null),
        endpoint,
        ca_bundle,
        timeout: Duration::from_secs(timeout),
        ignore_failures: str_at("/failurePolicy") == Some("Ignore"),
        dry_run_safe: matches!(str_at("/sideEffects"), Some("None" | "NoneOnDryRun")),
        speaks_v1: w
            .get("admissionReviewVersions")
            .and_then(Value::as_array)
            .is_some_and(|v| v.iter().any(|v| v == "v1")),
        conditions: Arc::new(conditions::of_webhook(w)),
    }
}

/// What a request is, for matching and for the review.
#[derive(Clone, Debug)]
pub struct Attributes {
    /// The object's API group.
    pub group: String,
    /// The version the request was made in.
    pub version: String,
    /// The object's kind.
    pub kind: String,
    /// The resource (plural) written.
    pub resource: String,
    /// The subresource written (`status`), if any.
    pub subresource: Option<String>,
    /// Whether the kind is namespaced (rules' `scope`).
    pub namespaced: bool,
    /// The object's namespace, if namespaced.
    pub namespace: Option<String>,
    /// The object's name (empty for a create with `generateName` before it has one).
    pub name: String,
    /// What the write does.
    pub operation: Operation,
    /// Whether the request is a dry run.
    pub dry_run: bool,
    /// CreateOptions, UpdateOptions, PatchOptions or DeleteOptions.
    pub options: Value,
}

fn listed(list: &Value, want: &str) -> bool {
    list.as_array()
        .is_some_and(|l| l.iter().any(|v| v == "*" || v == want))
}

/// Whether a `resources` entry names `resource` (and `subresource`): `*` is every resource,
/// `*/*` every resource and subresource, `r/*` every subresource of `r`, `*/s` subresource `s`
/// of every resource.
fn resource_listed(entry: &str, resource: &str, subresource: Option<&str>) -> bool {
    let (r, s) = match entry.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (entry, None),
    };
    let resource_ok = r == "*" || r == resource;
    let sub_ok = match (s, subresource) {
        (None, None) => true,
        (Some("*"), Some(_)) => true,
        (Some(s), Some(want)) => s == want,
        _ => false,
    };
    resource_ok && sub_ok
}

/// Whether one of `rules` covers the request.
pub fn rules_match(rules: &[Value], a: &Attributes) -> bool {
    rules.iter().any(|rule| {
        let scope_ok = match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
            "Cluster" => !a.namespaced,
            "Namespaced" => a.namespaced,
            _ => true,
        };
        scope_ok
            && listed(&rule["operations"], a.operation.as_str())
            && listed(&rule["apiGroups"], &a.group)
            && listed(&rule["apiVersions"], &a.version)
            && rule["resources"].as_array().is_some_and(|l| {
                l.iter()
                    .filter_map(Value::as_str)
                    .any(|e| resource_listed(e, &a.resource, a.subresource.as_deref()))
            })
    })
}

/// Whether `labels` meet a `metav1.LabelSelector` (null or `{}` selects everything). A
/// selector it cannot read selects nothing.
pub fn selector_matches(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    if selector.is_null() {
        return true;
    }
    let by_label = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| {
            v.as_str()
                .is_some_and(|v| labels.get(k).map(String::as_str) == Some(v))
        });
    let by_expression = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|e| {
            let Some(key) = e.get("key").and_then(Value::as_str) else {
                return false;
            };
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let have = labels.get(key).map(String::as_str);
            match e.get("operator").and_then(Value::as_str) {
                Some("In") => have.is_some_and(|h| values.contains(&h)),
                Some("NotIn") => have.is_none_or(|h| !values.contains(&h)),
                Some("Exists") => have.is_some(),
                Some("DoesNotExist") => have.is_none(),
                _ => false,
            }
        });
    by_label && by_expression
}

/// Whether a selector selects everything, so that no labels need be read for it.
pub fn selects_all(selector: &Value) -> bool {
    let empty = |k: &str| {
        selector.get(k).is_none_or(|v| {
            v.is_null()
                || v.as_object().is_some_and(|m| m.is_empty())
                || v.as_array().is_some_and(|a| a.is_empty())
        })
    };
    selector.is_null() || (empty("matchLabels") && empty("matchExpressions"))
}

/// The `AdmissionReview` of a request by `user` (its `userInfo`).
pub fn review(
    uid: &str,
    a: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
    user: &Value,
) -> Value {
    let kind = json!({"group": a.group, "version": a.version, "kind": a.kind});
    let resource = json!({"group": a.group, "version": a.version, "resource": a.resource});
    let mut request = json!({
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": a.name,
        "operation": a.operation.as_str(),
        "userInfo": user,
        "object": object.cloned().unwrap_or(Value::Null),
        "oldObject": old.cloned().unwrap_or(Value::Null),
        "dryRun": a.dry_run,
        "options": a.options,
    });
    if let Some(ns) = &a.namespace {
        request["namespace"] = json!(ns);
    }
    if let Some(s) = &a.subresource {
        request["subResource"] = json!(s);
        request["requestSubResource"] = json!(s);
    }
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request,
    })
}

/// What a webhook answered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdict {
    /// Whether the webhook admitted the request.
    pub allowed: bool,
    /// The decoded JSON patch of a mutating webhook.
    pub patch: Option<Vec<u8>>,
    /// The response's `status`, when it denies.
    pub status: Value,
    /// The webhook's warnings, for the response's `Warning` headers.
    pub warnings: Vec<String>,
}

/// Reads a webhook's answer to the review with `uid`; an error is a failed call.
pub fn read_response(body: &[u8], uid: &str, mutating: bool) -> Result<Verdict, ResponseError> {
    let v: Value = serde_json::from_slice(body).map_err(ResponseError::NotJson)?;
    if v.get("apiVersion").and_then(Value::as_str) != Some("admission.k8s.io/v1")
        || v.get("kind").and_then(Value::as_str) != Some("AdmissionReview")
    {
        return Err(ResponseError::NotReview);
    }
    let r = v
        .get("response")
        .filter(|r| r.is_object())
        .ok_or(ResponseError::NoResponse)?;
    if r.get("uid").and_then(Value::as_str) != Some(uid) {
        return Err(ResponseError::Uid {
            want: uid.to_owned(),
            got: r
                .get("uid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        });
    }
    let allowed = r.get("allowed").and_then(Value::as_bool).unwrap_or(false);
    let patch = match (r.get("patch").and_then(Value::as_str), r.get("patchType")) {
        (None, _) => None,
        (Some(_), _) if !mutating => {
            return Err(ResponseError::PatchFromValidating);
        }
        (Some(p), Some(t)) if t == "JSONPatch" => Some(
            base64::engine::general_purpose::STANDARD
                .decode(p)
                .map_err(ResponseError::PatchNotBase64)?,
        ),
        (Some(_), t) => {
            return Err(ResponseError::PatchType(t.cloned().unwrap_or(Value::Null)));
        }
    };
    Ok(Verdict {
        allowed,
        patch: patch.filter(|_| allowed),
        status: r.get("status").cloned().unwrap_or(Value::Null),
        warnings: r
            .get("warnings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(String::from))
            .collect(),
    })
}

/// The reasons a denial may carry through (the `Status` reasons Kubernetes defines).
const REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

/// A webhook's refusal, returned to the client as kube-apiserver returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Denial {
    /// The HTTP status the client gets.
    pub code: u16,
    /// The `Status` reason (`Forbidden`, ...).
    pub reason: &'static str,
    /// The message the client gets.
    pub message: String,
    /// The webhook's own `details` (kind, name, per-field `causes`), untouched.
    pub details: Option<Value>,
}

/// The error of a denial, as kube-apiserver words it: the webhook's status code (at least
/// 400), its reason, its details (with their causes), and `admission webhook "NAME" denied the
/// request: MESSAGE` (the reason when there is no message, "without explanation" when there is
/// neither).
pub fn denial(hook: &str, status: &Value) -> Denial {
    let code = status
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400);
    let given = status.get("reason").and_then(Value::as_str).unwrap_or("");
    let reason = REASONS.iter().copied().find(|r| *r == given).unwrap_or("");
    let denied = format!("admission webhook \"{hook}\" denied the request");
    let message = match status.get("message").and_then(Value::as_str) {
        Some(m) if !m.is_empty() => format!("{denied}: {m}"),
        _ if !given.is_empty() => format!("{denied}: {given}"),
        _ => format!("{denied} without explanation"),
    };
    Denial {
        code,
        reason,
        message,
        details: status
            .get("details")
            .filter(|d| d.as_object().is_some_and(|m| !m.is_empty()))
            .cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(resource: &str, sub: Option<&str>, op: Operation) -> Attributes {
        Attributes {
            group: "".into(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            resource: resource.into(),
            subresource: sub.map(String::from),
            namespaced: true,
            namespace: Some("default".into()),
            name: "x".into(),
            operation: op,
            dry_run: false,
            options: json!({}),
        }
    }

    fn rule(resources: Value, ops: Value) -> Value {
        json!({"apiGroups": [""], "apiVersions": ["v1"], "resources": resources, "operations": ops})
    }

    #[test]
    fn rules_match_resources_subresources_and_operations() {
        let a = attrs("configmaps", None, Operation::Create);
        assert!(rules_match(
            &[rule(json!(["configmaps"]), json!(["CREATE"]))],
            &a
        ));
        assert!(rules_match(&[rule(json!(["*"]), json!(["*"]))], &a));
        assert!(!rules_match(&[rule(json!(["secrets"]), json!(["*"]))], &a));
        assert!(!rules_match(
            &[rule(json!(["configmaps"]), json!(["UPDATE"]))],
            &a
        ));
        let status = attrs("configmaps", Some("status"), Operation::Update);
        assert!(!rules_match(
            &[rule(json!(["configmaps"]), json!(["*"]))],
            &status
        ));
        assert!(!rules_match(&[rule(json!(["*"]), json!(["*"]))], &status));
        assert!(rules_match(
            &[rule(json!(["configmaps/status"]), json!(["*"]))],
            &status
        ));
        assert!(rules_match(&[rule(json!(["*/*"]), json!(["*"]))], &status));
        assert!(rules_match(
            &[rule(json!(["*/status"]), json!(["*"]))],
            &status
        ));
        assert!(rules_match(
            &[rule(json!(["configmaps/*"]), json!(["*"]))],
            &status
        ));
        let mut scoped = rule(json!(["*"]), json!(["*"]));
        scoped["scope"] = json!("Cluster");
        assert!(!rules_match(&[scoped.clone()], &a));
        scoped["scope"] = json!("Namespaced");
        assert!(rules_match(&[scoped], &a));
        let mut other_group = rule(json!(["*"]), json!(["*"]));
        other_group["apiGroups"] = json!(["apps"]);
        assert!(!rules_match(&[other_group], &a));
    }

    #[test]
    fn selectors_match_labels_and_expressions() {
        let labels: BTreeMap<String, String> = [("env".to_string(), "prod".to_string())]
            .into_iter()
            .collect();
        assert!(selector_matches(&Value::Null, &labels));
        assert!(selector_matches(&json!({}), &labels));
        assert!(selector_matches(
            &json!({"matchLabels": {"env": "prod"}}),
            &labels
        ));
        assert!(!selector_matches(
            &json!({"matchLabels": {"env": "dev"}}),
            &labels
        ));
        let expr = |op: &str, values: Value| json!({"matchExpressions": [{"key": "env", "operator": op, "values": values}]});
        assert!(selector_matches(
            &expr("In", json!(["prod", "qa"])),
            &labels
        ));
        assert!(!selector_matches(&expr("NotIn", json!(["prod"])), &labels));
        assert!(selector_matches(&expr("Exists", Value::Null), &labels));
        assert!(!selector_matches(
            &expr("DoesNotExist", Value::Null),
            &labels
        ));
        assert!(!selector_matches(&expr("Bogus", Value::Null), &labels));
        assert!(selects_all(&json!({})));
        assert!(selects_all(&json!({"matchLabels": {}})));
        assert!(!selects_all(&expr("Exists", Value::Null)));
    }

    #[test]
    fn hooks_are_ordered_by_configuration_then_position() {
        let cfg = |name: &str, hooks: &[&str]| {
            json!({"metadata": {"name": name}, "webhooks": hooks.iter().map(|h| json!({
                "name": h,
                "clientConfig": {"url": "https://127.0.0.1:9443/x", "caBundle": "aGk="},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1beta1", "v1"],
                "timeoutSeconds": 99,
            })).collect::<Vec<_>>()})
        };
        let hooks = hooks_of(&[cfg("b", &["b1"]), cfg("a", &["a2", "a1"])], true);
        let names: Vec<&str> = hooks.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["a2", "a1", "b1"]);
        let h = &hooks[0];
        assert!(h.speaks_v1 && h.dry_run_safe && !h.ignore_failures && h.mutating);
        assert_eq!(h.timeout, Duration::from_secs(30));
        assert_eq!(h.ca_bundle.as_deref(), Some(&b"hi"[..]));
        assert_eq!(
            h.endpoint,
            Ok(Endpoint::Url("https://127.0.0.1:9443/x".into()))
        );
        let svc = hook_of(
            "c",
            &json!({"name": "s", "clientConfig": {"service": {"namespace": "n", "name": "m"}}}),
            false,
        );
        assert_eq!(
            svc.endpoint,
            Ok(Endpoint::Service {
                namespace: "n".into(),
                name: "m".into(),
                port: 443,
                path: "/".into()
            })
        );
        assert!(!svc.speaks_v1 && !svc.dry_run_safe);
        assert_eq!(svc.timeout, Duration::from_secs(10));
        let plain = hook_of("c", &json!({"clientConfig": {"url": "http://x/"}}), false);
        assert!(plain.endpoint.is_err());
    }

    #[test]
    fn reviews_carry_the_request() {
        let mut a = attrs("configmaps", Some("status"), Operation::Delete);
        a.dry_run = true;
        let old = json!({"metadata": {"name": "x"}});
        let user = json!({"username": "system:serviceaccount:ns:bot", "groups": ["system:serviceaccounts"]});
        let r = review("u1", &a, None, Some(&old), &user);
        assert_eq!(r["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(r["request"]["uid"], "u1");
        assert_eq!(r["request"]["operation"], "DELETE");
        assert_eq!(r["request"]["object"], Value::Null);
        assert_eq!(r["request"]["oldObject"], old);
        assert_eq!(r["request"]["dryRun"], true);
        assert_eq!(r["request"]["subResource"], "status");
        assert_eq!(r["request"]["namespace"], "default");
        assert_eq!(r["request"]["resource"]["resource"], "configmaps");
        assert_eq!(r["request"]["userInfo"], user);
    }

    #[test]
    fn responses_are_read_and_checked() {
        let ok = |resp: Value| {
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp})
                .to_string()
        };
        let patch = base64::engine::general_purpose::STANDARD.encode(b"[]");
        let v = read_response(
            ok(json!({"uid": "u", "allowed": true, "patchType": "JSONPatch", "patch": patch, "warnings": ["w"]})).as_bytes(),
            "u",
            true,
        )
        .unwrap();
        assert!(v.allowed);
        assert_eq!(v.patch.as_deref(), Some(&b"[]"[..]));
        assert_eq!(v.warnings, ["w"]);
        assert!(
            read_response(
                ok(json!({"uid": "other", "allowed": true})).as_bytes(),
                "u",
                true
            )
            .is_err()
        );
        assert!(
            read_response(
                ok(json!({"uid": "u", "allowed": true, "patchType": "JSONPatch", "patch": patch}))
                    .as_bytes(),
                "u",
                false
            )
            .is_err()
        );
        assert!(read_response(b"nope", "u", true).is_err());
        let denied = read_response(
            ok(json!({"uid": "u", "allowed": false})).as_bytes(),
            "u",
            false,
        )
        .unwrap();
        assert!(!denied.allowed);
    }

    #[test]
    fn denials_are_worded_as_kube_apiserver_words_them() {
        let d = denial("h.example.com", &json!({"message": "no"}));
        assert_eq!((d.code, d.reason, d.details), (400, "", None));
        assert_eq!(
            d.message,
            "admission webhook \"h.example.com\" denied the request: no"
        );
        let d = denial("h", &json!({"code": 403, "reason": "Forbidden"}));
        assert_eq!((d.code, d.reason), (403, "Forbidden"));
        let d = denial("h", &Value::Null);
        assert_eq!(d.code, 400);
        assert_eq!(
            d.message,
            "admission webhook \"h\" denied the request without explanation"
        );
        assert_eq!(denial("h", &json!({"code": 200})).code, 400);
        // The per-field causes come back as the webhook wrote them.
        let details = json!({"kind": "Pod", "name": "p", "causes": [
            {"reason": "FieldValueForbidden", "field": "spec.containers[0].resources.limits[nvidia.com/gpu]", "message": "Forbidden: no"},
        ]});
        let d = denial(
            "h",
            &json!({"code": 422, "reason": "Invalid", "message": "Pod \"p\" is invalid", "details": details}),
        );
        assert_eq!((d.code, d.reason), (422, "Invalid"));
        assert_eq!(d.details, Some(details));
    }
}
