//! `InstanceType` (`worker.gpustack.ai/v1alpha1`, cluster-scoped): a pool of nodes with the same
//! hardware identity that users request units of. The worker derives one per pool (and admins may
//! add their own); its status is computed from the pool's `Devices` ledgers. Field names follow
//! the reference system so manifests carry over.

use std::collections::BTreeMap;

use kube::CustomResource;
#[cfg(feature = "schema")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::devices::AcceleratorSlicedDetail;

/// A pool of nodes with one hardware identity, offered in units.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[cfg_attr(not(feature = "schema"), kube(schema = "disabled"))]
#[kube(
    group = "worker.gpustack.ai",
    version = "v1alpha1",
    kind = "InstanceType",
    plural = "instancetypes",
    shortname = "instype",
    category = "gpustack",
    status = "InstanceTypeStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Display Name","type":"string","jsonPath":".spec.displayName"}"#,
    printcolumn = r#"{"name":"Accelerator Group","type":"string","jsonPath":".spec.acceleratorGroup"}"#,
    printcolumn = r#"{"name":"OS","type":"string","jsonPath":".spec.os"}"#,
    printcolumn = r#"{"name":"Arch","type":"string","jsonPath":".spec.arch"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Entrance","type":"string","priority":1,"jsonPath":".status.entrance"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InstanceTypeSpec {
    /// A name for people; the object's name stays the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Free text for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Hold the pool's queue: nothing new is admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inactive: Option<bool>,
    /// `<manufacturer>-<groupID>`; required when `acceleratable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_group: Option<String>,
    /// The CPU key, `generic` unless CPU-aware grouping is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub general_group: Option<String>,
    /// Whether the pool's units carry accelerators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceleratable: Option<bool>,
    /// The nodes' operating system (`linux`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// The nodes' CPU architecture (`amd64`, `arm64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// The resources of one unit (`cpu` a whole number, `ram` like `16Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_resources: Option<UnitResources>,
    /// Local storage per instance, like `100Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_storage: Option<String>,
}

/// The resources of one unit of a pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct UnitResources {
    /// Whole CPUs per unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Memory per unit, like `16Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram: Option<String>,
}

/// One view of the pool's capacity: what one request may take at most, what is left, what
/// there is.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CapacityView {
    /// The most one request may take now (on the best single node).
    #[serde(default)]
    pub once_max_request: i64,
    /// What is left over the whole pool.
    #[serde(default)]
    pub remaining: i64,
    /// What the pool has in all.
    #[serde(default)]
    pub capacity: i64,
}

/// What the worker computes of a pool from its nodes' `Devices` ledgers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct InstanceTypeStatus {
    /// Whole free cards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<CapacityView>,
    /// Shares (ten per card).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_shared: Option<CapacityView>,
    /// VRAM percent (a hundred per card).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_sliced: Option<CapacityView>,
    /// Hostable partition instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_partitioned: Option<CapacityView>,
    /// Free partitions per profile over the pool.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub remaining_profiles: BTreeMap<String, i64>,
    /// Partitions given out per profile over the pool.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocated_profiles: BTreeMap<String, i64>,
    /// CPU units, for pools without accelerators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CapacityView>,
    /// The LocalQueue a Pod names in `kueue.x-k8s.io/queue-name` to use this pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrance: Option<String>,
    /// `Active`, `Inactive` or `Draining`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Why the pool is in its phase, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_message: Option<String>,
    /// The pool's hardware, as its flavors describe it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<InstanceTypeDetail>,
}

/// What one card of the pool is: the facts the flavors note, and its slicing capacity.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct InstanceTypeDetail {
    /// The cards' manufacturer (`nvidia`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    /// The product name, as the vendor library reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product: Option<String>,
    /// The product family or architecture, where the vendor reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// VRAM of one card as a quantity (`80Gi`, or `81559Mi` when not whole GiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Compute units of one card (SMs, AI cores), as a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<String>,
    /// Per card: how many logical slices it hosts and which partition profiles it offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliced_detail: Option<AcceleratorSlicedDetail>,
}

impl InstanceTypeDetail {
    /// VRAM of one card in MiB, from `memory` (`<n>Gi` or `<n>Mi`).
    pub fn memory_mib(&self) -> Option<u64> {
        let m = self.memory.as_deref()?;
        if let Some(gi) = m.strip_suffix("Gi") {
            gi.parse::<u64>().ok().map(|g| g * 1024)
        } else {
            m.strip_suffix("Mi")?.parse().ok()
        }
    }
}
