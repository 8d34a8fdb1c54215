//! What a served resource is, as data: names, scope, verbs, subresources, printer columns and
//! selectable fields. Discovery, OpenAPI, tables and selectors are all built from a
//! [`ResourceDef`]; nothing downstream branches on a kind's name.

use serde_json::Value;

pub use crate::columns::{CellSource, PrinterColumn};
pub use crate::kind_schema::Schema;

/// Every verb of a stored kind, as discovery lists them.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// What a read-only server (a mirror) offers.
pub const READ_VERBS: &[&str] = &["get", "list", "watch"];

/// A create-only review (`kubectl auth can-i`, `kubectl auth whoami`): answered, never stored.
pub const CREATE_ONLY: &[&str] = &["create"];

/// The verbs of a `status` subresource.
pub const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

/// A subresource (`status`, `scale`, ...) and the verbs it serves.
#[derive(Clone, Debug, PartialEq)]
pub struct Subresource {
    /// The subresource's name.
    pub name: String,
    /// The verbs it serves.
    pub verbs: Vec<String>,
    /// The kind it takes and answers when that is not the resource's own (`scale` answers
    /// `autoscaling/v1` `Scale`); discovery names it, and `kubectl drain` looks for it.
    pub kind: Option<KindRef>,
}

/// A kind by group, version and name.
#[derive(Clone, Debug, PartialEq)]
pub struct KindRef {
    /// The API group; empty for the core group.
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind's name.
    pub kind: String,
}

impl KindRef {
    /// The kind `kind` of `group`/`version`.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        KindRef {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// `autoscaling/v1` `Scale`, what every `scale` subresource serves.
    pub fn scale() -> Self {
        Self::new("autoscaling", "v1", "Scale")
    }
}

/// A served resource.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceDef {
    /// The API group it is served under; empty for the core group.
    pub group: String,
    /// The group objects are stored under (differs for `events.k8s.io` Events, stored as core
    /// Events).
    pub storage_group: String,
    /// Served versions, storage version first.
    pub versions: Vec<String>,
    /// The kind's name (`Pod`).
    pub kind: String,
    /// The kind of its lists (`PodList`).
    pub list_kind: String,
    /// The plural name in paths (`pods`).
    pub plural: String,
    /// The singular name (`pod`).
    pub singular: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names `kubectl` accepts (`po`).
    pub short_names: Vec<String>,
    /// Categories `kubectl get` accepts (`all`).
    pub categories: Vec<String>,
    /// The verbs of the resource itself, as discovery lists them.
    pub verbs: Vec<String>,
    /// Its subresources.
    pub subresources: Vec<Subresource>,
    /// Printer columns after Name; empty means Age only.
    pub columns: Vec<PrinterColumn>,
    /// Fields a field selector may name besides `metadata.name` and `metadata.namespace`.
    pub selectable_fields: Vec<String>,
    /// From a CRD (`false` for built-in kinds).
    pub custom: bool,
    /// The CRD's `openAPIV3Schema` of the storage version, for `/openapi/v3`; for a built-in
    /// kind, the document of definitions all built-in kinds share, where the kind's own is
    /// tagged with its group-version-kind ([`crate::builtin_schemas`]), built when first read.
    /// Shared: a schema can be large.
    pub schema: Option<Schema>,
    /// Whether stored objects may lack the schema's defaults, which reads then fill in: only
    /// when the schema has defaults and the CRD's spec changed since it was created (objects
    /// written under the current schema were defaulted as they were written).
    pub defaults_on_read: bool,
}

fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

impl ResourceDef {
    /// A CRD's own schema; `None` for a built-in kind, whose shared document this leaves unbuilt.
    pub fn custom_schema(&self) -> Option<&Value> {
        // Filtered before the deref: reading a built-in kind's document would build it.
        self.schema.as_ref().filter(|_| self.custom).map(|s| &**s)
    }

    /// `group/version` or `version` for the core group.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_owned()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// Whether `verb` is served on the resource itself.
    pub fn allows(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// A create-only review (`kubectl auth can-i`, `kubectl auth whoami`): answered, not stored.
    pub fn is_review(&self) -> bool {
        self.verbs == CREATE_ONLY
    }

    /// The subresource named `name`, if served.
    pub fn subresource(&self, name: &str) -> Option<&Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// Whether `/status` is a subresource: then the main endpoint ignores status changes and
    /// `/status` ignores everything else.
    pub fn status_subresource(&self) -> bool {
        self.subresource("status").is_some()
    }

    /// Whether `version` is one of its served versions.
    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }

