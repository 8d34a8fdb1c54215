//! `meta.k8s.io/v1` `Table` responses for `kubectl get`, with the columns a [`ResourceDef`]
//! carries (a CRD's `additionalPrinterColumns`, or a built-in kind's).

use serde_json::{Map, Value, json};

use crate::{
    columns::{CellSource, PrinterColumn},
    jsonpath,
    printers::format::since,
    resource::ResourceDef,
    unsupported_value::UnsupportedValue,
};

/// What each row carries besides its cells (`includeObject`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    /// Rows carry no object.
    None,
    /// Rows carry the object's metadata (`PartialObjectMetadata`).
    Metadata,
    /// Rows carry the whole object.
    Object,
}

impl IncludeObject {
    /// Reads the `includeObject` query parameter; absent means `Metadata`.
    pub fn parse(s: Option<&str>) -> Result<Self, UnsupportedValue> {
        match s {
            None | Some("") | Some("Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(UnsupportedValue {
                parameter: "includeObject",
                value: other.to_owned(),
                supported: &["Metadata", "None", "Object"],
            }),
        }
    }
}

/// A table's columns: the kind's own (or Age), led by Name unless the kind places its name
/// column itself.
pub fn columns(def: &ResourceDef) -> Vec<PrinterColumn> {
    let own = if def.columns.is_empty() {
        vec![PrinterColumn::age()]
    } else {
        def.columns.clone()
    };
    if own.iter().any(|c| c.format == "name") {
        own
    } else {
        std::iter::once(PrinterColumn::name()).chain(own).collect()
    }
}

fn cell(c: &PrinterColumn, obj: &Value, now: jiff::Timestamp) -> Value {
    match &c.cell {
        CellSource::JsonPath(path) => json_path_cell(&c.type_, path, obj, now),
        CellSource::Computed(compute) => compute(obj, now),
    }
}

/// The value at `path`, shown as `type_` says (a `date` as an age).
fn json_path_cell(type_: &str, path: &str, obj: &Value, now: jiff::Timestamp) -> Value {
    let Ok(found) = jsonpath::find(obj, path) else {
        return Value::Null;
    };
    let Some(v) = found.first() else {
        return Value::Null;
    };
    match type_ {
        "date" => json!(since(v.as_str().unwrap_or(""), now)),
        "integer" => v
            .as_i64()
            .map(Value::from)
            .or_else(|| v.as_f64().map(|f| json!(f as i64)))
            .unwrap_or(Value::Null),
        "number" => v.as_f64().map(Value::from).unwrap_or(Value::Null),
        "boolean" => v.as_bool().map(Value::from).unwrap_or(Value::Null),
        _ => match v {
            Value::String(s) => json!(s),
            Value::Null => Value::Null,
            other => json!(other.to_string()),
        },
    }
}

fn column_definitions(cols: &[PrinterColumn]) -> Vec<Value> {
    cols.iter()
        .map(|c| {
            // A JSONPath `date` is shown as an age, a string.
            let json_date = c.type_ == "date" && matches!(c.cell, CellSource::JsonPath(_));
            json!({
                "name": c.name,
                "type": if json_date { "string" } else { c.type_.as_str() },
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            })
        })
        .collect()
}

/// The `PartialObjectMetadata` of an object.
pub fn partial_object_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// One row for `obj`, a cell for each of `cols` (see [`columns`]).
pub fn row(
    cols: &[PrinterColumn],
    obj: &Value,
    include: IncludeObject,
    now: jiff::Timestamp,
) -> Value {
    let cells = cols.iter().map(|c| cell(c, obj, now)).collect();
    let mut r = Map::new();
    r.insert("cells".into(), Value::Array(cells));
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            r.insert("object".into(), partial_object_metadata(obj));
        }
        IncludeObject::Object => {
            r.insert("object".into(), obj.clone());
        }
    }
    Value::Object(r)
}

