//! Which keys of a map field a field manager owns, read from `metadata.managedFields`: what
//! the worker applied before (so it can tell a key it must drop) and what others own (so an
//! admin's label wins over the worker's default).

use std::collections::BTreeSet;

use kube::api::ObjectMeta;

/// The worker's field manager for everything it applies.
pub const MANAGER: &str = "gpustack-worker";

/// Keys under `path` (e.g. `["metadata", "labels"]`) owned by managers that `pick` accepts,
/// through the main resource (`subresource` `None`) or the named subresource.
pub fn owned_keys(
    meta: &ObjectMeta,
    subresource: Option<&str>,
    path: &[&str],
    pick: impl Fn(&str) -> bool,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in meta.managed_fields.iter().flatten() {
        if !pick(entry.manager.as_deref().unwrap_or(""))
            || entry.subresource.as_deref().filter(|s| !s.is_empty()) != subresource
        {
            continue;
        }
        let Some(fields) = entry.fields_v1.as_ref() else {
            continue;
        };
        let mut at = &fields.0;
        for step in path {
            match at.get(format!("f:{step}")) {
                Some(next) => at = next,
                None => {
                    at = &serde_json::Value::Null;
                    break;
                }
            }
        }
        if let Some(map) = at.as_object() {
            out.extend(
                map.keys()
                    .filter_map(|k| k.strip_prefix("f:"))
                    .map(str::to_owned),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_owned_label_keys_per_manager() {
        let entry =
            |manager: &str, sub: Option<&str>, keys: serde_json::Value| ManagedFieldsEntry {
                manager: Some(manager.into()),
                subresource: sub.map(str::to_owned),
                fields_v1: Some(FieldsV1(json!({"f:metadata": {"f:labels": keys}}))),
                ..ManagedFieldsEntry::default()
            };
        let meta = ObjectMeta {
            managed_fields: Some(vec![
                entry(MANAGER, None, json!({"f:a": {}, "f:b": {}})),
                entry("kubectl", None, json!({"f:c": {}})),
                entry(MANAGER, Some("status"), json!({"f:z": {}})),
            ]),
            ..ObjectMeta::default()
        };
        let ours = owned_keys(&meta, None, &["metadata", "labels"], |m| m == MANAGER);
        assert_eq!(ours, BTreeSet::from(["a".to_owned(), "b".to_owned()]));
        let others = owned_keys(&meta, None, &["metadata", "labels"], |m| m != MANAGER);
        assert_eq!(others, BTreeSet::from(["c".to_owned()]));
    }
}
