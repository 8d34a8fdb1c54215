//! The FFI boundary to IXML (`libixml.so`), Iluvatar CoreX's management library: every `unsafe`
//! of the Iluvatar detector lives here, behind a safe API.
//!
//! IXML is a clone of NVML's C API: same function names, `nvmlReturn_t` codes and struct
//! layouts (Deep-Spark/go-ixml `pkg/ixml/api.h`). Symbols are looked up by name at run time
//! (`dlopen` by path through libloading), so a node without the CoreX SDK still runs.
//!
//! Symbol names. Iluvatar's own loader (Deep-Spark/ix-device-plugin `pkg/ixml/ixml_dl.c`) looks
//! up the unversioned NVML names (`nvmlInit`, `nvmlDeviceGetCount`, `nvmlDeviceGetHandleByIndex`,
//! `nvmlDeviceGetPciInfo`); go-ixml's `api.h` declares the versioned ones for those four
//! (`nvmlInit_v2`, `nvmlDeviceGetCount_v2`, `nvmlDeviceGetHandleByIndex_v2`,
//! `nvmlDeviceGetPciInfo_v3`). The unversioned name is tried first and the versioned one is the
//! fallback, so either kind of library loads. Every other function has one name in both sources.
//!
//! Layouts (api.h):
//! - `nvmlDevice_t` is `struct { struct nvmlDevice_st *handle; }`: one pointer, passed and
//!   returned exactly like a pointer on the C ABIs we run on, hence `#[repr(transparent)]`.
//! - `nvmlMemory_t` (v1): `{ unsigned long long total, free, used; }`, filled by
//!   `nvmlDeviceGetMemoryInfo`.
//! - `nvmlPciInfo_t`: `busIdLegacy[16]`, `domain`, `bus`, `device`, `pciDeviceId`,
//!   `pciSubSystemId`, `busId[32]` (68 bytes). NVML's unversioned `nvmlDeviceGetPciInfo` fills
//!   the older 52-byte layout (`busId[16]` first, reserved words last) instead; the buffer passed
//!   is always the larger one, zeroed, so either layout fits, and the caller reads `busId` with
//!   `busIdLegacy` (where the old layout keeps its bus id) as the fallback.
//! - `nvmlUtilization_t`: `{ unsigned int gpu, memory; }`.

#![allow(unsafe_code)]

use std::{
    ffi::{OsStr, c_char, c_int, c_uint, c_ulonglong, c_void},
    fmt,
};

use libloading::Library;

/// `nvmlReturn_t`: an IXML call's status.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Return(pub c_uint);

impl Return {
    pub const SUCCESS: Return = Return(0);
    /// `NVML_ERROR_FUNCTION_NOT_FOUND`: also what a missing optional symbol answers.
    pub const FUNCTION_NOT_FOUND: Return = Return(13);

