//! A test stand-in for Moore Threads' `libmtml.so`, the MTML management library of the Moore
//! Threads GPU driver, which cannot exist on a build machine (it needs the driver and the GPUs).
//! It is not Moore Threads code and talks to no hardware: it serves the devices of a JSON
//! fixture (named by the environment variable `GPUSTACK_FAKE_MTML_FIXTURE`, see [`fixture`])
//! through the real MTML C ABI, so that the Moore Threads detector is exercised through its
//! real loading path (`dlopen` by path) on machines without a Moore Threads GPU.
//!
//! It exports exactly the MTML functions the detector calls, with the MTML header's names,
//! argument types, return codes (`MtmlReturn`: 0 success, else an error number) and the
//! `MtmlPciInfo` layout. MTML's handles are opaque pointers; here each is a tagged address
//! (kind in the high bits, device index in the low ones) that points at nothing, so a handle of
//! the wrong kind, or one never handed out, is answered with `MTML_ERROR_INVALID_ARGUMENT`
//! instead of being dereferenced. Handles handed out and not yet freed are counted, and
//! `mtmlLibraryShutDown` names any still out on stderr, so that a test sees the detector release
//! every one.
//!
//! `mtmlLibraryInit` reads the fixture: an unset variable or unreadable file answers
//! `MTML_ERROR_DRIVER_NOT_LOADED`, bad JSON `MTML_ERROR_UNKNOWN`.

// The contract of every exported function is the header's: pointers are the caller's, valid for
// the documented sizes. Null pointers are checked and answered with MTML_ERROR_INVALID_ARGUMENT.
#![allow(clippy::missing_safety_doc)]

pub mod fixture;

use std::{
    ffi::{c_char, c_float, c_int, c_uint, c_ulonglong, c_void},
    sync::{
        Mutex,
        atomic::{AtomicI64, Ordering},
    },
};

use fixture::{Device, Fixture, LoadError};
use gpustack_fake_abi::{Answers, c_array};

pub const MTML_SUCCESS: c_uint = 0;
pub const MTML_ERROR_DRIVER_NOT_LOADED: c_uint = 1;
pub const MTML_ERROR_INVALID_ARGUMENT: c_uint = 3;
pub const MTML_ERROR_NOT_SUPPORTED: c_uint = 4;
pub const MTML_ERROR_INSUFFICIENT_SIZE: c_uint = 6;
pub const MTML_ERROR_NOT_FOUND: c_uint = 7;
pub const MTML_ERROR_UNKNOWN: c_uint = 999;
pub const MTML_ERROR_UNINITIALIZED: c_uint = 666;

/// `MTML_MEMORY_ERROR_TYPE_UNCORRECTED`, `MTML_VOLATILE_ECC`, `MTML_MEMORY_LOCATION_DRAM`.
const ERROR_UNCORRECTED: c_uint = 1;
const VOLATILE_ECC: c_uint = 0;
const LOCATION_DRAM: c_uint = 1;

/// `MtmlPciInfo` (MTML 2.x, 104 bytes).
#[repr(C)]
pub struct MtmlPciInfo {
    pub sbdf: [c_char; 32],
    pub segment: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_subsystem_id: c_uint,
    pub bus_width: c_uint,
    pub pci_max_speed: c_float,
    pub pci_cur_speed: c_float,
    pub pci_max_width: c_uint,
    pub pci_cur_width: c_uint,
    pub pci_max_gen: c_uint,
    pub pci_cur_gen: c_uint,
    pub rsvd: [c_int; 6],
}

/// The kinds of handle, in the address's high bits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Library = 1,
    System = 2,
    Device = 3,
    Memory = 4,
    Gpu = 5,
}

const KIND_SHIFT: u32 = 16;

fn handle(kind: Kind, index: usize) -> *mut c_void {
    std::ptr::without_provenance_mut(((kind as usize) << KIND_SHIFT) | index)
}

/// The device index behind a handle of `kind`, if it is one.
fn index_of(h: *const c_void, kind: Kind) -> Option<usize> {
    let addr = h.addr();
    ((addr >> KIND_SHIFT) == kind as usize).then_some(addr & ((1 << KIND_SHIFT) - 1))
}

/// The loaded fixture; cleared by `mtmlLibraryShutDown`.
static STATE: Mutex<Option<Fixture>> = Mutex::new(None);
/// Handles handed out and not yet freed (the library handle included).
static LIVE: AtomicI64 = AtomicI64::new(0);

fn state() -> std::sync::MutexGuard<'static, Option<Fixture>> {
    gpustack_fake_abi::lock(&STATE)
}

