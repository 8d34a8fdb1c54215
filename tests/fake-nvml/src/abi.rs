//! The C ABI the NVML-shaped libraries share (nvml.h; go-ixml's api.h and pyhgml repeat it):
//! status codes, the records the calls fill, and the helpers every export writes through.

use std::ffi::{c_char, c_uint, c_ulonglong};

use gpustack_fake_abi::Answers;
pub use gpustack_fake_abi::c_array;

/// `nvmlReturn_t` / `hgmlReturn_t`.
pub type Return = c_uint;

pub const SUCCESS: Return = 0;
pub const ERROR_UNINITIALIZED: Return = 1;
pub const ERROR_INVALID_ARGUMENT: Return = 2;
pub const ERROR_NOT_SUPPORTED: Return = 3;
pub const ERROR_NOT_FOUND: Return = 6;
pub const ERROR_INSUFFICIENT_SIZE: Return = 7;
pub const ERROR_DRIVER_NOT_LOADED: Return = 9;
pub const ERROR_IN_USE: Return = 19;
pub const ERROR_INSUFFICIENT_RESOURCES: Return = 23;
pub const ERROR_ARGUMENT_VERSION_MISMATCH: Return = 25;
pub const ERROR_UNKNOWN: Return = 999;

/// `*_TEMPERATURE_GPU`.
pub const TEMPERATURE_GPU: c_uint = 0;
/// `*_DEVICE_MIG_ENABLE`.
pub const DEVICE_MIG_ENABLE: c_uint = 1;
/// `*_DEVICE_NAME_V2_BUFFER_SIZE`, the profile record's name array.
pub const PROFILE_NAME_BUFFER: usize = 96;

pub const MIB: u64 = 1024 * 1024;

/// `struct nvmlDevice_st`: opaque to callers.
#[repr(C)]
pub struct DeviceSt {
    _opaque: [u8; 0],
}

/// `nvmlDevice_t` / `hgmlDevice_t`.
pub type DeviceHandle = *mut DeviceSt;

/// The 68-byte PCI record (`nvmlPciInfo_t` v3, as `nvmlDeviceGetPciInfo_v3` fills it).
#[repr(C)]
pub struct PciInfo {
    pub bus_id_legacy: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub bus_id: [c_char; 32],
}

/// The original 52-byte PCI record (NVML's v1 `nvmlPciInfo_t`, pyhgml's "legacy pciInfo used
/// for _v1 and _v2"): only the 16-byte bus id, reserved words last.
#[repr(C)]
pub struct PciInfoLegacy {
    pub bus_id: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub reserved: [c_uint; 4],
}

