//! The only `unsafe` of the Cambricon detector: loading CNDev (`libcndev.so`, Cambricon's device
//! management library) by path, resolving its symbols and calling them. Everything above this
//! module sees plain Rust types and `Result`s; nothing here interprets what CNDev answers.
//!
//! Signatures, struct layouts and return codes follow Cambricon's `cndev.h` as vendored by
//! Cambricon's own MLU exporter (`Cambricon/mlu-exporter`, `pkg/cndev/include/cndev.h`, the
//! release that defines `CNDEV_VERSION_1` … `CNDEV_VERSION_5`). Every call returns
//! `cndevRet_t` (an `int`-sized C enum), `CNDEV_SUCCESS` (0) or a positive `CNDEV_ERROR_*`.
//! Every struct starts with `int version`, an input: CNDev fills the layout of the version the
//! caller declares and refuses a struct without one (`CNDEV_ERROR_UNSUPPORTED_API_VERSION`).
//! We declare [`CNDEV_VERSION_5`] and use the v5 layouts.
//!
//! Later CNDev releases grew several of these structs in place (`cndevCardHealthState_t` gained
//! `deviceState`/`driverState`, `cndevMemoryInfo_t` gained `globalMemory`), so each struct is
//! handed to CNDev inside a [`Slack`]: the v5 layout followed by spare bytes, which a library
//! that writes its own, larger layout regardless of `version` writes into instead of our stack.
//!
//! Newer releases also take a `cndevDevice_t` handle (`typedef __int32_t cndevDevice_t`, the
//! same ABI as the older `int devId`) obtained from `cndevGetDeviceHandleByIndex`; where that
//! function is exported we use its handle, elsewhere the index is the handle.
//!
//! Only `cndevInit` and `cndevGetDeviceCount` are required; a symbol an older library lacks
//! makes just that call answer [`CallError::Missing`].

#![allow(unsafe_code)]

use std::ffi::{CStr, OsStr, c_char, c_int, c_uint};

use libloading::Library;

use crate::vendors::ffi::{self, CallError, OpenError, c_text, loader, present};

/// `CNDEV_VERSION_5`: the struct layouts below are this version's.
pub const CNDEV_VERSION_5: c_int = 5;
/// `CNDEV_UUID_SIZE`: 36 characters and (usually) a NUL; the header warns the array need not
/// be NUL-terminated.
pub const UUID_SIZE: usize = 37;
/// `CNDEV_FEATURE_ENABLED` of `cndevEnableStatusEnum_t`.
const FEATURE_ENABLED: c_int = 1;
/// Spare bytes after each struct (see the module comment). The largest growth seen between
/// releases is a few dozen bytes; this leaves room for several more.
const SPARE: usize = 512;

/// The `cndevRet_t` names, for messages (`cndevGetErrorString` is not called: a name is enough
/// and needs no C string from the library).
pub fn return_name(code: c_int) -> &'static str {
    match code {
        0 => "CNDEV_SUCCESS",
        1 => "CNDEV_ERROR_NO_DRIVER",
        2 => "CNDEV_ERROR_LOW_DRIVER_VERSION",
        3 => "CNDEV_ERROR_UNSUPPORTED_API_VERSION",
        4 => "CNDEV_ERROR_UNINITIALIZED",
        5 => "CNDEV_ERROR_INVALID_ARGUMENT",
        6 => "CNDEV_ERROR_INVALID_DEVICE_ID",
        7 => "CNDEV_ERROR_UNKNOWN",
        8 => "CNDEV_ERROR_MALLOC",
        9 => "CNDEV_ERROR_INSUFFICIENT_SPACE",
        10 => "CNDEV_ERROR_NOT_SUPPORTED",
        11 => "CNDEV_ERROR_INVALID_LINK",
        12 => "CNDEV_ERROR_NO_DEVICES",
        13 => "CNDEV_ERROR_NO_PERMISSION",
        _ => "unknown cndevRet_t",
    }
}

/// `cndevCardInfo_t`.
#[repr(C)]
#[allow(dead_code)] // Fields CNDev writes that we do not read still shape the layout.
struct RawCardInfo {
    version: c_int,
    number: c_uint,
}

