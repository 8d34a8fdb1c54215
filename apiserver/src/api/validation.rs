//! Custom resources against their CRD's structural schema (`openAPIV3Schema`), as the
//! Kubernetes API server validates them: every violation is collected (not only the first) and
//! worded as Kubernetes words it, so that clients and people see the messages they know.
//!
//! An update is validated with ratcheting (as Kubernetes does since 1.30): a part of the object
//! left exactly as it was is not validated again, so that a schema made stricter does not lock
//! old objects against unrelated changes.

use std::{collections::HashMap, sync::Mutex};

use serde_json::{Map, Number, Value, json};

pub use super::field_errors::{FieldError, MAX_CAUSES, Problem, invalid};
use super::field_errors::{number, quote};
use super::kinds::strategy::KindStrategy;
use super::status::ApiError;
use crate::registry::ResourceDef;

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn uint(schema: &Value, key: &str) -> Option<u64> {
    schema.get(key).and_then(Value::as_u64)
}

/// The JSON type of `v`, as Kubernetes names it in type errors.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The type `schema` asks for (`None`: anything), in the words of a type error.
fn wanted_type(schema: &Value) -> Option<&str> {
    if flag(schema, "x-kubernetes-int-or-string") {
        return Some("integer,string");
    }
    schema.get("type").and_then(Value::as_str)
}

fn type_matches(wanted: &str, v: &Value) -> bool {
    let actual = type_name(v);
    match wanted {
        "integer,string" => matches!(actual, "integer" | "string"),
        // An integer is a number too; a number with a fraction is no integer.
        "number" => matches!(actual, "integer" | "number"),
        w => w == actual,
    }
}

/// Compiled `pattern`s, kept between writes (the same few are matched on every write of a
/// kind); owned by the API state.
#[derive(Default)]
pub struct Patterns {
    compiled: Mutex<HashMap<String, Option<regex::Regex>>>,
}

impl Patterns {
    /// Most patterns kept; past it the cache starts over.
    const MAX: usize = 512;

    /// Whether `s` matches `pattern`; `None` when the pattern does not compile (a CRD the API
    /// server would have refused; nothing to hold objects to).
    fn matches(&self, pattern: &str, s: &str) -> Option<bool> {
        let mut cache = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if !cache.contains_key(pattern) {
            if cache.len() >= Self::MAX {
                cache.clear();
            }
            cache.insert(pattern.to_owned(), regex::Regex::new(pattern).ok());
        }
        cache
            .get(pattern)
            .and_then(Option::as_ref)
            .map(|re| re.is_match(s))
    }
}

/// The most values of an enum a "supported values" message lists.
const MAX_LISTED_VALUES: usize = 16;
/// The most bytes of a rejected value an error repeats.
const MAX_ECHOED_VALUE: usize = 256;

/// The most an object may be, as JSON, whatever made it (a body, a patch, defaults): the body
/// limit, so that what a write produces is bounded as what it reads is.
pub const MAX_OBJECT_BYTES: usize = super::MAX_BODY_BYTES;

/// The 413 of an object past [`MAX_OBJECT_BYTES`].
pub fn object_too_large() -> ApiError {
    ApiError::new(
        413,
        "RequestEntityTooLarge",
        format!(
            "Request entity too large: the object would exceed the limit of {MAX_OBJECT_BYTES} bytes"
        ),
    )
}

/// Refuses an object larger than [`MAX_OBJECT_BYTES`] (counted without writing it out).
pub fn within_object_limit(obj: &Value) -> Result<(), ApiError> {
    gpustack_kube_rest::schema::json_size(obj, MAX_OBJECT_BYTES)
        .map(|_| ())
        .ok_or_else(object_too_large)
}

/// What a walk collects.
struct Walk<'p> {
    patterns: &'p Patterns,
    errors: Vec<FieldError>,
}

