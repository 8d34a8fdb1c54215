//! What the store reads from and sets in an object's body.

use serde_json::Value;

/// Sets `metadata.resourceVersion` (creating `metadata` if needed).
pub(super) fn set_resource_version(body: &mut Value, rv: u64) {
    if let Some(obj) = body.as_object_mut() {
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
    }
}

/// The owner uids an object names in `metadata.ownerReferences`.
pub(super) fn owner_uids(body: &Value) -> Vec<&str> {
    body.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default()
}