/// `cndevUUID_t`.
#[repr(C)]
#[allow(dead_code)] // Fields CNDev writes that we do not read still shape the layout.
struct RawUuid {
    version: c_int,
    uuid: [u8; UUID_SIZE],
    ncs_uuid64: u64,
}

/// `cndevMemoryInfo_t` (v5); sizes in MB.
#[repr(C)]
#[allow(dead_code)] // Fields CNDev writes that we do not read still shape the layout.
struct RawMemoryInfo {
    version: c_int,
    physical_memory_total: i64,
    physical_memory_used: i64,
    virtual_memory_total: i64,
    virtual_memory_used: i64,
    channel_number: i64,
    channel_memory_used: [i64; 20],
}

/// `cndevVersionInfo_t`.
#[repr(C)]
#[allow(dead_code)] // Fields CNDev writes that we do not read still shape the layout.
struct RawVersionInfo {
    version: c_int,
    mcu_major_version: c_uint,
    mcu_minor_version: c_uint,
    mcu_build_version: c_uint,
    driver_major_version: c_uint,
    driver_minor_version: c_uint,
    driver_build_version: c_uint,
}

/// `cndevECCInfo_t` (v5).
#[repr(C)]
#[allow(dead_code)] // Fields CNDev writes that we do not read still shape the layout.
struct RawEccInfo {
    version: c_int,
    one_bit_error: u64,
    multiple_one_error: u64,
    multiple_error: u64,
    multiple_multiple_error: u64,
    corrected_error: u64,
    uncorrected_error: u64,
    total_error: u64,
    address_forbidden_error: u64,
}

/// `cndevPowerInfo_t`; `usage` in W.
#[repr(C)]
#[allow(dead_code)] // Fields CNDev writes that we do not read still shape the layout.
struct RawPowerInfo {
    version: c_int,
    usage: c_int,
    cap: c_int,
    usage_decimal: c_int,
    machine: c_int,
    cap_decimal: c_int,
    thermal_design_power: u16,
}

/// `cndevTemperatureInfo_t`; °C.
#[repr(C)]
#[allow(dead_code)] // Fields CNDev writes that we do not read still shape the layout.
struct RawTemperatureInfo {
    version: c_int,
    board: c_int,
    cluster: [c_int; 20],
    memory_die: [c_int; 8],
    chip: c_int,
    air_inlet: c_int,
    air_outlet: c_int,
    memory: c_int,
    video_input: c_int,
    cpu: c_int,
}

/// `cndevUtilizationInfo_t`; percent.
#[repr(C)]
#[allow(dead_code)] // Fields CNDev writes that we do not read still shape the layout.
struct RawUtilizationInfo {
    version: c_int,
    average_core_utilization: c_int,
    core_utilization: [c_int; 80],
}

/// `cndevCardCoreCount_t`.
#[repr(C)]
#[allow(dead_code)] // Fields CNDev writes that we do not read still shape the layout.
struct RawCoreCount {
    version: c_int,
    count: c_int,
}

/// `cndevCardHealthState_t` (v5): `health` 1 healthy, 0 sick.
#[repr(C)]
#[allow(dead_code)] // Fields CNDev writes that we do not read still shape the layout.
struct RawHealthState {
    version: c_int,
    health: c_int,
}

/// `cndevPCIeInfo_t`. `physicalSlot` points into the library; we never read it.
#[repr(C)]
#[allow(dead_code)] // Fields CNDev writes that we do not read still shape the layout.
struct RawPcieInfo {
    version: c_int,
    subsystem_id: c_uint,
    device_id: c_uint,
    vendor: u16,
    subsystem_vendor: u16,
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    function: c_uint,
    physical_slot: *const c_char,
    slot_id: c_int,
}

/// `cndevSMLUMode_t`: `smluMode` is a `cndevEnableStatusEnum_t` (`CNDEV_FEATURE_DISABLED` 0,
/// `CNDEV_FEATURE_ENABLED` 1).
#[repr(C)]
#[allow(dead_code)] // `version` is read by CNDev, not by us.
struct RawSmluMode {
    version: c_int,
    smlu_mode: c_int,
}

