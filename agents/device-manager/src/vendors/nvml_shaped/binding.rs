//! The C ABI that NVML-shaped libraries share, and the only `unsafe` behind it: IXML and HGML
//! export NVML's functions (IXML under NVML's own names, HGML with an `hgml` prefix) with NVML's
//! status codes, opaque device handles and struct layouts. Each library's names are its own
//! [`Symbols`] table, kept with its sources in `vendors/<v>/<lib>.rs`; what only one library has
//! (IXML's health, HGML's v2 memory record and GPU instances) is bound there too, on the raw
//! handle [`Device::raw`] gives.
//!
//! Layouts (NVML's `nvml.h`, which go-ixml's `api.h` and pyhgml repeat):
//! - the device handle is `struct { struct nvmlDevice_st *handle; }` or a bare pointer: one
//!   pointer, passed and returned exactly like a pointer on the C ABIs we run on, hence
//!   `#[repr(transparent)]`;
//! - the v1 memory record is `{ unsigned long long total, free, used; }`;
//! - the PCI record is `busIdLegacy[16]`, `domain`, `bus`, `device`, `pciDeviceId`,
//!   `pciSubSystemId`, `busId[32]` (68 bytes). An unversioned (or `_v2`) PCI call may fill the
//!   older 52-byte layout instead (`busId[16]` first, four reserved words last); `domain`, `bus`
//!   and `device` sit at offsets 16, 20 and 24 in both, and the buffer passed is always the
//!   larger one, zeroed, so either layout fits;
//! - the utilisation record is `{ unsigned int gpu, memory; }`.

#![allow(unsafe_code)]

use std::{
    ffi::{OsStr, c_char, c_int, c_uint, c_ulonglong, c_void},
    fmt,
};

use libloading::Library;

use super::Memory;
use crate::vendors::ffi::{OpenError, c_text, loader};

/// The names tried for each shared function, in order, and how the library names its statuses.
pub struct Symbols {
    /// The prefix of the header's status names (`NVML` for `NVML_ERROR_NOT_FOUND`).
    pub status_prefix: &'static str,
    /// The library's name in a message about a status the header does not name.
    pub library: &'static str,
    pub init: &'static [&'static str],
    pub shutdown: &'static [&'static str],
    pub device_count: &'static [&'static str],
    pub handle_by_index: &'static [&'static str],
    pub uuid: &'static [&'static str],
    pub name: &'static [&'static str],
    pub driver_version: &'static [&'static str],
    /// The driver's compute runtime version (`1000 * major + 10 * minor`): CUDA's for IXML,
    /// HGGC's for HGML.
    pub runtime_version: &'static [&'static str],
    pub minor_number: &'static [&'static str],
    /// The v1 memory record's call.
    pub memory_info: &'static [&'static str],
    pub pci_info: &'static [&'static str],
    pub compute_capability: &'static [&'static str],
    pub temperature: &'static [&'static str],
    pub power_usage: &'static [&'static str],
    pub utilization: &'static [&'static str],
}

impl Symbols {
    /// `code` as this library's status.
    pub fn status(&'static self, code: c_uint) -> Status {
        Status {
            code,
            symbols: self,
        }
    }
}

/// A call's status (`nvmlReturn_t`, `hgmlReturn_t`), named as the library's header names it.
#[derive(Clone, Copy)]
pub struct Status {
    /// The code the library returned.
    pub code: c_uint,
    symbols: &'static Symbols,
}

/// `*_SUCCESS`.
pub const SUCCESS: c_uint = 0;
/// `*_ERROR_INVALID_ARGUMENT`.
pub const INVALID_ARGUMENT: c_uint = 2;
/// `*_ERROR_NOT_SUPPORTED`.
pub const NOT_SUPPORTED: c_uint = 3;
/// `*_ERROR_NOT_FOUND`.
pub const NOT_FOUND: c_uint = 6;
/// `*_ERROR_INSUFFICIENT_SIZE`.
pub const INSUFFICIENT_SIZE: c_uint = 7;
/// `*_ERROR_FUNCTION_NOT_FOUND`: also what a missing optional symbol answers.
pub const FUNCTION_NOT_FOUND: c_uint = 13;

impl Status {
    /// The driver's own answer that nothing exists at the id asked about (the Go operator's
    /// `driverReportsAbsent`), as opposed to a query it could not answer.
    pub fn is_absent(self) -> bool {
        matches!(self.code, NOT_SUPPORTED | NOT_FOUND | INVALID_ARGUMENT)
    }

    /// Whether the library lacks the function (the symbol, or the library's own answer).
    pub fn is_function_not_found(self) -> bool {
        self.code == FUNCTION_NOT_FOUND
    }

