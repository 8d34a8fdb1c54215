//! A test stand-in for T-Head's HGML (`libhgml.so`), the PPU driver's management library,
//! which cannot exist on a build machine: it ships only with the PPU SDK and talks to PPU
//! hardware. This is not T-Head's code and touches no hardware. It serves the devices of a JSON
//! fixture (named by the environment variable `GPUSTACK_FAKE_HGML_FIXTURE`, see [`fixture`])
//! through HGML's real C ABI, so that the T-Head detector is exercised through its real loading
//! path (`dlopen` by path from the fixture root) on machines without accelerators.
//!
//! It exports exactly the names the detector resolves first (pyhgml and the reference
//! operator's Go bindings give the signatures and layouts): `hgmlInit_v2`, `hgmlShutdown`,
//! `hgmlSystemGetDriverVersion`, `hgmlSystemGetHggcDriverVersion_v2`, `hgmlDeviceGetCount_v2`,
//! `hgmlDeviceGetHandleByIndex_v2`, `hgmlDeviceGetUUID`, `hgmlDeviceGetName`,
//! `hgmlDeviceGetMinorNumber`, `hgmlDeviceGetNumGpuCores`, `hgmlDeviceGetMemoryInfo_v2`
//! (`hgmlMemory_v2_t`, version checked), `hgmlDeviceGetPciInfo_v2` (the legacy 52-byte
//! `hgmlPciInfo_v2_t`, whose bus id string sits where the v3 layout keeps `busIdLegacy`),
//! `hgmlDeviceGetHggcComputeCapability`, `hgmlDeviceGetMemoryErrorCounter`,
//! `hgmlDeviceGetMigMode`, `hgmlDeviceGetGpuInstanceProfileInfoV` (the 152-byte v2 record,
//! version checked), `hgmlDeviceGetGpuInstancePossiblePlacements_v2`,
//! `hgmlDeviceGetUtilizationRates`, `hgmlDeviceGetTemperature` and `hgmlDeviceGetPowerUsage`.
//! Anything else is absent, so a detector that starts calling another function fails loudly (a
//! missing symbol) instead of silently reading zeros.
//!
//! `hgmlInit_v2` reads the fixture; an unset variable or unreadable file answers
//! `HGML_ERROR_DRIVER_NOT_LOADED` (the driver is not there), bad JSON `HGML_ERROR_UNKNOWN`, and
//! a fixture's `initStatus` is answered as given. Device handles are opaque: the device's index
//! plus one, never dereferenced.

// The contract of every exported function is HGML's: pointers are the caller's, valid for the
// documented sizes. Null pointers are checked and answered with HGML_ERROR_INVALID_ARGUMENT.
#![allow(clippy::missing_safety_doc)]

pub mod fixture;

use std::{
    ffi::{c_char, c_int, c_uint, c_ulonglong},
    sync::Mutex,
};

use fixture::{Device, Fixture, LoadError};

/// `hgmlReturn_t`.
pub type HgmlReturn = c_uint;

pub const HGML_SUCCESS: HgmlReturn = 0;
pub const HGML_ERROR_UNINITIALIZED: HgmlReturn = 1;
pub const HGML_ERROR_INVALID_ARGUMENT: HgmlReturn = 2;
pub const HGML_ERROR_NOT_SUPPORTED: HgmlReturn = 3;
pub const HGML_ERROR_INSUFFICIENT_SIZE: HgmlReturn = 7;
pub const HGML_ERROR_DRIVER_NOT_LOADED: HgmlReturn = 9;
pub const HGML_ERROR_ARGUMENT_VERSION_MISMATCH: HgmlReturn = 25;
pub const HGML_ERROR_UNKNOWN: HgmlReturn = 999;

