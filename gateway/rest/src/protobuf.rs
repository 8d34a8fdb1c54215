//! Just enough of Kubernetes' protobuf encoding to read the objects `kubectl create` sends for
//! built-in kinds (kubectl's typed clients write `application/vnd.kubernetes.protobuf` and do
//! not fall back to JSON): Namespace, ConfigMap, Secret and ServiceAccount; and what
//! `kubectl auth can-i`, `kubectl auth whoami` and `kubectl create token` send: the self
//! reviews and TokenRequest. Other kinds, and fields not listed here, are refused or dropped;
//! responses are always JSON.

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Map, Value, json};

const MAGIC: &[u8] = b"k8s\0";

/// One decoded field: number and value.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err("varint too long".into())
}

fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, String> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (num, wire) = (key >> 3, key & 7);
        let f = match wire {
            0 => Field::Varint(varint(buf, &mut pos)?),
            1 => {
                pos += 8;
                Field::Fixed
            }
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).map_err(|_| "length overflow")?;
                let end = pos
                    .checked_add(len)
                    .filter(|e| *e <= buf.len())
                    .ok_or("truncated field")?;
                let b = &buf[pos..end];
                pos = end;
                Field::Bytes(b)
            }
            5 => {
                pos += 4;
                Field::Fixed
            }
            w => return Err(format!("unsupported wire type {w}")),
        };
        if pos > buf.len() {
            return Err("truncated field".into());
        }
        out.push((num, f));
    }
    Ok(out)
}

fn string(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "invalid UTF-8 in a string field".to_owned())
}

/// A map entry (key 1, value 2).
fn entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), String> {
    let (mut k, mut v) = (String::new(), json!(""));
    for (n, f) in fields(b)? {
        if let Field::Bytes(x) = f {
            match n {
                1 => k = string(x)?,
                2 if bytes_value => v = json!(STANDARD.encode(x)),
                2 => v = json!(string(x)?),
                _ => {}
            }
        }
    }
    Ok((k, v))
}

fn insert_entry(
    obj: &mut Map<String, Value>,
    key: &str,
    b: &[u8],
    bytes_value: bool,
) -> Result<(), String> {
    let (k, v) = entry(b, bytes_value)?;
    obj.entry(key).or_insert_with(|| json!({}))[&k] = v;
    Ok(())
}

fn push(obj: &mut Map<String, Value>, key: &str, v: Value) {
    if let Some(a) = obj.entry(key).or_insert_with(|| json!([])).as_array_mut() {
        a.push(v);
    }
}

fn owner_reference(b: &[u8]) -> Result<Value, String> {
    let mut o = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => _ = o.insert("kind".into(), json!(string(x)?)),
            (3, Field::Bytes(x)) => _ = o.insert("name".into(), json!(string(x)?)),
            (4, Field::Bytes(x)) => _ = o.insert("uid".into(), json!(string(x)?)),
            (5, Field::Bytes(x)) => _ = o.insert("apiVersion".into(), json!(string(x)?)),
            (6, Field::Varint(x)) => _ = o.insert("controller".into(), json!(x != 0)),
            (7, Field::Varint(x)) => _ = o.insert("blockOwnerDeletion".into(), json!(x != 0)),
            _ => {}
        }
    }
    Ok(Value::Object(o))
}

fn object_meta(b: &[u8]) -> Result<Value, String> {
    let mut m = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => _ = m.insert("name".into(), json!(string(x)?)),
            (2, Field::Bytes(x)) => _ = m.insert("generateName".into(), json!(string(x)?)),
            (3, Field::Bytes(x)) => _ = m.insert("namespace".into(), json!(string(x)?)),
            (5, Field::Bytes(x)) => _ = m.insert("uid".into(), json!(string(x)?)),
            (6, Field::Bytes(x)) => _ = m.insert("resourceVersion".into(), json!(string(x)?)),
            (11, Field::Bytes(x)) => insert_entry(&mut m, "labels", x, false)?,
            (12, Field::Bytes(x)) => insert_entry(&mut m, "annotations", x, false)?,
            (13, Field::Bytes(x)) => push(&mut m, "ownerReferences", owner_reference(x)?),
            (14, Field::Bytes(x)) => push(&mut m, "finalizers", json!(string(x)?)),
            _ => {}
        }
    }
    Ok(Value::Object(m))
}

/// The string fields of a message, by number, under the names given.
fn strings_of(b: &[u8], names: &[(u64, &str)]) -> Result<Value, String> {
    let mut o = Map::new();
    for (n, f) in fields(b)? {
        if let (Some((_, name)), Field::Bytes(x)) = (names.iter().find(|(k, _)| *k == n), f) {
            o.insert((*name).into(), json!(string(x)?));
        }
    }
    Ok(Value::Object(o))
}

/// `SelfSubjectAccessReviewSpec`.
fn access_review_spec(b: &[u8]) -> Result<Value, String> {
    let mut o = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => {
                let names = [
                    (1, "namespace"),
                    (2, "verb"),
                    (3, "group"),
                    (4, "version"),
                    (5, "resource"),
                    (6, "subresource"),
                    (7, "name"),
                ];
                o.insert("resourceAttributes".into(), strings_of(x, &names)?);
            }
            (2, Field::Bytes(x)) => {
                let names = [(1, "path"), (2, "verb")];
                o.insert("nonResourceAttributes".into(), strings_of(x, &names)?);
            }
            _ => {}
        }
    }
    Ok(Value::Object(o))
}

