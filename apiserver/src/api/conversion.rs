//! Kinds served in one form and stored in another. Today: `events.k8s.io/v1` `Event`, stored as
//! the core `v1` `Event` (as Kubernetes does), so events recorded through either API show up in
//! both, and in `kubectl describe`.

use serde_json::{Map, Value, json};

use crate::registry::ResourceDef;

/// Field renames between `events.k8s.io/v1` (left) and core `v1` (right).
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn is_events_v1(def: &ResourceDef) -> bool {
    def.group == "events.k8s.io" && def.kind == "Event"
}

fn rename(obj: &mut Map<String, Value>, from_left: bool) {
    for (left, right) in EVENT_FIELDS {
        let (from, to) = if from_left {
            (left, right)
        } else {
            (right, left)
        };
        if let Some(v) = obj.remove(*from) {
            obj.insert((*to).to_owned(), v);
        }
    }
}

/// The stored form of an object given in `def`'s form (at its storage version).
pub fn to_storage(def: &ResourceDef, mut obj: Value) -> Value {
    if let Some(m) = obj.as_object_mut()
        && let Some(storage) = def.versions.first()
    {
        m.insert("apiVersion".into(), json!(def.api_version(storage)));
    }
    if is_events_v1(def)
        && let Some(m) = obj.as_object_mut()
    {
        // `series` is the same field in both forms (core v1 Events have one too).
        rename(m, true);
        m.insert("apiVersion".into(), json!("v1"));
    }
    obj
}

/// `def`'s form of a stored object.
pub fn from_storage(def: &ResourceDef, mut obj: Value) -> Value {
    if is_events_v1(def)
        && let Some(m) = obj.as_object_mut()
    {
        rename(m, false);
        m.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::builtins;

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
        let stored = to_storage(v1, given.clone());
        assert_eq!(stored["involvedObject"]["name"], "p");
        assert_eq!(stored["message"], "hello");
        assert_eq!(stored["reportingComponent"], "me");
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(
            stored["series"]["count"], 2,
            "kept as the core form's series"
        );
        assert_eq!(stored["count"], 2);
        assert_eq!(from_storage(v1, stored.clone()), given);
        assert_eq!(from_storage(core, stored.clone()), stored);
    }
}
