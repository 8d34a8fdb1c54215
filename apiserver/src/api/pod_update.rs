//! What an update may change in a Pod's spec, as kube-apiserver's Pod update validation allows
//! it: the containers' images, `activeDeadlineSeconds` (set or shortened), tolerations (added),
//! `terminationGracePeriodSeconds` (to 1 from a negative value) and scheduling gates (removed).
//! Everything else was settled when the Pod was admitted: its node (bound once, through
//! `pods/binding`), its service account, its security context and its resources. Without this
//! a Pod admitted with one slice could be patched to four after the webhooks said yes.

use serde_json::{Map, Value};

use super::field_errors::{FieldError, Problem};

/// The fields an update may change (kube-apiserver's list, in its words).
const MUTABLE: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// The problems of replacing `old` with `new` (both whole Pods).
pub fn problems(old: &Value, new: &Value) -> Vec<FieldError> {
    let empty = Value::Object(Map::new());
    let old_spec = old.get("spec").unwrap_or(&empty);
    let new_spec = new.get("spec").unwrap_or(&empty);
    let mut out = Vec::new();
    // The spec as the update would leave it with the mutable fields put back as they were:
    // any difference left is a change the update may not make.
    let mut kept = new_spec.clone();
    for list in ["containers", "initContainers"] {
        restore_images(&mut kept, old_spec, list, &mut out);
    }
    restore_deadline(&mut kept, old_spec, new_spec, &mut out);
    restore_tolerations(&mut kept, old_spec, new_spec, &mut out);
    restore_grace_period(&mut kept, old_spec, new_spec);
    restore_scheduling_gates(&mut kept, old_spec, new_spec, &mut out);
    let changed = differences(&without_nulls(old_spec), &without_nulls(&kept), "spec");
    if !changed.is_empty() {
        let shown: Vec<&str> = changed.iter().take(10).map(String::as_str).collect();
        let more = changed.len().saturating_sub(shown.len());
        let mut detail = format!("{MUTABLE}; changed: {}", shown.join(", "));
        if more > 0 {
            detail.push_str(&format!(" and {more} more"));
        }
        out.push(FieldError {
            problem: Problem::Forbidden,
            field: "spec".into(),
            value: None,
            detail,
        });
    }
    out
}

/// Puts the old images back into `kept`, when the container lists line up (a changed list is
/// then reported by the comparison); an emptied image is itself an error.
fn restore_images(kept: &mut Value, old_spec: &Value, list: &str, out: &mut Vec<FieldError>) {
    let (Some(old), Some(new)) = (
        old_spec.get(list).and_then(Value::as_array),
        kept.get_mut(list).and_then(Value::as_array_mut),
    ) else {
        return;
    };
    if old.len() != new.len() {
        return;
    }
    for (i, (o, n)) in old.iter().zip(new.iter_mut()).enumerate() {
        let image = n.get("image").and_then(Value::as_str).unwrap_or("");
        if image.is_empty() && o.get("image").is_some() {
            out.push(FieldError {
                problem: Problem::Required,
                field: format!("spec.{list}[{i}].image"),
                value: None,
                detail: String::new(),
            });
        }
        if let (Some(n), Some(image)) = (n.as_object_mut(), o.get("image")) {
            n.insert("image".into(), image.clone());
        }
    }
}

fn restore_deadline(
    kept: &mut Value,
    old_spec: &Value,
    new_spec: &Value,
    out: &mut Vec<FieldError>,
) {
    let key = "activeDeadlineSeconds";
    let field = format!("spec.{key}");
    let old = old_spec.get(key).and_then(Value::as_i64);
    match (old, new_spec.get(key).filter(|v| !v.is_null())) {
        (Some(_), None) => out.push(FieldError {
            problem: Problem::Invalid,
            field,
            value: Some(Value::Null),
            detail: "must not update from a positive integer to nil value".into(),
        }),
        (_, Some(v)) => match v.as_i64() {
            Some(n) if n <= 0 => out.push(FieldError {
                problem: Problem::Invalid,
                field,
                value: Some(v.clone()),
                detail: "must be a positive integer greater than 0".into(),
            }),
            Some(n) if old.is_some_and(|o| n > o) => out.push(FieldError {
                problem: Problem::Invalid,
                field,
                value: Some(v.clone()),
                detail: "must be less than or equal to previous value".into(),
            }),
            _ => {}
        },
        (None, None) => {}
    }
    put_back(kept, old_spec, key);
}