/// The v1 memory record.
#[repr(C)]
pub struct Memory {
    pub total: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// The v2 memory record.
#[repr(C)]
pub struct MemoryV2 {
    pub version: c_uint,
    pub total: c_ulonglong,
    pub reserved: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `*Memory_v2`: the record's size with version 2 in the top byte (`0x02000028`).
pub const MEMORY_V2: c_uint = (size_of::<MemoryV2>() as c_uint) | (2 << 24);

/// The utilisation record.
#[repr(C)]
pub struct Utilization {
    pub gpu: c_uint,
    pub memory: c_uint,
}

/// The GPU-instance profile record, v1: no version word, no name.
#[repr(C)]
pub struct GpuInstanceProfileInfo {
    pub id: c_uint,
    pub is_p2p_supported: c_uint,
    pub slice_count: c_uint,
    pub instance_count: c_uint,
    pub multiprocessor_count: c_uint,
    pub copy_engine_count: c_uint,
    pub decoder_count: c_uint,
    pub encoder_count: c_uint,
    pub jpeg_count: c_uint,
    pub ofa_count: c_uint,
    pub memory_size_mb: c_ulonglong,
}

/// The GPU-instance profile record, v2: a version word first and a name last.
#[repr(C)]
pub struct GpuInstanceProfileInfoV2 {
    pub version: c_uint,
    pub id: c_uint,
    pub is_p2p_supported: c_uint,
    pub slice_count: c_uint,
    pub instance_count: c_uint,
    pub multiprocessor_count: c_uint,
    pub copy_engine_count: c_uint,
    pub decoder_count: c_uint,
    pub encoder_count: c_uint,
    pub jpeg_count: c_uint,
    pub ofa_count: c_uint,
    pub memory_size_mb: c_ulonglong,
    pub name: [c_char; PROFILE_NAME_BUFFER],
}

/// `*GpuInstanceProfileInfo_v2` (`0x02000098`).
pub const PROFILE_INFO_V2: c_uint = (size_of::<GpuInstanceProfileInfoV2>() as c_uint) | (2 << 24);

/// The GPU-instance placement: first memory slice and length.
#[repr(C)]
pub struct GpuInstancePlacement {
    pub start: c_uint,
    pub size: c_uint,
}

/// The status codes of the shared writers.
const ANSWERS: Answers<Return> = Answers {
    ok: SUCCESS,
    invalid_argument: ERROR_INVALID_ARGUMENT,
    insufficient_size: ERROR_INSUFFICIENT_SIZE,
};

/// Writes `value` through a caller's out-pointer.
pub(crate) fn put<T>(out: *mut T, value: T) -> Return {
    ANSWERS.put(out, value)
}

/// Copies `s` NUL-terminated into a caller's buffer of `len` bytes.
pub(crate) fn put_str(buf: *mut c_char, len: c_uint, s: &str) -> Return {
    ANSWERS.put_str(buf, len, s)
}

/// The `version` word a caller set at the start of a versioned struct.
pub(crate) fn version_of(versioned: *const c_uint) -> Option<c_uint> {
    if versioned.is_null() {
        return None;
    }
    // SAFETY: non-null; the header makes the caller pass a versioned struct whose first field
    // is the `unsigned int version` it set.
    Some(unsafe { versioned.read() })
}

/// `f(value)`, or `*_ERROR_NOT_SUPPORTED` for a figure the fixture lacks.
pub fn supported<T>(value: Option<T>, f: impl FnOnce(T) -> Return) -> Return {
    value.map_or(ERROR_NOT_SUPPORTED, f)
}

/// Domain, bus and device of a fixture bus id (`00000000:18:00.0`, hex).
pub fn bus_fields(bus_id: &str) -> Option<(u32, u32, u32)> {
    let mut parts = bus_id.split([':', '.']);
    let mut field = || parts.next().and_then(|p| u32::from_str_radix(p, 16).ok());
    Some((field()?, field()?, field()?))
}

/// The header's legacy bus id format, `%04X:%02X:%02X.0`.
pub fn legacy_bus_id(domain: u32, bus: u32, dev: u32) -> String {
    format!("{domain:04x}:{bus:02x}:{dev:02x}.0").to_ascii_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_headers() {
        // nvml.h: the PCI record is 16 + 5 * 4 + 32 bytes; the v2 memory record has 4 bytes of
        // padding after `version`.
        assert_eq!(size_of::<PciInfo>(), 68);
        assert_eq!(size_of::<MemoryV2>(), 40);
        assert_eq!(MEMORY_V2, 0x0200_0028);
        // The legacy layouts: 16 + 9 * 4 bytes, and three counters.
        assert_eq!(size_of::<PciInfoLegacy>(), 52);
        assert_eq!(size_of::<Memory>(), 24);
        // GPU-instance records: 10 words and a u64 (v1); the v2 adds the version word, 4 bytes
        // of padding and the 96-byte name (`0x02000098`).
        assert_eq!(size_of::<GpuInstanceProfileInfo>(), 48);
        assert_eq!(size_of::<GpuInstanceProfileInfoV2>(), 152);
        assert_eq!(PROFILE_INFO_V2, 0x0200_0098);
        assert_eq!(size_of::<GpuInstancePlacement>(), 8);
    }

    #[test]
    fn bus_ids_parse_and_print() {
        assert_eq!(bus_fields("00000000:1B:00.0"), Some((0, 0x1b, 0)));
        assert_eq!(bus_fields("junk"), None);
        assert_eq!(legacy_bus_id(0, 0x1b, 0), "0000:1B:00.0");
    }
}
