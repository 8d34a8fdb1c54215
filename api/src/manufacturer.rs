//! The nine accelerator manufacturers and everything the product knows about each of them, as data.
//!
//! Defaults match the reference system; each can be overridden per deployment through
//! `GPUSTACK_<MFR>_*` environment variables. Reading the environment is the caller's job: the
//! resolution here takes a lookup function so that it stays pure.

use std::{fmt, str::FromStr};

#[cfg(feature = "schema")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An accelerator manufacturer. Serialized in lowercase, as in `Devices.spec.groups[].manufacturer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Manufacturer {
    /// AMD Instinct and Radeon (ROCm).
    Amd,
    /// Huawei Ascend NPUs (CANN).
    Ascend,
    /// Cambricon MLUs.
    Cambricon,
    /// Hygon DCUs.
    Hygon,
    /// Iluvatar CoreX GPUs.
    Iluvatar,
    /// MetaX GPUs.
    Metax,
    /// Moore Threads GPUs.
    Mthreads,
    /// NVIDIA GPUs (CUDA).
    Nvidia,
    /// T-Head PPUs.
    Thead,
}

impl Manufacturer {
    /// All manufacturers, in the (alphabetical) order the reference lists them.
    pub const ALL: [Manufacturer; 9] = [
        Manufacturer::Amd,
        Manufacturer::Ascend,
        Manufacturer::Cambricon,
        Manufacturer::Hygon,
        Manufacturer::Iluvatar,
        Manufacturer::Metax,
        Manufacturer::Mthreads,
        Manufacturer::Nvidia,
        Manufacturer::Thead,
    ];

    /// The lowercase name used in labels, resource names and `Devices`.
    pub fn as_str(self) -> &'static str {
        self.spec().name
    }

    /// The built-in facts about this manufacturer.
    pub fn spec(self) -> &'static ManufacturerSpec {
        &TABLE[self as usize]
    }

    /// The facts with the deployment's `GPUSTACK_<MFR>_*` overrides applied.
    pub fn resolve(self, env: impl Fn(&str) -> Option<String>) -> ResolvedManufacturer {
        let spec = self.spec();
        let var = |suffix: &str| {
            env(&format!(
                "GPUSTACK_{}_{suffix}",
                spec.name.to_ascii_uppercase()
            ))
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
        };
        let vendor = var("PCI_VENDOR_ID")
            .and_then(|v| PciVendorMatch::parse(&v))
            .unwrap_or(PciVendorMatch {
                class_prefix: None,
                vendor_id: spec.pci_vendor_id.to_owned(),
            });
        ResolvedManufacturer {
            manufacturer: self,
            pci_vendor: vendor,
            resource_name: var("ACCELERATABLE_RESOURCE_NAME")
                .unwrap_or_else(|| spec.resource_name.to_owned()),
            runtime_name: var("ACCELERATABLE_RUNTIME_NAME")
                .or_else(|| spec.runtime_name.map(str::to_owned)),
            partition_kind: var("PARTITION_KIND")
                .or_else(|| spec.partition_kind.map(str::to_owned)),
        }
    }
}

impl fmt::Display for Manufacturer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for a name that is not one of the nine manufacturers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown manufacturer {0:?}: allowed are {allowed}", allowed = allowed_names())]
pub struct UnknownManufacturer(pub String);

/// The allowed manufacturer names, comma separated, for error messages.
pub fn allowed_names() -> String {
    Manufacturer::ALL.map(Manufacturer::as_str).join(", ")
}

impl FromStr for Manufacturer {
    type Err = UnknownManufacturer;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Manufacturer::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownManufacturer(s.to_owned()))
    }
}

/// How many logical slices one accelerator can host, and whether their core percentages may add
/// up to more than 100.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogicalSlicing {
    /// How many slices one accelerator may host.
    pub count: i32,
    /// Whether the slices' core percentages may add up to more than 100.
    pub cores_percentage_overcommit: bool,
}

/// Built-in facts about one manufacturer.
#[derive(Debug, PartialEq, Eq)]
pub struct ManufacturerSpec {
    /// The lowercase name used in labels, resource names and `Devices`.
    pub name: &'static str,
    /// PCI vendor id, lowercase hex without `0x`.
    pub pci_vendor_id: &'static str,
    /// Base of the kubelet extended resource names (`<base>`, `<base>.shared`, ...).
    pub resource_name: &'static str,
    /// RuntimeClass that injects the vendor's driver; `None` where the vendor has none.
    pub runtime_name: Option<&'static str>,
    /// Kind of hardware partitioning (`mig`), where the vendor has one.
    pub partition_kind: Option<&'static str>,
    /// Management libraries loaded at run time, in the order they are tried.
    pub libraries: &'static [&'static str],
    /// Environment variables naming the vendor toolkit's home, in priority order.
    pub home_env: &'static [&'static str],
    /// Where the toolkit lives when no environment variable names it.
    pub default_home: Option<&'static str>,
    /// The host CLI that preflight uses to cross-check detection, where there is one.
    pub host_cli: Option<&'static str>,
    /// Logical slicing offered on an unpartitioned card, where the product supports it.
    pub logical_slicing: Option<LogicalSlicing>,
}

