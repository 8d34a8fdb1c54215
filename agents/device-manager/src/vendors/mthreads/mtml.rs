//! The only `unsafe` of the Moore Threads detector: loading MTML (`libmtml.so`) by path,
//! resolving its symbols and calling them. Everything above this module sees plain Rust types
//! and `Result`s; nothing here interprets what MTML answers.
//!
//! MTML is handle-based: `mtmlLibraryInit` gives a library handle, which gives device handles
//! (`mtmlLibraryInitDeviceByIndex`) and a system handle; a device gives memory and GPU
//! sub-handles (`mtmlDeviceInitMemory`, `mtmlDeviceInitGpu`). Every handle is opaque, owned by
//! MTML and released with its `Free`/`ShutDown` call; [`Mtml`], [`Device`], [`Memory`] and
//! [`Gpu`] release theirs when dropped, and borrow their parent so that none outlives it.
//!
//! Signatures and the one struct (`MtmlPciInfo`, 104 bytes) follow MooreThreads' MTML 2.x
//! header as its Python binding declares it (MooreThreads/mthreads-ml-py `pymtml.py`, checked
//! by its `test_abi_layout.py`). Every call returns `MtmlReturn` (`unsigned int`), 0
//! (`MTML_SUCCESS`) on success. Only `mtmlLibraryInit`, `mtmlLibraryCountDevice` and
//! `mtmlLibraryInitDeviceByIndex` are required; a symbol an older library lacks makes just that
//! call answer [`CallError::Missing`].

#![allow(unsafe_code)]

use std::{
    ffi::{OsStr, c_char, c_float, c_int, c_uint, c_ulonglong, c_void},
    marker::PhantomData,
};

use libloading::Library;

use crate::vendors::ffi::{CallError, OpenError, c_text, check, loader, present};

/// `MTML_DEVICE_UUID_BUFFER_SIZE`.
const UUID_BUF: usize = 48;
/// `MTML_DEVICE_NAME_BUFFER_SIZE`.
const NAME_BUF: usize = 32;
/// `MTML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE`.
const DRIVER_VERSION_BUF: usize = 80;
/// `MTML_DEVICE_PCI_SBDF_BUFFER_SIZE`.
const SBDF_BUF: usize = 32;
/// `MtmlMemoryErrorType` `MTML_MEMORY_ERROR_TYPE_UNCORRECTED`.
const ERROR_UNCORRECTED: c_uint = 1;
/// `MtmlEccCounterType` `MTML_VOLATILE_ECC`: since the driver loaded.
const VOLATILE_ECC: c_uint = 0;
/// `MtmlMemoryLocation` `MTML_MEMORY_LOCATION_DRAM`.
const LOCATION_DRAM: c_uint = 1;

type Handle = *mut c_void;

/// `MtmlPciInfo` (104 bytes in the MTML 2.x header).
#[repr(C)]
#[allow(dead_code)] // Fields MTML writes that we do not read still shape the layout.
struct RawPciInfo {
    sbdf: [c_char; SBDF_BUF],
    segment: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_subsystem_id: c_uint,
    bus_width: c_uint,
    pci_max_speed: c_float,
    pci_cur_speed: c_float,
    pci_max_width: c_uint,
    pci_cur_width: c_uint,
    pci_max_gen: c_uint,
    pci_cur_gen: c_uint,
    rsvd: [c_int; 6],
}

/// What MTML writes into, with slack after it: MTML 1.x declared a longer `MtmlPciInfo` (a
/// `busId[32]` after `pciCurGen`), and a library of that generation must not write past our
/// buffer.
#[repr(C)]
struct PciInfoBuffer {
    info: RawPciInfo,
    slack: [u8; 64],
}

