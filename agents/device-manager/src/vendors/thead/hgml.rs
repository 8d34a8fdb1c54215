//! The FFI boundary to HGML (`libhgml.so`), T-Head's PPU management library: every `unsafe` of
//! the T-Head detector lives here, behind a safe API.
//!
//! HGML is NVML-shaped with an `hgml` prefix: the same `Return` codes, opaque device handles
//! and struct layouts. The sources every signature and layout here was checked against:
//! - gpustack/runtime `gpustack_runtime/detector/pyhgml/__init__.py` (ctypes bindings);
//! - the Go bindings of the reference operator (gpustack/gpustack-operator
//!   `binding/hgml/library_device.go`) and its T-Head detector (Go package `thead`);
//! - a symbol listing of a real `libhgml.so` (`hgmlInit`, `hgmlInitWithFlags`, `hgmlInit_v2`,
//!   `hgmlDeviceGetCount[_v2]`, `hgmlDeviceGetHandleByIndex[_v2]`, `hgmlDeviceGetMemoryInfo[_v2]`).
//!
//! Symbol names. Where the sources show a versioned and an unversioned name, the versioned one
//! is tried first and the unversioned one is the fallback, as the Go bindings do: `hgmlInit_v2`,
//! `hgmlDeviceGetCount_v2`, `hgmlDeviceGetHandleByIndex_v2` (pyhgml calls only these),
//! `hgmlSystemGetHggcDriverVersion_v2`, `hgmlDeviceGetMemoryInfo_v2`,
//! `hgmlDeviceGetGpuInstanceProfileInfoV` and `hgmlDeviceGetGpuInstancePossiblePlacements_v2`.
//! PCI info has three: `_v3` (pyhgml), `_v2` and the unversioned one (Go).
//!
//! Layouts (pyhgml's ctypes structures; the Go comments confirm the 152-byte profile record):
//! - `hgmlDevice_t`: an opaque pointer, passed and returned by value.
//! - `hgmlPciInfo_t` (`_v3`): `busIdLegacy[16]`, `domain`, `bus`, `device`, `pciDeviceId`,
//!   `pciSubSystemId`, `busId[32]` (68 bytes). `_v2` and the unversioned call fill the legacy
//!   52-byte `hgmlPciInfo_v2_t` (`busId[16]` first, four reserved words last). `domain`, `bus`
//!   and `device` sit at offsets 16, 20 and 24 in both, so they are what the caller reads (the
//!   Go operator builds its bus id from them too); the buffer is always the larger one, zeroed.
//! - `hgmlMemory_t`: `{total, free, used}` (u64, bytes); `hgmlMemory_v2_t`: `{version, total,
//!   reserved, free, used}`, `version` = `hgmlMemory_v2` = `0x02000028`.
//! - `hgmlUtilization_t`: `{gpu, memory}` (u32 percent).
//! - `hgmlGpuInstanceProfileInfo_t` (v1, 48 bytes): ten u32 (`id`, `isP2pSupported`,
//!   `sliceCount`, `instanceCount`, `multiprocessorCount`, `copyEngineCount`, `decoderCount`,
//!   `encoderCount`, `jpegCount`, `ofaCount`) and `memorySizeMB` (u64); the v2 record (152 bytes)
//!   puts a `version` word (`0x02000098`) first and a `name[96]` last.
//! - `hgmlGpuInstancePlacement_t`: `{start, size}` (u32, memory-slice units).

#![allow(unsafe_code)]

use std::{
    ffi::{OsStr, c_char, c_int, c_uint, c_ulonglong, c_void},
    fmt,
};

use libloading::Library;

/// `hgmlReturn_t`: an HGML call's status.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Return(pub c_uint);

impl Return {
    pub const SUCCESS: Return = Return(0);
    pub const INVALID_ARGUMENT: Return = Return(2);
    pub const NOT_SUPPORTED: Return = Return(3);
    pub const NOT_FOUND: Return = Return(6);
    pub const INSUFFICIENT_SIZE: Return = Return(7);
    /// `HGML_ERROR_FUNCTION_NOT_FOUND`: also what a missing optional symbol answers.
    pub const FUNCTION_NOT_FOUND: Return = Return(13);

    fn ok(self) -> Result<(), Return> {
        if self == Self::SUCCESS {
            Ok(())
        } else {
            Err(self)
        }
    }