    fn ok(self) -> Result<(), Return> {
        if self == Self::SUCCESS {
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl fmt::Display for Return {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // api.h's names for the codes an operator is likely to meet.
        let name = match self.0 {
            0 => "NVML_SUCCESS",
            1 => "NVML_ERROR_UNINITIALIZED",
            2 => "NVML_ERROR_INVALID_ARGUMENT",
            3 => "NVML_ERROR_NOT_SUPPORTED",
            4 => "NVML_ERROR_NO_PERMISSION",
            6 => "NVML_ERROR_NOT_FOUND",
            7 => "NVML_ERROR_INSUFFICIENT_SIZE",
            9 => "NVML_ERROR_DRIVER_NOT_LOADED",
            12 => "NVML_ERROR_LIBRARY_NOT_FOUND",
            13 => "NVML_ERROR_FUNCTION_NOT_FOUND",
            15 => "NVML_ERROR_GPU_IS_LOST",
            18 => "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
            999 => "NVML_ERROR_UNKNOWN",
            _ => "unnamed IXML status",
        };
        write!(f, "{name} ({})", self.0)
    }
}

/// `nvmlDevice_t`: opaque, only ever handed back to the library.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct RawDevice(*mut c_void);

/// `nvmlMemory_t` (v1).
#[repr(C)]
#[derive(Default)]
struct RawMemory {
    total: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// `nvmlPciInfo_t` as api.h declares it.
#[repr(C)]
struct RawPciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    bus_id: [c_char; 32],
}

/// `nvmlUtilization_t`.
#[repr(C)]
#[derive(Default)]
struct RawUtilization {
    gpu: c_uint,
    memory: c_uint,
}

/// `NVML_DEVICE_NAME_V2_BUFFER_SIZE`, also enough for a UUID (api.h: "will not exceed 96
/// characters in length (including the NULL terminator)").
const NAME_BUFFER: usize = 96;
/// `NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE`.
const DRIVER_VERSION_BUFFER: usize = 80;
/// `NVML_TEMPERATURE_GPU`.
const TEMPERATURE_GPU: c_uint = 0;

type InitFn = unsafe extern "C" fn() -> Return;
type CountFn = unsafe extern "C" fn(*mut c_uint) -> Return;
type HandleFn = unsafe extern "C" fn(c_uint, *mut RawDevice) -> Return;
type SystemStringFn = unsafe extern "C" fn(*mut c_char, c_uint) -> Return;
type SystemIntFn = unsafe extern "C" fn(*mut c_int) -> Return;
type DeviceStringFn = unsafe extern "C" fn(RawDevice, *mut c_char, c_uint) -> Return;
type DeviceUintFn = unsafe extern "C" fn(RawDevice, *mut c_uint) -> Return;
type MemoryFn = unsafe extern "C" fn(RawDevice, *mut RawMemory) -> Return;
type PciFn = unsafe extern "C" fn(RawDevice, *mut RawPciInfo) -> Return;
type CapabilityFn = unsafe extern "C" fn(RawDevice, *mut c_int, *mut c_int) -> Return;
type TemperatureFn = unsafe extern "C" fn(RawDevice, c_uint, *mut c_uint) -> Return;
type UtilizationFn = unsafe extern "C" fn(RawDevice, *mut RawUtilization) -> Return;
type HealthFn = unsafe extern "C" fn(RawDevice, *mut c_ulonglong) -> Return;

/// Names tried for each function, in order (see the module comment).
pub mod symbols {
    pub const INIT: &[&str] = &["nvmlInit", "nvmlInit_v2"];
    pub const SHUTDOWN: &[&str] = &["nvmlShutdown"];
    pub const DEVICE_COUNT: &[&str] = &["nvmlDeviceGetCount", "nvmlDeviceGetCount_v2"];
    pub const HANDLE_BY_INDEX: &[&str] = &[
        "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetHandleByIndex_v2",
    ];
    pub const PCI_INFO: &[&str] = &["nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v3"];
    pub const DRIVER_VERSION: &[&str] = &["nvmlSystemGetDriverVersion"];
    pub const CUDA_DRIVER_VERSION: &[&str] = &["nvmlSystemGetCudaDriverVersion"];
    pub const UUID: &[&str] = &["nvmlDeviceGetUUID"];
    pub const NAME: &[&str] = &["nvmlDeviceGetName"];
    pub const MINOR_NUMBER: &[&str] = &["nvmlDeviceGetMinorNumber"];
    pub const MEMORY_INFO: &[&str] = &["nvmlDeviceGetMemoryInfo"];
    pub const COMPUTE_CAPABILITY: &[&str] = &["nvmlDeviceGetCudaComputeCapability"];
    pub const TEMPERATURE: &[&str] = &["nvmlDeviceGetTemperature"];
    pub const POWER_USAGE: &[&str] = &["nvmlDeviceGetPowerUsage"];
    pub const UTILIZATION: &[&str] = &["nvmlDeviceGetUtilizationRates"];
    pub const HEALTH: &[&str] = &["ixmlDeviceGetHealth"];
}

/// The functions found in the library. The first five are needed to enumerate anything at all;
/// the rest answer `FUNCTION_NOT_FOUND` when absent, like a query the product lacks.
struct Functions {
    init: InitFn,
    shutdown: InitFn,
    device_count: CountFn,
    handle_by_index: HandleFn,
    uuid: DeviceStringFn,
    name: Option<DeviceStringFn>,
    driver_version: Option<SystemStringFn>,
    cuda_driver_version: Option<SystemIntFn>,
    minor_number: Option<DeviceUintFn>,
    memory_info: Option<MemoryFn>,
    pci_info: Option<PciFn>,
    compute_capability: Option<CapabilityFn>,
    temperature: Option<TemperatureFn>,
    power_usage: Option<DeviceUintFn>,
    utilization: Option<UtilizationFn>,
    health: Option<HealthFn>,
}

/// Why IXML could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("could not be loaded: {0}")]
    Load(#[source] libloading::Error),
    #[error("lacks {0}, which reading accelerators needs")]
    MissingSymbol(String),
    #[error("nvmlInit failed: {0}")]
    Init(Return),
}

/// The first of `names` the library exports, as a function pointer of type `T`.
///
/// # Safety
/// `T` must be the C signature api.h gives every name in `names`.
unsafe fn lookup<T: Copy>(library: &Library, names: &[&str]) -> Option<T> {
    names.iter().find_map(|name| {
        // SAFETY: the caller guarantees `T` is the symbol's C signature; the pointer is copied
        // out and only called while `library` is alive (both are owned by `IxmlLib`).
        unsafe { library.get::<T>(name.as_bytes()).ok().map(|s| *s) }
    })
}

fn required<T: Copy>(library: &Library, names: &[&str]) -> Result<T, OpenError> {
    // SAFETY: every call site pairs a `symbols` list with the fn type api.h declares for it.
    unsafe { lookup(library, names) }.ok_or_else(|| OpenError::MissingSymbol(names.join(" or ")))
}

fn optional<T: Copy>(library: &Library, names: &[&str]) -> Option<T> {
    // SAFETY: as in `required`.
    unsafe { lookup(library, names) }
}

/// An initialised IXML. Shut down (once, matching the one init) when dropped; the library is
/// unloaded after that, since the function pointers are dropped with it.
pub struct IxmlLib {
    fns: Functions,
    _library: Library,
}

impl IxmlLib {
    /// Loads the library at `path` (a file path, or a bare name for the loader's own search),
    /// resolves its functions and initialises it.
    pub fn open(path: &OsStr) -> Result<IxmlLib, OpenError> {
        // SAFETY: loading runs the library's initialisers. `path` is the vendor's management
        // library found in the CoreX directories (or the test stand-in), whose initialisers
        // are expected to be sound; this is the same trust `dlopen` in Iluvatar's own tools has.
        let library = unsafe { Library::new(path) }.map_err(OpenError::Load)?;
        let fns = Functions {
            init: required(&library, symbols::INIT)?,
            shutdown: required(&library, symbols::SHUTDOWN)?,
            device_count: required(&library, symbols::DEVICE_COUNT)?,
            handle_by_index: required(&library, symbols::HANDLE_BY_INDEX)?,
            uuid: required(&library, symbols::UUID)?,
            name: optional(&library, symbols::NAME),
            driver_version: optional(&library, symbols::DRIVER_VERSION),
            cuda_driver_version: optional(&library, symbols::CUDA_DRIVER_VERSION),
            minor_number: optional(&library, symbols::MINOR_NUMBER),
            memory_info: optional(&library, symbols::MEMORY_INFO),
            pci_info: optional(&library, symbols::PCI_INFO),
            compute_capability: optional(&library, symbols::COMPUTE_CAPABILITY),
            temperature: optional(&library, symbols::TEMPERATURE),
            power_usage: optional(&library, symbols::POWER_USAGE),
            utilization: optional(&library, symbols::UTILIZATION),
            health: optional(&library, symbols::HEALTH),
        };
        // SAFETY: `nvmlInit(void)`; no arguments, the library is loaded.
        unsafe { (fns.init)() }.ok().map_err(OpenError::Init)?;
        Ok(IxmlLib {
            fns,
            _library: library,
        })
    }

    /// `nvmlDeviceGetCount`.
    pub fn device_count(&self) -> Result<u32, Return> {
        let mut count: c_uint = 0;
        // SAFETY: `count` is a valid, writable `unsigned int`.
        unsafe { (self.fns.device_count)(&mut count) }.ok()?;
        Ok(count)
    }

    /// `nvmlDeviceGetHandleByIndex`.
    pub fn device(&self, index: u32) -> Result<Device<'_>, Return> {
        let mut handle = RawDevice(std::ptr::null_mut());
        // SAFETY: `handle` is a valid, writable `nvmlDevice_t`.
        unsafe { (self.fns.handle_by_index)(index, &mut handle) }.ok()?;
        Ok(Device { ixml: self, handle })
    }

    /// `nvmlSystemGetDriverVersion`.
    pub fn driver_version(&self) -> Result<String, Return> {
        let f = self.fns.driver_version.ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut buf = [0 as c_char; DRIVER_VERSION_BUFFER];
        // SAFETY: `buf` holds `buf.len()` writable bytes, the length passed.
        unsafe { f(buf.as_mut_ptr(), buf.len() as c_uint) }.ok()?;
        Ok(c_text(&buf))
    }

    /// `nvmlSystemGetCudaDriverVersion`: `1000 * major + 10 * minor`, as NVML encodes it.
    pub fn cuda_driver_version(&self) -> Result<i32, Return> {
        let f = self
            .fns
            .cuda_driver_version
            .ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut version: c_int = 0;
        // SAFETY: `version` is a valid, writable `int`.
        unsafe { f(&mut version) }.ok()?;
        Ok(version)
    }
}

impl Drop for IxmlLib {
    fn drop(&mut self) {
        // SAFETY: `nvmlShutdown(void)`, balancing the one successful `nvmlInit` in `open`; the
        // library is still loaded (it is dropped after this).
        let status = unsafe { (self.fns.shutdown)() };
        if status != Return::SUCCESS {
            tracing::debug!("nvmlShutdown of libixml.so answered {status}");
        }
    }
}

/// Memory in bytes, as `nvmlMemory_t` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory {
    pub total: u64,
    pub free: u64,
    pub used: u64,
}

