//! MIG GPU-instance profiles of a card in MIG mode: what the driver answers
//! ([`from_driver`], the profiles `nvmlDeviceGetGpuInstanceProfileInfoV` names and the slots
//! `nvmlDeviceGetGpuInstancePossiblePlacements_v2` gives), and, for a library that cannot
//! describe GPU instances, a fixed per-product table ([`product_for`], [`physical_sliced`])
//! from NVIDIA's MIG user guide ("Supported MIG Profiles") and the `nvidia-smi mig -lgip` /
//! `-lgipp` listings it shows, as the reference operator uses for every card.
//!
//! A card in MIG mode offers these profiles on an empty card; the ledger keeps them as
//! `physicalSliced`.
//!
//! - `memorySlices` and `placements` are in memory-slice units (8 slices on A100/H100-class
//!   cards, 4 on A30); every placement's length is the profile's memory slices.
//! - The table's `memoryMib` is the GiB column of `nvidia-smi mig -lgip` where the listing was
//!   checked (A100 40GB and 80GB, A30, H100 80GB). For H100 NVL, H200 and GH200 it is the
//!   profile name's decimal GB in MiB (`1g.18gb` → 17166), which understates rather than
//!   overstates a slice, until it is checked on the hardware.
//! - Media-extension (`+me`) and graphics (`+gfx`) variants are not offered: they are the same
//!   slices with an engine attached, and offering both would let two profiles claim one slot.

use gpustack_api::devices::{PhysicalSliced, PhysicalSlicedProfile, Placement};

use super::gpu_instances::{ProfileInfo, Slot};

/// One GPU-instance profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub name: &'static str,
    pub memory_mib: u64,
    pub compute_slices: u32,
    pub memory_slices: u32,
    /// Instances of this profile an empty card can hold.
    pub count: i32,
    /// First memory slice of every legal placement.
    pub starts: &'static [u32],
}

/// A product's profile table.
#[derive(Debug, PartialEq, Eq)]
pub struct Product {
    pub name: &'static str,
    pub profiles: &'static [Profile],
}

const fn p(
    name: &'static str,
    memory_mib: u64,
    compute_slices: u32,
    memory_slices: u32,
    count: i32,
    starts: &'static [u32],
) -> Profile {
    Profile {
        name,
        memory_mib,
        compute_slices,
        memory_slices,
        count,
        starts,
    }
}

/// Placements on 8-slice (A100, H100-class) cards.
const ONE: &[u32] = &[0, 1, 2, 3, 4, 5, 6];
const EVERY_SECOND: &[u32] = &[0, 2, 4, 6];
const TWO_G: &[u32] = &[0, 2, 4];
const HALVES: &[u32] = &[0, 4];
const WHOLE: &[u32] = &[0];

pub static A100_40GB: Product = Product {
    name: "A100 40GB",
    profiles: &[
        p("1g.5gb", 4864, 1, 1, 7, ONE),
        p("1g.5gb+me", 4864, 1, 1, 1, ONE),
        p("1g.10gb", 9856, 1, 2, 4, EVERY_SECOND),
        p("2g.10gb", 9856, 2, 2, 3, TWO_G),
        p("3g.20gb", 20096, 3, 4, 2, HALVES),
        p("4g.20gb", 20096, 4, 4, 1, WHOLE),
        p("7g.40gb", 40320, 7, 8, 1, WHOLE),
    ],
};

pub static A100_80GB: Product = Product {
    name: "A100 80GB",
    profiles: &[
        p("1g.10gb", 9728, 1, 1, 7, ONE),
        p("1g.10gb+me", 9728, 1, 1, 1, ONE),
        p("1g.20gb", 19968, 1, 2, 4, EVERY_SECOND),
        p("2g.20gb", 19968, 2, 2, 3, TWO_G),
        p("3g.40gb", 40192, 3, 4, 2, HALVES),
        p("4g.40gb", 40192, 4, 4, 1, WHOLE),
        p("7g.80gb", 81152, 7, 8, 1, WHOLE),
    ],
};

