//! A test stand-in for Cambricon's `libcndev.so`, the CNDev management library of the MLU driver,
//! which cannot exist on a build machine (it needs the driver and the MLUs). It is not Cambricon
//! code and talks to no hardware: it serves the cards of a JSON fixture (named by the
//! environment variable `GPUSTACK_FAKE_CNDEV_FIXTURE`, see [`fixture`]) through the real CNDev C
//! ABI, so that the Cambricon detector is exercised through its real loading path (`dlopen` by
//! path) on machines without an MLU.
//!
//! It exports exactly the CNDev functions the detector and preflight call, with `cndev.h`'s names, argument
//! types, return codes (`cndevRet_t`: 0 or a positive `CNDEV_ERROR_*`) and the
//! `CNDEV_VERSION_5` struct layouts (`cndevCardInfo_t`, `cndevUUID_t`, `cndevMemoryInfo_t`,
//! `cndevVersionInfo_t`, `cndevECCInfo_t`, `cndevPowerInfo_t`, `cndevTemperatureInfo_t`,
//! `cndevUtilizationInfo_t`, `cndevCardCoreCount_t`, `cndevCardHealthState_t`,
//! `cndevPCIeInfo_t`, `cndevSMLUMode_t`).
//!
//! Like CNDev it reads each struct's `version` (an input) first: only `CNDEV_VERSION_5`, the
//! layout it writes, is accepted, anything else answers `CNDEV_ERROR_UNSUPPORTED_API_VERSION`,
//! which catches a caller that forgets to declare one. Device handles
//! (`cndevGetDeviceHandleByIndex`) are deliberately not the indexes, so a caller that skips the
//! handle lookup is caught too.
//!
//! The one setter, `cndevSetSMLUMode`, changes the fixture's mode in memory and appends what it
//! was asked to a log file a test names (see [`fixture::set_log`]).
//!
//! `cndevInit` reads the fixture: an unset variable or unreadable file answers
//! `CNDEV_ERROR_NO_DRIVER`, bad JSON `CNDEV_ERROR_UNKNOWN`; any other call before a successful
//! `cndevInit` (or after `cndevRelease`) answers `CNDEV_ERROR_UNINITIALIZED`.

// The contract of every exported function is the header's: pointers are the caller's, valid for
// the documented struct. Null pointers are checked and answered with
// CNDEV_ERROR_INVALID_ARGUMENT.
#![allow(clippy::missing_safety_doc)]

pub mod fixture;

use std::{
    ffi::{c_char, c_int, c_uint},
    sync::Mutex,
};

use fixture::{Device, Fixture, LoadError};
use gpustack_fake_abi::{Answers, c_array};

pub const CNDEV_SUCCESS: c_int = 0;
pub const CNDEV_ERROR_NO_DRIVER: c_int = 1;
pub const CNDEV_ERROR_UNSUPPORTED_API_VERSION: c_int = 3;
pub const CNDEV_ERROR_UNINITIALIZED: c_int = 4;
pub const CNDEV_ERROR_INVALID_ARGUMENT: c_int = 5;
pub const CNDEV_ERROR_INVALID_DEVICE_ID: c_int = 6;
pub const CNDEV_ERROR_UNKNOWN: c_int = 7;
pub const CNDEV_ERROR_NOT_SUPPORTED: c_int = 10;
pub const CNDEV_ERROR_NO_PERMISSION: c_int = 13;
/// `cndevEnableStatusEnum_t`.
const CNDEV_FEATURE_DISABLED: c_int = 0;
const CNDEV_FEATURE_ENABLED: c_int = 1;

pub const CNDEV_VERSION_5: c_int = 5;
const UUID_SIZE: usize = 37;
/// Handle of card `i` is `HANDLE_BASE + i`.
const HANDLE_BASE: c_int = 0x4000;

/// `cndevCardInfo_t`.
#[repr(C)]
pub struct CndevCardInfo {
    pub version: c_int,
    pub number: c_uint,
}

/// `cndevUUID_t`.
#[repr(C)]
pub struct CndevUuid {
    pub version: c_int,
    pub uuid: [u8; UUID_SIZE],
    pub ncs_uuid64: u64,
}

