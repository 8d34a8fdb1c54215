//! `pods/NAME/ephemeralcontainers` (`kubectl debug`, kube-rs's `*_ephemeral_containers`): the
//! one way a Pod's `spec.ephemeralContainers` changes, as kube-apiserver allows it: containers
//! are only added (never changed or taken back), each with a name unique in the Pod and an
//! image, and without the fields an ephemeral container may not have (ports, probes,
//! resources, lifecycle). Everything else in the written Pod is ignored: the stored Pod with
//! the new list is what is kept. Pure.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::field_errors::{FieldError, Problem};
use super::pod_update::without_nulls;

const LIST: &str = "spec.ephemeralContainers";

/// Fields an ephemeral container may not set (kube-apiserver's
/// `validateEphemeralContainers`).
const NOT_ALLOWED: &[&str] = &[
    "ports",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "resources",
    "resizePolicy",
];

fn containers(spec: &Value, list: &str) -> Vec<Value> {
    spec.get(list)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn name_of(c: &Value) -> &str {
    c.get("name").and_then(Value::as_str).unwrap_or("")
}

/// `current` with `wanted`'s ephemeral containers, or why kube-apiserver would refuse them.
pub fn updated(current: &Value, wanted: &Value) -> Result<Value, Vec<FieldError>> {
    let empty = json!({});
    let spec = current.get("spec").unwrap_or(&empty);
    let old = containers(spec, "ephemeralContainers");
    let new = containers(wanted.get("spec").unwrap_or(&empty), "ephemeralContainers");
    let mut errors = Vec::new();
    for kept in &old {
        match new.iter().find(|c| name_of(c) == name_of(kept)) {
            None => errors.push(FieldError {
                problem: Problem::Forbidden,
                field: LIST.into(),
                value: None,
                detail: format!(
                    "existing ephemeral containers {:?} may not be removed",
                    name_of(kept)
                ),
            }),
            Some(c) if without_nulls(c) != without_nulls(kept) => errors.push(FieldError {
                problem: Problem::Forbidden,
                field: LIST.into(),
                value: None,
                detail: format!(
                    "existing ephemeral containers {:?} may not be changed",
                    name_of(kept)
                ),
            }),
            Some(_) => {}
        }
    }
    let mut names: BTreeSet<String> = ["containers", "initContainers"]
        .iter()
        .flat_map(|l| containers(spec, l))
        .map(|c| name_of(&c).to_owned())
        .collect();
    for (i, c) in new.iter().enumerate() {
        let at = format!("{LIST}[{i}]");
        let name = name_of(c);
        if name.is_empty() {
            errors.push(required(&format!("{at}.name")));
        } else if !names.insert(name.to_owned()) {
            errors.push(FieldError {
                problem: Problem::Duplicate,
                field: format!("{at}.name"),
                value: Some(json!(name)),
                detail: String::new(),
            });
        }
        if c.get("image")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            errors.push(required(&format!("{at}.image")));
        }
        for field in NOT_ALLOWED {
            if c.get(*field).is_some_and(|v| !is_empty(v)) {
                errors.push(FieldError {
                    problem: Problem::Forbidden,
                    field: format!("{at}.{field}"),
                    value: None,
                    detail: "cannot be set for an Ephemeral Container".into(),
                });
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut out = current.clone();
    if !out["spec"].is_object() {
        out["spec"] = json!({});
    }
    match out["spec"].as_object_mut() {
        Some(s) if new.is_empty() => {
            s.remove("ephemeralContainers");
        }
        Some(s) => {
            s.insert("ephemeralContainers".into(), Value::Array(new));
        }
        None => {}
    }
    Ok(out)
}

fn required(field: &str) -> FieldError {
    FieldError {
        problem: Problem::Required,
        field: field.into(),
        value: None,
        detail: String::new(),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ephemeral: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "main", "image": "app:1"}],
            "ephemeralContainers": ephemeral}})
    }

    fn problems(r: Result<Value, Vec<FieldError>>) -> Vec<String> {
        r.unwrap_err().iter().map(FieldError::message).collect()
    }

    #[test]
    fn containers_are_added_and_nothing_else_changes() {
        let current = pod(json!([]));
        let wanted = json!({"metadata": {"labels": {"ignored": "yes"}}, "spec": {
            "containers": [{"name": "main", "image": "changed:2"}],
            "ephemeralContainers": [{"name": "debug", "image": "busybox"}]}});
        let out = updated(&current, &wanted).unwrap();
        assert_eq!(out["spec"]["containers"][0]["image"], "app:1");
        assert_eq!(out["spec"]["ephemeralContainers"][0]["name"], "debug");
        assert!(out["metadata"].get("labels").is_none());
    }

    #[test]
    fn existing_ones_stay_as_they_were() {
        let current = pod(json!([{"name": "debug", "image": "busybox"}]));
        assert_eq!(
            problems(updated(&current, &pod(json!([])))),
            [
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debug\" may not be removed"
            ]
        );
        let changed = pod(json!([{"name": "debug", "image": "other"}]));
        assert_eq!(
            problems(updated(&current, &changed)),
            [
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debug\" may not be changed"
            ]
        );
        let explicit_null = pod(json!([{"name": "debug", "image": "busybox", "args": null}]));
        assert!(updated(&current, &explicit_null).is_ok());
    }

    #[test]
    fn new_ones_need_a_unique_name_an_image_and_no_ports() {
        let wanted = pod(json!([
            {"name": "main", "image": "busybox"},
            {"name": "", "image": ""},
            {"name": "p", "image": "x", "ports": [{"containerPort": 80}]}
        ]));
        assert_eq!(
            problems(updated(&pod(json!([])), &wanted)),
            [
                "spec.ephemeralContainers[0].name: Duplicate value: \"main\"",
                "spec.ephemeralContainers[1].name: Required value",
                "spec.ephemeralContainers[1].image: Required value",
                "spec.ephemeralContainers[2].ports: Forbidden: cannot be set for an Ephemeral Container",
            ]
        );
    }
}
