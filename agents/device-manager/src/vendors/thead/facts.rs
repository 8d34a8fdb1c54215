//! Pure derivations from what HGML reports: versions, the PCI bus id, health, and the
//! physical-slicing (MIG) inventory of a card in MIG mode. Each follows the reference operator's
//! T-Head detector (gpustack/gpustack-operator, Go package `thead`) unless its comment says
//! otherwise.

use gpustack_api::devices::{PhysicalSliced, PhysicalSlicedProfile, Placement};

use super::hgml::{ProfileInfo, SlotPlacement};
use crate::pci;

/// `hgmlSystemGetHggcDriverVersion`'s `1000 * major + 10 * minor` as `major.minor` (the
/// operator's `stringifyRuntimeVersion`; HGGC 13.0 answers 13000). Zero or negative: unknown.
pub fn runtime_version(encoded: i32) -> Option<String> {
    (encoded > 0).then(|| format!("{}.{}", encoded / 1000, (encoded % 1000) / 10))
}

/// `hgmlDeviceGetHggcComputeCapability` as `major.minor`; a zero major is no answer (the
/// operator's `stringifyComputeCapability`).
pub fn compute_capability(major: i32, minor: i32) -> Option<String> {
    (major > 0).then(|| format!("{major}.{minor}"))
}

/// The sysfs form of a card's bus id. The numeric `domain:bus:device` comes first, as the
/// operator builds it (`%04x:%02x:%02x.0`): those three words sit at the same offsets in every
/// PCI-info layout, so they cannot be misread. When the library left them zero, the strings
/// are tried (`busId`, then `busIdLegacy`, which pyhgml reads). `None` when nothing looks like a
/// bus id, so that a garbled answer never becomes a topology.
pub fn bus_id(
    domain: u32,
    bus: u32,
    device: u32,
    bus_id: &str,
    bus_id_legacy: &str,
) -> Option<String> {
    let numeric = (bus != 0 || device != 0)
        .then(|| format!("{domain:04x}:{bus:02x}:{device:02x}.0"))
        .filter(|b| pci::is_bus_id(b));
    numeric.or_else(|| {
        [bus_id, bus_id_legacy]
            .into_iter()
            .map(pci::normalize_bus_id)
            .find(|b| pci::is_bus_id(b))
    })
}

/// Uncorrected volatile DRAM ECC errors make a card unhealthy; a refused query holds nothing
/// against it (the operator's `memEccDramUE > 0`).
pub fn unhealthy(uncorrected_dram_errors: Option<u64>) -> bool {
    uncorrected_dram_errors.is_some_and(|n| n > 0)
}

/// `HGML_DEVICE_MIG_ENABLE`.
pub const MIG_ENABLE: u32 = 1;

/// A driver profile name as the published one: NVML-style libraries may prefix `MIG `, which
/// the Go bindings strip (and say is unconfirmed for HGML); the rest is kept as the driver
/// spells it, lower-cased, so that `1g.24gb` is what resource keys carry.
pub fn profile_name(raw: &str) -> String {
    let raw = raw.trim();
    raw.strip_prefix("MIG ")
        .unwrap_or(raw)
        .trim()
        .to_ascii_lowercase()
}