/// A versioned CNDev struct: all-zero is a valid value of it and it starts with `int version`.
///
/// # Safety
/// Implementors must be `#[repr(C)]` structs of integers, integer arrays and raw pointers only,
/// whose first field is the `c_int` version.
unsafe trait Versioned: Sized {}

// SAFETY (each): the structs above are `#[repr(C)]`, hold only integers, integer arrays and a
// raw pointer (null is a valid all-zero pointer), and start with `version: c_int`.
unsafe impl Versioned for RawCardInfo {}
unsafe impl Versioned for RawUuid {}
unsafe impl Versioned for RawMemoryInfo {}
unsafe impl Versioned for RawVersionInfo {}
unsafe impl Versioned for RawEccInfo {}
unsafe impl Versioned for RawPowerInfo {}
unsafe impl Versioned for RawTemperatureInfo {}
unsafe impl Versioned for RawUtilizationInfo {}
unsafe impl Versioned for RawCoreCount {}
unsafe impl Versioned for RawHealthState {}
unsafe impl Versioned for RawPcieInfo {}
unsafe impl Versioned for RawSmluMode {}

/// A struct as handed to CNDev: zeroed, `version` set to [`CNDEV_VERSION_5`], spare bytes
/// behind it (see the module comment).
#[repr(C)]
struct Slack<T: Versioned> {
    raw: T,
    spare: [u8; SPARE],
}

impl<T: Versioned> Slack<T> {
    fn new() -> Box<Self> {
        // SAFETY: `Versioned` guarantees all-zero is a valid `T`; the spare bytes are `u8`.
        let mut slack: Box<Self> = Box::new(unsafe { std::mem::zeroed() });
        let version = (&mut slack.raw as *mut T).cast::<c_int>();
        // SAFETY: `Versioned` guarantees `T` is `repr(C)` and starts with a `c_int`, so the
        // struct's address is that field's.
        unsafe { version.write(CNDEV_VERSION_5) };
        slack
    }

    fn ptr(&mut self) -> *mut T {
        &mut self.raw
    }
}

type InitFn = unsafe extern "C" fn(c_int) -> c_int;
type ReleaseFn = unsafe extern "C" fn() -> c_int;
type DeviceCountFn = unsafe extern "C" fn(*mut RawCardInfo) -> c_int;
type HandleByIndexFn = unsafe extern "C" fn(c_int, *mut c_int) -> c_int;
type NameByDevIdFn = unsafe extern "C" fn(c_int) -> *const c_char;
type QueryFn<T> = unsafe extern "C" fn(*mut T, c_int) -> c_int;

/// The resolved entry points. Plain function pointers: valid while [`CndevLibrary::_library`]
/// is loaded, which the struct guarantees by owning both and never handing a pointer out.
struct Entries {
    init: InitFn,
    release: Option<ReleaseFn>,
    device_count: DeviceCountFn,
    handle_by_index: Option<HandleByIndexFn>,
    card_name: Option<NameByDevIdFn>,
    uuid: Option<QueryFn<RawUuid>>,
    memory: Option<QueryFn<RawMemoryInfo>>,
    version: Option<QueryFn<RawVersionInfo>>,
    ecc: Option<QueryFn<RawEccInfo>>,
    power: Option<QueryFn<RawPowerInfo>>,
    temperature: Option<QueryFn<RawTemperatureInfo>>,
    utilization: Option<QueryFn<RawUtilizationInfo>>,
    core_count: Option<QueryFn<RawCoreCount>>,
    health: Option<QueryFn<RawHealthState>>,
    pcie: Option<QueryFn<RawPcieInfo>>,
    smlu_mode_get: Option<QueryFn<RawSmluMode>>,
    smlu_mode_set: Option<QueryFn<RawSmluMode>>,
}

/// A loaded `libcndev.so`.
pub struct CndevLibrary {
    entries: Entries,
    /// Whether `cndevInit` succeeded, so that drop pairs it with `cndevRelease`.
    initialised: bool,
    // Dropped after `entries` (declaration order); the pointers there never outlive it.
    _library: Library,
}