    /// The driver's own answer that nothing exists at the id asked about (the Go operator's
    /// `driverReportsAbsent`), as opposed to a query it could not answer.
    pub fn is_absent(self) -> bool {
        matches!(
            self,
            Self::NOT_SUPPORTED | Self::NOT_FOUND | Self::INVALID_ARGUMENT
        )
    }
}

impl fmt::Display for Return {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // pyhgml's names for the codes an operator is likely to meet.
        let name = match self.0 {
            0 => "HGML_SUCCESS",
            1 => "HGML_ERROR_UNINITIALIZED",
            2 => "HGML_ERROR_INVALID_ARGUMENT",
            3 => "HGML_ERROR_NOT_SUPPORTED",
            4 => "HGML_ERROR_NO_PERMISSION",
            6 => "HGML_ERROR_NOT_FOUND",
            7 => "HGML_ERROR_INSUFFICIENT_SIZE",
            9 => "HGML_ERROR_DRIVER_NOT_LOADED",
            12 => "HGML_ERROR_LIBRARY_NOT_FOUND",
            13 => "HGML_ERROR_FUNCTION_NOT_FOUND",
            15 => "HGML_ERROR_GPU_IS_LOST",
            18 => "HGML_ERROR_LIB_RM_VERSION_MISMATCH",
            28 => "HGML_ERROR_GPU_NOT_FOUND",
            999 => "HGML_ERROR_UNKNOWN",
            _ => "unnamed HGML status",
        };
        write!(f, "{name} ({})", self.0)
    }
}

/// `hgmlDevice_t`: opaque, only ever handed back to the library.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct RawDevice(*mut c_void);