    /// `Ok` for success, else this status.
    pub fn ok(self) -> Result<(), Status> {
        if self.code == SUCCESS {
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl PartialEq for Status {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code
    }
}

impl Eq for Status {}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Status({self})")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The headers' names for the codes an operator is likely to meet.
        let name = match self.code {
            0 => "SUCCESS",
            1 => "ERROR_UNINITIALIZED",
            2 => "ERROR_INVALID_ARGUMENT",
            3 => "ERROR_NOT_SUPPORTED",
            4 => "ERROR_NO_PERMISSION",
            6 => "ERROR_NOT_FOUND",
            7 => "ERROR_INSUFFICIENT_SIZE",
            9 => "ERROR_DRIVER_NOT_LOADED",
            12 => "ERROR_LIBRARY_NOT_FOUND",
            13 => "ERROR_FUNCTION_NOT_FOUND",
            15 => "ERROR_GPU_IS_LOST",
            18 => "ERROR_LIB_RM_VERSION_MISMATCH",
            28 => "ERROR_GPU_NOT_FOUND",
            999 => "ERROR_UNKNOWN",
            code => return write!(f, "unnamed {} status ({code})", self.symbols.library),
        };
        write!(f, "{}_{name} ({})", self.symbols.status_prefix, self.code)
    }
}

impl std::error::Error for Status {}

/// The device handle: opaque, only ever handed back to the library.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct RawDevice(*mut c_void);

/// The v1 memory record.
#[repr(C)]
#[derive(Default)]
struct RawMemory {
    total: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// The PCI record (the 68-byte layout; see the module comment for the legacy one).
#[repr(C)]
#[derive(Default)]
struct RawPciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    bus_id: [c_char; 32],
}

/// The utilisation record.
#[repr(C)]
#[derive(Default)]
struct RawUtilization {
    gpu: c_uint,
    memory: c_uint,
}

/// `*_DEVICE_NAME_V2_BUFFER_SIZE`, also enough for a UUID (96 bytes with the NUL).
const NAME_BUFFER: usize = 96;
/// `*_SYSTEM_DRIVER_VERSION_BUFFER_SIZE`.
const DRIVER_VERSION_BUFFER: usize = 80;
/// `*_TEMPERATURE_GPU`.
const TEMPERATURE_GPU: c_uint = 0;

type InitFn = unsafe extern "C" fn() -> c_uint;
type CountFn = unsafe extern "C" fn(*mut c_uint) -> c_uint;
type HandleFn = unsafe extern "C" fn(c_uint, *mut RawDevice) -> c_uint;
type SystemStringFn = unsafe extern "C" fn(*mut c_char, c_uint) -> c_uint;
type SystemIntFn = unsafe extern "C" fn(*mut c_int) -> c_uint;
type DeviceStringFn = unsafe extern "C" fn(RawDevice, *mut c_char, c_uint) -> c_uint;
type DeviceUintFn = unsafe extern "C" fn(RawDevice, *mut c_uint) -> c_uint;
type MemoryFn = unsafe extern "C" fn(RawDevice, *mut RawMemory) -> c_uint;
type PciFn = unsafe extern "C" fn(RawDevice, *mut RawPciInfo) -> c_uint;
type CapabilityFn = unsafe extern "C" fn(RawDevice, *mut c_int, *mut c_int) -> c_uint;
type TemperatureFn = unsafe extern "C" fn(RawDevice, c_uint, *mut c_uint) -> c_uint;
type UtilizationFn = unsafe extern "C" fn(RawDevice, *mut RawUtilization) -> c_uint;

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
    runtime_version: Option<SystemIntFn>,
    minor_number: Option<DeviceUintFn>,
    memory_info: Option<MemoryFn>,
    pci_info: Option<PciFn>,
    compute_capability: Option<CapabilityFn>,
    temperature: Option<TemperatureFn>,
    power_usage: Option<DeviceUintFn>,
    utilization: Option<UtilizationFn>,
}

/// An initialised NVML-shaped library. Shut down (once, matching the one init) when dropped;
/// the library is unloaded after that, since the function pointers are dropped with it.
pub struct NvmlShapedLibrary {
    fns: Functions,
    symbols: &'static Symbols,
    // Dropped after `fns` (declaration order); the pointers there never outlive it.
    library: Library,
}