type InitFn = unsafe extern "C" fn(*mut Handle) -> c_uint;
type FreeFn = unsafe extern "C" fn(Handle) -> c_uint;
type CountFn = unsafe extern "C" fn(Handle, *mut c_uint) -> c_uint;
type DeviceByIndexFn = unsafe extern "C" fn(Handle, c_uint, *mut Handle) -> c_uint;
type SubHandleFn = unsafe extern "C" fn(Handle, *mut Handle) -> c_uint;
type StringFn = unsafe extern "C" fn(Handle, *mut c_char, c_uint) -> c_uint;
type PciInfoFn = unsafe extern "C" fn(Handle, *mut PciInfoBuffer) -> c_uint;
type UintFn = unsafe extern "C" fn(Handle, *mut c_uint) -> c_uint;
type U64Fn = unsafe extern "C" fn(Handle, *mut c_ulonglong) -> c_uint;
type EccCounterFn =
    unsafe extern "C" fn(Handle, c_uint, c_uint, c_uint, *mut c_ulonglong) -> c_uint;

/// The resolved entry points. Plain function pointers: valid while [`MtmlLibrary::_library`]
/// is loaded, which the struct guarantees by owning both and never handing a pointer out.
struct Entries {
    library_init: InitFn,
    library_shut_down: Option<FreeFn>,
    library_count_device: CountFn,
    library_init_device_by_index: DeviceByIndexFn,
    library_free_device: Option<FreeFn>,
    library_init_system: Option<SubHandleFn>,
    library_free_system: Option<FreeFn>,
    system_get_driver_version: Option<StringFn>,
    device_get_uuid: Option<StringFn>,
    device_get_name: Option<StringFn>,
    device_get_pci_info: Option<PciInfoFn>,
    device_get_power_usage: Option<UintFn>,
    device_count_gpu_cores: Option<UintFn>,
    device_init_memory: Option<SubHandleFn>,
    device_free_memory: Option<FreeFn>,
    memory_get_total: Option<U64Fn>,
    memory_get_used: Option<U64Fn>,
    memory_get_ecc_error_counter: Option<EccCounterFn>,
    device_init_gpu: Option<SubHandleFn>,
    device_free_gpu: Option<FreeFn>,
    gpu_get_utilization: Option<UintFn>,
    gpu_get_temperature: Option<UintFn>,
}

/// A loaded `libmtml.so`.
pub struct MtmlLibrary {
    entries: Entries,
    // Dropped after `entries` (declaration order); the pointers there never outlive it.
    _library: Library,
}

/// Calls a `(handle, char *buf, unsigned length)` getter with an `N`-byte buffer.
fn string_call<const N: usize>(
    f: Option<StringFn>,
    call: &'static str,
    handle: Handle,
) -> Result<String, CallError> {
    let f = present(f, call)?;
    let mut buf = [0 as c_char; N];
    // SAFETY: `handle` is a live MTML handle of the kind `call` takes (the callers' types
    // guarantee it); `buf` has `N` writable bytes, which the length argument tells MTML.
    check(call, unsafe { f(handle, buf.as_mut_ptr(), N as c_uint) })?;
    Ok(c_text(&buf))
}

/// Calls a `(handle, unsigned *out)` getter.
fn uint_call(f: Option<UintFn>, call: &'static str, handle: Handle) -> Result<u32, CallError> {
    let f = present(f, call)?;
    let mut value: c_uint = 0;
    // SAFETY: `handle` is a live MTML handle of the kind `call` takes; valid out-pointer.
    check(call, unsafe { f(handle, &mut value) })?;
    Ok(value)
}

/// Calls a `(handle, unsigned long long *out)` getter.
fn u64_call(f: Option<U64Fn>, call: &'static str, handle: Handle) -> Result<u64, CallError> {
    let f = present(f, call)?;
    let mut value: c_ulonglong = 0;
    // SAFETY: `handle` is a live MTML handle of the kind `call` takes; valid out-pointer.
    check(call, unsafe { f(handle, &mut value) })?;
    Ok(value)
}

/// Calls a `(handle, Sub **out)` constructor; a null handle on success is a failure.
fn sub_handle(
    f: Option<SubHandleFn>,
    call: &'static str,
    parent: Handle,
) -> Result<Handle, CallError> {
    let f = present(f, call)?;
    let mut handle: Handle = std::ptr::null_mut();
    // SAFETY: `parent` is a live MTML handle of the kind `call` takes; valid out-pointer.
    check(call, unsafe { f(parent, &mut handle) })?;
    if handle.is_null() {
        return Err(CallError::code(call, u32::MAX));
    }
    Ok(handle)
}