/// `cndevMemoryInfo_t` (v5); MB.
#[repr(C)]
pub struct CndevMemoryInfo {
    pub version: c_int,
    pub physical_memory_total: i64,
    pub physical_memory_used: i64,
    pub virtual_memory_total: i64,
    pub virtual_memory_used: i64,
    pub channel_number: i64,
    pub channel_memory_used: [i64; 20],
}

/// `cndevVersionInfo_t`.
#[repr(C)]
pub struct CndevVersionInfo {
    pub version: c_int,
    pub mcu_major_version: c_uint,
    pub mcu_minor_version: c_uint,
    pub mcu_build_version: c_uint,
    pub driver_major_version: c_uint,
    pub driver_minor_version: c_uint,
    pub driver_build_version: c_uint,
}

/// `cndevECCInfo_t` (v5).
#[repr(C)]
pub struct CndevEccInfo {
    pub version: c_int,
    pub one_bit_error: u64,
    pub multiple_one_error: u64,
    pub multiple_error: u64,
    pub multiple_multiple_error: u64,
    pub corrected_error: u64,
    pub uncorrected_error: u64,
    pub total_error: u64,
    pub address_forbidden_error: u64,
}

/// `cndevPowerInfo_t`; W.
#[repr(C)]
pub struct CndevPowerInfo {
    pub version: c_int,
    pub usage: c_int,
    pub cap: c_int,
    pub usage_decimal: c_int,
    pub machine: c_int,
    pub cap_decimal: c_int,
    pub thermal_design_power: u16,
}

/// `cndevTemperatureInfo_t`; °C.
#[repr(C)]
pub struct CndevTemperatureInfo {
    pub version: c_int,
    pub board: c_int,
    pub cluster: [c_int; 20],
    pub memory_die: [c_int; 8],
    pub chip: c_int,
    pub air_inlet: c_int,
    pub air_outlet: c_int,
    pub memory: c_int,
    pub video_input: c_int,
    pub cpu: c_int,
}

/// `cndevUtilizationInfo_t`; percent.
#[repr(C)]
pub struct CndevUtilizationInfo {
    pub version: c_int,
    pub average_core_utilization: c_int,
    pub core_utilization: [c_int; 80],
}

/// `cndevCardCoreCount_t`.
#[repr(C)]
pub struct CndevCardCoreCount {
    pub version: c_int,
    pub count: c_int,
}

/// `cndevCardHealthState_t` (v5).
#[repr(C)]
pub struct CndevCardHealthState {
    pub version: c_int,
    pub health: c_int,
}

/// `cndevPCIeInfo_t`.
#[repr(C)]
pub struct CndevPcieInfo {
    pub version: c_int,
    pub subsystem_id: c_uint,
    pub device_id: c_uint,
    pub vendor: u16,
    pub subsystem_vendor: u16,
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub function: c_uint,
    pub physical_slot: *const c_char,
    pub slot_id: c_int,
}

/// `cndevSMLUMode_t`: `smluMode` is a `cndevEnableStatusEnum_t`.
#[repr(C)]
pub struct CndevSmluMode {
    pub version: c_int,
    pub smlu_mode: c_int,
}

/// The loaded fixture, and whether `cndevInit` has been called since the last `cndevRelease`.
/// The fixture is kept after a release: the name strings handed out point into it.
struct State {
    fixture: Option<Fixture>,
    initialised: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    fixture: None,
    initialised: false,
});

fn state() -> std::sync::MutexGuard<'static, State> {
    gpustack_fake_abi::lock(&STATE)
}

fn with_fixture(f: impl FnOnce(&Fixture) -> c_int) -> c_int {
    match &*state() {
        State {
            fixture: Some(fixture),
            initialised: true,
        } => f(fixture),
        _ => CNDEV_ERROR_UNINITIALIZED,
    }
}

/// The card behind a handle.
fn card(fixture: &Fixture, handle: c_int) -> Option<&Device> {
    handle
        .checked_sub(HANDLE_BASE)
        .and_then(|i| usize::try_from(i).ok())
        .and_then(|i| fixture.devices.get(i))
}