/// A30: 4 memory slices, 4 compute slices.
pub static A30_24GB: Product = Product {
    name: "A30 24GB",
    profiles: &[
        p("1g.6gb", 5952, 1, 1, 4, &[0, 1, 2, 3]),
        p("1g.6gb+me", 5952, 1, 1, 1, &[0, 1, 2, 3]),
        p("2g.12gb", 11968, 2, 2, 2, &[0, 2]),
        p("2g.12gb+me", 11968, 2, 2, 1, &[0, 2]),
        p("4g.24gb", 24000, 4, 4, 1, WHOLE),
    ],
};

pub static H100_80GB: Product = Product {
    name: "H100 80GB",
    profiles: &[
        p("1g.10gb", 9984, 1, 1, 7, ONE),
        p("1g.10gb+me", 9984, 1, 1, 1, ONE),
        p("1g.20gb", 20096, 1, 2, 4, EVERY_SECOND),
        p("2g.20gb", 20096, 2, 2, 3, TWO_G),
        p("3g.40gb", 40448, 3, 4, 2, HALVES),
        p("4g.40gb", 40448, 4, 4, 1, WHOLE),
        p("7g.80gb", 81152, 7, 8, 1, WHOLE),
    ],
};

/// Decimal GB in MiB, for the rows not yet checked against `nvidia-smi mig -lgip`.
const fn gb(n: u64) -> u64 {
    n * 1_000_000_000 / (1024 * 1024)
}

pub static H100_NVL_94GB: Product = Product {
    name: "H100 NVL 94GB",
    profiles: &[
        p("1g.12gb", gb(12), 1, 1, 7, ONE),
        p("1g.12gb+me", gb(12), 1, 1, 1, ONE),
        p("1g.24gb", gb(24), 1, 2, 4, EVERY_SECOND),
        p("2g.24gb", gb(24), 2, 2, 3, TWO_G),
        p("3g.47gb", gb(47), 3, 4, 2, HALVES),
        p("4g.47gb", gb(47), 4, 4, 1, WHOLE),
        p("7g.94gb", gb(94), 7, 8, 1, WHOLE),
    ],
};

pub static H200_141GB: Product = Product {
    name: "H200 141GB",
    profiles: &[
        p("1g.18gb", gb(18), 1, 1, 7, ONE),
        p("1g.18gb+me", gb(18), 1, 1, 1, ONE),
        p("1g.35gb", gb(35), 1, 2, 4, EVERY_SECOND),
        p("2g.35gb", gb(35), 2, 2, 3, TWO_G),
        p("3g.71gb", gb(71), 3, 4, 2, HALVES),
        p("4g.71gb", gb(71), 4, 4, 1, WHOLE),
        p("7g.141gb", gb(141), 7, 8, 1, WHOLE),
    ],
};

/// GH200 with 96 GB of HBM3 (the "GH200 480GB" superchip's GPU).
pub static GH200_96GB: Product = Product {
    name: "GH200 96GB",
    profiles: &[
        p("1g.12gb", gb(12), 1, 1, 7, ONE),
        p("1g.12gb+me", gb(12), 1, 1, 1, ONE),
        p("1g.24gb", gb(24), 1, 2, 4, EVERY_SECOND),
        p("2g.24gb", gb(24), 2, 2, 3, TWO_G),
        p("3g.48gb", gb(48), 3, 4, 2, HALVES),
        p("4g.48gb", gb(48), 4, 4, 1, WHOLE),
        p("7g.96gb", gb(96), 7, 8, 1, WHOLE),
    ],
};

