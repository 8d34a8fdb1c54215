//! `worker.gpustack.ai/v1alpha1` `Devices`: the per-node accelerator ledger.
//!
//! One cluster-scoped object per node, named after the node. `spec` is what `device-manager`
//! detected (and what `device-manager detect` prints); `status` is the allocation ledger that the
//! device plugin keeps. Field names and omission rules follow the reference system so that its
//! manifests and the output of its commands read back unchanged.

use kube::CustomResource;
#[cfg(feature = "schema")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::manufacturer::Manufacturer;

/// Allocation units of one whole accelerator (2^9 * 5^5); every ledger figure is on this basis.
pub const UNITS_PER_ACCELERATOR: u64 = 1_600_000;

/// A node's accelerators, as its device manager detected them.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[cfg_attr(not(feature = "schema"), kube(schema = "disabled"))]
#[kube(
    group = "worker.gpustack.ai",
    version = "v1alpha1",
    kind = "Devices",
    plural = "devices",
    singular = "devices",
    status = "DevicesStatus",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct DevicesSpec {
    /// Detected accelerators, one group per (manufacturer, product name, memory).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id", "manufacturer"])))]
    pub groups: Vec<DevicesGroup>,
}

/// Accelerators of one product on one node.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DevicesGroup {
    /// Sanitised product name without the manufacturer prefix, at most 63 characters.
    pub id: String,
    /// Who made the accelerators of this group.
    pub manufacturer: Manufacturer,
    /// Product name as the vendor library reports it.
    pub name: String,
    /// Memory of one accelerator, in MiB.
    pub memory: u64,
    /// Streaming multiprocessors, AI cores or compute units of one accelerator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
    /// The vendor driver's version, as its library reports it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub driver_version: String,
    /// The vendor compute runtime's version (CUDA, ROCm, CANN...), where one is installed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub runtime_version: String,
    /// The compute capability (NVIDIA `9.0`, AMD `gfx90a`), where the vendor has one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub compute_capability: String,
    /// The product family or architecture name (e.g. `Hopper`), where the vendor reports one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub family: String,
    /// The group's accelerators, in enumeration order.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id"])))]
    pub accelerators: Vec<Accelerator>,
    /// The group's slicing capacity: the per-accelerator figures summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_sliced_detail: Option<AcceleratorSlicedDetail>,
}

/// One accelerator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Accelerator {
    /// Globally unique vendor id (NVIDIA `GPU-<uuid>`, AMD `GPU-<serial>`); never a PCI address.
    pub id: String,
    /// Enumeration index from 0, per manufacturer, in the vendor tool's order.
    pub index: u32,
    /// Vendor device-node numbers (NVIDIA `[minor]`, AMD `[card, renderD]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub physical_indexes: Vec<u32>,
    /// Where the accelerator sits on the node: PCI path, NUMA node, RoCE address.
    #[serde(default)]
    pub topology: DeviceTopology,
    /// Health and slicing capacity.
    #[serde(default)]
    pub status: AcceleratorStatus,
}

/// Where an accelerator sits on the node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DeviceTopology {
    /// PCI address of the device (`0000:18:00.0`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pci_bus_id: String,
    /// The outermost bridge above the device, or the device itself.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pci_root_id: String,
    /// PCI class code, hex without `0x` (`030200` for a 3D controller).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pci_class: String,
    /// NUMA node, `"0"` where the platform reports none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub numa_affinity: String,
    /// CPU list of that NUMA node, e.g. `0-13`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpu_affinity: String,
    /// The card's RoCE address, where it has one (Ascend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roce: Option<Roce>,
    /// Bridges between the device and its root, innermost first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pci_switches: Vec<String>,
}

/// RoCE address of a card (Ascend).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Roce {
    /// IPv4 address of the card's RoCE port.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ip: String,
    /// Its subnet mask, dotted.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subnet_mask: String,
    /// Its default gateway.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub gateway: String,
}

