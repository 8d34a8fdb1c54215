//! What `device-manager preflight` prints (the reference's §7 shape) and how its exit status is
//! derived from it: non-zero iff a detection or a check is `unavailable`.

use gpustack_api::{Manufacturer, time::Timestamp};
use serde::{Deserialize, Serialize};

/// Whether a row's allocation mode would be granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// An allocation in this mode would be granted.
    Ok,
    /// Nothing to check: the node does not offer what the row is about.
    NotDeclared,
    /// An allocation in this mode would be refused (or could not be set up).
    Unavailable,
}

/// How far a row was proven, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Depth {
    /// The driver answered.
    Declared,
    /// The allocator built the injection; nothing ran to confirm it took.
    Simulated,
    /// A container ran and something was read back.
    Measured,
}

/// The allocation mode a row is about (`unnamed` for preflight's own rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Whole cards, one container each.
    Exclusive,
    /// Whole cards, time-shared by several containers.
    Shared,
    /// Logical slices with cores and memory limits.
    Sliced,
    /// Hardware partitions (NVIDIA MIG).
    Partitioned,
    /// A sidecar that sees the cards without holding them.
    Visibility,
    /// Preflight's own rows, about no allocation mode.
    Unnamed,
}

/// The whole output document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreflightReport {
    /// One group per manufacturer asked for, sorted.
    pub accelerators: Vec<PreflightGroup>,
    /// RDMA interfaces and their links.
    pub network: NetworkSection,
    /// The kubelet's topology manager policy.
    pub topology: TopologySection,
}

/// One manufacturer's detection and per-accelerator checks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreflightGroup {
    /// The manufacturer checked.
    pub manufacturer: Manufacturer,
    /// When the group was checked (local time).
    pub timestamp: Timestamp,
    /// Whether and how many accelerators were found.
    pub detection: Detection,
    /// One row per accelerator and capability; empty when nothing was found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
    /// Why the group reaches only part of the way, when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A verdict and a count: deliberately not a second ledger (that is `detect`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    /// Whether detection found accelerators.
    pub state: State,
    /// How far detection was proven.
    pub depth: Depth,
    /// How many accelerators the vendor library reported.
    pub accelerators: u32,
    /// What was found, for the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Why the state is not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The host CLI's view, when the library found nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostCrossCheck>,
}

/// What the vendor's own CLI on the host sees, to tell "nothing mounted" from "nothing there".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostCrossCheck {
    /// The vendor CLI run on the host (`nvidia-smi -L`).
    pub command: String,
    /// How many accelerators it listed.
    pub accelerators: u32,
    /// What it printed, for the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Why it could not be run or read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Host paths the library needs that are not mounted into the agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_mounts: Vec<String>,
}

/// One capability on one accelerator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The accelerator's id (UUID or index).
    pub accelerator: String,
    /// What was checked (`exclusive`, `sliced-memory`, …).
    pub capability: String,
    /// The allocation mode the capability belongs to.
    pub mode: Mode,
    /// Whether the mode would be granted.
    pub state: State,
    /// How far the verdict was proven.
    pub depth: Depth,
    /// What was found, for the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Why the state is not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The probe's command line, when one was run or printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// What the probe read back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

impl Check {
    pub(crate) fn new(
        accelerator: impl Into<String>,
        capability: &str,
        mode: Mode,
        state: State,
        depth: Depth,
    ) -> Self {
        Self {
            accelerator: accelerator.into(),
            capability: capability.to_owned(),
            mode,
            state,
            depth,
            detail: None,
            reason: None,
            command: None,
            evidence: None,
        }
    }

    pub(crate) fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub(crate) fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    pub(crate) fn command(mut self, command: impl Into<String>) -> Self {
        self.command = Some(command.into());
        self
    }

    pub(crate) fn evidence(mut self, evidence: impl Into<String>) -> Self {
        self.evidence = Some(evidence.into());
        self
    }
}

