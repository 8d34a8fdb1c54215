//! NVIDIA's `libnvidia-ml.so.1` (NVML) and Iluvatar CoreX's `libixml.so` (IXML, an NVML clone;
//! Deep-Spark/go-ixml `pkg/ixml/api.h`), serving the fixture named by
//! `GPUSTACK_FAKE_NVML_FIXTURE`:
//!
//! - NVML is loaded by the NVIDIA detector through nvml-wrapper, which calls the versioned names
//!   (`nvmlInit_v2`, `nvmlDeviceGetCount_v2`, `nvmlDeviceGetHandleByIndex_v2`,
//!   `nvmlDeviceGetPciInfo_v3`, `nvmlDeviceGetMemoryInfo_v2`,
//!   `nvmlSystemGetCudaDriverVersion_v2`) with nvml.h's layouts;
//! - IXML is loaded by the Iluvatar detector, which calls the unversioned names Iluvatar's own
//!   loader uses (`nvmlInit`, `nvmlDeviceGetCount`, `nvmlDeviceGetHandleByIndex`,
//!   `nvmlDeviceGetPciInfo`, `nvmlDeviceGetMemoryInfo`, `nvmlSystemGetCudaDriverVersion`) with
//!   the v1 layouts (`nvmlMemory_t` `{total, free, used}`; NVML's 52-byte v1 `nvmlPciInfo_t`,
//!   whose bus id sits in the first 16 bytes, the hardest layout a caller has to read), plus
//!   IXML's own `ixmlDeviceGetHealth`.
//!
//! Both share the calls every NVML-shaped library has ([`crate::nvml_shaped_exports`] under the
//! `nvml` prefix). For a card in MIG mode it serves the fixture's GPU-instance profiles through
//! `nvmlDeviceGetGpuInstanceProfileInfoV` (the named v2 record the NVIDIA detector reads),
//! `nvmlDeviceGetGpuInstanceProfileInfo` (the unnamed v1 record, the one nvml-wrapper's
//! `Device::profile_info` reads) and `nvmlDeviceGetGpuInstancePossiblePlacements_v2`, and
//! creates and destroys GPU and compute instances as the device plugin drives them
//! ([`crate::instances`]).

use std::ffi::{c_int, c_ulonglong};

use crate::{
    instances,
    library::{Flavour, Library},
};

/// The variable naming the NVML (and IXML) fixture file.
pub const FIXTURE_ENV: &str = "GPUSTACK_FAKE_NVML_FIXTURE";

/// The NVML (and IXML) the stand-in plays.
pub static LIB: Library = Library::new(FIXTURE_ENV, Flavour::Nvml);

crate::nvml_shaped_exports!("nvml", LIB);

/// `nvmlEnableState_t`.
const NVML_FEATURE_DISABLED: c_uint = 0;
const NVML_FEATURE_ENABLED: c_uint = 1;
/// `nvmlMemoryErrorType_t`.
const NVML_MEMORY_ERROR_TYPE_CORRECTED: c_uint = 0;
const NVML_MEMORY_ERROR_TYPE_UNCORRECTED: c_uint = 1;
/// `nvmlEccCounterType_t`: volatile (since the last driver load) and aggregate (lifetime), each
/// served from its own fixture figure.
const NVML_VOLATILE_ECC: c_uint = 0;
const NVML_AGGREGATE_ECC: c_uint = 1;

/// IXML's (and NVML's legacy) unversioned init.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> Return {
    LIB.init()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> Return {
    LIB.runtime_version(version)
}

