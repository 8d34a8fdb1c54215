//! The allocation ledger: `Devices.status` rebuilt from the Pods on the node and their
//! `device.gpustack.ai/accelerator.allocated` annotations (devices.md §2, status).
//!
//! Level-based and pure: [`rebuild`] starts every accelerator at "nobody holds it" and folds in
//! each live charge, so the result depends only on the Pods that exist now. Finished Pods stop
//! charging exclusive, shared and sliced holds (partitions, and MetaX/Cambricon slices whose
//! instances outlive the process, charge until the Pod is deleted).

use std::collections::BTreeMap;

use gpustack_api::{
    Manufacturer,
    devices::{
        AcceleratorAllocation, AllocationMode, DevicesSpec, DevicesStatus, DevicesStatusGroup,
        PhysicalSliced, Placement, ProfileAllocation, UNITS_PER_ACCELERATOR,
    },
};
use serde::{Deserialize, Serialize};

/// One container's grant, as the Pod annotation carries it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerAllocation {
    #[serde(default)]
    pub devices: DevicesStatus,
    #[serde(default, rename = "deviceIDs")]
    pub device_ids: Vec<String>,
}

/// The annotation's value: container name → grant.
pub type PodAllocations = BTreeMap<String, ContainerAllocation>;

/// Parses the annotation text.
pub fn parse_annotation(text: &str) -> Result<PodAllocations, serde_json::Error> {
    serde_json::from_str(text)
}

/// What the ledger needs to know about one Pod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodCharges {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Succeeded or Failed.
    pub finished: bool,
    pub allocations: PodAllocations,
}

/// Who holds an accelerator (for per-pod metrics labels and refusal messages).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Holder {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub mode: AllocationModeKey,
}

/// [`AllocationMode`] as an ordered key.
pub type AllocationModeKey = u32;

/// The rebuilt ledger.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ledger {
    pub status: DevicesStatus,
    /// Accelerator id → the containers charging it.
    pub holders: BTreeMap<String, Vec<Holder>>,
    /// Charges that were skipped because the card was already held in another mode.
    pub conflicts: Vec<String>,
    /// Accelerator id → the partition slots its live partitions occupy (memory-slice units).
    pub placements: BTreeMap<String, Vec<Placement>>,
}

impl Ledger {
    /// The status entry of accelerator `id` of `manufacturer`.
    pub fn accelerator(
        &self,
        manufacturer: Manufacturer,
        id: &str,
    ) -> Option<&AcceleratorAllocation> {
        self.status
            .groups
            .iter()
            .filter(|g| g.manufacturer == manufacturer)
            .flat_map(|g| &g.accelerators)
            .find(|a| a.id == id)
    }
}

/// Why a card of `manufacturer` reads unhealthy: the health check its detector makes.
pub fn unhealthy_reason(manufacturer: Manufacturer) -> &'static str {
    match manufacturer {
        Manufacturer::Nvidia => "NVML counts uncorrected ECC errors since the driver loaded",
        Manufacturer::Amd | Manufacturer::Hygon => {
            "the driver counts uncorrectable memory errors (ras/umc_err_count ue)"
        }
        Manufacturer::Ascend => "DCMI reports a health alarm, or no longer sees the device",
        Manufacturer::Cambricon => {
            "CNDev reports the card unhealthy, or counts uncorrected ECC errors"
        }
        Manufacturer::Iluvatar => "IXML reports a health error bit",
        Manufacturer::Metax => "MXSML counts uncorrectable ECC errors",
        Manufacturer::Mthreads => "MTML counts uncorrected ECC errors",
        Manufacturer::Thead => "HGML counts uncorrected DRAM ECC errors",
    }
}

/// Whether a finished Pod still charges an accelerator held in `mode` by `manufacturer`.
fn charges_after_finish(manufacturer: Manufacturer, mode: AllocationMode) -> bool {
    mode == AllocationMode::Partitioned
        || (mode == AllocationMode::Sliced
            && matches!(manufacturer, Manufacturer::Metax | Manufacturer::Cambricon))
}