    /// The same resource as a read-only server offers it: `get`, `list`, `watch`, and of the
    /// subresources only what can be read.
    pub fn read_only(mut self) -> Self {
        let keep = |verbs: &mut Vec<String>| verbs.retain(|v| READ_VERBS.contains(&v.as_str()));
        keep(&mut self.verbs);
        for s in &mut self.subresources {
            keep(&mut s.verbs);
        }
        self.subresources.retain(|s| !s.verbs.is_empty());
        self
    }

    /// The `status` subresource with its usual verbs.
    pub fn status() -> Subresource {
        Subresource {
            name: "status".into(),
            verbs: strings(STATUS_VERBS),
            kind: None,
        }
    }
}

/// The resources of a read-only server (a mirror): each as [`ResourceDef::read_only`], and
/// those left with no verb (create-only reviews) dropped.
pub fn read_only(defs: Vec<ResourceDef>) -> Vec<ResourceDef> {
    defs.into_iter()
        .map(ResourceDef::read_only)
        .filter(|d| !d.verbs.is_empty())
        .collect()
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
];
const SECRET_FIELDS: &[&str] = &["type"];
const NODE_FIELDS: &[&str] = &["spec.unschedulable"];
const NAMESPACE_FIELDS: &[&str] = &["status.phase"];

struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    verbs: &'static [&'static str],
    /// Fields selectable besides `metadata.name` and `metadata.namespace`.
    fields: &'static [&'static str],
    /// Whether `/status` is a subresource.
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
        verbs: ALL_VERBS,
        fields: NAMESPACE_FIELDS,
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
        verbs: ALL_VERBS,
        fields: NODE_FIELDS,
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
        verbs: ALL_VERBS,
        fields: POD_FIELDS,
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
        verbs: ALL_VERBS,
        fields: SECRET_FIELDS,
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
        status: true,
    },
    // Stored for charts and `kubectl apply --prune` (whose default set names them); nothing
    // provisions, binds or replicates them here.
    Builtin {
        group: "",
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        namespaced: true,
        short: &["pvc"],
        categories: &[],
        verbs: ALL_VERBS,
        fields: &[],
        status: true,
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "PersistentVolume",
        plural: "persistentvolumes",
        namespaced: false,
        short: &["pv"],
        categories: &[],
        verbs: ALL_VERBS,
        fields: &[],
        status: true,
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "ReplicationController",
        plural: "replicationcontrollers",
        namespaced: true,
        short: &["rc"],
        categories: &["all"],
        verbs: ALL_VERBS,
        fields: &[],
        status: true,
    },
    // Kept for `default/kubernetes` (the API's address); written by clients otherwise (no
    // controller derives them from Services here).
    Builtin {
        group: "",
        version: "v1",
        kind: "Endpoints",
        plural: "endpoints",
        namespaced: true,
        short: &["ep"],
        categories: &[],
        verbs: ALL_VERBS,
        fields: &[],
        status: false,
    },
    Builtin {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        plural: "endpointslices",
        namespaced: true,
        short: &[],
        categories: &[],
        verbs: ALL_VERBS,
        fields: &[],
        status: false,
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        namespaced: true,
        short: &["ev"],
        categories: &[],
        verbs: ALL_VERBS,
        fields: EVENT_FIELDS,
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
        verbs: ALL_VERBS,
        fields: EVENT_FIELDS,
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: CREATE_ONLY,
        fields: &[],
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
        verbs: CREATE_ONLY,
        fields: &[],
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
        verbs: CREATE_ONLY,
        fields: &[],
        status: false,
    },
    Builtin {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SubjectAccessReview",
        plural: "subjectaccessreviews",
        namespaced: false,
        short: &[],
        categories: &[],
        verbs: CREATE_ONLY,
        fields: &[],
        status: false,
    },
    Builtin {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "LocalSubjectAccessReview",
        plural: "localsubjectaccessreviews",
        namespaced: true,
        short: &[],
        categories: &[],
        verbs: CREATE_ONLY,
        fields: &[],
        status: false,
    },
    Builtin {
        group: "authentication.k8s.io",
        version: "v1",
        kind: "TokenReview",
        plural: "tokenreviews",
        namespaced: false,
        short: &[],
        categories: &[],
        verbs: CREATE_ONLY,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
        status: true,
    },
    Builtin {
        group: "batch",
        version: "v1",
        kind: "CronJob",
        plural: "cronjobs",
        namespaced: true,
        short: &["cj"],
        categories: &["all"],
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
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
        verbs: ALL_VERBS,
        fields: &[],
        status: true,
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "ResourceQuota",
        plural: "resourcequotas",
        namespaced: true,
        short: &["quota"],
        categories: &[],
        verbs: ALL_VERBS,
        fields: &[],
        status: true,
    },
    Builtin {
        group: "networking.k8s.io",
        version: "v1",
        kind: "Ingress",
        plural: "ingresses",
        namespaced: true,
        short: &["ing"],
        categories: &[],
        verbs: ALL_VERBS,
        fields: &[],
        status: true,
    },
    // Stored for charts and kubectl; nothing enforces them (no pod network here).
    Builtin {
        group: "networking.k8s.io",
        version: "v1",
        kind: "NetworkPolicy",
        plural: "networkpolicies",
        namespaced: true,
        short: &["netpol"],
        categories: &[],
        verbs: ALL_VERBS,
        fields: &[],
        status: false,
    },
    Builtin {
        group: "networking.k8s.io",
        version: "v1",
        kind: "IngressClass",
        plural: "ingressclasses",
        namespaced: false,
        short: &[],
        categories: &[],
        verbs: ALL_VERBS,
        fields: &[],
        status: false,
    },
    // Stored and approved (`/approval`); nothing signs them.
    Builtin {
        group: "certificates.k8s.io",
        version: "v1",
        kind: "CertificateSigningRequest",
        plural: "certificatesigningrequests",
        namespaced: false,
        short: &["csr"],
        categories: &[],
        verbs: ALL_VERBS,
        fields: &["spec.signerName"],
        status: true,
    },
];

