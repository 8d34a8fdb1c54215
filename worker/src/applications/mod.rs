//! Image mode: unless `--disable-applications` covers them, the worker keeps its cluster's node
//! agents installed itself — the device-manager DaemonSets of the manufacturers found on its
//! nodes, and the model-manager DaemonSet with its CSIDriver, each with its RBAC — the same
//! objects the Helm chart renders ([`objects`], one definition; a test compares them with the
//! chart's). Kueue, NFD and the NFS and S3 CSI drivers come from their upstream charts: where
//! one is enabled but missing, the worker says what to install ([`upstream`]) and carries on.
//!
//! - [`plan`]: which applications, which manufacturers, which objects, what to prune (pure);
//! - [`keeper`]: the loop around it, under Lease `applications.worker.gpustack.ai` (the
//!   controllers' [`crate::controllers::leader`] election with its own Lease), server-side
//!   apply with field manager [`objects::MANAGED_BY`], a pass every resync period.

pub mod keeper;
pub mod objects;
pub mod plan;
pub mod upstream;

use std::{sync::RwLock, time::Duration};

use gpustack_api::Manufacturer;

use crate::controllers::leader::LeaseConfig;

/// The Lease only whose holder applies.
pub const LEASE: &str = "applications.worker.gpustack.ai";

/// How image mode runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// `--disable-applications`: `*` or names.
    pub disabled: Vec<String>,
    /// `--manufacturer`: the device managers the worker may install.
    pub manufacturers: Vec<Manufacturer>,
    /// The worker's own Pod (`KUBERNETES_POD_NAME`), whose container `main` names the image the
    /// agents run; `None` (or unreadable) falls back to [`objects::default_image`].
    pub own_pod: Option<String>,
    /// How often a pass runs (drift is repaired within one).
    pub resync: Duration,
    /// The Lease; its namespace is the system namespace.
    pub lease: LeaseConfig,
}

/// What `/readyz` says of the applications, shared between the keeper and the API.
#[derive(Debug, Default)]
pub struct Health {
    missing: RwLock<Vec<upstream::Missing>>,
}

impl Health {
    /// Records what is missing after a pass.
    pub fn set_missing(&self, missing: Vec<upstream::Missing>) {
        *self.missing.write().unwrap_or_else(|p| p.into_inner()) = missing;
    }

    /// What the last pass found missing.
    pub fn missing(&self) -> Vec<upstream::Missing> {
        self.missing
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `/readyz?verbose`'s lines for the applications: a missing one is a warning (`[!]`), not
    /// a failure — the worker carries on without it.
    pub fn readyz_lines(&self) -> Vec<String> {
        let missing = self.missing();
        if missing.is_empty() {
            return vec!["[+]applications ok".into()];
        }
        missing
            .iter()
            .map(|m| format!("[!]applications: {}", m.message()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readyz_warns_of_each_missing_application() {
        let h = Health::default();
        assert_eq!(h.readyz_lines(), ["[+]applications ok"]);
        let enabled = plan::enabled(&["csi-driver-nfs".into(), "csi-driver-s3".into()]);
        h.set_missing(upstream::missing(&enabled, &upstream::Observed::default()));
        let lines = h.readyz_lines();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("[!]applications: kueue is enabled but not installed"));
        assert!(lines[1].starts_with("[!]applications: node-feature-discovery is enabled"));
    }
}
