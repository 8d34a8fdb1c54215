//! The only `unsafe` of the MetaX detector: loading MetaX's MXSML (`libmxsml.so`) by path,
//! resolving its symbols and calling them. Everything above this module sees plain Rust types
//! and `Result`s; nothing here interprets what MXSML answers.
//!
//! Signatures and struct layouts follow MetaX's `MxSml.h` as its Python binding `pymxsml`
//! (ctypes) and Go consumers (ccfos/huatuo `core/metrics/metax_gpu.go`, purego) declare them:
//! `mxSmlDeviceInfo_t`, `mxSmlMemoryInfo_t` (six `long`, KB), `mxSmlBoardWayElectricInfo_t`
//! (mV, mA, mW) and `mxSmlEccErrorCount_t`. Every call but `mxSmlGetDeviceCount` returns
//! `mxSmlReturn_t` (`unsigned int`), 0 (`MXSML_Success`) on success; C enums are `int`-sized.
//!
//! Only `mxSmlInit`, `mxSmlGetDeviceCount` and `mxSmlGetDeviceInfo` are required; a symbol an
//! older driver lacks makes just that call answer [`CallError::Missing`].

#![allow(unsafe_code)]

use std::ffi::{OsStr, c_char, c_int, c_long, c_uint};

use libloading::Library;

use crate::vendors::ffi::{CallError, OpenError, c_text, check, loader, present};

const BDF_LEN: usize = 32;
const UUID_LEN: usize = 96;
const DEVICE_NAME_LEN: usize = 32;
/// Version strings: the Go consumers pass 64 (device) and 128 (MACA) bytes; we give both 128.
const VERSION_BUF: usize = 128;
/// Board power ways asked for; cards report up to 3 (huatuo's `maxBoardWays`), the rest is slack.
const MAX_BOARD_WAYS: usize = 8;

/// `mxSmlDeviceVirtualizationMode_t` `MXSML_Virtualization_Mode_Vf`.
pub const MODE_VF: u32 = 2;
/// `mxSmlVersionUnit_t` `MXSML_Version_Driver`.
const VERSION_DRIVER: c_uint = 1;
/// `mxSmlUsageIp_t` `MXSML_Usage_Xcore`: the compute cores of a C-class (and G-class) card.
const USAGE_XCORE: c_uint = 4;
/// `mxSmlTemperatureSensors_t` `MXSML_Temperature_Hotspot`.
const TEMPERATURE_HOTSPOT: c_uint = 0;

/// `mxSmlDeviceInfo_t` (184 bytes).
#[repr(C)]
#[allow(dead_code)] // Fields MXSML writes that we do not read still shape the layout.
struct RawDeviceInfo {
    device_id: c_uint,
    /// Deprecated by MetaX ("do not use").
    kind: c_uint,
    bdf_id: [c_char; BDF_LEN],
    gpu_id: c_uint,
    node_id: c_uint,
    uuid: [c_char; UUID_LEN],
    /// `mxSmlDeviceBrand_t`: 0 unknown, 1 N, 2 C, 3 G.
    brand: c_uint,
    /// `mxSmlDeviceVirtualizationMode_t`: 0 none, 1 PF, 2 VF.
    mode: c_uint,
    device_name: [c_char; DEVICE_NAME_LEN],
}

/// `mxSmlMemoryInfo_t`; every figure in KB.
#[repr(C)]
#[allow(dead_code)] // Fields MXSML writes that we do not read still shape the layout.
struct RawMemoryInfo {
    vis_vram_total: c_long,
    vis_vram_use: c_long,
    vram_total: c_long,
    vram_use: c_long,
    xtt_total: c_long,
    xtt_use: c_long,
}

/// `mxSmlBoardWayElectricInfo_t`: one power input of the board.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // Fields MXSML writes that we do not read still shape the layout.
struct RawBoardWay {
    voltage_mv: c_uint,
    current_ma: c_uint,
    power_mw: c_uint,
}

