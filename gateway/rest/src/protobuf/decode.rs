//! Protobuf to JSON: a message walked field by field with the generated schema, into the JSON
//! Kubernetes' own JSON encoding gives the same object.
//!
//! Go writes non-pointer fields even when they hold their zero value. Those zeros are kept
//! for numbers and booleans (Go reads them back the same either way, while dropping a
//! pointer's zero would lose it: `replicas: 0`, `automountServiceAccountToken: false`), but an
//! empty string, empty bytes and the zero Time are dropped: to Go's JSON (`omitempty`) they
//! mean "unset", and the server must not read `generateName: ""` as a request. Strings in
//! lists and map values are kept whatever they hold (an empty label value is a value).

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Map, Value as Json, json};

use super::error::{MAX_DEPTH, MAX_VALUES, ProtobufError};
use super::kinds::{MAGIC, message_of};
use super::schema::MESSAGES;
use super::table::{Field, Special, Ty};
use super::wire::{self, Value};

/// What one decode may still spend.
pub(super) struct Budget {
    values: usize,
}

impl Budget {
    pub fn new() -> Self {
        Budget { values: MAX_VALUES }
    }

    fn spend(&mut self) -> Result<(), ProtobufError> {
        self.values = self.values.checked_sub(1).ok_or(ProtobufError::TooLarge)?;
        Ok(())
    }
}

/// Message `index` in `buf` as JSON; `None` where Go's JSON would leave the field out (the
/// zero Time, an empty raw extension).
pub(super) fn message(
    buf: &[u8],
    index: u16,
    depth: usize,
    budget: &mut Budget,
) -> Result<Option<Json>, ProtobufError> {
    if depth >= MAX_DEPTH {
        return Err(ProtobufError::TooDeep);
    }
    let m = &MESSAGES[usize::from(index)];
    match m.special {
        Special::Plain => plain(buf, index, depth, budget).map(|o| Some(Json::Object(o))),
        Special::Items => {
            let mut obj = plain(buf, index, depth, budget)?;
            Ok(Some(obj.remove("items").unwrap_or_else(|| json!([]))))
        }
        Special::Time => time(buf, false),
        Special::MicroTime => time(buf, true),
        Special::Quantity => {
            let s = last_bytes(buf, 1)?.unwrap_or(b"0");
            Ok(Some(Json::String(utf8(s)?)))
        }
        Special::IntOrString => {
            let is_string = last_varint(buf, 1)? == Some(1);
            Ok(Some(if is_string {
                Json::String(utf8(last_bytes(buf, 3)?.unwrap_or_default())?)
            } else {
                json!(last_varint(buf, 2)?.unwrap_or(0) as i32)
            }))
        }
        Special::RawJson => match last_bytes(buf, 1)? {
            None | Some([]) => Ok(None),
            Some(raw) if raw.starts_with(MAGIC) => envelope(raw, depth + 1, budget).map(Some),
            Some(raw) => serde_json::from_slice(raw)
                .map(Some)
                .map_err(|e| ProtobufError::Field("raw JSON", e.to_string())),
        },
        Special::PropsOrArray | Special::PropsOrStringArray => {
            let schema = schema_of(m.field(1))?;
            let mut items = Vec::new();
            let mut single = None;
            for item in wire::fields(buf) {
                let (tag, v) = item?;
                budget.spend()?;
                match (tag, v, m.special) {
                    (1, Value::Bytes(b), _) => single = message(b, schema, depth + 1, budget)?,
                    (2, Value::Bytes(b), Special::PropsOrArray) => {
                        items.push(message(b, schema, depth + 1, budget)?.unwrap_or(Json::Null))
                    }
                    (2, Value::Bytes(b), _) => items.push(Json::String(utf8(b)?)),
                    _ => {}
                }
            }
            Ok(if items.is_empty() {
                single
            } else {
                Some(Json::Array(items))
            })
        }
        Special::PropsOrBool => {
            let schema = schema_of(m.field(2))?;
            match last_bytes(buf, 2)? {
                Some(b) => message(b, schema, depth + 1, budget),
                None => Ok(Some(Json::Bool(last_varint(buf, 1)?.unwrap_or(0) != 0))),
            }
        }
    }
}

fn schema_of(f: Option<&Field>) -> Result<u16, ProtobufError> {
    match f.map(|f| f.ty) {
        Some(Ty::Msg(i)) => Ok(i),
        _ => Err(ProtobufError::Malformed("schema table: no schema field")),
    }
}

