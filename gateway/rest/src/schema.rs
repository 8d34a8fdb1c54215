//! Custom-resource schemas at write time: fields a CRD's structural schema does not know are
//! pruned, as the Kubernetes API server does, and reported for `fieldValidation` (`Strict`
//! refuses the request, `Warn` answers with `Warning` headers, `Ignore` says nothing); and the
//! schema's `default`s are applied (structural defaulting), on writes and on reads.

use serde_json::{Map, Value};

/// What a request asked `fieldValidation` to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    pub fn parse(s: Option<&str>) -> Result<Self, String> {
        match s {
            None | Some("") | Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Warn\", \"Strict\""
            )),
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

fn prune_value(schema: &Value, v: &mut Value, path: &str, unknown: &mut Vec<String>) {
    match v {
        Value::Object(m) => prune_object(schema, m, path, unknown, false),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_value(item_schema, item, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

fn prune_object(
    schema: &Value,
    m: &mut Map<String, Value>,
    path: &str,
    unknown: &mut Vec<String>,
    root: bool,
) {
    if preserves_unknown(schema) && schema.get("properties").is_none() {
        return;
    }
    let embedded = root
        || schema
            .get("x-kubernetes-embedded-resource")
            .and_then(Value::as_bool)
            == Some(true);
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    let keep_unknown =
        preserves_unknown(schema) || additional.is_some_and(|a| a.as_bool() == Some(true));
    let keys: Vec<String> = m.keys().cloned().collect();
    for k in keys {
        if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let child = props
            .and_then(|p| p.get(&k))
            .or_else(|| additional.filter(|a| a.is_object()));
        match child {
            Some(s) => {
                if let Some(v) = m.get_mut(&k) {
                    prune_value(s, v, &join(path, &k), unknown);
                }
            }
            None if keep_unknown => {}
            None if props.is_none()
                && additional.is_none()
                && schema.get("type").and_then(Value::as_str) != Some("object") => {}
            None => {
                unknown.push(join(path, &k));
                m.remove(&k);
            }
        }
    }
}

/// Removes from `obj` what `schema` (a CRD's `openAPIV3Schema`) does not define; returns the
/// dotted paths removed.
pub fn prune(schema: &Value, obj: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if let Value::Object(m) = obj {
        prune_object(schema, m, "", &mut unknown, true);
    }
    unknown
}

fn nullable(schema: &Value) -> bool {
    schema.get("nullable").and_then(Value::as_bool) == Some(true)
}

/// Settles the member `k` of `m` that `schema` describes: an absent or (where not nullable)
/// null member takes the default; a null one without a default goes, as Kubernetes prunes
/// such nulls before defaulting. Then the member's own members are settled.
fn default_member(schema: &Value, m: &mut Map<String, Value>, k: &str) {
    let null = m.get(k).is_some_and(Value::is_null);
    if m.get(k).is_none() || (null && !nullable(schema)) {
        match schema.get("default") {
            Some(d) => {
                m.insert(k.to_owned(), d.clone());
            }
            None => {
                m.remove(k);
            }
        }
    }
    if let Some(v) = m.get_mut(k) {
        default_value(schema, v);
    }
}

fn default_value(schema: &Value, v: &mut Value) {
    match v {
        Value::Object(m) => default_object(schema, m, false),
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items") else {
                return;
            };
            for item in items {
                if item.is_null()
                    && !nullable(item_schema)
                    && let Some(d) = item_schema.get("default")
                {
                    *item = d.clone();
                }
                default_value(item_schema, item);
            }
        }
        _ => {}
    }
}

fn default_object(schema: &Value, m: &mut Map<String, Value>, root: bool) {
    let embedded = root
        || schema
            .get("x-kubernetes-embedded-resource")
            .and_then(Value::as_bool)
            == Some(true);
    // A resource's apiVersion, kind and metadata are the API server's, not the schema's.
    let own = |k: &str| !(embedded && matches!(k, "apiVersion" | "kind" | "metadata"));
    let props = schema.get("properties").and_then(Value::as_object);
    for (k, child) in props.into_iter().flatten() {
        if own(k) {
            default_member(child, m, k);
        }
    }
    if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        let keys: Vec<String> = m
            .keys()
            .filter(|k| own(k) && !props.is_some_and(|p| p.contains_key(*k)))
            .cloned()
            .collect();
        for k in keys {
            default_member(additional, m, &k);
        }
    }
}