/// Rebuilds `Devices.status` for `spec` from `pods`; `release_finished` is
/// `GPUSTACK_LEDGER_RELEASE_TERMINATED_PODS` (default true).
pub fn rebuild(spec: &DevicesSpec, pods: &[PodCharges], release_finished: bool) -> Ledger {
    let mut ledger = Ledger::default();
    for group in &spec.groups {
        let mut accelerators: Vec<AcceleratorAllocation> = group
            .accelerators
            .iter()
            .map(|a| {
                let mut entry = AcceleratorAllocation::fresh(&a.id, a.index);
                if a.status.unhealthy {
                    entry.unhealthy_reason = unhealthy_reason(group.manufacturer).to_owned();
                }
                if let Some(p) = &a.status.physical_sliced {
                    entry.remaining_profiles = p
                        .profiles
                        .iter()
                        .map(|pr| ProfileAllocation {
                            name: pr.name.clone(),
                            count: pr.count,
                        })
                        .collect();
                }
                entry
            })
            .collect();
        accelerators.sort_by_key(|a| a.index);
        ledger.status.groups.push(DevicesStatusGroup {
            id: group.id.clone(),
            manufacturer: group.manufacturer,
            accelerators,
        });
    }
    let mut pods: Vec<&PodCharges> = pods.iter().collect();
    pods.sort_by(|a, b| (&a.namespace, &a.name, &a.uid).cmp(&(&b.namespace, &b.name, &b.uid)));
    for pod in pods {
        for (container, grant) in &pod.allocations {
            for g in &grant.devices.groups {
                for charge in &g.accelerators {
                    if pod.finished
                        && release_finished
                        && !charges_after_finish(g.manufacturer, charge.mode)
                    {
                        continue;
                    }
                    let Some(entry) = ledger
                        .status
                        .groups
                        .iter_mut()
                        .filter(|sg| sg.manufacturer == g.manufacturer)
                        .flat_map(|sg| sg.accelerators.iter_mut())
                        .find(|a| a.id == charge.id)
                    else {
                        continue;
                    };
                    if entry.mode != AllocationMode::None && entry.mode != charge.mode {
                        ledger.conflicts.push(format!(
                            "{}/{} container {container}: accelerator {} is held {} but charged {}",
                            pod.namespace,
                            pod.name,
                            charge.id,
                            entry.mode.as_str(),
                            charge.mode.as_str()
                        ));
                        continue;
                    }
                    fold(entry, charge);
                    if charge.mode == AllocationMode::Partitioned {
                        ledger
                            .placements
                            .entry(charge.id.clone())
                            .or_default()
                            .extend(charge.allocated_physical_placements.iter().copied());
                    }
                    ledger
                        .holders
                        .entry(charge.id.clone())
                        .or_default()
                        .push(Holder {
                            namespace: pod.namespace.clone(),
                            pod: pod.name.clone(),
                            container: container.clone(),
                            mode: charge.mode as u32,
                        });
                }
            }
        }
    }
    // Partition profiles left: as many more of each as still fit around the occupied slots.
    for group in &spec.groups {
        for card in &group.accelerators {
            let (Some(physical), Some(occupied)) = (
                &card.status.physical_sliced,
                ledger.placements.get(&card.id),
            ) else {
                continue;
            };
            let fitted = remaining_profiles(physical, occupied);
            if let Some(entry) = ledger
                .status
                .groups
                .iter_mut()
                .filter(|g| g.manufacturer == group.manufacturer)
                .flat_map(|g| g.accelerators.iter_mut())
                .find(|a| a.id == card.id)
            {
                // Profiles without listed slots keep the count-down of `fold`.
                for (fit, profile) in fitted.into_iter().zip(&physical.profiles) {
                    if profile.placements.is_empty() {
                        continue;
                    }
                    if let Some(r) = entry
                        .remaining_profiles
                        .iter_mut()
                        .find(|r| r.name == fit.name)
                    {
                        r.count = fit.count;
                    }
                }
            }
        }
    }
    ledger
}

/// Whether two slot runs share a slot.
pub fn overlaps(a: &Placement, b: &Placement) -> bool {
    a.start < b.start + b.length && b.start < a.start + a.length
}