/// Health and slicing capacity of one accelerator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AcceleratorStatus {
    /// True when the vendor library reports the card failing; its capacity is withheld.
    #[serde(default)]
    pub unhealthy: bool,
    /// Present when the card is not partitioned and the product can be sliced in software.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_sliced: Option<LogicalSliced>,
    /// Present only when hardware partitioning (MIG) is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_sliced: Option<PhysicalSliced>,
}

/// Software slicing: how many slices may share the card.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LogicalSliced {
    /// Whether the slices' core percentages may add up to more than 100.
    #[serde(default)]
    pub cores_percentage_overcommit: bool,
    /// How many logical slices the card may host.
    #[serde(default)]
    pub count: i32,
}

/// Hardware partitioning: the profiles the card offers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PhysicalSliced {
    /// The partition profiles the card offers, each with its size and count.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])))]
    pub profiles: Vec<PhysicalSlicedProfile>,
    /// The largest count of any profile; sizes the `.partitioned` token pool.
    #[serde(default)]
    pub count: i32,
}

/// One partition profile, e.g. `1g.10gb`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PhysicalSlicedProfile {
    /// The vendor's profile name (`1g.10gb`).
    pub name: String,
    /// Memory of one partition of this profile, in MiB.
    #[serde(default)]
    pub memory_mib: u64,
    /// Compute slices one partition takes.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub compute_slices: u32,
    /// Memory slices one partition takes.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub memory_slices: u32,
    /// How many partitions of this profile fit on an empty card.
    #[serde(default)]
    pub count: i32,
    /// Every legal slot on an empty card, in memory-slice units.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<Placement>,
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// A run of slots.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct Placement {
    /// The first slot, in memory-slice units.
    pub start: u32,
    /// How many slots it spans.
    pub length: u32,
}

/// A group's slicing capacity, summed over its accelerators.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AcceleratorSlicedDetail {
    /// Software slicing summed over the group's sliceable accelerators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical: Option<LogicalSliced>,
    /// Hardware partitions summed over the group's partitioned accelerators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical: Option<PhysicalSlicedDetail>,
}

/// A group's hardware partitions, summed over its accelerators.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PhysicalSlicedDetail {
    /// The sum of each accelerator's largest profile count.
    #[serde(default)]
    pub count: i32,
    /// Each profile's count summed over the accelerators.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<ProfileCapacity>,
}

/// How many partitions of one profile a group offers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProfileCapacity {
    /// The vendor's profile name.
    pub name: String,
    /// Partitions of this profile over the group's accelerators.
    #[serde(default)]
    pub count: i32,
    /// Memory of one partition, in MiB.
    #[serde(default)]
    pub memory_mib: u64,
}

impl DevicesGroup {
    /// An empty group of one product.
    pub fn new(
        manufacturer: Manufacturer,
        id: impl Into<String>,
        name: impl Into<String>,
        memory: u64,
    ) -> Self {
        Self {
            id: id.into(),
            manufacturer,
            name: name.into(),
            memory,
            cores: None,
            driver_version: String::new(),
            runtime_version: String::new(),
            compute_capability: String::new(),
            family: String::new(),
            accelerators: Vec::new(),
            accelerator_sliced_detail: None,
        }
    }

