//! Schemas at write time: fields a CRD's structural schema, or a built-in kind's definitions
//! ([`crate::builtin_schemas`]), do not know are pruned, as the Kubernetes API server does, and
//! reported for `fieldValidation` (`Strict` refuses the request, `Warn` answers with `Warning`
//! headers, `Ignore` says nothing); and a CRD schema's `default`s are applied (structural
//! defaulting), on writes and on reads.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::unsupported_value::UnsupportedValue;

/// What a request asked `fieldValidation` to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    /// Unknown and duplicate fields are dropped silently.
    Ignore,
    /// They are dropped and named in `Warning` headers.
    Warn,
    /// They fail the request.
    Strict,
}

impl FieldValidation {
    /// Reads the `fieldValidation` query parameter; absent means `Ignore`.
    pub fn parse(s: Option<&str>) -> Result<Self, UnsupportedValue> {
        match s {
            None | Some("") | Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(UnsupportedValue {
                parameter: "fieldValidation",
                value: other.to_owned(),
                supported: &["Ignore", "Warn", "Strict"],
            }),
        }
    }
}

fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

/// One pruning walk: `$ref`s resolve in `doc`; `path` is the dotted path of the value being
/// walked (one buffer, grown and cut back, so that known fields cost no allocation).
struct Pruner<'s> {
    doc: &'s Value,
    path: String,
    unknown: Vec<String>,
}

impl<'s> Pruner<'s> {
    fn value(&mut self, schema: &'s Value, v: &mut Value) {
        let schema = crate::definitions::resolve(self.doc, schema);
        match v {
            Value::Object(m) => self.object(schema, m, false),
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (i, item) in items.iter_mut().enumerate() {
                        let len = self.path.len();
                        let _ = write!(self.path, "[{i}]");
                        self.value(item_schema, item);
                        self.path.truncate(len);
                    }
                }
            }
            _ => {}
        }
    }

    /// `server_meta`: the object's `apiVersion`, `kind` and `metadata` are the API server's, not
    /// the schema's (a custom resource, or a resource embedded in one).
    fn object(&mut self, schema: &'s Value, m: &mut Map<String, Value>, server_meta: bool) {
        if preserves_unknown(schema) && schema.get("properties").is_none() {
            return;
        }
        let server_meta = server_meta
            || schema
                .get("x-kubernetes-embedded-resource")
                .and_then(Value::as_bool)
                == Some(true);
        let props = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        let keep_unknown =
            preserves_unknown(schema) || additional.is_some_and(|a| a.as_bool() == Some(true));
        let untyped = props.is_none()
            && additional.is_none()
            && schema.get("type").and_then(Value::as_str) != Some("object");
        m.retain(|k, v| {
            if server_meta && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                return true;
            }
            let child = props
                .and_then(|p| p.get(k))
                .or_else(|| additional.filter(|a| a.is_object()));
            let len = self.path.len();
            if len > 0 {
                self.path.push('.');
            }
            self.path.push_str(k);
            let keep = match child {
                Some(s) => {
                    self.value(s, v);
                    true
                }
                None if keep_unknown || untyped => true,
                None => {
                    self.unknown.push(self.path.clone());
                    false
                }
            };
            self.path.truncate(len);
            keep
        });
    }
}

/// Removes from `obj` what `schema` (a CRD's `openAPIV3Schema`) does not define; returns the
/// dotted paths removed.
pub fn prune(schema: &Value, obj: &mut Value) -> Vec<String> {
    prune_walk(schema, schema, obj, true)
}

/// Removes from `obj` what the definition `root` in the document of definitions `doc` (a
/// built-in kind's, [`crate::builtin_schemas`]) does not define, following `$ref`s; its
/// `metadata` is held to its definition (ObjectMeta) too. Returns the dotted paths removed.
pub fn prune_with_definitions(doc: &Value, root: &Value, obj: &mut Value) -> Vec<String> {
    prune_walk(doc, root, obj, false)
}

