//! Creating and destroying MIG partitions through NVML, for the partitioned device plugin:
//! a GPU instance of a named profile at a chosen slot, one compute instance spanning it, and the
//! MIG device's UUID the container is given (`NVIDIA_VISIBLE_DEVICES=MIG-…`).
//!
//! nvml-wrapper wraps none of the instance calls, so they are called through the symbol table
//! it resolved when it loaded the library (as [`super::gpu_instances`] does):
//! `nvmlDeviceCreateGpuInstanceWithPlacement`, `nvmlGpuInstanceGetComputeInstanceProfileInfo`,
//! `nvmlGpuInstanceCreateComputeInstance`, `nvmlGpuInstanceGetInfo`,
//! `nvmlComputeInstanceGetInfo_v2`, `nvmlDeviceGetMaxMigDeviceCount`,
//! `nvmlDeviceGetMigDeviceHandleByIndex`, `nvmlDeviceGetGpuInstanceId`,
//! `nvmlDeviceGetComputeInstanceId`, `nvmlDeviceGetUUID`; and for destruction
//! `nvmlDeviceGetGpuInstanceById`, `nvmlGpuInstanceGetComputeInstanceById`,
//! `nvmlComputeInstanceDestroy`, `nvmlGpuInstanceDestroy`.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_uint};

use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{
    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, nvmlComputeInstance_t, nvmlComputeInstanceInfo_t,
    nvmlComputeInstanceProfileInfo_t, nvmlDevice_t, nvmlGpuInstance_t, nvmlGpuInstanceInfo_t,
    nvmlGpuInstancePlacement_t, nvmlReturn_enum_NVML_ERROR_IN_USE,
    nvmlReturn_enum_NVML_ERROR_NOT_FOUND, nvmlReturn_enum_NVML_SUCCESS,
};

use super::gpu_instances::{self, NvmlCallError, PROFILE_COUNT};
use crate::vendors::ffi::c_text;

/// A partition made for a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    pub gpu_instance: u32,
    pub compute_instance: u32,
    /// `MIG-…`.
    pub uuid: String,
}

#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    /// An NVML call is missing or failed.
    #[error(transparent)]
    Nvml(#[from] NvmlCallError),
    #[error("the card offers no MIG profile named {0}")]
    NoProfile(String),
    #[error(
        "NVML lists no MIG device for GPU instance {gpu_instance}, compute instance {compute_instance}"
    )]
    NoMigDevice {
        gpu_instance: u32,
        compute_instance: u32,
    },
    /// The partition still runs work (`NVML_ERROR_IN_USE`): retry later.
    #[error("{0} answered that the instance is in use")]
    InUse(&'static str),
}

impl InstanceError {
    pub fn is_in_use(&self) -> bool {
        matches!(self, Self::InUse(_))
    }
}

/// Turns an NVML status into a result.
fn check(call: &'static str, status: u32) -> Result<(), InstanceError> {
    if status == nvmlReturn_enum_NVML_SUCCESS {
        return Ok(());
    }
    if status == nvmlReturn_enum_NVML_ERROR_IN_USE {
        return Err(InstanceError::InUse(call));
    }
    Err(NvmlCallError::from_status(call, status).into())
}

/// A symbol of the loaded library, or [`NvmlCallError::Missing`].
macro_rules! sym {
    ($nvml:expr, $name:ident) => {
        $nvml
            .lib()
            .$name
            .as_ref()
            .map_err(|_| InstanceError::from(NvmlCallError::Missing(stringify!($name))))?
    };
}

/// `NVML_COMPUTE_INSTANCE_PROFILE_*` for a compute instance of `slices` GPU slices.
fn compute_profile(slices: u32) -> Option<c_uint> {
    use nvml_wrapper_sys::bindings as b;
    Some(match slices {
        1 => b::NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
        2 => b::NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
        3 => b::NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
        4 => b::NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE,
        6 => b::NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE,
        7 => b::NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE,
        8 => b::NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE,
        _ => return None,
    })
}

