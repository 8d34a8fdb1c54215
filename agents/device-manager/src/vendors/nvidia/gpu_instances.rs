//! The only `unsafe` of the NVIDIA detector: NVML's GPU-instance profile queries, which
//! nvml-wrapper does not wrap usably (it has no call for the named v2 record, and its
//! placements call hands back an empty list). They are called through the symbol table
//! nvml-wrapper already resolved when it loaded the library, so nothing is loaded twice.
//!
//! - `nvmlDeviceGetGpuInstanceProfileInfoV` with `nvmlGpuInstanceProfileInfo_v2_t` (version
//!   word set, as the versioned call requires): the profile at one enumeration index
//!   (`NVML_GPU_INSTANCE_PROFILE_*`), with its name;
//! - `nvmlDeviceGetGpuInstancePossiblePlacements_v2`: the legal slots of a profile id on an
//!   empty card, the count first (null buffer), then the slots.
//!
//! A symbol the library lacks, or `NVML_ERROR_FUNCTION_NOT_FOUND` from it, is
//! [`NvmlCallError::Missing`]: the library cannot describe GPU instances at all.

#![allow(unsafe_code)]

use std::ffi::c_uint;

use nvml_wrapper::{Device, Nvml, error::NvmlError};

use crate::vendors::ffi::c_text;
use nvml_wrapper_sys::bindings::{
    nvmlGpuInstancePlacement_t, nvmlGpuInstanceProfileInfo_v2_t,
    nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE, nvmlReturn_enum_NVML_SUCCESS,
};

/// `NVML_GPU_INSTANCE_PROFILE_COUNT`: the enumeration indexes to ask for.
pub const PROFILE_COUNT: u32 = nvml_wrapper_sys::bindings::NVML_GPU_INSTANCE_PROFILE_COUNT;

/// `nvmlGpuInstanceProfileInfo_v2`: `NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2)`.
const PROFILE_INFO_V2: c_uint =
    (size_of::<nvmlGpuInstanceProfileInfo_v2_t>() as c_uint) | (2 << 24);

/// More slots than any card has (an 8-slice card has at most 7 for one profile); bounds the
/// buffer whatever count the library answers.
const MAX_PLACEMENTS: c_uint = 64;

/// One answered GPU-instance profile, as NVML's v2 record has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileInfo {
    /// The creation id placements are asked by (not the enumeration index).
    pub id: u32,
    /// As NVML spells it, e.g. `MIG 1g.10gb`.
    pub name: String,
    /// GPU (compute) slices.
    pub slice_count: u32,
    /// Instances an empty card can hold.
    pub instance_count: u32,
    /// NVML says MB; the figure is MiB (`nvidia-smi mig -lgip` shows it / 1024 as GiB).
    pub memory_size_mb: u64,
}

/// A legal slot: first memory slice and length in memory slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub start: u32,
    pub size: u32,
}

/// Why an NVML call nvml-wrapper does not wrap gave no answer: the NVIDIA bindings' call
/// error (the other vendors' is `ffi::CallError`), with nvml-wrapper's typed status.
#[derive(Debug, thiserror::Error)]
pub enum NvmlCallError {
    /// The library has no such function (absent symbol or `FUNCTION_NOT_FOUND`).
    #[error("{0} is not available in this NVML")]
    Missing(&'static str),
    /// The function answered an error.
    #[error("{call} failed: {error}")]
    Call {
        call: &'static str,
        error: NvmlError,
    },
}

impl NvmlCallError {
    /// The error for a call that answered `status` (not success).
    pub fn from_status(call: &'static str, status: u32) -> Self {
        match NvmlError::from(status) {
            NvmlError::FunctionNotFound => NvmlCallError::Missing(call),
            error => NvmlCallError::Call { call, error },
        }
    }

