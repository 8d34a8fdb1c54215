//! A test stand-in for MetaX's `libmxsml.so`, the MXSML management library of the MetaX GPU
//! driver, which cannot exist on a build machine (it needs the driver and the GPUs). It is not
//! MetaX code and talks to no hardware: it serves the devices of a JSON fixture (named by the
//! environment variable `GPUSTACK_FAKE_MXSML_FIXTURE`, see [`fixture`]) through the real MXSML
//! C ABI, so that the MetaX detector is exercised through its real loading path (`dlopen` by
//! path) on machines without a MetaX GPU.
//!
//! It exports exactly the MXSML functions the detector calls, with `MxSml.h`'s names, argument
//! types, return codes (`mxSmlReturn_t`: 0 success, else an error number) and struct layouts
//! (`mxSmlDeviceInfo_t`, `mxSmlMemoryInfo_t`, `mxSmlBoardWayElectricInfo_t`,
//! `mxSmlEccErrorCount_t`).
//!
//! `mxSmlInit` reads the fixture: an unset variable or unreadable file answers
//! `MXSML_NoDevice` (no driver), bad JSON `MXSML_Failure`; before a successful `mxSmlInit`,
//! `mxSmlGetDeviceCount` answers 0 and every other call `MXSML_Failure`.

// The contract of every exported function is the header's: pointers are the caller's, valid for
// the documented sizes. Null pointers are checked and answered with MXSML_InvalidInput.
#![allow(clippy::missing_safety_doc)]

pub mod fixture;

use std::{
    ffi::{c_char, c_int, c_long, c_uint},
    sync::Mutex,
};

use fixture::{Device, Fixture, LoadError};
use gpustack_fake_abi::{Answers, c_array};

pub const MXSML_SUCCESS: c_uint = 0;
pub const MXSML_FAILURE: c_uint = 1;
pub const MXSML_NO_DEVICE: c_uint = 2;
pub const MXSML_OPERATION_NOT_SUPPORT: c_uint = 3;
pub const MXSML_INVALID_DEVICE_ID: c_uint = 6;
pub const MXSML_INVALID_INPUT: c_uint = 9;
pub const MXSML_INSUFFICIENT_SIZE: c_uint = 10;

/// `mxSmlVersionUnit_t` `MXSML_Version_Driver`.
const VERSION_DRIVER: c_uint = 1;
/// `mxSmlUsageIp_t` `MXSML_Usage_Xcore`.
const USAGE_XCORE: c_uint = 4;
/// `mxSmlTemperatureSensors_t` `MXSML_Temperature_Hotspot`.
const TEMPERATURE_HOTSPOT: c_uint = 0;

/// `mxSmlDeviceInfo_t`.
#[repr(C)]
pub struct MxSmlDeviceInfo {
    pub device_id: c_uint,
    pub kind: c_uint,
    pub bdf_id: [c_char; 32],
    pub gpu_id: c_uint,
    pub node_id: c_uint,
    pub uuid: [c_char; 96],
    pub brand: c_uint,
    pub mode: c_uint,
    pub device_name: [c_char; 32],
}

/// `mxSmlMemoryInfo_t`; KB.
#[repr(C)]
pub struct MxSmlMemoryInfo {
    pub vis_vram_total: c_long,
    pub vis_vram_use: c_long,
    pub vram_total: c_long,
    pub vram_use: c_long,
    pub xtt_total: c_long,
    pub xtt_use: c_long,
}

/// `mxSmlBoardWayElectricInfo_t`.
#[repr(C)]
pub struct MxSmlBoardWayElectricInfo {
    pub voltage: c_uint,
    pub current: c_uint,
    pub power: c_uint,
}

/// `mxSmlEccErrorCount_t`.
#[repr(C)]
pub struct MxSmlEccErrorCount {
    pub sram_ce: c_uint,
    pub sram_ue: c_uint,
    pub dram_ce: c_uint,
    pub dram_ue: c_uint,
    pub retired_page: c_uint,
}

/// The loaded fixture; it stays until the process ends.
static STATE: Mutex<Option<Fixture>> = Mutex::new(None);

fn state() -> std::sync::MutexGuard<'static, Option<Fixture>> {
    gpustack_fake_abi::lock(&STATE)
}

fn with_device(device_id: c_uint, f: impl FnOnce(&Device) -> c_uint) -> c_uint {
    match &*state() {
        Some(fixture) => match fixture.devices.get(device_id as usize) {
            Some(d) => f(d),
            None => MXSML_INVALID_DEVICE_ID,
        },
        None => MXSML_FAILURE,
    }
}

/// The status codes of the shared writers.
const ANSWERS: Answers<c_uint> = Answers {
    ok: MXSML_SUCCESS,
    invalid_argument: MXSML_INVALID_INPUT,
    insufficient_size: MXSML_INSUFFICIENT_SIZE,
};

/// Writes `value` through a caller's out-pointer.
fn put<T>(out: *mut T, value: T) -> c_uint {
    ANSWERS.put(out, value)
}

fn supported<T>(value: Option<T>, f: impl FnOnce(T) -> c_uint) -> c_uint {
    value.map_or(MXSML_OPERATION_NOT_SUPPORT, f)
}