/// `hgmlMemory_t`.
#[repr(C)]
#[derive(Default)]
struct RawMemory {
    total: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// `hgmlMemory_v2_t`.
#[repr(C)]
#[derive(Default)]
struct RawMemoryV2 {
    version: c_uint,
    total: c_ulonglong,
    reserved: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// `hgmlMemory_v2`: the struct's size with version 2 in the top byte.
const MEMORY_V2: c_uint = (size_of::<RawMemoryV2>() as c_uint) | (2 << 24);

/// `hgmlPciInfo_t` (the `_v3` layout; see the module comment for the legacy one).
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

/// `hgmlUtilization_t`.
#[repr(C)]
#[derive(Default)]
struct RawUtilization {
    gpu: c_uint,
    memory: c_uint,
}

/// `hgmlGpuInstanceProfileInfo_t` (v1, unnamed).
#[repr(C)]
#[derive(Default)]
struct RawProfileInfoV1 {
    id: c_uint,
    is_p2p_supported: c_uint,
    slice_count: c_uint,
    instance_count: c_uint,
    multiprocessor_count: c_uint,
    copy_engine_count: c_uint,
    decoder_count: c_uint,
    encoder_count: c_uint,
    jpeg_count: c_uint,
    ofa_count: c_uint,
    memory_size_mb: c_ulonglong,
}

/// `hgmlGpuInstanceProfileInfo_v2_t`.
#[repr(C)]
struct RawProfileInfoV2 {
    version: c_uint,
    id: c_uint,
    is_p2p_supported: c_uint,
    slice_count: c_uint,
    instance_count: c_uint,
    multiprocessor_count: c_uint,
    copy_engine_count: c_uint,
    decoder_count: c_uint,
    encoder_count: c_uint,
    jpeg_count: c_uint,
    ofa_count: c_uint,
    memory_size_mb: c_ulonglong,
    name: [c_char; NAME_BUFFER],
}

/// `hgmlGpuInstanceProfileInfo_v2` (pyhgml: `0x02000098`).
const PROFILE_INFO_V2: c_uint = (size_of::<RawProfileInfoV2>() as c_uint) | (2 << 24);

/// `hgmlGpuInstancePlacement_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawPlacement {
    start: c_uint,
    size: c_uint,
}

/// `HGML_DEVICE_NAME_V2_BUFFER_SIZE` and `HGML_DEVICE_UUID_V2_BUFFER_SIZE`.
const NAME_BUFFER: usize = 96;
/// `HGML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE`.
const DRIVER_VERSION_BUFFER: usize = 80;
/// `HGML_TEMPERATURE_GPU`.
const TEMPERATURE_GPU: c_uint = 0;
/// `HGML_MEMORY_ERROR_TYPE_UNCORRECTED`, `HGML_VOLATILE_ECC`, `HGML_MEMORY_LOCATION_DRAM`: the
/// counter the Go operator reads for `unhealthy`.
const MEMORY_ERROR_TYPE_UNCORRECTED: c_uint = 1;
const VOLATILE_ECC: c_uint = 0;
const MEMORY_LOCATION_DRAM: c_uint = 2;
/// `HGML_GPU_INSTANCE_PROFILE_COUNT` in pyhgml: profile indexes `0..15` are probed.
pub const GPU_INSTANCE_PROFILE_COUNT: u32 = 0xF;
/// A placement query answering more than this is not believed (an 8-slice card has 8 at most).
const MAX_PLACEMENTS: c_uint = 64;

type InitFn = unsafe extern "C" fn() -> Return;
type CountFn = unsafe extern "C" fn(*mut c_uint) -> Return;
type HandleFn = unsafe extern "C" fn(c_uint, *mut RawDevice) -> Return;
type SystemStringFn = unsafe extern "C" fn(*mut c_char, c_uint) -> Return;
type SystemIntFn = unsafe extern "C" fn(*mut c_int) -> Return;
type DeviceStringFn = unsafe extern "C" fn(RawDevice, *mut c_char, c_uint) -> Return;
type DeviceUintFn = unsafe extern "C" fn(RawDevice, *mut c_uint) -> Return;
type MemoryFn = unsafe extern "C" fn(RawDevice, *mut RawMemory) -> Return;
type MemoryV2Fn = unsafe extern "C" fn(RawDevice, *mut RawMemoryV2) -> Return;
type PciFn = unsafe extern "C" fn(RawDevice, *mut RawPciInfo) -> Return;
type CapabilityFn = unsafe extern "C" fn(RawDevice, *mut c_int, *mut c_int) -> Return;
type TemperatureFn = unsafe extern "C" fn(RawDevice, c_uint, *mut c_uint) -> Return;
type UtilizationFn = unsafe extern "C" fn(RawDevice, *mut RawUtilization) -> Return;
type ErrorCounterFn =
    unsafe extern "C" fn(RawDevice, c_uint, c_uint, c_uint, *mut c_ulonglong) -> Return;
type MigModeFn = unsafe extern "C" fn(RawDevice, *mut c_uint, *mut c_uint) -> Return;
type ProfileV1Fn = unsafe extern "C" fn(RawDevice, c_uint, *mut RawProfileInfoV1) -> Return;
type ProfileV2Fn = unsafe extern "C" fn(RawDevice, c_uint, *mut RawProfileInfoV2) -> Return;
type PlacementsFn =
    unsafe extern "C" fn(RawDevice, c_uint, *mut RawPlacement, *mut c_uint) -> Return;

/// Names tried for each function, in order (see the module comment).
pub mod symbols {
    pub const INIT: &[&str] = &["hgmlInit_v2", "hgmlInit"];
    pub const SHUTDOWN: &[&str] = &["hgmlShutdown"];
    pub const DEVICE_COUNT: &[&str] = &["hgmlDeviceGetCount_v2", "hgmlDeviceGetCount"];
    pub const HANDLE_BY_INDEX: &[&str] = &[
        "hgmlDeviceGetHandleByIndex_v2",
        "hgmlDeviceGetHandleByIndex",
    ];
    pub const DRIVER_VERSION: &[&str] = &["hgmlSystemGetDriverVersion"];
    pub const HGGC_DRIVER_VERSION: &[&str] = &[
        "hgmlSystemGetHggcDriverVersion_v2",
        "hgmlSystemGetHggcDriverVersion",
    ];
    pub const UUID: &[&str] = &["hgmlDeviceGetUUID"];
    pub const NAME: &[&str] = &["hgmlDeviceGetName"];
    pub const MINOR_NUMBER: &[&str] = &["hgmlDeviceGetMinorNumber"];
    pub const NUM_CORES: &[&str] = &["hgmlDeviceGetNumGpuCores"];
    pub const MEMORY_INFO_V2: &[&str] = &["hgmlDeviceGetMemoryInfo_v2"];
    pub const MEMORY_INFO: &[&str] = &["hgmlDeviceGetMemoryInfo"];
    pub const PCI_INFO: &[&str] = &[
        "hgmlDeviceGetPciInfo_v3",
        "hgmlDeviceGetPciInfo_v2",
        "hgmlDeviceGetPciInfo",
    ];
    pub const COMPUTE_CAPABILITY: &[&str] = &["hgmlDeviceGetHggcComputeCapability"];
    pub const MEMORY_ERROR_COUNTER: &[&str] = &["hgmlDeviceGetMemoryErrorCounter"];
    pub const MIG_MODE: &[&str] = &["hgmlDeviceGetMigMode"];
    pub const PROFILE_INFO_V2: &[&str] = &["hgmlDeviceGetGpuInstanceProfileInfoV"];
    pub const PROFILE_INFO: &[&str] = &["hgmlDeviceGetGpuInstanceProfileInfo"];
    pub const POSSIBLE_PLACEMENTS: &[&str] = &[
        "hgmlDeviceGetGpuInstancePossiblePlacements_v2",
        "hgmlDeviceGetGpuInstancePossiblePlacements",
    ];
    pub const TEMPERATURE: &[&str] = &["hgmlDeviceGetTemperature"];
    pub const POWER_USAGE: &[&str] = &["hgmlDeviceGetPowerUsage"];
    pub const UTILIZATION: &[&str] = &["hgmlDeviceGetUtilizationRates"];
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
    hggc_driver_version: Option<SystemIntFn>,
    minor_number: Option<DeviceUintFn>,
    num_cores: Option<DeviceUintFn>,
    memory_info_v2: Option<MemoryV2Fn>,
    memory_info: Option<MemoryFn>,
    pci_info: Option<PciFn>,
    compute_capability: Option<CapabilityFn>,
    memory_error_counter: Option<ErrorCounterFn>,
    mig_mode: Option<MigModeFn>,
    profile_info_v2: Option<ProfileV2Fn>,
    profile_info: Option<ProfileV1Fn>,
    possible_placements: Option<PlacementsFn>,
    temperature: Option<TemperatureFn>,
    power_usage: Option<DeviceUintFn>,
    utilization: Option<UtilizationFn>,
}

/// Why HGML could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("could not be loaded: {0}")]
    Load(#[source] libloading::Error),
    #[error("lacks {0}, which reading accelerators needs")]
    MissingSymbol(String),
    #[error("hgmlInit failed: {0}")]
    Init(Return),
}

/// The first of `names` the library exports, as a function pointer of type `T`.
///
/// # Safety
/// `T` must be the C signature the sources give every name in `names`.
unsafe fn lookup<T: Copy>(library: &Library, names: &[&str]) -> Option<T> {
    names.iter().find_map(|name| {
        // SAFETY: the caller guarantees `T` is the symbol's C signature; the pointer is copied
        // out and only called while `library` is alive (both are owned by `HgmlLib`).
        unsafe { library.get::<T>(name.as_bytes()).ok().map(|s| *s) }
    })
}

fn required<T: Copy>(library: &Library, names: &[&str]) -> Result<T, OpenError> {
    // SAFETY: every call site pairs a `symbols` list with the fn type the sources declare for it.
    unsafe { lookup(library, names) }.ok_or_else(|| OpenError::MissingSymbol(names.join(" or ")))
}

fn optional<T: Copy>(library: &Library, names: &[&str]) -> Option<T> {
    // SAFETY: as in `required`.
    unsafe { lookup(library, names) }
}

/// An initialised HGML. Shut down (once, matching the one init) when dropped; the library is
/// unloaded after that, since the function pointers are dropped with it.
pub struct HgmlLib {
    fns: Functions,
    _library: Library,
}

impl HgmlLib {
    /// Loads the library at `path` (a file path, or a bare name for the loader's own search),
    /// resolves its functions and initialises it.
    pub fn open(path: &OsStr) -> Result<HgmlLib, OpenError> {
        // SAFETY: loading runs the library's initialisers. `path` is the vendor's management
        // library found in the PPU SDK directories (or the test stand-in), whose initialisers
        // are expected to be sound; this is the same trust `dlopen` in T-Head's own tools has.
        let library = unsafe { Library::new(path) }.map_err(OpenError::Load)?;
        let fns = Functions {
            init: required(&library, symbols::INIT)?,
            shutdown: required(&library, symbols::SHUTDOWN)?,
            device_count: required(&library, symbols::DEVICE_COUNT)?,
            handle_by_index: required(&library, symbols::HANDLE_BY_INDEX)?,
            uuid: required(&library, symbols::UUID)?,
            name: optional(&library, symbols::NAME),
            driver_version: optional(&library, symbols::DRIVER_VERSION),
            hggc_driver_version: optional(&library, symbols::HGGC_DRIVER_VERSION),
            minor_number: optional(&library, symbols::MINOR_NUMBER),
            num_cores: optional(&library, symbols::NUM_CORES),
            memory_info_v2: optional(&library, symbols::MEMORY_INFO_V2),
            memory_info: optional(&library, symbols::MEMORY_INFO),
            pci_info: optional(&library, symbols::PCI_INFO),
            compute_capability: optional(&library, symbols::COMPUTE_CAPABILITY),
            memory_error_counter: optional(&library, symbols::MEMORY_ERROR_COUNTER),
            mig_mode: optional(&library, symbols::MIG_MODE),
            profile_info_v2: optional(&library, symbols::PROFILE_INFO_V2),
            profile_info: optional(&library, symbols::PROFILE_INFO),
            possible_placements: optional(&library, symbols::POSSIBLE_PLACEMENTS),
            temperature: optional(&library, symbols::TEMPERATURE),
            power_usage: optional(&library, symbols::POWER_USAGE),
            utilization: optional(&library, symbols::UTILIZATION),
        };
        // SAFETY: `hgmlInit_v2(void)` / `hgmlInit(void)`; no arguments, the library is loaded.
        unsafe { (fns.init)() }.ok().map_err(OpenError::Init)?;
        Ok(HgmlLib {
            fns,
            _library: library,
        })
    }