    /// "No profile at this index on this card": the card's answer, not a failure.
    pub fn is_no_such_profile(&self) -> bool {
        matches!(
            self,
            NvmlCallError::Call {
                error: NvmlError::NotSupported | NvmlError::InvalidArg,
                ..
            }
        )
    }
}

const PROFILE_INFO_V: &str = "nvmlDeviceGetGpuInstanceProfileInfoV";
const PLACEMENTS: &str = "nvmlDeviceGetGpuInstancePossiblePlacements_v2";

/// The GPU-instance profile at enumeration index `index`.
pub fn profile_info(
    nvml: &Nvml,
    device: &Device<'_>,
    index: u32,
) -> Result<ProfileInfo, NvmlCallError> {
    let f = nvml
        .lib()
        .nvmlDeviceGetGpuInstanceProfileInfoV
        .as_ref()
        .map_err(|_| NvmlCallError::Missing(PROFILE_INFO_V))?;
    // SAFETY: the record is plain C data (integers and a char array); all-zero is valid.
    let mut info: nvmlGpuInstanceProfileInfo_v2_t = unsafe { std::mem::zeroed() };
    info.version = PROFILE_INFO_V2;
    // SAFETY: `device` is a live handle of this NVML (nvml-wrapper ties its lifetime to
    // `nvml`); `info` is a writable v2 record with its version word set.
    let status = unsafe { f(device.handle(), index, &mut info) };
    if status != nvmlReturn_enum_NVML_SUCCESS {
        return Err(NvmlCallError::from_status(PROFILE_INFO_V, status));
    }
    Ok(ProfileInfo {
        id: info.id,
        name: c_text(&info.name),
        slice_count: info.sliceCount,
        instance_count: info.instanceCount,
        memory_size_mb: info.memorySizeMB,
    })
}

/// The legal slots of the profile with creation id `profile_id` on an empty card.
pub fn possible_placements(
    nvml: &Nvml,
    device: &Device<'_>,
    profile_id: u32,
) -> Result<Vec<Slot>, NvmlCallError> {
    let f = nvml
        .lib()
        .nvmlDeviceGetGpuInstancePossiblePlacements_v2
        .as_ref()
        .map_err(|_| NvmlCallError::Missing(PLACEMENTS))?;
    let mut count: c_uint = 0;
    // SAFETY: live handle (see `profile_info`); a null buffer asks for the count only, written
    // to the writable `count`.
    let status = unsafe {
        f(
            device.handle(),
            profile_id,
            std::ptr::null_mut(),
            &mut count,
        )
    };
    // Drivers answer the count query with success or with "insufficient size"; both set it.
    if status != nvmlReturn_enum_NVML_SUCCESS
        && status != nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE
    {
        return Err(NvmlCallError::from_status(PLACEMENTS, status));
    }
    let capacity = count.min(MAX_PLACEMENTS);
    if capacity == 0 {
        return Ok(Vec::new());
    }
    let mut slots = vec![nvmlGpuInstancePlacement_t { start: 0, size: 0 }; capacity as usize];
    let mut filled = capacity;
    // SAFETY: live handle; `slots` holds `filled` writable placements, the count passed.
    let status = unsafe { f(device.handle(), profile_id, slots.as_mut_ptr(), &mut filled) };
    if status != nvmlReturn_enum_NVML_SUCCESS {
        return Err(NvmlCallError::from_status(PLACEMENTS, status));
    }
    // The out-count is the library's and the buffer's length ours: bound one by the other.
    slots.truncate(filled.min(capacity) as usize);
    Ok(slots
        .into_iter()
        .map(|s| Slot {
            start: s.start,
            size: s.size,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_layout_matches_nvml_h() {
        // nvml.h: 11 unsigned ints, 4 bytes of padding, an unsigned long long, a 96-byte name.
        assert_eq!(size_of::<nvmlGpuInstanceProfileInfo_v2_t>(), 152);
        assert_eq!(PROFILE_INFO_V2, 0x0200_0098);
    }
}
