//! The kinds a cluster serves: the built-in ones (stored schemalessly) and those registered by
//! CustomResourceDefinitions, with what discovery, tables and the object rules need to know.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use serde_json::Value;

/// One printer column of a kind (`additionalPrinterColumns` for custom kinds).
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// A served resource.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceDef {
    pub group: String,
    /// The group objects are stored under (differs for `events.k8s.io` Events, stored as core
    /// Events; see [`super::conversion`]).
    pub storage_group: String,
    /// Served versions, storage version first.
    pub versions: Vec<String>,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Whether `/status` is a subresource: then the main endpoint ignores status changes and
    /// `/status` ignores everything else.
    pub status_subresource: bool,
    pub columns: Vec<PrinterColumn>,
    /// From a CRD (`false` for built-in kinds).
    pub custom: bool,
    /// The CRD's `openAPIV3Schema` of the storage version, for `/openapi/v3`. Shared: a
    /// definition is cloned for every request, and a schema can be large.
    pub schema: Option<Arc<Value>>,
    /// Whether stored objects may lack the schema's defaults, which reads then fill in: only
    /// when the schema has defaults and the CRD's spec changed since it was created (objects
    /// written under the current schema were defaulted as they were written).
    pub defaults_on_read: bool,
}

impl ResourceDef {
    /// `group/version` or `version` for the core group.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_owned()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// A create-only review (`kubectl auth can-i`, `kubectl auth whoami`): answered, not stored.
    pub fn is_review(&self) -> bool {
        !self.custom && self.kind.starts_with("SelfSubject") && self.kind.ends_with("Review")
    }

    /// The verbs discovery lists.
    pub fn verbs(&self) -> &'static [&'static str] {
        if self.is_review() {
            &["create"]
        } else {
            &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ]
        }
    }

    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }
}

struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        namespaced: false,
        short: &["ns"],
        categories: &[],
        status: true,
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        namespaced: false,
        short: &["no"],
        categories: &[],
        status: true,
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        namespaced: true,
        short: &["po"],
        categories: &["all"],
        status: true,
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        namespaced: true,
        short: &["cm"],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        namespaced: true,
        short: &["sa"],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        namespaced: true,
        short: &["svc"],
        categories: &["all"],
        status: true,
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        namespaced: true,
        short: &["ev"],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        plural: "events",
        namespaced: true,
        short: &["ev"],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        namespaced: false,
        short: &["crd", "crds"],
        categories: &["api-extensions"],
        status: true,
    },
    Builtin {
        group: "apiregistration.k8s.io",
        version: "v1",
        kind: "APIService",
        plural: "apiservices",
        namespaced: false,
        short: &[],
        categories: &["api-extensions"],
        status: true,
    },
    Builtin {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingWebhookConfiguration",
        plural: "validatingwebhookconfigurations",
        namespaced: false,
        short: &[],
        categories: &["api-extensions"],
        status: false,
    },
    Builtin {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "MutatingWebhookConfiguration",
        plural: "mutatingwebhookconfigurations",
        namespaced: false,
        short: &[],
        categories: &["api-extensions"],
        status: false,
    },
    Builtin {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSIDriver",
        plural: "csidrivers",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSINode",
        plural: "csinodes",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
    // Create-only reviews, answered and never stored (see `ResourceDef::is_review`).
    Builtin {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectAccessReview",
        plural: "selfsubjectaccessreviews",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectRulesReview",
        plural: "selfsubjectrulesreviews",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "authentication.k8s.io",
        version: "v1",
        kind: "SelfSubjectReview",
        plural: "selfsubjectreviews",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
    // Stored schemalessly so that the operator's own manifests (RBAC, workloads) apply.
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRole",
        plural: "clusterroles",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRoleBinding",
        plural: "clusterrolebindings",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "Role",
        plural: "roles",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "RoleBinding",
        plural: "rolebindings",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        namespaced: true,
        short: &["deploy"],
        categories: &["all"],
        status: true,
    },
    Builtin {
        group: "apps",
        version: "v1",
        kind: "DaemonSet",
        plural: "daemonsets",
        namespaced: true,
        short: &["ds"],
        categories: &["all"],
        status: true,
    },
    Builtin {
        group: "apps",
        version: "v1",
        kind: "StatefulSet",
        plural: "statefulsets",
        namespaced: true,
        short: &["sts"],
        categories: &["all"],
        status: true,
    },
    Builtin {
        group: "apps",
        version: "v1",
        kind: "ReplicaSet",
        plural: "replicasets",
        namespaced: true,
        short: &["rs"],
        categories: &["all"],
        status: true,
    },
    Builtin {
        group: "batch",
        version: "v1",
        kind: "Job",
        plural: "jobs",
        namespaced: true,
        short: &[],
        categories: &["all"],
        status: true,
    },
    Builtin {
        group: "scheduling.k8s.io",
        version: "v1",
        kind: "PriorityClass",
        plural: "priorityclasses",
        namespaced: false,
        short: &["pc"],
        categories: &[],
        status: false,
    },
    Builtin {
        group: "policy",
        version: "v1",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        namespaced: true,
        short: &["pdb"],
        categories: &[],
        status: true,
    },
];

/// The built-in kinds every embedded cluster serves.
pub fn builtins() -> Vec<ResourceDef> {
    BUILTINS
        .iter()
        .map(|b| ResourceDef {
            group: b.group.into(),
            storage_group: if b.group == "events.k8s.io" {
                String::new()
            } else {
                b.group.into()
            },
            versions: vec![b.version.into()],
            kind: b.kind.into(),
            list_kind: format!("{}List", b.kind),
            plural: b.plural.into(),
            singular: b.kind.to_lowercase(),
            namespaced: b.namespaced,
            short_names: b.short.iter().map(|s| s.to_string()).collect(),
            categories: b.categories.iter().map(|s| s.to_string()).collect(),
            status_subresource: b.status,
            columns: Vec::new(),
            custom: false,
            schema: None,
            defaults_on_read: false,
        })
        .collect()
}