    /// Recomputes `acceleratorSlicedDetail` from the accelerators: counts are summed, a logical
    /// overcommit holds only if every sliceable accelerator allows it.
    pub fn refresh_sliced_detail(&mut self) {
        let mut logical: Option<LogicalSliced> = None;
        let mut physical: Option<PhysicalSlicedDetail> = None;
        for acc in &self.accelerators {
            if let Some(l) = &acc.status.logical_sliced {
                let sum = logical.get_or_insert(LogicalSliced {
                    cores_percentage_overcommit: true,
                    count: 0,
                });
                sum.count += l.count;
                sum.cores_percentage_overcommit &= l.cores_percentage_overcommit;
            }
            if let Some(p) = &acc.status.physical_sliced {
                let sum = physical.get_or_insert_with(PhysicalSlicedDetail::default);
                sum.count += p.count;
                for profile in &p.profiles {
                    match sum.profiles.iter_mut().find(|c| c.name == profile.name) {
                        Some(c) => c.count += profile.count,
                        None => sum.profiles.push(ProfileCapacity {
                            name: profile.name.clone(),
                            count: profile.count,
                            memory_mib: profile.memory_mib,
                        }),
                    }
                }
            }
        }
        self.accelerator_sliced_detail = (logical.is_some() || physical.is_some())
            .then_some(AcceleratorSlicedDetail { logical, physical });
    }
}

/// The allocation ledger, rebuilt from the Pods that hold accelerators.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DevicesStatus {
    /// One allocation group per detected group, keyed like `spec.groups`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id", "manufacturer"])))]
    pub groups: Vec<DevicesStatusGroup>,
}

/// What the accelerators of one detected group have given out.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DevicesStatusGroup {
    /// The detected group's id.
    pub id: String,
    /// The detected group's manufacturer.
    pub manufacturer: Manufacturer,
    /// One record per accelerator of the group.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id"])))]
    pub accelerators: Vec<AcceleratorAllocation>,
}

/// What one accelerator has given out. The `allocatedPhysical*` and `allocatedLogicalPlacements`
/// fields travel only in Pod annotations and are left empty in `Devices.status`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AcceleratorAllocation {
    /// The accelerator's vendor id, as in `spec`.
    pub id: String,
    /// The accelerator's enumeration index.
    #[serde(default)]
    pub index: u32,
    /// How the accelerator is held now.
    #[serde(default)]
    pub mode: AllocationMode,
    /// Units given out, on the [`UNITS_PER_ACCELERATOR`] basis.
    #[serde(default)]
    pub allocated: u64,
    /// Units still free, on the same basis.
    #[serde(default)]
    pub remaining: u64,
    /// Partitions given out, per profile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocated_profiles: Vec<ProfileAllocation>,
    /// Partitions still free, per profile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remaining_profiles: Vec<ProfileAllocation>,
    /// Logical slices hosted (one per container), capped by `logicalSliced.count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_slices: Option<u32>,
    /// The profile of the partition a container was given (Pod annotations only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub allocated_physical_profile: String,
    /// The slots of that partition (Pod annotations only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocated_physical_placements: Vec<Placement>,
    /// The vendor id of that partition (Pod annotations only).
    #[serde(
        default,
        rename = "allocatedPhysicalID",
        skip_serializing_if = "String::is_empty"
    )]
    pub allocated_physical_id: String,
    /// The slots of a logical slice a container was given (Pod annotations only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocated_logical_placements: Vec<Placement>,
    /// Why the card is unhealthy, as the node agent last detected it (`Devices.status` only;
    /// empty while the card is healthy).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unhealthy_reason: String,
}

impl AcceleratorAllocation {
    /// A card nobody holds.
    pub fn fresh(id: impl Into<String>, index: u32) -> Self {
        Self {
            id: id.into(),
            index,
            remaining: UNITS_PER_ACCELERATOR,
            ..Self::default()
        }
    }
}

/// A count of partitions of one profile.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct ProfileAllocation {
    /// The vendor's profile name.
    pub name: String,
    /// How many partitions.
    pub count: i32,
}

/// How an accelerator is held. Serialized as a number, as the reference does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AllocationMode {
    /// Nobody holds the card.
    #[default]
    None = 0,
    /// One container holds the whole card.
    Exclusive = 1,
    /// Containers share the card without limits on each.
    Shared = 2,
    /// Containers hold logical slices with memory and core limits.
    Sliced = 3,
    /// Containers hold hardware partitions (MIG and the like).
    Partitioned = 4,
    /// Sidecar access to another container's grant; never written to `Devices.status`.
    Visibility = 5,
}