/// A whole table. `list_meta` becomes the table's `metadata` (resourceVersion, continue).
pub fn table(
    def: &ResourceDef,
    objects: &[Value],
    include: IncludeObject,
    list_meta: Value,
    now: jiff::Timestamp,
) -> Value {
    let cols = columns(def);
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": column_definitions(&cols),
        "rows": objects.iter().map(|o| row(&cols, o, include, now)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{builtins, from_crd};

    #[test]
    fn builtin_table_leads_with_name() {
        let defs = builtins();
        let cm = defs.iter().find(|d| d.plural == "configmaps").unwrap();
        let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let obj = json!({"metadata": {"name": "a", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"}});
        let t = table(
            cm,
            &[obj],
            IncludeObject::Metadata,
            json!({"resourceVersion": "7"}),
            now,
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["columnDefinitions"][0]["format"], "name");
        assert_eq!(t["columnDefinitions"][1]["name"], "Data");
        assert_eq!(t["columnDefinitions"][2]["name"], "Age");
        assert_eq!(t["rows"][0]["cells"], json!(["a", 0, "60s"]));
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["rows"][0]["object"]["metadata"]["namespace"], "ns");
    }

    #[test]
    fn every_builtin_row_has_a_cell_per_column() {
        let now = jiff::Timestamp::now();
        for def in builtins() {
            let t = table(
                &def,
                &[json!({}), json!({"metadata": {"name": "x"}})],
                IncludeObject::None,
                json!({}),
                now,
            );
            let width = t["columnDefinitions"].as_array().unwrap().len();
            for row in t["rows"].as_array().unwrap() {
                assert_eq!(
                    row["cells"].as_array().unwrap().len(),
                    width,
                    "{}",
                    def.kind
                );
            }
            let names = t["columnDefinitions"].as_array().unwrap().iter();
            assert_eq!(
                names.filter(|c| c["format"] == "name").count(),
                1,
                "{}",
                def.kind
            );
        }
    }

    #[test]
    fn events_place_their_name_last_and_wide() {
        let defs = builtins();
        let ev = defs
            .iter()
            .find(|d| d.plural == "events" && d.group.is_empty())
            .unwrap();
        let obj = json!({"metadata": {"name": "e1"}, "type": "Normal", "reason": "Pulled",
            "involvedObject": {"kind": "Pod", "name": "p"}, "message": "done", "count": 2,
            "lastTimestamp": "2026-01-01T00:00:00Z", "firstTimestamp": "2026-01-01T00:00:00Z"});
        let now: jiff::Timestamp = "2026-01-01T00:00:30Z".parse().unwrap();
        let t = table(ev, &[obj], IncludeObject::None, json!({}), now);
        let cols = t["columnDefinitions"].as_array().unwrap();
        assert_eq!(cols[0]["name"], "Last Seen");
        assert_eq!(cols.last().unwrap()["name"], "Name");
        assert_eq!(cols.last().unwrap()["format"], "name");
        assert_eq!(cols.last().unwrap()["priority"], 1);
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "30s", "Normal", "Pulled", "pod/p", "", "", "done", "30s", 2, "e1"
            ])
        );
    }

    #[test]
    fn crd_columns_are_typed() {
        let crd = json!({
            "metadata": {"name": "ws.e.com"},
            "spec": {"group": "e.com", "scope": "Cluster", "names": {"plural": "ws", "kind": "W"},
              "versions": [{"name": "v1", "served": true, "storage": true, "additionalPrinterColumns": [
                {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status", "priority": 1}
              ]}]}
        });
        let def = from_crd(&crd).unwrap();
        let obj = json!({"metadata": {"name": "w1"}, "spec": {"size": 3}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let t = table(
            &def,
            &[obj],
            IncludeObject::None,
            json!({}),
            jiff::Timestamp::now(),
        );
        assert_eq!(t["rows"][0]["cells"], json!(["w1", 3, "True"]));
        assert_eq!(t["columnDefinitions"][2]["priority"], 1);
        assert!(t["rows"][0].get("object").is_none());
    }
}
