//! The output of `device-manager monitor`: one utilization sample per manufacturer.
//!
//! A figure the vendor library did not report is absent, never 0.

use serde::{Deserialize, Serialize};

use crate::{manufacturer::Manufacturer, time::Timestamp};

/// One manufacturer's sample.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MetricsGroup {
    /// Whose accelerators the sample covers.
    pub manufacturer: Manufacturer,
    /// When the sample was taken, in the node's local time zone.
    pub timestamp: Timestamp,
    /// One entry per accelerator the vendor library reported.
    #[serde(default)]
    pub accelerators: Vec<AcceleratorMetrics>,
}

/// One accelerator's sample.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AcceleratorMetrics {
    /// The accelerator's vendor id, as in `Devices`.
    pub id: String,
    /// Total memory, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// Memory in use, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_usage: Option<u64>,
    /// Memory in use, percent of total (0-100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_utilization: Option<u32>,
    /// Compute busy, percent (0-100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores_utilization: Option<u32>,
    /// Degrees Celsius.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<i32>,
    /// Watts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_usage: Option<u32>,
    /// True when the vendor library reports the card failing.
    #[serde(default)]
    pub unhealthy: bool,
}

/// Memory in use as a whole percentage of the total, rounded down and capped at 100.
pub fn memory_utilization(used_mib: u64, total_mib: u64) -> Option<u32> {
    (total_mib > 0).then(|| (used_mib.saturating_mul(100) / total_mib).min(100) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utilization_is_bounded() {
        assert_eq!(memory_utilization(174, 16368), Some(1));
        assert_eq!(memory_utilization(20, 10), Some(100));
        assert_eq!(memory_utilization(1, 0), None);
    }

    #[test]
    fn unmeasured_figures_are_absent() {
        let m = AcceleratorMetrics {
            id: "GPU-1".into(),
            memory_usage: Some(3),
            ..Default::default()
        };
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"id": "GPU-1", "memoryUsage": 3, "unhealthy": false})
        );
    }
}