impl NvmlShapedLibrary {
    /// Loads the library at `path` (a file path, or a bare name for the loader's own search),
    /// resolves the shared functions by `symbols` and initialises it.
    pub fn open(path: &OsStr, symbols: &'static Symbols) -> Result<Self, OpenError> {
        let library = loader::load(path)?;
        // SAFETY: for every lookup below, each `Symbols` list names one NVML function, and the fn
        // type it is resolved as is that function's prototype in nvml.h, which the NVML-shaped
        // headers repeat. The pointers are stored next to `library`, which outlives them.
        let fns = unsafe {
            Functions {
                init: loader::required(&library, symbols.init)?,
                shutdown: loader::required(&library, symbols.shutdown)?,
                device_count: loader::required(&library, symbols.device_count)?,
                handle_by_index: loader::required(&library, symbols.handle_by_index)?,
                uuid: loader::required(&library, symbols.uuid)?,
                name: loader::symbol(&library, symbols.name),
                driver_version: loader::symbol(&library, symbols.driver_version),
                runtime_version: loader::symbol(&library, symbols.runtime_version),
                minor_number: loader::symbol(&library, symbols.minor_number),
                memory_info: loader::symbol(&library, symbols.memory_info),
                pci_info: loader::symbol(&library, symbols.pci_info),
                compute_capability: loader::symbol(&library, symbols.compute_capability),
                temperature: loader::symbol(&library, symbols.temperature),
                power_usage: loader::symbol(&library, symbols.power_usage),
                utilization: loader::symbol(&library, symbols.utilization),
            }
        };
        // SAFETY: `init(void)`; no arguments, the library is loaded.
        let status = symbols.status(unsafe { (fns.init)() });
        status.ok().map_err(|status| OpenError::Init {
            call: symbols.init[0],
            status: Box::new(status),
        })?;
        Ok(Self {
            fns,
            symbols,
            library,
        })
    }

    /// The loaded library, for resolving the functions only one NVML-shaped library has.
    pub fn library(&self) -> &Library {
        &self.library
    }

    /// `code` as this library's status.
    pub fn status(&self, code: c_uint) -> Status {
        self.symbols.status(code)
    }

    /// The status a missing optional function answers.
    pub fn function_not_found(&self) -> Status {
        self.status(FUNCTION_NOT_FOUND)
    }

    /// `*DeviceGetCount`.
    pub fn device_count(&self) -> Result<u32, Status> {
        let mut count: c_uint = 0;
        // SAFETY: `count` is a valid, writable `unsigned int`.
        self.status(unsafe { (self.fns.device_count)(&mut count) })
            .ok()?;
        Ok(count)
    }

    /// `*DeviceGetHandleByIndex`.
    pub fn device(&self, index: u32) -> Result<Device<'_>, Status> {
        let mut handle = RawDevice(std::ptr::null_mut());
        // SAFETY: `handle` is a valid, writable device handle.
        self.status(unsafe { (self.fns.handle_by_index)(index, &mut handle) })
            .ok()?;
        Ok(Device { lib: self, handle })
    }

    /// `*SystemGetDriverVersion`.
    pub fn driver_version(&self) -> Result<String, Status> {
        let f = self.fns.driver_version.ok_or(self.function_not_found())?;
        let mut buf = [0 as c_char; DRIVER_VERSION_BUFFER];
        // SAFETY: `buf` holds `buf.len()` writable bytes, the length passed.
        self.status(unsafe { f(buf.as_mut_ptr(), buf.len() as c_uint) })
            .ok()?;
        Ok(c_text(&buf))
    }

    /// The compute runtime's driver version, `1000 * major + 10 * minor`.
    pub fn runtime_version(&self) -> Result<i32, Status> {
        let f = self.fns.runtime_version.ok_or(self.function_not_found())?;
        let mut version: c_int = 0;
        // SAFETY: `version` is a valid, writable `int`.
        self.status(unsafe { f(&mut version) }).ok()?;
        Ok(version)
    }
}

impl Drop for NvmlShapedLibrary {
    fn drop(&mut self) {
        // SAFETY: `shutdown(void)`, balancing the one successful init in `open`; the library is
        // still loaded (it is dropped after this).
        let status = self.status(unsafe { (self.fns.shutdown)() });
        if status.ok().is_err() {
            tracing::debug!(
                "{} of the {} library answered {status}",
                self.symbols.shutdown[0],
                self.symbols.library
            );
        }
    }
}

/// What the PCI call filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciInfo {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    /// The 68-byte layout's `busId` (empty from the legacy layout).
    pub bus_id: String,
    /// The 68-byte layout's `busIdLegacy`, or the legacy layout's `busId`.
    pub bus_id_legacy: String,
}

/// One device handle, valid while its [`NvmlShapedLibrary`] is.
pub struct Device<'a> {
    lib: &'a NvmlShapedLibrary,
    handle: RawDevice,
}

