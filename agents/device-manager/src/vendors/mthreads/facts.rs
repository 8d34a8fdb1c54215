//! Pure facts about Moore Threads GPUs: units and the device-node index. No IO; each function
//! has a table test.

const MIB: u64 = 1024 * 1024;

/// MTML memory (bytes) in MiB.
pub fn bytes_to_mib(bytes: u64) -> u64 {
    bytes / MIB
}

/// MTML power (mW) in whole watts.
pub fn watts(milliwatts: u32) -> u32 {
    milliwatts / 1000
}

/// A utilization reading, capped at 100 %.
pub fn percent(value: u32) -> u32 {
    value.min(100)
}

/// An MTML temperature (°C, unsigned) as the monitor's signed degrees; an out-of-range reading
/// is no reading.
pub fn celsius(value: u32) -> Option<i32> {
    i32::try_from(value).ok()
}

/// `physicalIndexes` of a Moore Threads GPU: `[index]`, the number `MTHREADS_VISIBLE_DEVICES`
/// and the `/dev/mtgpu.<i>` node take (the reference's shape for MThreads).
pub fn physical_indexes(index: u32) -> Vec<u32> {
    vec![index]
}

/// Uncorrected ECC errors make a GPU unhealthy.
pub fn unhealthy(uncorrected_errors: u64) -> bool {
    uncorrected_errors > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(bytes_to_mib(48 * 1024 * MIB), 49_152);
        assert_eq!(bytes_to_mib(MIB - 1), 0);
        assert_eq!(watts(245_300), 245);
        assert_eq!(percent(37), 37);
        assert_eq!(percent(250), 100);
        assert_eq!(celsius(53), Some(53));
        assert_eq!(celsius(u32::MAX), None);
    }

    #[test]
    fn indexes_and_health() {
        assert_eq!(physical_indexes(3), [3]);
        assert!(!unhealthy(0));
        assert!(unhealthy(1));
    }
}