/// `mxSmlEccErrorCount_t`.
#[repr(C)]
#[allow(dead_code)] // Fields MXSML writes that we do not read still shape the layout.
struct RawEccErrors {
    sram_ce: c_uint,
    sram_ue: c_uint,
    dram_ce: c_uint,
    dram_ue: c_uint,
    retired_page: c_uint,
}

type InitFn = unsafe extern "C" fn() -> c_uint;
type CountFn = unsafe extern "C" fn() -> c_uint;
type DeviceInfoFn = unsafe extern "C" fn(c_uint, *mut RawDeviceInfo) -> c_uint;
type MemoryInfoFn = unsafe extern "C" fn(c_uint, *mut RawMemoryInfo) -> c_uint;
type DeviceVersionFn = unsafe extern "C" fn(c_uint, c_uint, *mut c_char, *mut c_uint) -> c_uint;
type MacaVersionFn = unsafe extern "C" fn(*mut c_char, *mut c_uint) -> c_uint;
type DeviceIntFn = unsafe extern "C" fn(c_uint, c_uint, *mut c_int) -> c_uint;
type BoardPowerFn = unsafe extern "C" fn(c_uint, *mut c_uint, *mut RawBoardWay) -> c_uint;
type EccFn = unsafe extern "C" fn(c_uint, *mut RawEccErrors) -> c_uint;

/// The resolved entry points. Plain function pointers: valid while [`MxsmlLibrary::_library`]
/// is loaded, which the struct guarantees by owning both and never handing a pointer out.
struct Entries {
    init: InitFn,
    device_count: CountFn,
    device_info: DeviceInfoFn,
    memory_info: Option<MemoryInfoFn>,
    device_version: Option<DeviceVersionFn>,
    maca_version: Option<MacaVersionFn>,
    ip_usage: Option<DeviceIntFn>,
    temperature: Option<DeviceIntFn>,
    board_power: Option<BoardPowerFn>,
    total_ecc_errors: Option<EccFn>,
}

/// A loaded `libmxsml.so`.
pub struct MxsmlLibrary {
    entries: Entries,
    // Dropped after `entries` (declaration order); the pointers there never outlive it.
    _library: Library,
}

/// What `mxSmlGetDeviceInfo` reports, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// `0000:0f:00.0` as MXSML prints it.
    pub bdf: String,
    pub uuid: String,
    pub brand: u32,
    pub mode: u32,
    pub name: String,
}

/// `mxSmlGetMemoryInfo`'s VRAM figures, KB; negative values are passed on for the caller to
/// refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VramKb {
    pub total: i64,
    pub used: i64,
}

impl MxsmlLibrary {
    /// Loads the library at `path` (a file path, or a bare name for the loader's own search)
    /// and resolves its symbols. Does not call `mxSmlInit`.
    pub fn open(path: &OsStr) -> Result<Self, OpenError> {
        let library = loader::load(path)?;

        macro_rules! optional {
            ($name:literal, $ty:ty) => {{
                // SAFETY: `$ty` is the function's prototype in MxSml.h; the copied pointer is
                // stored next to `library`, which outlives it (see `MxsmlLibrary`).
                unsafe { loader::symbol::<$ty>(&library, &[$name]) }
            }};
        }

        let entries = Entries {
            init: optional!("mxSmlInit", InitFn)
                .ok_or_else(|| OpenError::MissingSymbol("mxSmlInit".into()))?,
            device_count: optional!("mxSmlGetDeviceCount", CountFn)
                .ok_or_else(|| OpenError::MissingSymbol("mxSmlGetDeviceCount".into()))?,
            device_info: optional!("mxSmlGetDeviceInfo", DeviceInfoFn)
                .ok_or_else(|| OpenError::MissingSymbol("mxSmlGetDeviceInfo".into()))?,
            memory_info: optional!("mxSmlGetMemoryInfo", MemoryInfoFn),
            device_version: optional!("mxSmlGetDeviceVersion", DeviceVersionFn),
            maca_version: optional!("mxSmlGetMacaVersion", MacaVersionFn),
            ip_usage: optional!("mxSmlGetDeviceIpUsage", DeviceIntFn),
            temperature: optional!("mxSmlGetTemperatureInfo", DeviceIntFn),
            board_power: optional!("mxSmlGetBoardPowerInfo", BoardPowerFn),
            total_ecc_errors: optional!("mxSmlGetTotalEccErrors", EccFn),
        };
        Ok(Self {
            entries,
            _library: library,
        })
    }

