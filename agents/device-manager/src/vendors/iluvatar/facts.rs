//! Pure derivations from what IXML reports: the runtime version string, the PCI bus id and
//! health.

use crate::pci;

/// `nvmlSystemGetCudaDriverVersion`'s `1000 * major + 10 * minor` (NVML's encoding, which IXML
/// keeps: CoreX 4.x answers 10020, shown by `ixsmi` as "CUDA Version: 10.2") as `major.minor`.
pub fn cuda_version(encoded: i32) -> Option<String> {
    (encoded > 0).then(|| format!("{}.{}", encoded / 1000, (encoded % 1000) / 10))
}

/// The sysfs form of the device's bus id: `busId` when filled, else `busIdLegacy` (where a
/// library filling NVML's older `nvmlPciInfo_t` layout puts it). `None` when neither looks like
/// a bus id, so that a garbled answer never becomes a topology.
pub fn bus_id(bus_id: &str, bus_id_legacy: &str) -> Option<String> {
    [bus_id, bus_id_legacy]
        .into_iter()
        .map(pci::normalize_bus_id)
        .find(|b| pci::is_bus_id(b))
}

/// `ixmlDeviceGetHealth`'s bitmask: any of api.h's `ixmlHealth*` error bits (SYSHUB, MC, over
/// temperature, over voltage, ECC, memory, PCIe) set means the card is unhealthy;
/// `ixmlHealthOK` is 0.
pub fn unhealthy(health: u64) -> bool {
    health != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_versions() {
        assert_eq!(cuda_version(10020).as_deref(), Some("10.2"));
        assert_eq!(cuda_version(12040).as_deref(), Some("12.4"));
        assert_eq!(cuda_version(0), None);
        assert_eq!(cuda_version(-1), None);
    }

    #[test]
    fn bus_ids_prefer_the_long_form() {
        assert_eq!(
            bus_id("00000000:13:00.0", "0000:13:00.0").as_deref(),
            Some("0000:13:00.0")
        );
        // NVML's older layout: only the first 16 bytes carry a bus id.
        assert_eq!(bus_id("", "0000:9A:00.0").as_deref(), Some("0000:9a:00.0"));
        assert_eq!(bus_id("garbage", "").as_deref(), None);
        assert_eq!(bus_id("", "").as_deref(), None);
    }

    #[test]
    fn health() {
        assert!(!unhealthy(0));
        assert!(unhealthy(0x10), "ixmlHealthECCError");
        assert!(unhealthy(0x40), "ixmlHealthPCIEError");
    }
}