/// Whether CNDev said the card lacks the query (rather than that the call went wrong).
pub fn is_not_supported(e: &CallError) -> bool {
    matches!(e, CallError::Missing(_)) || e.value() == Some(CNDEV_ERROR_NOT_SUPPORTED)
}

/// `CNDEV_ERROR_NOT_SUPPORTED`.
const CNDEV_ERROR_NOT_SUPPORTED: i64 = 10;

/// A failed `call` that answered `code`, with CNDev's name for it.
fn failed(call: &'static str, code: c_int) -> CallError {
    CallError::code(call, code).named(|v| return_name(v as c_int))
}

/// `Ok` for `CNDEV_SUCCESS`, else the code with its name.
fn check(call: &'static str, code: c_int) -> Result<(), CallError> {
    ffi::check(call, code).map_err(|_| failed(call, code))
}

/// A card as CNDev addresses it: `cndevDevice_t` (or, in older releases, the `devId`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle(c_int);

/// `cndevGetVersionInfo`'s driver version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverVersion {
    pub major: u32,
    pub minor: u32,
    pub build: u32,
}

/// `cndevGetMemoryUsage`'s physical memory, MB as CNDev reports it (may be negative or zero
/// where the card does not say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryFigures {
    pub total_mb: i64,
    pub used_mb: i64,
}

/// `cndevGetTemperatureInfo`'s board and chip temperatures, °C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Temperatures {
    pub board: i32,
    pub chip: i32,
}

/// `cndevGetPCIeInfo`'s address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcieAddress {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
}

impl CndevLibrary {
    /// Loads the library at `path` (a file path, or a bare name for the loader's own search)
    /// and resolves its symbols. Does not call `cndevInit`.
    pub fn open(path: &OsStr) -> Result<Self, OpenError> {
        let library = loader::load(path)?;

        macro_rules! optional {
            ($name:literal, $ty:ty) => {{
                // SAFETY: `$ty` is the function's prototype in cndev.h; the copied pointer is
                // stored next to `library`, which outlives it (see `CndevLibrary`).
                unsafe { loader::symbol::<$ty>(&library, &[$name]) }
            }};
        }

        let init = optional!("cndevInit", InitFn)
            .ok_or_else(|| OpenError::MissingSymbol("cndevInit".into()))?;
        let device_count = optional!("cndevGetDeviceCount", DeviceCountFn)
            .ok_or_else(|| OpenError::MissingSymbol("cndevGetDeviceCount".into()))?;
        let entries = Entries {
            init,
            release: optional!("cndevRelease", ReleaseFn),
            device_count,
            handle_by_index: optional!("cndevGetDeviceHandleByIndex", HandleByIndexFn),
            card_name: optional!("cndevGetCardNameStringByDevId", NameByDevIdFn),
            uuid: optional!("cndevGetUUID", QueryFn<RawUuid>),
            memory: optional!("cndevGetMemoryUsage", QueryFn<RawMemoryInfo>),
            version: optional!("cndevGetVersionInfo", QueryFn<RawVersionInfo>),
            ecc: optional!("cndevGetECCInfo", QueryFn<RawEccInfo>),
            power: optional!("cndevGetPowerInfo", QueryFn<RawPowerInfo>),
            temperature: optional!("cndevGetTemperatureInfo", QueryFn<RawTemperatureInfo>),
            utilization: optional!("cndevGetDeviceUtilizationInfo", QueryFn<RawUtilizationInfo>),
            core_count: optional!("cndevGetCoreCount", QueryFn<RawCoreCount>),
            health: optional!("cndevGetCardHealthState", QueryFn<RawHealthState>),
            pcie: optional!("cndevGetPCIeInfo", QueryFn<RawPcieInfo>),
            smlu_mode_get: optional!("cndevGetSMLUMode", QueryFn<RawSmluMode>),
            smlu_mode_set: optional!("cndevSetSMLUMode", QueryFn<RawSmluMode>),
        };
        Ok(Self {
            entries,
            initialised: false,
            _library: library,
        })
    }

