//! What the worker serves, as descriptions for the REST toolkit: the `worker.gpustack.ai/v1`
//! views (built from the project's CRDs, re-versioned, with the names the reference serves) and
//! `gpustack.ai/v1` settings.

use gpustack_kube_rest::resource::{self, PrinterColumn, ResourceDef};
use serde_json::json;

use super::views::View;

pub use crate::names::{SETTINGS_GROUP, WORKER_GROUP};
/// The served version.
pub const SERVED_VERSION: &str = "v1";
/// The version the custom resources are stored as.
pub const STORAGE_VERSION: &str = "v1alpha1";

fn from_api_crd(plural: &str) -> ResourceDef {
    let crd = gpustack_api::crds::own(plural)
        .unwrap_or_else(|| panic!("the api crate defines the {plural} CRD"));
    let crd = serde_json::to_value(crd).expect("a CRD serializes");
    let mut def = resource::from_crd(&crd).expect("the project's CRDs are valid");
    def.versions = vec![SERVED_VERSION.to_owned()];
    def
}

fn with_names(mut def: ResourceDef, short: &str, category: &str) -> ResourceDef {
    if !def.short_names.iter().any(|s| s == short) {
        def.short_names.push(short.to_owned());
    }
    if !def.categories.iter().any(|c| c == category) {
        def.categories.push(category.to_owned());
    }
    def
}

/// `devices` (short `devs`): one per node.
pub fn devices() -> ResourceDef {
    let mut def = with_names(from_api_crd("devices"), "devs", "gpustack");
    def.columns = vec![
        PrinterColumn::new("Manufacturer", "string", ".spec.groups[0].manufacturer", 0),
        PrinterColumn::new("Product", "string", ".spec.groups[0].name", 0),
        PrinterColumn::new("Memory(MiB)", "integer", ".spec.groups[0].memory", 1),
        PrinterColumn::new("Driver", "string", ".spec.groups[0].driverVersion", 1),
        PrinterColumn::age(),
    ];
    def
}

/// An Instance's access addresses, comma separated.
fn access_cell(obj: &serde_json::Value, _: jiff::Timestamp) -> serde_json::Value {
    let list: Vec<&str> = obj
        .pointer("/status/accessAddresses")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .collect();
    if list.is_empty() {
        serde_json::Value::Null
    } else {
        json!(list.join(","))
    }
}

/// An Instance's ports as `port:nodePort/PROTO`, comma separated (as `kubectl get services`
/// shows a NodePort Service's).
fn ports_cell(obj: &serde_json::Value, _: jiff::Timestamp) -> serde_json::Value {
    let ports: Vec<String> = obj
        .pointer("/status/ports")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let proto = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64() {
                Some(n) => format!("{}:{n}/{proto}", p["port"]),
                None => format!("{}/{proto}", p["port"]),
            }
        })
        .collect();
    if ports.is_empty() {
        serde_json::Value::Null
    } else {
        json!(ports.join(","))
    }
}

/// `instances` (short `inst`): users' machines, with where they are reached.
pub fn instances() -> ResourceDef {
    let mut def = with_names(from_api_crd("instances"), "inst", "gpustack");
    def.columns = vec![
        PrinterColumn::new("Type", "string", ".spec.type", 0),
        PrinterColumn::computed("Access", "string", 0, access_cell),
        PrinterColumn::computed("Ports", "string", 0, ports_cell),
        PrinterColumn::new("Phase", "string", ".status.phase", 0),
        PrinterColumn::age(),
    ];
    def.subresources.push(resource::Subresource {
        name: "events".into(),
        verbs: vec!["get".into()],
        kind: Some(resource::KindRef::new(
            WORKER_GROUP,
            SERVED_VERSION,
            "InstanceEvents",
        )),
    });
    def.subresources.push(resource::Subresource {
        name: "log".into(),
        verbs: vec!["get".into()],
        kind: None,
    });
    def.subresources.push(resource::Subresource {
        name: "metrics".into(),
        verbs: vec!["get".into()],
        kind: Some(resource::KindRef::new(
            WORKER_GROUP,
            SERVED_VERSION,
            "InstanceMetrics",
        )),
    });
    def
}

/// Every view, served at `v1` and stored as `v1alpha1`.
pub fn views() -> Vec<View> {
    [
        devices(),
        from_api_crd("instancetypes"),
        instances(),
        from_api_crd("nodemodelstores"),
        from_api_crd("modelartifacts"),
    ]
    .into_iter()
    .map(|def| View {
        storage_group: def.group.clone(),
        def,
        served: SERVED_VERSION.into(),
        storage: STORAGE_VERSION.into(),
    })
    .collect()
}