/// GH200 with 144 GB of HBM3e.
pub static GH200_144GB: Product = Product {
    name: "GH200 144GB",
    profiles: &[
        p("1g.18gb", gb(18), 1, 1, 7, ONE),
        p("1g.18gb+me", gb(18), 1, 1, 1, ONE),
        p("1g.36gb", gb(36), 1, 2, 4, EVERY_SECOND),
        p("2g.36gb", gb(36), 2, 2, 3, TWO_G),
        p("3g.72gb", gb(72), 3, 4, 2, HALVES),
        p("4g.72gb", gb(72), 4, 4, 1, WHOLE),
        p("7g.144gb", gb(144), 7, 8, 1, WHOLE),
    ],
};

const GIB: u64 = 1024;

/// The profile table of a product, from NVML's name and the card's memory in MiB (which tells
/// the 40 GB and 80 GB A100, and the two GH200 memories, apart). Names are matched by whole
/// words so that `RTX A3000` is not an `A30`.
pub fn product_for(name: &str, memory_mib: u64) -> Option<&'static Product> {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    let has = |w: &str| words.contains(&w);
    if has("gh200") {
        Some(if memory_mib > 120 * GIB {
            &GH200_144GB
        } else {
            &GH200_96GB
        })
    } else if has("h200") {
        Some(&H200_141GB)
    } else if has("h100") || has("h800") {
        Some(if has("nvl") || memory_mib > 88 * GIB {
            &H100_NVL_94GB
        } else {
            &H100_80GB
        })
    } else if has("a100") || has("a800") {
        Some(if memory_mib > 60 * GIB {
            &A100_80GB
        } else {
            &A100_40GB
        })
    } else if has("a30") {
        Some(&A30_24GB)
    } else {
        None
    }
}

/// Media-extension and graphics variants share their base profile's slices.
pub fn is_offered(profile_name: &str) -> bool {
    !profile_name.contains("+me") && !profile_name.contains("+gfx")
}

/// The `physicalSliced` block of an empty card of `product`: the offered profiles, and `count`
/// the largest profile count (it sizes the `.partitioned` token pool).
pub fn physical_sliced(product: &Product) -> PhysicalSliced {
    let profiles: Vec<PhysicalSlicedProfile> = product
        .profiles
        .iter()
        .filter(|p| is_offered(p.name))
        .map(|p| PhysicalSlicedProfile {
            name: p.name.to_owned(),
            memory_mib: p.memory_mib,
            compute_slices: p.compute_slices,
            memory_slices: p.memory_slices,
            count: p.count,
            placements: p
                .starts
                .iter()
                .map(|&start| Placement {
                    start,
                    length: p.memory_slices,
                })
                .collect(),
        })
        .collect();
    PhysicalSliced {
        count: profiles.iter().map(|p| p.count).max().unwrap_or(0),
        profiles,
    }
}

/// A driver profile name as published: NVML prefixes `MIG `, resource keys carry the rest
/// (`1g.10gb`), lower-cased.
fn published_name(raw: &str) -> String {
    let raw = raw.trim();
    raw.strip_prefix("MIG ")
        .unwrap_or(raw)
        .trim()
        .to_ascii_lowercase()
}