/// The first legal slot of `slots` that overlaps none of `occupied`.
pub fn free_slot(slots: &[Placement], occupied: &[Placement]) -> Option<Placement> {
    slots
        .iter()
        .find(|s| occupied.iter().all(|o| !overlaps(s, o)))
        .copied()
}

/// For each profile, how many more instances fit (placed one after another in slot order)
/// around `occupied`, at most its count; a profile without listed slots keeps its count.
pub fn remaining_profiles(
    physical: &PhysicalSliced,
    occupied: &[Placement],
) -> Vec<ProfileAllocation> {
    physical
        .profiles
        .iter()
        .map(|p| {
            let count = if p.placements.is_empty() {
                p.count
            } else {
                let mut taken = occupied.to_vec();
                let mut n = 0;
                while let Some(slot) = free_slot(&p.placements, &taken) {
                    taken.push(slot);
                    n += 1;
                }
                n.min(p.count)
            };
            ProfileAllocation {
                name: p.name.clone(),
                count,
            }
        })
        .collect()
}

/// Adds one charge to an accelerator's entry.
fn fold(entry: &mut AcceleratorAllocation, charge: &AcceleratorAllocation) {
    entry.mode = charge.mode;
    entry.allocated = entry
        .allocated
        .saturating_add(charge.allocated)
        .min(UNITS_PER_ACCELERATOR);
    entry.remaining = UNITS_PER_ACCELERATOR - entry.allocated;
    match charge.mode {
        AllocationMode::Sliced => {
            *entry.allocated_slices.get_or_insert(0) += 1;
        }
        AllocationMode::Partitioned if !charge.allocated_physical_profile.is_empty() => {
            let name = &charge.allocated_physical_profile;
            match entry
                .allocated_profiles
                .iter_mut()
                .find(|p| &p.name == name)
            {
                Some(p) => p.count += 1,
                None => entry.allocated_profiles.push(ProfileAllocation {
                    name: name.clone(),
                    count: 1,
                }),
            }
            if let Some(p) = entry
                .remaining_profiles
                .iter_mut()
                .find(|p| &p.name == name)
            {
                p.count = (p.count - 1).max(0);
            }
        }
        _ => {}
    }
}

/// Ledgers for the allocation tests: one Pod per charge.
#[cfg(test)]
pub(crate) mod fixtures {
    use gpustack_api::devices::{
        AcceleratorAllocation, DevicesGroup, DevicesSpec, DevicesStatus, DevicesStatusGroup,
    };

    use super::{ContainerAllocation, Ledger, PodAllocations, PodCharges, rebuild};

    /// The ledger of `groups` with Pod `p<i>` (container `main`) holding `charges[i]` on the
    /// first group.
    pub fn holding(groups: Vec<DevicesGroup>, charges: Vec<AcceleratorAllocation>) -> Ledger {
        let (id, manufacturer) = (groups[0].id.clone(), groups[0].manufacturer);
        let pods: Vec<PodCharges> = charges
            .into_iter()
            .enumerate()
            .map(|(i, charge)| {
                let mut allocations = PodAllocations::new();
                allocations.insert(
                    "main".into(),
                    ContainerAllocation {
                        devices: DevicesStatus {
                            groups: vec![DevicesStatusGroup {
                                id: id.clone(),
                                manufacturer,
                                accelerators: vec![charge],
                            }],
                        },
                        device_ids: vec![],
                    },
                );
                PodCharges {
                    namespace: "ns".into(),
                    name: format!("p{i}"),
                    uid: format!("u{i}"),
                    finished: false,
                    allocations,
                }
            })
            .collect();
        rebuild(&DevicesSpec { groups }, &pods, true)
    }
}

#[cfg(test)]
mod tests {
    use gpustack_api::devices::{Accelerator, DevicesGroup, PhysicalSliced, PhysicalSlicedProfile};

    use super::*;

    const D: u64 = UNITS_PER_ACCELERATOR;