const fn slicing(count: i32, overcommit: bool) -> Option<LogicalSlicing> {
    Some(LogicalSlicing {
        count,
        cores_percentage_overcommit: overcommit,
    })
}

/// Indexed by `Manufacturer as usize`; a unit test keeps the two in step.
static TABLE: [ManufacturerSpec; 9] = [
    ManufacturerSpec {
        name: "amd",
        pci_vendor_id: "1002",
        resource_name: "amd.com/gpu",
        runtime_name: Some("amd"),
        partition_kind: None,
        libraries: &["librocm_smi64.so", "libamd_smi.so", "libhsa-runtime64.so"],
        home_env: &["ROCM_HOME", "ROCM_PATH"],
        default_home: Some("/opt/rocm"),
        host_cli: Some("rocm-smi --showuniqueid"),
        logical_slicing: slicing(128, true),
    },
    ManufacturerSpec {
        name: "ascend",
        pci_vendor_id: "19e5",
        resource_name: "huawei.com/npu",
        runtime_name: Some("ascend"),
        partition_kind: None,
        libraries: &["libdcmi.so"],
        home_env: &["ASCEND_TOOLKIT_HOME", "CANN_HOME"],
        default_home: Some("/usr/local/Ascend"),
        host_cli: Some("npu-smi info -l"),
        logical_slicing: slicing(63, true),
    },
    ManufacturerSpec {
        name: "cambricon",
        pci_vendor_id: "cabc",
        resource_name: "cambricon.com/mlu",
        runtime_name: Some("cambricon"),
        partition_kind: None,
        libraries: &["libcndev.so"],
        home_env: &["NEUWARE_HOME"],
        default_home: Some("/usr/local/neuware"),
        host_cli: None,
        logical_slicing: slicing(16, false),
    },
    ManufacturerSpec {
        name: "hygon",
        pci_vendor_id: "1d94",
        resource_name: "hygon.com/dcu",
        runtime_name: Some("hygon"),
        partition_kind: Some("mig"),
        libraries: &["librocm_smi64.so", "libhsa-runtime64.so"],
        home_env: &["HYHAL_HOME", "DTK_HOME"],
        default_home: Some("/opt/hyhal"),
        host_cli: None,
        logical_slicing: slicing(4, false),
    },
    ManufacturerSpec {
        name: "iluvatar",
        pci_vendor_id: "1e3e",
        resource_name: "iluvatar.com/gpu",
        runtime_name: Some("iluvatar"),
        partition_kind: None,
        libraries: &["libixml.so"],
        home_env: &["COREX_HOME"],
        default_home: Some("/usr/local/corex"),
        host_cli: None,
        logical_slicing: slicing(128, true),
    },
    ManufacturerSpec {
        name: "metax",
        pci_vendor_id: "9999",
        resource_name: "metax-tech.com/gpu",
        runtime_name: Some("metax"),
        partition_kind: None,
        libraries: &["libmxsml.so"],
        home_env: &["MACA_HOME"],
        default_home: Some("/opt/maca"),
        host_cli: None,
        logical_slicing: slicing(16, false),
    },
    ManufacturerSpec {
        name: "mthreads",
        pci_vendor_id: "1ed5",
        resource_name: "mthreads.com/gpu",
        runtime_name: Some("mthreads"),
        partition_kind: None,
        libraries: &["libmtml.so"],
        home_env: &[],
        default_home: None,
        host_cli: None,
        logical_slicing: slicing(16, false),
    },
    ManufacturerSpec {
        name: "nvidia",
        pci_vendor_id: "10de",
        resource_name: "nvidia.com/gpu",
        runtime_name: Some("nvidia"),
        partition_kind: Some("mig"),
        libraries: &["libnvidia-ml.so.1", "libnvidia-ml.so"],
        home_env: &[],
        default_home: None,
        host_cli: Some("nvidia-smi -L"),
        logical_slicing: slicing(128, true),
    },
    ManufacturerSpec {
        name: "thead",
        pci_vendor_id: "1ded",
        resource_name: "alibabacloud.com/ppu",
        runtime_name: None,
        partition_kind: Some("mig"),
        libraries: &["libhgml.so"],
        home_env: &["PPU_HOME"],
        default_home: Some("/usr/local/PPU_SDK"),
        host_cli: None,
        logical_slicing: slicing(128, true),
    },
];

