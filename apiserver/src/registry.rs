//! The kinds each hosted cluster serves: the built-in ones (with the OpenAPI schemas of
//! Kubernetes 1.33, read once per registry) and those registered by its
//! CustomResourceDefinitions. What a kind is lives in the toolkit
//! ([`gpustack_kube_rest::resource`]).

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use gpustack_kube_rest::kind_schema::Schema;
use serde_json::Value;

pub use gpustack_kube_rest::resource::{
    InvalidCrd, KindRef, PrinterColumn, READ_VERBS, ResourceDef, Subresource, builtins, from_crd,
};

/// The kinds of every hosted cluster: built-ins plus each cluster's CRD kinds.
#[derive(Clone, Default)]
pub struct Registry {
    builtins: Arc<Vec<ResourceDef>>,
    /// cluster → CRD name → kind.
    custom: Arc<RwLock<HashMap<String, HashMap<String, ResourceDef>>>>,
}

impl Registry {
    /// A registry with the built-in kinds (their OpenAPI schemas attached) and no CRDs yet.
    pub fn new() -> Self {
        let mut defs = builtins();
        // Their OpenAPI schemas, read once per registry: documents and pruning share them.
        gpustack_kube_rest::builtin_schemas::attach(&mut defs);
        Registry {
            builtins: Arc::new(defs),
            custom: Default::default(),
        }
    }

    /// Registers (or replaces) the kind of CRD `crd_name` in `cluster`. A schema identical to
    /// one another cluster's kind of that CRD holds is shared with it rather than kept again: a
    /// hub mirrors the same CRDs from every upstream, and a schema can take hundreds of KB.
    pub fn register(&self, cluster: &str, crd_name: &str, mut def: ResourceDef) {
        if let Some(shared) = self.held_schema(crd_name, &def) {
            def.schema = Some(shared);
        }
        let mut custom = self.custom.write().unwrap_or_else(|e| e.into_inner());
        custom
            .entry(cluster.to_owned())
            .or_default()
            .insert(crd_name.to_owned(), def);
    }

    /// A schema some cluster's kind of `crd_name` holds that is identical to `def`'s own, key
    /// order included (it is what `/openapi/v3` shows). Looked for under the read lock.
    fn held_schema(&self, crd_name: &str, def: &ResourceDef) -> Option<Schema> {
        let schema = def.custom_schema()?;
        let custom = self.custom.read().unwrap_or_else(|e| e.into_inner());
        custom
            .values()
            .filter_map(|defs| defs.get(crd_name))
            .find(|held| held.custom_schema().is_some_and(|h| identical(h, schema)))
            .and_then(|held| held.schema.clone())
    }

    /// Stops serving the kind the CRD `crd_name` registered in `cluster` (the CRD was deleted).
    pub fn unregister(&self, cluster: &str, crd_name: &str) {
        let mut custom = self.custom.write().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = custom.get_mut(cluster) {
            m.remove(crd_name);
        }
    }

    /// Forgets every custom kind of `cluster`.
    pub fn forget(&self, cluster: &str) {
        let mut custom = self.custom.write().unwrap_or_else(|e| e.into_inner());
        custom.remove(cluster);
    }

    /// Every kind `cluster` serves, built-ins first.
    pub fn all(&self, cluster: &str) -> Vec<ResourceDef> {
        let mut out: Vec<ResourceDef> = self.builtins.as_ref().clone();
        let custom = self.custom.read().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = custom.get(cluster) {
            let mut defs: Vec<&ResourceDef> = m.values().collect();
            defs.sort_by(|a, b| (&a.group, &a.plural).cmp(&(&b.group, &b.plural)));
            // A CRD cannot shadow a built-in resource.
            out.extend(
                defs.into_iter()
                    .filter(|d| {
                        !self
                            .builtins
                            .iter()
                            .any(|b| b.group == d.group && b.plural == d.plural)
                    })
                    .cloned(),
            );
        }
        out
    }

    /// The resource `plural` stored under `group`, at whichever version (its canonical form).
    pub fn find_stored(&self, cluster: &str, group: &str, plural: &str) -> Option<ResourceDef> {
        let hit =
            |d: &&ResourceDef| d.group == group && d.storage_group == group && d.plural == plural;
        if let Some(d) = self.builtins.iter().find(hit) {
            return Some(d.clone());
        }
        let custom = self.custom.read().unwrap_or_else(|e| e.into_inner());
        custom.get(cluster)?.values().find(hit).cloned()
    }

