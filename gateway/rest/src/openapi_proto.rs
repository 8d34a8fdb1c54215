//! The OpenAPI v2 document in the protobuf form kubectl asks for: gnostic's `openapi.v2.Document`
//! (github.com/google/gnostic-models, `openapiv2/OpenAPIv2.proto`), written by hand from the
//! JSON document. What kubectl reads is converted: `swagger`, `info`, `host`, `basePath`, the
//! MIME lists, vendor extensions and every definition's schema (`$ref`, `type`, `format`,
//! `title`, `description`, `default`, the numeric and length bounds, `pattern`, `required`,
//! `enum`, `properties`, `items`, `additionalProperties`, `allOf`, `readOnly`, `example`,
//! `x-*`). Paths are written as an empty `Paths`: kubectl's validation only looks definitions
//! up by their `x-kubernetes-group-version-kind`. Vendor extension and `default`/`enum`/
//! `example` values are `Any { yaml }` holding the value as YAML text.

use serde_json::{Map, Value};

use crate::protobuf::wire::Writer;

/// The media type kubectl asks for. Not a valid media type (`@` is no token character): Go's
/// `mime.ParseMediaType` refuses it, so answers carry [`MEDIA_TYPE_LEGACY`], as Kubernetes does.
pub const MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The older spelling: accepted, and the `Content-Type` of every protobuf answer.
pub const MEDIA_TYPE_LEGACY: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// proto3's rule for the document's fields: a zero value is not written (messages are).
trait Proto3 {
    fn string(&mut self, field: u32, s: &str);
    fn message(&mut self, field: u32, m: Writer);
    fn flag(&mut self, field: u32, b: bool);
    fn int64(&mut self, field: u32, v: i64);
    fn nonzero_double(&mut self, field: u32, v: f64);
}

impl Proto3 for Writer {
    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    /// A nested message, written even when empty (presence matters for messages).
    fn message(&mut self, field: u32, m: Writer) {
        self.bytes(field, &m.buf);
    }

    /// A bool outside a oneof: only `true` is written.
    fn flag(&mut self, field: u32, b: bool) {
        if b {
            self.uint(field, 1);
        }
    }

    fn int64(&mut self, field: u32, v: i64) {
        if v != 0 {
            self.uint(field, v as u64);
        }
    }

    fn nonzero_double(&mut self, field: u32, v: f64) {
        if v != 0.0 {
            self.double(field, v);
        }
    }
}

/// `Any { yaml = 2 }` with the value as YAML text.
fn any(v: &Value) -> Writer {
    let mut w = Writer::default();
    let yaml = serde_yaml_ng::to_string(v).unwrap_or_else(|_| v.to_string());
    w.string(2, &yaml);
    w
}

/// `NamedAny { name = 1, value = 2 }` for each `x-` key of `obj`, into `field`.
fn vendor_extensions(w: &mut Writer, field: u32, obj: &Map<String, Value>) {
    for (k, v) in obj.iter().filter(|(k, _)| k.starts_with("x-")) {
        let mut named = Writer::default();
        named.string(1, k);
        named.message(2, any(v));
        w.message(field, named);
    }
}

fn str_of<'a>(obj: &'a Map<String, Value>, key: &str) -> &'a str {
    obj.get(key).and_then(Value::as_str).unwrap_or("")
}

fn strings(w: &mut Writer, field: u32, v: Option<&Value>) {
    match v {
        Some(Value::String(s)) => w.bytes(field, s.as_bytes()),
        Some(Value::Array(items)) => {
            for s in items.iter().filter_map(Value::as_str) {
                w.bytes(field, s.as_bytes());
            }
        }
        _ => {}
    }
}