fn prune_walk(doc: &Value, root: &Value, obj: &mut Value, server_meta: bool) -> Vec<String> {
    let mut p = Pruner {
        doc,
        path: String::new(),
        unknown: Vec::new(),
    };
    if let Value::Object(m) = obj {
        p.object(root, m, server_meta);
    }
    p.unknown
}

fn nullable(schema: &Value) -> bool {
    schema.get("nullable").and_then(Value::as_bool) == Some(true)
}

/// Applies defaults within a byte budget: each default put in costs its JSON size, and once the
/// budget is spent no more are put in (a small body must not grow into a huge object).
struct Defaulter {
    left: usize,
    exceeded: bool,
}

impl Defaulter {
    /// A copy of `d` when its size, and `overhead` bytes put in with it, fit what is left.
    fn take(&mut self, d: &Value, overhead: usize) -> Option<Value> {
        let size = json_size(d, self.left)
            .and_then(|n| n.checked_add(overhead))
            .filter(|n| *n <= self.left);
        match size {
            Some(n) if !self.exceeded => {
                self.left -= n;
                Some(d.clone())
            }
            _ => {
                self.exceeded = true;
                None
            }
        }
    }

    /// Settles the member `k` of `m` that `schema` describes: an absent or (where not
    /// nullable) null member takes the default; a null one without a default goes, as
    /// Kubernetes prunes such nulls before defaulting. Then the member's own members are settled.
    fn member(&mut self, schema: &Value, m: &mut Map<String, Value>, k: &str) {
        let null = m.get(k).is_some_and(Value::is_null);
        if m.get(k).is_none() || (null && !nullable(schema)) {
            // A new member costs its key, the colon and (beside others) a comma besides its
            // value: a key longer than its default, repeated in many items, must not escape
            // the budget.
            let overhead = match m.contains_key(k) {
                true => 0,
                false => json_size(&Value::from(k), usize::MAX)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1 + usize::from(!m.is_empty())),
            };
            match schema.get("default").map(|d| self.take(d, overhead)) {
                Some(Some(d)) => {
                    m.insert(k.to_owned(), d);
                }
                Some(None) => return,
                None => {
                    m.remove(k);
                }
            }
        }
        if let Some(v) = m.get_mut(k) {
            self.value(schema, v);
        }
    }

    fn value(&mut self, schema: &Value, v: &mut Value) {
        match v {
            Value::Object(m) => self.object(schema, m, false),
            Value::Array(items) => {
                let Some(item_schema) = schema.get("items") else {
                    return;
                };
                for item in items {
                    if item.is_null()
                        && !nullable(item_schema)
                        && let Some(d) = item_schema.get("default").and_then(|d| self.take(d, 0))
                    {
                        *item = d;
                    }
                    self.value(item_schema, item);
                }
            }
            _ => {}
        }
    }

    fn object(&mut self, schema: &Value, m: &mut Map<String, Value>, root: bool) {
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
                self.member(child, m, k);
            }
        }
        if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
            let keys: Vec<String> = m
                .keys()
                .filter(|k| own(k) && !props.is_some_and(|p| p.contains_key(*k)))
                .cloned()
                .collect();
            for k in keys {
                self.member(additional, m, &k);
            }
        }
    }
}

/// Applies the `default`s of `schema` (a CRD's `openAPIV3Schema`) to `obj`: a missing field
/// whose parent is present takes its default, as do non-nullable nulls; other non-nullable
/// nulls are removed.
pub fn apply_defaults(schema: &Value, obj: &mut Value) {
    apply_defaults_within(schema, obj, usize::MAX);
}

/// [`apply_defaults`] putting in at most `budget` bytes of defaults (their JSON size); false
/// when the budget ran out and some defaults were left out.
pub fn apply_defaults_within(schema: &Value, obj: &mut Value, budget: usize) -> bool {
    let mut d = Defaulter {
        left: budget,
        exceeded: false,
    };
    if let Value::Object(m) = obj {
        d.object(schema, m, true);
    }
    !d.exceeded
}

