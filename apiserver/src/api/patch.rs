//! Patch bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch
//! (see [`super::strategic`]) and server-side apply (a merge
//! of the applied configuration).

use gpustack_kube_rest::bounded;
use serde_json::Value;

/// The kinds of PATCH, as the request's Content-Type names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json` (built-in kinds).
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchKind {
    /// The patch kind `ct` names (parameters ignored); `None` for a type that is no patch.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/strategic-merge-patch+json" => Some(PatchKind::StrategicMerge),
            "application/apply-patch+yaml"
            | "application/apply-patch+json"
            | "application/apply-patch+cbor" => Some(PatchKind::Apply),
            _ => None,
        }
    }
}

/// Why a request body could not be read as a document.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The body is empty.
    #[error("the request body is empty")]
    Empty,
    /// The body is neither JSON nor YAML.
    #[error("the request body is neither valid JSON ({json}) nor YAML ({yaml})")]
    Unreadable {
        /// Why it is not JSON.
        json: serde_json::Error,
        /// Why it is not YAML.
        yaml: bounded::DocumentError,
    },
}

/// Parses a request body that is JSON or YAML into a JSON value. YAML is read with its
/// expanded size bounded by the request body limit, so aliases cannot blow it up.
pub fn parse_body(body: &[u8]) -> Result<Value, BodyError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(BodyError::Empty);
    }
    match serde_json::from_slice(body) {
        Ok(v) => Ok(v),
        // YAML's expanded size (aliases replay their anchors) is bounded like a body's.
        Err(json) => bounded::yaml_value(body, super::MAX_BODY_BYTES)
            .map_err(|yaml| BodyError::Unreadable { json, yaml }),
    }
}

/// Why a patch was not applied.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patched object would pass [`super::validation::MAX_OBJECT_BYTES`] (a 413, as any
    /// object past the limit).
    #[error(
        "the patched object would exceed the limit of {} bytes",
        super::validation::MAX_OBJECT_BYTES
    )]
    TooLarge,
    /// The patch is malformed, does more work than allowed, or does not apply.
    #[error("{0}")]
    Invalid(String),
}

/// Applies `patch` of `kind` to `current`, returning the patched object.
pub fn apply(current: &Value, kind: PatchKind, patch: &[u8]) -> Result<Value, PatchError> {
    let invalid = PatchError::Invalid;
    let mut doc = current.clone();
    match kind {
        PatchKind::Json => {
            let ops: Vec<Value> = serde_json::from_slice(patch)
                .map_err(|e| invalid(format!("invalid JSON patch: {e}")))?;
            let mut budget = JsonPatchBudget::new(&doc, ops.len())?;
            for op in ops {
                budget.charge(&doc, &op)?;
                // Like the Kubernetes API server: testing that an absent path is null succeeds
                // (kube-rs' finalizer helper relies on it).
                if op.get("op").and_then(Value::as_str) == Some("test")
                    && op.get("value").is_none_or(Value::is_null)
                    && op
                        .get("path")
                        .and_then(Value::as_str)
                        .is_some_and(|p| doc.pointer(p).is_none_or(Value::is_null))
                {
                    continue;
                }
                let op: json_patch::PatchOperation = serde_json::from_value(op)
                    .map_err(|e| invalid(format!("invalid JSON patch: {e}")))?;
                json_patch::patch(&mut doc, std::slice::from_ref(&op))
                    .map_err(|e| invalid(format!("the JSON patch could not be applied: {e}")))?;
            }
        }
        PatchKind::Merge => {
            let p: Value = serde_json::from_slice(patch)
                .map_err(|e| invalid(format!("invalid merge patch: {e}")))?;
            json_patch::merge(&mut doc, &p);
        }
        PatchKind::StrategicMerge => {
            let p: Value = serde_json::from_slice(patch)
                .map_err(|e| invalid(format!("invalid strategic merge patch: {e}")))?;
            if !p.is_object() {
                return Err(invalid("a strategic merge patch must be an object".into()));
            }
            doc = super::strategic::apply(&doc, &p);
        }
        PatchKind::Apply => {
            let p = parse_body(patch).map_err(|e| invalid(e.to_string()))?;
            if !p.is_object() {
                return Err(invalid(
                    "the applied configuration must be an object".into(),
                ));
            }
            merge_applied(&mut doc, &p);
        }
    }
    Ok(doc)
}