/// Creates a GPU instance of `profile` (`1g.10gb`) at slot (`start`, `size`) and one compute
/// instance spanning it; answers the MIG device's UUID. A half-made partition is destroyed.
pub fn create(
    nvml: &Nvml,
    device: &Device<'_>,
    profile: &str,
    start: u32,
    size: u32,
) -> Result<Created, InstanceError> {
    let wanted = format!("MIG {profile}");
    let info = (0..PROFILE_COUNT)
        .filter_map(|i| gpu_instances::profile_info(nvml, device, i).ok())
        .find(|p| p.name == wanted)
        .ok_or_else(|| InstanceError::NoProfile(profile.to_owned()))?;
    let create_gi = sym!(nvml, nvmlDeviceCreateGpuInstanceWithPlacement);
    let placement = nvmlGpuInstancePlacement_t { start, size };
    let mut gi: nvmlGpuInstance_t = std::ptr::null_mut();
    // SAFETY: live device handle of this NVML; `placement` readable, `gi` writable.
    let status = unsafe { create_gi(device.handle(), info.id, &placement, &mut gi) };
    check("nvmlDeviceCreateGpuInstanceWithPlacement", status)?;
    match compute_instance(nvml, gi, info.slice_count) {
        Ok((gi_id, ci_id)) => {
            let uuid = mig_uuid(nvml, device, gi_id, ci_id)?;
            Ok(Created {
                gpu_instance: gi_id,
                compute_instance: ci_id,
                uuid,
            })
        }
        Err(e) => {
            if let Ok(destroy) = nvml.lib().nvmlGpuInstanceDestroy.as_ref() {
                // SAFETY: `gi` was just created by this NVML and not destroyed.
                let _ = unsafe { destroy(gi) };
            }
            Err(e)
        }
    }
}

/// One compute instance spanning GPU instance `gi` of `slices`; answers (gi id, ci id).
fn compute_instance(
    nvml: &Nvml,
    gi: nvmlGpuInstance_t,
    slices: u32,
) -> Result<(u32, u32), InstanceError> {
    let profile_info = sym!(nvml, nvmlGpuInstanceGetComputeInstanceProfileInfo);
    let create_ci = sym!(nvml, nvmlGpuInstanceCreateComputeInstance);
    let gi_info = sym!(nvml, nvmlGpuInstanceGetInfo);
    let ci_info = sym!(nvml, nvmlComputeInstanceGetInfo_v2);
    let profile = compute_profile(slices).ok_or(NvmlCallError::Missing(
        "a compute-instance profile of this size",
    ))?;
    // SAFETY: plain C records of integers and pointers; all-zero is valid for each.
    let mut pinfo: nvmlComputeInstanceProfileInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `gi` is a live GPU instance of this NVML; `pinfo` writable.
    let status = unsafe {
        profile_info(
            gi,
            profile,
            NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
            &mut pinfo,
        )
    };
    check("nvmlGpuInstanceGetComputeInstanceProfileInfo", status)?;
    let mut ci: nvmlComputeInstance_t = std::ptr::null_mut();
    // SAFETY: live `gi`; `ci` writable.
    let status = unsafe { create_ci(gi, pinfo.id, &mut ci) };
    check("nvmlGpuInstanceCreateComputeInstance", status)?;
    // SAFETY: see above; all-zero records are valid.
    let mut g: nvmlGpuInstanceInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: live `gi`; `g` writable.
    check("nvmlGpuInstanceGetInfo", unsafe { gi_info(gi, &mut g) })?;
    // SAFETY: see above.
    let mut c: nvmlComputeInstanceInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: live `ci`; `c` writable.
    check("nvmlComputeInstanceGetInfo_v2", unsafe {
        ci_info(ci, &mut c)
    })?;
    Ok((g.id, c.id))
}