impl Walk<'_> {
    fn push(&mut self, problem: Problem, field: &str, value: Option<Value>, detail: String) {
        if self.errors.len() >= MAX_CAUSES {
            return;
        }
        // A long rejected value is echoed cut, as its type and start are what a reader needs.
        let value = value.map(|v| match v {
            Value::String(s) if s.len() > MAX_ECHOED_VALUE => {
                let mut end = MAX_ECHOED_VALUE;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                Value::String(format!("{}...", &s[..end]))
            }
            v @ (Value::Array(_) | Value::Object(_)) => {
                let text = v.to_string();
                if text.len() > MAX_ECHOED_VALUE {
                    Value::String(format!("{} of {} bytes", type_name(&v), text.len()))
                } else {
                    v
                }
            }
            v => v,
        });
        self.errors.push(FieldError {
            problem,
            field: field.to_owned(),
            value,
            detail,
        });
    }

    fn invalid(&mut self, field: &str, value: Value, detail: String) {
        self.push(Problem::Invalid, field, Some(value), detail);
    }

    /// Validates `v` (at `path`) against `schema`; `old` is the value there before an update.
    fn node(&mut self, schema: &Value, v: &Value, old: Option<&Value>, path: &str) {
        if self.errors.len() >= MAX_CAUSES {
            return;
        }
        if old == Some(v) {
            return;
        }
        if v.is_null() && flag(schema, "nullable") {
            return;
        }
        if let Some(wanted) = wanted_type(schema)
            && !type_matches(wanted, v)
        {
            let actual = type_name(v);
            self.push(
                Problem::TypeInvalid,
                path,
                Some(json!(actual)),
                format!("{path} in body must be of type {wanted}: \"{actual}\""),
            );
            return;
        }
        self.enumeration(schema, v, path);
        match v {
            Value::String(s) => self.string(schema, s, path),
            Value::Number(n) => self.number(schema, n, path),
            Value::Array(items) => self.array(schema, items, path),
            Value::Object(m) => self.object(schema, m, old, path, false),
            _ => {}
        }
    }

    fn enumeration(&mut self, schema: &Value, v: &Value, path: &str) {
        let Some(allowed) = schema.get("enum").and_then(Value::as_array) else {
            return;
        };
        if allowed.contains(v) {
            return;
        }
        let mut quoted: Vec<String> = allowed
            .iter()
            .take(MAX_LISTED_VALUES)
            .map(|a| match a {
                Value::String(s) => quote(s),
                other => quote(&other.to_string()),
            })
            .collect();
        if allowed.len() > MAX_LISTED_VALUES {
            quoted.push(format!("... ({} more)", allowed.len() - MAX_LISTED_VALUES));
        }
        self.push(
            Problem::NotSupported,
            path,
            Some(v.clone()),
            format!("supported values: {}", quoted.join(", ")),
        );
    }

    fn string(&mut self, schema: &Value, s: &str, path: &str) {
        let chars = s.chars().count() as u64;
        if let Some(max) = uint(schema, "maxLength")
            && chars > max
        {
            let unit = if max == 1 { "byte" } else { "bytes" };
            self.push(
                Problem::TooLong,
                path,
                None,
                format!("may not be more than {max} {unit}"),
            );
        }
        if let Some(min) = uint(schema, "minLength")
            && chars < min
        {
            self.invalid(
                path,
                json!(s),
                format!("{path} in body should be at least {min} chars long"),
            );
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
            && self.patterns.matches(pattern, s) == Some(false)
        {
            self.invalid(
                path,
                json!(s),
                format!("{path} in body should match '{pattern}'"),
            );
        }
        if let Some(format) = schema.get("format").and_then(Value::as_str)
            && !string_format_ok(format, s)
        {
            self.push(
                Problem::TypeInvalid,
                path,
                Some(json!(s)),
                format!("{path} in body must be of type {format}: {}", quote(s)),
            );
        }
    }

    fn number(&mut self, schema: &Value, n: &Number, path: &str) {
        let Some(x) = n.as_f64() else { return };
        let value = Value::Number(n.clone());
        if let Some(format) = schema.get("format").and_then(Value::as_str)
            && !number_format_ok(format, n)
        {
            self.push(
                Problem::TypeInvalid,
                path,
                Some(value.clone()),
                format!("{path} in body must be of type {format}: \"{}\"", number(n)),
            );
        }
        for bound in bounds(schema) {
            if !bound.admits(x) {
                self.invalid(
                    path,
                    value.clone(),
                    format!("{path} in body should be {}", bound.describe()),
                );
            }
        }
        if let Some(m) = schema.get("multipleOf").and_then(Value::as_number)
            && !is_multiple(n, m)
        {
            self.invalid(
                path,
                value,
                format!("{path} in body should be a multiple of {}", number(m)),
            );
        }
    }

    fn array(&mut self, schema: &Value, items: &[Value], path: &str) {
        let len = items.len() as u64;
        if let Some(min) = uint(schema, "minItems")
            && len < min
        {
            self.invalid(
                path,
                json!(len),
                format!("{path} in body should have at least {min} items"),
            );
        }
        if let Some(max) = uint(schema, "maxItems")
            && len > max
        {
            self.push(Problem::TooMany, path, Some(json!(len)), at_most(max));
        }
        if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
            for (i, item) in items.iter().enumerate() {
                // Items of an atomic list have no identity across an update: no ratcheting.
                self.node(item_schema, item, None, &format!("{path}[{i}]"));
            }
        }
    }

    fn object(
        &mut self,
        schema: &Value,
        m: &Map<String, Value>,
        old: Option<&Value>,
        path: &str,
        root: bool,
    ) {
        // apiVersion, kind and metadata of a resource follow the object-metadata rules, not
        // the schema.
        let embedded = root || flag(schema, "x-kubernetes-embedded-resource");
        let skipped = |k: &str| embedded && matches!(k, "apiVersion" | "kind" | "metadata");
        let len = m.len() as u64;
        if let Some(min) = uint(schema, "minProperties")
            && len < min
        {
            self.invalid(
                path,
                json!(len),
                format!("{path} in body should have at least {min} properties"),
            );
        }
        if let Some(max) = uint(schema, "maxProperties")
            && len > max
        {
            self.push(Problem::TooMany, path, Some(json!(len)), at_most(max));
        }
        for required in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !m.contains_key(required) && !skipped(required) {
                self.push(
                    Problem::Required,
                    &join(path, required),
                    None,
                    String::new(),
                );
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties").filter(|a| a.is_object());
        for (k, v) in m {
            if skipped(k) {
                continue;
            }
            let Some(child) = props.and_then(|p| p.get(k)).or(additional) else {
                continue;
            };
            let old_child = old.and_then(|o| o.get(k));
            self.node(child, v, old_child, &join(path, k));
        }
    }
}