    /// Whether `cluster` serves the resource `plural` of `group` at `version` (a lookup that
    /// copies nothing, for every request's metrics).
    pub fn serves(&self, cluster: &str, group: &str, version: &str, plural: &str) -> bool {
        let hit = |d: &ResourceDef| d.group == group && d.plural == plural && d.serves(version);
        if self.builtins.iter().any(hit) {
            return true;
        }
        let custom = self.custom.read().unwrap_or_else(|e| e.into_inner());
        custom.get(cluster).is_some_and(|m| m.values().any(hit))
    }

    /// The resource `plural` of `group` served at `version`.
    pub fn find(
        &self,
        cluster: &str,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<ResourceDef> {
        let hit = |d: &&ResourceDef| d.group == group && d.plural == plural && d.serves(version);
        if let Some(d) = self.builtins.iter().find(hit) {
            return Some(d.clone());
        }
        let custom = self.custom.read().unwrap_or_else(|e| e.into_inner());
        custom.get(cluster)?.values().find(hit).cloned()
    }
}

/// Whether `a` and `b` are equal with their objects' keys in the same order (`==` on maps
/// ignores the order). One value is identical to itself without being walked.
fn identical(a: &Value, b: &Value) -> bool {
    if std::ptr::eq(a, b) {
        return true;
    }
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((ka, va), (kb, vb))| ka == kb && identical(va, vb))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| identical(a, b))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A namespaced kind served at two versions.
    fn crd() -> Value {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1beta1"}, {"name": "v1", "storage": true}]}})
    }

    #[test]
    fn registry_adds_and_removes_custom_kinds_per_cluster() {
        let r = Registry::new();
        r.register("a", "widgets.example.com", from_crd(&crd()).unwrap());
        assert!(r.find("a", "example.com", "v1", "widgets").is_some());
        assert!(r.find("a", "example.com", "v1beta1", "widgets").is_some());
        assert!(r.find("b", "example.com", "v1", "widgets").is_none());
        r.unregister("a", "widgets.example.com");
        assert!(r.find("a", "example.com", "v1", "widgets").is_none());
        assert!(r.find("a", "", "v1", "configmaps").is_some());
    }

    fn with_schema(description: &str) -> Value {
        let mut c = crd();
        c["spec"]["versions"][1]["schema"] =
            json!({"openAPIV3Schema": {"type": "object", "description": description}});
        c
    }

    #[test]
    fn one_schema_is_kept_for_a_crd_that_clusters_share() {
        let r = Registry::new();
        let schema = |cluster: &str| {
            r.find(cluster, "example.com", "v1", "widgets")
                .and_then(|d| d.schema)
                .expect("a schema")
        };
        r.register(
            "a",
            "widgets.example.com",
            from_crd(&with_schema("same")).unwrap(),
        );
        r.register(
            "b",
            "widgets.example.com",
            from_crd(&with_schema("same")).unwrap(),
        );
        r.register(
            "c",
            "widgets.example.com",
            from_crd(&with_schema("other")).unwrap(),
        );
        // One schema in memory: both kinds read the same value.
        let shared = |x: &str, y: &str| std::ptr::eq(&*schema(x), &*schema(y));
        assert!(shared("a", "b"));
        assert!(!shared("a", "c"));
        assert_eq!(schema("c")["description"], "other");
        // Equal, but with its keys in another order: kept as its own CRD has them (that order
        // is what `/openapi/v3` shows).
        let mut reordered = crd();
        reordered["spec"]["versions"][1]["schema"] =
            json!({"openAPIV3Schema": {"description": "same", "type": "object"}});
        r.register("d", "widgets.example.com", from_crd(&reordered).unwrap());
        assert!(!shared("a", "d"));
        let keys: Vec<String> = schema("d").as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["description", "type"]);
        // A cluster's CRD changing, or the cluster going, leaves the others' schema as it was.
        r.register(
            "a",
            "widgets.example.com",
            from_crd(&with_schema("changed")).unwrap(),
        );
        assert_eq!(schema("a")["description"], "changed");
        assert_eq!(schema("b")["description"], "same");
        r.forget("a");
        assert_eq!(schema("b")["description"], "same");
    }
}