/// Whether `name` can be the last segment of a resource name (`[a-z0-9.-_]`, starting and
/// ending alphanumeric), which is what a profile is requested by.
fn is_publishable(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A card's physical-slice profiles from its probed profiles and their empty-card placements,
/// with one reason per profile refused (for the caller to log). As the operator does:
/// - media-engine and graphics variants (a `+` in the name) are not offered;
/// - a nameless profile (the v1 record) or one whose name cannot be a resource-name segment is
///   unrequestable, so it is refused;
/// - a profile placed nowhere has no known memory-slice span, so it is refused; the span is the
///   first placement's length, the driver's own answer;
/// - two profiles that publish one name are collapsed when identical and both withheld when not.
pub fn derive_profiles(
    probed: &[(ProfileInfo, Vec<SlotPlacement>)],
) -> (Vec<PhysicalSlicedProfile>, Vec<String>) {
    let mut profiles: Vec<PhysicalSlicedProfile> = Vec::new();
    let mut withheld: Vec<String> = Vec::new();
    let mut rejected = Vec::new();
    for (info, slots) in probed {
        if info.name.contains('+') {
            continue;
        }
        let name = profile_name(&info.name);
        if !is_publishable(&name) {
            rejected.push(format!(
                "profile {} named {:?} yields no valid resource name",
                info.id, info.name
            ));
            continue;
        }
        let Some(span) = slots.first().map(|s| s.size).filter(|&s| s > 0) else {
            rejected.push(format!(
                "profile {} named {:?} has no legal placement, so its memory-slice span is unknown",
                info.id, info.name
            ));
            continue;
        };
        let profile = PhysicalSlicedProfile {
            name: name.clone(),
            memory_mib: info.memory_size_mb,
            compute_slices: info.slice_count,
            memory_slices: span,
            count: i32::try_from(info.instance_count).unwrap_or(i32::MAX),
            placements: slots
                .iter()
                .map(|s| Placement {
                    start: s.start,
                    length: s.size,
                })
                .collect(),
        };
        if withheld.contains(&name) {
            continue;
        }
        match profiles.iter().position(|p| p.name == name) {
            Some(i) if profiles[i] == profile => {}
            Some(i) => {
                rejected.push(format!(
                    "profile {} named {:?} publishes as {name:?}, which another profile exposes differently; both are withheld",
                    info.id, info.name
                ));
                profiles.remove(i);
                withheld.push(name);
            }
            None => profiles.push(profile),
        }
    }
    (profiles, rejected)
}

/// The physical-slicing capability of a card offering `profiles`: none at all when it offers
/// nothing (advertising an empty capability would publish a family with nothing behind it);
/// otherwise `count` is the largest profile count, which sizes the partition token pool.
pub fn physical_sliced(profiles: Vec<PhysicalSlicedProfile>) -> Option<PhysicalSliced> {
    let count = profiles.iter().map(|p| p.count).max()?;
    Some(PhysicalSliced { profiles, count })
}

/// Withholds, from every card of one group, each profile name the cards disagree on (the
/// group aggregate merges profiles by name and keeps the first card's memory, which would then
/// describe neither card); each card's ceiling is recomputed from what survives. Returns the
/// withheld names.
pub fn reject_divergent(cards: &mut [Option<PhysicalSliced>]) -> Vec<String> {
    let mut divergent: Vec<String> = Vec::new();
    let mut first: Vec<&PhysicalSlicedProfile> = Vec::new();
    for p in cards.iter().flatten().flat_map(|s| &s.profiles) {
        match first.iter().find(|f| f.name == p.name) {
            Some(f) if *f != p && !divergent.contains(&p.name) => divergent.push(p.name.clone()),
            Some(_) => {}
            None => first.push(p),
        }
    }
    if divergent.is_empty() {
        return divergent;
    }
    for card in cards.iter_mut() {
        if let Some(sliced) = card.take() {
            let kept = sliced
                .profiles
                .into_iter()
                .filter(|p| !divergent.contains(&p.name))
                .collect();
            *card = physical_sliced(kept);
        }
    }
    divergent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(runtime_version(13000).as_deref(), Some("13.0"));
        assert_eq!(runtime_version(12080).as_deref(), Some("12.8"));
        assert_eq!(runtime_version(0), None);
        assert_eq!(runtime_version(-1), None);
        assert_eq!(compute_capability(8, 0).as_deref(), Some("8.0"));
        assert_eq!(compute_capability(0, 0), None);
    }

    #[test]
    fn bus_ids_prefer_the_numbers() {
        assert_eq!(
            bus_id(0, 0x9a, 0, "", "").as_deref(),
            Some("0000:9a:00.0"),
            "the Go operator's %04x:%02x:%02x.0"
        );
        // Numbers left zero: the v3 long form, then the legacy field.
        assert_eq!(
            bus_id(0, 0, 0, "00000000:1B:00.0", "").as_deref(),
            Some("0000:1b:00.0")
        );
        assert_eq!(
            bus_id(0, 0, 0, "", "0000:2C:00.0").as_deref(),
            Some("0000:2c:00.0")
        );
        assert_eq!(bus_id(0, 0, 0, "garbage", "").as_deref(), None);
        assert_eq!(bus_id(0x1_0000, 1, 0, "", "").as_deref(), None);
    }

    #[test]
    fn health() {
        assert!(!unhealthy(None));
        assert!(!unhealthy(Some(0)));
        assert!(unhealthy(Some(2)));
    }

    #[test]
    fn profile_names() {
        assert_eq!(profile_name("MIG 1g.24gb"), "1g.24gb");
        assert_eq!(profile_name(" 2g.48gb "), "2g.48gb");
        assert_eq!(profile_name("4G.48GB"), "4g.48gb");
        assert!(is_publishable("1g.24gb"));
        assert!(!is_publishable(""));
        assert!(!is_publishable("1g 24gb"));
        assert!(!is_publishable(".1g"));
    }

    fn info(id: u32, name: &str, slices: u32, count: u32, mib: u64) -> ProfileInfo {
        ProfileInfo {
            id,
            slice_count: slices,
            instance_count: count,
            memory_size_mb: mib,
            name: name.into(),
        }
    }

    fn slots(size: u32, starts: &[u32]) -> Vec<SlotPlacement> {
        starts
            .iter()
            .map(|&start| SlotPlacement { start, size })
            .collect()
    }

    #[test]
    fn profiles_are_derived_and_variants_refused() {
        let probed = vec![
            (info(0, "MIG 1g.24gb", 1, 4, 24064), slots(1, &[0, 1, 2, 3])),
            (info(7, "1g.24gb+me", 1, 1, 24064), slots(1, &[0, 1, 2, 3])),
            (info(1, "2g.48gb", 2, 2, 48512), slots(2, &[0, 2])),
            (info(3, "", 4, 1, 97792), slots(4, &[0])),
            (info(4, "4g.96gb", 4, 1, 97792), Vec::new()),
        ];
        let (profiles, rejected) = derive_profiles(&probed);
        let names: Vec<_> = profiles.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["1g.24gb", "2g.48gb"]);
        let p = &profiles[1];
        assert_eq!(
            (p.memory_mib, p.compute_slices, p.memory_slices, p.count),
            (48512, 2, 2, 2)
        );
        assert_eq!(
            p.placements,
            [
                Placement {
                    start: 0,
                    length: 2
                },
                Placement {
                    start: 2,
                    length: 2
                }
            ]
        );
        assert_eq!(rejected.len(), 2, "{rejected:?}");
        let sliced = physical_sliced(profiles).unwrap();
        assert_eq!(sliced.count, 4, "the largest profile count");
        assert_eq!(physical_sliced(Vec::new()), None);
    }

    #[test]
    fn conflicting_names_are_withheld_and_identical_ones_collapsed() {
        let probed = vec![
            (info(0, "1g.24gb", 1, 4, 24064), slots(1, &[0, 1, 2, 3])),
            (info(9, "MIG 1g.24gb", 1, 4, 24064), slots(1, &[0, 1, 2, 3])),
            (info(1, "2g.48gb", 2, 2, 48512), slots(2, &[0, 2])),
            (info(8, "2g.48gb", 2, 1, 48512), slots(2, &[0])),
            (info(10, "2g.48gb", 2, 2, 48512), slots(2, &[0, 2])),
        ];
        let (profiles, rejected) = derive_profiles(&probed);
        let names: Vec<_> = profiles.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["1g.24gb"]);
        assert_eq!(rejected.len(), 1, "{rejected:?}");
    }

    #[test]
    fn divergent_cards_lose_the_profile() {
        let one = |mib| PhysicalSlicedProfile {
            name: "1g.24gb".into(),
            memory_mib: mib,
            compute_slices: 1,
            memory_slices: 1,
            count: 4,
            placements: Vec::new(),
        };
        let two = PhysicalSlicedProfile {
            name: "2g.48gb".into(),
            memory_mib: 48512,
            compute_slices: 2,
            memory_slices: 2,
            count: 2,
            placements: Vec::new(),
        };
        let mut cards = vec![
            physical_sliced(vec![one(24064), two.clone()]),
            physical_sliced(vec![one(20000), two.clone()]),
            None,
        ];
        assert_eq!(reject_divergent(&mut cards), ["1g.24gb"]);
        for card in cards.iter().take(2) {
            let card = card.as_ref().unwrap();
            assert_eq!(card.profiles, std::slice::from_ref(&two));
            assert_eq!(card.count, 2, "ceiling recomputed from what survives");
        }
        assert_eq!(cards[2], None);

        let mut agreeing = vec![physical_sliced(vec![two.clone()]); 2];
        assert!(reject_divergent(&mut agreeing).is_empty());
        assert!(agreeing.iter().all(Option::is_some));
    }
}