fn at_most(max: u64) -> String {
    let unit = if max == 1 { "item" } else { "items" };
    format!("must have at most {max} {unit}")
}

/// A numeric bound of a schema.
struct Bound {
    limit: Number,
    lower: bool,
    exclusive: bool,
}

impl Bound {
    fn admits(&self, x: f64) -> bool {
        let l = self.limit.as_f64().unwrap_or(0.0);
        match (self.lower, self.exclusive) {
            (true, false) => x >= l,
            (true, true) => x > l,
            (false, false) => x <= l,
            (false, true) => x < l,
        }
    }

    fn describe(&self) -> String {
        let relation = match (self.lower, self.exclusive) {
            (true, false) => "greater than or equal to",
            (true, true) => "greater than",
            (false, false) => "less than or equal to",
            (false, true) => "less than",
        };
        format!("{relation} {}", number(&self.limit))
    }
}

/// `minimum`/`maximum` with their OpenAPI 3.0 boolean `exclusive*` flags (a numeric
/// `exclusiveMinimum`/`exclusiveMaximum`, the later JSON Schema form, is a bound of its own).
fn bounds(schema: &Value) -> Vec<Bound> {
    let mut out = Vec::new();
    for (key, exclusive_key, lower) in [
        ("minimum", "exclusiveMinimum", true),
        ("maximum", "exclusiveMaximum", false),
    ] {
        if let Some(limit) = schema.get(key).and_then(Value::as_number) {
            out.push(Bound {
                limit: limit.clone(),
                lower,
                exclusive: flag(schema, exclusive_key),
            });
        }
        if let Some(limit) = schema.get(exclusive_key).and_then(Value::as_number) {
            out.push(Bound {
                limit: limit.clone(),
                lower,
                exclusive: true,
            });
        }
    }
    out
}

fn is_multiple(n: &Number, m: &Number) -> bool {
    match (n.as_i64(), m.as_i64()) {
        (Some(a), Some(b)) if b != 0 => a % b == 0,
        _ => match (n.as_f64(), m.as_f64()) {
            (Some(a), Some(b)) if b != 0.0 => {
                let q = a / b;
                (q - q.round()).abs() < 1e-9
            }
            _ => true,
        },
    }
}

/// The formats of strings checked (the others, as in Kubernetes, are only documentation).
fn string_format_ok(format: &str, s: &str) -> bool {
    match format {
        "date-time" => {
            s.parse::<jiff::Timestamp>().is_ok() || s.parse::<jiff::civil::DateTime>().is_ok()
        }
        "date" => s.len() == 10 && s.parse::<jiff::civil::Date>().is_ok(),
        "uuid" => is_uuid(s),
        "byte" => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(s).is_ok()
        }
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        _ => true,
    }
}

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
}