    /// `cndevInit(0)` (the argument is reserved).
    pub fn init(&mut self) -> Result<(), CallError> {
        // SAFETY: a plain int argument; the pointer is valid while `self` holds the library.
        check("cndevInit", unsafe { (self.entries.init)(0) })?;
        self.initialised = true;
        Ok(())
    }

    /// `cndevGetDeviceCount`: the number of MLU cards.
    pub fn device_count(&self) -> Result<u32, CallError> {
        let mut info = Slack::<RawCardInfo>::new();
        // SAFETY: a versioned `cndevCardInfo_t` with spare room behind it.
        check("cndevGetDeviceCount", unsafe {
            (self.entries.device_count)(info.ptr())
        })?;
        Ok(info.raw.number)
    }

    /// The handle of the card at `index`: `cndevGetDeviceHandleByIndex` where exported, else
    /// the index itself (what older releases take as `devId`).
    pub fn handle(&self, index: u32) -> Result<Handle, CallError> {
        const CALL: &str = "cndevGetDeviceHandleByIndex";
        let index = c_int::try_from(index).map_err(|_| failed(CALL, 6))?;
        let Some(f) = self.entries.handle_by_index else {
            return Ok(Handle(index));
        };
        let mut handle: c_int = 0;
        // SAFETY: a valid out-pointer to a `cndevDevice_t` (`__int32_t`).
        check(CALL, unsafe { f(index, &mut handle) })?;
        Ok(Handle(handle))
    }

    /// `cndevGetCardNameStringByDevId`: the product name (`MLU370-X8`). `None` for a null
    /// pointer.
    pub fn card_name(&self, handle: Handle) -> Result<Option<String>, CallError> {
        const CALL: &str = "cndevGetCardNameStringByDevId";
        let f = present(self.entries.card_name, CALL)?;
        // SAFETY: a plain int argument.
        let name = unsafe { f(handle.0) };
        if name.is_null() {
            return Ok(None);
        }
        // SAFETY: non-null; CNDev returns a NUL-terminated string it owns for as long as the
        // library is loaded, and we copy it out at once.
        let text = unsafe { CStr::from_ptr(name) };
        Ok(Some(text.to_string_lossy().trim().to_owned()))
    }

    /// `cndevGetUUID`: the UUID text as CNDev stores it (`10001012-1916-0000-…`).
    pub fn uuid(&self, handle: Handle) -> Result<String, CallError> {
        let raw = self.query(self.entries.uuid, "cndevGetUUID", handle)?;
        Ok(c_text(&raw.raw.uuid))
    }

    /// `cndevGetMemoryUsage`: physical memory, MB.
    pub fn memory(&self, handle: Handle) -> Result<MemoryFigures, CallError> {
        let raw = self.query(self.entries.memory, "cndevGetMemoryUsage", handle)?;
        Ok(MemoryFigures {
            total_mb: raw.raw.physical_memory_total,
            used_mb: raw.raw.physical_memory_used,
        })
    }

    /// `cndevGetVersionInfo`: the MLU driver version.
    pub fn driver_version(&self, handle: Handle) -> Result<DriverVersion, CallError> {
        let raw = self.query(self.entries.version, "cndevGetVersionInfo", handle)?;
        Ok(DriverVersion {
            major: raw.raw.driver_major_version,
            minor: raw.raw.driver_minor_version,
            build: raw.raw.driver_build_version,
        })
    }

    /// `cndevGetECCInfo`'s `uncorrectedError` count.
    pub fn ecc_uncorrected(&self, handle: Handle) -> Result<u64, CallError> {
        let raw = self.query(self.entries.ecc, "cndevGetECCInfo", handle)?;
        Ok(raw.raw.uncorrected_error)
    }

    /// `cndevGetPowerInfo`'s current `usage`, W.
    pub fn power_watts(&self, handle: Handle) -> Result<i32, CallError> {
        let raw = self.query(self.entries.power, "cndevGetPowerInfo", handle)?;
        Ok(raw.raw.usage)
    }

    /// `cndevGetTemperatureInfo`'s board and chip temperatures.
    pub fn temperatures(&self, handle: Handle) -> Result<Temperatures, CallError> {
        let raw = self.query(self.entries.temperature, "cndevGetTemperatureInfo", handle)?;
        Ok(Temperatures {
            board: raw.raw.board,
            chip: raw.raw.chip,
        })
    }