/// The most operations a JSON patch may hold (kube-apiserver's limit).
const MAX_JSON_PATCH_OPS: usize = 10_000;
/// The most element shifts a JSON patch's operations may cost together: an insertion or
/// removal in an array moves every element after it.
const MAX_JSON_PATCH_SHIFTS: usize = 64 << 20;

/// What a JSON patch may still do: grow the object (only `copy` repeats what is already there,
/// and doubling it a few dozen times would make gigabytes of a small body) up to the object
/// limit, and shift array elements up to [`MAX_JSON_PATCH_SHIFTS`].
struct JsonPatchBudget {
    growth_left: usize,
    shifts_left: usize,
}

impl JsonPatchBudget {
    fn new(doc: &Value, ops: usize) -> Result<Self, PatchError> {
        if ops > MAX_JSON_PATCH_OPS {
            return Err(PatchError::Invalid(format!(
                "the JSON patch has {ops} operations, more than the {MAX_JSON_PATCH_OPS} allowed"
            )));
        }
        let max = super::validation::MAX_OBJECT_BYTES;
        let size = gpustack_kube_rest::schema::json_size(doc, max).ok_or(PatchError::TooLarge)?;
        Ok(JsonPatchBudget {
            growth_left: max - size,
            shifts_left: MAX_JSON_PATCH_SHIFTS,
        })
    }

    /// Charges `op` against `doc` as it stands before `op` runs.
    fn charge(&mut self, doc: &Value, op: &Value) -> Result<(), PatchError> {
        let text = |k: &str| op.get(k).and_then(Value::as_str).unwrap_or_default();
        if text("op") == "copy" {
            let copied = doc.pointer(text("from")).unwrap_or(&Value::Null);
            let n = gpustack_kube_rest::schema::json_size(copied, self.growth_left)
                .ok_or(PatchError::TooLarge)?;
            self.growth_left -= n;
        }
        for path in [text("path"), text("from")] {
            let parent = path.rsplit_once('/').map(|(p, _)| p).unwrap_or_default();
            if let Some(Value::Array(items)) = doc.pointer(parent) {
                self.shifts_left = self.shifts_left.checked_sub(items.len() + 1).ok_or_else(|| {
                    PatchError::Invalid(format!(
                        "the JSON patch moves array elements more than {MAX_JSON_PATCH_SHIFTS} times"
                    ))
                })?;
            }
        }
        Ok(())
    }
}

