//! Pure derivations from what NVML reports: the architecture family, the CUDA version string,
//! the ledger's memory figure and the accelerator id.

const MIB: u64 = 1024 * 1024;

/// HBM stacks are 1024 bits wide each, so any HBM board has a bus of at least 1024 bits; GDDR
/// boards top out at 512.
const HBM_MIN_BUS_WIDTH_BITS: u32 = 1024;

/// The architecture family of a CUDA compute capability, as NVIDIA names it.
pub fn family(major: i32, minor: i32) -> Option<&'static str> {
    Some(match (major, minor) {
        (3, _) => "Kepler",
        (5, _) => "Maxwell",
        (6, _) => "Pascal",
        (7, 5) => "Turing",
        (7, _) => "Volta",
        (8, 9) => "Ada Lovelace",
        (8, _) => "Ampere",
        (9, _) => "Hopper",
        // 10.x data-centre (B200, B300), 11.0 Thor, 12.x RTX 50 and RTX PRO, GB10.
        (10..=12, _) => "Blackwell",
        _ => return None,
    })
}

/// `nvmlSystemGetCudaDriverVersion_v2`'s `1000 * major + 10 * minor` as `major.minor`.
pub fn cuda_version(encoded: i32) -> Option<String> {
    (encoded > 0).then(|| format!("{}.{}", encoded / 1000, (encoded % 1000) / 10))
}

/// The ledger's memory of one card, in MiB.
///
/// NVML's total is what the driver makes usable. On GDDR boards with ECC on, the driver keeps
/// the check bits in-band and hides 1/16 of the memory (a T4 shows 15360 of its 16384 MiB), so
/// the installed memory is the total × 16/15. HBM keeps ECC out of band: no correction there.
/// The rule applies only when NVML says both that ECC is currently on and that the bus is
/// narrower than HBM's; when either is unknown the total is taken as it is.
pub fn memory_mib(total_bytes: u64, ecc_enabled: Option<bool>, bus_width_bits: Option<u32>) -> u64 {
    let mib = total_bytes / MIB;
    match (ecc_enabled, bus_width_bits) {
        (Some(true), Some(width)) if width < HBM_MIN_BUS_WIDTH_BITS => mib * 16 / 15,
        _ => mib,
    }
}

/// NVML already answers `GPU-<uuid>`; an id without the prefix gets it, so that every NVIDIA
/// id has one shape.
pub fn accelerator_id(uuid: &str) -> String {
    let uuid = uuid.trim();
    if uuid.starts_with("GPU-") {
        uuid.to_owned()
    } else {
        format!("GPU-{uuid}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_from_compute_capability() {
        let table = [
            ((3, 5), Some("Kepler")),
            ((3, 7), Some("Kepler")),
            ((5, 2), Some("Maxwell")),
            ((6, 0), Some("Pascal")),
            ((6, 1), Some("Pascal")),
            ((7, 0), Some("Volta")),
            ((7, 2), Some("Volta")),
            ((7, 5), Some("Turing")),
            ((8, 0), Some("Ampere")),
            ((8, 6), Some("Ampere")),
            ((8, 7), Some("Ampere")),
            ((8, 9), Some("Ada Lovelace")),
            ((9, 0), Some("Hopper")),
            ((10, 0), Some("Blackwell")),
            ((10, 3), Some("Blackwell")),
            ((12, 0), Some("Blackwell")),
            ((2, 0), None),
            ((13, 0), None),
        ];
        for ((major, minor), want) in table {
            assert_eq!(family(major, minor), want, "{major}.{minor}");
        }
    }

    #[test]
    fn cuda_versions() {
        assert_eq!(cuda_version(12040).as_deref(), Some("12.4"));
        assert_eq!(cuda_version(12080).as_deref(), Some("12.8"));
        assert_eq!(cuda_version(11020).as_deref(), Some("11.2"));
        assert_eq!(cuda_version(13000).as_deref(), Some("13.0"));
        assert_eq!(cuda_version(0), None);
    }

    #[test]
    fn gddr_with_ecc_is_corrected() {
        // T4 (GDDR6, 256-bit) with ECC on: 15360 MiB usable of 16384 installed.
        assert_eq!(memory_mib(15360 * MIB, Some(true), Some(256)), 16384);
        // ECC off, or unknown: as reported.
        assert_eq!(memory_mib(15360 * MIB, Some(false), Some(256)), 15360);
        assert_eq!(memory_mib(15360 * MIB, None, Some(256)), 15360);
        assert_eq!(memory_mib(15360 * MIB, Some(true), None), 15360);
        // H100 SXM5 (HBM3, 5120-bit) with ECC on: no correction.
        assert_eq!(memory_mib(81559 * MIB, Some(true), Some(5120)), 81559);
        // Partial MiB are dropped before the correction.
        assert_eq!(
            memory_mib(81559 * MIB + 12345, Some(true), Some(5120)),
            81559
        );
    }

    #[test]
    fn ids() {
        assert_eq!(accelerator_id("GPU-1a2b"), "GPU-1a2b");
        assert_eq!(accelerator_id("1a2b"), "GPU-1a2b");
    }
}
