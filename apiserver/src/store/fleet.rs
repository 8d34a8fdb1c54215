//! The fleet view: every upstream's mirrored objects together, served read-only as the cluster
//! [`FLEET`] (`/clusters/_fleet/`). Nothing of it is stored but the CRDs its kinds come from:
//! its objects are the member clusters' own rows, seen at read time under the name
//! `CLUSTER.NAME` (unique across upstreams: a cluster name is a DNS label, so the first dot
//! splits it off again), labelled `gpustack.ai/cluster=CLUSTER` (select one upstream with a
//! label selector) and annotated with the original name.
//!
//! Its resourceVersions are the store's, one sequence across every cluster: a member's change
//! at version N is the fleet's change at N, so lists, watches from a version, 410 Gone and
//! pagination work on the fleet as on any cluster, while each mirrored object is stored and
//! written once. A fleet list is ordered by (cluster, namespace, name).

use serde_json::{Value, json};

/// The cluster name of the fleet view. Not a DNS label, so no upstream or embedded cluster can
/// take it.
pub const FLEET: &str = "_fleet";

/// The label naming an object's upstream in the fleet view.
pub const CLUSTER_LABEL: &str = "gpustack.ai/cluster";

/// The annotation holding an object's name in its upstream.
pub const ORIGINAL_NAME: &str = "gpustack.ai/original-name";

/// Whether `cluster`'s `group`/`resource` is the fleet view derived from its members' rows.
/// The fleet's CRDs are its own (shared by every upstream, stored once under [`FLEET`]).
pub fn derived(cluster: &str, group: &str, resource: &str) -> bool {
    cluster == FLEET
        && !(group == "apiextensions.k8s.io" && resource == "customresourcedefinitions")
}

/// The fleet view's name of `name` from `cluster`.
pub fn fleet_name(cluster: &str, name: &str) -> String {
    format!("{cluster}.{name}")
}

/// The (cluster, name) a fleet view name stands for.
pub fn original(fleet_name: &str) -> Option<(&str, &str)> {
    fleet_name.split_once('.')
}

/// The fleet view's form of `body`, mirrored from `cluster`.
pub fn fleet_body(cluster: &str, mut body: Value) -> Value {
    if let Some(meta) = body.get_mut("metadata") {
        fleet_metadata(cluster, meta);
    }
    body
}

/// Renames, labels and annotates one object's `metadata` for the fleet view.
fn fleet_metadata(cluster: &str, meta: &mut Value) {
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    meta.insert("name".into(), json!(fleet_name(cluster, &name)));
    for (field, k, v) in [
        ("labels", CLUSTER_LABEL, cluster.to_owned()),
        ("annotations", ORIGINAL_NAME, name),
    ] {
        let map = meta.entry(field).or_insert_with(|| json!({}));
        if !map.is_object() {
            *map = json!({});
        }
        if let Some(m) = map.as_object_mut() {
            m.insert(k.into(), json!(v));
        }
    }
}

/// [`fleet_body`] on stored JSON text. Only `metadata` is parsed: the rest of the object (most
/// of it) is copied through as text, so serving the fleet costs little more than serving its
/// members.
pub fn fleet_text(cluster: &str, text: &str) -> Result<String, serde_json::Error> {
    let Some(span) = member_span(text, "metadata") else {
        let body: Value = serde_json::from_str(text)?;
        return serde_json::to_string(&fleet_body(cluster, body));
    };
    let mut meta: Value = serde_json::from_str(&text[span.clone()])?;
    fleet_metadata(cluster, &mut meta);
    let meta = serde_json::to_string(&meta)?;
    let mut out = String::with_capacity(text.len() + meta.len() - span.len());
    out.push_str(&text[..span.start]);
    out.push_str(&meta);
    out.push_str(&text[span.end..]);
    Ok(out)
}

/// Where the value of the top-level member `key` of the JSON object `text` lies, if `text` is
/// an object with that member. A scan of the text (strings and nesting only), no parse.
fn member_span(text: &str, key: &str) -> Option<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = skip_ws(bytes, i);
        if bytes.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(bytes, i)?;
        let name = &text[i + 1..key_end - 1];
        i = skip_ws(bytes, key_end);
        if bytes.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(bytes, i + 1);
        let end = value_end(bytes, start)?;
        if name == key {
            return Some(start..end);
        }
        i = skip_ws(bytes, end);
        match bytes.get(i) {
            Some(b',') => i += 1,
            _ => return None,
        }
    }
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The index just past the string starting (with its quote) at `start`.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    loop {
        match bytes.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// The index just past the JSON value starting at `start`.
fn value_end(bytes: &[u8], start: usize) -> Option<usize> {
    match bytes.get(start)? {
        b'"' => string_end(bytes, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            loop {
                match bytes.get(i)? {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let mut i = start;
            while bytes
                .get(i)
                .is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
            {
                i += 1;
            }
            Some(i)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_recoverable() {
        let n = fleet_name("east", "node-1.example");
        assert_eq!(n, "east.node-1.example");
        assert_eq!(original(&n), Some(("east", "node-1.example")));
    }

    #[test]
    fn copies_carry_cluster_label_and_original_name() {
        let body = json!({"metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {}});
        let got = fleet_body("west", body);
        assert_eq!(got["metadata"]["name"], "west.n");
        assert_eq!(
            got["metadata"]["labels"],
            json!({"a": "b", CLUSTER_LABEL: "west"})
        );
        assert_eq!(got["metadata"]["annotations"][ORIGINAL_NAME], "n");
        assert_eq!(got["spec"], json!({}));
    }

    #[test]
    fn text_form_equals_the_parsed_form() {
        let bodies = [
            json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "labels": {"a": "b"}},
                   "spec": {"s": "a \"quoted\" } ] string", "list": [1, {"x": [2, 3]}], "n": -1.5e3}}),
            json!({"spec": {"x": true}, "metadata": {"name": "m"}, "status": null}),
            json!({"metadata": {"name": "n", "annotations": "not a map"}}),
            json!({"kind": "NoMetadata"}),
        ];
        for body in bodies {
            for text in [
                body.to_string(),
                serde_json::to_string_pretty(&body).unwrap(),
            ] {
                let got: Value = serde_json::from_str(&fleet_text("c", &text).unwrap()).unwrap();
                assert_eq!(got, fleet_body("c", body.clone()), "{text}");
            }
        }
    }

    #[test]
    fn scanning_finds_members_after_scalars_and_containers() {
        let text = r#"{"a": 1, "b" : "x,}", "c": [1, [2]], "metadata" : {"name": "n"} }"#;
        let span = member_span(text, "metadata").unwrap();
        assert_eq!(&text[span], r#"{"name": "n"}"#);
        assert_eq!(member_span(text, "zz"), None);
        assert_eq!(member_span("[1]", "metadata"), None);
    }

    #[test]
    fn only_the_fleets_own_kinds_are_stored() {
        assert!(derived(FLEET, "worker.gpustack.ai", "devices"));
        assert!(!derived(
            FLEET,
            "apiextensions.k8s.io",
            "customresourcedefinitions"
        ));
        assert!(!derived("east", "worker.gpustack.ai", "devices"));
    }
}