/// A subresource of a built-in kind besides `status`.
struct OtherSubresource {
    group: &'static str,
    plural: &'static str,
    name: &'static str,
    verbs: &'static [&'static str],
    /// Group, version and kind it takes and answers, when not the resource's own.
    kind: Option<(&'static str, &'static str, &'static str)>,
}

const SCALE: Option<(&str, &str, &str)> = Some(("autoscaling", "v1", "Scale"));

const OTHER_SUBRESOURCES: &[OtherSubresource] = &[
    OtherSubresource {
        group: "",
        plural: "serviceaccounts",
        name: "token",
        verbs: CREATE_ONLY,
        kind: Some(("authentication.k8s.io", "v1", "TokenRequest")),
    },
    OtherSubresource {
        group: "",
        plural: "pods",
        name: "eviction",
        verbs: CREATE_ONLY,
        kind: Some(("policy", "v1", "Eviction")),
    },
    // Answered by the Pod's kubelet, forwarded as kube-apiserver forwards them.
    OtherSubresource {
        group: "",
        plural: "pods",
        name: "log",
        verbs: &["get"],
        kind: None,
    },
    OtherSubresource {
        group: "",
        plural: "nodes",
        name: "proxy",
        verbs: &["create", "delete", "get", "patch", "update"],
        kind: Some(("", "v1", "NodeProxyOptions")),
    },
    OtherSubresource {
        group: "",
        plural: "pods",
        name: "ephemeralcontainers",
        verbs: STATUS_VERBS,
        kind: None,
    },
    OtherSubresource {
        group: "",
        plural: "pods",
        name: "binding",
        verbs: CREATE_ONLY,
        kind: Some(("", "v1", "Binding")),
    },
    OtherSubresource {
        group: "apps",
        plural: "deployments",
        name: "scale",
        verbs: STATUS_VERBS,
        kind: SCALE,
    },
    OtherSubresource {
        group: "apps",
        plural: "replicasets",
        name: "scale",
        verbs: STATUS_VERBS,
        kind: SCALE,
    },
    OtherSubresource {
        group: "apps",
        plural: "statefulsets",
        name: "scale",
        verbs: STATUS_VERBS,
        kind: SCALE,
    },
    OtherSubresource {
        group: "certificates.k8s.io",
        plural: "certificatesigningrequests",
        name: "approval",
        verbs: STATUS_VERBS,
        kind: None,
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
            short_names: strings(b.short),
            categories: strings(b.categories),
            verbs: strings(b.verbs),
            subresources: b
                .status
                .then(ResourceDef::status)
                .into_iter()
                .chain(
                    OTHER_SUBRESOURCES
                        .iter()
                        .filter(|o| o.group == b.group && o.plural == b.plural)
                        .map(|o| Subresource {
                            name: o.name.into(),
                            verbs: strings(o.verbs),
                            kind: o.kind.map(|(g, v, k)| KindRef::new(g, v, k)),
                        }),
                )
                .collect(),
            // Kinds kube-apiserver has no printer for show Age (`table::columns`).
            columns: crate::printers::columns(b.group, b.kind).unwrap_or_default(),
            selectable_fields: strings(b.fields),
            custom: false,
            schema: None,
            defaults_on_read: false,
        })
        .collect()
}