    /// `hgmlDeviceGetCount_v2`.
    pub fn device_count(&self) -> Result<u32, Return> {
        let mut count: c_uint = 0;
        // SAFETY: `count` is a valid, writable `unsigned int`.
        unsafe { (self.fns.device_count)(&mut count) }.ok()?;
        Ok(count)
    }

    /// `hgmlDeviceGetHandleByIndex_v2`.
    pub fn device(&self, index: u32) -> Result<Device<'_>, Return> {
        let mut handle = RawDevice(std::ptr::null_mut());
        // SAFETY: `handle` is a valid, writable `hgmlDevice_t`.
        unsafe { (self.fns.handle_by_index)(index, &mut handle) }.ok()?;
        Ok(Device { hgml: self, handle })
    }

    /// `hgmlSystemGetDriverVersion`.
    pub fn driver_version(&self) -> Result<String, Return> {
        let f = self.fns.driver_version.ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut buf = [0 as c_char; DRIVER_VERSION_BUFFER];
        // SAFETY: `buf` holds `buf.len()` writable bytes, the length passed.
        unsafe { f(buf.as_mut_ptr(), buf.len() as c_uint) }.ok()?;
        Ok(c_text(&buf))
    }

    /// `hgmlSystemGetHggcDriverVersion_v2`: `1000 * major + 10 * minor`, as NVML encodes CUDA's.
    pub fn hggc_driver_version(&self) -> Result<i32, Return> {
        let f = self
            .fns
            .hggc_driver_version
            .ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut version: c_int = 0;
        // SAFETY: `version` is a valid, writable `int`.
        unsafe { f(&mut version) }.ok()?;
        Ok(version)
    }
}

