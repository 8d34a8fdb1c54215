//! MIG GPU-instance profiles per product, from NVIDIA's MIG user guide ("Supported MIG
//! Profiles") and the `nvidia-smi mig -lgip` / `-lgipp` listings it shows.
//!
//! A card in MIG mode offers these profiles on an empty card; the ledger keeps them as
//! `physicalSliced`. The table is fixed, as the reference's is, so that detection does not
//! depend on the profiles the driver happens to expose to an unprivileged reader.
//!
//! - `memorySlices` and `placements` are in memory-slice units (8 slices on A100/H100-class
//!   cards, 4 on A30); every placement's length is the profile's memory slices.
//! - `memoryMib` is the GiB column of `nvidia-smi mig -lgip` where the listing was checked (A100
//!   40GB and 80GB, A30, H100 80GB). For H100 NVL, H200 and GH200 it is the profile name's
//!   decimal GB in MiB (`1g.18gb` → 17166), which understates rather than overstates a slice,
//!   until it is checked on the hardware.
//! - Media-extension (`+me`) and graphics (`+gfx`) variants are listed for completeness but are
//!   not offered: they are the same slices with an engine attached, and offering both would let
//!   two profiles claim one slot.

use gpustack_api::devices::{PhysicalSliced, PhysicalSlicedProfile, Placement};

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

    #[test]
    fn a100_80gb_offers_six_profiles() {
        let sliced = physical_sliced(&A100_80GB);
        assert_eq!(sliced.count, 7);
        let names: Vec<_> = sliced.profiles.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"
            ]
        );
        let third = &sliced.profiles[3];
        assert_eq!(
            (
                third.memory_mib,
                third.compute_slices,
                third.memory_slices,
                third.count
            ),
            (40192, 3, 4, 2)
        );
        assert_eq!(
            third.placements,
            [
                Placement {
                    start: 0,
                    length: 4
                },
                Placement {
                    start: 4,
                    length: 4
                }
            ]
        );
    }

    #[test]
    fn media_and_graphics_variants_are_not_offered() {
        assert!(is_offered("1g.10gb"));
        assert!(!is_offered("1g.10gb+me"));
        assert!(!is_offered("1g.24gb+gfx"));
        for product in ALL {
            assert!(
                physical_sliced(product)
                    .profiles
                    .iter()
                    .all(|p| is_offered(&p.name))
            );
        }
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
