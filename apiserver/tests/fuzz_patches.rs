//! Property-based fuzzing of patch bodies (JSON patch, merge, strategic merge, apply) against
//! a stored object: each answers a value or a refusal, never a panic. Cases per property:
//! `PROPTEST_CASES` (default 256); failing inputs are kept under
//! `tests/fuzz_patches.proptest-regressions` and replayed first.

use gpustack_apiserver::api::patch::{self, PatchKind};
use proptest::prelude::*;
use serde_json::{Value, json};

fn current() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": "1"}},
        "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]},
    })
}

/// JSON-ish text: structure characters, keys and values the patchers look at.
fn json_like() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just("[".to_owned()),
            Just("]".to_owned()),
            Just(",".to_owned()),
            Just(":".to_owned()),
            Just("null".to_owned()),
            Just("\"op\"".to_owned()),
            Just("\"add\"".to_owned()),
            Just("\"remove\"".to_owned()),
            Just("\"move\"".to_owned()),
            Just("\"path\"".to_owned()),
            Just("\"from\"".to_owned()),
            Just("\"value\"".to_owned()),
            Just("\"/spec/containers/0\"".to_owned()),
            Just("\"/metadata/labels/-\"".to_owned()),
            Just("\"$patch\"".to_owned()),
            Just("\"delete\"".to_owned()),
            Just("\"$setElementOrder/containers\"".to_owned()),
            Just("\"$retainKeys\"".to_owned()),
            Just("\"containers\"".to_owned()),
            Just("\"name\"".to_owned()),
            "\"[a-z/~0-9-]{0,8}\"",
            "-?[0-9]{1,3}",
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #[test]
    fn patches_never_panic(body in json_like(), raw in prop::collection::vec(any::<u8>(), 0..128)) {
        let cur = current();
        for kind in [PatchKind::Json, PatchKind::Merge, PatchKind::StrategicMerge, PatchKind::Apply] {
            let _ = patch::apply(&cur, kind, body.as_bytes());
            let _ = patch::apply(&cur, kind, &raw);
        }
    }

    #[test]
    fn bodies_never_panic(body in json_like()) {
        let _ = patch::parse_body(body.as_bytes());
    }
}