/// The UUID of the MIG device of (gi, ci) on `device`.
fn mig_uuid(nvml: &Nvml, device: &Device<'_>, gi: u32, ci: u32) -> Result<String, InstanceError> {
    let max = sym!(nvml, nvmlDeviceGetMaxMigDeviceCount);
    let by_index = sym!(nvml, nvmlDeviceGetMigDeviceHandleByIndex);
    let gi_of = sym!(nvml, nvmlDeviceGetGpuInstanceId);
    let ci_of = sym!(nvml, nvmlDeviceGetComputeInstanceId);
    let uuid_of = sym!(nvml, nvmlDeviceGetUUID);
    let mut count: c_uint = 0;
    // SAFETY: live device handle; `count` writable.
    check("nvmlDeviceGetMaxMigDeviceCount", unsafe {
        max(device.handle(), &mut count)
    })?;
    for index in 0..count.min(64) {
        let mut mig: nvmlDevice_t = std::ptr::null_mut();
        // SAFETY: live device handle; `mig` writable.
        let status = unsafe { by_index(device.handle(), index, &mut mig) };
        if status == nvmlReturn_enum_NVML_ERROR_NOT_FOUND {
            continue;
        }
        check("nvmlDeviceGetMigDeviceHandleByIndex", status)?;
        let (mut g, mut c): (c_uint, c_uint) = (0, 0);
        // SAFETY: `mig` is a MIG device handle NVML just gave; outputs writable.
        check("nvmlDeviceGetGpuInstanceId", unsafe { gi_of(mig, &mut g) })?;
        // SAFETY: as above.
        check("nvmlDeviceGetComputeInstanceId", unsafe {
            ci_of(mig, &mut c)
        })?;
        if (g, c) != (gi, ci) {
            continue;
        }
        let mut buf = [0 as c_char; 96];
        // SAFETY: `mig` live; `buf` holds the 96 bytes passed.
        check("nvmlDeviceGetUUID", unsafe {
            uuid_of(mig, buf.as_mut_ptr(), buf.len() as c_uint)
        })?;
        return Ok(c_text(&buf));
    }
    Err(InstanceError::NoMigDevice {
        gpu_instance: gi,
        compute_instance: ci,
    })
}

/// Destroys compute instance `ci` and GPU instance `gi` on `device`. Already gone is done;
/// [`InstanceError::InUse`] means the partition still runs work.
pub fn destroy(nvml: &Nvml, device: &Device<'_>, gi: u32, ci: u32) -> Result<(), InstanceError> {
    let gi_by_id = sym!(nvml, nvmlDeviceGetGpuInstanceById);
    let ci_by_id = sym!(nvml, nvmlGpuInstanceGetComputeInstanceById);
    let destroy_ci = sym!(nvml, nvmlComputeInstanceDestroy);
    let destroy_gi = sym!(nvml, nvmlGpuInstanceDestroy);
    let mut g: nvmlGpuInstance_t = std::ptr::null_mut();
    // SAFETY: live device handle; `g` writable.
    let status = unsafe { gi_by_id(device.handle(), gi, &mut g) };
    if status == nvmlReturn_enum_NVML_ERROR_NOT_FOUND {
        return Ok(());
    }
    check("nvmlDeviceGetGpuInstanceById", status)?;
    let mut c: nvmlComputeInstance_t = std::ptr::null_mut();
    // SAFETY: `g` live; `c` writable.
    let status = unsafe { ci_by_id(g, ci, &mut c) };
    if status != nvmlReturn_enum_NVML_ERROR_NOT_FOUND {
        check("nvmlGpuInstanceGetComputeInstanceById", status)?;
        // SAFETY: `c` is a live compute instance NVML just gave.
        check("nvmlComputeInstanceDestroy", unsafe { destroy_ci(c) })?;
    }
    // SAFETY: `g` is a live GPU instance NVML gave.
    let status = unsafe { destroy_gi(g) };
    if status == nvmlReturn_enum_NVML_ERROR_NOT_FOUND {
        return Ok(());
    }
    check("nvmlGpuInstanceDestroy", status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_profiles_follow_nvml_h() {
        assert_eq!(compute_profile(1), Some(0));
        assert_eq!(compute_profile(7), Some(4));
        assert_eq!(compute_profile(6), Some(6));
        assert_eq!(compute_profile(5), None);
    }

    #[test]
    fn statuses() {
        assert!(
            check("x", nvmlReturn_enum_NVML_ERROR_IN_USE)
                .unwrap_err()
                .is_in_use()
        );
        assert!(check("x", nvmlReturn_enum_NVML_SUCCESS).is_ok());
        assert!(matches!(
            check("x", 13),
            Err(InstanceError::Nvml(NvmlCallError::Missing("x")))
        ));
    }
}
