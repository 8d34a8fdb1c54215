//! The settings the controllers read, as one typed snapshot of the Settings Secret. A setting
//! missing from the Secret (or unreadable) falls back to the catalog's default, so a half-seeded
//! Secret never flips behaviour.

use std::collections::BTreeMap;

use super::unit_presets::UnitPresets;
use crate::settings::catalog::CATALOG;

/// The setting holding an admin's unit resources table.
pub const UNIT_PRESETS: &str = "instance-type-unit-resources-preset";

/// The settings the chain controller reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainSettings {
    /// Nodes are onboarded by hand (`gpustack.ai/managed` is not written).
    pub node_management_manual: bool,
    /// Accelerated nodes also serve the CPU pools.
    pub mixed_on_node: bool,
    /// InstanceTypes are derived from nodes (and the node-devices check guards their queues).
    pub derived_from_node: bool,
    /// A queue that loses all its flavors drains what it admitted.
    pub drain_when_no_flavors: bool,
    /// Pools are also told apart by CPU model.
    pub aware_cpu_manufacturer: bool,
    /// Workloads are pinned to nodes whose fit labels say they can host them.
    pub workload_fit_affinity: bool,
    /// The admin's unit resources table, consulted before the shipped one (an unreadable
    /// table, which the Settings API refuses anyway, counts as none).
    pub unit_presets: Option<UnitPresets>,
}

impl Default for ChainSettings {
    fn default() -> Self {
        Self::from_values(&BTreeMap::new())
    }
}

impl ChainSettings {
    /// The settings from the Secret's values, defaults where absent or invalid.
    pub fn from_values(values: &BTreeMap<String, String>) -> Self {
        let flag = |name: &str| {
            let default = CATALOG
                .iter()
                .find(|d| d.name == name)
                .map(|d| d.default)
                .unwrap_or("false");
            values
                .get(name)
                .and_then(|v| v.trim().parse::<bool>().ok())
                .unwrap_or(default == "true")
        };
        Self {
            node_management_manual: flag("node-management-manual"),
            mixed_on_node: flag("instance-type-mixed-on-node"),
            derived_from_node: flag("instance-type-derived-from-node"),
            drain_when_no_flavors: flag("instance-type-drain-when-no-flavors"),
            aware_cpu_manufacturer: flag("instance-type-aware-cpu-manufacturer"),
            workload_fit_affinity: flag("workload-fit-affinity"),
            unit_presets: values
                .get(UNIT_PRESETS)
                .filter(|v| !v.trim().is_empty())
                .and_then(|v| match UnitPresets::parse(v) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        tracing::warn!("setting {UNIT_PRESETS} ignored: {e}");
                        None
                    }
                }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_catalog_and_values_override_them() {
        let d = ChainSettings::default();
        assert!(!d.node_management_manual && d.mixed_on_node && d.derived_from_node);
        assert!(d.drain_when_no_flavors && !d.aware_cpu_manufacturer && d.workload_fit_affinity);
        let v = BTreeMap::from([
            ("instance-type-mixed-on-node".to_owned(), "false".to_owned()),
            ("node-management-manual".to_owned(), "not-a-bool".to_owned()),
        ]);
        let s = ChainSettings::from_values(&v);
        assert!(!s.mixed_on_node);
        assert!(
            !s.node_management_manual,
            "an unreadable value keeps the default"
        );
        assert_eq!(d.unit_presets, None);
        let table = "nvidia:\n  H100: {cpu: \"20\", ram: 200Gi}\n";
        let v = BTreeMap::from([(UNIT_PRESETS.to_owned(), table.to_owned())]);
        let s = ChainSettings::from_values(&v);
        let got = s.unit_presets.unwrap();
        assert_eq!(
            got.lookup(gpustack_api::Manufacturer::Nvidia, "NVIDIA-H100"),
            Some(("20", "200Gi"))
        );
        let v = BTreeMap::from([(UNIT_PRESETS.to_owned(), "nvidia: 1".to_owned())]);
        assert_eq!(ChainSettings::from_values(&v).unit_presets, None);
    }
}
