//! Server-side apply, simplified: the applied configuration is merged into the object (maps
//! recursively, anything else replaced), and fields a manager applied before but no longer
//! applies are removed. Each manager's applied fields are recorded in `metadata.managedFields`
//! (`FieldsV1`, one entry per manager and subresource). Not modelled: ownership of fields
//! written by updates, conflicts between managers (`force` is accepted and changes nothing),
//! and list merge keys (lists are atomic).

use serde_json::{Map, Value, json};

/// The `FieldsV1` set of an applied configuration: every leaf (a scalar, a list, an empty map)
/// as `f:<key>`. `apiVersion`, `kind`, and `metadata.name`/`namespace` identify the object and are
/// not owned.
pub fn field_set(applied: &Value) -> Value {
    fn walk(v: &Map<String, Value>, root: bool, meta: bool) -> Map<String, Value> {
        let mut out = Map::new();
        for (k, child) in v {
            if (root && matches!(k.as_str(), "apiVersion" | "kind"))
                || (meta
                    && matches!(
                        k.as_str(),
                        "name" | "namespace" | "managedFields" | "resourceVersion" | "uid"
                    ))
            {
                continue;
            }
            let sub = match child {
                Value::Object(m) if !m.is_empty() => {
                    Value::Object(walk(m, false, root && k == "metadata"))
                }
                _ => json!({}),
            };
            if sub.as_object().is_some_and(|m| m.is_empty())
                && matches!(child, Value::Object(m) if !m.is_empty())
            {
                continue;
            }
            out.insert(format!("f:{k}"), sub);
        }
        out
    }
    match applied {
        Value::Object(m) => Value::Object(walk(m, true, false)),
        _ => json!({}),
    }
}

/// The leaf paths of a `FieldsV1` set.
fn leaves(fields: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let Some(m) = fields.as_object() else { return };
    if m.is_empty() {
        out.push(prefix.clone());
        return;
    }
    for (k, v) in m {
        if let Some(key) = k.strip_prefix("f:") {
            prefix.push(key.to_owned());
            leaves(v, prefix, out);
            prefix.pop();
        }
    }
}

fn remove_path(doc: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = doc;
    for p in parents {
        match cur.get_mut(p) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

fn merge(doc: &mut Value, applied: &Value) {
    match (doc, applied) {
        (Value::Object(d), Value::Object(a)) => {
            for (k, v) in a {
                match d.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        d.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (doc, applied) => *doc = applied.clone(),
    }
}

fn entries(obj: &Value) -> Vec<Value> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn is_entry_of(e: &Value, manager: &str, subresource: Option<&str>) -> bool {
    e.get("manager").and_then(Value::as_str) == Some(manager)
        && e.get("operation").and_then(Value::as_str) == Some("Apply")
        && e.get("subresource").and_then(Value::as_str) == subresource
}

/// Records (or refreshes) `manager`'s applied field set on `obj`. The entry's time moves only
/// when its fields change, so re-applying the same configuration changes nothing.
pub fn record(
    obj: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    api_version: &str,
    fields: Value,
    now: jiff::Timestamp,
) {
    let mut all = entries(obj);
    let same = all
        .iter()
        .any(|e| is_entry_of(e, manager, subresource) && e.get("fieldsV1") == Some(&fields));
    if same {
        return;
    }
    all.retain(|e| !is_entry_of(e, manager, subresource));
    let mut entry = json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": super::objects::rfc3339(now),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    });
    if let Some(s) = subresource {
        entry["subresource"] = json!(s);
    }
    all.push(entry);
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]["managedFields"] = Value::Array(all);
}

/// `current` after `manager` applied `applied`.
pub fn apply(
    current: &Value,
    applied: &Value,
    manager: &str,
    subresource: Option<&str>,
    api_version: &str,
    now: jiff::Timestamp,
) -> Value {
    let new_fields = field_set(applied);
    let previous = entries(current)
        .into_iter()
        .find(|e| is_entry_of(e, manager, subresource))
        .and_then(|e| e.get("fieldsV1").cloned())
        .unwrap_or(json!({}));
    let mut doc = current.clone();
    merge(&mut doc, applied);
    let (mut before, mut after) = (Vec::new(), Vec::new());
    leaves(&previous, &mut Vec::new(), &mut before);
    leaves(&new_fields, &mut Vec::new(), &mut after);
    for path in before.iter().filter(|p| !after.contains(p)) {
        remove_path(&mut doc, path);
    }
    // The applied configuration never carries server-owned metadata into the object.
    if let Some(m) = doc.get_mut("metadata").and_then(Value::as_object_mut)
        && let Some(cur) = current.get("metadata")
    {
        match cur.get("managedFields") {
            Some(v) => m.insert("managedFields".into(), v.clone()),
            None => m.remove("managedFields"),
        };
    }
    record(&mut doc, manager, subresource, api_version, new_fields, now);
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn field_sets_name_leaves() {
        let f = field_set(
            &json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a", "labels": {"l": "1"}}, "spec": {"a": 1, "b": [1, 2], "c": {}}}),
        );
        assert_eq!(
            f,
            json!({"f:metadata": {"f:labels": {"f:l": {}}}, "f:spec": {"f:a": {}, "f:b": {}, "f:c": {}}})
        );
    }

    #[test]
    fn a_manager_removes_what_it_no_longer_applies() {
        let obj = json!({"metadata": {"name": "a"}, "spec": {"other": 1}});
        let one = apply(
            &obj,
            &json!({"spec": {"x": 1, "y": 2}}),
            "m",
            None,
            "v1",
            now(),
        );
        assert_eq!(one["spec"], json!({"other": 1, "x": 1, "y": 2}));
        let two = apply(&one, &json!({"spec": {"x": 3}}), "m", None, "v1", now());
        assert_eq!(two["spec"], json!({"other": 1, "x": 3}));
        // Another manager's fields stay.
        let three = apply(&two, &json!({"spec": {"z": 1}}), "n", None, "v1", now());
        assert_eq!(three["spec"], json!({"other": 1, "x": 3, "z": 1}));
        let managers: Vec<&str> = three["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["m", "n"]);
    }

    #[test]
    fn reapplying_the_same_configuration_changes_nothing() {
        let obj = json!({"metadata": {"name": "a"}});
        let one = apply(&obj, &json!({"spec": {"x": 1}}), "m", None, "v1", now());
        let later: jiff::Timestamp = "2027-01-01T00:00:00Z".parse().unwrap();
        let two = apply(&one, &json!({"spec": {"x": 1}}), "m", None, "v1", later);
        assert_eq!(one, two);
    }
}
