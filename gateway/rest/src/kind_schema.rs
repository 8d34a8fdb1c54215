//! A kind's OpenAPI schema as a [`crate::resource::ResourceDef`] holds it: a CRD's own schema,
//! or the document of definitions every built-in kind shares, built the first time anything
//! reads it. A server that only mirrors custom kinds never asks for the built-in document, so it
//! never pays the few megabytes that document takes.

use std::{
    fmt,
    ops::Deref,
    sync::{Arc, OnceLock},
};

use serde_json::Value;

/// A shared schema; cloning shares it. Reads see a [`Value`] (deref).
#[derive(Clone)]
pub struct Schema(Arc<Cell>);

enum Cell {
    Ready(Value),
    /// Built by `make` on first read, then kept.
    Deferred {
        built: OnceLock<Value>,
        make: fn() -> Value,
    },
}

impl Schema {
    /// A schema built by `make` the first time it is read.
    pub fn deferred(make: fn() -> Value) -> Self {
        Schema(Arc::new(Cell::Deferred {
            built: OnceLock::new(),
            make,
        }))
    }

    /// Whether the schema exists in memory yet (a deferred one once it has been read).
    pub fn is_built(&self) -> bool {
        match &*self.0 {
            Cell::Ready(_) => true,
            Cell::Deferred { built, .. } => built.get().is_some(),
        }
    }
}

impl From<Value> for Schema {
    fn from(v: Value) -> Self {
        Schema(Arc::new(Cell::Ready(v)))
    }
}

impl Deref for Schema {
    type Target = Value;

    fn deref(&self) -> &Value {
        match &*self.0 {
            Cell::Ready(v) => v,
            Cell::Deferred { built, make } => built.get_or_init(*make),
        }
    }
}

/// Two handles on one schema are equal without building it; otherwise their content decides.
impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || **self == **other
    }
}

/// A deferred schema prints as such, built or not: printing never builds it.
impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            Cell::Ready(v) => write!(f, "Schema({v})"),
            Cell::Deferred { .. } => f.write_str("Schema(deferred)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;

    static BUILDS: AtomicUsize = AtomicUsize::new(0);

    fn counted() -> Value {
        BUILDS.fetch_add(1, Ordering::SeqCst);
        json!({"type": "object"})
    }

    #[test]
    fn a_deferred_schema_is_built_once_on_first_read_and_shared_by_clones() {
        let s = Schema::deferred(counted);
        let copy = s.clone();
        assert!(!s.is_built());
        assert_eq!(s, copy, "equal without building");
        assert_eq!(format!("{copy:?}"), "Schema(deferred)");
        assert!(!copy.is_built());
        assert_eq!(BUILDS.load(Ordering::SeqCst), 0);
        assert_eq!(copy["type"], "object");
        assert_eq!(s["type"], "object");
        assert!(s.is_built());
        assert_eq!(BUILDS.load(Ordering::SeqCst), 1);
        assert_eq!(s, Schema::from(json!({"type": "object"})));
        assert_ne!(s, Schema::from(json!({"type": "string"})));
    }
}