/// A message of fields as a JSON object.
fn plain(
    buf: &[u8],
    index: u16,
    depth: usize,
    budget: &mut Budget,
) -> Result<Map<String, Json>, ProtobufError> {
    let m = &MESSAGES[usize::from(index)];
    let mut obj = Map::new();
    for item in wire::fields(buf) {
        let (tag, v) = item?;
        budget.spend()?;
        let Some(f) = m.field(tag) else {
            // Unknown fields are skipped, as protobuf readers do.
            continue;
        };
        match f.ty {
            Ty::MapStr | Ty::MapBytes | Ty::MapMsg(_) => {
                let (k, val) = map_entry(f, bytes_of(v)?, depth, budget)?;
                let map = obj
                    .entry(f.json)
                    .or_insert_with(|| Json::Object(Map::new()));
                if let Json::Object(map) = map {
                    map.insert(k, val);
                }
            }
            _ if f.repeated => {
                let arr = obj.entry(f.json).or_insert_with(|| Json::Array(Vec::new()));
                let Json::Array(arr) = arr else { continue };
                match (f.ty, v) {
                    // Packed numbers: one length-delimited run of values.
                    (Ty::I32 | Ty::I64 | Ty::Bool | Ty::F64, Value::Bytes(run)) => {
                        for x in wire::packed(run, f.ty == Ty::F64) {
                            budget.spend()?;
                            arr.push(number(f.ty, x?)?);
                        }
                    }
                    _ => {
                        let item = element(f, v, depth, budget)?;
                        arr.push(item.unwrap_or(Json::Null));
                    }
                }
            }
            _ => {
                let item = element(f, v, depth, budget)?;
                if f.json.is_empty() {
                    // A Go struct embedded inline: its fields are this object's.
                    if let Some(Json::Object(inner)) = item {
                        merge(&mut obj, inner);
                    }
                    continue;
                }
                match item {
                    Some(Json::String(s)) if s.is_empty() => _ = obj.remove(f.json),
                    None => _ = obj.remove(f.json),
                    Some(Json::Object(inner)) => match obj.get_mut(f.json) {
                        // A message field seen twice is merged, as protobuf says.
                        Some(Json::Object(prev)) => merge(prev, inner),
                        _ => _ = obj.insert(f.json.into(), Json::Object(inner)),
                    },
                    Some(val) => _ = obj.insert(f.json.into(), val),
                }
            }
        }
    }
    Ok(obj)
}

fn merge(into: &mut Map<String, Json>, from: Map<String, Json>) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(Json::Object(a)), Json::Object(b)) => merge(a, b),
            (_, v) => _ = into.insert(k, v),
        }
    }
}

/// One value of field `f` (an element, for a repeated field).
fn element(
    f: &Field,
    v: Value<'_>,
    depth: usize,
    budget: &mut Budget,
) -> Result<Option<Json>, ProtobufError> {
    Ok(Some(match (f.ty, v) {
        (Ty::Str, Value::Bytes(b)) => Json::String(utf8(b)?),
        (Ty::Bytes, Value::Bytes(b)) => {
            if b.is_empty() && !f.repeated {
                return Ok(None);
            }
            Json::String(STANDARD.encode(b))
        }
        (Ty::Bool | Ty::I32 | Ty::I64, Value::Varint(x)) | (Ty::F64, Value::Fixed64(x)) => {
            number(f.ty, x)?
        }
        (Ty::Msg(i), Value::Bytes(b)) => return message(b, i, depth + 1, budget),
        _ => return Err(ProtobufError::WireType(f.json)),
    }))
}

fn double(bits: u64) -> Result<Json, ProtobufError> {
    serde_json::Number::from_f64(f64::from_bits(bits))
        .map(Json::Number)
        .ok_or(ProtobufError::Malformed("a double that is not a number"))
}

/// A number field's value from its wire bits.
fn number(ty: Ty, x: u64) -> Result<Json, ProtobufError> {
    Ok(match ty {
        Ty::Bool => Json::Bool(x != 0),
        Ty::I32 => json!(x as i32),
        Ty::F64 => double(x)?,
        _ => json!(x as i64),
    })
}

