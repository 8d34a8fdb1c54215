//! Kinds served in one form and stored in another: the stored form is at the storage version,
//! and the kind's strategy renames what the forms name differently (`events.k8s.io/v1`
//! `Event`, stored as the core `v1` `Event`: see [`super::kinds`]).

use serde_json::{Value, json};

use super::kinds::strategy::KindStrategy;
use crate::registry::ResourceDef;

/// The stored form of an object given in `def`'s form (at its storage version).
pub(crate) fn to_storage(def: &ResourceDef, kind: &dyn KindStrategy, mut obj: Value) -> Value {
    if let Some(m) = obj.as_object_mut() {
        if let Some(storage) = def.versions.first() {
            m.insert("apiVersion".into(), json!(def.api_version(storage)));
        }
        kind.storage_form(m);
    }
    obj
}

/// `def`'s form of a stored object.
pub(crate) fn from_storage(kind: &dyn KindStrategy, mut obj: Value) -> Value {
    if let Some(m) = obj.as_object_mut() {
        kind.served_form(m);
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{api::kinds, registry::builtins};

    #[test]
    fn events_round_trip_between_forms() {
        let defs = builtins();
        let v1 = defs.iter().find(|d| d.group == "events.k8s.io").unwrap();
        let core = defs
            .iter()
            .find(|d| d.group.is_empty() && d.plural == "events")
            .unwrap();
        assert_eq!(v1.storage_group, "");
        let given = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hello", "reason": "Started", "reportingController": "me",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:05.000000Z"}, "deprecatedCount": 2});
        let stored = to_storage(v1, kinds::of(v1), given.clone());
        assert_eq!(stored["involvedObject"]["name"], "p");
        assert_eq!(stored["message"], "hello");
        assert_eq!(stored["reportingComponent"], "me");
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(
            stored["series"]["count"], 2,
            "kept as the core form's series"
        );
        assert_eq!(stored["count"], 2);
        assert_eq!(from_storage(kinds::of(v1), stored.clone()), given);
        assert_eq!(from_storage(kinds::of(core), stored.clone()), stored);
    }
}
