//! The FFI boundary to HGML (`libhgml.so`), T-Head's PPU management library: its symbol table
//! and the functions it has beyond the NVML-shaped ones, which are [`binding`]'s. Every `unsafe`
//! of the T-Head detector lives here or there, behind a safe API.
//!
//! HGML is NVML-shaped with an `hgml` prefix: the same status codes, opaque device handles
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
    ffi::{OsStr, c_char, c_uint, c_ulonglong},
    ops::Deref,
};

use crate::vendors::{
    ffi::{OpenError, c_text, loader},
    nvml_shaped::{
        Memory,
        binding::{
            self, INSUFFICIENT_SIZE, NvmlShapedLibrary, RawDevice, SUCCESS, Status, Symbols,
        },
    },
};

/// Names tried for each NVML-shaped function, in order (see the module comment).
pub static SYMBOLS: Symbols = Symbols {
    status_prefix: "HGML",
    library: "HGML",
    init: &["hgmlInit_v2", "hgmlInit"],
    shutdown: &["hgmlShutdown"],
    device_count: &["hgmlDeviceGetCount_v2", "hgmlDeviceGetCount"],
    handle_by_index: &[
        "hgmlDeviceGetHandleByIndex_v2",
        "hgmlDeviceGetHandleByIndex",
    ],
    uuid: &["hgmlDeviceGetUUID"],
    name: &["hgmlDeviceGetName"],
    driver_version: &["hgmlSystemGetDriverVersion"],
    runtime_version: &[
        "hgmlSystemGetHggcDriverVersion_v2",
        "hgmlSystemGetHggcDriverVersion",
    ],
    minor_number: &["hgmlDeviceGetMinorNumber"],
    memory_info: &["hgmlDeviceGetMemoryInfo"],
    pci_info: &[
        "hgmlDeviceGetPciInfo_v3",
        "hgmlDeviceGetPciInfo_v2",
        "hgmlDeviceGetPciInfo",
    ],
    compute_capability: &["hgmlDeviceGetHggcComputeCapability"],
    temperature: &["hgmlDeviceGetTemperature"],
    power_usage: &["hgmlDeviceGetPowerUsage"],
    utilization: &["hgmlDeviceGetUtilizationRates"],
};

