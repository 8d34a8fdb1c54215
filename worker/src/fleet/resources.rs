//! What `fleet.gpustack.ai/v1` serves, described for the REST toolkit: `clusters` (the
//! gateway's subscriptions), `devices` and `instances` (every upstream's, as the gateway mirrors
//! them) and the
//! fleet aggregates `instancetypes` and `instancetypeflavors`.

use gpustack_kube_rest::resource::{PrinterColumn, ResourceDef};
use serde_json::{Value, json};

/// The fleet's API group.
pub const FLEET_GROUP: &str = "fleet.gpustack.ai";
/// The fleet's served version.
pub const FLEET_VERSION: &str = "v1";
/// The label naming an object's cluster in the gateway's fleet view.
pub const CLUSTER_LABEL: &str = "gpustack.ai/cluster";

fn cluster_column() -> PrinterColumn {
    PrinterColumn::new(
        "Cluster",
        "string",
        &format!(".metadata.labels['{CLUSTER_LABEL}']"),
        0,
    )
}

fn def(
    kind: &str,
    plural: &str,
    short: &[&str],
    columns: Vec<PrinterColumn>,
    verbs: &[&str],
    schema: Value,
) -> ResourceDef {
    ResourceDef {
        group: FLEET_GROUP.into(),
        storage_group: FLEET_GROUP.into(),
        versions: vec![FLEET_VERSION.into()],
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        namespaced: false,
        short_names: short.iter().map(|s| (*s).to_owned()).collect(),
        categories: vec!["gpustack-fleet".into()],
        verbs: verbs.iter().map(|s| (*s).to_owned()).collect(),
        subresources: Vec::new(),
        columns,
        selectable_fields: Vec::new(),
        custom: false,
        schema: Some(schema.into()),
        defaults_on_read: false,
    }
}

const READ: &[&str] = &["get", "list", "watch"];

/// `clusters` (short `cl`): one per upstream subscription of the gateway.
pub fn clusters() -> ResourceDef {
    let string = json!({"type": "string"});
    let schema = json!({
        "type": "object",
        "description": "An upstream cluster the hub's gateway mirrors. Creating one subscribes; deleting it unsubscribes.",
        "properties": {
            "apiVersion": string, "kind": string, "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "mode": {"type": "string", "enum": ["kubeconfig", "gpustack-api"],
                    "description": "How the gateway reaches the cluster: with the kubeconfig in the Secret, or through the GPUStack server's proxy with the token in the Secret."},
                "secretRef": {"type": "object", "properties": {
                    "namespace": string, "name": string,
                    "key": {"type": "string", "description": "The key holding the kubeconfig or token; by default `kubeconfig` or `token`."}}},
                "context": {"type": "string", "description": "The kubeconfig context; its current one when unset."},
                "extraKinds": {"type": "array", "items": string,
                    "description": "group/version/Kind to mirror besides the defaults."},
            }},
            "status": {"type": "object", "properties": {
                "phase": string, "lastSyncTime": string, "lastError": string,
                "notServed": {"type": "array", "items": string},
                "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
            }},
        }
    });
    def(
        "Cluster",
        "clusters",
        &["cl"],
        vec![
            PrinterColumn::new("Phase", "string", ".status.phase", 0),
            PrinterColumn::new("Last Sync", "date", ".status.lastSyncTime", 0),
            PrinterColumn::new(
                "Devices",
                "integer",
                ".status.counts['Devices.worker.gpustack.ai']",
                0,
            ),
            PrinterColumn::new("Last Error", "string", ".status.lastError", 1),
            PrinterColumn::age(),
        ],
        &["create", "delete", "get", "list", "watch"],
        schema,
    )
}

/// The schema of the api crate's CRD `plural`.
fn crd_schema(plural: &str) -> gpustack_kube_rest::resource::Schema {
    let crd = gpustack_api::crds::own(plural).expect("the api crate defines the CRD");
    let crd = serde_json::to_value(crd).expect("a CRD serializes");
    gpustack_kube_rest::resource::from_crd(&crd)
        .ok()
        .and_then(|d| d.schema)
        .unwrap_or_else(|| json!({"type": "object"}).into())
}