/// Copies `s` and its NUL into the caller's buffer of `*size` bytes.
fn put_string(s: &str, buf: *mut c_char, size: *mut c_uint) -> c_uint {
    if buf.is_null() || size.is_null() {
        return MXSML_INVALID_INPUT;
    }
    // SAFETY: non-null; the caller passes the buffer's length in `*size`.
    let capacity = unsafe { size.read() };
    match ANSWERS.put_str(buf, capacity, s) {
        MXSML_SUCCESS => put(size, s.len() as c_uint),
        refused => refused,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn mxSmlInit() -> c_uint {
    let mut st = state();
    if st.is_none() {
        match fixture::load() {
            Ok(f) => *st = Some(f),
            Err(LoadError::Missing) => return MXSML_NO_DEVICE,
            Err(LoadError::Invalid) => return MXSML_FAILURE,
        }
    }
    MXSML_SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn mxSmlGetDeviceCount() -> c_uint {
    state().as_ref().map_or(0, |f| f.devices.len() as c_uint)
}

#[unsafe(no_mangle)]
pub extern "C" fn mxSmlGetDeviceInfo(device_id: c_uint, info: *mut MxSmlDeviceInfo) -> c_uint {
    with_device(device_id, |d| {
        put(
            info,
            MxSmlDeviceInfo {
                device_id,
                kind: 0,
                bdf_id: c_array(&d.bdf_id),
                gpu_id: device_id,
                node_id: 0,
                uuid: c_array(&d.uuid),
                brand: d.brand,
                mode: d.mode,
                device_name: c_array(&d.device_name),
            },
        )
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn mxSmlGetMemoryInfo(device_id: c_uint, memory: *mut MxSmlMemoryInfo) -> c_uint {
    with_device(device_id, |d| {
        supported(d.vram, |v| {
            put(
                memory,
                MxSmlMemoryInfo {
                    vis_vram_total: v.total_kb as c_long,
                    vis_vram_use: v.used_kb as c_long,
                    vram_total: v.total_kb as c_long,
                    vram_use: v.used_kb as c_long,
                    xtt_total: 0,
                    xtt_use: 0,
                },
            )
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn mxSmlGetDeviceVersion(
    device_id: c_uint,
    unit: c_uint,
    version: *mut c_char,
    size: *mut c_uint,
) -> c_uint {
    with_device(device_id, |d| match unit {
        VERSION_DRIVER => supported(d.driver_version.as_deref(), |v| {
            put_string(v, version, size)
        }),
        _ => MXSML_OPERATION_NOT_SUPPORT,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn mxSmlGetMacaVersion(version: *mut c_char, size: *mut c_uint) -> c_uint {
    match &*state() {
        Some(f) => supported(f.maca_version.as_deref(), |v| put_string(v, version, size)),
        None => MXSML_FAILURE,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn mxSmlGetDeviceIpUsage(
    device_id: c_uint,
    ip: c_uint,
    usage: *mut c_int,
) -> c_uint {
    with_device(device_id, |d| match ip {
        USAGE_XCORE => supported(d.xcore_usage, |u| put(usage, u)),
        _ => MXSML_OPERATION_NOT_SUPPORT,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn mxSmlGetTemperatureInfo(
    device_id: c_uint,
    sensor: c_uint,
    temperature: *mut c_int,
) -> c_uint {
    with_device(device_id, |d| match sensor {
        TEMPERATURE_HOTSPOT => supported(d.hotspot_centidegrees, |t| put(temperature, t)),
        _ => MXSML_OPERATION_NOT_SUPPORT,
    })
}

/// Writes the board's inputs into the caller's array of `*size` elements.
fn board_power(powers: &[u32], size: *mut c_uint, ways: *mut MxSmlBoardWayElectricInfo) -> c_uint {
    if size.is_null() || ways.is_null() {
        return MXSML_INVALID_INPUT;
    }
    // SAFETY: non-null; the caller passes the array's length in `*size`.
    let capacity = unsafe { size.read() } as usize;
    if powers.len() > capacity {
        return MXSML_INSUFFICIENT_SIZE;
    }
    for (i, &power) in powers.iter().enumerate() {
        // SAFETY: `ways` has `capacity` elements and `i < powers.len() <= capacity`.
        unsafe {
            ways.add(i).write(MxSmlBoardWayElectricInfo {
                voltage: 12_000,
                current: power / 12,
                power,
            })
        };
    }
    put(size, powers.len() as c_uint)
}

#[unsafe(no_mangle)]
pub extern "C" fn mxSmlGetBoardPowerInfo(
    device_id: c_uint,
    size: *mut c_uint,
    ways: *mut MxSmlBoardWayElectricInfo,
) -> c_uint {
    with_device(device_id, |d| {
        supported(d.board_power_mw.as_deref(), |powers| {
            board_power(powers, size, ways)
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn mxSmlGetTotalEccErrors(
    device_id: c_uint,
    ecc: *mut MxSmlEccErrorCount,
) -> c_uint {
    with_device(device_id, |d| {
        supported(d.ecc, |e| {
            put(
                ecc,
                MxSmlEccErrorCount {
                    sram_ce: 0,
                    sram_ue: e.sram_ue,
                    dram_ce: 0,
                    dram_ue: e.dram_ue,
                    retired_page: 0,
                },
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_header() {
        assert_eq!(size_of::<MxSmlDeviceInfo>(), 184);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(size_of::<MxSmlMemoryInfo>(), 48);
        assert_eq!(size_of::<MxSmlBoardWayElectricInfo>(), 12);
        assert_eq!(size_of::<MxSmlEccErrorCount>(), 20);
    }

    #[test]
    fn strings_need_room_for_the_nul() {
        let mut buf = [0 as c_char; 4];
        let mut size: c_uint = 4;
        assert_eq!(
            put_string("2.1", buf.as_mut_ptr(), &mut size),
            MXSML_SUCCESS
        );
        assert_eq!(size, 3);
        let mut size: c_uint = 4;
        assert_eq!(
            put_string("2.14", buf.as_mut_ptr(), &mut size),
            MXSML_INSUFFICIENT_SIZE
        );
    }
}
