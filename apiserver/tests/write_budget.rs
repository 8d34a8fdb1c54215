//! Property: no patch or create grows an object past the write budget (issue 40). Over
//! generated objects and generated JSON patches (copy, add, move, remove, replace), merge
//! patches, strategic merge patches, applied configurations and CRD defaults, every result is
//! either refused as too large (the 413 of the limit) or within the budget, it is refused
//! exactly when the documented rule says so, and each case is evaluated in bounded time.
//!
//! The rules checked: a JSON patch may copy at most what the limit leaves beside the object
//! (counted before each copy is made); the other patches merge what the body holds, so they
//! never grow an object by more than the body's size, and the result is refused past the limit;
//! defaults are put in within a byte budget, the key of each member put in counted with its
//! value. Cases per property: `PROPTEST_CASES` (default 16 for the patches, whose cases build
//! objects of up to 16 MiB, and 64 for the defaults).

use std::time::{Duration, Instant};

use gpustack_apiserver::api::{
    patch::{self, PatchError, PatchKind},
    validation::{MAX_OBJECT_BYTES, object_too_large, within_object_limit},
};
use gpustack_kube_rest::schema::{apply_defaults, apply_defaults_within, json_size};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// The most one case may take (a loaded machine's slack included): what bounds the work.
const CASE_TIME: Duration = Duration::from_secs(10);

/// `PROPTEST_CASES`, or `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn size(v: &Value) -> usize {
    json_size(v, usize::MAX).expect("no limit")
}

/// Small JSON values: the leaves and branches objects are made of.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        "[a-z]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A stored object: metadata, a `data` map holding one large string (of `big` bytes) and
/// generated fields, and a list.
fn object(big: std::ops::Range<usize>) -> impl Strategy<Value = Value> {
    (
        big,
        prop::collection::btree_map("[a-z]{1,6}", value(), 0..6),
        prop::collection::vec(value(), 0..6),
    )
        .prop_map(|(big, fields, list)| {
            let mut data: Map<String, Value> = fields.into_iter().collect();
            data.insert("big".into(), Value::from("x".repeat(big)));
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "o", "labels": {"a": "1"}},
                "data": data,
                "list": list,
            })
        })
}

/// Every JSON pointer in `v`, up to depth 3.
fn pointers(v: &Value, at: &str, depth: usize, out: &mut Vec<String>) {
    out.push(at.to_owned());
    if depth == 3 {
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let k = k.replace('~', "~0").replace('/', "~1");
                pointers(child, &format!("{at}/{k}"), depth + 1, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                pointers(child, &format!("{at}/{i}"), depth + 1, out);
            }
        }
        _ => {}
    }
}

/// One generated JSON patch operation: its kind, where it reads and writes (indices into the
/// pointers known so far), how the target is formed, and a value to add.
type OpPick = (u8, usize, usize, u8, Value);

/// The JSON patch `picks` make against `doc`, after `doublings` copies of `/data` into itself:
/// targets are known pointers, a new key under one (a copy of a map into itself doubles it), or
/// an array's end; each target becomes known.
fn json_patch(doc: &Value, doublings: usize, picks: &[OpPick]) -> Vec<Value> {
    let mut known = Vec::new();
    pointers(doc, "", 0, &mut known);
    let mut ops: Vec<Value> = (0..doublings)
        .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/d{i}")}))
        .collect();
    for (i, (kind, from, to, target, value)) in picks.iter().enumerate() {
        let from = known[from % known.len()].clone();
        let base = known[to % known.len()].clone();
        let path = match target % 3 {
            0 => base,
            1 => format!("{base}/n{i}"),
            _ => format!("{base}/-"),
        };
        let op = match kind % 5 {
            0 | 1 => json!({"op": "copy", "from": from, "path": path}),
            2 => json!({"op": "add", "path": path, "value": value}),
            3 => json!({"op": "move", "from": from, "path": path}),
            _ if i % 2 == 0 => json!({"op": "remove", "path": path}),
            _ => json!({"op": "replace", "path": path, "value": value}),
        };
        if !path.ends_with("/-") {
            known.push(path);
        }
        ops.push(op);
    }
    ops
}

/// What the rule says a JSON patch does: each operation applied in turn; refused as too large
/// once the object's size plus what its copies copied would pass the limit (counted before the
/// copy is made, so nothing past the limit is ever built).
enum Expected {
    TooLarge,
    Failed,
    Done(Value),
}

fn json_patch_rule(current: &Value, ops: &[Value]) -> Expected {
    let mut doc = current.clone();
    let mut grown = size(current);
    for op in ops {
        if op["op"] == "copy" {
            let Some(copied) = op["from"].as_str().and_then(|f| doc.pointer(f)) else {
                return Expected::Failed;
            };
            grown += size(copied);
            if grown > MAX_OBJECT_BYTES {
                return Expected::TooLarge;
            }
        }
        let Ok(op) = serde_json::from_value::<json_patch::PatchOperation>(op.clone()) else {
            return Expected::Failed;
        };
        if json_patch::patch(&mut doc, &[op]).is_err() {
            return Expected::Failed;
        }
    }
    Expected::Done(doc)
}

fn too_large(message: &str) -> bool {
    message.contains(&format!(
        "would exceed the limit of {MAX_OBJECT_BYTES} bytes"
    ))
}

/// A patch through the write path's checks: patched, then held to the object limit.
fn written(current: &Value, kind: PatchKind, body: &[u8]) -> Result<Value, String> {
    let patched = patch::apply(current, kind, body).map_err(|e| match e {
        // The 413 the write path answers.
        PatchError::TooLarge => object_too_large().message,
        PatchError::Invalid(m) => m,
    })?;
    within_object_limit(&patched).map_err(|e| e.message)?;
    Ok(patched)
}

