//! Secrets: `stringData` is write-only, folded into `data` on every write, and the `type` is
//! fixed at creation.

use serde_json::{Value, json};

use super::strategy::KindStrategy;
use crate::api::{
    field_errors::{FieldError, Problem},
    objects::KindRules,
};

pub(super) struct Secret;

impl KindRules for Secret {
    /// `stringData` folded into `data` (base64), as Kubernetes does on every write: it wins
    /// over `data` for the same key.
    fn canonicalize(&self, obj: &mut Value) {
        use base64::Engine;
        let Some(Value::Object(strings)) = obj.as_object_mut().and_then(|o| o.remove("stringData"))
        else {
            return;
        };
        let data = obj
            .as_object_mut()
            .map(|o| o.entry("data").or_insert_with(|| json!({})));
        if let Some(Value::Object(data)) = data {
            for (k, v) in strings {
                let text = v.as_str().unwrap_or_default();
                data.insert(
                    k,
                    json!(base64::engine::general_purpose::STANDARD.encode(text)),
                );
            }
        }
    }
}

impl KindStrategy for Secret {
    fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        type_kept(obj, old).into_iter().collect()
    }
}

/// A Secret's `type` is fixed at creation (unset reads as `Opaque`).
fn type_kept(obj: &Value, old: Option<&Value>) -> Option<FieldError> {
    let type_of = |o: &Value| {
        o.get("type")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .unwrap_or("Opaque")
            .to_owned()
    };
    let (new, old) = (type_of(obj), type_of(old?));
    (new != old).then(|| FieldError {
        problem: Problem::Invalid,
        field: "type".into(),
        value: Some(Value::String(new)),
        detail: "field is immutable".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_data_is_folded_into_data() {
        let mut obj = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"a": "eA==", "b": "eQ=="}, "stringData": {"b": "new"}});
        Secret.canonicalize(&mut obj);
        assert_eq!(obj["data"], json!({"a": "eA==", "b": "bmV3"}));
        assert!(obj.get("stringData").is_none());
    }

    #[test]
    fn the_type_is_fixed() {
        let old = json!({"type": "Opaque"});
        assert!(Secret.validate(&json!({}), Some(&old)).is_empty());
        assert!(Secret.validate(&json!({"type": "x"}), None).is_empty());
        let e = Secret.validate(&json!({"type": "x"}), Some(&old));
        assert_eq!(
            e[0].message(),
            "type: Invalid value: \"x\": field is immutable"
        );
    }
}