/// The JSON size of `v` in bytes, counted without building the text; `None` past `limit`.
pub fn json_size(v: &Value, limit: usize) -> Option<usize> {
    struct Count {
        n: usize,
        limit: usize,
    }
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.n += b.len();
            if self.n > self.limit {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count { n: 0, limit };
    serde_json::to_writer(&mut c, v).ok().map(|()| c.n)
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
    fn built_in_kinds_prune_through_their_definitions_metadata_included() {
        use crate::builtin_schemas;
        let doc = builtin_schemas::document();
        let root = |g: &str, k: &str| {
            builtin_schemas::kind_definition(&doc, g, "v1", k)
                .unwrap()
                .1
        };
        let mut cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labelz": {"a": "b"}, "labels": {"a": "b"},
                         "managedFields": [{"manager": "m", "fieldsV1": {"f:data": {"f:x": {}}}}]},
            "data": {"x": "1"}, "dataz": {"y": "2"}
        });
        let unknown = prune_with_definitions(&doc, root("", "ConfigMap"), &mut cm);
        assert_eq!(unknown, vec!["metadata.labelz", "dataz"]);
        assert_eq!(
            cm["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:x": {}}})
        );
        assert_eq!(cm["data"], json!({"x": "1"}));

        let mut d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}},
                "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [
                    {"name": "c", "image": "i", "imagez": "typo",
                     "resources": {"limits": {"cpu": "1", "memory": 1024}},
                     "ports": [{"containerPort": 80, "protocoll": "TCP"}]}]}}}
        });
        let unknown = prune_with_definitions(&doc, root("apps", "Deployment"), &mut d);
        assert_eq!(
            unknown,
            vec![
                "spec.template.spec.containers[0].imagez",
                "spec.template.spec.containers[0].ports[0].protocoll"
            ]
        );
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"],
            1024
        );

        // A CRD's schema values (defaults, examples) are free-form JSON; its schema recurses.
        let mut crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "ws.e.com"},
            "spec": {"group": "e.com", "names": {"plural": "ws", "kind": "W"}, "scope": "Cluster",
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {"spec": {"type": "object", "default": {"any": {"thing": 1}},
                        "properties": {"n": {"type": "integer", "typo": 1}}}}}}}]}});
        let unknown = prune_with_definitions(
            &doc,
            root("apiextensions.k8s.io", "CustomResourceDefinition"),
            &mut crd,
        );
        assert_eq!(
            unknown,
            vec!["spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.n.typo"]
        );
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
    fn defaults_stop_at_their_budget() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "pad": {"type": "string", "default": "p".repeat(1000)}}}}}}}});
        let mut small = json!({"spec": {"items": [{}, {}]}});
        assert!(apply_defaults_within(&schema, &mut small, 10_000));
        assert_eq!(
            small["spec"]["items"][1]["pad"].as_str().unwrap().len(),
            1000
        );
        // A thousand empty items would take a megabyte of defaults: stopped at the budget.
        let mut many = json!({"spec": {"items": vec![json!({}); 1000]}});
        assert!(!apply_defaults_within(&schema, &mut many, 100_000));
        assert!(json_size(&many, usize::MAX).unwrap() < 110_000);
        // The keys put in count too: a long key with a one-byte default, in every item.
        let key = "k".repeat(1000);
        let schema = json!({"type": "object", "properties": {"items": {"type": "array",
            "items": {"type": "object", "properties": {key: {"type": "integer", "default": 0}}}}}});
        let mut keyed = json!({"items": vec![json!({}); 1000]});
        assert!(!apply_defaults_within(&schema, &mut keyed, 100_000));
        assert!(json_size(&keyed, usize::MAX).unwrap() < 3_000 + 100_000);
        assert_eq!(json_size(&json!({"a": [1, "b"]}), 100), Some(13));
        assert_eq!(json_size(&json!({"a": [1, "b"]}), 10), None);
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