/// Runs `f` on the device behind handle `h` of `kind`.
fn with_device(h: *const c_void, kind: Kind, f: impl FnOnce(&Device) -> c_uint) -> c_uint {
    let Some(index) = index_of(h, kind) else {
        return MTML_ERROR_INVALID_ARGUMENT;
    };
    match &*state() {
        Some(fixture) => match fixture.devices.get(index) {
            Some(d) => f(d),
            None => MTML_ERROR_NOT_FOUND,
        },
        None => MTML_ERROR_UNINITIALIZED,
    }
}

/// The status codes of the shared writers.
const ANSWERS: Answers<c_uint> = Answers {
    ok: MTML_SUCCESS,
    invalid_argument: MTML_ERROR_INVALID_ARGUMENT,
    insufficient_size: MTML_ERROR_INSUFFICIENT_SIZE,
};

/// Writes `value` through a caller's out-pointer.
fn put<T>(out: *mut T, value: T) -> c_uint {
    ANSWERS.put(out, value)
}

/// Hands out a new handle through `out`.
fn put_handle(out: *mut *mut c_void, kind: Kind, index: usize) -> c_uint {
    let code = put(out, handle(kind, index));
    if code == MTML_SUCCESS {
        LIVE.fetch_add(1, Ordering::SeqCst);
    }
    code
}

/// Takes back a handle of `kind`.
fn free(h: *mut c_void, kind: Kind) -> c_uint {
    if index_of(h, kind).is_none() {
        return MTML_ERROR_INVALID_ARGUMENT;
    }
    LIVE.fetch_sub(1, Ordering::SeqCst);
    MTML_SUCCESS
}

fn supported<T>(value: Option<T>, f: impl FnOnce(T) -> c_uint) -> c_uint {
    value.map_or(MTML_ERROR_NOT_SUPPORTED, f)
}

