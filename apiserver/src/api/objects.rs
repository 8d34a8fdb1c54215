//! The rules every write follows, as pure functions: what create fills in, what update keeps,
//! when generation moves, how status and finalizers behave.

use rand::Rng;
use serde_json::{Map, Value, json};

use super::status::ApiError;
use crate::registry::ResourceDef;

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

/// The object's `metadata.name`; empty when missing.
pub fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The object's `metadata.resourceVersion`, if set.
pub fn rv_of(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// How many finalizers the object has.
pub fn finalizers_of(obj: &Value) -> usize {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

/// Whether the object has a deletionTimestamp (it is being deleted).
pub fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// A name refused, worded as kube-apiserver's field error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("metadata.name: Invalid value: \"{name}\": {rule}")]
pub struct InvalidName {
    /// The refused name.
    pub name: String,
    /// The naming rule it breaks.
    pub rule: NameRule,
}

/// The rule a name broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameRule {
    /// An RFC 1123 label (namespaces, Services).
    #[error(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
    )]
    Label,
    /// An RFC 1123 subdomain (most kinds).
    #[error(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
    )]
    Subdomain,
    /// The name is empty.
    #[error("must not be empty")]
    Empty,
    /// The name is `.` or `..`, which no path segment may be.
    #[error("may not be '{0}'")]
    Dots(&'static str),
    /// The name holds a character no path segment may hold (`/`, `%`).
    #[error("may not contain '{0}'")]
    Contains(char),
}

/// A DNS-1123 subdomain (most kinds) or label (namespaces).
pub fn validate_name(name: &str, label_only: bool) -> Result<(), InvalidName> {
    let max = if label_only { 63 } else { 253 };
    let ok = !name.is_empty()
        && name.len() <= max
        && name.chars().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (!label_only && c == '.')
        })
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        return Ok(());
    }
    Err(InvalidName {
        name: name.to_owned(),
        rule: if label_only {
            NameRule::Label
        } else {
            NameRule::Subdomain
        },
    })
}

/// A path segment (the RBAC kinds' names, such as `system:auth-delegator`): not `.` or `..`,
/// without `/` or `%`.
pub fn validate_path_segment(name: &str) -> Result<(), InvalidName> {
    let rule = match name {
        "" => Some(NameRule::Empty),
        "." => Some(NameRule::Dots(".")),
        ".." => Some(NameRule::Dots("..")),
        _ => ['/', '%']
            .into_iter()
            .find(|c| name.contains(*c))
            .map(NameRule::Contains),
    };
    match rule {
        Some(rule) => Err(InvalidName {
            name: name.to_owned(),
            rule,
        }),
        None => Ok(()),
    }
}

/// Checks `kind` and `apiVersion` against the URL, filling them in when absent.
pub fn check_type(def: &ResourceDef, version: &str, obj: &mut Value) -> Result<(), ApiError> {
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON or YAML object",
        ));
    };
    let want_av = def.api_version(version);
    match map.get("apiVersion").and_then(Value::as_str) {
        None => {
            map.insert("apiVersion".into(), json!(want_av));
        }
        Some(av) if av == want_av => {}
        Some(av) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        None => {
            map.insert("kind".into(), json!(def.kind));
        }
        Some(k) if k == def.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.kind
            )));
        }
    }
    Ok(())
}

/// The rule names of a kind follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Names {
    /// A DNS-1123 subdomain (most kinds).
    Subdomain,
    /// A DNS-1123 label (namespaces).
    Label,
    /// A path segment (the RBAC kinds).
    PathSegment,
}

impl Names {
    /// Refuses `name` when it breaks this rule.
    pub fn check(self, name: &str) -> Result<(), InvalidName> {
        match self {
            Names::Subdomain => validate_name(name, false),
            Names::Label => validate_name(name, true),
            Names::PathSegment => validate_path_segment(name),
        }
    }
}

/// Objects named by this rule and written in their canonical form already (the server's own).
impl KindRules for Names {
    fn names(&self) -> Names {
        *self
    }
}

/// The rules of a kind that the server's filling in of an object follows: how its objects are
/// named, and the canonical form of what a client wrote (a Secret's `stringData` folded into
/// `data`). Each kind's strategy (`crate::api::kinds`) sets them; the defaults are most kinds'.
pub trait KindRules {
    /// How objects of the kind are named.
    fn names(&self) -> Names {
        Names::Subdomain
    }

