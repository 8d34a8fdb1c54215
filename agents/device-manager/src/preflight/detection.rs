//! The detection block: a verdict and a count per manufacturer, with the host CLI's own count
//! beside it so that "nothing mounted here" is told apart from "nothing on this node". Pure.

use gpustack_api::{Manufacturer, devices::DevicesGroup};

use super::{
    host::HostError,
    report::{Depth, Detection, HostCrossCheck, State},
};
use crate::detector::DetectError;

/// What the preflight container must have mounted for a manufacturer's user-space libraries to
/// be reachable (the vendor runtime injects them for NVIDIA and Moore Threads).
pub fn vendor_mounts(m: Manufacturer) -> &'static [&'static str] {
    match m {
        Manufacturer::Amd => &["/opt/rocm"],
        Manufacturer::Ascend => &["/usr/local/Ascend", "/usr/local/dcmi"],
        Manufacturer::Cambricon => &["/usr/local/neuware"],
        Manufacturer::Hygon => &["/opt/hyhal", "/opt/dtk"],
        Manufacturer::Iluvatar => &["/usr/local/corex"],
        Manufacturer::Metax => &["/opt/mxdriver", "/opt/maca"],
        Manufacturer::Thead => &["/usr/local/PPU_SDK"],
        Manufacturer::Nvidia | Manufacturer::Mthreads => &[],
    }
}

/// The host CLI's answer: `Ok(count)` or why there is none.
pub type HostSeen = Result<u32, HostError>;

/// Counts the accelerators in a host CLI's output.
pub fn count_host_output(m: Manufacturer, stdout: &str) -> u32 {
    match m {
        // `GPU 0: NVIDIA A100 (UUID: GPU-…)`
        Manufacturer::Nvidia => stdout.lines().filter(|l| l.starts_with("GPU ")).count() as u32,
        // `GPU[0]		: Unique ID: 0x5c88007d760374f3`, once per card.
        Manufacturer::Amd => {
            let mut cards: Vec<&str> = stdout
                .lines()
                .filter(|l| l.contains("Unique ID"))
                .filter_map(|l| l.trim_start().strip_prefix("GPU[")?.split(']').next())
                .collect();
            cards.sort();
            cards.dedup();
            cards.len() as u32
        }
        // `Total Count                    : 8`
        _ => stdout
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == "Total Count").then(|| v.trim().parse().ok())?
            })
            .unwrap_or_else(|| stdout.lines().filter(|l| l.contains("NPU ID")).count() as u32),
    }
}

/// What went into one manufacturer's verdict.
pub struct Inputs<'a> {
    pub manufacturer: Manufacturer,
    /// The detect pass: its groups, or why it could not measure.
    pub detected: Result<&'a [DevicesGroup], &'a DetectError>,
    /// `vendor_mounts` that the preflight container lacks.
    pub missing_mounts: Vec<String>,
    /// The host CLI's command line and answer, for manufacturers that have one.
    pub host: Option<(String, HostSeen)>,
}

pub fn block(i: Inputs<'_>) -> Detection {
    let m = i.manufacturer;
    let groups = match i.detected {
        Ok(g) => g,
        Err(reason) => {
            return Detection {
                state: State::Unavailable,
                depth: Depth::Declared,
                accelerators: 0,
                detail: None,
                reason: Some(format!("detection could not measure: {reason}")),
                host: None,
            };
        }
    };
    let count: u32 = groups.iter().map(|g| g.accelerators.len() as u32).sum();
    let host_count = match &i.host {
        Some((_, Ok(n))) => Some(*n),
        _ => None,
    };
    let mut host = i.host.map(|(command, seen)| {
        let (accelerators, reason) = match seen {
            Ok(n) => (n, None),
            Err(why) => (0, Some(why.to_string())),
        };
        HostCrossCheck {
            command,
            accelerators,
            detail: None,
            reason,
            missing_mounts: Vec::new(),
        }
    });
    let mounts = i.missing_mounts.join(", ");
    let (state, detail, reason) = if let Some(unnamed) = groups.iter().find(|g| g.name.is_empty()) {
        (
            State::Unavailable,
            None,
            Some(format!(
                "group {:?} has no product name, so its resource cannot be named",
                unnamed.id
            )),
        )
    } else if host_count.is_some_and(|h| h > count) {
        let h = host_count.unwrap_or_default();
        (
            State::Unavailable,
            None,
            Some(if i.missing_mounts.is_empty() {
                format!("the host's CLI sees {h} {m} accelerator(s), detection here {count}")
            } else {
                format!(
                    "the host's CLI sees {h} {m} accelerator(s), detection here {count}: mount {mounts} into the preflight container"
                )
            }),
        )
    } else if count > 0 && !i.missing_mounts.is_empty() {
        (
            State::Unavailable,
            None,
            Some(format!(
                "{count} {m} accelerator(s) are in sysfs but the vendor's user-space libraries are not mounted here ({mounts}); a run without them finds no accelerator"
            )),
        )
    } else if count > 0 {
        (
            State::Ok,
            Some(format!("{count} {m} accelerator(s) detected")),
            None,
        )
    } else {
        (
            State::NotDeclared,
            Some(format!("no {m} accelerator on this node")),
            None,
        )
    };
    if state == State::Unavailable
        && let Some(h) = host.as_mut()
    {
        h.missing_mounts = i.missing_mounts.clone();
    }
    if let (Some(h), Some(n)) = (host.as_mut(), host_count) {
        h.detail = Some(format!("the host's CLI lists {n} {m} accelerator(s)"));
    }
    Detection {
        state,
        depth: Depth::Declared,
        accelerators: count,
        detail,
        reason,
        host,
    }
}