/// The `int version` a caller set at the start of its struct; `None` for a null pointer.
fn version_of<T>(p: *const T) -> Option<c_int> {
    // SAFETY: non-null (checked), and the header makes the caller pass a pointer to a `T`,
    // whose first field is the `int version` it sets.
    (!p.is_null()).then(|| unsafe { p.cast::<c_int>().read() })
}

/// The status codes of the shared writers.
const ANSWERS: Answers<c_int> = Answers {
    ok: CNDEV_SUCCESS,
    invalid_argument: CNDEV_ERROR_INVALID_ARGUMENT,
    insufficient_size: CNDEV_ERROR_INVALID_ARGUMENT,
};

/// Writes `value` through a caller's out-pointer.
fn put<T>(out: *mut T, value: T) -> c_int {
    ANSWERS.put(out, value)
}

/// Checks a caller's struct pointer and declared version.
fn accepted<T>(p: *const T) -> Result<(), c_int> {
    match version_of(p) {
        None => Err(CNDEV_ERROR_INVALID_ARGUMENT),
        Some(CNDEV_VERSION_5) => Ok(()),
        Some(_) => Err(CNDEV_ERROR_UNSUPPORTED_API_VERSION),
    }
}

/// Serves a versioned query for the card behind `handle`: checks the pointer and the caller's
/// `version`, then writes what `answer` builds (or returns its error code).
fn query<T>(
    out: *mut T,
    handle: c_int,
    answer: impl FnOnce(&Fixture, &Device) -> Result<T, c_int>,
) -> c_int {
    with_fixture(|fixture| {
        if let Err(code) = accepted(out) {
            return code;
        }
        let Some(device) = card(fixture, handle) else {
            return CNDEV_ERROR_INVALID_DEVICE_ID;
        };
        match answer(fixture, device) {
            // The value carries CNDEV_VERSION_5, the caller's version, back.
            Ok(value) => put(out, value),
            Err(code) => code,
        }
    })
}

