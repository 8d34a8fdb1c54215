//! Settings as API objects: built from the Settings Secret's values, and changed by updates and
//! patches. Pure: the Secret is read and written elsewhere.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::catalog::{self, Definition};
use super::validate::{self, Refused};

/// What a sensitive setting reads as.
pub const MASKED: &str = "(sensitive)";

/// The Secret's identity and version, which every setting shares.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SecretMeta {
    /// The Secret's resourceVersion.
    pub resource_version: String,
    /// The Secret's creationTimestamp.
    pub creation_timestamp: Option<String>,
}

/// The `Setting` object of one catalog entry with its current value.
pub fn object(def: &Definition, value: &str, namespace: &str, meta: &SecretMeta) -> Value {
    let shown = if def.sensitive { MASKED } else { value };
    let mut metadata = json!({
        "name": def.name,
        "namespace": namespace,
        "resourceVersion": meta.resource_version,
    });
    if let Some(ts) = &meta.creation_timestamp {
        metadata["creationTimestamp"] = json!(ts);
    }
    json!({
        "apiVersion": "gpustack.ai/v1",
        "kind": "Setting",
        "metadata": metadata,
        "spec": {},
        "status": {
            "description": def.description,
            "editable": def.editable,
            "sensitive": def.sensitive,
            "value": shown,
        },
    })
}

/// Every setting, sorted by name; a setting missing from the Secret reads as its default.
pub fn all(values: &BTreeMap<String, String>, namespace: &str, meta: &SecretMeta) -> Vec<Value> {
    catalog::CATALOG
        .iter()
        .map(|d| object(d, value_of(values, d), namespace, meta))
        .collect()
}

/// The stored value of `def`, else its default.
pub fn value_of<'a>(values: &'a BTreeMap<String, String>, def: &'a Definition) -> &'a str {
    values
        .get(def.name)
        .map(String::as_str)
        .unwrap_or(def.default)
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    /// The setting may not be changed through the API.
    #[error("setting \"{0}\" is not editable")]
    NotEditable(&'static str),
    /// The value is not allowed.
    #[error("spec.value: Invalid value: {0}")]
    Invalid(#[from] Refused),
    /// The value is not a string.
    #[error("spec.value: Invalid value: must be a string")]
    NotAString,
    /// The patch does not apply (the cause).
    #[error("the patch does not apply: {0}")]
    Patch(String),
}

/// How a change arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    /// A whole object (PUT) or an apply patch: its `spec.value`, if any.
    Object,
    /// JSON merge patch (and strategic merge, which for this flat kind is the same).
    Merge,
    /// RFC 6902 JSON patch.
    Json,
}

/// The new value `change` asks for, checked; `None` when it leaves the value as it is.
pub fn change(
    def: &'static Definition,
    current: &Value,
    kind: PatchKind,
    change: &Value,
    values: &BTreeMap<String, String>,
) -> Result<Option<String>, ChangeError> {
    let patched = match kind {
        PatchKind::Object => change.clone(),
        PatchKind::Merge => {
            let mut doc = current.clone();
            json_patch::merge(&mut doc, change);
            doc
        }
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_value(change.clone())
                .map_err(|e| ChangeError::Patch(e.to_string()))?;
            let mut doc = current.clone();
            json_patch::patch(&mut doc, &ops).map_err(|e| ChangeError::Patch(e.to_string()))?;
            doc
        }
    };
    let new = match patched.pointer("/spec/value") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(ChangeError::NotAString),
    };
    if !def.editable {
        return Err(ChangeError::NotEditable(def.name));
    }
    validate::value(def, &new, |other| {
        catalog::find(other).map(|d| value_of(values, d).to_owned())
    })?;
    Ok(Some(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> SecretMeta {
        SecretMeta {
            resource_version: "7".into(),
            creation_timestamp: None,
        }
    }

    #[test]
    fn objects_mask_sensitive_values_and_fill_defaults() {
        let mut values = BTreeMap::new();
        values.insert(
            "model-artifact-https-proxy".to_owned(),
            "http://u:p@proxy".to_owned(),
        );
        let objs = all(&values, "gpustack-system", &meta());
        assert_eq!(objs.len(), catalog::CATALOG.len());
        let proxy = objs
            .iter()
            .find(|o| o["metadata"]["name"] == "model-artifact-https-proxy")
            .unwrap();
        assert_eq!(proxy["status"]["value"], MASKED);
        assert!(
            !proxy.to_string().contains("u:p@"),
            "the secret value never appears"
        );
        let policy = objs
            .iter()
            .find(|o| o["metadata"]["name"] == "image-pull-policy")
            .unwrap();
        assert_eq!(policy["status"]["value"], "IfNotPresent");
        assert_eq!(policy["metadata"]["resourceVersion"], "7");
        assert_eq!(policy["spec"], json!({}));
    }

    #[test]
    fn changes_by_each_patch_kind() {
        let def = catalog::find("workload-fit-affinity").unwrap();
        let values = BTreeMap::new();
        let cur = object(def, "true", "ns", &meta());
        let merge = json!({"spec": {"value": "false"}});
        assert_eq!(
            change(def, &cur, PatchKind::Merge, &merge, &values),
            Ok(Some("false".into()))
        );
        let ops = json!([{"op": "add", "path": "/spec/value", "value": "false"}]);
        assert_eq!(
            change(def, &cur, PatchKind::Json, &ops, &values),
            Ok(Some("false".into()))
        );
        let labels_only = json!({"metadata": {"labels": {"a": "b"}}});
        assert_eq!(
            change(def, &cur, PatchKind::Merge, &labels_only, &values),
            Ok(None)
        );
        let bad = json!({"spec": {"value": "maybe"}});
        assert_eq!(
            change(def, &cur, PatchKind::Object, &bad, &values)
                .unwrap_err()
                .to_string(),
            "spec.value: Invalid value: setting \"workload-fit-affinity\" must be true or false"
        );
        let number = json!({"spec": {"value": 3}});
        assert_eq!(
            change(def, &cur, PatchKind::Merge, &number, &values),
            Err(ChangeError::NotAString)
        );
    }
}