    fn spec() -> DevicesSpec {
        let card = |id: &str, index: u32| Accelerator {
            id: id.into(),
            index,
            ..Accelerator::default()
        };
        let mut mig = card("GPU-m", 2);
        mig.status.physical_sliced = Some(PhysicalSliced {
            profiles: vec![PhysicalSlicedProfile {
                name: "1g.10gb".into(),
                count: 7,
                ..PhysicalSlicedProfile::default()
            }],
            count: 7,
        });
        DevicesSpec {
            groups: vec![DevicesGroup {
                accelerators: vec![card("GPU-b", 1), card("GPU-a", 0), mig],
                ..DevicesGroup::new(Manufacturer::Nvidia, "h100", "H100", 81559)
            }],
        }
    }

    fn charge(
        id: &str,
        mode: AllocationMode,
        allocated: u64,
        profile: &str,
    ) -> AcceleratorAllocation {
        AcceleratorAllocation {
            id: id.into(),
            mode,
            allocated,
            allocated_physical_profile: profile.into(),
            ..AcceleratorAllocation::default()
        }
    }

    fn pod(name: &str, finished: bool, charges: &[(&str, AcceleratorAllocation)]) -> PodCharges {
        let mut allocations = PodAllocations::new();
        for (ctr, c) in charges {
            allocations
                .entry((*ctr).to_owned())
                .or_default()
                .devices
                .groups
                .push(DevicesStatusGroup {
                    id: "h100".into(),
                    manufacturer: Manufacturer::Nvidia,
                    accelerators: vec![c.clone()],
                });
        }
        PodCharges {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            finished,
            allocations,
        }
    }