/// What `nvmlDeviceGetPciInfo` filled in: both bus id strings (either may be empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciInfo {
    pub bus_id: String,
    pub bus_id_legacy: String,
}

/// One device handle, valid while its [`IxmlLib`] is.
pub struct Device<'a> {
    ixml: &'a IxmlLib,
    handle: RawDevice,
}

impl Device<'_> {
    fn string(&self, f: DeviceStringFn) -> Result<String, Return> {
        let mut buf = [0 as c_char; NAME_BUFFER];
        // SAFETY: `handle` came from `nvmlDeviceGetHandleByIndex` of this initialised library;
        // `buf` holds `buf.len()` writable bytes, the length passed.
        unsafe { f(self.handle, buf.as_mut_ptr(), buf.len() as c_uint) }.ok()?;
        Ok(c_text(&buf))
    }

    fn uint(&self, f: Option<DeviceUintFn>) -> Result<u32, Return> {
        let f = f.ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut value: c_uint = 0;
        // SAFETY: valid handle (see `string`); `value` is a writable `unsigned int`.
        unsafe { f(self.handle, &mut value) }.ok()?;
        Ok(value)
    }

    /// `nvmlDeviceGetUUID`.
    pub fn uuid(&self) -> Result<String, Return> {
        self.string(self.ixml.fns.uuid)
    }

    /// `nvmlDeviceGetName`.
    pub fn name(&self) -> Result<String, Return> {
        self.string(self.ixml.fns.name.ok_or(Return::FUNCTION_NOT_FOUND)?)
    }

    /// `nvmlDeviceGetMinorNumber`.
    pub fn minor_number(&self) -> Result<u32, Return> {
        self.uint(self.ixml.fns.minor_number)
    }

    /// `nvmlDeviceGetPowerUsage`, milliwatts.
    pub fn power_usage_mw(&self) -> Result<u32, Return> {
        self.uint(self.ixml.fns.power_usage)
    }

    /// `nvmlDeviceGetMemoryInfo` (v1 struct).
    pub fn memory(&self) -> Result<Memory, Return> {
        let f = self
            .ixml
            .fns
            .memory_info
            .ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut m = RawMemory::default();
        // SAFETY: valid handle (see `string`); `m` is a writable `nvmlMemory_t`.
        unsafe { f(self.handle, &mut m) }.ok()?;
        Ok(Memory {
            total: m.total,
            free: m.free,
            used: m.used,
        })
    }

    /// `nvmlDeviceGetPciInfo` (see the module comment on its two layouts).
    pub fn pci_info(&self) -> Result<PciInfo, Return> {
        let f = self.ixml.fns.pci_info.ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut pci = RawPciInfo {
            bus_id_legacy: [0; 16],
            domain: 0,
            bus: 0,
            device: 0,
            pci_device_id: 0,
            pci_sub_system_id: 0,
            bus_id: [0; 32],
        };
        // SAFETY: valid handle (see `string`); `pci` is a zeroed, writable struct at least as
        // large as either layout the function may fill.
        unsafe { f(self.handle, &mut pci) }.ok()?;
        Ok(PciInfo {
            bus_id: c_text(&pci.bus_id),
            bus_id_legacy: c_text(&pci.bus_id_legacy),
        })
    }

    /// `nvmlDeviceGetCudaComputeCapability`: (major, minor).
    pub fn compute_capability(&self) -> Result<(i32, i32), Return> {
        let f = self
            .ixml
            .fns
            .compute_capability
            .ok_or(Return::FUNCTION_NOT_FOUND)?;
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: valid handle (see `string`); both are writable `int`s.
        unsafe { f(self.handle, &mut major, &mut minor) }.ok()?;
        Ok((major, minor))
    }

    /// `nvmlDeviceGetTemperature` of the GPU die sensor, °C.
    pub fn temperature(&self) -> Result<u32, Return> {
        let f = self
            .ixml
            .fns
            .temperature
            .ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut t: c_uint = 0;
        // SAFETY: valid handle (see `string`); a valid sensor enum; `t` is writable.
        unsafe { f(self.handle, TEMPERATURE_GPU, &mut t) }.ok()?;
        Ok(t)
    }

    /// `nvmlDeviceGetUtilizationRates`: (gpu, memory) percent.
    pub fn utilization(&self) -> Result<(u32, u32), Return> {
        let f = self
            .ixml
            .fns
            .utilization
            .ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut u = RawUtilization::default();
        // SAFETY: valid handle (see `string`); `u` is a writable `nvmlUtilization_t`.
        unsafe { f(self.handle, &mut u) }.ok()?;
        Ok((u.gpu, u.memory))
    }

    /// `ixmlDeviceGetHealth`: a bitmask of api.h's `ixmlHealth*` flags, 0 = `ixmlHealthOK`.
    pub fn health(&self) -> Result<u64, Return> {
        let f = self.ixml.fns.health.ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut h: c_ulonglong = 0;
        // SAFETY: valid handle (see `string`); `h` is a writable `unsigned long long`.
        unsafe { f(self.handle, &mut h) }.ok()?;
        Ok(h)
    }
}