    /// `obj` (as written, its type checked) in its canonical form, before anything is compared.
    fn canonicalize(&self, _obj: &mut Value) {}
}

/// Everything a new object gets: name (from `generateName` if needed), namespace, uid,
/// creationTimestamp, generation 1. Status is dropped for custom kinds with a status
/// subresource.
#[allow(clippy::too_many_arguments)]
pub fn prepare_create(
    def: &ResourceDef,
    rules: &dyn KindRules,
    version: &str,
    namespace: Option<&str>,
    mut obj: Value,
    uid: &str,
    name_suffix: &str,
    now: jiff::Timestamp,
) -> Result<Value, ApiError> {
    check_type(def, version, &mut obj)?;
    rules.canonicalize(&mut obj);
    let kind = def.kind.clone();
    let meta = meta_mut(&mut obj);
    if def.namespaced {
        let ns = namespace.unwrap_or("");
        match meta.get("namespace").and_then(Value::as_str) {
            Some(given) if !given.is_empty() && given != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), json!(ns));
            }
        }
    } else {
        meta.remove("namespace");
    }
    let name = match meta.get("name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n.to_owned(),
        _ => match meta.get("generateName").and_then(Value::as_str) {
            Some(prefix) if !prefix.is_empty() => format!("{prefix}{name_suffix}"),
            _ => {
                return Err(ApiError::invalid(
                    &kind,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
        },
    };
    rules
        .names()
        .check(&name)
        .map_err(|m| ApiError::invalid(&kind, &name, m))?;
    meta.insert("name".into(), json!(name));
    drop_empty_collections(meta);
    meta.insert("uid".into(), json!(uid));
    meta.insert("creationTimestamp".into(), json!(rfc3339(now)));
    meta.insert("generation".into(), json!(1));
    for k in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(k);
    }
    if def.custom
        && def.status_subresource()
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    Ok(obj)
}

/// The metadata collections kube-apiserver omits when empty (its `ObjectMeta` drops empty maps
/// and lists): a patch that deletes the last label leaves no `labels: {}` behind.
const OMITTED_WHEN_EMPTY: [&str; 4] = ["labels", "annotations", "finalizers", "ownerReferences"];

fn drop_empty_collections(meta: &mut Map<String, Value>) {
    for key in OMITTED_WHEN_EMPTY {
        let empty = match meta.get(key) {
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Null) => true,
            _ => false,
        };
        if empty {
            meta.shift_remove(key);
        }
    }
}

/// Seconds-precision RFC 3339, as Kubernetes writes timestamps.
pub fn rfc3339(t: jiff::Timestamp) -> String {
    jiff::Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

fn without(obj: &Value, keys: &[&str]) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        for k in keys {
            m.remove(*k);
        }
    }
    v
}

/// The object an update (PUT, or a patch's result) stores. `status_endpoint` is `/status`.
/// Server-owned metadata is kept from `current`; for kinds with a status subresource the main
/// endpoint keeps the current status and `/status` keeps everything but status; generation
/// moves when anything outside metadata (and status, with the subresource) changed.
pub fn prepare_update(
    def: &ResourceDef,
    rules: &dyn KindRules,
    version: &str,
    current: &Value,
    mut new: Value,
    status_endpoint: bool,
) -> Result<Value, ApiError> {
    check_type(def, version, &mut new)?;
    rules.canonicalize(&mut new);
    let name = name_of(current).to_owned();
    let new_name = name_of(&new).to_owned();
    if !new_name.is_empty() && new_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({new_name}) does not match the name on the URL ({name})"
        )));
    }
    if def.status_subresource() {
        if status_endpoint {
            let status = new.get("status").cloned();
            // Server-side apply to /status records its manager's fields too.
            let managed = new.pointer("/metadata/managedFields").cloned();
            let mut merged = current.clone();
            if let Some(m) = merged.as_object_mut() {
                match status {
                    Some(s) => m.insert("status".into(), s),
                    None => m.remove("status"),
                };
            }
            if let Some(mf) = managed {
                meta_mut(&mut merged).insert("managedFields".into(), mf);
            }
            new = merged;
        } else if let Some(m) = new.as_object_mut() {
            match current.get("status") {
                Some(s) => m.insert("status".into(), s.clone()),
                None => m.remove("status"),
            };
        }
    }
    let cur_meta = current.get("metadata").cloned().unwrap_or(json!({}));
    let meta = meta_mut(&mut new);
    meta.insert("name".into(), json!(name));
    drop_empty_collections(meta);
    for k in [
        "uid",
        "creationTimestamp",
        "namespace",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match cur_meta.get(k) {
            Some(v) => meta.insert(k.into(), v.clone()),
            None => meta.remove(k),
        };
    }
    let ignored: &[&str] = if def.status_subresource() {
        &["metadata", "status"]
    } else {
        &["metadata"]
    };
    if without(current, ignored) != without(&new, ignored) {
        let g = cur_meta
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta_mut(&mut new).insert("generation".into(), json!(g + 1));
    }
    Ok(new)
}

