//! T-Head's `libhgml.so` (HGML, NVML-shaped with an `hgml` prefix; pyhgml and the reference
//! operator's Go bindings give the signatures and layouts), serving the fixture named by
//! `GPUSTACK_FAKE_HGML_FIXTURE`. It exports exactly the names the T-Head detector resolves
//! first: the shared calls under the `hgml` prefix ([`crate::nvml_shaped_exports`]), and
//! `hgmlSystemGetHggcDriverVersion_v2`, `hgmlDeviceGetPciInfo_v2` (the legacy 52-byte
//! `hgmlPciInfo_v2_t`, whose bus id string sits where the v3 layout keeps `busIdLegacy`),
//! `hgmlDeviceGetHggcComputeCapability` and `hgmlDeviceGetMemoryErrorCounter`.

use std::ffi::{c_int, c_ulonglong};

use crate::library::{Flavour, Library};

/// The variable naming the HGML fixture file.
pub const FIXTURE_ENV: &str = "GPUSTACK_FAKE_HGML_FIXTURE";

/// The HGML the stand-in plays.
pub static LIB: Library = Library::new(FIXTURE_ENV, Flavour::Hgml);

crate::nvml_shaped_exports!("hgml", LIB);

/// `hgmlMemoryErrorType_t`, `hgmlEccCounterType_t`, `hgmlMemoryLocation_t`: the one counter
/// the fixture has a figure for.
const MEMORY_ERROR_TYPE_UNCORRECTED: c_uint = 1;
const VOLATILE_ECC: c_uint = 0;
const MEMORY_LOCATION_DRAM: c_uint = 2;

#[unsafe(no_mangle)]
pub extern "C" fn hgmlSystemGetHggcDriverVersion_v2(version: *mut c_int) -> Return {
    LIB.runtime_version(version)
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetPciInfo_v2(
    device: DeviceHandle,
    pci: *mut abi::PciInfoLegacy,
) -> Return {
    LIB.pci_info_legacy(device, pci)
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetHggcComputeCapability(
    device: DeviceHandle,
    major: *mut c_int,
    minor: *mut c_int,
) -> Return {
    LIB.compute_capability(device, major, minor)
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetMemoryErrorCounter(
    device: DeviceHandle,
    error_type: c_uint,
    counter_type: c_uint,
    location: c_uint,
    count: *mut c_ulonglong,
) -> Return {
    LIB.with_device(device, |d| {
        if (error_type, counter_type, location)
            != (
                MEMORY_ERROR_TYPE_UNCORRECTED,
                VOLATILE_ECC,
                MEMORY_LOCATION_DRAM,
            )
        {
            return abi::ERROR_NOT_SUPPORTED;
        }
        abi::supported(d.ecc_uncorrected_volatile, |n| abi::put(count, n))
    })
}