fn bool_of(obj: &Map<String, Value>, key: &str) -> bool {
    obj.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn int_of(obj: &Map<String, Value>, key: &str) -> i64 {
    obj.get(key).and_then(Value::as_i64).unwrap_or(0)
}

fn float_of(obj: &Map<String, Value>, key: &str) -> f64 {
    obj.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// `openapi.v2.Schema`. A non-object schema (JSON Schema's `true`) is an empty one.
fn schema(v: &Value) -> Writer {
    let mut w = Writer::default();
    let Some(s) = v.as_object() else {
        return w;
    };
    w.string(1, str_of(s, "$ref"));
    w.string(2, str_of(s, "format"));
    w.string(3, str_of(s, "title"));
    w.string(4, str_of(s, "description"));
    if let Some(d) = s.get("default") {
        w.message(5, any(d));
    }
    w.nonzero_double(6, float_of(s, "multipleOf"));
    w.nonzero_double(7, float_of(s, "maximum"));
    w.flag(8, bool_of(s, "exclusiveMaximum"));
    w.nonzero_double(9, float_of(s, "minimum"));
    w.flag(10, bool_of(s, "exclusiveMinimum"));
    w.int64(11, int_of(s, "maxLength"));
    w.int64(12, int_of(s, "minLength"));
    w.string(13, str_of(s, "pattern"));
    w.int64(14, int_of(s, "maxItems"));
    w.int64(15, int_of(s, "minItems"));
    w.flag(16, bool_of(s, "uniqueItems"));
    w.int64(17, int_of(s, "maxProperties"));
    w.int64(18, int_of(s, "minProperties"));
    strings(&mut w, 19, s.get("required"));
    for e in s
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        w.message(20, any(e));
    }
    match s.get("additionalProperties") {
        // AdditionalPropertiesItem: oneof { Schema schema = 1; bool boolean = 2; } — a oneof
        // member is written even when false.
        Some(Value::Bool(b)) => {
            let mut item = Writer::default();
            item.uint(2, u64::from(*b));
            w.message(21, item);
        }
        Some(a @ Value::Object(_)) => {
            let mut item = Writer::default();
            item.message(1, schema(a));
            w.message(21, item);
        }
        _ => {}
    }
    if let Some(t) = s.get("type") {
        let mut item = Writer::default();
        strings(&mut item, 1, Some(t));
        w.message(22, item);
    }
    match s.get("items") {
        Some(Value::Array(list)) => {
            let mut item = Writer::default();
            for i in list {
                item.message(1, schema(i));
            }
            w.message(23, item);
        }
        Some(i @ Value::Object(_)) => {
            let mut item = Writer::default();
            item.message(1, schema(i));
            w.message(23, item);
        }
        _ => {}
    }
    for a in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        w.message(24, schema(a));
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        w.message(25, named_schemas(props));
    }
    w.string(26, str_of(s, "discriminator"));
    w.flag(27, bool_of(s, "readOnly"));
    if let Some(e) = s.get("example") {
        w.message(30, any(e));
    }
    vendor_extensions(&mut w, 31, s);
    w
}

/// `Properties` / `Definitions`: `repeated NamedSchema additional_properties = 1`.
fn named_schemas(map: &Map<String, Value>) -> Writer {
    let mut w = Writer::default();
    for (name, s) in map {
        let mut named = Writer::default();
        named.string(1, name);
        named.message(2, schema(s));
        w.message(1, named);
    }
    w
}

