//! A test stand-in for two vendors' NVML-style management libraries. It is neither vendor's code
//! and talks to no hardware: it serves the devices of a JSON fixture (named by the environment
//! variable `GPUSTACK_FAKE_NVML_FIXTURE`, see [`fixture`]) through the real C ABI, so that
//! detectors are exercised through their real loading path (`dlopen` by path) on machines
//! without accelerators. The same `.so` is installed into fixture trees as:
//!
//! - the NVIDIA driver's `libnvidia-ml.so.1` (NVML), loaded by the NVIDIA detector through
//!   nvml-wrapper, which calls the versioned names (`nvmlInit_v2`, `nvmlDeviceGetCount_v2`,
//!   `nvmlDeviceGetHandleByIndex_v2`, `nvmlDeviceGetPciInfo_v3`, `nvmlDeviceGetMemoryInfo_v2`,
//!   `nvmlSystemGetCudaDriverVersion_v2`) with nvml.h's layouts (`nvmlPciInfo_t` v3,
//!   `nvmlMemory_v2_t`, `nvmlUtilization_t`);
//! - Iluvatar CoreX's `libixml.so` (IXML, an NVML clone; Deep-Spark/go-ixml `pkg/ixml/api.h`),
//!   loaded by the Iluvatar detector through libloading, which calls the unversioned names
//!   Iluvatar's own loader uses (`nvmlInit`, `nvmlDeviceGetCount`, `nvmlDeviceGetHandleByIndex`,
//!   `nvmlDeviceGetPciInfo`, `nvmlDeviceGetMemoryInfo`, `nvmlSystemGetCudaDriverVersion`) with
//!   the v1 layouts (`nvmlMemory_t` `{total, free, used}`; NVML's 52-byte v1 `nvmlPciInfo_t`,
//!   whose bus id sits in the first 16 bytes, the hardest layout a caller has to read), plus
//!   IXML's own `ixmlDeviceGetHealth`.
//!
//! Both share the unsuffixed calls (`nvmlShutdown`, `nvmlDeviceGetUUID`, `nvmlDeviceGetName`,
//! `nvmlDeviceGetMinorNumber`, `nvmlDeviceGetCudaComputeCapability`,
//! `nvmlDeviceGetUtilizationRates`, `nvmlDeviceGetTemperature`, `nvmlDeviceGetPowerUsage`, …).
//! For a card in MIG mode it serves the fixture's GPU-instance profiles through
//! `nvmlDeviceGetGpuInstanceProfileInfoV` (the named 152-byte v2 record, version checked, which
//! the NVIDIA detector reads), `nvmlDeviceGetGpuInstanceProfileInfo` (the unnamed v1 record,
//! the one nvml-wrapper's `Device::profile_info` reads) and
//! `nvmlDeviceGetGpuInstancePossiblePlacements_v2`, and creates and destroys GPU and compute
//! instances as the device plugin drives them ([`instances`]).
//! A function neither detector calls is absent, so a detector that starts calling one fails
//! loudly (a missing symbol) instead of silently reading zeros.
//!
//! `nvmlInit`/`nvmlInit_v2` read the fixture; an unset variable or unreadable file answers
//! `NVML_ERROR_DRIVER_NOT_LOADED` (the driver is not there) and bad JSON `NVML_ERROR_UNKNOWN`.
//! Device handles (`nvmlDevice_t`) are opaque: the device's index plus one, never dereferenced.

// The contract of every exported function is nvml.h's: pointers are the caller's, valid for the
// documented sizes. Null pointers are checked and answered with NVML_ERROR_INVALID_ARGUMENT.
#![allow(clippy::missing_safety_doc)]

pub mod fixture;
pub mod instances;

use std::{
    ffi::{c_char, c_int, c_uint, c_ulonglong},
    sync::Mutex,
};

use fixture::{Device, Fixture, LoadError};

/// `nvmlReturn_t`.
pub type NvmlReturn = c_uint;