/// The text of a C char buffer up to its first NUL, or the whole buffer when the library left
/// none; never reads past the buffer. Invalid UTF-8 is replaced, not trusted.
fn c_text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_api_h() {
        assert_eq!(size_of::<RawPciInfo>(), 68);
        assert_eq!(std::mem::offset_of!(RawPciInfo, domain), 16);
        assert_eq!(std::mem::offset_of!(RawPciInfo, bus_id), 36);
        assert_eq!(size_of::<RawMemory>(), 24);
        assert_eq!(size_of::<RawUtilization>(), 8);
        assert_eq!(size_of::<RawDevice>(), size_of::<*mut c_void>());
    }

    #[test]
    fn c_text_stops_at_nul_and_at_the_end() {
        let mut buf = [0 as c_char; 8];
        for (slot, b) in buf.iter_mut().zip(b"4.1.0\0xx") {
            *slot = *b as c_char;
        }
        assert_eq!(c_text(&buf), "4.1.0");
        let full = [b'a' as c_char; 4];
        assert_eq!(c_text(&full), "aaaa");
        assert_eq!(c_text(&[0; 4]), "");
    }

    #[test]
    fn unversioned_names_come_first() {
        for list in [
            symbols::INIT,
            symbols::DEVICE_COUNT,
            symbols::HANDLE_BY_INDEX,
            symbols::PCI_INFO,
        ] {
            assert!(!list[0].contains("_v"), "{list:?}");
            assert!(list[1].starts_with(list[0]), "{list:?}");
        }
    }

    #[test]
    fn statuses_are_named() {
        assert_eq!(Return(9).to_string(), "NVML_ERROR_DRIVER_NOT_LOADED (9)");
        assert_eq!(Return(42).to_string(), "unnamed IXML status (42)");
    }

    #[test]
    fn a_file_that_is_not_a_library_is_a_load_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libixml.so");
        std::fs::write(&path, b"not an ELF file").unwrap();
        assert!(matches!(
            IxmlLib::open(path.as_os_str()),
            Err(OpenError::Load(_))
        ));
    }
}