/// Names tried for each function HGML has beyond the NVML-shaped ones, in order.
pub mod symbols {
    pub const NUM_CORES: &[&str] = &["hgmlDeviceGetNumGpuCores"];
    pub const MEMORY_INFO_V2: &[&str] = &["hgmlDeviceGetMemoryInfo_v2"];
    pub const MEMORY_ERROR_COUNTER: &[&str] = &["hgmlDeviceGetMemoryErrorCounter"];
    pub const MIG_MODE: &[&str] = &["hgmlDeviceGetMigMode"];
    pub const PROFILE_INFO_V2: &[&str] = &["hgmlDeviceGetGpuInstanceProfileInfoV"];
    pub const PROFILE_INFO: &[&str] = &["hgmlDeviceGetGpuInstanceProfileInfo"];
    pub const POSSIBLE_PLACEMENTS: &[&str] = &[
        "hgmlDeviceGetGpuInstancePossiblePlacements_v2",
        "hgmlDeviceGetGpuInstancePossiblePlacements",
    ];
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

/// `HGML_DEVICE_NAME_V2_BUFFER_SIZE`: the profile record's name.
const NAME_BUFFER: usize = 96;
/// `HGML_MEMORY_ERROR_TYPE_UNCORRECTED`, `HGML_VOLATILE_ECC`, `HGML_MEMORY_LOCATION_DRAM`: the
/// counter the Go operator reads for `unhealthy`.
const MEMORY_ERROR_TYPE_UNCORRECTED: c_uint = 1;
const VOLATILE_ECC: c_uint = 0;
const MEMORY_LOCATION_DRAM: c_uint = 2;
/// `HGML_GPU_INSTANCE_PROFILE_COUNT` in pyhgml: profile indexes `0..15` are probed.
pub const GPU_INSTANCE_PROFILE_COUNT: u32 = 0xF;
/// A placement query answering more than this is not believed (an 8-slice card has 8 at most).
const MAX_PLACEMENTS: c_uint = 64;

type DeviceUintFn = unsafe extern "C" fn(RawDevice, *mut c_uint) -> c_uint;
type MemoryV2Fn = unsafe extern "C" fn(RawDevice, *mut RawMemoryV2) -> c_uint;
type ErrorCounterFn =
    unsafe extern "C" fn(RawDevice, c_uint, c_uint, c_uint, *mut c_ulonglong) -> c_uint;
type MigModeFn = unsafe extern "C" fn(RawDevice, *mut c_uint, *mut c_uint) -> c_uint;
type ProfileV1Fn = unsafe extern "C" fn(RawDevice, c_uint, *mut RawProfileInfoV1) -> c_uint;
type ProfileV2Fn = unsafe extern "C" fn(RawDevice, c_uint, *mut RawProfileInfoV2) -> c_uint;
type PlacementsFn =
    unsafe extern "C" fn(RawDevice, c_uint, *mut RawPlacement, *mut c_uint) -> c_uint;

/// HGML's functions beyond the NVML-shaped ones; each answers `FUNCTION_NOT_FOUND` when
/// absent, like a query the product lacks.
struct Extras {
    num_cores: Option<DeviceUintFn>,
    memory_info_v2: Option<MemoryV2Fn>,
    memory_error_counter: Option<ErrorCounterFn>,
    mig_mode: Option<MigModeFn>,
    profile_info_v2: Option<ProfileV2Fn>,
    profile_info: Option<ProfileV1Fn>,
    possible_placements: Option<PlacementsFn>,
}

/// An initialised HGML (shut down when dropped, see [`NvmlShapedLibrary`]).
pub struct HgmlLib {
    // Declared before `lib`, which holds the library these pointers point into.
    extras: Extras,
    lib: NvmlShapedLibrary,
}

impl HgmlLib {
    /// Loads the library at `path` (a file path, or a bare name for the loader's own search),
    /// resolves its functions and initialises it.
    pub fn open(path: &OsStr) -> Result<HgmlLib, OpenError> {
        let lib = NvmlShapedLibrary::open(path, &SYMBOLS)?;
        let library = lib.library();
        // SAFETY: for every lookup, each `symbols` list is paired with the fn type pyhgml and the
        // Go bindings declare for it; the pointers are stored next to `lib`, which holds the
        // library for as long as `self` lives.
        let extras = unsafe {
            Extras {
                num_cores: loader::symbol(library, symbols::NUM_CORES),
                memory_info_v2: loader::symbol(library, symbols::MEMORY_INFO_V2),
                memory_error_counter: loader::symbol(library, symbols::MEMORY_ERROR_COUNTER),
                mig_mode: loader::symbol(library, symbols::MIG_MODE),
                profile_info_v2: loader::symbol(library, symbols::PROFILE_INFO_V2),
                profile_info: loader::symbol(library, symbols::PROFILE_INFO),
                possible_placements: loader::symbol(library, symbols::POSSIBLE_PLACEMENTS),
            }
        };
        Ok(HgmlLib { extras, lib })
    }

    /// The NVML-shaped calls.
    pub fn lib(&self) -> &NvmlShapedLibrary {
        &self.lib
    }

    /// The device at `index` (`hgmlDeviceGetHandleByIndex_v2`).
    pub fn device(&self, index: u32) -> Result<Device<'_>, Status> {
        Ok(Device {
            hgml: self,
            common: self.lib.device(index)?,
        })
    }
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

/// One device handle, valid while its [`HgmlLib`] is; the NVML-shaped calls through `Deref`.
pub struct Device<'a> {
    hgml: &'a HgmlLib,
    common: binding::Device<'a>,
}

impl<'a> Deref for Device<'a> {
    type Target = binding::Device<'a>;

    fn deref(&self) -> &Self::Target {
        &self.common
    }
}