    /// `cndevGetDeviceUtilizationInfo`'s `averageCoreUtilization`, percent.
    pub fn core_utilization(&self, handle: Handle) -> Result<i32, CallError> {
        let raw = self.query(
            self.entries.utilization,
            "cndevGetDeviceUtilizationInfo",
            handle,
        )?;
        Ok(raw.raw.average_core_utilization)
    }

    /// `cndevGetCoreCount`: MLU cores on the card.
    pub fn core_count(&self, handle: Handle) -> Result<i32, CallError> {
        let raw = self.query(self.entries.core_count, "cndevGetCoreCount", handle)?;
        Ok(raw.raw.count)
    }

    /// `cndevGetCardHealthState`'s `health`: 1 healthy, 0 sick.
    pub fn health(&self, handle: Handle) -> Result<i32, CallError> {
        let raw = self.query(self.entries.health, "cndevGetCardHealthState", handle)?;
        Ok(raw.raw.health)
    }

    /// `cndevGetPCIeInfo`'s domain, bus, device and function.
    pub fn pcie_address(&self, handle: Handle) -> Result<PcieAddress, CallError> {
        let raw = self.query(self.entries.pcie, "cndevGetPCIeInfo", handle)?;
        Ok(PcieAddress {
            domain: raw.raw.domain,
            bus: raw.raw.bus,
            device: raw.raw.device,
            function: raw.raw.function,
        })
    }

    /// `cndevGetSMLUMode`: whether the card is in sMLU mode (shareable as sMLU instances).
    pub fn smlu_mode(&self, handle: Handle) -> Result<bool, CallError> {
        let raw = self.query(self.entries.smlu_mode_get, "cndevGetSMLUMode", handle)?;
        Ok(raw.raw.smlu_mode == FEATURE_ENABLED)
    }

    /// `cndevSetSMLUMode`: puts the card in sMLU mode (`on`) or takes it out.
    pub fn set_smlu_mode(&self, handle: Handle, on: bool) -> Result<(), CallError> {
        const CALL: &str = "cndevSetSMLUMode";
        let f = present(self.entries.smlu_mode_set, CALL)?;
        let mut mode = Slack::<RawSmluMode>::new();
        mode.raw.smlu_mode = if on { FEATURE_ENABLED } else { 0 };
        // SAFETY: `f` has cndev.h's `cndevRet_t (cndevSMLUMode_t *, cndevDevice_t)` prototype;
        // `mode` is a versioned `cndevSMLUMode_t` CNDev reads (spare room behind it as for every
        // struct handed over).
        check(CALL, unsafe { f(mode.ptr(), handle.0) })
    }

    /// Calls a `cndevRet_t f(T *info, int devId)` query with a fresh versioned `T`.
    fn query<T: Versioned>(
        &self,
        f: Option<QueryFn<T>>,
        call: &'static str,
        handle: Handle,
    ) -> Result<Box<Slack<T>>, CallError> {
        let f = present(f, call)?;
        let mut out = Slack::<T>::new();
        // SAFETY: `f` has cndev.h's `cndevRet_t (T *, int)` prototype; `out` is a zeroed,
        // versioned `T` with spare room behind it for a larger layout.
        check(call, unsafe { f(out.ptr(), handle.0) })?;
        Ok(out)
    }
}