/// Copies `s` and its NUL into the caller's buffer of `length` bytes.
fn put_string(s: &str, buf: *mut c_char, length: c_uint) -> c_uint {
    ANSWERS.put_str(buf, length, s)
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlLibraryInit(lib: *mut *mut c_void) -> c_uint {
    let mut st = state();
    if st.is_none() {
        match fixture::load() {
            Ok(f) => *st = Some(f),
            Err(LoadError::Missing) => return MTML_ERROR_DRIVER_NOT_LOADED,
            Err(LoadError::Invalid) => return MTML_ERROR_UNKNOWN,
        }
    }
    put_handle(lib, Kind::Library, 0)
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlLibraryShutDown(lib: *mut c_void) -> c_uint {
    let code = free(lib, Kind::Library);
    if code == MTML_SUCCESS {
        *state() = None;
        // Every device, system, memory and GPU handle should be back by now; say so on stderr
        // (where the tests look) when one is not.
        let leaked = LIVE.load(Ordering::SeqCst);
        if leaked != 0 {
            eprintln!(
                "gpustack-fake-mtml: {leaked} handle(s) not freed before mtmlLibraryShutDown"
            );
        }
    }
    code
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlLibraryCountDevice(lib: *const c_void, count: *mut c_uint) -> c_uint {
    if index_of(lib, Kind::Library).is_none() {
        return MTML_ERROR_INVALID_ARGUMENT;
    }
    match &*state() {
        Some(f) => put(count, f.devices.len() as c_uint),
        None => MTML_ERROR_UNINITIALIZED,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlLibraryInitDeviceByIndex(
    lib: *const c_void,
    index: c_uint,
    device: *mut *mut c_void,
) -> c_uint {
    if index_of(lib, Kind::Library).is_none() {
        return MTML_ERROR_INVALID_ARGUMENT;
    }
    match &*state() {
        Some(f) if (index as usize) < f.devices.len() => {
            put_handle(device, Kind::Device, index as usize)
        }
        Some(_) => MTML_ERROR_NOT_FOUND,
        None => MTML_ERROR_UNINITIALIZED,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlLibraryFreeDevice(device: *mut c_void) -> c_uint {
    free(device, Kind::Device)
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlLibraryInitSystem(lib: *const c_void, system: *mut *mut c_void) -> c_uint {
    if index_of(lib, Kind::Library).is_none() {
        return MTML_ERROR_INVALID_ARGUMENT;
    }
    put_handle(system, Kind::System, 0)
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlLibraryFreeSystem(system: *mut c_void) -> c_uint {
    free(system, Kind::System)
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlSystemGetDriverVersion(
    system: *const c_void,
    version: *mut c_char,
    length: c_uint,
) -> c_uint {
    if index_of(system, Kind::System).is_none() {
        return MTML_ERROR_INVALID_ARGUMENT;
    }
    match &*state() {
        Some(f) => supported(f.driver_version.as_deref(), |v| {
            put_string(v, version, length)
        }),
        None => MTML_ERROR_UNINITIALIZED,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlDeviceGetUUID(
    device: *const c_void,
    uuid: *mut c_char,
    length: c_uint,
) -> c_uint {
    with_device(device, Kind::Device, |d| put_string(&d.uuid, uuid, length))
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlDeviceGetName(
    device: *const c_void,
    name: *mut c_char,
    length: c_uint,
) -> c_uint {
    with_device(device, Kind::Device, |d| put_string(&d.name, name, length))
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlDeviceGetPciInfo(device: *const c_void, pci: *mut MtmlPciInfo) -> c_uint {
    with_device(device, Kind::Device, |d| {
        supported(d.sbdf.as_deref(), |sbdf| {
            put(
                pci,
                MtmlPciInfo {
                    sbdf: c_array(sbdf),
                    segment: 0,
                    bus: 0,
                    device: 0,
                    pci_device_id: 0x0222,
                    pci_subsystem_id: 0,
                    bus_width: 16,
                    pci_max_speed: 32.0,
                    pci_cur_speed: 32.0,
                    pci_max_width: 16,
                    pci_cur_width: 16,
                    pci_max_gen: 5,
                    pci_cur_gen: 5,
                    rsvd: [0; 6],
                },
            )
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlDeviceGetPowerUsage(device: *const c_void, power: *mut c_uint) -> c_uint {
    with_device(device, Kind::Device, |d| {
        supported(d.power_mw, |p| put(power, p))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlDeviceCountGpuCores(device: *const c_void, count: *mut c_uint) -> c_uint {
    with_device(device, Kind::Device, |d| {
        supported(d.gpu_cores, |c| put(count, c))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlDeviceInitMemory(device: *const c_void, memory: *mut *mut c_void) -> c_uint {
    let Some(index) = index_of(device, Kind::Device) else {
        return MTML_ERROR_INVALID_ARGUMENT;
    };
    put_handle(memory, Kind::Memory, index)
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlDeviceFreeMemory(memory: *mut c_void) -> c_uint {
    free(memory, Kind::Memory)
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlMemoryGetTotal(memory: *const c_void, total: *mut c_ulonglong) -> c_uint {
    with_device(memory, Kind::Memory, |d| {
        supported(d.memory_total_bytes, |t| put(total, t))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlMemoryGetUsed(memory: *const c_void, used: *mut c_ulonglong) -> c_uint {
    with_device(memory, Kind::Memory, |d| {
        supported(d.memory_used_bytes, |u| put(used, u))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlMemoryGetEccErrorCounter(
    memory: *const c_void,
    error_type: c_uint,
    counter_type: c_uint,
    location: c_uint,
    count: *mut c_ulonglong,
) -> c_uint {
    with_device(memory, Kind::Memory, |d| {
        if (error_type, counter_type, location) != (ERROR_UNCORRECTED, VOLATILE_ECC, LOCATION_DRAM)
        {
            return MTML_ERROR_NOT_SUPPORTED;
        }
        supported(d.uncorrected_ecc_errors, |n| put(count, n))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlDeviceInitGpu(device: *const c_void, gpu: *mut *mut c_void) -> c_uint {
    let Some(index) = index_of(device, Kind::Device) else {
        return MTML_ERROR_INVALID_ARGUMENT;
    };
    put_handle(gpu, Kind::Gpu, index)
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlDeviceFreeGpu(gpu: *mut c_void) -> c_uint {
    free(gpu, Kind::Gpu)
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlGpuGetUtilization(gpu: *const c_void, utilization: *mut c_uint) -> c_uint {
    with_device(gpu, Kind::Gpu, |d| {
        supported(d.gpu_utilization, |u| put(utilization, u))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn mtmlGpuGetTemperature(gpu: *const c_void, temperature: *mut c_uint) -> c_uint {
    with_device(gpu, Kind::Gpu, |d| {
        supported(d.temperature, |t| put(temperature, t))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_info_layout_matches_the_header() {
        assert_eq!(size_of::<MtmlPciInfo>(), 104);
    }

    #[test]
    fn handles_carry_their_kind() {
        let h = handle(Kind::Memory, 7);
        assert!(!h.is_null());
        assert_eq!(index_of(h, Kind::Memory), Some(7));
        assert_eq!(index_of(h, Kind::Device), None);
        assert_eq!(index_of(std::ptr::null(), Kind::Library), None);
    }
}