/// Why a CustomResourceDefinition registers no kind: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidCrd(pub String);

/// The kind a CustomResourceDefinition object registers, or why it cannot.
pub fn from_crd(crd: &Value) -> Result<ResourceDef, InvalidCrd> {
    let missing = |field: &str| InvalidCrd(format!("{field}: Required value"));
    let spec = crd.get("spec").ok_or_else(|| missing("spec"))?;
    let group = str_at(spec, "group").ok_or_else(|| missing("spec.group"))?;
    let names = spec.get("names").ok_or_else(|| missing("spec.names"))?;
    let plural = str_at(names, "plural").ok_or_else(|| missing("spec.names.plural"))?;
    let kind = str_at(names, "kind").ok_or_else(|| missing("spec.names.kind"))?;
    let expected = format!("{plural}.{group}");
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name != expected {
        return Err(InvalidCrd(format!(
            "metadata.name: Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
        )));
    }
    let scope = str_at(spec, "scope").unwrap_or("Namespaced");
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or_else(|| missing("spec.versions"))?;
    check_versions(versions)?;
    let mut served: Vec<&Value> = versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
        .collect();
    if served.is_empty() {
        return Err(InvalidCrd(
            "spec.versions: Invalid value: must have exactly one version marked as storage version"
                .into(),
        ));
    }
    // Storage version first.
    served.sort_by_key(|v| !v.get("storage").and_then(Value::as_bool).unwrap_or(false));
    let storage = served[0];
    let mut subresources = Vec::new();
    if storage.pointer("/subresources/status").is_some() {
        subresources.push(ResourceDef::status());
    }
    if storage.pointer("/subresources/scale").is_some() {
        subresources.push(Subresource {
            name: "scale".into(),
            verbs: strings(STATUS_VERBS),
            kind: Some(KindRef::scale()),
        });
    }
    // `selectableFields` (Kubernetes 1.31+): JSONPaths such as `.spec.color`.
    let selectable_fields = storage
        .get("selectableFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| str_at(f, "jsonPath"))
        .map(|p| p.trim_start_matches('.').to_owned())
        .collect();
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
                    cell: CellSource::JsonPath(str_at(c, "jsonPath").unwrap_or("").into()),
                })
                .collect()
        })
        .unwrap_or_default();
    let names_at = |key: &str| -> Vec<String> {
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
        .map(Schema::from);
    let changed_since_created = crd
        .pointer("/metadata/generation")
        .and_then(Value::as_u64)
        .is_some_and(|g| g > 1);
    let defaults_on_read =
        changed_since_created && schema.as_deref().is_some_and(crate::schema::has_defaults);
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
        short_names: names_at("shortNames"),
        categories: names_at("categories"),
        verbs: strings(ALL_VERBS),
        subresources,
        columns,
        selectable_fields,
        custom: true,
        schema,
        defaults_on_read,
    })
}

/// `spec.versions` as kube-apiserver checks it: at least one; each named with a DNS-1035
/// label, no name twice; exactly one the storage version.
fn check_versions(versions: &[Value]) -> Result<(), InvalidCrd> {
    if versions.is_empty() {
        return Err(InvalidCrd(
            "spec.versions: Invalid value: must have exactly one version marked as storage version"
                .into(),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, v) in versions.iter().enumerate() {
        let field = format!("spec.versions[{i}].name");
        let name = match str_at(v, "name") {
            None | Some("") => return Err(InvalidCrd(format!("{field}: Required value"))),
            Some(n) => n,
        };
        if !is_dns1035_label(name) {
            return Err(InvalidCrd(format!(
                "{field}: Invalid value: \"{name}\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character"
            )));
        }
        if !seen.insert(name) {
            return Err(InvalidCrd(format!("{field}: Duplicate value: \"{name}\"")));
        }
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if storage != 1 {
        return Err(InvalidCrd(
            "spec.versions: Invalid value: must have exactly one version marked as storage version"
                .into(),
        ));
    }
    Ok(())
}

fn is_dns1035_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1] != b'-'
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
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
        assert!(d.namespaced && d.status_subresource() && d.custom);
        assert_eq!(d.short_names, vec!["wd"]);
        assert_eq!(
            d.columns[0].cell,
            CellSource::JsonPath(".status.phase".into())
        );
        assert_eq!(d.list_kind, "WidgetList");
    }

    #[test]
    fn crd_name_must_match() {
        let mut c = crd();
        c["metadata"]["name"] = json!("wrong");
        assert!(from_crd(&c).unwrap_err().0.contains("metadata.name"));
    }
}