#[cfg(test)]
mod tests {
    use gpustack_api::devices::{Accelerator, DevicesGroup};

    use super::*;

    fn groups(n: usize, name: &str) -> Vec<DevicesGroup> {
        let mut g = DevicesGroup::new(Manufacturer::Amd, "radeon-rx-7800-xt", name, 16368);
        g.accelerators = (0..n)
            .map(|i| Accelerator {
                id: format!("GPU-{i}"),
                index: i as u32,
                ..Default::default()
            })
            .collect();
        vec![g]
    }

    fn inputs<'a>(
        detected: Result<&'a [DevicesGroup], &'a DetectError>,
        missing: &[&str],
        host: Option<HostSeen>,
    ) -> Inputs<'a> {
        Inputs {
            manufacturer: Manufacturer::Amd,
            detected,
            missing_mounts: missing.iter().map(|s| s.to_string()).collect(),
            host: host.map(|h| ("rocm-smi --showuniqueid".into(), h)),
        }
    }

    #[test]
    fn verdicts() {
        let two = groups(2, "AMD Radeon RX 7800 XT");
        let unnamed = groups(1, "");
        let none: Vec<DevicesGroup> = vec![];
        let panicked = DetectError::Panicked {
            manufacturer: "amd".into(),
            message: "panicked".into(),
        };
        type Case<'a> = (Inputs<'a>, State, u32, &'a [&'a str]);
        let cases: Vec<Case<'_>> = vec![
            (inputs(Ok(&two), &[], Some(Ok(2))), State::Ok, 2, &[]),
            (inputs(Ok(&none), &[], None), State::NotDeclared, 0, &[]),
            (
                inputs(
                    Ok(&none),
                    &["/opt/rocm"],
                    Some(Err(HostError::NotOnHost("rocm-smi".into()))),
                ),
                State::NotDeclared,
                0,
                &[],
            ),
            // The seed's case: cards in sysfs, /opt/rocm not mounted, the host's rocm-smi sees both.
            (
                inputs(Ok(&two), &["/opt/rocm"], Some(Ok(2))),
                State::Unavailable,
                2,
                &["/opt/rocm"],
            ),
            // The reference's reading of it: detection found none, the host two.
            (
                inputs(Ok(&none), &["/opt/rocm"], Some(Ok(2))),
                State::Unavailable,
                0,
                &["/opt/rocm"],
            ),
            (inputs(Ok(&unnamed), &[], None), State::Unavailable, 1, &[]),
            (
                inputs(Err(&panicked), &[], None),
                State::Unavailable,
                0,
                &[],
            ),
        ];
        for (i, state, count, missing) in cases {
            let d = block(i);
            assert_eq!((d.state, d.accelerators), (state, count), "{d:?}");
            assert_eq!(d.depth, Depth::Declared);
            let got: Vec<String> = d.host.map(|h| h.missing_mounts).unwrap_or_default();
            assert_eq!(got, missing);
            if state == State::Unavailable {
                assert!(d.reason.is_some());
            }
        }
    }

    #[test]
    fn host_cli_counts() {
        let rocm = "============ ROCm System Management Interface ============\n\
                    GPU[0]\t\t: Unique ID: 0x5c88007d760374f3\n\
                    GPU[1]\t\t: Unique ID: 0x3f0be7a6a1f2c4d9\n\
                    ==========================================================\n";
        assert_eq!(count_host_output(Manufacturer::Amd, rocm), 2);
        let smi = "GPU 0: NVIDIA A10G (UUID: GPU-1)\nGPU 1: NVIDIA A10G (UUID: GPU-2)\n  MIG 1g.5gb Device 0\n";
        assert_eq!(count_host_output(Manufacturer::Nvidia, smi), 2);
        let npu = "+------+\nTotal Count                    : 8\n";
        assert_eq!(count_host_output(Manufacturer::Ascend, npu), 8);
    }
}
