//! JSON to protobuf: an object written field by field with the generated schema, as Go's
//! encoder writes the same object. JSON keys the schema does not know are left out, as Go's
//! JSON decoding into the typed object leaves them out.

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::Value as Json;

use super::error::MAX_DEPTH;
use super::error::ProtobufError;
use super::schema::MESSAGES;
use super::table::{Field, Special, Ty};
use super::wire::Writer;

fn expected(field: &'static str, what: &'static str) -> ProtobufError {
    ProtobufError::Type {
        field,
        expected: what,
    }
}

/// `v`, a JSON value of message `index`, encoded; `None` where nothing is written (null).
pub(super) fn message(
    v: &Json,
    index: u16,
    depth: usize,
) -> Result<Option<Vec<u8>>, ProtobufError> {
    if depth >= MAX_DEPTH {
        return Err(ProtobufError::TooDeep);
    }
    if v.is_null() {
        return Ok(None);
    }
    let m = &MESSAGES[usize::from(index)];
    let mut w = Writer::default();
    match m.special {
        Special::Plain => plain(v, index, depth, &mut w)?,
        Special::Items => plain(&serde_json::json!({ "items": v }), index, depth, &mut w)?,
        Special::Time | Special::MicroTime => {
            let s = v.as_str().ok_or(expected(m.name, "an RFC 3339 time"))?;
            let (seconds, nanos) = super::time::parse(s)?;
            w.uint(1, seconds as u64);
            w.uint(2, i64::from(nanos) as u64);
        }
        Special::Quantity => match v {
            Json::String(s) => w.bytes(1, s.as_bytes()),
            Json::Number(n) => w.bytes(1, n.to_string().as_bytes()),
            _ => return Err(expected(m.name, "a quantity")),
        },
        Special::IntOrString => match v {
            Json::String(s) => {
                w.uint(1, 1);
                w.uint(2, 0);
                w.bytes(3, s.as_bytes());
            }
            Json::Number(n) => {
                let n = n
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or(expected(m.name, "a 32-bit integer"))?;
                w.uint(1, 0);
                w.uint(2, i64::from(n) as u64);
                w.bytes(3, b"");
            }
            _ => return Err(expected(m.name, "a number or a string")),
        },
        Special::RawJson => w.bytes(1, v.to_string().as_bytes()),
        Special::PropsOrArray | Special::PropsOrStringArray | Special::PropsOrBool => {
            let schema = match m.field(if m.special == Special::PropsOrBool {
                2
            } else {
                1
            }) {
                Some(Field { ty: Ty::Msg(i), .. }) => *i,
                _ => return Err(ProtobufError::Malformed("schema table: no schema field")),
            };
            match (v, m.special) {
                (Json::Bool(b), Special::PropsOrBool) => w.uint(1, u64::from(*b)),
                (Json::Object(_), Special::PropsOrBool) => {
                    w.uint(1, 1);
                    nested(&mut w, 2, v, schema, depth)?;
                }
                (Json::Object(_), _) => nested(&mut w, 1, v, schema, depth)?,
                (Json::Array(items), Special::PropsOrArray) => {
                    for item in items {
                        nested(&mut w, 2, item, schema, depth)?;
                    }
                }
                (Json::Array(items), _) => {
                    for item in items {
                        let s = item.as_str().ok_or(expected(m.name, "strings"))?;
                        w.bytes(2, s.as_bytes());
                    }
                }
                _ => return Err(expected(m.name, "a schema, a list or a boolean")),
            }
        }
    }
    Ok(Some(w.buf))
}

fn nested(
    w: &mut Writer,
    tag: u32,
    v: &Json,
    index: u16,
    depth: usize,
) -> Result<(), ProtobufError> {
    if let Some(b) = message(v, index, depth + 1)? {
        w.bytes(tag, &b);
    }
    Ok(())
}

fn plain(v: &Json, index: u16, depth: usize, w: &mut Writer) -> Result<(), ProtobufError> {
    let m = &MESSAGES[usize::from(index)];
    let obj = v.as_object().ok_or(expected(m.name, "an object"))?;
    for f in m.fields {
        if f.json.is_empty() {
            // Embedded inline: its fields are keys of this object.
            if let Ty::Msg(i) = f.ty {
                nested(w, f.tag, v, i, depth)?;
            }
            continue;
        }
        let Some(v) = obj.get(f.json).filter(|v| !v.is_null()) else {
            continue;
        };
        match f.ty {
            Ty::MapStr | Ty::MapBytes | Ty::MapMsg(_) => {
                let map = v.as_object().ok_or(expected(f.json, "an object"))?;
                for (k, val) in map {
                    let mut entry = Writer::default();
                    entry.bytes(1, k.as_bytes());
                    match f.ty {
                        Ty::MapStr => {
                            let s = val.as_str().ok_or(expected(f.json, "string values"))?;
                            entry.bytes(2, s.as_bytes());
                        }
                        Ty::MapBytes => entry.bytes(2, &base64(f, val)?),
                        Ty::MapMsg(i) => {
                            let b = message(val, i, depth + 1)?.unwrap_or_default();
                            entry.bytes(2, &b);
                        }
                        _ => {}
                    }
                    w.bytes(f.tag, &entry.buf);
                }
            }
            _ if f.repeated => {
                let items = v.as_array().ok_or(expected(f.json, "a list"))?;
                for item in items {
                    scalar(w, f, item, depth)?;
                }
            }
            _ => scalar(w, f, v, depth)?,
        }
    }
    Ok(())
}

fn base64(f: &Field, v: &Json) -> Result<Vec<u8>, ProtobufError> {
    let s = v.as_str().ok_or(expected(f.json, "base64 text"))?;
    STANDARD
        .decode(s)
        .map_err(|_| expected(f.json, "base64 text"))
}

/// One value of field `f`.
fn scalar(w: &mut Writer, f: &Field, v: &Json, depth: usize) -> Result<(), ProtobufError> {
    match f.ty {
        Ty::Str => w.bytes(
            f.tag,
            v.as_str().ok_or(expected(f.json, "a string"))?.as_bytes(),
        ),
        Ty::Bytes => w.bytes(f.tag, &base64(f, v)?),
        Ty::Bool => w.uint(
            f.tag,
            u64::from(v.as_bool().ok_or(expected(f.json, "a boolean"))?),
        ),
        Ty::I32 => {
            let n = v
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or(expected(f.json, "a 32-bit integer"))?;
            w.uint(f.tag, i64::from(n) as u64);
        }
        Ty::I64 => w.uint(
            f.tag,
            v.as_i64().ok_or(expected(f.json, "an integer"))? as u64,
        ),
        Ty::F64 => w.double(f.tag, v.as_f64().ok_or(expected(f.json, "a number"))?),
        Ty::Msg(i) => match message(v, i, depth + 1)? {
            Some(b) => w.bytes(f.tag, &b),
            // A null element of a list still takes its place.
            None if f.repeated => w.bytes(f.tag, b""),
            None => {}
        },
        Ty::MapStr | Ty::MapBytes | Ty::MapMsg(_) => {}
    }
    Ok(())
}