proptest! {
    // Objects of up to 16 MiB, built and measured a few times per case (seconds in a debug
    // build): few cases.
    #![proptest_config(ProptestConfig::with_cases(cases(16)))]

    #[test]
    fn a_json_patch_is_refused_as_too_large_exactly_when_its_copies_pass_the_limit(
        // Up to 512 KiB: a few doublings reach the limit.
        current in object(0..512 << 10),
        doublings in 0usize..10,
        picks in prop::collection::vec(
            (any::<u8>(), any::<usize>(), any::<usize>(), any::<u8>(), value()),
            0..5,
        ),
    ) {
        let ops = json_patch(&current, doublings, &picks);
        let body = serde_json::to_vec(&ops).unwrap();
        let started = Instant::now();
        let got = written(&current, PatchKind::Json, &body);
        prop_assert!(started.elapsed() < CASE_TIME, "took {:?}", started.elapsed());
        match (json_patch_rule(&current, &ops), got) {
            (Expected::TooLarge, Err(e)) => prop_assert!(too_large(&e), "{e}"),
            (Expected::TooLarge, Ok(v)) => prop_assert!(false, "stored {} bytes", size(&v)),
            (Expected::Failed, Err(e)) => prop_assert!(!too_large(&e), "{e}"),
            (Expected::Failed, Ok(_)) => prop_assert!(false, "a failing operation was stored"),
            (Expected::Done(want), Ok(v)) => {
                prop_assert!(size(&v) <= MAX_OBJECT_BYTES);
                prop_assert_eq!(v, want);
            }
            // Within the copy budget but past the limit through added values: the 413.
            (Expected::Done(want), Err(e)) => {
                prop_assert!(too_large(&e), "{e}");
                prop_assert!(size(&want) > MAX_OBJECT_BYTES);
            }
        }
    }

    #[test]
    fn merge_strategic_and_apply_patches_grow_an_object_by_at_most_their_body(
        // Mostly small (growth is checked on any size); one case in four near the limit, where
        // an object and a body of 6-10 MiB each are past it about half the time.
        (current, big) in prop_oneof![
            3 => (object(0..64 << 10), 0usize..64 << 10),
            1 => (object(6 << 20..10 << 20), (6usize << 20)..10 << 20),
        ],
        patch in prop::collection::btree_map("[a-z]{1,6}", value(), 0..6),
        grow in any::<bool>(),
    ) {
        // A patch that rewrites `data` (with another large string) or adds fields beside it.
        let mut patch: Map<String, Value> = patch.into_iter().collect();
        if grow {
            patch.insert("data".into(), json!({"big2": "y".repeat(big)}));
        }
        let body = serde_json::to_vec(&Value::Object(patch)).unwrap();
        let before = size(&current);
        for kind in [PatchKind::Merge, PatchKind::StrategicMerge, PatchKind::Apply] {
            let started = Instant::now();
            let got = patch::apply(&current, kind, &body);
            prop_assert!(started.elapsed() < CASE_TIME, "{kind:?} took {:?}", started.elapsed());
            let Ok(patched) = got else {
                continue;
            };
            let after = size(&patched);
            prop_assert!(after <= before + body.len(), "{kind:?} grew {before} bytes into {after}");
            // The write path holds the result to the limit: the 413 exactly past it.
            match within_object_limit(&patched) {
                Ok(()) => prop_assert!(after <= MAX_OBJECT_BYTES),
                Err(e) => {
                    prop_assert!(too_large(&e.message), "{kind:?}: {}", e.message);
                    prop_assert!(after > MAX_OBJECT_BYTES);
                }
            }
        }
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(64)))]

    #[test]
    fn defaults_are_put_in_within_their_budget(
        fields in prop::collection::btree_map("[a-z]{1,6}", (value(), any::<bool>()), 1..8),
        items in 0usize..2_000,
        // Fields of its own, none the schema knows (their nulls would be pruned, shrinking it).
        present in prop::collection::btree_map("[A-Z]{1,6}", value(), 0..4),
        budget in 0usize..64 * 1024,
    ) {
        // A schema whose fields have generated defaults, one of them a list of `items` objects
        // each defaulted in turn: defaults that multiply.
        let mut properties: Map<String, Value> = fields
            .iter()
            .map(|(k, (default, nested))| {
                let schema = if *nested {
                    json!({"type": "object", "default": {}, "properties": {
                        "inner": {"type": "string", "default": "d".repeat(64)},
                    }})
                } else {
                    json!({"default": default})
                };
                (k.clone(), schema)
            })
            .collect();
        properties.insert("list".into(), json!({
            "type": "array",
            "default": vec![json!({}); items],
            "items": {"type": "object", "properties": {
                "v": {"type": "string", "default": "v".repeat(32)},
            }},
        }));
        let schema = json!({"type": "object", "properties": properties});
        let obj = Value::Object(present.into_iter().collect());
        let mut unbounded = obj.clone();
        apply_defaults(&schema, &mut unbounded);
        let mut bounded = obj.clone();
        let started = Instant::now();
        let complete = apply_defaults_within(&schema, &mut bounded, budget);
        prop_assert!(started.elapsed() < CASE_TIME, "took {:?}", started.elapsed());
        prop_assert!(
            size(&bounded) <= size(&obj) + budget,
            "{} bytes of defaults put in with a budget of {budget}",
            size(&bounded).saturating_sub(size(&obj))
        );
        if complete {
            prop_assert_eq!(bounded, unbounded);
        } else {
            prop_assert!(size(&unbounded) > size(&obj) + budget);
        }
    }
}