fn number_format_ok(format: &str, n: &Number) -> bool {
    match format {
        "int32" => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
        "int64" => n.is_i64(),
        _ => true,
    }
}

/// Every way `obj` (a whole custom resource) violates `schema`; `old` is the object an update
/// replaces (its unchanged parts are not validated again).
pub fn validate(
    patterns: &Patterns,
    schema: &Value,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    let mut walk = Walk {
        patterns,
        errors: Vec::new(),
    };
    if let Value::Object(m) = obj {
        walk.object(schema, m, old, "", true);
    }
    walk.errors
}

/// Refuses, as kube-apiserver's decoder does (400), an object whose metadata or (for a
/// built-in kind) whose body has a field of the wrong type.
fn decodes(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .map_or("", |v| v.rsplit('/').next().unwrap_or(v));
    // A built-in kind's typed decode reads its metadata too; other kinds decode only that.
    let failure = match gpustack_kube_rest::builtin_schemas::decode_typed(
        &def.group, version, &def.kind, obj,
    ) {
        Some(typed) => typed.err(),
        None => super::metadata_rules::undecodable(obj),
    };
    match failure {
        None => Ok(()),
        Some(e) => {
            let kind = &def.kind;
            let mut why = e.to_string();
            why.truncate(MAX_ECHOED_VALUE * 2);
            Err(ApiError::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}"
            )))
        }
    }
}