pub const NVML_SUCCESS: NvmlReturn = 0;
pub const NVML_ERROR_UNINITIALIZED: NvmlReturn = 1;
pub const NVML_ERROR_INVALID_ARGUMENT: NvmlReturn = 2;
pub const NVML_ERROR_NOT_SUPPORTED: NvmlReturn = 3;
pub const NVML_ERROR_INSUFFICIENT_SIZE: NvmlReturn = 7;
pub const NVML_ERROR_DRIVER_NOT_LOADED: NvmlReturn = 9;
pub const NVML_ERROR_ARGUMENT_VERSION_MISMATCH: NvmlReturn = 25;
pub const NVML_ERROR_UNKNOWN: NvmlReturn = 999;

/// `nvmlEnableState_t`.
const NVML_FEATURE_DISABLED: c_uint = 0;
const NVML_FEATURE_ENABLED: c_uint = 1;
/// `nvmlMemoryErrorType_t`.
const NVML_MEMORY_ERROR_TYPE_CORRECTED: c_uint = 0;
const NVML_MEMORY_ERROR_TYPE_UNCORRECTED: c_uint = 1;
/// `nvmlEccCounterType_t`: volatile (since the last driver load) and aggregate (lifetime), each
/// served from its own fixture figure.
const NVML_VOLATILE_ECC: c_uint = 0;
const NVML_AGGREGATE_ECC: c_uint = 1;
/// `nvmlTemperatureSensors_t`.
const NVML_TEMPERATURE_GPU: c_uint = 0;
/// `NVML_DEVICE_MIG_ENABLE`.
const NVML_DEVICE_MIG_ENABLE: c_uint = 1;
/// nvml.h's `NVML_DEVICE_NAME_V2_BUFFER_SIZE`, the profile record's name array.
const PROFILE_NAME_BUFFER: usize = 96;

const MIB: u64 = 1024 * 1024;

/// `struct nvmlDevice_st`: opaque to callers.
#[repr(C)]
pub struct NvmlDeviceSt {
    _opaque: [u8; 0],
}

/// `nvmlDevice_t`.
pub type NvmlDevice = *mut NvmlDeviceSt;

/// `nvmlPciInfo_t` (v3, as `nvmlDeviceGetPciInfo_v3` fills it).
#[repr(C)]
pub struct NvmlPciInfo {
    pub bus_id_legacy: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub bus_id: [c_char; 32],
}

/// NVML's original `nvmlPciInfo_t` (v1), as the unversioned `nvmlDeviceGetPciInfo` fills it.
#[repr(C)]
pub struct NvmlPciInfoV1 {
    pub bus_id: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub reserved: [c_uint; 4],
}