/// Whether two versions of an object differ in anything but resourceVersion (a no-op write is
/// not stored and produces no event).
pub fn same_content(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        v
    };
    strip(a) == strip(b)
}

/// Marks an object as being deleted (it has finalizers).
pub fn mark_deleting(obj: &mut Value, now: jiff::Timestamp) {
    let meta = meta_mut(obj);
    if meta.get("deletionTimestamp").is_none_or(Value::is_null) {
        meta.insert("deletionTimestamp".into(), json!(rfc3339(now)));
        meta.insert("deletionGracePeriodSeconds".into(), json!(0));
    }
}

/// A random (version 4) UID.
pub fn new_uid() -> String {
    let b: [u8; 16] = rand::rng().random();
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-4{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The random suffix of a `generateName`.
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut r = rand::rng();
    (0..5)
        .map(|_| ALPHABET[r.random_range(0..ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {

    #[test]
    fn empty_metadata_collections_are_omitted() {
        let mut meta = serde_json::json!({"name": "x", "labels": {}, "annotations": {"a": "b"},
            "finalizers": [], "ownerReferences": null})
        .as_object()
        .unwrap()
        .clone();
        super::drop_empty_collections(&mut meta);
        assert_eq!(
            serde_json::Value::Object(meta),
            serde_json::json!({"name": "x", "annotations": {"a": "b"}})
        );
    }

    #[test]
    fn rbac_names_are_path_segments() {
        assert!(validate_path_segment("system:auth-delegator").is_ok());
        assert!(validate_path_segment("Mixed_Case").is_ok());
        for bad in ["", ".", "..", "a/b", "a%2f"] {
            assert!(validate_path_segment(bad).is_err(), "{bad}");
        }
        assert!(validate_name("system:auth-delegator", false).is_err());
    }

    use super::*;
    use crate::registry::{builtins, from_crd};

    /// A kind with the usual rules.
    struct Plain;
    impl KindRules for Plain {}

    fn now() -> jiff::Timestamp {
        "2026-01-01T00:00:00.5Z".parse().unwrap()
    }

    fn cm() -> ResourceDef {
        builtins()
            .into_iter()
            .find(|d| d.plural == "configmaps")
            .unwrap()
    }

    fn widget() -> ResourceDef {
        from_crd(&json!({"metadata": {"name": "ws.e.com"}, "spec": {"group": "e.com", "scope": "Cluster",
            "names": {"plural": "ws", "kind": "W"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}}]}}))
        .unwrap()
    }

    #[test]
    fn create_fills_server_fields() {
        let o = prepare_create(
            &cm(),
            &Plain,
            "v1",
            Some("ns"),
            json!({"metadata": {"generateName": "x-", "resourceVersion": "5"}}),
            "u1",
            "abcde",
            now(),
        )
        .unwrap();
        assert_eq!(o["metadata"]["name"], "x-abcde");
        assert_eq!(o["metadata"]["namespace"], "ns");
        assert_eq!(o["metadata"]["uid"], "u1");
        assert_eq!(o["metadata"]["creationTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(o["apiVersion"], "v1");
        assert_eq!(o["kind"], "ConfigMap");
        assert!(o["metadata"].get("resourceVersion").is_none());
    }

    #[test]
    fn create_rejects_mismatches_and_bad_names() {
        let e = prepare_create(
            &cm(),
            &Plain,
            "v1",
            Some("ns"),
            json!({"kind": "Secret", "metadata": {"name": "a"}}),
            "u",
            "s",
            now(),
        )
        .unwrap_err();
        assert_eq!(e.code, 400);
        let e = prepare_create(
            &cm(),
            &Plain,
            "v1",
            Some("ns"),
            json!({"apiVersion": "apps/v1", "metadata": {"name": "a"}}),
            "u",
            "s",
            now(),
        )
        .unwrap_err();
        assert!(e.message.contains("apps/v1"));
        let e = prepare_create(
            &cm(),
            &Plain,
            "v1",
            Some("ns"),
            json!({"metadata": {"name": "a", "namespace": "other"}}),
            "u",
            "s",
            now(),
        )
        .unwrap_err();
        assert_eq!(e.code, 400);
        let e = prepare_create(
            &cm(),
            &Plain,
            "v1",
            Some("ns"),
            json!({"metadata": {"name": "Bad_Name"}}),
            "u",
            "s",
            now(),
        )
        .unwrap_err();
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        assert!(e.message.contains("metadata.name"));
        let e = prepare_create(
            &cm(),
            &Plain,
            "v1",
            Some("ns"),
            json!({"metadata": {}}),
            "u",
            "s",
            now(),
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
    }

    #[test]
    fn custom_status_subresource_rules_and_generation() {
        let d = widget();
        let created = prepare_create(
            &d,
            &Plain,
            "v1",
            None,
            json!({"metadata": {"name": "w"}, "spec": {"a": 1}, "status": {"s": 1}}),
            "u",
            "",
            now(),
        )
        .unwrap();
        assert!(created.get("status").is_none());
        let mut current = created.clone();
        current["status"] = json!({"s": 0});
        // Main endpoint: status change ignored, generation unchanged.
        let u = prepare_update(&d, &Plain, "v1", &current, json!({"metadata": {"name": "w", "labels": {"l": "1"}}, "spec": {"a": 1}, "status": {"s": 9}}), false).unwrap();
        assert_eq!(u["status"], json!({"s": 0}));
        assert_eq!(u["metadata"]["generation"], 1);
        assert_eq!(u["metadata"]["uid"], "u");
        // Spec change bumps generation.
        let u = prepare_update(
            &d,
            &Plain,
            "v1",
            &current,
            json!({"metadata": {"name": "w"}, "spec": {"a": 2}}),
            false,
        )
        .unwrap();
        assert_eq!(u["metadata"]["generation"], 2);
        // Status endpoint: only status changes.
        let u = prepare_update(
            &d,
            &Plain,
            "v1",
            &current,
            json!({"metadata": {"name": "w"}, "spec": {"a": 5}, "status": {"s": 3}}),
            true,
        )
        .unwrap();
        assert_eq!(u["spec"], json!({"a": 1}));
        assert_eq!(u["status"], json!({"s": 3}));
        assert_eq!(u["metadata"]["generation"], 1);
        assert!(
            prepare_update(
                &d,
                &Plain,
                "v1",
                &current,
                json!({"metadata": {"name": "other"}}),
                false
            )
            .is_err()
        );
    }

    #[test]
    fn deletion_marks_once() {
        let mut o = json!({"metadata": {"name": "a", "finalizers": ["f"]}});
        mark_deleting(&mut o, now());
        let first = o["metadata"]["deletionTimestamp"].clone();
        mark_deleting(&mut o, "2027-01-01T00:00:00Z".parse().unwrap());
        assert_eq!(o["metadata"]["deletionTimestamp"], first);
        assert!(is_deleting(&o));
        assert_eq!(finalizers_of(&o), 1);
    }

    #[test]
    fn no_op_detection_ignores_resource_version() {
        let a = json!({"metadata": {"name": "a", "resourceVersion": "1"}, "data": {}});
        let b = json!({"metadata": {"name": "a", "resourceVersion": "2"}, "data": {}});
        assert!(same_content(&a, &b));
        assert!(!same_content(
            &a,
            &json!({"metadata": {"name": "a"}, "data": {"x": "1"}})
        ));
    }
}