/// IXML's CUDA-compatible driver version; the same encoding (`1000 * major + 10 * minor`).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> Return {
    LIB.runtime_version(version)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCount(count: *mut c_uint) -> Return {
    LIB.device_count(count)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetHandleByIndex(index: c_uint, device: *mut DeviceHandle) -> Return {
    LIB.handle_by_index(index, device)
}

/// The unversioned `nvmlDeviceGetPciInfo`: NVML's original (v1) layout, which has only the
/// 16-byte bus id and ends in reserved words. IXML's header declares the longer v3 struct for
/// this name; serving the short one checks that a caller copes with either.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPciInfo(
    device: DeviceHandle,
    pci: *mut abi::PciInfoLegacy,
) -> Return {
    LIB.pci_info_legacy(device, pci)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: DeviceHandle,
    major: *mut c_int,
    minor: *mut c_int,
) -> Return {
    LIB.compute_capability(device, major, minor)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPciInfo_v3(device: DeviceHandle, pci: *mut abi::PciInfo) -> Return {
    LIB.with_device(device, |d| {
        let Some((domain, bus, dev)) = abi::bus_fields(&d.pci_bus_id) else {
            return abi::ERROR_UNKNOWN;
        };
        let legacy = abi::legacy_bus_id(domain, bus, dev);
        abi::put(
            pci,
            abi::PciInfo {
                bus_id_legacy: abi::c_array(&legacy),
                domain,
                bus,
                device: dev,
                pci_device_id: d.pci_device_id,
                pci_sub_system_id: d.pci_sub_system_id,
                bus_id: abi::c_array(&d.pci_bus_id),
            },
        )
    })
}

/// The unversioned `nvmlDeviceGetMemoryInfo` with the v1 `nvmlMemory_t`, whose `used` counts
/// the driver's reservation too (nvml.h: "Sum of Reserved and Allocated device memory").
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMemoryInfo(
    device: DeviceHandle,
    memory: *mut abi::Memory,
) -> Return {
    if instances::is_mig_handle(device) {
        return match instances::mig_device_memory(device) {
            Ok((total, used)) => abi::put(
                memory,
                abi::Memory {
                    total: total * abi::MIB,
                    free: (total - used) * abi::MIB,
                    used: used * abi::MIB,
                },
            ),
            Err(status) => status,
        };
    }
    LIB.with_device(device, |d| {
        let Some(used) = d.memory_used_mib else {
            return abi::ERROR_NOT_SUPPORTED;
        };
        let total = d.memory_total_mib * abi::MIB;
        let used = (used + d.memory_reserved_mib) * abi::MIB;
        abi::put(
            memory,
            abi::Memory {
                total,
                free: total.saturating_sub(used),
                used,
            },
        )
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetEccMode(
    device: DeviceHandle,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> Return {
    LIB.with_device(device, |d| {
        abi::supported(d.ecc_enabled, |on| {
            if current.is_null() || pending.is_null() {
                return abi::ERROR_INVALID_ARGUMENT;
            }
            let state = if on {
                NVML_FEATURE_ENABLED
            } else {
                NVML_FEATURE_DISABLED
            };
            abi::put(current, state);
            abi::put(pending, state)
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: DeviceHandle,
    error_type: c_uint,
    counter_type: c_uint,
    count: *mut c_ulonglong,
) -> Return {
    LIB.with_device(device, |d| {
        if !matches!(counter_type, NVML_VOLATILE_ECC | NVML_AGGREGATE_ECC) {
            return abi::ERROR_INVALID_ARGUMENT;
        }
        let figure = match (error_type, counter_type) {
            (NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC) => d.ecc_corrected_volatile,
            (NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC) => d.ecc_uncorrected_volatile,
            (NVML_MEMORY_ERROR_TYPE_CORRECTED, _) => d.ecc_corrected_aggregate,
            (NVML_MEMORY_ERROR_TYPE_UNCORRECTED, _) => d.ecc_uncorrected_aggregate,
            _ => return abi::ERROR_INVALID_ARGUMENT,
        };
        abi::supported(figure, |n| abi::put(count, n))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMemoryBusWidth(device: DeviceHandle, width: *mut c_uint) -> Return {
    LIB.with_device(device, |d| {
        abi::supported(d.memory_bus_width, |w| abi::put(width, w))
    })
}

/// The unnamed v1 record.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGpuInstanceProfileInfo(
    device: DeviceHandle,
    profile: c_uint,
    info: *mut abi::GpuInstanceProfileInfo,
) -> Return {
    LIB.with_device(device, |d| {
        let Some(p) = crate::library::profile_at(d, profile) else {
            return abi::ERROR_NOT_SUPPORTED;
        };
        abi::put(
            info,
            abi::GpuInstanceProfileInfo {
                id: p.id,
                is_p2p_supported: 0,
                slice_count: p.slice_count,
                instance_count: p.instance_count,
                multiprocessor_count: 0,
                copy_engine_count: 0,
                decoder_count: 0,
                encoder_count: 0,
                jpeg_count: 0,
                ofa_count: 0,
                memory_size_mb: p.memory_size_mb,
            },
        )
    })
}

/// IXML's health query (api.h: `ixmlDeviceGetHealth(nvmlDevice_t, unsigned long long *)`), a
/// bitmask of `ixmlHealth*` flags.
#[unsafe(no_mangle)]
pub extern "C" fn ixmlDeviceGetHealth(device: DeviceHandle, health: *mut c_ulonglong) -> Return {
    LIB.with_device(device, |d| {
        abi::supported(d.health, |h| abi::put(health, h))
    })
}

/// `nvmlDeviceGetComputeRunningProcesses_v3`: with `infos` null or `count` too small, the count
/// needed and `abi::ERROR_INSUFFICIENT_SIZE` (success when there are none).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: DeviceHandle,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> Return {
    running_processes(device, count, infos)
}

/// `nvmlProcessInfo_v2_t` (nvml.h; what `nvmlProcessInfo_t` is since the `_v3` calls).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProcessInfo {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

/// nvml.h's `NVML_VALUE_NOT_AVAILABLE` (-1) as each field holds it.
const NOT_AVAILABLE_U64: c_ulonglong = c_ulonglong::MAX;
const NOT_AVAILABLE_U32: c_uint = c_uint::MAX;

/// The body of `nvmlDeviceGetComputeRunningProcesses_v3` (private, as every pointer writer here).
fn running_processes(device: DeviceHandle, count: *mut c_uint, infos: *mut ProcessInfo) -> Return {
    if count.is_null() {
        return abi::ERROR_INVALID_ARGUMENT;
    }
    LIB.with_device(device, |d| {
        let Some(list) = &d.processes else {
            return abi::ERROR_NOT_SUPPORTED;
        };
        // SAFETY: non-null, and nvml.h makes the caller pass a readable and writable count.
        let room = unsafe { count.read() } as usize;
        let needed = list.len() as c_uint;
        if list.is_empty() {
            return abi::put(count, 0);
        }
        if infos.is_null() || room < list.len() {
            abi::put(count, needed);
            return abi::ERROR_INSUFFICIENT_SIZE;
        }
        for (i, p) in list.iter().enumerate() {
            // SAFETY: the caller promises `room` writable records and `i < list.len() <= room`.
            unsafe {
                infos.add(i).write(ProcessInfo {
                    pid: p.pid,
                    used_gpu_memory: p
                        .used_memory_mib
                        .map_or(NOT_AVAILABLE_U64, |m| m * abi::MIB),
                    gpu_instance_id: NOT_AVAILABLE_U32,
                    compute_instance_id: NOT_AVAILABLE_U32,
                })
            };
        }
        abi::put(count, needed)
    })
}