/// `openapi.v2.Document` for the JSON (swagger 2.0) document `doc`.
pub fn encode_document(doc: &Value) -> Vec<u8> {
    let empty = Map::new();
    let d = doc.as_object().unwrap_or(&empty);
    let mut w = Writer::default();
    w.string(1, str_of(d, "swagger"));
    if let Some(info) = d.get("info").and_then(Value::as_object) {
        let mut i = Writer::default();
        i.string(1, str_of(info, "title"));
        i.string(2, str_of(info, "version"));
        i.string(3, str_of(info, "description"));
        i.string(4, str_of(info, "termsOfService"));
        vendor_extensions(&mut i, 7, info);
        w.message(2, i);
    }
    w.string(3, str_of(d, "host"));
    w.string(4, str_of(d, "basePath"));
    strings(&mut w, 5, d.get("schemes"));
    strings(&mut w, 6, d.get("consumes"));
    strings(&mut w, 7, d.get("produces"));
    if d.get("paths").is_some_and(Value::is_object) {
        w.message(8, Writer::default());
    }
    if let Some(defs) = d.get("definitions").and_then(Value::as_object) {
        w.message(9, named_schemas(defs));
    }
    vendor_extensions(&mut w, 16, d);
    w.buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A decoded field: a varint, a fixed64 or length-delimited bytes.
    #[derive(Debug)]
    enum F<'a> {
        V(u64),
        D(f64),
        B(&'a [u8]),
    }

    fn read_varint(buf: &[u8], pos: &mut usize) -> u64 {
        let mut out = 0u64;
        let mut shift = 0;
        loop {
            let b = buf[*pos];
            *pos += 1;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return out;
            }
            shift += 7;
        }
    }

    fn decode(buf: &[u8]) -> Vec<(u32, F<'_>)> {
        let mut pos = 0;
        let mut out = Vec::new();
        while pos < buf.len() {
            let key = read_varint(buf, &mut pos);
            let field = u32::try_from(key >> 3).unwrap();
            let f = match key & 7 {
                0 => F::V(read_varint(buf, &mut pos)),
                1 => {
                    let v = f64::from_le_bytes(buf[pos..pos + 8].try_into().unwrap());
                    pos += 8;
                    F::D(v)
                }
                2 => {
                    let len = usize::try_from(read_varint(buf, &mut pos)).unwrap();
                    let b = &buf[pos..pos + len];
                    pos += len;
                    F::B(b)
                }
                w => panic!("unexpected wire type {w}"),
            };
            out.push((field, f));
        }
        assert_eq!(pos, buf.len());
        out
    }

    fn text(b: &[u8]) -> String {
        String::from_utf8(b.to_vec()).unwrap()
    }

    fn any_value(b: &[u8]) -> Value {
        let fields = decode(b);
        let [(2, F::B(yaml))] = fields.as_slice() else {
            panic!("Any should hold only yaml: {fields:?}");
        };
        serde_yaml_ng::from_str(&text(yaml)).unwrap()
    }

    fn named(b: &[u8]) -> (String, &[u8]) {
        let fields = decode(b);
        let [(1, F::B(name)), (2, F::B(value))] = fields.as_slice() else {
            panic!("not a named value: {fields:?}");
        };
        (text(name), value)
    }

    fn named_schemas_back(b: &[u8]) -> Map<String, Value> {
        decode(b)
            .into_iter()
            .map(|(n, f)| {
                let (1, F::B(e)) = (n, f) else {
                    panic!("unexpected field {n}")
                };
                let (name, v) = named(e);
                (name, schema_back(v))
            })
            .collect()
    }

    /// The inverse of [`schema`] for what it writes (a one-element `type` back as a string).
    fn schema_back(b: &[u8]) -> Value {
        let mut s = Map::new();
        let push = |s: &mut Map<String, Value>, k: &str, v: Value| match s.get_mut(k) {
            Some(Value::Array(a)) => a.push(v),
            _ => {
                s.insert(k.to_owned(), json!([v]));
            }
        };
        for (n, f) in decode(b) {
            match (n, f) {
                (1, F::B(x)) => drop(s.insert("$ref".into(), json!(text(x)))),
                (2, F::B(x)) => drop(s.insert("format".into(), json!(text(x)))),
                (4, F::B(x)) => drop(s.insert("description".into(), json!(text(x)))),
                (5, F::B(x)) => drop(s.insert("default".into(), any_value(x))),
                (7, F::D(x)) => drop(s.insert("maximum".into(), json!(x))),
                (9, F::D(x)) => drop(s.insert("minimum".into(), json!(x))),
                (11, F::V(x)) => drop(s.insert("maxLength".into(), json!(x))),
                (13, F::B(x)) => drop(s.insert("pattern".into(), json!(text(x)))),
                (19, F::B(x)) => push(&mut s, "required", json!(text(x))),
                (20, F::B(x)) => push(&mut s, "enum", any_value(x)),
                (21, F::B(x)) => {
                    let v = match decode(x).as_slice() {
                        [(1, F::B(inner))] => schema_back(inner),
                        [(2, F::V(b))] => json!(*b != 0),
                        other => panic!("bad additionalProperties {other:?}"),
                    };
                    s.insert("additionalProperties".into(), v);
                }
                (22, F::B(x)) => {
                    let types: Vec<Value> = decode(x)
                        .into_iter()
                        .map(|(n, f)| match (n, f) {
                            (1, F::B(t)) => json!(text(t)),
                            other => panic!("bad type {other:?}"),
                        })
                        .collect();
                    let t = if types.len() == 1 {
                        types[0].clone()
                    } else {
                        Value::Array(types)
                    };
                    s.insert("type".into(), t);
                }
                (23, F::B(x)) => {
                    let items: Vec<Value> = decode(x)
                        .into_iter()
                        .map(|(n, f)| match (n, f) {
                            (1, F::B(i)) => schema_back(i),
                            other => panic!("bad items {other:?}"),
                        })
                        .collect();
                    let [one] = items.as_slice() else {
                        panic!("one item schema expected")
                    };
                    s.insert("items".into(), one.clone());
                }
                (25, F::B(x)) => {
                    s.insert("properties".into(), Value::Object(named_schemas_back(x)));
                }
                (31, F::B(x)) => {
                    let (name, v) = named(x);
                    s.insert(name, any_value(v));
                }
                (n, f) => panic!("unexpected schema field {n}: {f:?}"),
            }
        }
        Value::Object(s)
    }

    #[test]
    fn tiny_document_bytes() {
        let bytes =
            encode_document(&json!({"swagger": "2.0", "info": {"title": "K", "version": "v1"}}));
        assert_eq!(
            bytes,
            [
                0x0a, 3, b'2', b'.', b'0', // swagger = 1
                0x12, 7, // info = 2
                0x0a, 1, b'K', // title = 1
                0x12, 2, b'v', b'1', // version = 2
            ]
        );
        // A vendor extension on a schema: field 31 (a two-byte key), NamedAny { name = 1,
        // value = 2: Any { yaml = 2 } }, the value as YAML text.
        let s = schema(&json!({"x-a": 1}));
        assert_eq!(
            s.buf,
            [
                0xfa, 0x01, 11, // 31 << 3 | 2, length
                0x0a, 3, b'x', b'-', b'a', // name
                0x12, 4, 0x12, 2, b'1', b'\n', // value
            ]
        );
        let fields = decode(&s.buf);
        let [(31, F::B(e))] = fields.as_slice() else {
            panic!("{fields:?}")
        };
        let (name, v) = named(e);
        assert_eq!(name, "x-a");
        assert_eq!(any_value(v), json!(1));
    }

    #[test]
    fn definitions_round_trip() {
        let gvk =
            json!([{"group": "worker.gpustack.ai", "version": "v1alpha1", "kind": "Devices"}]);
        let devices = json!({
            "description": "Devices of a node",
            "type": "object",
            "required": ["spec"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "properties": {
                        "groups": {
                            "type": "array",
                            "maxLength": 3,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "count": {"type": "integer", "format": "int32", "default": 0, "minimum": 1.5, "maximum": 8.0},
                                    "mode": {"type": "string", "enum": ["a", "b"], "pattern": "^[ab]$"},
                                },
                            },
                        },
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "closed": {"type": "object", "additionalProperties": false},
                        "anything": {"x-kubernetes-int-or-string": true},
                        "ref": {"$ref": "#/definitions/other"},
                    },
                },
            },
            "x-kubernetes-group-version-kind": gvk,
        });
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": {},
            "definitions": {"ai.gpustack.worker.v1alpha1.Devices": devices, "other": {"type": ["string", "integer"]}},
        });
        let bytes = encode_document(&doc);
        let fields = decode(&bytes);
        let mut definitions = None;
        let mut seen = Vec::new();
        for (n, f) in &fields {
            seen.push(*n);
            match (n, f) {
                (1, F::B(s)) => assert_eq!(text(s), "2.0"),
                (2, F::B(i)) => {
                    let info = decode(i);
                    assert!(
                        matches!(info.as_slice(), [(1, F::B(t)), (2, F::B(v))] if *t == b"Kubernetes" && *v == b"v1.33.0")
                    );
                }
                (8, F::B(p)) => assert!(p.is_empty()),
                (9, F::B(d)) => definitions = Some(named_schemas_back(d)),
                other => panic!("unexpected document field {other:?}"),
            }
        }
        assert_eq!(seen, [1, 2, 8, 9]);
        let definitions = definitions.unwrap();
        assert_eq!(Value::Object(definitions), doc["definitions"]);
    }
}
