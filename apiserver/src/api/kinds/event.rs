//! `events.k8s.io/v1` Events, stored as core `v1` Events (as Kubernetes does), so that events
//! recorded through either API show up in both, and in `kubectl describe`.

use serde_json::{Map, Value, json};

use super::strategy::KindStrategy;
use crate::api::objects::KindRules;

pub(super) struct EventsV1;

/// Field renames between `events.k8s.io/v1` (left) and core `v1` (right).
const FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn rename(obj: &mut Map<String, Value>, from_left: bool) {
    for (left, right) in FIELDS {
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

impl KindRules for EventsV1 {}

impl KindStrategy for EventsV1 {
    /// `series` is the same field in both forms (core v1 Events have one too).
    fn storage_form(&self, obj: &mut Map<String, Value>) {
        rename(obj, true);
        obj.insert("apiVersion".into(), json!("v1"));
    }

    fn served_form(&self, obj: &mut Map<String, Value>) {
        rename(obj, false);
        obj.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    }
}