impl Device<'_> {
    /// The raw handle, for the functions only one library binds; valid while [`Self::lib`] is.
    pub fn raw(&self) -> RawDevice {
        self.handle
    }

    fn string(&self, f: DeviceStringFn) -> Result<String, Status> {
        let mut buf = [0 as c_char; NAME_BUFFER];
        // SAFETY: `handle` came from the handle-by-index call of this initialised library;
        // `buf` holds `buf.len()` writable bytes, the length passed.
        let code = unsafe { f(self.handle, buf.as_mut_ptr(), buf.len() as c_uint) };
        self.lib.status(code).ok()?;
        Ok(c_text(&buf))
    }

    fn uint(&self, f: Option<DeviceUintFn>) -> Result<u32, Status> {
        let f = f.ok_or(self.lib.function_not_found())?;
        let mut value: c_uint = 0;
        // SAFETY: valid handle (see `string`); `value` is a writable `unsigned int`.
        let code = unsafe { f(self.handle, &mut value) };
        self.lib.status(code).ok()?;
        Ok(value)
    }

    /// `*DeviceGetUUID`.
    pub fn uuid(&self) -> Result<String, Status> {
        self.string(self.lib.fns.uuid)
    }

    /// `*DeviceGetName`.
    pub fn name(&self) -> Result<String, Status> {
        self.string(self.lib.fns.name.ok_or(self.lib.function_not_found())?)
    }

    /// `*DeviceGetMinorNumber`.
    pub fn minor_number(&self) -> Result<u32, Status> {
        self.uint(self.lib.fns.minor_number)
    }

    /// `*DeviceGetPowerUsage`, milliwatts.
    pub fn power_usage_mw(&self) -> Result<u32, Status> {
        self.uint(self.lib.fns.power_usage)
    }

    /// The v1 memory record's call.
    pub fn memory(&self) -> Result<Memory, Status> {
        let f = self
            .lib
            .fns
            .memory_info
            .ok_or(self.lib.function_not_found())?;
        let mut m = RawMemory::default();
        // SAFETY: valid handle (see `string`); `m` is a writable v1 memory record.
        self.lib.status(unsafe { f(self.handle, &mut m) }).ok()?;
        Ok(Memory {
            total: m.total,
            used: m.used,
        })
    }

    /// The PCI call (see the module comment on its two layouts).
    pub fn pci_info(&self) -> Result<PciInfo, Status> {
        let f = self.lib.fns.pci_info.ok_or(self.lib.function_not_found())?;
        let mut pci = RawPciInfo::default();
        // SAFETY: valid handle (see `string`); `pci` is a zeroed, writable struct at least as
        // large as either layout the function may fill.
        self.lib.status(unsafe { f(self.handle, &mut pci) }).ok()?;
        Ok(PciInfo {
            domain: pci.domain,
            bus: pci.bus,
            device: pci.device,
            bus_id: c_text(&pci.bus_id),
            bus_id_legacy: c_text(&pci.bus_id_legacy),
        })
    }

    /// The compute capability: (major, minor).
    pub fn compute_capability(&self) -> Result<(i32, i32), Status> {
        let f = self
            .lib
            .fns
            .compute_capability
            .ok_or(self.lib.function_not_found())?;
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: valid handle (see `string`); both are writable `int`s.
        let code = unsafe { f(self.handle, &mut major, &mut minor) };
        self.lib.status(code).ok()?;
        Ok((major, minor))
    }

    /// `*DeviceGetTemperature` of the GPU sensor, °C.
    pub fn temperature(&self) -> Result<u32, Status> {
        let f = self
            .lib
            .fns
            .temperature
            .ok_or(self.lib.function_not_found())?;
        let mut t: c_uint = 0;
        // SAFETY: valid handle (see `string`); a valid sensor enum; `t` is writable.
        let code = unsafe { f(self.handle, TEMPERATURE_GPU, &mut t) };
        self.lib.status(code).ok()?;
        Ok(t)
    }

    /// `*DeviceGetUtilizationRates`: (gpu, memory) percent.
    pub fn utilization(&self) -> Result<(u32, u32), Status> {
        let f = self
            .lib
            .fns
            .utilization
            .ok_or(self.lib.function_not_found())?;
        let mut u = RawUtilization::default();
        // SAFETY: valid handle (see `string`); `u` is a writable utilisation record.
        self.lib.status(unsafe { f(self.handle, &mut u) }).ok()?;
        Ok((u.gpu, u.memory))
    }
}

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use super::*;

    #[test]
    fn layouts_match_nvml_h() {
        assert_eq!(size_of::<RawPciInfo>(), 68);
        assert_eq!(offset_of!(RawPciInfo, domain), 16);
        assert_eq!(offset_of!(RawPciInfo, bus), 20);
        assert_eq!(offset_of!(RawPciInfo, device), 24);
        assert_eq!(offset_of!(RawPciInfo, bus_id), 36);
        assert_eq!(size_of::<RawMemory>(), 24);
        assert_eq!(size_of::<RawUtilization>(), 8);
        assert_eq!(size_of::<RawDevice>(), size_of::<*mut c_void>());
    }
}
