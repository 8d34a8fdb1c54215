//! The FFI boundary to IXML (`libixml.so`), Iluvatar CoreX's management library: its symbol
//! table and the one function it adds to NVML's; the NVML-shaped calls themselves are
//! [`binding`]'s.
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
//! Layouts: api.h's, which are NVML's (see [`binding`]); `nvmlDeviceGetMemoryInfo` fills the
//! v1 `nvmlMemory_t`. IXML's own `ixmlDeviceGetHealth(nvmlDevice_t, unsigned long long *)`
//! answers a bitmask of `ixmlHealth*` flags.

#![allow(unsafe_code)]

use std::{ffi::OsStr, ffi::c_ulonglong, ops::Deref};

use crate::vendors::{
    ffi::{OpenError, loader},
    nvml_shaped::binding::{self, NvmlShapedLibrary, RawDevice, Status, Symbols},
};

/// Names tried for each function, in order (see the module comment).
pub static SYMBOLS: Symbols = Symbols {
    status_prefix: "NVML",
    library: "IXML",
    init: &["nvmlInit", "nvmlInit_v2"],
    shutdown: &["nvmlShutdown"],
    device_count: &["nvmlDeviceGetCount", "nvmlDeviceGetCount_v2"],
    handle_by_index: &[
        "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetHandleByIndex_v2",
    ],
    uuid: &["nvmlDeviceGetUUID"],
    name: &["nvmlDeviceGetName"],
    driver_version: &["nvmlSystemGetDriverVersion"],
    runtime_version: &["nvmlSystemGetCudaDriverVersion"],
    minor_number: &["nvmlDeviceGetMinorNumber"],
    memory_info: &["nvmlDeviceGetMemoryInfo"],
    pci_info: &["nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v3"],
    compute_capability: &["nvmlDeviceGetCudaComputeCapability"],
    temperature: &["nvmlDeviceGetTemperature"],
    power_usage: &["nvmlDeviceGetPowerUsage"],
    utilization: &["nvmlDeviceGetUtilizationRates"],
};

/// IXML's own health query.
pub const HEALTH: &[&str] = &["ixmlDeviceGetHealth"];

type HealthFn = unsafe extern "C" fn(RawDevice, *mut c_ulonglong) -> std::ffi::c_uint;

/// An initialised IXML (shut down when dropped, see [`NvmlShapedLibrary`]).
pub struct IxmlLib {
    // Declared before `lib`, which holds the library this pointer points into.
    health: Option<HealthFn>,
    lib: NvmlShapedLibrary,
}

impl IxmlLib {
    /// Loads the library at `path` (a file path, or a bare name for the loader's own search),
    /// resolves its functions and initialises it.
    pub fn open(path: &OsStr) -> Result<IxmlLib, OpenError> {
        let lib = NvmlShapedLibrary::open(path, &SYMBOLS)?;
        // SAFETY: `HealthFn` is `ixmlDeviceGetHealth`'s prototype in api.h; the pointer is
        // stored next to `lib`, which holds the library for as long as `self` lives.
        let health = unsafe { loader::symbol(lib.library(), HEALTH) };
        Ok(IxmlLib { health, lib })
    }

    /// The NVML-shaped calls.
    pub fn lib(&self) -> &NvmlShapedLibrary {
        &self.lib
    }

    /// The device at `index` (`nvmlDeviceGetHandleByIndex`).
    pub fn device(&self, index: u32) -> Result<Device<'_>, Status> {
        Ok(Device {
            ixml: self,
            common: self.lib.device(index)?,
        })
    }
}

/// One device handle, valid while its [`IxmlLib`] is; the NVML-shaped calls through `Deref`.
pub struct Device<'a> {
    ixml: &'a IxmlLib,
    common: binding::Device<'a>,
}

impl<'a> Deref for Device<'a> {
    type Target = binding::Device<'a>;

    fn deref(&self) -> &Self::Target {
        &self.common
    }
}

impl Device<'_> {
    /// `ixmlDeviceGetHealth`: a bitmask of api.h's `ixmlHealth*` flags, 0 = `ixmlHealthOK`.
    pub fn health(&self) -> Result<u64, Status> {
        let f = self.ixml.health.ok_or(self.ixml.lib.function_not_found())?;
        let mut h: c_ulonglong = 0;
        // SAFETY: the handle came from this initialised library's handle-by-index call; `h`
        // is a writable `unsigned long long`.
        let code = unsafe { f(self.raw(), &mut h) };
        self.ixml.lib.status(code).ok()?;
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unversioned_names_come_first() {
        for list in [
            SYMBOLS.init,
            SYMBOLS.device_count,
            SYMBOLS.handle_by_index,
            SYMBOLS.pci_info,
        ] {
            assert!(!list[0].contains("_v"), "{list:?}");
            assert!(list[1].starts_with(list[0]), "{list:?}");
        }
    }

    #[test]
    fn statuses_are_named() {
        assert_eq!(
            SYMBOLS.status(9).to_string(),
            "NVML_ERROR_DRIVER_NOT_LOADED (9)"
        );
        assert_eq!(SYMBOLS.status(42).to_string(), "unnamed IXML status (42)");
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