/// Which PCI functions belong to a manufacturer: its vendor id, optionally restricted to one
/// class prefix (`GPUSTACK_<MFR>_PCI_VENDOR_ID` accepts `vendor` or `class_vendor`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciVendorMatch {
    /// PCI class prefix the function must have (hex, without `0x`), when restricted.
    pub class_prefix: Option<String>,
    /// PCI vendor id, lowercase hex without `0x`.
    pub vendor_id: String,
}

impl PciVendorMatch {
    /// Parses `10de`, `0x10de` or `0302_10de`; `None` when it is not hex.
    pub fn parse(value: &str) -> Option<Self> {
        let strip = |s: &str| {
            let s = s.trim();
            let s = s.strip_prefix("0x").unwrap_or(s).to_ascii_lowercase();
            (!s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit())).then_some(s)
        };
        match value.split_once('_') {
            Some((class, vendor)) => Some(Self {
                class_prefix: Some(strip(class)?),
                vendor_id: strip(vendor)?,
            }),
            None => Some(Self {
                class_prefix: None,
                vendor_id: strip(value)?,
            }),
        }
    }

    /// Whether a PCI function with this vendor id and class (both hex, without `0x`) matches.
    pub fn matches(&self, vendor_id: &str, class: &str) -> bool {
        self.vendor_id.eq_ignore_ascii_case(vendor_id)
            && self
                .class_prefix
                .as_deref()
                .is_none_or(|prefix| class.to_ascii_lowercase().starts_with(prefix))
    }
}

/// A manufacturer's facts after the deployment's overrides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedManufacturer {
    /// Which manufacturer these facts are about.
    pub manufacturer: Manufacturer,
    /// Which PCI functions are this manufacturer's accelerators.
    pub pci_vendor: PciVendorMatch,
    /// Base of the kubelet extended resource names.
    pub resource_name: String,
    /// RuntimeClass that injects the vendor's driver; `None` where the vendor has none.
    pub runtime_name: Option<String>,
    /// Kind of hardware partitioning (`mig`), where the vendor has one.
    pub partition_kind: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_rows_follow_enum_order() {
        for m in Manufacturer::ALL {
            assert_eq!(m.as_str().parse::<Manufacturer>().unwrap(), m);
            assert_eq!(
                serde_json::to_value(m).unwrap(),
                serde_json::json!(m.spec().name)
            );
        }
    }

    #[test]
    fn reference_defaults() {
        let ids: Vec<_> = Manufacturer::ALL.map(|m| m.spec().pci_vendor_id).to_vec();
        assert_eq!(
            ids,
            [
                "1002", "19e5", "cabc", "1d94", "1e3e", "9999", "1ed5", "10de", "1ded"
            ]
        );
        assert_eq!(Manufacturer::Thead.spec().runtime_name, None);
        let partitioned: Vec<_> = Manufacturer::ALL
            .into_iter()
            .filter(|m| m.spec().partition_kind.is_some())
            .collect();
        assert_eq!(
            partitioned,
            [
                Manufacturer::Hygon,
                Manufacturer::Nvidia,
                Manufacturer::Thead
            ]
        );
    }

    #[test]
    fn unknown_name_lists_allowed() {
        let err = "intel".parse::<Manufacturer>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown manufacturer \"intel\": allowed are amd, ascend, cambricon, hygon, iluvatar, metax, mthreads, nvidia, thead"
        );
    }

    #[test]
    fn environment_overrides() {
        let env = |k: &str| match k {
            "GPUSTACK_NVIDIA_PCI_VENDOR_ID" => Some("0x0302_10DE".into()),
            "GPUSTACK_NVIDIA_ACCELERATABLE_RESOURCE_NAME" => Some("example.com/gpu".into()),
            "GPUSTACK_NVIDIA_PARTITION_KIND" => Some(" ".into()),
            _ => None,
        };
        let r = Manufacturer::Nvidia.resolve(env);
        assert_eq!(r.pci_vendor.class_prefix.as_deref(), Some("0302"));
        assert_eq!(r.pci_vendor.vendor_id, "10de");
        assert!(r.pci_vendor.matches("10de", "030200"));
        assert!(!r.pci_vendor.matches("10de", "030000"));
        assert_eq!(r.resource_name, "example.com/gpu");
        // A blank override keeps the default.
        assert_eq!(r.partition_kind.as_deref(), Some("mig"));
        assert_eq!(r.runtime_name.as_deref(), Some("nvidia"));

        let garbage = |k: &str| (k == "GPUSTACK_AMD_PCI_VENDOR_ID").then(|| "zz".to_owned());
        assert_eq!(
            Manufacturer::Amd.resolve(garbage).pci_vendor.vendor_id,
            "1002"
        );
    }
}