/// `obj` when its metadata follows the rules every kind's does, its kind's own rules
/// ([`KindStrategy::validate`], reported with the metadata's), its built-in kind decodes and
/// it satisfies its custom kind's schema, else the 400 or 422 error; `old` is the object an
/// update replaces.
pub(crate) fn validated(
    patterns: &Patterns,
    def: &ResourceDef,
    kind: &dyn KindStrategy,
    obj: Value,
    old: Option<&Value>,
) -> Result<Value, ApiError> {
    within_object_limit(&obj)?;
    decodes(def, &obj)?;
    let name_of = |obj: &Value| {
        obj.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let mut problems = super::metadata_rules::problems(&obj);
    problems.extend(kind.validate(&obj, old));
    if !problems.is_empty() {
        return Err(invalid(&def.kind, &def.group, &name_of(&obj), &problems));
    }
    let Some(schema) = def.custom_schema() else {
        return Ok(obj);
    };
    let errors = validate(patterns, schema, &obj, old);
    if errors.is_empty() {
        return Ok(obj);
    }
    Err(invalid(&def.kind, &def.group, &name_of(&obj), &errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "required": ["spec"], "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object", "required": ["replicas"], "properties": {
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0},
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 5},
                "port": {"x-kubernetes-int-or-string": true},
                "when": {"type": "string", "format": "date-time"},
                "small": {"type": "integer", "format": "int32"},
                "flag": {"type": "boolean"},
                "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
                "labels": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
                "opt": {"type": "string", "nullable": true},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "items": {"type": "array", "items": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}}
            }}
        }})
    }

    fn obj(spec: Value) -> Value {
        json!({"apiVersion": "e.com/v1", "kind": "W", "metadata": {"name": "w"}, "spec": spec})
    }

    fn messages(spec: Value) -> Vec<String> {
        validate(&Patterns::default(), &schema(), &obj(spec), None)
            .iter()
            .map(FieldError::message)
            .collect()
    }

    #[test]
    fn valid_objects_pass() {
        let ok = [
            json!({"replicas": 1}),
            json!({"replicas": 10, "ratio": 0.5, "mode": "fast", "name": "abc", "port": 80}),
            json!({"replicas": 3, "port": "http", "when": "2024-01-02T03:04:05Z", "small": 7}),
            json!({"replicas": 3, "tags": ["a"], "labels": {"k": "v"}, "opt": null, "flag": true}),
            json!({"replicas": 3, "free": {"anything": [1, {"x": null}]}, "items": [{"id": "a"}]}),
        ];
        for spec in ok {
            assert_eq!(messages(spec.clone()), Vec::<String>::new(), "{spec}");
        }
    }

    #[test]
    fn violations_are_worded_as_kubernetes_words_them() {
        let cases = [
            (
                json!({"replicas": "3"}),
                r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            ),
            (
                json!({"replicas": 1.5}),
                r#"spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number""#,
            ),
            (json!({}), "spec.replicas: Required value"),
            (
                json!({"replicas": 0}),
                "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
            ),
            (
                json!({"replicas": 11}),
                "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
            ),
            (
                json!({"replicas": 1, "ratio": 0}),
                "spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0",
            ),
            (
                json!({"replicas": 1, "mode": "medium"}),
                r#"spec.mode: Unsupported value: "medium": supported values: "fast", "slow""#,
            ),
            (
                json!({"replicas": 1, "name": "ABC"}),
                r#"spec.name: Invalid value: "ABC": spec.name in body should match '^[a-z]+$'"#,
            ),
            (
                json!({"replicas": 1, "name": "a"}),
                r#"spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long"#,
            ),
            (
                json!({"replicas": 1, "name": "abcdef"}),
                "spec.name: Too long: may not be more than 5 bytes",
            ),
            (
                json!({"replicas": 1, "port": true}),
                r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
            ),
            (
                json!({"replicas": 1, "when": "yesterday"}),
                r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday""#,
            ),
            (
                json!({"replicas": 1, "small": 3000000000u64}),
                r#"spec.small: Invalid value: 3000000000: spec.small in body must be of type int32: "3000000000""#,
            ),
            (
                json!({"replicas": 1, "tags": []}),
                "spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items",
            ),
            (
                json!({"replicas": 1, "tags": ["a", "b", "c"]}),
                "spec.tags: Too many: 3: must have at most 2 items",
            ),
            (
                json!({"replicas": 1, "tags": ["a", 2]}),
                r#"spec.tags[1]: Invalid value: "integer": spec.tags[1] in body must be of type string: "integer""#,
            ),
            (
                json!({"replicas": 1, "labels": {"a": "1", "b": "2"}}),
                "spec.labels: Too many: 2: must have at most 1 item",
            ),
            (
                json!({"replicas": 1, "labels": {"a": 1}}),
                r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#,
            ),
            (
                json!({"replicas": 1, "flag": null}),
                r#"spec.flag: Invalid value: "null": spec.flag in body must be of type boolean: "null""#,
            ),
            (
                json!({"replicas": 1, "items": [{"id": "a"}, {}]}),
                "spec.items[1].id: Required value",
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(messages(spec.clone()), vec![want.to_owned()], "{spec}");
        }
    }

    #[test]
    fn every_violation_is_collected() {
        let got = messages(json!({"mode": "x", "name": "A1"}));
        assert_eq!(got.len(), 3, "{got:?}");
        let root = validate(
            &Patterns::default(),
            &schema(),
            &json!({"metadata": {"name": "w"}}),
            None,
        );
        assert_eq!(root[0].message(), "spec: Required value");
    }

    #[test]
    fn unchanged_parts_are_not_validated_again() {
        let old = obj(json!({"replicas": 0, "mode": "fast"}));
        let new = obj(json!({"replicas": 0, "mode": "slow"}));
        assert!(validate(&Patterns::default(), &schema(), &new, Some(&old)).is_empty());
        let worse = obj(json!({"replicas": 0, "mode": "bad"}));
        assert_eq!(
            validate(&Patterns::default(), &schema(), &worse, Some(&old)).len(),
            1
        );
    }

    #[test]
    fn status_is_kubernetes_invalid_with_causes() {
        let errors = validate(
            &Patterns::default(),
            &schema(),
            &obj(json!({"replicas": "x", "mode": "y"})),
            None,
        );
        let s = invalid("Widget", "example.com", "w", &errors).to_status();
        assert_eq!(s["code"], 422);
        assert_eq!(s["reason"], "Invalid");
        assert_eq!(
            s["message"],
            r#"Widget.example.com "w" is invalid: [spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string", spec.mode: Unsupported value: "y": supported values: "fast", "slow"]"#
        );
        assert_eq!(s["details"]["group"], "example.com");
        assert_eq!(s["details"]["kind"], "Widget");
        assert_eq!(s["details"]["name"], "w");
        assert_eq!(
            s["details"]["causes"][0],
            json!({"reason": "FieldValueTypeInvalid", "field": "spec.replicas",
                   "message": r#"Invalid value: "string": spec.replicas in body must be of type integer: "string""#})
        );
        assert_eq!(
            s["details"]["causes"][1]["reason"],
            "FieldValueNotSupported"
        );
        let one = invalid("Widget", "example.com", "w", &errors[..1]).to_status();
        assert!(
            one["message"]
                .as_str()
                .unwrap()
                .ends_with("is invalid: spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"")
        );
    }
}