impl Drop for CndevLibrary {
    fn drop(&mut self) {
        if let (true, Some(release)) = (self.initialised, self.entries.release) {
            // SAFETY: no arguments; pairs the successful `cndevInit`, before the library is
            // unloaded (fields drop after this body).
            let code = unsafe { release() };
            if code != 0 {
                tracing::debug!("cndevRelease returned {code} ({})", return_name(code));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_header() {
        assert_eq!(size_of::<RawCardInfo>(), 8);
        // int, uint8[37], 7 bytes of padding, the uint64 at 48.
        assert_eq!(std::mem::offset_of!(RawUuid, ncs_uuid64), 48);
        assert_eq!(size_of::<RawUuid>(), 56);
        // int (+4 padding), 5 x int64, int64[20].
        assert_eq!(size_of::<RawMemoryInfo>(), 8 + 5 * 8 + 20 * 8);
        assert_eq!(size_of::<RawVersionInfo>(), 7 * 4);
        assert_eq!(size_of::<RawEccInfo>(), 8 + 8 * 8);
        // Six ints and a uint16, padded to 4.
        assert_eq!(size_of::<RawPowerInfo>(), 28);
        assert_eq!(size_of::<RawTemperatureInfo>(), (2 + 20 + 8 + 6) * 4);
        assert_eq!(size_of::<RawUtilizationInfo>(), (2 + 80) * 4);
        assert_eq!(size_of::<RawCoreCount>(), 8);
        assert_eq!(size_of::<RawHealthState>(), 8);
        assert_eq!(size_of::<RawSmluMode>(), 8);
        #[cfg(target_pointer_width = "64")]
        {
            // 4 + 4 + 4 + 2 + 2 + 4 x 4 = 32, the pointer at 32, slotID at 40, padded to 48.
            assert_eq!(std::mem::offset_of!(RawPcieInfo, physical_slot), 32);
            assert_eq!(size_of::<RawPcieInfo>(), 48);
        }
        assert_eq!(std::mem::offset_of!(RawUuid, uuid), 4);
        assert_eq!(std::mem::offset_of!(RawTemperatureInfo, chip), 30 * 4);
        assert_eq!(std::mem::offset_of!(RawPcieInfo, domain), 16);
    }

    #[test]
    fn structs_go_out_versioned_with_room_to_spare() {
        let mut s = Slack::<RawHealthState>::new();
        assert_eq!(s.raw.version, CNDEV_VERSION_5);
        assert_eq!(s.raw.health, 0);
        assert_eq!(
            s.ptr().cast::<u8>(),
            (&mut *s as *mut Slack<_>).cast::<u8>()
        );
        assert_eq!(Slack::<RawPcieInfo>::new().raw.version, CNDEV_VERSION_5);
        // A library that writes its own, larger layout starts where ours does and runs on into
        // the spare bytes: they follow the v5 layout directly, are zero, and hold the largest
        // growth seen between releases with room for more (a few dozen bytes: 64 is the floor).
        const GROWTH_FLOOR: usize = 64;
        assert_eq!(
            std::mem::offset_of!(Slack<RawHealthState>, spare),
            size_of::<RawHealthState>()
        );
        assert_eq!(
            std::mem::offset_of!(Slack<RawPcieInfo>, spare),
            size_of::<RawPcieInfo>()
        );
        assert!(
            size_of::<Slack<RawHealthState>>() - size_of::<RawHealthState>() >= GROWTH_FLOOR,
            "too little room after the v5 layout"
        );
        assert!(s.spare.iter().all(|&b| b == 0), "spare bytes start zeroed");
    }

    #[test]
    fn uuid_text_with_or_without_nul() {
        let mut full = [b'0'; UUID_SIZE];
        full[..8].copy_from_slice(b"10001012");
        assert_eq!(c_text(&full).len(), UUID_SIZE);
        let mut terminated = full;
        terminated[36] = 0;
        assert_eq!(c_text(&terminated).len(), 36);
    }

    #[test]
    fn return_names() {
        assert_eq!(return_name(1), "CNDEV_ERROR_NO_DRIVER");
        assert_eq!(return_name(10), "CNDEV_ERROR_NOT_SUPPORTED");
        assert_eq!(return_name(99), "unknown cndevRet_t");
        assert_eq!(
            failed("cndevInit", 1).to_string(),
            "cndevInit returned 1 (CNDEV_ERROR_NO_DRIVER)"
        );
        assert!(is_not_supported(&failed("cndevGetUUID", 10)));
        assert!(!is_not_supported(&failed("cndevGetUUID", 7)));
    }

    #[test]
    fn unloadable_library_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libcndev.so");
        std::fs::write(&path, b"not an ELF file").unwrap();
        assert!(matches!(
            CndevLibrary::open(path.as_os_str()),
            Err(OpenError::Load(_))
        ));
    }
}