/// `TokenRequestSpec`: audiences, boundObjectRef (what `kubectl create token
/// --bound-object-*` sends) and expirationSeconds.
fn token_request_spec(b: &[u8]) -> Result<Value, String> {
    let mut o = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => push(&mut o, "audiences", json!(string(x)?)),
            (3, Field::Bytes(x)) => {
                let names = [(1, "kind"), (2, "apiVersion"), (3, "name"), (4, "uid")];
                o.insert("boundObjectRef".into(), strings_of(x, &names)?);
            }
            (4, Field::Varint(x)) => _ = o.insert("expirationSeconds".into(), json!(x as i64)),
            _ => {}
        }
    }
    Ok(Value::Object(o))
}

fn object(kind: &str, raw: &[u8]) -> Result<Value, String> {
    let mut o = Map::new();
    for (n, f) in fields(raw)? {
        match (kind, n, f) {
            (_, 1, Field::Bytes(x)) => _ = o.insert("metadata".into(), object_meta(x)?),
            ("Namespace", 2, Field::Bytes(x)) => {
                let mut spec = Map::new();
                for (n, f) in fields(x)? {
                    if let (1, Field::Bytes(s)) = (n, f) {
                        push(&mut spec, "finalizers", json!(string(s)?));
                    }
                }
                o.insert("spec".into(), Value::Object(spec));
            }
            ("ConfigMap", 2, Field::Bytes(x)) => insert_entry(&mut o, "data", x, false)?,
            ("ConfigMap", 3, Field::Bytes(x)) => insert_entry(&mut o, "binaryData", x, true)?,
            ("ConfigMap", 4, Field::Varint(x)) => _ = o.insert("immutable".into(), json!(x != 0)),
            ("Secret", 2, Field::Bytes(x)) => insert_entry(&mut o, "data", x, true)?,
            ("Secret", 3, Field::Bytes(x)) => _ = o.insert("type".into(), json!(string(x)?)),
            ("Secret", 4, Field::Bytes(x)) => insert_entry(&mut o, "stringData", x, false)?,
            ("Secret", 5, Field::Varint(x)) => _ = o.insert("immutable".into(), json!(x != 0)),
            ("SelfSubjectAccessReview", 2, Field::Bytes(x)) => {
                _ = o.insert("spec".into(), access_review_spec(x)?)
            }
            ("SelfSubjectRulesReview", 2, Field::Bytes(x)) => {
                _ = o.insert("spec".into(), strings_of(x, &[(1, "namespace")])?)
            }
            ("TokenRequest", 2, Field::Bytes(x)) => {
                _ = o.insert("spec".into(), token_request_spec(x)?)
            }
            ("ServiceAccount", 4, Field::Varint(x)) => {
                _ = o.insert("automountServiceAccountToken".into(), json!(x != 0))
            }
            _ => {}
        }
    }
    Ok(Value::Object(o))
}

/// Decodes a protobuf-encoded object of a supported kind into its JSON form.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or("not a Kubernetes protobuf message (no k8s magic)")?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), None);
    for (n, f) in fields(rest)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (n, f) in fields(tm)? {
                    match (n, f) {
                        (1, Field::Bytes(x)) => api_version = string(x)?,
                        (2, Field::Bytes(x)) => kind = string(x)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(x)) => raw = Some(x),
            _ => {}
        }
    }
    let known = matches!(
        (api_version.as_str(), kind.as_str()),
        (
            "v1",
            "Namespace" | "ConfigMap" | "Secret" | "ServiceAccount"
        ) | (
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview" | "SelfSubjectRulesReview"
        ) | (
            "authentication.k8s.io/v1",
            "SelfSubjectReview" | "TokenRequest"
        )
    );
    if !known {
        return Err(format!(
            "protobuf bodies are accepted only for v1 Namespace, ConfigMap, Secret and ServiceAccount, the self reviews and TokenRequest (got {api_version} {kind}); send JSON"
        ));
    }
    let mut obj = object(&kind, raw.unwrap_or_default())?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![((n << 3) | 2) as u8, payload.len() as u8];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn decodes_a_configmap() {
        let meta = [
            field(1, b"cfg"),
            field(3, b"ns"),
            field(11, &[field(1, b"app"), field(2, b"web")].concat()),
        ]
        .concat();
        let raw = [
            field(1, &meta),
            field(2, &[field(1, b"k"), field(2, b"v")].concat()),
        ]
        .concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"metadata": {"name": "cfg", "namespace": "ns", "labels": {"app": "web"}}, "data": {"k": "v"}, "apiVersion": "v1", "kind": "ConfigMap"})
        );
    }

    #[test]
    fn decodes_what_kubectl_auth_can_i_sends() {
        let attrs = [field(1, b"default"), field(2, b"list"), field(5, b"pods")].concat();
        let raw = field(2, &field(1, &attrs));
        let type_meta = [
            field(1, b"authorization.k8s.io/v1"),
            field(2, b"SelfSubjectAccessReview"),
        ]
        .concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v["spec"]["resourceAttributes"],
            json!({"namespace": "default", "verb": "list", "resource": "pods"})
        );
        let bound = [field(1, b"Pod"), field(2, b"v1"), field(3, b"mm-a")].concat();
        let spec = [field(1, b"api"), field(3, &bound), vec![4 << 3, 0x90, 0x1c]].concat();
        let type_meta = [
            field(1, b"authentication.k8s.io/v1"),
            field(2, b"TokenRequest"),
        ]
        .concat();
        let raw = field(2, &spec);
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v["spec"],
            json!({"audiences": ["api"], "expirationSeconds": 3600,
                   "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "mm-a"}})
        );
    }

    #[test]
    fn refuses_other_kinds_and_garbage() {
        let type_meta = [field(1, b"v1"), field(2, b"Pod")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta)].concat();
        assert!(decode(&body).unwrap_err().contains("Pod"));
        assert!(decode(b"{}").is_err());
        assert!(decode(b"k8s\0\x0a\x7f").is_err());
    }
}