/// `nvmlMemory_t` (v1).
#[repr(C)]
pub struct NvmlMemory {
    pub total: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `nvmlMemory_v2_t`.
#[repr(C)]
pub struct NvmlMemoryV2 {
    pub version: c_uint,
    pub total: c_ulonglong,
    pub reserved: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `nvmlMemory_v2`: `NVML_STRUCT_VERSION(Memory, 2)`.
const NVML_MEMORY_V2: c_uint = (size_of::<NvmlMemoryV2>() as c_uint) | (2 << 24);

/// `nvmlUtilization_t`.
#[repr(C)]
pub struct NvmlUtilization {
    pub gpu: c_uint,
    pub memory: c_uint,
}

/// `nvmlGpuInstanceProfileInfo_t` (v1: no version word, no name).
#[repr(C)]
pub struct NvmlGpuInstanceProfileInfo {
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

/// `nvmlGpuInstanceProfileInfo_v2_t`.
#[repr(C)]
pub struct NvmlGpuInstanceProfileInfoV2 {
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

/// `nvmlGpuInstanceProfileInfo_v2`: `NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2)`.
const NVML_PROFILE_INFO_V2: c_uint =
    (size_of::<NvmlGpuInstanceProfileInfoV2>() as c_uint) | (2 << 24);

/// `nvmlGpuInstancePlacement_t`.
#[repr(C)]
pub struct NvmlGpuInstancePlacement {
    pub start: c_uint,
    pub size: c_uint,
}

/// The loaded fixture, with NVML's reference-counted init/shutdown.
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

fn with_fixture(f: impl FnOnce(&Fixture) -> NvmlReturn) -> NvmlReturn {
    match &state().fixture {
        Some(fixture) => f(fixture),
        None => NVML_ERROR_UNINITIALIZED,
    }
}

fn with_device(handle: NvmlDevice, f: impl FnOnce(&Device) -> NvmlReturn) -> NvmlReturn {
    with_fixture(|fixture| {
        let index = handle.addr().wrapping_sub(1);
        match fixture.devices.get(index) {
            Some(device) => f(device),
            None => NVML_ERROR_INVALID_ARGUMENT,
        }
    })
}

/// Writes `value` through a caller's out-pointer.
fn put<T>(out: *mut T, value: T) -> NvmlReturn {
    if out.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: non-null, and nvml.h makes the caller pass a pointer to a writable `T`.
    unsafe { out.write(value) };
    NVML_SUCCESS
}

/// Copies `s` NUL-terminated into a caller's buffer of `len` bytes.
fn put_str(buf: *mut c_char, len: c_uint, s: &str) -> NvmlReturn {
    if buf.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if s.len() + 1 > len as usize {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    // SAFETY: non-null; the caller promises `len` writable bytes and we write `s.len() + 1 <= len`.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, s.len());
        buf.add(s.len()).write(0);
    }
    NVML_SUCCESS
}

/// The `version` field the caller set in its `nvmlMemory_v2_t`.
fn memory_version(memory: *const NvmlMemoryV2) -> Option<c_uint> {
    if memory.is_null() {
        return None;
    }
    // SAFETY: non-null; nvml.h makes the caller pass an `nvmlMemory_v2_t` with `version` set.
    Some(unsafe { (*memory).version })
}

/// The `version` word a caller set at the start of a versioned struct.
fn version_of(versioned: *const c_uint) -> Option<c_uint> {
    if versioned.is_null() {
        return None;
    }
    // SAFETY: non-null; nvml.h makes the caller pass a versioned struct whose first field is
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

fn supported<T>(value: Option<T>, f: impl FnOnce(T) -> NvmlReturn) -> NvmlReturn {
    value.map_or(NVML_ERROR_NOT_SUPPORTED, f)
}

/// Both init entry points: NVML's reference-counted init, loading the fixture once.
fn init() -> NvmlReturn {
    let mut st = state();
    if st.fixture.is_none() {
        match fixture::load() {
            Ok(f) => st.fixture = Some(f),
            Err(LoadError::Missing) => return NVML_ERROR_DRIVER_NOT_LOADED,
            Err(LoadError::Invalid) => return NVML_ERROR_UNKNOWN,
        }
    }
    st.inits += 1;
    NVML_SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> NvmlReturn {
    init()
}

/// IXML's (and NVML's legacy) unversioned init.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> NvmlReturn {
    init()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> NvmlReturn {
    let mut st = state();
    if st.inits == 0 {
        return NVML_ERROR_UNINITIALIZED;
    }
    st.inits -= 1;
    if st.inits == 0 {
        st.fixture = None;
    }
    NVML_SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetDriverVersion(version: *mut c_char, length: c_uint) -> NvmlReturn {
    with_fixture(|f| supported(f.driver_version.as_deref(), |v| put_str(version, length, v)))
}

fn cuda_driver_version(version: *mut c_int) -> NvmlReturn {
    with_fixture(|f| supported(f.cuda_driver_version, |v| put(version, v)))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> NvmlReturn {
    cuda_driver_version(version)
}

/// IXML's CUDA-compatible driver version; the same encoding (`1000 * major + 10 * minor`).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> NvmlReturn {
    cuda_driver_version(version)
}

fn device_count(count: *mut c_uint) -> NvmlReturn {
    with_fixture(|f| put(count, f.devices.len() as c_uint))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> NvmlReturn {
    device_count(count)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCount(count: *mut c_uint) -> NvmlReturn {
    device_count(count)
}

fn handle_by_index(index: c_uint, device: *mut NvmlDevice) -> NvmlReturn {
    with_fixture(|f| {
        if index as usize >= f.devices.len() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        put(device, std::ptr::without_provenance_mut(index as usize + 1))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    handle_by_index(index, device)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetHandleByIndex(index: c_uint, device: *mut NvmlDevice) -> NvmlReturn {
    handle_by_index(index, device)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetUUID(
    device: NvmlDevice,
    uuid: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    if instances::is_mig_handle(device) {
        return instances::mig_device_uuid(device, uuid, length);
    }
    with_device(device, |d| put_str(uuid, length, &d.uuid))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetName(
    device: NvmlDevice,
    name: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    with_device(device, |d| put_str(name, length, &d.name))
}

/// Domain, bus and device of a fixture bus id (`00000000:18:00.0`, hex).
fn bus_fields(bus_id: &str) -> Option<(u32, u32, u32)> {
    let mut parts = bus_id.split([':', '.']);
    let mut field = || parts.next().and_then(|p| u32::from_str_radix(p, 16).ok());
    Some((field()?, field()?, field()?))
}

/// nvml.h's legacy bus id format, `%04X:%02X:%02X.0`.
fn legacy_bus_id(domain: u32, bus: u32, dev: u32) -> String {
    format!("{domain:04x}:{bus:02x}:{dev:02x}.0").to_ascii_uppercase()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPciInfo_v3(device: NvmlDevice, pci: *mut NvmlPciInfo) -> NvmlReturn {
    with_device(device, |d| {
        let Some((domain, bus, dev)) = bus_fields(&d.pci_bus_id) else {
            return NVML_ERROR_UNKNOWN;
        };
        let legacy = legacy_bus_id(domain, bus, dev);
        put(
            pci,
            NvmlPciInfo {
                bus_id_legacy: c_array(&legacy),
                domain,
                bus,
                device: dev,
                pci_device_id: d.pci_device_id,
                pci_sub_system_id: d.pci_sub_system_id,
                bus_id: c_array(&d.pci_bus_id),
            },
        )
    })
}

/// The unversioned `nvmlDeviceGetPciInfo`: NVML's original (v1) layout, which has only the
/// 16-byte bus id and ends in reserved words. IXML's header declares the longer v3 struct for
/// this name; serving the short one checks that a caller copes with either.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPciInfo(device: NvmlDevice, pci: *mut NvmlPciInfoV1) -> NvmlReturn {
    with_device(device, |d| {
        let Some((domain, bus, dev)) = bus_fields(&d.pci_bus_id) else {
            return NVML_ERROR_UNKNOWN;
        };
        put(
            pci,
            NvmlPciInfoV1 {
                bus_id: c_array(&legacy_bus_id(domain, bus, dev)),
                domain,
                bus,
                device: dev,
                pci_device_id: d.pci_device_id,
                pci_sub_system_id: d.pci_sub_system_id,
                reserved: [0; 4],
            },
        )
    })
}

/// The unversioned `nvmlDeviceGetMemoryInfo` with the v1 `nvmlMemory_t`, whose `used` counts
/// the driver's reservation too (nvml.h: "Sum of Reserved and Allocated device memory").
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMemoryInfo(
    device: NvmlDevice,
    memory: *mut NvmlMemory,
) -> NvmlReturn {
    if instances::is_mig_handle(device) {
        return match instances::mig_device_memory(device) {
            Ok((total, used)) => put(
                memory,
                NvmlMemory {
                    total: total * MIB,
                    free: (total - used) * MIB,
                    used: used * MIB,
                },
            ),
            Err(status) => status,
        };
    }
    with_device(device, |d| {
        let Some(used) = d.memory_used_mib else {
            return NVML_ERROR_NOT_SUPPORTED;
        };
        let total = d.memory_total_mib * MIB;
        let used = (used + d.memory_reserved_mib) * MIB;
        put(
            memory,
            NvmlMemory {
                total,
                free: total.saturating_sub(used),
                used,
            },
        )
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: NvmlDevice,
    memory: *mut NvmlMemoryV2,
) -> NvmlReturn {
    if instances::is_mig_handle(device) {
        if memory_version(memory) != Some(NVML_MEMORY_V2) {
            return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        }
        return match instances::mig_device_memory(device) {
            Ok((total, used)) => put(
                memory,
                NvmlMemoryV2 {
                    version: NVML_MEMORY_V2,
                    total: total * MIB,
                    reserved: 0,
                    free: (total - used) * MIB,
                    used: used * MIB,
                },
            ),
            Err(status) => status,
        };
    }
    with_device(device, |d| {
        let Some(version) = memory_version(memory) else {
            return NVML_ERROR_INVALID_ARGUMENT;
        };
        if version != NVML_MEMORY_V2 {
            return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        }
        let Some(used) = d.memory_used_mib else {
            return NVML_ERROR_NOT_SUPPORTED;
        };
        let total = d.memory_total_mib * MIB;
        let reserved = d.memory_reserved_mib * MIB;
        let used = used * MIB;
        put(
            memory,
            NvmlMemoryV2 {
                version,
                total,
                reserved,
                free: total.saturating_sub(reserved).saturating_sub(used),
                used,
            },
        )
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetNumGpuCores(device: NvmlDevice, cores: *mut c_uint) -> NvmlReturn {
    with_device(device, |d| supported(d.cores, |c| put(cores, c)))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMinorNumber(device: NvmlDevice, minor: *mut c_uint) -> NvmlReturn {
    with_device(device, |d| supported(d.minor, |m| put(minor, m)))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: NvmlDevice,
    major: *mut c_int,
    minor: *mut c_int,
) -> NvmlReturn {
    with_device(device, |d| {
        supported(d.cuda_compute_capability, |cc| {
            if major.is_null() || minor.is_null() {
                return NVML_ERROR_INVALID_ARGUMENT;
            }
            put(major, cc.major);
            put(minor, cc.minor)
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetEccMode(
    device: NvmlDevice,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> NvmlReturn {
    with_device(device, |d| {
        supported(d.ecc_enabled, |on| {
            if current.is_null() || pending.is_null() {
                return NVML_ERROR_INVALID_ARGUMENT;
            }
            let state = if on {
                NVML_FEATURE_ENABLED
            } else {
                NVML_FEATURE_DISABLED
            };
            put(current, state);
            put(pending, state)
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: NvmlDevice,
    error_type: c_uint,
    counter_type: c_uint,
    count: *mut c_ulonglong,
) -> NvmlReturn {
    with_device(device, |d| {
        if !matches!(counter_type, NVML_VOLATILE_ECC | NVML_AGGREGATE_ECC) {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        let figure = match (error_type, counter_type) {
            (NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC) => d.ecc_corrected_volatile,
            (NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC) => d.ecc_uncorrected_volatile,
            (NVML_MEMORY_ERROR_TYPE_CORRECTED, _) => d.ecc_corrected_aggregate,
            (NVML_MEMORY_ERROR_TYPE_UNCORRECTED, _) => d.ecc_uncorrected_aggregate,
            _ => return NVML_ERROR_INVALID_ARGUMENT,
        };
        supported(figure, |n| put(count, n))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMemoryBusWidth(
    device: NvmlDevice,
    width: *mut c_uint,
) -> NvmlReturn {
    with_device(device, |d| supported(d.memory_bus_width, |w| put(width, w)))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMigMode(
    device: NvmlDevice,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> NvmlReturn {
    with_device(device, |d| {
        supported(d.mig_mode, |m| {
            if current.is_null() || pending.is_null() {
                return NVML_ERROR_INVALID_ARGUMENT;
            }
            put(current, m.current);
            put(pending, m.pending)
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetUtilizationRates(
    device: NvmlDevice,
    utilization: *mut NvmlUtilization,
) -> NvmlReturn {
    with_device(device, |d| {
        supported(d.utilization, |u| {
            put(
                utilization,
                NvmlUtilization {
                    gpu: u.gpu,
                    memory: u.memory,
                },
            )
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTemperature(
    device: NvmlDevice,
    sensor: c_uint,
    temp: *mut c_uint,
) -> NvmlReturn {
    with_device(device, |d| {
        if sensor != NVML_TEMPERATURE_GPU {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        supported(d.temperature, |t| put(temp, t))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPowerUsage(device: NvmlDevice, power: *mut c_uint) -> NvmlReturn {
    with_device(device, |d| supported(d.power_usage_mw, |p| put(power, p)))
}

fn mig_enabled(d: &Device) -> bool {
    d.mig_mode
        .is_some_and(|m| m.current == NVML_DEVICE_MIG_ENABLE)
}

/// The fixture profile at enumeration `index`, while the card is in MIG mode.
fn profile_at(d: &Device, index: c_uint) -> Option<&fixture::MigProfile> {
    d.mig_profiles
        .iter()
        .find(|p| p.index == index)
        .filter(|_| mig_enabled(d))
}

/// The unnamed v1 record.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGpuInstanceProfileInfo(
    device: NvmlDevice,
    profile: c_uint,
    info: *mut NvmlGpuInstanceProfileInfo,
) -> NvmlReturn {
    with_device(device, |d| {
        let Some(p) = profile_at(d, profile) else {
            return NVML_ERROR_NOT_SUPPORTED;
        };
        put(
            info,
            NvmlGpuInstanceProfileInfo {
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
            },
        )
    })
}

/// The named v2 record; the caller sets its version word, as for every versioned call.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGpuInstanceProfileInfoV(
    device: NvmlDevice,
    profile: c_uint,
    info: *mut NvmlGpuInstanceProfileInfoV2,
) -> NvmlReturn {
    with_device(device, |d| {
        match version_of(info.cast::<c_uint>()) {
            None => return NVML_ERROR_INVALID_ARGUMENT,
            Some(NVML_PROFILE_INFO_V2) => {}
            Some(_) => return NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
        }
        let Some(p) = profile_at(d, profile) else {
            return NVML_ERROR_NOT_SUPPORTED;
        };
        put(
            info,
            NvmlGpuInstanceProfileInfoV2 {
                version: NVML_PROFILE_INFO_V2,
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

/// The legal slots of the profile with creation id `profile_id` on an empty card: with a null
/// buffer, the count; else up to `*count` slots and the number written.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGpuInstancePossiblePlacements_v2(
    device: NvmlDevice,
    profile_id: c_uint,
    placements: *mut NvmlGpuInstancePlacement,
    count: *mut c_uint,
) -> NvmlReturn {
    with_device(device, |d| {
        let profile = d.mig_profiles.iter().find(|p| p.id == profile_id);
        let Some(p) = profile.filter(|_| mig_enabled(d)) else {
            return NVML_ERROR_NOT_SUPPORTED;
        };
        if count.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        write_placements(&p.placements, placements, count)
    })
}

/// Answers a placements query into the caller's buffer; `count` is non-null.
fn write_placements(
    slots: &[fixture::Slot],
    placements: *mut NvmlGpuInstancePlacement,
    count: *mut c_uint,
) -> NvmlReturn {
    let wanted = slots.len() as c_uint;
    if placements.is_null() {
        return put(count, wanted);
    }
    // SAFETY: non-null (the caller checked); it holds the buffer's capacity.
    let capacity = unsafe { count.read() };
    if capacity < wanted {
        put(count, wanted);
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (i, slot) in slots.iter().enumerate() {
        // SAFETY: `i < wanted <= capacity`, the placements the caller made writable.
        unsafe {
            placements.add(i).write(NvmlGpuInstancePlacement {
                start: slot.start,
                size: slot.size,
            })
        };
    }
    put(count, wanted)
}

/// IXML's health query (api.h: `ixmlDeviceGetHealth(nvmlDevice_t, unsigned long long *)`), a
/// bitmask of `ixmlHealth*` flags.
#[unsafe(no_mangle)]
pub extern "C" fn ixmlDeviceGetHealth(device: NvmlDevice, health: *mut c_ulonglong) -> NvmlReturn {
    with_device(device, |d| supported(d.health, |h| put(health, h)))
}

/// `nvmlProcessInfo_v2_t` (nvml.h; what `nvmlProcessInfo_t` is since the `_v3` calls).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NvmlProcessInfo {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

/// nvml.h's `NVML_VALUE_NOT_AVAILABLE` (-1) as each field holds it.
const NOT_AVAILABLE_U64: c_ulonglong = c_ulonglong::MAX;
const NOT_AVAILABLE_U32: c_uint = c_uint::MAX;

/// `nvmlDeviceGetComputeRunningProcesses_v3`: with `infos` null or `count` too small, the count
/// needed and `NVML_ERROR_INSUFFICIENT_SIZE` (success when there are none).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: NvmlDevice,
    count: *mut c_uint,
    infos: *mut NvmlProcessInfo,
) -> NvmlReturn {
    running_processes(device, count, infos)
}

/// The body of `nvmlDeviceGetComputeRunningProcesses_v3` (private, as every pointer writer here).
fn running_processes(
    device: NvmlDevice,
    count: *mut c_uint,
    infos: *mut NvmlProcessInfo,
) -> NvmlReturn {
    if count.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    with_device(device, |d| {
        let Some(list) = &d.processes else {
            return NVML_ERROR_NOT_SUPPORTED;
        };
        // SAFETY: non-null, and nvml.h makes the caller pass a readable and writable count.
        let room = unsafe { count.read() } as usize;
        let needed = list.len() as c_uint;
        if list.is_empty() {
            return put(count, 0);
        }
        if infos.is_null() || room < list.len() {
            put(count, needed);
            return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        for (i, p) in list.iter().enumerate() {
            // SAFETY: the caller promises `room` writable records and `i < list.len() <= room`.
            unsafe {
                infos.add(i).write(NvmlProcessInfo {
                    pid: p.pid,
                    used_gpu_memory: p.used_memory_mib.map_or(NOT_AVAILABLE_U64, |m| m * MIB),
                    gpu_instance_id: NOT_AVAILABLE_U32,
                    compute_instance_id: NOT_AVAILABLE_U32,
                })
            };
        }
        put(count, needed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_nvml_h() {
        // nvml.h: nvmlPciInfo_t is 16 + 5 * 4 + 32 bytes; nvmlMemory_v2_t has 4 bytes of
        // padding after `version`.
        assert_eq!(size_of::<NvmlPciInfo>(), 68);
        assert_eq!(size_of::<NvmlMemoryV2>(), 40);
        assert_eq!(size_of::<NvmlProcessInfo>(), 24);
        assert_eq!(NVML_MEMORY_V2, 40 | (2 << 24));
        // v1 layouts served to IXML callers: 16 + 9 * 4 bytes, and three counters.
        assert_eq!(size_of::<NvmlPciInfoV1>(), 52);
        assert_eq!(size_of::<NvmlMemory>(), 24);
        // GPU-instance records: 10 words and a u64 (v1); the v2 adds the version word, 4 bytes
        // of padding and the 96-byte name (`0x02000098`).
        assert_eq!(size_of::<NvmlGpuInstanceProfileInfo>(), 48);
        assert_eq!(size_of::<NvmlGpuInstanceProfileInfoV2>(), 152);
        assert_eq!(NVML_PROFILE_INFO_V2, 0x0200_0098);
    }

    #[test]
    fn strings_are_bounded() {
        let mut buf = [1 as c_char; 4];
        assert_eq!(
            put_str(buf.as_mut_ptr(), 4, "abcd"),
            NVML_ERROR_INSUFFICIENT_SIZE
        );
        assert_eq!(put_str(buf.as_mut_ptr(), 4, "abc"), NVML_SUCCESS);
        assert_eq!(buf, [b'a' as c_char, b'b' as c_char, b'c' as c_char, 0]);
        assert_eq!(
            c_array::<4>("abcdef"),
            [b'a' as c_char, b'b' as c_char, b'c' as c_char, 0]
        );
    }
}