    /// `mxSmlInit`.
    pub fn init(&self) -> Result<(), CallError> {
        // SAFETY: no arguments; the pointer is valid while `self` holds the library.
        check("mxSmlInit", unsafe { (self.entries.init)() })
    }

    /// `mxSmlGetDeviceCount`: native, PF and VF devices, ids `0..count`.
    pub fn device_count(&self) -> u32 {
        // SAFETY: no arguments; the pointer is valid while `self` holds the library.
        unsafe { (self.entries.device_count)() }
    }

    /// `mxSmlGetDeviceInfo`.
    pub fn device_info(&self, device: u32) -> Result<DeviceInfo, CallError> {
        let mut raw = RawDeviceInfo {
            device_id: 0,
            kind: 0,
            bdf_id: [0; BDF_LEN],
            gpu_id: 0,
            node_id: 0,
            uuid: [0; UUID_LEN],
            brand: 0,
            mode: 0,
            device_name: [0; DEVICE_NAME_LEN],
        };
        // SAFETY: `raw` is an `mxSmlDeviceInfo_t` MXSML fills in.
        check("mxSmlGetDeviceInfo", unsafe {
            (self.entries.device_info)(device, &mut raw)
        })?;
        Ok(DeviceInfo {
            bdf: c_text(&raw.bdf_id),
            uuid: c_text(&raw.uuid),
            brand: raw.brand,
            mode: raw.mode,
            name: c_text(&raw.device_name),
        })
    }

    /// `mxSmlGetMemoryInfo`: VRAM total and in use, KB.
    // `long` is `i64` on LP64 but `i32` elsewhere: the conversion is needed off x86_64/aarch64.
    #[allow(clippy::useless_conversion)]
    pub fn vram(&self, device: u32) -> Result<VramKb, CallError> {
        const CALL: &str = "mxSmlGetMemoryInfo";
        let f = present(self.entries.memory_info, CALL)?;
        let mut raw = RawMemoryInfo {
            vis_vram_total: 0,
            vis_vram_use: 0,
            vram_total: 0,
            vram_use: 0,
            xtt_total: 0,
            xtt_use: 0,
        };
        // SAFETY: `raw` is an `mxSmlMemoryInfo_t` MXSML fills in.
        check(CALL, unsafe { f(device, &mut raw) })?;
        Ok(VramKb {
            total: i64::from(raw.vram_total),
            used: i64::from(raw.vram_use),
        })
    }

    /// `mxSmlGetDeviceVersion` with `MXSML_Version_Driver`: the kernel driver's version.
    pub fn driver_version(&self, device: u32) -> Result<String, CallError> {
        const CALL: &str = "mxSmlGetDeviceVersion";
        let f = present(self.entries.device_version, CALL)?;
        let mut buf = [0 as c_char; VERSION_BUF];
        let mut size = VERSION_BUF as c_uint;
        // SAFETY: `buf` has `size` writable bytes, which `size` tells MXSML; it writes a
        // NUL-terminated string and may shrink `size`.
        check(CALL, unsafe {
            f(device, VERSION_DRIVER, buf.as_mut_ptr(), &mut size)
        })?;
        Ok(c_text(&buf))
    }