/// The kind a CustomResourceDefinition object registers, or why it cannot.
pub fn from_crd(crd: &Value) -> Result<ResourceDef, String> {
    let spec = crd.get("spec").ok_or("spec: Required value")?;
    let group = str_at(spec, "group").ok_or("spec.group: Required value")?;
    let names = spec.get("names").ok_or("spec.names: Required value")?;
    let plural = str_at(names, "plural").ok_or("spec.names.plural: Required value")?;
    let kind = str_at(names, "kind").ok_or("spec.names.kind: Required value")?;
    let expected = format!("{plural}.{group}");
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name != expected {
        return Err(format!(
            "metadata.name: Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
        ));
    }
    let scope = str_at(spec, "scope").unwrap_or("Namespaced");
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or("spec.versions: Required value")?;
    let mut served: Vec<&Value> = versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
        .collect();
    if served.is_empty() {
        return Err(
            "spec.versions: Invalid value: must have exactly one version marked as storage version"
                .into(),
        );
    }
    // Storage version first.
    served.sort_by_key(|v| !v.get("storage").and_then(Value::as_bool).unwrap_or(false));
    let storage = served[0];
    let status_subresource = storage.pointer("/subresources/status").is_some();
    let columns = storage
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .map(|c| PrinterColumn {
                    name: str_at(c, "name").unwrap_or("").into(),
                    type_: str_at(c, "type").unwrap_or("string").into(),
                    format: str_at(c, "format").unwrap_or("").into(),
                    description: str_at(c, "description").unwrap_or("").into(),
                    priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    json_path: str_at(c, "jsonPath").unwrap_or("").into(),
                })
                .collect()
        })
        .unwrap_or_default();
    let strings = |key: &str| -> Vec<String> {
        names
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let schema = storage
        .pointer("/schema/openAPIV3Schema")
        .cloned()
        .map(Arc::new);
    let changed_since_created = crd
        .pointer("/metadata/generation")
        .and_then(Value::as_u64)
        .is_some_and(|g| g > 1);
    let defaults_on_read =
        changed_since_created && schema.as_deref().is_some_and(super::schema::has_defaults);
    Ok(ResourceDef {
        group: group.into(),
        storage_group: group.into(),
        versions: served
            .iter()
            .filter_map(|v| str_at(v, "name").map(String::from))
            .collect(),
        kind: kind.into(),
        list_kind: str_at(names, "listKind")
            .map(String::from)
            .unwrap_or_else(|| format!("{kind}List")),
        plural: plural.into(),
        singular: str_at(names, "singular")
            .map(String::from)
            .unwrap_or_else(|| kind.to_lowercase()),
        namespaced: scope != "Cluster",
        short_names: strings("shortNames"),
        categories: strings("categories"),
        status_subresource,
        columns,
        custom: true,
        schema,
        defaults_on_read,
    })
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The kinds of every hosted cluster: built-ins plus each cluster's CRD kinds.
#[derive(Clone, Default)]
pub struct Registry {
    builtins: Arc<Vec<ResourceDef>>,
    /// cluster → CRD name → kind.
    custom: Arc<RwLock<HashMap<String, HashMap<String, ResourceDef>>>>,
}

impl Registry {
    pub fn new() -> Self {
        Registry {
            builtins: Arc::new(builtins()),
            custom: Default::default(),
        }
    }

    /// Registers (or replaces) the kind of CRD `crd_name` in `cluster`.
    pub fn register(&self, cluster: &str, crd_name: &str, def: ResourceDef) {
        let mut custom = self.custom.write().unwrap_or_else(|e| e.into_inner());
        custom
            .entry(cluster.to_owned())
            .or_default()
            .insert(crd_name.to_owned(), def);
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_default_only_kinds_whose_crd_changed_since_created() {
        let crd = |generation: u64, default: Option<Value>| {
            let mut field = json!({"type": "integer"});
            if let Some(d) = default {
                field["default"] = d;
            }
            json!({"metadata": {"name": "ws.e.com", "generation": generation},
                "spec": {"group": "e.com", "scope": "Cluster", "names": {"plural": "ws", "kind": "W"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                        "type": "object", "properties": {"n": field}}}}}}]}})
        };
        let on_read = |c: Value| from_crd(&c).unwrap().defaults_on_read;
        assert!(!on_read(crd(1, Some(json!(3)))), "defaulted as written");
        assert!(
            on_read(crd(2, Some(json!(3)))),
            "objects may predate the default"
        );
        assert!(!on_read(crd(2, None)), "nothing to default");
    }

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}},
                     "additionalPrinterColumns": [{"name": "Phase", "type": "string", "jsonPath": ".status.phase"}]}
                ]
            }
        })
    }

    #[test]
    fn crd_registers_storage_version_first_with_columns() {
        let d = from_crd(&crd()).unwrap();
        assert_eq!(d.versions, vec!["v1", "v1beta1"]);
        assert!(d.namespaced && d.status_subresource && d.custom);
        assert_eq!(d.short_names, vec!["wd"]);
        assert_eq!(d.columns[0].json_path, ".status.phase");
        assert_eq!(d.list_kind, "WidgetList");
    }

    #[test]
    fn crd_name_must_match() {
        let mut c = crd();
        c["metadata"]["name"] = json!("wrong");
        assert!(from_crd(&c).unwrap_err().contains("metadata.name"));
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
}