/// Releases a handle with its `Free` call, if the library has one.
fn free(f: Option<FreeFn>, handle: Handle) {
    if let Some(f) = f {
        // SAFETY: `handle` came from the matching `Init` call and is released exactly once
        // (by the owning guard's `drop`). A failure leaves nothing to do.
        let _ = unsafe { f(handle) };
    }
}

impl MtmlLibrary {
    /// Loads the library at `path` (a file path, or a bare name for the loader's own search)
    /// and resolves its symbols. Does not call `mtmlLibraryInit`.
    pub fn open(path: &OsStr) -> Result<Self, OpenError> {
        let library = loader::load(path)?;

        macro_rules! optional {
            ($name:literal, $ty:ty) => {{
                // SAFETY: `$ty` is the function's prototype in the MTML header; the copied
                // pointer is stored next to `library`, which outlives it (see `MtmlLibrary`).
                unsafe { loader::symbol::<$ty>(&library, &[$name]) }
            }};
        }
        macro_rules! required {
            ($name:literal, $ty:ty) => {
                optional!($name, $ty).ok_or_else(|| OpenError::MissingSymbol($name.into()))?
            };
        }

        let entries = Entries {
            library_init: required!("mtmlLibraryInit", InitFn),
            library_shut_down: optional!("mtmlLibraryShutDown", FreeFn),
            library_count_device: required!("mtmlLibraryCountDevice", CountFn),
            library_init_device_by_index: required!(
                "mtmlLibraryInitDeviceByIndex",
                DeviceByIndexFn
            ),
            library_free_device: optional!("mtmlLibraryFreeDevice", FreeFn),
            library_init_system: optional!("mtmlLibraryInitSystem", SubHandleFn),
            library_free_system: optional!("mtmlLibraryFreeSystem", FreeFn),
            system_get_driver_version: optional!("mtmlSystemGetDriverVersion", StringFn),
            device_get_uuid: optional!("mtmlDeviceGetUUID", StringFn),
            device_get_name: optional!("mtmlDeviceGetName", StringFn),
            device_get_pci_info: optional!("mtmlDeviceGetPciInfo", PciInfoFn),
            device_get_power_usage: optional!("mtmlDeviceGetPowerUsage", UintFn),
            device_count_gpu_cores: optional!("mtmlDeviceCountGpuCores", UintFn),
            device_init_memory: optional!("mtmlDeviceInitMemory", SubHandleFn),
            device_free_memory: optional!("mtmlDeviceFreeMemory", FreeFn),
            memory_get_total: optional!("mtmlMemoryGetTotal", U64Fn),
            memory_get_used: optional!("mtmlMemoryGetUsed", U64Fn),
            memory_get_ecc_error_counter: optional!("mtmlMemoryGetEccErrorCounter", EccCounterFn),
            device_init_gpu: optional!("mtmlDeviceInitGpu", SubHandleFn),
            device_free_gpu: optional!("mtmlDeviceFreeGpu", FreeFn),
            gpu_get_utilization: optional!("mtmlGpuGetUtilization", UintFn),
            gpu_get_temperature: optional!("mtmlGpuGetTemperature", UintFn),
        };
        Ok(Self {
            entries,
            _library: library,
        })
    }

    /// `mtmlLibraryInit`: the library handle, shut down when dropped.
    pub fn init(&self) -> Result<Mtml<'_>, CallError> {
        const CALL: &str = "mtmlLibraryInit";
        let mut handle: Handle = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the function pointer is valid while `self` is loaded.
        check(CALL, unsafe { (self.entries.library_init)(&mut handle) })?;
        if handle.is_null() {
            return Err(CallError::code(CALL, u32::MAX));
        }
        Ok(Mtml { lib: self, handle })
    }
}

/// An initialised MTML (`MtmlLibrary*`).
pub struct Mtml<'l> {
    lib: &'l MtmlLibrary,
    handle: Handle,
}

impl Drop for Mtml<'_> {
    fn drop(&mut self) {
        free(self.lib.entries.library_shut_down, self.handle);
    }
}