impl Drop for HgmlLib {
    fn drop(&mut self) {
        // SAFETY: `hgmlShutdown(void)`, balancing the one successful init in `open`; the
        // library is still loaded (it is dropped after this).
        let status = unsafe { (self.fns.shutdown)() };
        if status != Return::SUCCESS {
            tracing::debug!("hgmlShutdown of libhgml.so answered {status}");
        }
    }
}

/// Memory in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory {
    pub total: u64,
    pub used: u64,
}

/// What `hgmlDeviceGetPciInfo*` filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciInfo {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    /// The `_v3` layout's `busId`, or (legacy layout) the first 16 bytes of the trailing words.
    pub bus_id: String,
    /// The `_v3` layout's `busIdLegacy`, or the legacy layout's `busId`.
    pub bus_id_legacy: String,
}

/// One GPU-instance profile as the probe answered it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileInfo {
    pub id: u32,
    pub slice_count: u32,
    pub instance_count: u32,
    pub memory_size_mb: u64,
    /// Empty from the v1 record, which carries none.
    pub name: String,
}

/// A legal placement of a profile on an empty card, in memory-slice units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotPlacement {
    pub start: u32,
    pub size: u32,
}

/// One device handle, valid while its [`HgmlLib`] is.
pub struct Device<'a> {
    hgml: &'a HgmlLib,
    handle: RawDevice,
}