fn supported<T>(value: Option<T>) -> Result<T, c_int> {
    value.ok_or(CNDEV_ERROR_NOT_SUPPORTED)
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevInit(_reserved: c_int) -> c_int {
    let mut st = state();
    if st.fixture.is_none() {
        match fixture::load() {
            Ok(f) => st.fixture = Some(f),
            Err(LoadError::Missing) => return CNDEV_ERROR_NO_DRIVER,
            Err(LoadError::Invalid) => return CNDEV_ERROR_UNKNOWN,
        }
    }
    st.initialised = true;
    CNDEV_SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevRelease() -> c_int {
    let mut st = state();
    if !st.initialised {
        return CNDEV_ERROR_UNINITIALIZED;
    }
    st.initialised = false;
    CNDEV_SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetDeviceCount(card_num: *mut CndevCardInfo) -> c_int {
    with_fixture(|f| match accepted(card_num) {
        Ok(()) => put(
            card_num,
            CndevCardInfo {
                version: CNDEV_VERSION_5,
                number: f.devices.len() as c_uint,
            },
        ),
        Err(code) => code,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetDeviceHandleByIndex(index: c_int, handle: *mut c_int) -> c_int {
    with_fixture(|f| match usize::try_from(index) {
        Ok(i) if i < f.devices.len() => put(handle, HANDLE_BASE + index),
        _ => CNDEV_ERROR_INVALID_DEVICE_ID,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetCardNameStringByDevId(dev_id: c_int) -> *const c_char {
    const UNKNOWN: &std::ffi::CStr = c"Unknown";
    let st = state();
    let name = st
        .fixture
        .as_ref()
        .filter(|_| st.initialised)
        .and_then(|f| card(f, dev_id))
        .and_then(|d| d.name.as_ref());
    // The fixture is never dropped once loaded (see `State`), so the string outlives the lock.
    name.map_or(UNKNOWN.as_ptr(), |n| n.as_ptr())
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetUUID(uuid_info: *mut CndevUuid, dev_id: c_int) -> c_int {
    query(uuid_info, dev_id, |_, d| {
        Ok(CndevUuid {
            version: CNDEV_VERSION_5,
            uuid: c_array(&d.uuid),
            ncs_uuid64: 0,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetMemoryUsage(mem_info: *mut CndevMemoryInfo, dev_id: c_int) -> c_int {
    query(mem_info, dev_id, |_, d| {
        let m = supported(d.memory)?;
        Ok(CndevMemoryInfo {
            version: CNDEV_VERSION_5,
            physical_memory_total: m.total_mb,
            physical_memory_used: m.used_mb,
            virtual_memory_total: 1 << 20,
            virtual_memory_used: m.used_mb,
            channel_number: 0,
            channel_memory_used: [0; 20],
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetVersionInfo(vers_info: *mut CndevVersionInfo, dev_id: c_int) -> c_int {
    query(vers_info, dev_id, |f, _| {
        let v = supported(f.driver_version)?;
        Ok(CndevVersionInfo {
            version: CNDEV_VERSION_5,
            mcu_major_version: 1,
            mcu_minor_version: 1,
            mcu_build_version: 4,
            driver_major_version: v.major,
            driver_minor_version: v.minor,
            driver_build_version: v.build,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetECCInfo(ecc_info: *mut CndevEccInfo, dev_id: c_int) -> c_int {
    query(ecc_info, dev_id, |_, d| {
        let uncorrected = supported(d.ecc_uncorrected)?;
        Ok(CndevEccInfo {
            version: CNDEV_VERSION_5,
            one_bit_error: 0,
            multiple_one_error: 0,
            multiple_error: 0,
            multiple_multiple_error: 0,
            corrected_error: 0,
            uncorrected_error: uncorrected,
            total_error: uncorrected,
            address_forbidden_error: 0,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetPowerInfo(power_info: *mut CndevPowerInfo, dev_id: c_int) -> c_int {
    query(power_info, dev_id, |_, d| {
        let usage = supported(d.power_w)?;
        Ok(CndevPowerInfo {
            version: CNDEV_VERSION_5,
            usage,
            cap: 250,
            usage_decimal: 0,
            machine: 0,
            cap_decimal: 0,
            thermal_design_power: 250,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetTemperatureInfo(
    temp_info: *mut CndevTemperatureInfo,
    dev_id: c_int,
) -> c_int {
    query(temp_info, dev_id, |_, d| {
        let t = supported(d.temperature)?;
        Ok(CndevTemperatureInfo {
            version: CNDEV_VERSION_5,
            board: t.board,
            cluster: [t.chip; 20],
            memory_die: [0; 8],
            chip: t.chip,
            air_inlet: 0,
            air_outlet: 0,
            memory: 0,
            video_input: 0,
            cpu: 0,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetDeviceUtilizationInfo(
    util_info: *mut CndevUtilizationInfo,
    dev_id: c_int,
) -> c_int {
    query(util_info, dev_id, |_, d| {
        let u = supported(d.utilization)?;
        Ok(CndevUtilizationInfo {
            version: CNDEV_VERSION_5,
            average_core_utilization: u,
            core_utilization: [u; 80],
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetCoreCount(core_count: *mut CndevCardCoreCount, dev_id: c_int) -> c_int {
    query(core_count, dev_id, |_, d| {
        Ok(CndevCardCoreCount {
            version: CNDEV_VERSION_5,
            count: supported(d.core_count)?,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetCardHealthState(
    health: *mut CndevCardHealthState,
    dev_id: c_int,
) -> c_int {
    query(health, dev_id, |_, d| {
        Ok(CndevCardHealthState {
            version: CNDEV_VERSION_5,
            health: supported(d.health)?,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetPCIeInfo(pcie_info: *mut CndevPcieInfo, dev_id: c_int) -> c_int {
    query(pcie_info, dev_id, |_, d| {
        let p = supported(d.pcie)?;
        Ok(CndevPcieInfo {
            version: CNDEV_VERSION_5,
            subsystem_id: 0,
            device_id: p.device_id,
            vendor: p.vendor_id,
            subsystem_vendor: p.vendor_id,
            domain: p.domain,
            bus: p.bus,
            device: p.device,
            function: p.function,
            physical_slot: std::ptr::null(),
            slot_id: -1,
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevGetSMLUMode(mode: *mut CndevSmluMode, dev_id: c_int) -> c_int {
    query(mode, dev_id, |_, d| {
        let on = supported(d.smlu_mode)?;
        Ok(CndevSmluMode {
            version: CNDEV_VERSION_5,
            smlu_mode: if on {
                CNDEV_FEATURE_ENABLED
            } else {
                CNDEV_FEATURE_DISABLED
            },
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn cndevSetSMLUMode(mode: *mut CndevSmluMode, dev_id: c_int) -> c_int {
    let mut wanted = None;
    let code = match &mut *state() {
        State {
            fixture: Some(fixture),
            initialised: true,
        } => match accepted(mode) {
            Err(code) => code,
            Ok(()) => {
                let asked = asked_mode(mode);
                wanted = Some(asked);
                let device = dev_id
                    .checked_sub(HANDLE_BASE)
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| fixture.devices.get_mut(i));
                match device {
                    None => CNDEV_ERROR_INVALID_DEVICE_ID,
                    Some(d) if d.smlu_mode.is_none() => CNDEV_ERROR_NOT_SUPPORTED,
                    Some(d) if d.smlu_locked => CNDEV_ERROR_NO_PERMISSION,
                    Some(d) => match asked {
                        CNDEV_FEATURE_ENABLED | CNDEV_FEATURE_DISABLED => {
                            d.smlu_mode = Some(asked == CNDEV_FEATURE_ENABLED);
                            CNDEV_SUCCESS
                        }
                        _ => CNDEV_ERROR_INVALID_ARGUMENT,
                    },
                }
            }
        },
        _ => CNDEV_ERROR_UNINITIALIZED,
    };
    log_set(&format!(
        "cndevSetSMLUMode {} {} -> {code}",
        dev_id - HANDLE_BASE,
        wanted.map_or("?".into(), |w| w.to_string())
    ));
    code
}

/// The `smluMode` a caller put in its `cndevSMLUMode_t`; the pointer was checked non-null and
/// versioned by [`accepted`].
fn asked_mode(mode: *const CndevSmluMode) -> c_int {
    // SAFETY: non-null (checked by the caller through `accepted`), and the header makes the
    // caller of `cndevSetSMLUMode` pass a `cndevSMLUMode_t` it filled in.
    unsafe { (*mode).smlu_mode }
}

/// Appends one line to the set log (see [`fixture::set_log`]), if a test asked for one.
fn log_set(line: &str) {
    use std::io::Write;
    if let Some(path) = fixture::set_log()
        && let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(file, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_header() {
        assert_eq!(size_of::<CndevCardInfo>(), 8);
        assert_eq!(size_of::<CndevUuid>(), 56);
        assert_eq!(size_of::<CndevMemoryInfo>(), 208);
        assert_eq!(size_of::<CndevVersionInfo>(), 28);
        assert_eq!(size_of::<CndevEccInfo>(), 72);
        assert_eq!(size_of::<CndevPowerInfo>(), 28);
        assert_eq!(size_of::<CndevTemperatureInfo>(), 144);
        assert_eq!(size_of::<CndevUtilizationInfo>(), 328);
        assert_eq!(size_of::<CndevCardCoreCount>(), 8);
        assert_eq!(size_of::<CndevCardHealthState>(), 8);
        assert_eq!(size_of::<CndevSmluMode>(), 8);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(size_of::<CndevPcieInfo>(), 48);
    }

    #[test]
    fn uuids_fill_the_array() {
        let uuid = "10001012-1916-0000-0000-000000000000";
        let bytes = c_array::<u8, UUID_SIZE>(uuid);
        assert_eq!(&bytes[..36], uuid.as_bytes());
        assert_eq!(bytes[36], 0);
    }

    #[test]
    fn calls_before_init_are_refused() {
        let mut info = CndevCardInfo {
            version: CNDEV_VERSION_5,
            number: 0,
        };
        assert_eq!(cndevGetDeviceCount(&mut info), CNDEV_ERROR_UNINITIALIZED);
    }
}