impl Mtml<'_> {
    /// `mtmlLibraryCountDevice`.
    pub fn device_count(&self) -> Result<u32, CallError> {
        uint_call(
            Some(self.lib.entries.library_count_device),
            "mtmlLibraryCountDevice",
            self.handle,
        )
    }

    /// `mtmlLibraryInitDeviceByIndex`: a device handle, freed when dropped.
    pub fn device(&self, index: u32) -> Result<Device<'_>, CallError> {
        const CALL: &str = "mtmlLibraryInitDeviceByIndex";
        let mut handle: Handle = std::ptr::null_mut();
        // SAFETY: `self.handle` is the live library handle; valid out-pointer.
        check(CALL, unsafe {
            (self.lib.entries.library_init_device_by_index)(self.handle, index, &mut handle)
        })?;
        if handle.is_null() {
            return Err(CallError::code(CALL, u32::MAX));
        }
        Ok(Device {
            lib: self.lib,
            handle,
            _parent: PhantomData,
        })
    }

    /// `mtmlLibraryInitSystem` + `mtmlSystemGetDriverVersion`: the kernel driver's version.
    pub fn driver_version(&self) -> Result<String, CallError> {
        let e = &self.lib.entries;
        let system = sub_handle(e.library_init_system, "mtmlLibraryInitSystem", self.handle)?;
        let version = string_call::<DRIVER_VERSION_BUF>(
            e.system_get_driver_version,
            "mtmlSystemGetDriverVersion",
            system,
        );
        free(e.library_free_system, system);
        version
    }
}

/// One device (`MtmlDevice*`), valid while its [`Mtml`] is.
pub struct Device<'m> {
    lib: &'m MtmlLibrary,
    handle: Handle,
    _parent: PhantomData<&'m Mtml<'m>>,
}

impl Drop for Device<'_> {
    fn drop(&mut self) {
        free(self.lib.entries.library_free_device, self.handle);
    }
}

impl Device<'_> {
    /// `mtmlDeviceGetUUID`.
    pub fn uuid(&self) -> Result<String, CallError> {
        string_call::<UUID_BUF>(
            self.lib.entries.device_get_uuid,
            "mtmlDeviceGetUUID",
            self.handle,
        )
    }

    /// `mtmlDeviceGetName`, e.g. `MTT S4000`.
    pub fn name(&self) -> Result<String, CallError> {
        string_call::<NAME_BUF>(
            self.lib.entries.device_get_name,
            "mtmlDeviceGetName",
            self.handle,
        )
    }

    /// `mtmlDeviceGetPciInfo`'s `sbdf`, e.g. `00000000:3b:00.0`.
    pub fn pci_sbdf(&self) -> Result<String, CallError> {
        const CALL: &str = "mtmlDeviceGetPciInfo";
        let f = present(self.lib.entries.device_get_pci_info, CALL)?;
        let mut raw = PciInfoBuffer {
            info: RawPciInfo {
                sbdf: [0; SBDF_BUF],
                segment: 0,
                bus: 0,
                device: 0,
                pci_device_id: 0,
                pci_subsystem_id: 0,
                bus_width: 0,
                pci_max_speed: 0.0,
                pci_cur_speed: 0.0,
                pci_max_width: 0,
                pci_cur_width: 0,
                pci_max_gen: 0,
                pci_cur_gen: 0,
                rsvd: [0; 6],
            },
            slack: [0; 64],
        };
        // SAFETY: `self.handle` is a live device handle; `raw` starts with an `MtmlPciInfo`
        // MTML fills in, with room to spare for an older, longer layout.
        check(CALL, unsafe { f(self.handle, &mut raw) })?;
        Ok(c_text(&raw.info.sbdf))
    }

    /// `mtmlDeviceGetPowerUsage`, mW.
    pub fn power_mw(&self) -> Result<u32, CallError> {
        uint_call(
            self.lib.entries.device_get_power_usage,
            "mtmlDeviceGetPowerUsage",
            self.handle,
        )
    }

    /// `mtmlDeviceCountGpuCores`: the MUSA cores of the device.
    pub fn gpu_cores(&self) -> Result<u32, CallError> {
        uint_call(
            self.lib.entries.device_count_gpu_cores,
            "mtmlDeviceCountGpuCores",
            self.handle,
        )
    }

    /// `mtmlDeviceInitMemory`: the memory sub-handle, freed when dropped.
    pub fn memory(&self) -> Result<Memory<'_>, CallError> {
        let handle = sub_handle(
            self.lib.entries.device_init_memory,
            "mtmlDeviceInitMemory",
            self.handle,
        )?;
        Ok(Memory {
            lib: self.lib,
            handle,
            _parent: PhantomData,
        })
    }

    /// `mtmlDeviceInitGpu`: the GPU-engine sub-handle, freed when dropped.
    pub fn gpu(&self) -> Result<Gpu<'_>, CallError> {
        let handle = sub_handle(
            self.lib.entries.device_init_gpu,
            "mtmlDeviceInitGpu",
            self.handle,
        )?;
        Ok(Gpu {
            lib: self.lib,
            handle,
            _parent: PhantomData,
        })
    }
}