/// A map entry (key 1, value 2) of map field `f`.
fn map_entry(
    f: &Field,
    b: &[u8],
    depth: usize,
    budget: &mut Budget,
) -> Result<(String, Json), ProtobufError> {
    let mut key = String::new();
    let mut val = None;
    for item in wire::fields(b) {
        match item? {
            (1, Value::Bytes(k)) => key = utf8(k)?,
            (2, Value::Bytes(v)) => {
                val = match f.ty {
                    Ty::MapStr => Some(Json::String(utf8(v)?)),
                    Ty::MapBytes => Some(Json::String(STANDARD.encode(v))),
                    Ty::MapMsg(i) => message(v, i, depth + 1, budget)?,
                    _ => None,
                }
            }
            (1 | 2, _) => return Err(ProtobufError::WireType(f.json)),
            _ => {}
        }
    }
    // An entry without a value holds the value type's zero.
    let val = match (val, f.ty) {
        (Some(v), _) => v,
        (None, Ty::MapMsg(i)) => message(&[], i, depth + 1, budget)?.unwrap_or(Json::Null),
        (None, _) => Json::String(String::new()),
    };
    Ok((key, val))
}

fn bytes_of(v: Value<'_>) -> Result<&[u8], ProtobufError> {
    match v {
        Value::Bytes(b) => Ok(b),
        _ => Err(ProtobufError::Malformed(
            "a map entry that is not a message",
        )),
    }
}

fn utf8(b: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(b.to_vec()).map_err(|_| ProtobufError::Malformed("invalid UTF-8 in a string"))
}

/// The last value of field `tag` (protobuf's "last one wins"), when it is a varint.
fn last_varint(buf: &[u8], tag: u32) -> Result<Option<u64>, ProtobufError> {
    let mut out = None;
    for item in wire::fields(buf) {
        match item? {
            (t, Value::Varint(x)) if t == tag => out = Some(x),
            (t, _) if t == tag => return Err(ProtobufError::Malformed("wrong wire type")),
            _ => {}
        }
    }
    Ok(out)
}

fn last_bytes(buf: &[u8], tag: u32) -> Result<Option<&[u8]>, ProtobufError> {
    let mut out = None;
    for item in wire::fields(buf) {
        match item? {
            (t, Value::Bytes(b)) if t == tag => out = Some(b),
            (t, _) if t == tag => return Err(ProtobufError::Malformed("wrong wire type")),
            _ => {}
        }
    }
    Ok(out)
}

/// `meta/v1.Time` (`micro`: `MicroTime`): an empty message is the zero time, left out.
fn time(buf: &[u8], micro: bool) -> Result<Option<Json>, ProtobufError> {
    let seconds = last_varint(buf, 1)?;
    let nanos = last_varint(buf, 2)?;
    if seconds.is_none() && nanos.is_none() {
        return Ok(None);
    }
    let (seconds, nanos) = (seconds.unwrap_or(0) as i64, nanos.unwrap_or(0) as i32);
    if (seconds, nanos) == (super::time::GO_ZERO_SECONDS, 0) {
        return Ok(None);
    }
    super::time::format(seconds, nanos, micro).map(|s| Some(Json::String(s)))
}

/// A `runtime.Unknown` envelope (also found nested, in raw extensions) as JSON.
pub(super) fn envelope(
    body: &[u8],
    depth: usize,
    budget: &mut Budget,
) -> Result<Json, ProtobufError> {
    let rest = body.strip_prefix(MAGIC).ok_or(ProtobufError::NoMagic)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let text = |b: &[u8]| {
        String::from_utf8(b.to_vec()).map_err(|_| ProtobufError::Malformed("invalid UTF-8"))
    };
    for item in wire::fields(rest) {
        match item? {
            (1, wire::Value::Bytes(type_meta)) => {
                for item in wire::fields(type_meta) {
                    match item? {
                        (1, wire::Value::Bytes(x)) => api_version = text(x)?,
                        (2, wire::Value::Bytes(x)) => kind = text(x)?,
                        _ => {}
                    }
                }
            }
            (2, wire::Value::Bytes(x)) => raw = x,
            (3, wire::Value::Bytes(x)) if !x.is_empty() => {
                return Err(ProtobufError::ContentEncoding(text(x)?));
            }
            _ => {}
        }
    }
    let index = message_of(&api_version, &kind).ok_or(ProtobufError::UnknownKind {
        api_version: api_version.clone(),
        kind: kind.clone(),
    })?;
    let body = message(raw, index, depth, budget)?.unwrap_or_else(|| json!({}));
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    if let Json::Object(fields) = body {
        obj.extend(fields);
    }
    Ok(Json::Object(obj))
}