/// `devices` (short `devs`): every upstream's Devices, named `CLUSTER.NODE`.
pub fn devices() -> ResourceDef {
    let schema = crd_schema("devices");
    let mut d = def(
        "Devices",
        "devices",
        &["devs"],
        vec![
            cluster_column(),
            PrinterColumn::new("Manufacturer", "string", ".spec.groups[0].manufacturer", 0),
            PrinterColumn::new("Product", "string", ".spec.groups[0].name", 0),
            PrinterColumn::new("Memory(MiB)", "integer", ".spec.groups[0].memory", 1),
            PrinterColumn::age(),
        ],
        READ,
        json!({}),
    );
    d.list_kind = "DevicesList".into();
    d.singular = "devices".into();
    d.schema = Some(schema);
    d
}

/// `instances` (short `inst`): every upstream's Instances, named `CLUSTER.NAME` in their
/// namespaces, with their cluster and phase.
pub fn instances() -> ResourceDef {
    let mut d = def(
        "Instance",
        "instances",
        &["inst"],
        vec![
            cluster_column(),
            PrinterColumn::new("Type", "string", ".spec.type", 0),
            PrinterColumn::new("Phase", "string", ".status.phase", 0),
            PrinterColumn::new("Node", "string", ".status.nodeName", 1),
            PrinterColumn::age(),
        ],
        READ,
        json!({}),
    );
    d.namespaced = true;
    d.schema = Some(crd_schema("instances"));
    d
}

/// `instancetypes` (short `instype`): the fleet aggregate of the clusters' InstanceTypes.
pub fn instance_types() -> ResourceDef {
    let view = json!({"type": "object", "properties": {
        "onceMaxRequest": {"type": "integer"}, "remaining": {"type": "integer"},
        "capacity": {"type": "integer"}}});
    let schema = json!({
        "type": "object",
        "description": "InstanceTypes of the same spec across the fleet's clusters, counted together.",
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "description": "The members' common spec (without inactive, displayName and description)."},
            "status": {"type": "object", "properties": {
                "accelerator": view, "acceleratorShared": view, "acceleratorSliced": view,
                "acceleratorPartitioned": view, "cpu": view,
                "remainingProfiles": {"type": "object", "additionalProperties": {"type": "integer"}},
                "allocatedProfiles": {"type": "object", "additionalProperties": {"type": "integer"}},
                "clusters": {"type": "array", "items": {"type": "string"},
                    "description": "The clusters counted (their member is Active)."},
                "members": {"type": "array", "items": {"type": "object"},
                    "description": "Every member: cluster, name, phase, and stale when its cluster is not Ready."},
                "tiers": {"type": "array", "items": {"type": "object"},
                    "description": "Whole-card request sizes and the clusters that can take each at once, largest first."},
            }},
        }
    });
    def(
        "InstanceType",
        "instancetypes",
        &["instype"],
        vec![
            PrinterColumn::new("Accelerator(EX/SH/SL/PT)", "string", ".status.summary", 0),
            PrinterColumn::new("Clusters", "string", ".status.clusterList", 0),
            PrinterColumn::new("CPU", "integer", ".status.cpu.remaining", 1),
            PrinterColumn::age(),
        ],
        READ,
        schema,
    )
}

/// `instancetypeflavors` (short `instypeflavor`): the clusters' flavors, one per spec.
pub fn instance_type_flavors() -> ResourceDef {
    let schema = json!({
        "type": "object",
        "description": "A kind of hardware offered somewhere in the fleet, with the clusters that offer it.",
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "additionalProperties": {"type": "string"}},
            "status": {"type": "object", "properties": {
                "clusters": {"type": "array", "items": {"type": "string"}},
                "capacity": {"type": "integer"},
            }},
        }
    });
    def(
        "InstanceTypeFlavor",
        "instancetypeflavors",
        &["instypeflavor"],
        vec![
            PrinterColumn::new("Accelerator Group", "string", ".spec.acceleratorGroup", 0),
            PrinterColumn::new("Product", "string", ".spec.product", 0),
            PrinterColumn::new("Capacity", "integer", ".status.capacity", 0),
            PrinterColumn::new("Clusters", "string", ".status.clusterList", 0),
            PrinterColumn::age(),
        ],
        READ,
        schema,
    )
}

/// Everything the fleet group serves.
pub fn all() -> Vec<ResourceDef> {
    vec![
        clusters(),
        devices(),
        instances(),
        instance_types(),
        instance_type_flavors(),
    ]
}