/// A device's memory (`MtmlMemory*`), valid while its [`Device`] is.
pub struct Memory<'d> {
    lib: &'d MtmlLibrary,
    handle: Handle,
    _parent: PhantomData<&'d Device<'d>>,
}

impl Drop for Memory<'_> {
    fn drop(&mut self) {
        free(self.lib.entries.device_free_memory, self.handle);
    }
}

impl Memory<'_> {
    /// `mtmlMemoryGetTotal`, bytes.
    pub fn total_bytes(&self) -> Result<u64, CallError> {
        u64_call(
            self.lib.entries.memory_get_total,
            "mtmlMemoryGetTotal",
            self.handle,
        )
    }

    /// `mtmlMemoryGetUsed`, bytes.
    pub fn used_bytes(&self) -> Result<u64, CallError> {
        u64_call(
            self.lib.entries.memory_get_used,
            "mtmlMemoryGetUsed",
            self.handle,
        )
    }

    /// `mtmlMemoryGetEccErrorCounter`: uncorrected DRAM errors since the driver loaded.
    pub fn uncorrected_ecc_errors(&self) -> Result<u64, CallError> {
        const CALL: &str = "mtmlMemoryGetEccErrorCounter";
        let f = present(self.lib.entries.memory_get_ecc_error_counter, CALL)?;
        let mut count: c_ulonglong = 0;
        // SAFETY: `self.handle` is a live memory handle; valid out-pointer.
        check(CALL, unsafe {
            f(
                self.handle,
                ERROR_UNCORRECTED,
                VOLATILE_ECC,
                LOCATION_DRAM,
                &mut count,
            )
        })?;
        Ok(count)
    }
}

/// A device's GPU engine (`MtmlGpu*`), valid while its [`Device`] is.
pub struct Gpu<'d> {
    lib: &'d MtmlLibrary,
    handle: Handle,
    _parent: PhantomData<&'d Device<'d>>,
}

impl Drop for Gpu<'_> {
    fn drop(&mut self) {
        free(self.lib.entries.device_free_gpu, self.handle);
    }
}

impl Gpu<'_> {
    /// `mtmlGpuGetUtilization`, percent.
    pub fn utilization(&self) -> Result<u32, CallError> {
        uint_call(
            self.lib.entries.gpu_get_utilization,
            "mtmlGpuGetUtilization",
            self.handle,
        )
    }

    /// `mtmlGpuGetTemperature`, °C.
    pub fn temperature(&self) -> Result<u32, CallError> {
        uint_call(
            self.lib.entries.gpu_get_temperature,
            "mtmlGpuGetTemperature",
            self.handle,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_header() {
        assert_eq!(size_of::<RawPciInfo>(), 104, "MTML 2.x MtmlPciInfo");
        assert_eq!(std::mem::offset_of!(RawPciInfo, pci_subsystem_id), 48);
        assert_eq!(std::mem::offset_of!(RawPciInfo, bus_width), 52);
        assert_eq!(std::mem::offset_of!(RawPciInfo, pci_max_speed), 56);
        assert_eq!(std::mem::offset_of!(RawPciInfo, rsvd), 80);
        assert_eq!(std::mem::offset_of!(PciInfoBuffer, info), 0);
    }

    #[test]
    fn unloadable_library_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libmtml.so");
        std::fs::write(&path, b"not an ELF file").unwrap();
        assert!(matches!(
            MtmlLibrary::open(path.as_os_str()),
            Err(OpenError::Load(_))
        ));
    }
}
