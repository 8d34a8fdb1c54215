//! Property-based fuzzing of what a client controls: request paths, Accept headers, label and
//! field selectors, YAML and protobuf bodies. Each property is that the parser answers (Ok or a
//! typed refusal) and never panics, and that a refusal or an answer keeps its bounds. Cases
//! per property: `PROPTEST_CASES` (default 256), so CI's run is bounded; a failing input is
//! kept by proptest under `tests/fuzz.proptest-regressions` and replayed first on every run.

use std::collections::BTreeMap;

use gpustack_kube_rest::{bounded, negotiate, path, protobuf, selectors};
use proptest::prelude::*;
use serde_json::json;

/// Path-like strings: segments from a small alphabet that includes what parsers trip on.
fn path_like() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("api".to_owned()),
            Just("apis".to_owned()),
            Just("clusters".to_owned()),
            Just("namespaces".to_owned()),
            Just("v1".to_owned()),
            Just("status".to_owned()),
            Just("".to_owned()),
            Just("..".to_owned()),
            "[a-z0-9.%-]{0,12}",
            ".{0,8}",
        ],
        0..12,
    )
    .prop_map(|segs| format!("/{}", segs.join("/")))
}

fn selector_like() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            "[a-z./-]{0,10}",
            Just("=".to_owned()),
            Just("==".to_owned()),
            Just("!=".to_owned()),
            Just(",".to_owned()),
            Just(" in (".to_owned()),
            Just(" notin (".to_owned()),
            Just(")".to_owned()),
            Just("!".to_owned()),
            ".{0,4}",
        ],
        0..16,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #[test]
    fn paths_never_panic(p in path_like()) {
        let (_, rest) = path::split_cluster(&p);
        let _ = path::parse(rest);
        let _ = path::parse(&p);
    }

    #[test]
    fn accept_headers_never_panic(a in ".{0,80}", b in "[a-z/;=,*.+ -]{0,80}") {
        for accept in [&a, &b] {
            let _ = negotiate::for_resource(accept, true);
            let _ = negotiate::for_discovery(accept, true);
            let _ = negotiate::for_openapi_v2(accept);
        }
    }

    #[test]
    fn selectors_never_panic(s in selector_like(), k in "[a-z]{1,3}", v in "[a-z]{0,3}") {
        let labels: BTreeMap<String, String> = [(k.clone(), v.clone())].into_iter().collect();
        if let Ok(sel) = selectors::LabelSelector::parse(&s) {
            let _ = sel.matches(&labels);
        }
        let selectable = vec!["spec.nodeName".to_owned()];
        if let Ok(sel) = selectors::FieldSelector::parse(&s, &selectable) {
            let _ = sel.matches(&json!({"metadata": {"name": k, "namespace": v}}));
        }
    }

    #[test]
    fn yaml_bodies_keep_their_bounds(body in prop::collection::vec(any::<u8>(), 0..512),
                                     text in "[a-z:&*\\[\\]{}, \\n-]{0,200}") {
        for doc in [body.as_slice(), text.as_bytes()] {
            if let Ok(v) = bounded::yaml_value(doc, 4096) {
                prop_assert!(bounded::depth(&v) <= bounded::MAX_DEPTH);
                prop_assert!(v.to_string().len() <= 4 * 4096);
            }
        }
    }

    #[test]
    fn protobuf_bodies_never_panic(body in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut framed = b"k8s\x00".to_vec();
        framed.extend_from_slice(&body);
        let _ = protobuf::decode(&body);
        let _ = protobuf::decode(&framed);
    }
}