    fn entry<'a>(l: &'a Ledger, id: &str) -> &'a AcceleratorAllocation {
        l.accelerator(Manufacturer::Nvidia, id).unwrap()
    }

    #[test]
    fn an_unhealthy_card_keeps_its_reason_in_the_status() {
        let mut sick = spec();
        sick.groups[0].accelerators[0].status.unhealthy = true;
        let l = rebuild(&sick, &[], true);
        assert_eq!(
            entry(&l, "GPU-b").unhealthy_reason,
            "NVML counts uncorrected ECC errors since the driver loaded"
        );
        assert_eq!(entry(&l, "GPU-a").unhealthy_reason, "");
    }

    #[test]
    fn fresh_cards_are_whole_and_in_index_order() {
        let l = rebuild(&spec(), &[], true);
        let ids: Vec<_> = l.status.groups[0]
            .accelerators
            .iter()
            .map(|a| a.id.as_str())
            .collect();
        assert_eq!(ids, ["GPU-a", "GPU-b", "GPU-m"]);
        assert_eq!(entry(&l, "GPU-a").remaining, D);
        assert_eq!(entry(&l, "GPU-a").mode, AllocationMode::None);
        assert_eq!(entry(&l, "GPU-m").remaining_profiles[0].count, 7);
    }

    #[test]
    fn table() {
        use AllocationMode::{Exclusive, Partitioned, Shared, Sliced};
        struct Case {
            name: &'static str,
            pods: Vec<PodCharges>,
            id: &'static str,
            mode: AllocationMode,
            allocated: u64,
            slices: Option<u32>,
            conflicts: usize,
        }
        let cases = vec![
            Case {
                name: "exclusive takes the card",
                pods: vec![pod(
                    "a",
                    false,
                    &[("main", charge("GPU-a", Exclusive, D, ""))],
                )],
                id: "GPU-a",
                mode: Exclusive,
                allocated: D,
                slices: None,
                conflicts: 0,
            },
            Case {
                name: "two shared holders add up",
                pods: vec![
                    pod("a", false, &[("main", charge("GPU-a", Shared, D / 10, ""))]),
                    pod("b", false, &[("main", charge("GPU-a", Shared, D / 10, ""))]),
                ],
                id: "GPU-a",
                mode: Shared,
                allocated: D / 5,
                slices: None,
                conflicts: 0,
            },
            Case {
                name: "slices count and add up",
                pods: vec![pod(
                    "a",
                    false,
                    &[
                        ("one", charge("GPU-b", Sliced, 640_000, "")),
                        ("two", charge("GPU-b", Sliced, 320_000, "")),
                    ],
                )],
                id: "GPU-b",
                mode: Sliced,
                allocated: 960_000,
                slices: Some(2),
                conflicts: 0,
            },
            Case {
                name: "modes must agree: the later charge is skipped",
                pods: vec![
                    pod("a", false, &[("main", charge("GPU-a", Exclusive, D, ""))]),
                    pod("b", false, &[("main", charge("GPU-a", Shared, D / 10, ""))]),
                ],
                id: "GPU-a",
                mode: Exclusive,
                allocated: D,
                slices: None,
                conflicts: 1,
            },
            Case {
                name: "a finished pod releases its slice",
                pods: vec![pod(
                    "a",
                    true,
                    &[("main", charge("GPU-b", Sliced, 640_000, ""))],
                )],
                id: "GPU-b",
                mode: AllocationMode::None,
                allocated: 0,
                slices: None,
                conflicts: 0,
            },
            Case {
                name: "a finished pod keeps its partition",
                pods: vec![pod(
                    "a",
                    true,
                    &[("main", charge("GPU-m", Partitioned, 228_571, "1g.10gb"))],
                )],
                id: "GPU-m",
                mode: Partitioned,
                allocated: 228_571,
                slices: None,
                conflicts: 0,
            },
            Case {
                name: "over-charging floors remaining at zero",
                pods: vec![
                    pod("a", false, &[("main", charge("GPU-b", Sliced, D, ""))]),
                    pod("b", false, &[("main", charge("GPU-b", Sliced, D, ""))]),
                ],
                id: "GPU-b",
                mode: Sliced,
                allocated: D,
                slices: Some(2),
                conflicts: 0,
            },
            Case {
                name: "a charge on an unknown card is ignored",
                pods: vec![pod(
                    "a",
                    false,
                    &[("main", charge("GPU-gone", Exclusive, D, ""))],
                )],
                id: "GPU-a",
                mode: AllocationMode::None,
                allocated: 0,
                slices: None,
                conflicts: 0,
            },
        ];
        for c in cases {
            let l = rebuild(&spec(), &c.pods, true);
            let e = entry(&l, c.id);
            assert_eq!(e.mode, c.mode, "{}", c.name);
            assert_eq!(e.allocated, c.allocated, "{}", c.name);
            assert_eq!(e.remaining, D - c.allocated, "{}", c.name);
            assert_eq!(e.allocated_slices, c.slices, "{}", c.name);
            assert_eq!(
                l.conflicts.len(),
                c.conflicts,
                "{}: {:?}",
                c.name,
                l.conflicts
            );
        }
    }

    #[test]
    fn partitions_move_profiles_and_finished_release_can_be_off() {
        let l = rebuild(
            &spec(),
            &[pod(
                "a",
                false,
                &[(
                    "main",
                    charge("GPU-m", AllocationMode::Partitioned, 1, "1g.10gb"),
                )],
            )],
            true,
        );
        let m = entry(&l, "GPU-m");
        assert_eq!(
            m.allocated_profiles,
            vec![ProfileAllocation {
                name: "1g.10gb".into(),
                count: 1
            }]
        );
        assert_eq!(m.remaining_profiles[0].count, 6);

        let kept = rebuild(
            &spec(),
            &[pod(
                "a",
                true,
                &[("main", charge("GPU-a", AllocationMode::Exclusive, D, ""))],
            )],
            false,
        );
        assert_eq!(entry(&kept, "GPU-a").allocated, D);
        assert_eq!(kept.holders["GPU-a"][0].pod, "a");
    }

    #[test]
    fn annotation_round_trips_in_the_reference_shape() {
        let text = r#"{"main":{"devices":{"groups":[{"id":"h100","manufacturer":"nvidia","accelerators":[{"id":"GPU-a","index":0,"mode":3,"allocated":640000,"remaining":0}]}]},"deviceIDs":["h100:GPU-a:0003"]}}"#;
        let parsed = parse_annotation(text).unwrap();
        let main = &parsed["main"];
        assert_eq!(main.device_ids, ["h100:GPU-a:0003"]);
        assert_eq!(
            main.devices.groups[0].accelerators[0].mode,
            AllocationMode::Sliced
        );
        let back = serde_json::to_value(&parsed).unwrap();
        assert_eq!(back["main"]["deviceIDs"][0], "h100:GPU-a:0003");
        assert_eq!(
            back["main"]["devices"]["groups"][0]["accelerators"][0]["mode"],
            3
        );
    }
}