/// Whether `name` can be the last segment of a resource name, which is what a profile is
/// requested by.
fn is_publishable(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// The `physicalSliced` block of an empty card from the profiles the driver answered (each
/// with its legal slots), and one reason per answered profile left out, for the caller to log.
/// `None` when nothing is offered. Variants are not offered; a profile whose name cannot be a
/// resource-name segment, one with no legal slot (its memory-slice span is unknown) and a second
/// profile of an already-offered name are left out. Profiles are ordered by compute slices,
/// then memory slices, as `nvidia-smi` lists a card's profiles by size.
pub fn from_driver(probed: &[(ProfileInfo, Vec<Slot>)]) -> (Option<PhysicalSliced>, Vec<String>) {
    let mut profiles: Vec<PhysicalSlicedProfile> = Vec::new();
    let mut left_out = Vec::new();
    for (info, slots) in probed {
        let name = published_name(&info.name);
        if !is_offered(&name) {
            continue;
        }
        if !is_publishable(&name) {
            left_out.push(format!(
                "profile {} named {:?} yields no valid resource name",
                info.id, info.name
            ));
            continue;
        }
        let Some(first) = slots.first().filter(|s| s.size > 0) else {
            left_out.push(format!(
                "profile {} ({name}) has no legal placement, so its memory-slice span is unknown",
                info.id
            ));
            continue;
        };
        if profiles.iter().any(|p| p.name == name) {
            left_out.push(format!(
                "profile {} repeats the name {name} of another profile",
                info.id
            ));
            continue;
        }
        profiles.push(PhysicalSlicedProfile {
            name,
            memory_mib: info.memory_size_mb,
            compute_slices: info.slice_count,
            memory_slices: first.size,
            count: i32::try_from(info.instance_count).unwrap_or(i32::MAX),
            placements: slots
                .iter()
                .map(|s| Placement {
                    start: s.start,
                    length: s.size,
                })
                .collect(),
        });
    }
    profiles.sort_by(|a, b| {
        (a.compute_slices, a.memory_slices, a.memory_mib).cmp(&(
            b.compute_slices,
            b.memory_slices,
            b.memory_mib,
        ))
    });
    let sliced = (!profiles.is_empty()).then(|| PhysicalSliced {
        count: profiles.iter().map(|p| p.count).max().unwrap_or(0),
        profiles,
    });
    (sliced, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [&Product; 8] = [
        &A100_40GB,
        &A100_80GB,
        &A30_24GB,
        &H100_80GB,
        &H100_NVL_94GB,
        &H200_141GB,
        &GH200_96GB,
        &GH200_144GB,
    ];

    #[test]
    fn products_by_name_and_memory() {
        let cases = [
            ("NVIDIA A100-SXM4-80GB", 81920, Some("A100 80GB")),
            ("NVIDIA A100 80GB PCIe", 81920, Some("A100 80GB")),
            ("NVIDIA A100-SXM4-40GB", 40960, Some("A100 40GB")),
            ("NVIDIA A100-PCIE-40GB", 40960, Some("A100 40GB")),
            ("NVIDIA A800-SXM4-80GB", 81920, Some("A100 80GB")),
            ("NVIDIA A30", 24576, Some("A30 24GB")),
            ("NVIDIA H100 80GB HBM3", 81559, Some("H100 80GB")),
            ("NVIDIA H100 PCIe", 81559, Some("H100 80GB")),
            ("NVIDIA H800", 81559, Some("H100 80GB")),
            ("NVIDIA H100 NVL", 95830, Some("H100 NVL 94GB")),
            ("NVIDIA H200", 143771, Some("H200 141GB")),
            ("NVIDIA H200 NVL", 143771, Some("H200 141GB")),
            ("NVIDIA GH200 480GB", 97871, Some("GH200 96GB")),
            ("NVIDIA GH200 144G HBM3e", 146831, Some("GH200 144GB")),
            ("NVIDIA RTX A3000 Laptop GPU", 6144, None),
            ("NVIDIA A10G", 23028, None),
            ("NVIDIA L40S", 46068, None),
        ];
        for (name, memory, want) in cases {
            assert_eq!(product_for(name, memory).map(|p| p.name), want, "{name}");
        }
    }

    /// `nvidia-smi mig -lgip`'s memory column in MiB. The listing prints GiB to two decimals;
    /// the figures below are the exact binary fractions it rounds (9.62 is 9.625).
    fn gib(listed: f64) -> u64 {
        (listed * 1024.0).round() as u64
    }

    /// (name, GiB as `nvidia-smi mig -lgip` lists it, compute slices, memory slices, instances,
    /// first memory slice of every slot as `-lgipp` lists them), written from the listings, not
    /// from the table.
    type Listed = (&'static str, f64, u32, u32, i32, &'static [u32]);

    fn offered(product: &Product) -> Vec<(String, u64, u32, u32, i32, Vec<Placement>)> {
        physical_sliced(product)
            .profiles
            .into_iter()
            .map(|p| {
                (
                    p.name,
                    p.memory_mib,
                    p.compute_slices,
                    p.memory_slices,
                    p.count,
                    p.placements,
                )
            })
            .collect()
    }

    fn listed(rows: &[Listed]) -> Vec<(String, u64, u32, u32, i32, Vec<Placement>)> {
        rows.iter()
            .map(|&(name, g, compute, memory, count, starts)| {
                let placements = starts
                    .iter()
                    .map(|&start| Placement {
                        start,
                        length: memory,
                    })
                    .collect();
                (name.to_owned(), gib(g), compute, memory, count, placements)
            })
            .collect()
    }

    /// The fallback table of the cards whose listings were checked, against those listings.
    #[test]
    fn checked_tables_match_the_listings() {
        let a100_80: &[Listed] = &[
            ("1g.10gb", 9.50, 1, 1, 7, &[0, 1, 2, 3, 4, 5, 6]),
            ("1g.20gb", 19.50, 1, 2, 4, &[0, 2, 4, 6]),
            ("2g.20gb", 19.50, 2, 2, 3, &[0, 2, 4]),
            ("3g.40gb", 39.25, 3, 4, 2, &[0, 4]),
            ("4g.40gb", 39.25, 4, 4, 1, &[0]),
            ("7g.80gb", 79.25, 7, 8, 1, &[0]),
        ];
        let a100_40: &[Listed] = &[
            ("1g.5gb", 4.75, 1, 1, 7, &[0, 1, 2, 3, 4, 5, 6]),
            ("1g.10gb", 9.625, 1, 2, 4, &[0, 2, 4, 6]),
            ("2g.10gb", 9.625, 2, 2, 3, &[0, 2, 4]),
            ("3g.20gb", 19.625, 3, 4, 2, &[0, 4]),
            ("4g.20gb", 19.625, 4, 4, 1, &[0]),
            ("7g.40gb", 39.375, 7, 8, 1, &[0]),
        ];
        let a30: &[Listed] = &[
            ("1g.6gb", 5.8125, 1, 1, 4, &[0, 1, 2, 3]),
            ("2g.12gb", 11.6875, 2, 2, 2, &[0, 2]),
            ("4g.24gb", 23.4375, 4, 4, 1, &[0]),
        ];
        let h100_80: &[Listed] = &[
            ("1g.10gb", 9.75, 1, 1, 7, &[0, 1, 2, 3, 4, 5, 6]),
            ("1g.20gb", 19.625, 1, 2, 4, &[0, 2, 4, 6]),
            ("2g.20gb", 19.625, 2, 2, 3, &[0, 2, 4]),
            ("3g.40gb", 39.50, 3, 4, 2, &[0, 4]),
            ("4g.40gb", 39.50, 4, 4, 1, &[0]),
            ("7g.80gb", 79.25, 7, 8, 1, &[0]),
        ];
        for (product, rows) in [
            (&A100_80GB, a100_80),
            (&A100_40GB, a100_40),
            (&A30_24GB, a30),
            (&H100_80GB, h100_80),
        ] {
            assert_eq!(offered(product), listed(rows), "{}", product.name);
        }
        assert_eq!(physical_sliced(&A100_80GB).count, 7);
        assert_eq!(physical_sliced(&A30_24GB).count, 4);
    }

    /// The unchecked rows: the names' decimal GB in MiB, counts and slots of an 8-slice card.
    #[test]
    fn unchecked_tables_follow_the_names() {
        let decimal = |gb: u64| gb * 1_000_000_000 / 1_048_576;
        for (product, sizes) in [
            (&H100_NVL_94GB, [12, 24, 24, 47, 47, 94]),
            (&H200_141GB, [18, 35, 35, 71, 71, 141]),
            (&GH200_96GB, [12, 24, 24, 48, 48, 96]),
            (&GH200_144GB, [18, 36, 36, 72, 72, 144]),
        ] {
            let shapes = [
                (1, 1, 7, &[0, 1, 2, 3, 4, 5, 6][..]),
                (1, 2, 4, &[0, 2, 4, 6]),
                (2, 2, 3, &[0, 2, 4]),
                (3, 4, 2, &[0, 4]),
                (4, 4, 1, &[0]),
                (7, 8, 1, &[0]),
            ];
            let want: Vec<_> = sizes
                .iter()
                .zip(shapes)
                .map(|(&gb, (compute, memory, count, starts))| {
                    (
                        format!("{compute}g.{gb}gb"),
                        decimal(gb),
                        compute,
                        memory,
                        count,
                        starts
                            .iter()
                            .map(|&start| Placement {
                                start,
                                length: memory,
                            })
                            .collect::<Vec<_>>(),
                    )
                })
                .collect();
            assert_eq!(offered(product), want, "{}", product.name);
        }
    }

    #[test]
    fn media_and_graphics_variants_are_not_offered() {
        assert!(is_offered("1g.10gb"));
        assert!(!is_offered("1g.10gb+me"));
        assert!(!is_offered("1g.24gb+gfx"));
        // Every table lists a `+me` variant; none reaches the offered profiles.
        for product in ALL {
            assert!(
                product.profiles.iter().any(|p| p.name.ends_with("+me")),
                "{}",
                product.name
            );
            let names: Vec<String> = offered(product).into_iter().map(|p| p.0).collect();
            assert!(
                names.iter().all(|n| !n.contains('+')),
                "{}: {names:?}",
                product.name
            );
        }
        // The A30's two variants leave its three base profiles.
        let a30: Vec<String> = offered(&A30_24GB).into_iter().map(|p| p.0).collect();
        assert_eq!(a30, ["1g.6gb", "2g.12gb", "4g.24gb"]);
    }

    fn info(id: u32, name: &str, slices: u32, instances: u32, mib: u64) -> ProfileInfo {
        ProfileInfo {
            id,
            name: name.to_owned(),
            slice_count: slices,
            instance_count: instances,
            memory_size_mb: mib,
        }
    }

    fn slots(starts: &[u32], size: u32) -> Vec<Slot> {
        starts.iter().map(|&start| Slot { start, size }).collect()
    }

    #[test]
    fn driver_profiles_are_published_as_answered() {
        // In NVML's enumeration order (1, 2, 3, 4, 7 slices, then the variants and revisions).
        let probed = [
            (
                info(19, "MIG 1g.23gb", 1, 7, 23_808),
                slots(&[0, 1, 2, 3, 4, 5, 6], 1),
            ),
            (info(14, "MIG 2g.45gb", 2, 3, 46_336), slots(&[0, 2, 4], 2)),
            (info(9, "MIG 3g.90gb", 3, 2, 92_928), slots(&[0, 4], 4)),
            (info(5, "MIG 4g.90gb", 4, 1, 92_928), slots(&[0], 4)),
            (info(0, "MIG 7g.180gb", 7, 1, 183_296), slots(&[0], 8)),
            (
                info(20, "MIG 1g.23gb+me", 1, 1, 23_808),
                slots(&[0, 1, 2, 3, 4, 5, 6], 1),
            ),
            (
                info(15, "MIG 1g.45gb", 1, 4, 46_336),
                slots(&[0, 2, 4, 6], 2),
            ),
        ];
        let (sliced, left_out) = from_driver(&probed);
        assert!(left_out.is_empty(), "{left_out:?}");
        let sliced = sliced.unwrap();
        assert_eq!(sliced.count, 7);
        let rows: Vec<_> = sliced
            .profiles
            .iter()
            .map(|p| {
                (
                    p.name.as_str(),
                    p.memory_mib,
                    p.compute_slices,
                    p.memory_slices,
                    p.count,
                    p.placements.iter().map(|s| s.start).collect::<Vec<_>>(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("1g.23gb", 23_808, 1, 1, 7, vec![0, 1, 2, 3, 4, 5, 6]),
                ("1g.45gb", 46_336, 1, 2, 4, vec![0, 2, 4, 6]),
                ("2g.45gb", 46_336, 2, 2, 3, vec![0, 2, 4]),
                ("3g.90gb", 92_928, 3, 4, 2, vec![0, 4]),
                ("4g.90gb", 92_928, 4, 4, 1, vec![0]),
                ("7g.180gb", 183_296, 7, 8, 1, vec![0]),
            ]
        );
        assert!(
            sliced
                .profiles
                .iter()
                .all(|p| p.placements.iter().all(|s| s.length == p.memory_slices))
        );
    }

    #[test]
    fn unusable_driver_profiles_are_left_out_with_a_reason() {
        let probed = [
            (info(1, "MIG 1g.10gb", 1, 7, 9728), slots(&[0, 1], 1)),
            (info(2, "", 1, 7, 9728), slots(&[0], 1)),
            (info(3, "MIG 2g.20gb", 2, 3, 19968), Vec::new()),
            (info(4, "MIG 1G.10GB", 1, 7, 9728), slots(&[0], 1)),
            (info(5, "MIG 3g.40gb+gfx", 3, 2, 40192), slots(&[0, 4], 4)),
        ];
        let (sliced, left_out) = from_driver(&probed);
        let names: Vec<_> = sliced
            .unwrap()
            .profiles
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(names, ["1g.10gb"]);
        assert_eq!(left_out.len(), 3, "{left_out:?}");
        assert!(left_out[0].contains("profile 2"), "{left_out:?}");
        assert!(left_out[1].contains("no legal placement"), "{left_out:?}");
        assert!(
            left_out[2].contains("repeats the name 1g.10gb"),
            "{left_out:?}"
        );
        assert_eq!(from_driver(&[]).0, None);
    }

    /// Every table is internally consistent: placements fit the card, do not exceed the count's
    /// need, and the profile count fits the compute and memory slices.
    #[test]
    fn tables_are_consistent() {
        for product in ALL {
            let memory_slices = product
                .profiles
                .iter()
                .map(|p| p.memory_slices)
                .max()
                .unwrap();
            let compute_slices = product
                .profiles
                .iter()
                .map(|p| p.compute_slices)
                .max()
                .unwrap();
            for p in product.profiles {
                let name = format!("{} {}", product.name, p.name);
                assert!(p.count >= 1, "{name}");
                assert!(
                    p.starts.len() as i32 >= p.count,
                    "{name}: fewer slots than instances"
                );
                assert!(
                    p.starts
                        .iter()
                        .all(|s| s % p.memory_slices == 0 || p.memory_slices == 1),
                    "{name}: misaligned placement"
                );
                assert!(
                    p.starts
                        .iter()
                        .all(|s| s + p.memory_slices <= memory_slices),
                    "{name}: placement past the card"
                );
                if is_offered(p.name) {
                    assert!(
                        p.count as u32 * p.compute_slices <= compute_slices,
                        "{name}: compute"
                    );
                    assert!(
                        p.count as u32 * p.memory_slices <= memory_slices,
                        "{name}: memory"
                    );
                    let (g, _) = p.name.split_once('g').unwrap();
                    assert_eq!(g.parse::<u32>().unwrap(), p.compute_slices, "{name}: name");
                }
            }
            assert!(physical_sliced(product).count >= 4, "{}", product.name);
        }
    }

    #[test]
    fn unverified_rows_understate() {
        assert_eq!(gb(18), 17166);
        assert!(gb(141) < 143771);
    }
}