impl Device<'_> {
    fn present<T>(&self, f: Option<T>) -> Result<T, Status> {
        f.ok_or(self.hgml.lib.function_not_found())
    }

    fn status(&self, code: c_uint) -> Result<(), Status> {
        self.hgml.lib.status(code).ok()
    }

    /// `hgmlDeviceGetNumGpuCores`.
    pub fn num_cores(&self) -> Result<u32, Status> {
        let f = self.present(self.hgml.extras.num_cores)?;
        let mut value: c_uint = 0;
        // SAFETY: the handle came from this initialised library's handle-by-index call (as in
        // every call below); `value` is a writable `unsigned int`.
        self.status(unsafe { f(self.raw(), &mut value) })?;
        Ok(value)
    }

    /// `hgmlDeviceGetMemoryInfo_v2`, else `hgmlDeviceGetMemoryInfo` (the Go operator's order).
    pub fn memory(&self) -> Result<Memory, Status> {
        if let Some(f) = self.hgml.extras.memory_info_v2 {
            let mut m = RawMemoryV2 {
                version: MEMORY_V2,
                ..RawMemoryV2::default()
            };
            // SAFETY: valid handle; `m` is a writable `hgmlMemory_v2_t` with its version set, as
            // the call requires.
            if self.status(unsafe { f(self.raw(), &mut m) }).is_ok() {
                return Ok(Memory {
                    total: m.total,
                    used: m.used,
                });
            }
        }
        self.common.memory()
    }

    /// `hgmlDeviceGetMemoryErrorCounter(UNCORRECTED, VOLATILE_ECC, DRAM)`.
    pub fn uncorrected_dram_errors(&self) -> Result<u64, Status> {
        let f = self.present(self.hgml.extras.memory_error_counter)?;
        let mut count: c_ulonglong = 0;
        // SAFETY: valid handle ; three valid enum values; `count` is writable.
        self.status(unsafe {
            f(
                self.raw(),
                MEMORY_ERROR_TYPE_UNCORRECTED,
                VOLATILE_ECC,
                MEMORY_LOCATION_DRAM,
                &mut count,
            )
        })?;
        Ok(count)
    }

    /// `hgmlDeviceGetMigMode`: (current, pending), `HGML_DEVICE_MIG_ENABLE` = 1.
    pub fn mig_mode(&self) -> Result<(u32, u32), Status> {
        let f = self.present(self.hgml.extras.mig_mode)?;
        let (mut current, mut pending): (c_uint, c_uint) = (0, 0);
        // SAFETY: valid handle ; both are writable `unsigned int`s.
        self.status(unsafe { f(self.raw(), &mut current, &mut pending) })?;
        Ok((current, pending))
    }

    /// The GPU-instance profile at enumeration index `index`: the named v2 record
    /// (`hgmlDeviceGetGpuInstanceProfileInfoV`), else the unnamed v1 one.
    pub fn profile_info(&self, index: u32) -> Result<ProfileInfo, Status> {
        if let Some(f) = self.hgml.extras.profile_info_v2 {
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
            // SAFETY: valid handle ; `info` is a writable v2 record with its
            // version word set, as the versioned call requires.
            match self.status(unsafe { f(self.raw(), index, &mut info) }) {
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
                Err(status) if self.hgml.extras.profile_info.is_none() => return Err(status),
                Err(_) => {}
            }
        }
        let f = self.present(self.hgml.extras.profile_info)?;
        let mut info = RawProfileInfoV1::default();
        // SAFETY: valid handle ; `info` is a writable v1 record.
        self.status(unsafe { f(self.raw(), index, &mut info) })?;
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
    pub fn possible_placements(&self, profile_id: u32) -> Result<Vec<SlotPlacement>, Status> {
        let f = self.present(self.hgml.extras.possible_placements)?;
        let mut count: c_uint = 0;
        // SAFETY: valid handle ; a null buffer asks for the count only, which is
        // written to the writable `count`.
        let status = unsafe { f(self.raw(), profile_id, std::ptr::null_mut(), &mut count) };
        if status != SUCCESS && status != INSUFFICIENT_SIZE {
            return Err(self.hgml.lib.status(status));
        }
        if count == 0 {
            return Ok(Vec::new());
        }
        let capacity = count.min(MAX_PLACEMENTS);
        let mut slots = vec![RawPlacement::default(); capacity as usize];
        let mut filled = capacity;
        // SAFETY: valid handle; `slots` holds `filled` writable placements, the count passed.
        self.status(unsafe { f(self.raw(), profile_id, slots.as_mut_ptr(), &mut filled) })?;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn layouts_match_pyhgml() {
        assert_eq!(size_of::<RawMemoryV2>(), 40);
        assert_eq!(offset_of!(RawMemoryV2, total), 8);
        assert_eq!(offset_of!(RawMemoryV2, used), 32);
        assert_eq!(MEMORY_V2, 0x0200_0028, "pyhgml's hgmlMemory_v2");
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
    }

    #[test]
    fn versioned_names_come_first() {
        for list in [
            SYMBOLS.init,
            SYMBOLS.device_count,
            SYMBOLS.handle_by_index,
            SYMBOLS.runtime_version,
            symbols::POSSIBLE_PLACEMENTS,
        ] {
            assert!(list[0].ends_with("_v2"), "{list:?}");
            assert!(list[0].starts_with(list[1]), "{list:?}");
        }
        assert_eq!(SYMBOLS.pci_info.last(), Some(&"hgmlDeviceGetPciInfo"));
    }

    #[test]
    fn statuses_are_named_and_absence_is_told_apart() {
        let status = |code| SYMBOLS.status(code);
        assert_eq!(status(9).to_string(), "HGML_ERROR_DRIVER_NOT_LOADED (9)");
        assert_eq!(status(42).to_string(), "unnamed HGML status (42)");
        assert!(status(binding::NOT_SUPPORTED).is_absent());
        assert!(status(binding::NOT_FOUND).is_absent());
        assert!(!status(999).is_absent());
        assert!(!status(binding::FUNCTION_NOT_FOUND).is_absent());
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
