//! Navigating a swagger 2.0 definitions document (`{"definitions": {...}}`): `$ref`s to its
//! definitions, and the definitions a schema reaches. Pure functions over JSON, shared by the
//! built-in kinds' schemas ([`crate::builtin_schemas`]) and by pruning ([`crate::schema`]).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// What a `$ref` to a definition starts with.
pub const REF_PREFIX: &str = "#/definitions/";

/// The definitions `schema` carries (none for a CRD's).
pub fn definitions_of(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("definitions").and_then(Value::as_object)
}

/// What `s` stands for: the definition its `$ref` names in `doc`'s definitions, else `s`.
pub fn resolve<'a>(doc: &'a Value, s: &'a Value) -> &'a Value {
    let target = s
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(REF_PREFIX))
        .and_then(|name| definitions_of(doc)?.get(name));
    target.unwrap_or(s)
}

/// The names of the definitions `roots` refer to, directly or not, `roots` included.
pub fn reachable<'a>(doc: &'a Value, roots: &[&'a str]) -> BTreeSet<&'a str> {
    let mut reached = BTreeSet::new();
    if let Some(defs) = definitions_of(doc) {
        for root in roots {
            reach(defs, root, &mut reached);
        }
    }
    reached
}

/// Adds `name` and every definition its schema refers to, directly or not, to `reached`.
fn reach<'a>(definitions: &'a Map<String, Value>, name: &str, reached: &mut BTreeSet<&'a str>) {
    let Some((name, def)) = definitions.get_key_value(name) else {
        return;
    };
    if !reached.insert(name.as_str()) {
        return;
    }
    let mut refs = Vec::new();
    refs_in(def, &mut refs);
    for r in refs {
        reach(definitions, r, reached);
    }
}

/// The definition names `v` refers to.
fn refs_in<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                match (k.as_str(), child) {
                    ("$ref", Value::String(r)) => {
                        if let Some(name) = r.strip_prefix(REF_PREFIX) {
                            out.push(name);
                        }
                    }
                    _ => refs_in(child, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| refs_in(i, out)),
        _ => {}
    }
}