/// Server-side apply, simplified: the applied configuration's fields overwrite the object's,
/// objects merge recursively, fields the configuration leaves out stay as they are.
fn merge_applied(doc: &mut Value, applied: &Value) {
    match (doc, applied) {
        (Value::Object(d), Value::Object(a)) => {
            for (k, v) in a {
                match d.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => {
                        merge_applied(existing, v)
                    }
                    _ => {
                        d.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (doc, applied) => *doc = applied.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj() -> Value {
        json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "data": {"k": "v"}})
    }

    #[test]
    fn merge_patch_sets_and_removes() {
        let out = apply(
            &obj(),
            PatchKind::Merge,
            br#"{"metadata":{"labels":{"x":null,"z":"3"}}}"#,
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"y": "2", "z": "3"}));
        assert_eq!(out["data"]["k"], "v");
    }

    #[test]
    fn json_patch_copies_cannot_outgrow_the_object_limit() {
        // Each copy puts the whole array into itself, doubling it: 2^40 KiB after forty, but for
        // the budget.
        let mut ops = vec![json!({"op": "add", "path": "/x", "value": ["a".repeat(1024)]})];
        ops.extend((0..40).map(|_| json!({"op": "copy", "from": "/x", "path": "/x/-"})));
        let body = serde_json::to_vec(&ops).unwrap();
        let err = apply(&obj(), PatchKind::Json, &body).unwrap_err();
        assert!(matches!(err, PatchError::TooLarge), "{err}");
        assert!(
            err.to_string()
                .contains("would exceed the limit of 16777216 bytes"),
            "{err}"
        );
        // A few doublings are fine.
        let body = serde_json::to_vec(&ops[..5]).unwrap();
        let out = apply(&obj(), PatchKind::Json, &body).unwrap();
        assert!(out["x"].to_string().len() > 16 * 1024);
    }

    #[test]
    fn json_patch_work_is_bounded() {
        let too_many: Vec<Value> = (0..10_001)
            .map(|_| json!({"op": "test", "path": "/data/k", "value": "v"}))
            .collect();
        let err = apply(
            &obj(),
            PatchKind::Json,
            &serde_json::to_vec(&too_many).unwrap(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("10001 operations"), "{err}");
        // Inserting at the front of a long array shifts all of it each time.
        let doc = json!({"a": vec![0; 1_000_000]});
        let ops: Vec<Value> = (0..100)
            .map(|_| json!({"op": "add", "path": "/a/0", "value": 1}))
            .collect();
        let err = apply(&doc, PatchKind::Json, &serde_json::to_vec(&ops).unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("moves array elements"), "{err}");
    }

    #[test]
    fn json_patch_ops_and_failures() {
        let out = apply(&obj(), PatchKind::Json, br#"[{"op":"replace","path":"/data/k","value":"w"},{"op":"add","path":"/data/n","value":"1"}]"#).unwrap();
        assert_eq!(out["data"], json!({"k": "w", "n": "1"}));
        assert!(
            apply(
                &obj(),
                PatchKind::Json,
                br#"[{"op":"test","path":"/data/k","value":"nope"}]"#
            )
            .is_err()
        );
        assert!(apply(&obj(), PatchKind::Json, br#"{"op":"add"}"#).is_err());
        // A null test of an absent path passes, as on the Kubernetes API server.
        let out = apply(&obj(), PatchKind::Json, br#"[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata/finalizers","value":["f"]}]"#).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["f"]));
    }

    #[test]
    fn strategic_drops_directives() {
        let out = apply(
            &obj(),
            PatchKind::StrategicMerge,
            br#"{"$setElementOrder/x":[],"data":{"k":"w","$retainKeys":["k"]}}"#,
        )
        .unwrap();
        assert_eq!(out["data"], json!({"k": "w"}));
        assert!(out.get("$setElementOrder/x").is_none());
    }

    #[test]
    fn apply_accepts_yaml_and_merges() {
        let out = apply(
            &obj(),
            PatchKind::Apply,
            b"metadata:\n  labels:\n    z: \"3\"\ndata:\n  k: w\n",
        )
        .unwrap();
        assert_eq!(
            out["metadata"]["labels"],
            json!({"x": "1", "y": "2", "z": "3"})
        );
        assert_eq!(out["data"]["k"], "w");
        assert!(apply(&obj(), PatchKind::Apply, b"- 1\n").is_err());
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchKind::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchKind::Merge)
        );
        assert_eq!(
            PatchKind::from_content_type("application/apply-patch+yaml"),
            Some(PatchKind::Apply)
        );
        assert_eq!(PatchKind::from_content_type("application/json"), None);
    }

    #[test]
    fn bodies() {
        assert!(parse_body(b"  ").is_err());
        assert_eq!(parse_body(b"a: 1").unwrap(), json!({"a": 1}));
        assert!(parse_body(b"{\"a\": ").is_err());
    }
}
