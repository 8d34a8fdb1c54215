//! Driver-read rows (depth `declared`) and what preflight knows per manufacturer about probing:
//! the default probe image, the vendor's reader of a slice's cap, and the tier's note. Pure.

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, DevicesGroup},
};

use super::report::{Check, Depth, Mode, State};

/// How a manufacturer's sliced rows can be proven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeFacts {
    /// Probe containers exist for this manufacturer.
    pub probes: bool,
    /// The default image, where there is one (`--probe-image` overrides; required where `None`).
    pub image: Option<&'static str>,
    /// The vendor's reader of a slice's cap, as a command line in the container.
    pub reader: Option<&'static str>,
    /// Whether the container needs the manufacturer's vendor runtime (its RuntimeClass).
    pub vendor_runtime: bool,
}

pub fn probe_facts(m: Manufacturer, group: &DevicesGroup) -> ProbeFacts {
    let none = ProbeFacts {
        probes: false,
        image: None,
        reader: None,
        vendor_runtime: false,
    };
    match m {
        Manufacturer::Amd => ProbeFacts {
            probes: true,
            image: Some("ubuntu:24.04"),
            reader: Some("/usr/local/vrocm/rocm-monitor"),
            vendor_runtime: false,
        },
        Manufacturer::Nvidia => ProbeFacts {
            probes: true,
            image: Some(if group.runtime_version.starts_with("13") {
                "nvidia/cuda:13.0.3-cudnn-devel-ubi9"
            } else {
                "nvidia/cuda:12.9.2-cudnn-devel-ubi8"
            }),
            reader: Some(
                "LIBCUDA_LOG_LEVEL=3 nvidia-smi --query-gpu=memory.total --format=csv,noheader",
            ),
            vendor_runtime: true,
        },
        Manufacturer::Ascend => ProbeFacts {
            probes: true,
            image: None,
            reader: Some("/opt/enpu/vcann-rt/tools/enpu-monitor"),
            vendor_runtime: true,
        },
        Manufacturer::Thead => ProbeFacts {
            probes: true,
            image: None,
            reader: Some("/usr/local/vppu/ppu-monitor"),
            vendor_runtime: false,
        },
        Manufacturer::Hygon => ProbeFacts {
            probes: true,
            image: None,
            reader: None,
            vendor_runtime: false,
        },
        Manufacturer::Cambricon
        | Manufacturer::Metax
        | Manufacturer::Iluvatar
        | Manufacturer::Mthreads => none,
    }
}

/// Why a manufacturer's group reaches only part of the way, for its `note`.
pub fn tier_note(m: Manufacturer) -> Option<String> {
    match m {
        Manufacturer::Iluvatar | Manufacturer::Mthreads => Some(format!(
            "injection only: no probe image or reader exists for {m}, so its sliced rows stay simulated"
        )),
        Manufacturer::Cambricon | Manufacturer::Metax => Some(format!(
            "driver and injection: no probe exists for {m}, so its sliced rows stay simulated"
        )),
        Manufacturer::Ascend => {
            Some("pass --probe-image for the CANN image matching the node".into())
        }
        Manufacturer::Hygon => Some("probe only: pass --probe-image (a DTK image)".into()),
        Manufacturer::Thead => Some("pass --probe-image (a PPU SDK image)".into()),
        Manufacturer::Amd | Manufacturer::Nvidia => None,
    }
}

/// Whether a card offers logical slices.
pub fn sliceable(a: &Accelerator) -> bool {
    a.status
        .logical_sliced
        .as_ref()
        .is_some_and(|s| s.count > 0)
}

/// The rows read from what the driver declared, per card.
pub fn driver_rows(m: Manufacturer, group: &DevicesGroup) -> Vec<Check> {
    group
        .accelerators
        .iter()
        .filter_map(|a| match m {
            Manufacturer::Amd | Manufacturer::Hygon => Some(cu_mask_topology(group, a)),
            Manufacturer::Nvidia | Manufacturer::Thead => Some(mig_partitioning(a)),
            _ => None,
        })
        .collect()
}

/// The sysfs directory through which the MetaX driver carves a card into sGPUs (the allocator
/// writes a slice's quota to its `create`).
pub fn sgpu_dir(a: &Accelerator) -> Option<String> {
    let bdf = a.topology.pci_bus_id.trim();
    (!bdf.is_empty()).then(|| format!("/sys/bus/pci/devices/{bdf}/sgpu"))
}