/// RDMA interfaces. Never fails the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetworkSection {
    /// When the interfaces were read (local time).
    pub timestamp: Timestamp,
    /// One row per port.
    #[serde(default)]
    pub checks: Vec<NetworkCheck>,
    /// Why there are no rows, when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One port of one RDMA interface and whether its link is up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkCheck {
    /// The network interface (`ens1f0`), or `<interface>/<VF bus id>` for a virtual function.
    pub name: String,
    /// The RDMA device behind it (`mlx5_0`).
    pub rdma_device: String,
    /// The port number, from 1.
    pub port: u32,
    /// `ok` when the link is active.
    pub state: State,
    /// Always declared: read from sysfs.
    pub depth: Depth,
    /// The port's state and rate, for the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Why the state is not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The kubelet's topology manager policy, as its configuration declares it. Never fails the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopologySection {
    /// When the configuration was read (local time).
    pub timestamp: Timestamp,
    /// The policy (`none`, `single-numa-node`, …), or `unknown`.
    pub policy: String,
    /// Always declared: read from configuration.
    pub depth: Depth,
    /// Where the policy came from, or why it is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl PreflightReport {
    /// One line per cause of a non-zero exit: every `unavailable` detection and check.
    pub fn failures(&self) -> Vec<String> {
        let mut causes = Vec::new();
        for g in &self.accelerators {
            if g.detection.state == State::Unavailable {
                causes.push(format!(
                    "{}: detection: {}",
                    g.manufacturer,
                    g.detection
                        .reason
                        .as_deref()
                        .or(g.detection.detail.as_deref())
                        .unwrap_or("unavailable")
                ));
            }
            for c in g.checks.iter().filter(|c| c.state == State::Unavailable) {
                causes.push(format!(
                    "{}: {} on {}: {}",
                    g.manufacturer,
                    c.capability,
                    c.accelerator,
                    c.reason
                        .as_deref()
                        .or(c.detail.as_deref())
                        .unwrap_or("unavailable")
                ));
            }
        }
        causes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(detection: State, checks: Vec<Check>) -> PreflightGroup {
        PreflightGroup {
            manufacturer: Manufacturer::Amd,
            timestamp: Timestamp::now_local(),
            detection: Detection {
                state: detection,
                depth: Depth::Declared,
                accelerators: 1,
                detail: None,
                reason: Some("lock busy".into()),
                host: None,
            },
            checks,
            note: None,
        }
    }

    fn report(groups: Vec<PreflightGroup>) -> PreflightReport {
        let timestamp = Timestamp::now_local();
        PreflightReport {
            accelerators: groups,
            network: NetworkSection {
                timestamp,
                checks: vec![],
                note: None,
            },
            topology: TopologySection {
                timestamp,
                policy: "unknown".into(),
                depth: Depth::Declared,
                note: None,
            },
        }
    }

    #[test]
    fn only_unavailable_rows_fail_the_run() {
        let ok = Check::new(
            "GPU-1",
            "co-tenancy",
            Mode::Sliced,
            State::Ok,
            Depth::Measured,
        );
        let nd = Check::new(
            "GPU-1",
            "mig-partitioning",
            Mode::Partitioned,
            State::NotDeclared,
            Depth::Declared,
        );
        let bad = Check::new(
            "GPU-1",
            "sliced-runtime-loaded",
            Mode::Sliced,
            State::Unavailable,
            Depth::Measured,
        )
        .reason("not mapped");
        let cases: [(State, Vec<Check>, Vec<&str>); 4] = [
            (State::Ok, vec![ok.clone(), nd.clone()], vec![]),
            (State::NotDeclared, vec![], vec![]),
            (
                State::Unavailable,
                vec![],
                vec!["amd: detection: lock busy"],
            ),
            (
                State::Ok,
                vec![ok, bad],
                vec!["amd: sliced-runtime-loaded on GPU-1: not mapped"],
            ),
        ];
        for (detection, checks, expected) in cases {
            assert_eq!(report(vec![group(detection, checks)]).failures(), expected);
        }
    }

    #[test]
    fn words_are_the_references() {
        let c = Check::new(
            "GPU-1",
            "x",
            Mode::Unnamed,
            State::NotDeclared,
            Depth::Simulated,
        );
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["state"], "not-declared");
        assert_eq!(v["depth"], "simulated");
        assert_eq!(v["mode"], "unnamed");
        assert!(v.get("evidence").is_none());
        assert!(Depth::Declared < Depth::Simulated && Depth::Simulated < Depth::Measured);
    }
}