    /// `mxSmlGetMacaVersion`: the MACA software stack's version.
    pub fn maca_version(&self) -> Result<String, CallError> {
        const CALL: &str = "mxSmlGetMacaVersion";
        let f = present(self.entries.maca_version, CALL)?;
        let mut buf = [0 as c_char; VERSION_BUF];
        let mut size = VERSION_BUF as c_uint;
        // SAFETY: as in `driver_version`.
        check(CALL, unsafe { f(buf.as_mut_ptr(), &mut size) })?;
        Ok(c_text(&buf))
    }

    /// `mxSmlGetDeviceIpUsage` of the xcore (compute) block, percent.
    pub fn xcore_usage(&self, device: u32) -> Result<i32, CallError> {
        const CALL: &str = "mxSmlGetDeviceIpUsage";
        let f = present(self.entries.ip_usage, CALL)?;
        let mut usage: c_int = 0;
        // SAFETY: valid out-pointer.
        check(CALL, unsafe { f(device, USAGE_XCORE, &mut usage) })?;
        Ok(usage)
    }

    /// `mxSmlGetTemperatureInfo` of the hotspot sensor, in 0.01 °C.
    pub fn hotspot_centidegrees(&self, device: u32) -> Result<i32, CallError> {
        const CALL: &str = "mxSmlGetTemperatureInfo";
        let f = present(self.entries.temperature, CALL)?;
        let mut t: c_int = 0;
        // SAFETY: valid out-pointer.
        check(CALL, unsafe { f(device, TEMPERATURE_HOTSPOT, &mut t) })?;
        Ok(t)
    }

    /// `mxSmlGetBoardPowerInfo`: the power of each of the board's inputs, mW.
    pub fn board_power_mw(&self, device: u32) -> Result<Vec<u32>, CallError> {
        const CALL: &str = "mxSmlGetBoardPowerInfo";
        let f = present(self.entries.board_power, CALL)?;
        let mut ways = [RawBoardWay {
            voltage_mv: 0,
            current_ma: 0,
            power_mw: 0,
        }; MAX_BOARD_WAYS];
        let mut size = MAX_BOARD_WAYS as c_uint;
        // SAFETY: `ways` has `size` elements, which `size` tells MXSML; it sets `size` to the
        // number it wrote.
        check(CALL, unsafe { f(device, &mut size, ways.as_mut_ptr()) })?;
        let n = (size as usize).min(MAX_BOARD_WAYS);
        Ok(ways[..n].iter().map(|w| w.power_mw).collect())
    }

    /// `mxSmlGetTotalEccErrors`: uncorrectable (SRAM + DRAM) errors since boot.
    pub fn uncorrectable_ecc_errors(&self, device: u32) -> Result<u64, CallError> {
        const CALL: &str = "mxSmlGetTotalEccErrors";
        let f = present(self.entries.total_ecc_errors, CALL)?;
        let mut raw = RawEccErrors {
            sram_ce: 0,
            sram_ue: 0,
            dram_ce: 0,
            dram_ue: 0,
            retired_page: 0,
        };
        // SAFETY: `raw` is an `mxSmlEccErrorCount_t` MXSML fills in.
        check(CALL, unsafe { f(device, &mut raw) })?;
        Ok(u64::from(raw.sram_ue) + u64::from(raw.dram_ue))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_header() {
        // 4 + 4 + 32 + 4 + 4 + 96 + 4 + 4 + 32, no padding.
        assert_eq!(size_of::<RawDeviceInfo>(), 184);
        assert_eq!(std::mem::offset_of!(RawDeviceInfo, uuid), 48);
        assert_eq!(std::mem::offset_of!(RawDeviceInfo, device_name), 152);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(size_of::<RawMemoryInfo>(), 48);
        assert_eq!(size_of::<RawBoardWay>(), 12);
        assert_eq!(size_of::<RawEccErrors>(), 20);
    }

    #[test]
    fn unloadable_library_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libmxsml.so");
        std::fs::write(&path, b"not an ELF file").unwrap();
        assert!(matches!(
            MxsmlLibrary::open(path.as_os_str()),
            Err(OpenError::Load(_))
        ));
    }
}