/// `settings` (namespaced, short `set`): read and changed, never created or deleted.
pub fn settings() -> ResourceDef {
    let string = json!({"type": "string"});
    let schema = json!({
        "type": "object",
        "description": "A setting of the operator: read its status, write spec.value.",
        "properties": {
            "apiVersion": string, "kind": string,
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "value": {"type": "string", "description": "The new value (write-only: never read back)."}
            }},
            "status": {"type": "object", "properties": {
                "description": string,
                "editable": {"type": "boolean"},
                "sensitive": {"type": "boolean"},
                "value": {"type": "string", "description": "The value, or (sensitive)."}
            }}
        }
    });
    ResourceDef {
        group: SETTINGS_GROUP.into(),
        storage_group: SETTINGS_GROUP.into(),
        versions: vec![SERVED_VERSION.into()],
        kind: "Setting".into(),
        list_kind: "SettingList".into(),
        plural: "settings".into(),
        singular: "setting".into(),
        namespaced: true,
        short_names: vec!["set".into()],
        categories: vec!["gpustack".into()],
        verbs: ["get", "list", "patch", "update", "watch"]
            .map(String::from)
            .to_vec(),
        subresources: Vec::new(),
        columns: vec![
            PrinterColumn::new("Value", "string", ".status.value", 0),
            PrinterColumn::new("Editable", "boolean", ".status.editable", 0),
            PrinterColumn::new("Sensitive", "boolean", ".status.sensitive", 1),
            PrinterColumn::new("Description", "string", ".status.description", 1),
            PrinterColumn::age(),
        ],
        selectable_fields: Vec::new(),
        custom: false,
        schema: Some(schema.into()),
        defaults_on_read: false,
    }
}

/// `instancetypeflavors` (short `instypeflavor`): computed from the derived ResourceFlavors,
/// read-only.
pub fn instance_type_flavors() -> ResourceDef {
    let string = json!({"type": "string"});
    let schema = json!({
        "type": "object",
        "description": "A kind of hardware the cluster's nodes offer, as its resource flavors note it.",
        "properties": {
            "apiVersion": string, "kind": string,
            "metadata": {"type": "object"},
            "spec": {"type": "object", "description": "The hardware: what the flavors note.",
                "additionalProperties": string},
            "status": {"type": "object", "properties": {
                "flavors": {"type": "array", "items": string,
                    "description": "The ResourceFlavors of this hardware."},
                "capacity": {"type": "integer",
                    "description": "Cards (or cores) the nodes of those flavors hold."},
            }},
        }
    });
    ResourceDef {
        group: WORKER_GROUP.into(),
        storage_group: WORKER_GROUP.into(),
        versions: vec![SERVED_VERSION.into()],
        kind: "InstanceTypeFlavor".into(),
        list_kind: "InstanceTypeFlavorList".into(),
        plural: "instancetypeflavors".into(),
        singular: "instancetypeflavor".into(),
        namespaced: false,
        short_names: vec!["instypeflavor".into()],
        categories: vec!["gpustack".into()],
        verbs: ["get", "list", "watch"].map(String::from).to_vec(),
        subresources: Vec::new(),
        columns: vec![
            PrinterColumn::new("Accelerator Group", "string", ".spec.acceleratorGroup", 0),
            PrinterColumn::new("Product", "string", ".spec.product", 0),
            PrinterColumn::new("Memory", "string", ".spec.memory", 0),
            PrinterColumn::new("Capacity", "integer", ".status.capacity", 0),
            PrinterColumn::age(),
        ],
        selectable_fields: Vec::new(),
        custom: false,
        schema: Some(schema.into()),
        defaults_on_read: false,
    }
}

/// Everything served, for discovery and OpenAPI.
pub fn all() -> Vec<ResourceDef> {
    let mut defs: Vec<ResourceDef> = views().into_iter().map(|v| v.def).collect();
    defs.push(instance_type_flavors());
    defs.push(settings());
    defs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_carry_the_reference_names() {
        let defs = all();
        let find = |p: &str| defs.iter().find(|d| d.plural == p).unwrap();
        let devs = find("devices");
        assert!(!devs.namespaced);
        assert_eq!(devs.versions, ["v1"]);
        assert!(devs.short_names.contains(&"devs".to_owned()));
        assert!(devs.categories.contains(&"gpustack".to_owned()));
        assert!(devs.status_subresource());
        assert!(
            devs.allows("delete"),
            "GC deletes through the preferred version"
        );
        let it = find("instancetypes");
        assert!(it.short_names.contains(&"instype".to_owned()));
        assert!(it.status_subresource());
        let set = find("settings");
        assert!(set.namespaced && !set.allows("create") && !set.allows("delete"));
        assert!(set.allows("patch") && set.allows("watch"));
    }
}