/// Applies the `default`s of `schema` (a CRD's `openAPIV3Schema`) to `obj`: a missing field
/// whose parent is present takes its default, as do non-nullable nulls; other non-nullable
/// nulls are removed.
pub fn apply_defaults(schema: &Value, obj: &mut Value) {
    if let Value::Object(m) = obj {
        default_object(schema, m, true);
    }
}

/// Whether `schema` gives any field a default.
pub fn has_defaults(schema: &Value) -> bool {
    let children = |key: &str| -> Vec<&Value> {
        match schema.get(key) {
            Some(Value::Object(m)) if key == "properties" => m.values().collect(),
            Some(v @ Value::Object(_)) => vec![v],
            _ => Vec::new(),
        }
    };
    ["properties", "additionalProperties", "items"]
        .into_iter()
        .flat_map(children)
        .any(|c| c.get("default").is_some() || has_defaults(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "items": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }},
            "status": {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        }})
    }

    #[test]
    fn prunes_unknown_fields_everywhere_but_where_allowed() {
        let mut o = json!({
            "apiVersion": "e.com/v1", "kind": "W", "metadata": {"name": "w", "anything": 1},
            "spec": {"size": 1, "typo": 2, "items": [{"id": "a", "x": 1}], "labels": {"k": "v"}, "free": {"whatever": {"deep": 1}}},
            "extra": true
        });
        let unknown = prune(&schema(), &mut o);
        assert_eq!(unknown, vec!["spec.typo", "spec.items[0].x", "extra"]);
        assert_eq!(
            o["spec"],
            json!({"size": 1, "items": [{"id": "a"}], "labels": {"k": "v"}, "free": {"whatever": {"deep": 1}}})
        );
        assert_eq!(o["metadata"]["anything"], 1);
    }

    #[test]
    fn directives_parse() {
        assert_eq!(FieldValidation::parse(None), Ok(FieldValidation::Ignore));
        assert_eq!(
            FieldValidation::parse(Some("Strict")),
            Ok(FieldValidation::Strict)
        );
        assert!(FieldValidation::parse(Some("strict")).is_err());
    }

    #[test]
    fn defaults_fill_missing_and_null_fields_under_present_parents() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "fast"},
                "opt": {"type": "string", "nullable": true, "default": "x"},
                "gone": {"type": "string"},
                "config": {"type": "object", "default": {}, "properties": {
                    "level": {"type": "integer", "default": 3}
                }},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "protocol": {"type": "string", "default": "TCP"}
                }}},
                "env": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                    "on": {"type": "boolean", "default": true}
                }}}
            }},
            "status": {"type": "object", "properties": {"phase": {"type": "string", "default": "New"}}}
        }});
        assert!(has_defaults(&schema));
        assert!(!has_defaults(
            &json!({"type": "object", "properties": {"a": {"type": "string"}}})
        ));
        let mut o = json!({
            "metadata": {"name": "w"},
            "spec": {"mode": null, "opt": null, "gone": null, "ports": [{}, {"protocol": "UDP"}], "env": {"a": {}}}
        });
        apply_defaults(&schema, &mut o);
        assert_eq!(
            o["spec"],
            json!({"mode": "fast", "opt": null, "ports": [{"protocol": "TCP"}, {"protocol": "UDP"}],
                   "env": {"a": {"on": true}}, "size": 1, "config": {"level": 3}})
        );
        // No status, no status defaults.
        assert!(o.get("status").is_none());
        assert_eq!(o["metadata"], json!({"name": "w"}));
    }
}
