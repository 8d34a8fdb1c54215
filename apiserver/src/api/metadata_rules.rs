//! The rules every object's metadata follows, whatever its kind (custom kinds included, whose
//! schemas say nothing of `metadata`): it decodes as `ObjectMeta` (labels and annotations are
//! maps of strings, finalizers a list of strings), label keys and annotation keys are qualified
//! names, label values are short names, and annotations stay under 256 KiB. A controller that
//! reads a kind typed cannot decode an object that breaks these, so none is stored.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::field_errors::{FieldError, Problem};

/// The most the annotations of one object may hold, keys and values together.
pub const MAX_ANNOTATION_BYTES: usize = 256 * 1024;
/// The longest name part of a qualified name, and the longest label value.
const MAX_NAME: usize = 63;
/// The longest prefix of a qualified name (a DNS subdomain).
const MAX_PREFIX: usize = 253;

const NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const VALUE_RULE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const PREFIX_RULE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Why `obj`'s metadata does not decode (a field of the wrong type), if it does not.
pub fn undecodable(obj: &Value) -> Option<serde_json::Error> {
    let meta = obj.get("metadata")?;
    ObjectMeta::deserialize(meta).err()
}

/// The rule-breaking keys and values of `obj`'s labels and annotations.
pub fn problems(obj: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    let empty = Map::new();
    let map = |name: &str| {
        obj.pointer(&format!("/metadata/{name}"))
            .and_then(Value::as_object)
            .unwrap_or(&empty)
    };
    for (key, value) in map("labels") {
        qualified_name(key, "metadata.labels", &mut out);
        let value = value.as_str().unwrap_or("");
        if let Some(why) = label_value(value) {
            out.push(invalid("metadata.labels", value, why));
        }
    }
    let annotations = map("annotations");
    for key in annotations.keys() {
        qualified_name(&key.to_lowercase(), "metadata.annotations", &mut out);
    }
    let size: usize = annotations
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if size > MAX_ANNOTATION_BYTES {
        out.push(FieldError {
            problem: Problem::TooLong,
            field: "metadata.annotations".into(),
            value: None,
            detail: format!("may not be more than {MAX_ANNOTATION_BYTES} bytes"),
        });
    }
    out
}

fn invalid(field: &str, value: &str, detail: impl Into<String>) -> FieldError {
    FieldError {
        problem: Problem::Invalid,
        field: field.into(),
        value: Some(Value::String(value.to_owned())),
        detail: detail.into(),
    }
}

/// A label key or annotation key: `[prefix/]name`.
fn qualified_name(key: &str, field: &str, out: &mut Vec<FieldError>) {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if name.is_empty() {
        out.push(invalid(field, key, "name part must be non-empty"));
    } else if name.len() > MAX_NAME {
        out.push(invalid(
            field,
            key,
            format!("name part must be no more than {MAX_NAME} characters"),
        ));
    } else if !short_name(name) {
        out.push(invalid(field, key, format!("name part {NAME_RULE}")));
    }
    match prefix {
        Some("") => out.push(invalid(field, key, "prefix part must be non-empty")),
        Some(p) if p.len() > MAX_PREFIX => out.push(invalid(
            field,
            key,
            format!("prefix part must be no more than {MAX_PREFIX} characters"),
        )),
        Some(p) if !dns_subdomain(p) => {
            out.push(invalid(field, key, format!("prefix part {PREFIX_RULE}")))
        }
        _ => {}
    }
}

/// Why a label value breaks the rules, if it does.
fn label_value(value: &str) -> Option<String> {
    if value.len() > MAX_NAME {
        Some(format!("must be no more than {MAX_NAME} characters"))
    } else if !value.is_empty() && !short_name(value) {
        Some(VALUE_RULE.to_owned())
    } else {
        None
    }
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn short_name(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

/// A lowercase RFC 1123 subdomain.
fn dns_subdomain(s: &str) -> bool {
    s.split('.').all(|part| {
        let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        !part.is_empty()
            && part.starts_with(ok)
            && part.ends_with(ok)
            && part.chars().all(|c| ok(c) || c == '-')
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(obj: Value) -> Vec<String> {
        problems(&obj).iter().map(|e| e.message()).collect()
    }

    #[test]
    fn well_formed_metadata_passes() {
        let obj = json!({"metadata": {"name": "x",
            "labels": {"app": "web", "kueue.x-k8s.io/queue-name": "gpustack-fnv64-1a", "empty": ""},
            "annotations": {"example.com/Note": "anything at all: {\"json\": true}"},
            "finalizers": ["gpustack.ai/controlled"]}});
        assert!(undecodable(&obj).is_none());
        assert_eq!(fields(obj), Vec::<String>::new());
    }

    #[test]
    fn values_of_the_wrong_type_do_not_decode() {
        for meta in [
            json!({"labels": {"a": 5}}),
            json!({"annotations": {"a": {"nested": true}}}),
            json!({"finalizers": "one"}),
            json!({"labels": ["a"]}),
        ] {
            assert!(undecodable(&json!({"metadata": meta})).is_some(), "{meta}");
        }
    }

    #[test]
    fn keys_and_values_follow_the_name_rules() {
        let out = fields(json!({"metadata": {"labels": {
            "bad key": "v", "Example.com/x": "v", "ok": "bad value", "long": "x".repeat(64),
        }}}));
        assert_eq!(out.len(), 4, "{out:?}");
        assert!(out.iter().any(|m| m.starts_with(
            "metadata.labels: Invalid value: \"bad key\": name part must consist of"
        )));
        assert!(
            out.iter()
                .any(|m| m.contains("\"Example.com/x\": prefix part a lowercase RFC 1123"))
        );
        assert!(
            out.iter()
                .any(|m| m.contains("\"bad value\": a valid label must be an empty string"))
        );
        assert!(
            out.iter()
                .any(|m| m.ends_with("must be no more than 63 characters"))
        );
    }

    #[test]
    fn annotations_are_bounded_in_size() {
        let big = "x".repeat(MAX_ANNOTATION_BYTES);
        let out = fields(json!({"metadata": {"annotations": {"a": big}}}));
        assert_eq!(
            out,
            vec!["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
    }
}
