//! What the store reads from and sets in an object's body.

use serde_json::Value;

/// The keys kube-apiserver writes first, in its order (a typed object's `TypeMeta` and then
/// `ObjectMeta`); the rest keep the order they came in.
const LEADING_KEYS: [&str; 3] = ["kind", "apiVersion", "metadata"];

/// Puts `kind`, `apiVersion` and `metadata` first, as kube-apiserver writes objects, whatever
/// order the client sent them in (clients that report a decode error by column, and people
/// diffing output, notice).
pub(super) fn order_keys(body: &mut Value) {
    let Some(obj) = body.as_object_mut() else {
        return;
    };
    let present: Vec<&str> = LEADING_KEYS
        .into_iter()
        .filter(|k| obj.contains_key(*k))
        .collect();
    if obj.keys().take(present.len()).eq(present.iter().copied()) {
        return;
    }
    let mut ordered = serde_json::Map::with_capacity(obj.len());
    for k in present {
        if let Some(v) = obj.shift_remove(k) {
            ordered.insert(k.to_owned(), v);
        }
    }
    ordered.append(obj);
    *obj = ordered;
}

/// Sets `metadata.resourceVersion` (creating `metadata` if needed), with the object's keys in
/// kube-apiserver's order.
pub(super) fn set_resource_version(body: &mut Value, rv: u64) {
    order_keys(body);
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(v: &Value) -> Vec<&str> {
        v.as_object().unwrap().keys().map(String::as_str).collect()
    }

    #[test]
    fn kind_api_version_and_metadata_come_first() {
        let mut v = json!({"data": {"a": "b"}, "metadata": {"name": "x"}, "apiVersion": "v1", "kind": "ConfigMap", "type": "t"});
        set_resource_version(&mut v, 7);
        assert_eq!(keys(&v), ["kind", "apiVersion", "metadata", "data", "type"]);
        assert_eq!(v["metadata"]["resourceVersion"], "7");
        let mut bare = json!({"spec": {}, "metadata": {}});
        order_keys(&mut bare);
        assert_eq!(keys(&bare), ["metadata", "spec"]);
        let mut sorted = json!({"kind": "K", "apiVersion": "v1", "metadata": {}, "spec": {}});
        let before = sorted.clone();
        order_keys(&mut sorted);
        assert_eq!(keys(&sorted), keys(&before));
    }
}
