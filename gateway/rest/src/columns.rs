//! A printer column of a kind (what `kubectl get` shows): its name, type, priority and where its
//! cells come from, a JSONPath or a function of the object.

use serde_json::Value;

/// A printer cell computed from the object and the time of the request (for ages), as
/// kube-apiserver's printers compute theirs. Pure.
pub type CellFn = fn(&Value, jiff::Timestamp) -> Value;

/// Where a printer column's cells come from.
#[derive(Clone, Debug)]
pub enum CellSource {
    /// A JSONPath into the object, its value shown as the column's type says (CRDs'
    /// `additionalPrinterColumns`).
    JsonPath(String),
    /// A function of the whole object (built-in kinds, see [`crate::printers`]).
    Computed(CellFn),
}

impl PartialEq for CellSource {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CellSource::JsonPath(a), CellSource::JsonPath(b)) => a == b,
            (CellSource::Computed(a), CellSource::Computed(b)) => std::ptr::fn_addr_eq(*a, *b),
            _ => false,
        }
    }
}

/// One printer column of a kind.
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    /// The column's header.
    pub name: String,
    /// The OpenAPI type of its cells (`string`, `integer`, `date`...).
    pub type_: String,
    /// `name` marks the column holding the object's name.
    pub format: String,
    /// What the column shows, for people.
    pub description: String,
    /// 0: always shown; 1 and above: only with `-o wide`.
    pub priority: i64,
    /// Where its cells come from.
    pub cell: CellSource,
}

impl PrinterColumn {
    /// A column whose cells are found at `json_path`.
    pub fn new(name: &str, type_: &str, json_path: &str, priority: i64) -> Self {
        PrinterColumn {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: String::new(),
            priority,
            cell: CellSource::JsonPath(json_path.into()),
        }
    }

    /// A column whose cells `cell` computes.
    pub fn computed(name: &str, type_: &str, priority: i64, cell: CellFn) -> Self {
        PrinterColumn {
            cell: CellSource::Computed(cell),
            ..Self::new(name, type_, "", priority)
        }
    }

    /// The `Age` column every kind without columns of its own gets.
    pub fn age() -> Self {
        Self::new("Age", "date", ".metadata.creationTimestamp", 0)
    }

    /// The `Name` column that leads a table unless the kind places one itself.
    pub fn name() -> Self {
        PrinterColumn {
            format: "name".into(),
            description: "Name must be unique within a namespace. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names".into(),
            ..Self::computed("Name", "string", 0, object_name)
        }
    }
}

/// The object's name: the cells of the `Name` column.
pub fn object_name(obj: &Value, _now: jiff::Timestamp) -> Value {
    obj.pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::from(""))
}