/// MetaX `sgpu-mode`: whether the driver offers sGPUs on a card, as its sysfs declares.
/// `sgpu_create`: whether `<sgpu_dir>/create` exists. A card that is not sliceable has nothing
/// to check.
pub fn sgpu_mode(a: &Accelerator, sgpu_create: bool) -> Check {
    let row = |state| Check::new(&a.id, "sgpu-mode", Mode::Sliced, state, Depth::Declared);
    match (sliceable(a), sgpu_dir(a)) {
        (false, _) => row(State::NotDeclared).detail("the card offers no logical slices"),
        (true, None) => row(State::Unavailable)
            .reason("the card has no PCI bus id, so its sGPU interface cannot be found"),
        (true, Some(dir)) if sgpu_create => row(State::Ok).detail(format!(
            "the driver offers sGPUs on this card: {dir}/create is where a slice's quota is written"
        )),
        (true, Some(dir)) => row(State::Unavailable).reason(format!(
            "{dir}/create is absent: the driver offers no sGPU on this card, so a slice could not be carved"
        )),
    }
}

fn cu_mask_topology(group: &DevicesGroup, a: &Accelerator) -> Check {
    let row = |state, depth| Check::new(&a.id, "cu-mask-topology", Mode::Sliced, state, depth);
    match group.cores {
        Some(cus) if cus > 0 => row(State::Ok, Depth::Declared).detail(format!(
            "the KFD topology lists {cus} compute units{}: a slice's CU mask can be placed",
            if group.compute_capability.is_empty() {
                String::new()
            } else {
                format!(" ({})", group.compute_capability)
            }
        )),
        _ => row(State::Unavailable, Depth::Declared).reason(
            "the KFD topology lists no compute units for this card, so no CU mask can be placed",
        ),
    }
}

fn mig_partitioning(a: &Accelerator) -> Check {
    let row = |state| {
        Check::new(
            &a.id,
            "mig-partitioning",
            Mode::Partitioned,
            state,
            Depth::Declared,
        )
    };
    match &a.status.physical_sliced {
        Some(p) if !p.profiles.is_empty() => row(State::Ok).detail(format!(
            "partition mode is on: {} profile(s) declared ({})",
            p.profiles.len(),
            p.profiles
                .iter()
                .map(|x| x.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => row(State::NotDeclared).detail("partition mode is off on this card"),
    }
}

#[cfg(test)]
mod tests {
    use gpustack_api::devices::{
        AcceleratorStatus, LogicalSliced, PhysicalSliced, PhysicalSlicedProfile,
    };

    use super::*;

    fn card(logical: Option<i32>, profiles: &[&str]) -> Accelerator {
        Accelerator {
            id: "GPU-1".into(),
            status: AcceleratorStatus {
                logical_sliced: logical.map(|count| LogicalSliced {
                    cores_percentage_overcommit: true,
                    count,
                }),
                physical_sliced: (!profiles.is_empty()).then(|| PhysicalSliced {
                    profiles: profiles
                        .iter()
                        .map(|n| PhysicalSlicedProfile {
                            name: (*n).into(),
                            ..Default::default()
                        })
                        .collect(),
                    count: 7,
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn driver_rows_per_manufacturer() {
        let mut amd = DevicesGroup::new(Manufacturer::Amd, "x", "X", 16368);
        amd.accelerators = vec![card(Some(128), &[])];
        amd.cores = Some(60);
        amd.compute_capability = "gfx1101".into();
        let [row] = driver_rows(Manufacturer::Amd, &amd).try_into().unwrap();
        assert_eq!(
            (row.capability.as_str(), row.state),
            ("cu-mask-topology", State::Ok)
        );
        assert!(row.detail.unwrap().contains("60 compute units (gfx1101)"));
        amd.cores = None;
        assert_eq!(
            driver_rows(Manufacturer::Amd, &amd)[0].state,
            State::Unavailable
        );

        let mut nv = DevicesGroup::new(Manufacturer::Nvidia, "a100", "A100", 40960);
        nv.accelerators = vec![card(None, &["1g.5gb", "7g.40gb"]), card(Some(128), &[])];
        let rows = driver_rows(Manufacturer::Nvidia, &nv);
        assert_eq!(
            rows.iter().map(|r| r.state).collect::<Vec<_>>(),
            [State::Ok, State::NotDeclared]
        );
        assert!(
            rows.iter()
                .all(|r| r.mode == Mode::Partitioned && r.depth == Depth::Declared)
        );

        assert!(driver_rows(Manufacturer::Iluvatar, &nv).is_empty());

        let mut mx = card(Some(16), &[]);
        mx.topology.pci_bus_id = "0000:0a:00.0".into();
        assert_eq!(
            sgpu_dir(&mx).as_deref(),
            Some("/sys/bus/pci/devices/0000:0a:00.0/sgpu")
        );
        let on = sgpu_mode(&mx, true);
        assert_eq!((on.state, on.depth), (State::Ok, Depth::Declared));
        assert_eq!(sgpu_mode(&mx, false).state, State::Unavailable);
        assert_eq!(sgpu_mode(&card(None, &[]), false).state, State::NotDeclared);
        assert_eq!(
            sgpu_mode(&card(Some(16), &[]), true).state,
            State::Unavailable
        );
        assert!(
            sliceable(&card(Some(128), &[]))
                && !sliceable(&card(Some(0), &[]))
                && !sliceable(&card(None, &[]))
        );
    }
}