/// `hgmlMemoryErrorType_t`, `hgmlEccCounterType_t`, `hgmlMemoryLocation_t`: the one counter
/// the fixture has a figure for.
const HGML_MEMORY_ERROR_TYPE_UNCORRECTED: c_uint = 1;
const HGML_VOLATILE_ECC: c_uint = 0;
const HGML_MEMORY_LOCATION_DRAM: c_uint = 2;
/// `hgmlTemperatureSensors_t`.
const HGML_TEMPERATURE_GPU: c_uint = 0;
/// `HGML_DEVICE_MIG_ENABLE`.
const HGML_DEVICE_MIG_ENABLE: c_uint = 1;

const MIB: u64 = 1024 * 1024;
const NAME_BUFFER: usize = 96;

/// `struct hgmlDevice_st`: opaque to callers.
#[repr(C)]
pub struct HgmlDeviceSt {
    _opaque: [u8; 0],
}

/// `hgmlDevice_t`.
pub type HgmlDevice = *mut HgmlDeviceSt;

/// `hgmlPciInfo_v2_t`: the legacy layout `hgmlDeviceGetPciInfo_v2` fills (pyhgml: "Legacy
/// pciInfo used for _v1 and _v2").
#[repr(C)]
pub struct HgmlPciInfoV2 {
    pub bus_id: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub reserved: [c_uint; 4],
}

/// `hgmlMemory_v2_t`.
#[repr(C)]
pub struct HgmlMemoryV2 {
    pub version: c_uint,
    pub total: c_ulonglong,
    pub reserved: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `hgmlMemory_v2` (pyhgml: `0x02000028`).
const HGML_MEMORY_V2: c_uint = (size_of::<HgmlMemoryV2>() as c_uint) | (2 << 24);

/// `hgmlUtilization_t`.
#[repr(C)]
pub struct HgmlUtilization {
    pub gpu: c_uint,
    pub memory: c_uint,
}

/// `hgmlGpuInstanceProfileInfo_v2_t`.
#[repr(C)]
pub struct HgmlGpuInstanceProfileInfoV2 {
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
    pub name: [c_char; NAME_BUFFER],
}

/// `hgmlGpuInstanceProfileInfo_v2` (pyhgml: `0x02000098`).
const HGML_PROFILE_INFO_V2: c_uint =
    (size_of::<HgmlGpuInstanceProfileInfoV2>() as c_uint) | (2 << 24);

/// `hgmlGpuInstancePlacement_t`.
#[repr(C)]
pub struct HgmlGpuInstancePlacement {
    pub start: c_uint,
    pub size: c_uint,
}

/// The loaded fixture, with HGML's reference-counted init/shutdown.
struct State {
    fixture: Option<Fixture>,
    inits: u32,
}

static STATE: Mutex<State> = Mutex::new(State {
    fixture: None,
    inits: 0,
});

fn state() -> std::sync::MutexGuard<'static, State> {
    // A panic cannot cross the C ABI (it aborts), so a poisoned lock only means an earlier
    // caller's thread died elsewhere; the data is still consistent.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

fn with_fixture(f: impl FnOnce(&Fixture) -> HgmlReturn) -> HgmlReturn {
    match &state().fixture {
        Some(fixture) => f(fixture),
        None => HGML_ERROR_UNINITIALIZED,
    }
}

fn with_device(handle: HgmlDevice, f: impl FnOnce(&Device) -> HgmlReturn) -> HgmlReturn {
    with_fixture(|fixture| {
        let index = handle.addr().wrapping_sub(1);
        match fixture.devices.get(index) {
            Some(device) => f(device),
            None => HGML_ERROR_INVALID_ARGUMENT,
        }
    })
}

/// Writes `value` through a caller's out-pointer.
fn put<T>(out: *mut T, value: T) -> HgmlReturn {
    if out.is_null() {
        return HGML_ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: non-null, and HGML makes the caller pass a pointer to a writable `T`.
    unsafe { out.write(value) };
    HGML_SUCCESS
}

/// Copies `s` NUL-terminated into a caller's buffer of `len` bytes.
fn put_str(buf: *mut c_char, len: c_uint, s: &str) -> HgmlReturn {
    if buf.is_null() {
        return HGML_ERROR_INVALID_ARGUMENT;
    }
    if s.len() + 1 > len as usize {
        return HGML_ERROR_INSUFFICIENT_SIZE;
    }
    // SAFETY: non-null; the caller promises `len` writable bytes and we write `s.len() + 1 <= len`.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, s.len());
        buf.add(s.len()).write(0);
    }
    HGML_SUCCESS
}

/// The `version` word a caller set at the start of a versioned struct.
fn version_of(versioned: *const c_uint) -> Option<c_uint> {
    if versioned.is_null() {
        return None;
    }
    // SAFETY: non-null; HGML makes the caller pass a versioned struct whose first field is
    // the `unsigned int version` it set.
    Some(unsafe { versioned.read() })
}

/// `s` as a fixed C char array, truncated to leave the terminating NUL.
fn c_array<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (slot, b) in out.iter_mut().zip(s.bytes().take(N - 1)) {
        *slot = b as c_char;
    }
    out
}