fn restore_tolerations(
    kept: &mut Value,
    old_spec: &Value,
    new_spec: &Value,
    out: &mut Vec<FieldError>,
) {
    let list = |s: &Value| {
        s.get("tolerations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let new = list(new_spec);
    if list(old_spec).iter().any(|t| !new.contains(t)) {
        out.push(FieldError {
            problem: Problem::Forbidden,
            field: "spec.tolerations".into(),
            value: None,
            detail: "existing toleration can not be modified except its tolerationSeconds".into(),
        });
    }
    put_back(kept, old_spec, "tolerations");
}

fn restore_grace_period(kept: &mut Value, old_spec: &Value, new_spec: &Value) {
    let key = "terminationGracePeriodSeconds";
    let old = old_spec.get(key).and_then(Value::as_i64);
    let new = new_spec.get(key).and_then(Value::as_i64);
    if old.is_some_and(|o| o < 0) && new == Some(1) {
        put_back(kept, old_spec, key);
    }
}

fn restore_scheduling_gates(
    kept: &mut Value,
    old_spec: &Value,
    new_spec: &Value,
    out: &mut Vec<FieldError>,
) {
    let list = |s: &Value| {
        s.get("schedulingGates")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let old = list(old_spec);
    if list(new_spec).iter().any(|g| !old.contains(g)) {
        out.push(FieldError {
            problem: Problem::Forbidden,
            field: "spec.schedulingGates".into(),
            value: None,
            detail: "only deletion is allowed, but found new scheduling gate".into(),
        });
    }
    put_back(kept, old_spec, "schedulingGates");
}

/// Sets `kept[key]` to the old spec's value (or removes it where the old spec had none).
fn put_back(kept: &mut Value, old_spec: &Value, key: &str) {
    let Some(kept) = kept.as_object_mut() else {
        return;
    };
    match old_spec.get(key) {
        Some(v) => kept.insert(key.into(), v.clone()),
        None => kept.remove(key),
    };
}

/// `v` without null members: a field set to null is a field not set.
pub(crate) fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// The paths at which `a` and `b` differ (down to the first level that differs).
fn differences(a: &Value, b: &Value, at: &str) -> Vec<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .flat_map(|k| match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => differences(p, q, &format!("{at}.{k}")),
                    _ => vec![format!("{at}.{k}")],
                })
                .collect()
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .flat_map(|(i, (p, q))| differences(p, q, &format!("{at}[{i}]")))
            .collect(),
        _ if a == b => Vec::new(),
        _ => vec![at.to_owned()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    fn base() -> Value {
        json!({
            "nodeName": "n1",
            "serviceAccountName": "default",
            "containers": [{"name": "main", "image": "cuda:1",
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                "securityContext": {"privileged": false}}],
            "tolerations": [{"key": "a", "operator": "Exists"}],
            "schedulingGates": [{"name": "g1"}, {"name": "g2"}],
        })
    }

    fn with(change: impl FnOnce(&mut Value)) -> Vec<FieldError> {
        let mut new = base();
        change(&mut new);
        problems(&pod(base()), &pod(new))
    }

    #[test]
    fn the_documented_fields_may_change() {
        let allowed = with(|s| {
            s["containers"][0]["image"] = json!("cuda:2");
            s["activeDeadlineSeconds"] = json!(30);
            s["tolerations"]
                .as_array_mut()
                .unwrap()
                .push(json!({"key": "b", "operator": "Exists"}));
            s["schedulingGates"] = json!([{"name": "g2"}]);
        });
        assert_eq!(allowed, vec![]);
        // A null is no value: a client that writes the unset fields as nulls changes nothing.
        assert_eq!(with(|s| s["hostNetwork"] = Value::Null), vec![]);
    }

    #[test]
    fn what_was_admitted_may_not_change() {
        for (change, path) in [
            (json!({"nodeName": "n2"}), "spec.nodeName"),
            (
                json!({"serviceAccountName": "admin"}),
                "spec.serviceAccountName",
            ),
            (
                json!({"containers": [{"name": "main", "image": "cuda:1",
                    "resources": {"limits": {"nvidia.com/gpu": "4"}},
                    "securityContext": {"privileged": false}}]}),
                "spec.containers[0].resources.limits.nvidia.com/gpu",
            ),
            (
                json!({"containers": [{"name": "main", "image": "cuda:1",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    "securityContext": {"privileged": true}}]}),
                "spec.containers[0].securityContext.privileged",
            ),
        ] {
            let errors = with(|s| {
                for (k, v) in change.as_object().unwrap() {
                    s[k] = v.clone();
                }
            });
            assert_eq!(errors.len(), 1, "{change}: {errors:?}");
            assert_eq!(errors[0].problem, Problem::Forbidden);
            assert_eq!(errors[0].field, "spec");
            assert!(errors[0].detail.contains(path), "{}", errors[0].detail);
            assert!(errors[0].detail.starts_with("pod updates may not change"));
        }
        // A container added: the lists no longer line up.
        let added = with(|s| {
            s["containers"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "side", "image": "x"}));
        });
        assert!(added[0].detail.contains("spec.containers"), "{added:?}");
    }

    #[test]
    fn limited_changes_are_checked() {
        let removed = with(|s| s["tolerations"] = json!([]));
        assert_eq!(removed[0].field, "spec.tolerations");
        let gate = with(|s| s["schedulingGates"] = json!([{"name": "g3"}]));
        assert_eq!(gate[0].field, "spec.schedulingGates");
        let emptied = with(|s| s["containers"][0]["image"] = json!(""));
        assert_eq!(emptied[0].field, "spec.containers[0].image");
        assert_eq!(emptied[0].problem, Problem::Required);

        let mut deadline = base();
        deadline["activeDeadlineSeconds"] = json!(30);
        let longer = {
            let mut new = deadline.clone();
            new["activeDeadlineSeconds"] = json!(60);
            problems(&pod(deadline.clone()), &pod(new))
        };
        assert_eq!(
            longer[0].detail,
            "must be less than or equal to previous value"
        );
        let unset = {
            let mut new = deadline.clone();
            new.as_object_mut().unwrap().remove("activeDeadlineSeconds");
            problems(&pod(deadline), &pod(new))
        };
        assert_eq!(unset[0].field, "spec.activeDeadlineSeconds");

        let mut negative = base();
        negative["terminationGracePeriodSeconds"] = json!(-1);
        let mut one = negative.clone();
        one["terminationGracePeriodSeconds"] = json!(1);
        assert_eq!(problems(&pod(negative.clone()), &pod(one)), vec![]);
        let mut two = negative.clone();
        two["terminationGracePeriodSeconds"] = json!(2);
        assert_eq!(problems(&pod(negative), &pod(two)).len(), 1);
    }
}
