//! CertificateSigningRequests (`certificates.k8s.io/v1`): the server fills in who asked, and
//! the `approval` subresource changes nothing but the `Approved`/`Denied` conditions, as
//! kube-apiserver does (`kubectl certificate approve|deny`). Nothing signs an approved
//! request here: a signer writes `status.certificate` through `/status`. Pure.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::auth::UserInfo;

/// What makes a CertificateSigningRequest invalid.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CsrError {
    /// The named `spec` field is missing.
    #[error("spec.{0}: Required value")]
    Required(&'static str),
    /// The request is both approved and denied (the index of the later condition).
    #[error(
        "status.conditions[{0}].type: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"
    )]
    ApprovedAndDenied(usize),
    /// An Approved or Denied condition's status is not `True`.
    #[error("status.conditions[{0}].status: Unsupported value: {1}: supported values: \"True\"")]
    NotTrue(usize, String),
    /// Two conditions have the same type.
    #[error("status.conditions[{0}].type: Duplicate value: {1}")]
    Duplicate(usize, String),
    /// An update removed an Approved or Denied condition.
    #[error("status.conditions: Forbidden: updates may not remove a condition of type {0:?}")]
    Removed(String),
}

/// Whether `group`/`plural` are CertificateSigningRequests.
pub fn is_csr(group: &str, plural: &str) -> bool {
    group == "certificates.k8s.io" && plural == "certificatesigningrequests"
}

/// A new request as stored: the requester's identity (whatever the client wrote there) and no
/// status; refused without a request or a signer.
pub fn prepared(mut obj: Value, user: &UserInfo) -> Result<Value, CsrError> {
    for field in ["request", "signerName"] {
        if obj["spec"][field].as_str().is_none_or(str::is_empty) {
            return Err(CsrError::Required(field));
        }
    }
    let spec = &mut obj["spec"];
    spec["username"] = json!(user.username);
    spec["uid"] = json!(user.uid);
    spec["groups"] = json!(user.groups);
    if user.extra.is_empty() {
        if let Some(m) = spec.as_object_mut() {
            m.remove("extra");
        }
    } else {
        spec["extra"] = json!(user.extra);
    }
    if let Some(m) = obj.as_object_mut() {
        m.remove("status");
    }
    Ok(obj)
}

const DECISIONS: &[&str] = &["Approved", "Denied"];

/// `current` with the conditions of `wanted` (an approval update): Approved and Denied are
/// exclusive, `True`, once each, and never taken back; their times are filled in at `now`.
pub fn approved(current: &Value, wanted: &Value, now: &str) -> Result<Value, CsrError> {
    let mut conditions: Vec<Value> = wanted
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut seen = BTreeSet::new();
    for (i, c) in conditions.iter_mut().enumerate() {
        let kind = c["type"].as_str().unwrap_or_default().to_owned();
        if !DECISIONS.contains(&kind.as_str()) {
            continue;
        }
        if c["status"].as_str().unwrap_or_default() != "True" {
            return Err(CsrError::NotTrue(i, c["status"].to_string()));
        }
        if !seen.insert(kind.clone()) {
            return Err(CsrError::Duplicate(i, format!("{kind:?}")));
        }
        if seen.len() == DECISIONS.len() {
            return Err(CsrError::ApprovedAndDenied(i));
        }
        for time in ["lastUpdateTime", "lastTransitionTime"] {
            if c[time].as_str().is_none_or(str::is_empty) {
                c[time] = json!(now);
            }
        }
    }
    let had = current
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str())
        .filter(|t| DECISIONS.contains(t));
    for kind in had {
        if !seen.contains(kind) {
            return Err(CsrError::Removed(kind.to_owned()));
        }
    }
    let mut out = current.clone();
    if !out["status"].is_object() {
        out["status"] = json!({});
    }
    out["status"]["conditions"] = Value::Array(conditions);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> UserInfo {
        UserInfo {
            username: "alice".into(),
            uid: "1".into(),
            groups: vec!["system:authenticated".into()],
            extra: Default::default(),
        }
    }

    #[test]
    fn the_requester_is_who_asked() {
        let obj = json!({"spec": {"request": "LS0t", "signerName": "example.com/x",
            "username": "mallory"}, "status": {"certificate": "Zm9v"}});
        let stored = prepared(obj, &user()).unwrap();
        assert_eq!(stored["spec"]["username"], "alice");
        assert!(stored.get("status").is_none());
        let missing = json!({"spec": {"signerName": "example.com/x"}});
        assert_eq!(
            prepared(missing, &user()),
            Err(CsrError::Required("request"))
        );
    }

    #[test]
    fn approval_sets_conditions_only() {
        let current = json!({"spec": {"request": "LS0t"}, "status": {}});
        let wanted = json!({"spec": {"request": "changed"}, "status": {"conditions": [
            {"type": "Approved", "status": "True", "reason": "KubectlApprove"}]}});
        let out = approved(&current, &wanted, "2026-01-01T00:00:00Z").unwrap();
        assert_eq!(out["spec"]["request"], "LS0t");
        assert_eq!(
            out["status"]["conditions"][0]["lastUpdateTime"],
            "2026-01-01T00:00:00Z"
        );
        let both = json!({"status": {"conditions": [{"type": "Approved", "status": "True"},
            {"type": "Denied", "status": "True"}]}});
        assert_eq!(
            approved(&current, &both, "t"),
            Err(CsrError::ApprovedAndDenied(1))
        );
        assert_eq!(
            approved(&out, &json!({"status": {"conditions": []}}), "t"),
            Err(CsrError::Removed("Approved".into()))
        );
    }
}