fn supported<T>(value: Option<T>, f: impl FnOnce(T) -> HgmlReturn) -> HgmlReturn {
    value.map_or(HGML_ERROR_NOT_SUPPORTED, f)
}

/// Domain, bus and device of a fixture bus id (`00000000:1B:00.0`, hex).
fn bus_fields(bus_id: &str) -> Option<(u32, u32, u32)> {
    let mut parts = bus_id.split([':', '.']);
    let mut field = || parts.next().and_then(|p| u32::from_str_radix(p, 16).ok());
    Some((field()?, field()?, field()?))
}

fn mig_enabled(d: &Device) -> bool {
    d.mig_mode
        .is_some_and(|m| m.current == HGML_DEVICE_MIG_ENABLE)
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlInit_v2() -> HgmlReturn {
    let mut st = state();
    if st.fixture.is_none() {
        match fixture::load() {
            Ok(f) => {
                if let Some(status) = f.init_status {
                    return status;
                }
                st.fixture = Some(f);
            }
            Err(LoadError::Missing) => return HGML_ERROR_DRIVER_NOT_LOADED,
            Err(LoadError::Invalid) => return HGML_ERROR_UNKNOWN,
        }
    }
    st.inits += 1;
    HGML_SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlShutdown() -> HgmlReturn {
    let mut st = state();
    if st.inits == 0 {
        return HGML_ERROR_UNINITIALIZED;
    }
    st.inits -= 1;
    if st.inits == 0 {
        st.fixture = None;
    }
    HGML_SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlSystemGetDriverVersion(version: *mut c_char, length: c_uint) -> HgmlReturn {
    with_fixture(|f| supported(f.driver_version.as_deref(), |v| put_str(version, length, v)))
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlSystemGetHggcDriverVersion_v2(version: *mut c_int) -> HgmlReturn {
    with_fixture(|f| supported(f.hggc_driver_version, |v| put(version, v)))
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetCount_v2(count: *mut c_uint) -> HgmlReturn {
    with_fixture(|f| put(count, f.devices.len() as c_uint))
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut HgmlDevice,
) -> HgmlReturn {
    with_fixture(|f| {
        if index as usize >= f.devices.len() {
            return HGML_ERROR_INVALID_ARGUMENT;
        }
        put(device, std::ptr::without_provenance_mut(index as usize + 1))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetUUID(
    device: HgmlDevice,
    uuid: *mut c_char,
    length: c_uint,
) -> HgmlReturn {
    with_device(device, |d| put_str(uuid, length, &d.uuid))
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetName(
    device: HgmlDevice,
    name: *mut c_char,
    length: c_uint,
) -> HgmlReturn {
    with_device(device, |d| put_str(name, length, &d.name))
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetMinorNumber(device: HgmlDevice, minor: *mut c_uint) -> HgmlReturn {
    with_device(device, |d| supported(d.minor, |m| put(minor, m)))
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetNumGpuCores(device: HgmlDevice, cores: *mut c_uint) -> HgmlReturn {
    with_device(device, |d| supported(d.cores, |c| put(cores, c)))
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetMemoryInfo_v2(
    device: HgmlDevice,
    memory: *mut HgmlMemoryV2,
) -> HgmlReturn {
    with_device(device, |d| {
        match version_of(memory.cast::<c_uint>()) {
            None => return HGML_ERROR_INVALID_ARGUMENT,
            Some(HGML_MEMORY_V2) => {}
            Some(_) => return HGML_ERROR_ARGUMENT_VERSION_MISMATCH,
        }
        let total = d.memory_total_mib * MIB;
        let used = d.memory_used_mib.unwrap_or(0) * MIB;
        put(
            memory,
            HgmlMemoryV2 {
                version: HGML_MEMORY_V2,
                total,
                reserved: 0,
                free: total.saturating_sub(used),
                used,
            },
        )
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetPciInfo_v2(
    device: HgmlDevice,
    pci: *mut HgmlPciInfoV2,
) -> HgmlReturn {
    with_device(device, |d| {
        let Some((domain, bus, dev)) = bus_fields(&d.pci_bus_id) else {
            return HGML_ERROR_UNKNOWN;
        };
        // The legacy string is `%04X:%02X:%02X.0`, 13 bytes with its NUL.
        let legacy = format!("{:04X}:{bus:02X}:{dev:02X}.0", domain & 0xffff);
        put(
            pci,
            HgmlPciInfoV2 {
                bus_id: c_array(&legacy),
                domain,
                bus,
                device: dev,
                pci_device_id: d.pci_device_id,
                pci_sub_system_id: 0,
                reserved: [0; 4],
            },
        )
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetHggcComputeCapability(
    device: HgmlDevice,
    major: *mut c_int,
    minor: *mut c_int,
) -> HgmlReturn {
    with_device(device, |d| {
        supported(d.compute_capability, |cc| {
            if major.is_null() || minor.is_null() {
                return HGML_ERROR_INVALID_ARGUMENT;
            }
            put(major, cc.major);
            put(minor, cc.minor)
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetMemoryErrorCounter(
    device: HgmlDevice,
    error_type: c_uint,
    counter_type: c_uint,
    location: c_uint,
    count: *mut c_ulonglong,
) -> HgmlReturn {
    with_device(device, |d| {
        if (error_type, counter_type, location)
            != (
                HGML_MEMORY_ERROR_TYPE_UNCORRECTED,
                HGML_VOLATILE_ECC,
                HGML_MEMORY_LOCATION_DRAM,
            )
        {
            return HGML_ERROR_NOT_SUPPORTED;
        }
        supported(d.ecc_uncorrected_volatile, |n| put(count, n))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetMigMode(
    device: HgmlDevice,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> HgmlReturn {
    with_device(device, |d| {
        supported(d.mig_mode, |m| {
            if current.is_null() || pending.is_null() {
                return HGML_ERROR_INVALID_ARGUMENT;
            }
            put(current, m.current);
            put(pending, m.pending)
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetGpuInstanceProfileInfoV(
    device: HgmlDevice,
    index: c_uint,
    info: *mut HgmlGpuInstanceProfileInfoV2,
) -> HgmlReturn {
    with_device(device, |d| {
        match version_of(info.cast::<c_uint>()) {
            None => return HGML_ERROR_INVALID_ARGUMENT,
            Some(HGML_PROFILE_INFO_V2) => {}
            Some(_) => return HGML_ERROR_ARGUMENT_VERSION_MISMATCH,
        }
        let profile = d.mig_profiles.iter().find(|p| p.index == index);
        let Some(p) = profile.filter(|_| mig_enabled(d)) else {
            return HGML_ERROR_NOT_SUPPORTED;
        };
        put(
            info,
            HgmlGpuInstanceProfileInfoV2 {
                version: HGML_PROFILE_INFO_V2,
                id: p.id,
                is_p2p_supported: 0,
                slice_count: p.slice_count,
                instance_count: p.instance_count,
                multiprocessor_count: 0,
                copy_engine_count: 0,
                decoder_count: 0,
                encoder_count: 0,
                jpeg_count: 0,
                ofa_count: 0,
                memory_size_mb: p.memory_size_mb,
                name: c_array(&p.name),
            },
        )
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetGpuInstancePossiblePlacements_v2(
    device: HgmlDevice,
    profile_id: c_uint,
    placements: *mut HgmlGpuInstancePlacement,
    count: *mut c_uint,
) -> HgmlReturn {
    with_device(device, |d| {
        let profile = d.mig_profiles.iter().find(|p| p.id == profile_id);
        let Some(p) = profile.filter(|_| mig_enabled(d)) else {
            return HGML_ERROR_NOT_SUPPORTED;
        };
        if count.is_null() {
            return HGML_ERROR_INVALID_ARGUMENT;
        }
        write_placements(&p.placements, placements, count)
    })
}

/// The count-then-fill protocol of the placement query: a null buffer asks for the count; a
/// buffer whose capacity (`*count` on entry) is too small gets `HGML_ERROR_INSUFFICIENT_SIZE`.
fn write_placements(
    slots: &[fixture::Slot],
    placements: *mut HgmlGpuInstancePlacement,
    count: *mut c_uint,
) -> HgmlReturn {
    let wanted = slots.len() as c_uint;
    if placements.is_null() {
        return put(count, wanted);
    }
    // SAFETY: `count` is non-null (checked by the caller); it holds the buffer's capacity.
    let capacity = unsafe { count.read() };
    if capacity < wanted {
        put(count, wanted);
        return HGML_ERROR_INSUFFICIENT_SIZE;
    }
    for (i, slot) in slots.iter().enumerate() {
        // SAFETY: `i < wanted <= capacity`, the number of writable placements the caller
        // promised at `placements`.
        unsafe {
            placements.add(i).write(HgmlGpuInstancePlacement {
                start: slot.start,
                size: slot.size,
            })
        };
    }
    put(count, wanted)
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetUtilizationRates(
    device: HgmlDevice,
    utilization: *mut HgmlUtilization,
) -> HgmlReturn {
    with_device(device, |d| {
        supported(d.utilization, |u| {
            put(
                utilization,
                HgmlUtilization {
                    gpu: u.gpu,
                    memory: u.memory,
                },
            )
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetTemperature(
    device: HgmlDevice,
    sensor: c_uint,
    temperature: *mut c_uint,
) -> HgmlReturn {
    with_device(device, |d| {
        if sensor != HGML_TEMPERATURE_GPU {
            return HGML_ERROR_INVALID_ARGUMENT;
        }
        supported(d.temperature, |t| put(temperature, t))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hgmlDeviceGetPowerUsage(device: HgmlDevice, power: *mut c_uint) -> HgmlReturn {
    with_device(device, |d| supported(d.power_usage_mw, |p| put(power, p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_pyhgml() {
        assert_eq!(size_of::<HgmlPciInfoV2>(), 52);
        assert_eq!(size_of::<HgmlMemoryV2>(), 40);
        assert_eq!(HGML_MEMORY_V2, 0x0200_0028);
        assert_eq!(size_of::<HgmlGpuInstanceProfileInfoV2>(), 152);
        assert_eq!(HGML_PROFILE_INFO_V2, 0x0200_0098);
        assert_eq!(size_of::<HgmlGpuInstancePlacement>(), 8);
    }

    #[test]
    fn bus_fields_parse_hgml_form() {
        assert_eq!(bus_fields("00000000:1B:00.0"), Some((0, 0x1b, 0)));
        assert_eq!(bus_fields("junk"), None);
    }
}