impl Device<'_> {
    fn string(&self, f: DeviceStringFn) -> Result<String, Return> {
        let mut buf = [0 as c_char; NAME_BUFFER];
        // SAFETY: `handle` came from `hgmlDeviceGetHandleByIndex` of this initialised library;
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

    /// `hgmlDeviceGetUUID`.
    pub fn uuid(&self) -> Result<String, Return> {
        self.string(self.hgml.fns.uuid)
    }

    /// `hgmlDeviceGetName`.
    pub fn name(&self) -> Result<String, Return> {
        self.string(self.hgml.fns.name.ok_or(Return::FUNCTION_NOT_FOUND)?)
    }

    /// `hgmlDeviceGetMinorNumber`.
    pub fn minor_number(&self) -> Result<u32, Return> {
        self.uint(self.hgml.fns.minor_number)
    }

    /// `hgmlDeviceGetNumGpuCores`.
    pub fn num_cores(&self) -> Result<u32, Return> {
        self.uint(self.hgml.fns.num_cores)
    }

    /// `hgmlDeviceGetPowerUsage`, milliwatts.
    pub fn power_usage_mw(&self) -> Result<u32, Return> {
        self.uint(self.hgml.fns.power_usage)
    }

    /// `hgmlDeviceGetMemoryInfo_v2`, else `hgmlDeviceGetMemoryInfo` (the Go operator's order).
    pub fn memory(&self) -> Result<Memory, Return> {
        if let Some(f) = self.hgml.fns.memory_info_v2 {
            let mut m = RawMemoryV2 {
                version: MEMORY_V2,
                ..RawMemoryV2::default()
            };
            // SAFETY: valid handle (see `string`); `m` is a writable `hgmlMemory_v2_t` with its
            // version set, as the call requires.
            if unsafe { f(self.handle, &mut m) }.ok().is_ok() {
                return Ok(Memory {
                    total: m.total,
                    used: m.used,
                });
            }
        }
        let f = self
            .hgml
            .fns
            .memory_info
            .ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut m = RawMemory::default();
        // SAFETY: valid handle (see `string`); `m` is a writable `hgmlMemory_t`.
        unsafe { f(self.handle, &mut m) }.ok()?;
        Ok(Memory {
            total: m.total,
            used: m.used,
        })
    }

    /// `hgmlDeviceGetPciInfo_v3`, `_v2` or unversioned (see the module comment on layouts).
    pub fn pci_info(&self) -> Result<PciInfo, Return> {
        let f = self.hgml.fns.pci_info.ok_or(Return::FUNCTION_NOT_FOUND)?;
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
            domain: pci.domain,
            bus: pci.bus,
            device: pci.device,
            bus_id: c_text(&pci.bus_id),
            bus_id_legacy: c_text(&pci.bus_id_legacy),
        })
    }

    /// `hgmlDeviceGetHggcComputeCapability`: (major, minor).
    pub fn compute_capability(&self) -> Result<(i32, i32), Return> {
        let f = self
            .hgml
            .fns
            .compute_capability
            .ok_or(Return::FUNCTION_NOT_FOUND)?;
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: valid handle (see `string`); both are writable `int`s.
        unsafe { f(self.handle, &mut major, &mut minor) }.ok()?;
        Ok((major, minor))
    }

    /// `hgmlDeviceGetMemoryErrorCounter(UNCORRECTED, VOLATILE_ECC, DRAM)`.
    pub fn uncorrected_dram_errors(&self) -> Result<u64, Return> {
        let f = self
            .hgml
            .fns
            .memory_error_counter
            .ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut count: c_ulonglong = 0;
        // SAFETY: valid handle (see `string`); three valid enum values; `count` is writable.
        unsafe {
            f(
                self.handle,
                MEMORY_ERROR_TYPE_UNCORRECTED,
                VOLATILE_ECC,
                MEMORY_LOCATION_DRAM,
                &mut count,
            )
        }
        .ok()?;
        Ok(count)
    }

    /// `hgmlDeviceGetMigMode`: (current, pending), `HGML_DEVICE_MIG_ENABLE` = 1.
    pub fn mig_mode(&self) -> Result<(u32, u32), Return> {
        let f = self.hgml.fns.mig_mode.ok_or(Return::FUNCTION_NOT_FOUND)?;
        let (mut current, mut pending): (c_uint, c_uint) = (0, 0);
        // SAFETY: valid handle (see `string`); both are writable `unsigned int`s.
        unsafe { f(self.handle, &mut current, &mut pending) }.ok()?;
        Ok((current, pending))
    }

    /// The GPU-instance profile at enumeration index `index`: the named v2 record
    /// (`hgmlDeviceGetGpuInstanceProfileInfoV`), else the unnamed v1 one.
    pub fn profile_info(&self, index: u32) -> Result<ProfileInfo, Return> {
        if let Some(f) = self.hgml.fns.profile_info_v2 {
            let mut info = RawProfileInfoV2 {
                version: PROFILE_INFO_V2,
                id: 0,
                is_p2p_supported: 0,
                slice_count: 0,
                instance_count: 0,
                multiprocessor_count: 0,
                copy_engine_count: 0,
                decoder_count: 0,
                encoder_count: 0,
                jpeg_count: 0,
                ofa_count: 0,
                memory_size_mb: 0,
                name: [0; NAME_BUFFER],
            };
            // SAFETY: valid handle (see `string`); `info` is a writable v2 record with its
            // version word set, as the versioned call requires.
            match unsafe { f(self.handle, index, &mut info) }.ok() {
                Ok(()) => {
                    return Ok(ProfileInfo {
                        id: info.id,
                        slice_count: info.slice_count,
                        instance_count: info.instance_count,
                        memory_size_mb: info.memory_size_mb,
                        name: c_text(&info.name),
                    });
                }
                // "No profile at this index" is the answer; the v1 record would say the same.
                Err(status) if status.is_absent() => return Err(status),
                // A library that rejects the v2 record (a version mismatch) may still answer
                // the v1 call, as the Go bindings' V2-then-V1 fallback assumes.
                Err(status) if self.hgml.fns.profile_info.is_none() => return Err(status),
                Err(_) => {}
            }
        }
        let f = self
            .hgml
            .fns
            .profile_info
            .ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut info = RawProfileInfoV1::default();
        // SAFETY: valid handle (see `string`); `info` is a writable v1 record.
        unsafe { f(self.handle, index, &mut info) }.ok()?;
        Ok(ProfileInfo {
            id: info.id,
            slice_count: info.slice_count,
            instance_count: info.instance_count,
            memory_size_mb: info.memory_size_mb,
            name: String::new(),
        })
    }

    /// `hgmlDeviceGetGpuInstancePossiblePlacements_v2` for the profile with creation id
    /// `profile_id`: the count first (null buffer), then the slots.
    pub fn possible_placements(&self, profile_id: u32) -> Result<Vec<SlotPlacement>, Return> {
        let f = self
            .hgml
            .fns
            .possible_placements
            .ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut count: c_uint = 0;
        // SAFETY: valid handle (see `string`); a null buffer asks for the count only, which is
        // written to the writable `count`.
        let status = unsafe { f(self.handle, profile_id, std::ptr::null_mut(), &mut count) };
        if status != Return::SUCCESS && status != Return::INSUFFICIENT_SIZE {
            return Err(status);
        }
        if count == 0 {
            return Ok(Vec::new());
        }
        let capacity = count.min(MAX_PLACEMENTS);
        let mut slots = vec![RawPlacement::default(); capacity as usize];
        let mut filled = capacity;
        // SAFETY: valid handle; `slots` holds `filled` writable placements, the count passed.
        unsafe { f(self.handle, profile_id, slots.as_mut_ptr(), &mut filled) }.ok()?;
        // The out-count is the library's and the buffer's length ours: bound one by the other.
        slots.truncate(filled.min(capacity) as usize);
        Ok(slots
            .into_iter()
            .map(|s| SlotPlacement {
                start: s.start,
                size: s.size,
            })
            .collect())
    }

    /// `hgmlDeviceGetTemperature` of the GPU sensor, °C.
    pub fn temperature(&self) -> Result<u32, Return> {
        let f = self
            .hgml
            .fns
            .temperature
            .ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut t: c_uint = 0;
        // SAFETY: valid handle (see `string`); a valid sensor enum; `t` is writable.
        unsafe { f(self.handle, TEMPERATURE_GPU, &mut t) }.ok()?;
        Ok(t)
    }

    /// `hgmlDeviceGetUtilizationRates`: (gpu, memory) percent.
    pub fn utilization(&self) -> Result<(u32, u32), Return> {
        let f = self
            .hgml
            .fns
            .utilization
            .ok_or(Return::FUNCTION_NOT_FOUND)?;
        let mut u = RawUtilization::default();
        // SAFETY: valid handle (see `string`); `u` is a writable `hgmlUtilization_t`.
        unsafe { f(self.handle, &mut u) }.ok()?;
        Ok((u.gpu, u.memory))
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
    use std::mem::offset_of;

    #[test]
    fn layouts_match_pyhgml() {
        assert_eq!(size_of::<RawPciInfo>(), 68);
        assert_eq!(offset_of!(RawPciInfo, domain), 16);
        assert_eq!(offset_of!(RawPciInfo, bus), 20);
        assert_eq!(offset_of!(RawPciInfo, device), 24);
        assert_eq!(offset_of!(RawPciInfo, bus_id), 36);
        assert_eq!(size_of::<RawMemory>(), 24);
        assert_eq!(size_of::<RawMemoryV2>(), 40);
        assert_eq!(offset_of!(RawMemoryV2, total), 8);
        assert_eq!(offset_of!(RawMemoryV2, used), 32);
        assert_eq!(MEMORY_V2, 0x0200_0028, "pyhgml's hgmlMemory_v2");
        assert_eq!(size_of::<RawUtilization>(), 8);
        assert_eq!(size_of::<RawProfileInfoV1>(), 48);
        assert_eq!(offset_of!(RawProfileInfoV1, memory_size_mb), 40);
        assert_eq!(
            size_of::<RawProfileInfoV2>(),
            152,
            "the Go bindings' 152 bytes"
        );
        assert_eq!(offset_of!(RawProfileInfoV2, memory_size_mb), 48);
        assert_eq!(offset_of!(RawProfileInfoV2, name), 56);
        assert_eq!(
            PROFILE_INFO_V2, 0x0200_0098,
            "pyhgml's hgmlGpuInstanceProfileInfo_v2"
        );
        assert_eq!(size_of::<RawPlacement>(), 8);
        assert_eq!(size_of::<RawDevice>(), size_of::<*mut c_void>());
    }

    #[test]
    fn c_text_stops_at_nul_and_at_the_end() {
        let mut buf = [0 as c_char; 8];
        for (slot, b) in buf.iter_mut().zip(b"1.3.2\0xx") {
            *slot = *b as c_char;
        }
        assert_eq!(c_text(&buf), "1.3.2");
        assert_eq!(c_text(&[b'a' as c_char; 4]), "aaaa");
        assert_eq!(c_text(&[0; 4]), "");
    }

    #[test]
    fn versioned_names_come_first() {
        for list in [
            symbols::INIT,
            symbols::DEVICE_COUNT,
            symbols::HANDLE_BY_INDEX,
            symbols::HGGC_DRIVER_VERSION,
            symbols::POSSIBLE_PLACEMENTS,
        ] {
            assert!(list[0].ends_with("_v2"), "{list:?}");
            assert!(list[0].starts_with(list[1]), "{list:?}");
        }
        assert_eq!(symbols::PCI_INFO.last(), Some(&"hgmlDeviceGetPciInfo"));
    }

    #[test]
    fn statuses_are_named_and_absence_is_told_apart() {
        assert_eq!(Return(9).to_string(), "HGML_ERROR_DRIVER_NOT_LOADED (9)");
        assert_eq!(Return(42).to_string(), "unnamed HGML status (42)");
        assert!(Return::NOT_SUPPORTED.is_absent());
        assert!(Return::NOT_FOUND.is_absent());
        assert!(!Return(999).is_absent());
        assert!(!Return::FUNCTION_NOT_FOUND.is_absent());
    }

    #[test]
    fn a_file_that_is_not_a_library_is_a_load_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libhgml.so");
        std::fs::write(&path, b"").unwrap();
        assert!(matches!(
            HgmlLib::open(path.as_os_str()),
            Err(OpenError::Load(_))
        ));
    }
}