impl AllocationMode {
    /// Every mode, in numeric order.
    pub const ALL: [AllocationMode; 6] = [
        Self::None,
        Self::Exclusive,
        Self::Shared,
        Self::Sliced,
        Self::Partitioned,
        Self::Visibility,
    ];

    /// The lowercase word used in socket names and preflight rows.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Exclusive => "exclusive",
            Self::Shared => "shared",
            Self::Sliced => "sliced",
            Self::Partitioned => "partitioned",
            Self::Visibility => "visibility",
        }
    }
}

impl Serialize for AllocationMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(*self as u32)
    }
}

impl<'de> Deserialize<'de> for AllocationMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u32::deserialize(d)?;
        Self::ALL
            .into_iter()
            .find(|m| *m as u32 == n)
            .ok_or_else(|| serde::de::Error::custom(format!("mode {n} is not one of 0..=5")))
    }
}

#[cfg(feature = "schema")]
impl JsonSchema for AllocationMode {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AllocationMode".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "integer",
            "format": "int32",
            "minimum": 0,
            "maximum": 5,
            "description": "0 None, 1 Exclusive, 2 Shared, 3 Sliced, 4 Partitioned, 5 Visibility"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(accelerators: Vec<Accelerator>) -> DevicesGroup {
        DevicesGroup {
            accelerators,
            ..DevicesGroup::new(Manufacturer::Nvidia, "h100", "NVIDIA H100", 81559)
        }
    }

    fn acc(count: i32, overcommit: bool) -> Accelerator {
        Accelerator {
            status: AcceleratorStatus {
                logical_sliced: Some(LogicalSliced {
                    cores_percentage_overcommit: overcommit,
                    count,
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn sliced_detail_sums_accelerators() {
        let mut g = group(vec![acc(128, true), acc(128, true)]);
        g.refresh_sliced_detail();
        let logical = g.accelerator_sliced_detail.unwrap().logical.unwrap();
        assert_eq!(logical.count, 256);
        assert!(logical.cores_percentage_overcommit);

        let mut g = group(vec![acc(4, false), acc(4, true)]);
        g.refresh_sliced_detail();
        assert!(
            !g.accelerator_sliced_detail
                .unwrap()
                .logical
                .unwrap()
                .cores_percentage_overcommit
        );

        let mut empty = group(vec![]);
        empty.refresh_sliced_detail();
        assert_eq!(empty.accelerator_sliced_detail, None);
    }

    #[test]
    fn physical_detail_sums_profiles() {
        let mig = |count| Accelerator {
            status: AcceleratorStatus {
                physical_sliced: Some(PhysicalSliced {
                    count,
                    profiles: vec![PhysicalSlicedProfile {
                        name: "1g.10gb".into(),
                        memory_mib: 9984,
                        count,
                        ..Default::default()
                    }],
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut g = group(vec![mig(7), mig(7)]);
        g.refresh_sliced_detail();
        let physical = g.accelerator_sliced_detail.unwrap().physical.unwrap();
        assert_eq!(physical.count, 14);
        assert_eq!(physical.profiles[0].count, 14);
        assert_eq!(physical.profiles[0].memory_mib, 9984);
    }

    #[test]
    fn mode_is_a_number() {
        let a = AcceleratorAllocation {
            mode: AllocationMode::Sliced,
            allocated_physical_id: "MIG-1".into(),
            ..AcceleratorAllocation::fresh("GPU-1", 0)
        };
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(v["mode"], 3);
        assert_eq!(v["remaining"], 1_600_000);
        assert_eq!(v["allocatedPhysicalID"], "MIG-1");
        let back: AcceleratorAllocation = serde_json::from_value(v).unwrap();
        assert_eq!(back, a);
        let bad = serde_json::from_value::<AllocationMode>(serde_json::json!(9)).unwrap_err();
        assert!(bad.to_string().contains("mode 9"));
    }
}
