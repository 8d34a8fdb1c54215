//! `Instance` (`worker.gpustack.ai/v1alpha1`, namespaced): a user's machine carved from a pool
//! (an InstanceType). Only what admission checks is defined here: the pool, what is asked of it
//! in `spec.resources` (the reference's field names), and the two privileges Settings gate.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "worker.gpustack.ai",
    version = "v1alpha1",
    kind = "Instance",
    plural = "instances",
    shortname = "inst",
    category = "gpustack",
    namespaced,
    status = "InstanceStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Instance Type","type":"string","jsonPath":".spec.instanceType"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InstanceSpec {
    /// The InstanceType (pool) the instance is carved from.
    pub instance_type: String,
    #[serde(default)]
    pub resources: InstanceResources,
    /// Run the instance's container privileged (allowed only by `instance-privileged-allowed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privileged: Option<bool>,
    /// Host directories mounted in (allowed only by `instance-host-path-volume-allowed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_path_volumes: Vec<HostPathVolume>,
    /// Stopped: its Pod is removed, its claim on the pool kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<bool>,
}

/// What one instance takes from its pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceResources {
    /// Whole cards; exactly 1 with a slice or a partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<i64>,
    /// A logical slice of one card: its share of the card's memory, (0, 100].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_sliced_memory_percentage: Option<i64>,
    /// The slice's share of the card's cores, (0, 100]; 100 when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_sliced_cores_percentage: Option<i64>,
    /// A hardware partition of one card, by profile (`1g.10gb`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_partitioned_profile: Option<String>,
    /// CPU units, for pools without accelerators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<i64>,
    /// Memory, like `32Gi`; at most the unit's memory times the units taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram: Option<String>,
    /// Local storage, like `50Gi`; at most the pool's `localStorage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostPathVolume {
    pub name: String,
    pub path: String,
    pub mount_path: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}
