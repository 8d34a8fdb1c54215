//! Request documents read with their cost bounded as they are built: YAML anchors and aliases
//! let a small body stand for a huge document (each alias replays its anchor), so the size
//! that counts is the expanded one, and it is checked node by node while parsing, before the
//! memory is spent. Nesting is bounded too, to what the store can read back.

use std::cell::Cell;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Nesting depth (objects and arrays) a written object may have. The store reads objects back
/// with serde_json, whose own limit is 128, so anything accepted here stays readable.
pub const MAX_DEPTH: usize = 100;

/// Why a document was refused.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The text does not parse as YAML (or exceeds the parser's limits).
    #[error("the document is not valid YAML: {0}")]
    Yaml(#[from] serde_yaml_ng::Error),
}

/// The depth of `v`: 0 for a scalar, 1 for a flat object or array. Iterative, so a deep value
/// cannot exhaust the stack.
pub fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(items) => {
                deepest = deepest.max(d + 1);
                stack.extend(items.iter().map(|i| (i, d + 1)));
            }
            Value::Object(m) => {
                deepest = deepest.max(d + 1);
                stack.extend(m.values().map(|i| (i, d + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// Parses YAML into a JSON value, refusing once the expanded document would cost more than
/// `max_bytes` (each scalar its length plus one, each key its length plus one, each node one)
/// or nest deeper than [`MAX_DEPTH`].
pub fn yaml_value(bytes: &[u8], max_bytes: usize) -> Result<Value, DocumentError> {
    let budget = Cell::new(max_bytes);
    let seed = Bounded {
        budget: &budget,
        max_bytes,
        depth: 0,
    };
    let de = serde_yaml_ng::Deserializer::from_slice(bytes);
    Ok(seed.deserialize(de)?)
}

#[derive(Clone, Copy)]
struct Bounded<'a> {
    budget: &'a Cell<usize>,
    max_bytes: usize,
    depth: usize,
}

impl Bounded<'_> {
    fn charge<E: de::Error>(&self, cost: usize) -> Result<(), E> {
        match self.budget.get().checked_sub(cost.saturating_add(1)) {
            Some(left) => {
                self.budget.set(left);
                Ok(())
            }
            None => Err(E::custom(format!(
                "the document expands beyond {} bytes (anchors and aliases count as often as they are used)",
                self.max_bytes
            ))),
        }
    }

    fn child<E: de::Error>(&self) -> Result<Self, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(format!(
                "the document nests deeper than {MAX_DEPTH} levels"
            )));
        }
        Ok(Bounded {
            depth: self.depth + 1,
            ..*self
        })
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a YAML document")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.charge(1)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.charge(8)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.charge(8)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.charge(8)?;
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.charge(v.len())?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.charge(v.len())?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.charge(0)?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.charge(0)?;
        let child = self.child()?;
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(child)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.charge(0)?;
        let child = self.child()?;
        let mut out = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            self.charge(k.len())?;
            let v = map.next_value_seed(child)?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// An alias bomb within serde_yaml's own repetition limit: a 10 KB string under an anchor,
    /// then the anchor used `uses` times.
    fn bomb(uses: usize) -> String {
        let big = "x".repeat(10_000);
        let aliases = vec!["*a"; uses].join(", ");
        format!("a: &a [{big}]\nb: [{aliases}]\n")
    }

    #[test]
    fn ordinary_documents_read_as_json() {
        let v = yaml_value(b"a: 1\nb: [x, true, null, 2.5]\nc: {d: e}\n", 1 << 20).unwrap();
        assert_eq!(
            v,
            json!({"a": 1, "b": ["x", true, null, 2.5], "c": {"d": "e"}})
        );
        // Aliases are allowed while the expansion fits.
        let v = yaml_value(b"base: &b {k: v}\ncopy: *b\n", 1 << 20).unwrap();
        assert_eq!(v["copy"], json!({"k": "v"}));
    }

    #[test]
    fn an_alias_bomb_is_refused_within_the_budget() {
        // About 11 KB of text standing for about 2 MB.
        let doc = bomb(200);
        assert!(doc.len() < 12_000, "{}", doc.len());
        let err = yaml_value(doc.as_bytes(), 1 << 20).unwrap_err().to_string();
        assert!(err.contains("expands beyond 1048576 bytes"), "{err}");
        // The parser's own limits let it through: the budget is what refused it.
        let v = yaml_value(doc.as_bytes(), 4 << 20).unwrap();
        assert_eq!(v["b"].as_array().unwrap().len(), 200);
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        let err = yaml_value(deep.as_bytes(), 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(err.contains("deeper than 100"), "{err}");
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        let v = yaml_value(ok.as_bytes(), 1 << 20).unwrap();
        assert_eq!(depth(&v), MAX_DEPTH);
    }

    #[test]
    fn depth_counts_containers() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!({})), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": []}]})), 4);
    }
}
