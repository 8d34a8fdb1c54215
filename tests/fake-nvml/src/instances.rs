//! MIG GPU and compute instances, created and destroyed through NVML's calls, as a driver keeps
//! them: across `nvmlShutdown` and across processes. The stand-in keeps them in a JSON file
//! beside the fixture (`<fixture>.instances.json`), so that a test can read what "the driver"
//! holds, and a restarted agent finds the instances an earlier one created.
//!
//! Served calls: `nvmlDeviceCreateGpuInstanceWithPlacement` (a legal slot of the profile, not
//! overlapping another instance, else `NVML_ERROR_INSUFFICIENT_RESOURCES`),
//! `nvmlGpuInstanceGetComputeInstanceProfileInfo`, `nvmlGpuInstanceCreateComputeInstance` (one
//! compute instance spanning the GPU instance), `nvmlGpuInstanceGetInfo`,
//! `nvmlComputeInstanceGetInfo_v2`, `nvmlDeviceGetGpuInstanceById`,
//! `nvmlGpuInstanceGetComputeInstanceById`, `nvmlComputeInstanceDestroy`,
//! `nvmlGpuInstanceDestroy` (`NVML_ERROR_IN_USE` while it has compute instances, as the driver
//! answers), `nvmlDeviceGetMaxMigDeviceCount`, `nvmlDeviceGetMigDeviceHandleByIndex`,
//! `nvmlDeviceGetGpuInstanceId`, `nvmlDeviceGetComputeInstanceId`, and the MIG device's UUID
//! and memory through `nvmlDeviceGetUUID` and `nvmlDeviceGetMemoryInfo(_v2)`.
//!
//! Handles are opaque tagged integers, never dereferenced: a GPU instance is
//! `GI_TAG | device << 16 | gi`, a compute instance and its MIG device `CI_TAG`/`MIG_TAG | device
//! << 16 | gi << 8 | ci`.

use std::{
    ffi::{c_char, c_uint},
    path::PathBuf,
};

use serde::{Deserialize, Serialize};

use crate::{
    abi::{self, DeviceHandle, Return, put, put_str},
    fixture::Device,
    library::mig_enabled,
    nvml::{FIXTURE_ENV, LIB},
};

fn with_device(handle: DeviceHandle, f: impl FnOnce(&Device) -> Return) -> Return {
    LIB.with_device(handle, f)
}

const GI_TAG: usize = 1 << 40;
const CI_TAG: usize = 2 << 40;
const MIG_TAG: usize = 3 << 40;
const TAG_MASK: usize = 0xff << 40;

/// `nvmlGpuInstance_t` / `nvmlComputeInstance_t`: opaque.
pub type Handle = *mut std::ffi::c_void;

/// `nvmlGpuInstanceInfo_t`.
#[repr(C)]
pub struct NvmlGpuInstanceInfo {
    pub device: DeviceHandle,
    pub id: c_uint,
    pub profile_id: c_uint,
    pub placement: abi::GpuInstancePlacement,
}

/// `nvmlComputeInstanceInfo_t`.
#[repr(C)]
pub struct NvmlComputeInstanceInfo {
    pub device: DeviceHandle,
    pub gpu_instance: Handle,
    pub id: c_uint,
    pub profile_id: c_uint,
    pub placement: abi::GpuInstancePlacement,
}

/// `nvmlComputeInstanceProfileInfo_t` (v1).
#[repr(C)]
pub struct NvmlComputeInstanceProfileInfo {
    pub id: c_uint,
    pub slice_count: c_uint,
    pub instance_count: c_uint,
    pub multiprocessor_count: c_uint,
    pub shared_copy_engine_count: c_uint,
    pub shared_decoder_count: c_uint,
    pub shared_encoder_count: c_uint,
    pub shared_jpeg_count: c_uint,
    pub shared_ofa_count: c_uint,
}

/// One GPU instance the "driver" holds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GpuInstance {
    /// The parent card's UUID.
    pub device: String,
    pub id: u32,
    pub profile_id: u32,
    pub start: u32,
    pub size: u32,
    /// GPU (compute) slices of the profile.
    pub slices: u32,
    /// Compute instance ids inside it.
    #[serde(default)]
    pub compute_instances: Vec<u32>,
}

/// The file's content.
#[derive(Serialize, Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Instances {
    #[serde(default)]
    pub gpu_instances: Vec<GpuInstance>,
}

fn file() -> Option<PathBuf> {
    let fixture = std::env::var_os(FIXTURE_ENV)?;
    let mut name = fixture;
    name.push(".instances.json");
    Some(PathBuf::from(name))
}

fn load() -> Instances {
    file()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn save(instances: &Instances) -> Return {
    let Some(path) = file() else {
        return abi::ERROR_UNKNOWN;
    };
    let tmp = path.with_extension("tmp");
    let Ok(text) = serde_json::to_vec_pretty(instances) else {
        return abi::ERROR_UNKNOWN;
    };
    if std::fs::write(&tmp, text).is_err() || std::fs::rename(&tmp, &path).is_err() {
        return abi::ERROR_UNKNOWN;
    }
    abi::SUCCESS
}

/// The device index of a plain device handle (`index + 1`).
fn device_index(handle: DeviceHandle) -> usize {
    handle.addr().wrapping_sub(1)
}

fn gi_handle(device: usize, gi: u32) -> Handle {
    std::ptr::without_provenance_mut(GI_TAG | device << 16 | gi as usize)
}

fn ci_handle(tag: usize, device: usize, gi: u32, ci: u32) -> Handle {
    std::ptr::without_provenance_mut(tag | device << 16 | (gi as usize) << 8 | ci as usize)
}

/// (device index, gi) of a GPU-instance handle.
fn split_gi(handle: Handle) -> Option<(usize, u32)> {
    let a = handle.addr();
    (a & TAG_MASK == GI_TAG).then_some(((a >> 16) & 0xff_ffff, (a & 0xffff) as u32))
}

/// (device index, gi, ci) of a compute-instance or MIG-device handle with `tag`.
fn split_ci(handle: usize, tag: usize) -> Option<(usize, u32, u32)> {
    (handle & TAG_MASK == tag).then_some((
        (handle >> 16) & 0xff_ffff,
        ((handle >> 8) & 0xff) as u32,
        (handle & 0xff) as u32,
    ))
}

/// The MIG device UUID of (card, gi, ci): derived from the card's, stable across calls.
pub fn mig_uuid(card: &str, gi: u32, ci: u32) -> String {
    let bare = card.trim_start_matches("GPU-");
    let parts: Vec<&str> = bare.split('-').collect();
    match parts.as_slice() {
        [a, _, _, d, e] => format!("MIG-{a}-{gi:04x}-{ci:04x}-{d}-{e}"),
        _ => format!("MIG-{bare}-{gi}-{ci}"),
    }
}

/// Whether two slot runs overlap.
fn overlaps(a_start: u32, a_size: u32, b_start: u32, b_size: u32) -> bool {
    a_start < b_start + b_size && b_start < a_start + a_size
}

/// The slot a caller passed.
fn read_placement(placement: *const abi::GpuInstancePlacement) -> Option<(u32, u32)> {
    if placement.is_null() {
        return None;
    }
    // SAFETY: non-null; nvml.h makes the caller pass a readable placement.
    let p = unsafe { placement.read() };
    Some((p.start, p.size))
}

fn with_card(index: usize, f: impl FnOnce(&Device) -> Return) -> Return {
    with_device(std::ptr::without_provenance_mut(index + 1), f)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceCreateGpuInstanceWithPlacement(
    device: DeviceHandle,
    profile_id: c_uint,
    placement: *const abi::GpuInstancePlacement,
    gpu_instance: *mut Handle,
) -> Return {
    let index = device_index(device);
    with_device(device, |d| {
        let Some((start, size)) = read_placement(placement).filter(|_| !gpu_instance.is_null())
        else {
            return abi::ERROR_INVALID_ARGUMENT;
        };
        let Some(profile) = d
            .mig_profiles
            .iter()
            .find(|p| p.id == profile_id)
            .filter(|_| mig_enabled(d))
        else {
            return abi::ERROR_NOT_SUPPORTED;
        };
        if !profile
            .placements
            .iter()
            .any(|s| s.start == start && s.size == size)
        {
            return abi::ERROR_INVALID_ARGUMENT;
        }
        let mut all = load();
        let mine: Vec<&GpuInstance> = all
            .gpu_instances
            .iter()
            .filter(|g| g.device == d.uuid)
            .collect();
        if mine.iter().any(|g| overlaps(g.start, g.size, start, size)) {
            return abi::ERROR_INSUFFICIENT_RESOURCES;
        }
        let id = (1..).find(|i| mine.iter().all(|g| g.id != *i)).unwrap_or(1);
        all.gpu_instances.push(GpuInstance {
            device: d.uuid.clone(),
            id,
            profile_id,
            start,
            size,
            slices: profile.slice_count,
            compute_instances: Vec::new(),
        });
        match save(&all) {
            abi::SUCCESS => put(gpu_instance, gi_handle(index, id)),
            failed => failed,
        }
    })
}

/// Runs `f` on the stored GPU instance behind `handle`.
fn with_gi(handle: Handle, f: impl FnOnce(&Device, &mut Instances, usize) -> Return) -> Return {
    let Some((index, gi)) = split_gi(handle) else {
        return abi::ERROR_INVALID_ARGUMENT;
    };
    with_card(index, |d| {
        let mut all = load();
        match all
            .gpu_instances
            .iter()
            .position(|g| g.device == d.uuid && g.id == gi)
        {
            Some(pos) => f(d, &mut all, pos),
            None => abi::ERROR_NOT_FOUND,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGpuInstanceById(
    device: DeviceHandle,
    id: c_uint,
    gpu_instance: *mut Handle,
) -> Return {
    let index = device_index(device);
    with_device(device, |d| {
        if load()
            .gpu_instances
            .iter()
            .any(|g| g.device == d.uuid && g.id == id)
        {
            put(gpu_instance, gi_handle(index, id))
        } else {
            abi::ERROR_NOT_FOUND
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpuInstanceGetInfo(
    gpu_instance: Handle,
    info: *mut NvmlGpuInstanceInfo,
) -> Return {
    let index = split_gi(gpu_instance).map_or(0, |(i, _)| i);
    with_gi(gpu_instance, |_, all, pos| {
        let g = &all.gpu_instances[pos];
        put(
            info,
            NvmlGpuInstanceInfo {
                device: std::ptr::without_provenance_mut(index + 1),
                id: g.id,
                profile_id: g.profile_id,
                placement: abi::GpuInstancePlacement {
                    start: g.start,
                    size: g.size,
                },
            },
        )
    })
}

/// `NVML_COMPUTE_INSTANCE_PROFILE_*`: the index of a compute-instance profile of `slices`.
fn ci_profile_slices(profile: c_uint) -> Option<u32> {
    match profile {
        0 => Some(1),
        1 => Some(2),
        2 => Some(3),
        3 => Some(4),
        4 => Some(7),
        5 => Some(8),
        6 => Some(6),
        _ => None,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpuInstanceGetComputeInstanceProfileInfo(
    gpu_instance: Handle,
    profile: c_uint,
    eng_profile: c_uint,
    info: *mut NvmlComputeInstanceProfileInfo,
) -> Return {
    with_gi(gpu_instance, |_, all, pos| {
        let g = &all.gpu_instances[pos];
        // Only the shared engine profile, and compute profiles that fit the GPU instance.
        match ci_profile_slices(profile) {
            Some(slices) if eng_profile == 0 && slices <= g.slices => put(
                info,
                NvmlComputeInstanceProfileInfo {
                    id: profile,
                    slice_count: slices,
                    instance_count: g.slices / slices,
                    multiprocessor_count: 0,
                    shared_copy_engine_count: 0,
                    shared_decoder_count: 0,
                    shared_encoder_count: 0,
                    shared_jpeg_count: 0,
                    shared_ofa_count: 0,
                },
            ),
            _ => abi::ERROR_NOT_SUPPORTED,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpuInstanceCreateComputeInstance(
    gpu_instance: Handle,
    profile_id: c_uint,
    compute_instance: *mut Handle,
) -> Return {
    let Some((index, gi)) = split_gi(gpu_instance) else {
        return abi::ERROR_INVALID_ARGUMENT;
    };
    with_gi(gpu_instance, |_, all, pos| {
        if compute_instance.is_null() {
            return abi::ERROR_INVALID_ARGUMENT;
        }
        let g = &mut all.gpu_instances[pos];
        let Some(slices) = ci_profile_slices(profile_id).filter(|s| *s <= g.slices) else {
            return abi::ERROR_NOT_SUPPORTED;
        };
        let used = g.compute_instances.len() as u32;
        // The stand-in's compute instances are all of one size: they fit while slices last.
        if (used + 1) * slices > g.slices {
            return abi::ERROR_INSUFFICIENT_RESOURCES;
        }
        let ci = (0..)
            .find(|i| !g.compute_instances.contains(i))
            .unwrap_or(0);
        g.compute_instances.push(ci);
        match save(all) {
            abi::SUCCESS => put(compute_instance, ci_handle(CI_TAG, index, gi, ci)),
            failed => failed,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpuInstanceGetComputeInstanceById(
    gpu_instance: Handle,
    id: c_uint,
    compute_instance: *mut Handle,
) -> Return {
    let Some((index, gi)) = split_gi(gpu_instance) else {
        return abi::ERROR_INVALID_ARGUMENT;
    };
    with_gi(gpu_instance, |_, all, pos| {
        if all.gpu_instances[pos].compute_instances.contains(&id) {
            put(compute_instance, ci_handle(CI_TAG, index, gi, id))
        } else {
            abi::ERROR_NOT_FOUND
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlComputeInstanceGetInfo_v2(
    compute_instance: Handle,
    info: *mut NvmlComputeInstanceInfo,
) -> Return {
    let Some((index, gi, ci)) = split_ci(compute_instance.addr(), CI_TAG) else {
        return abi::ERROR_INVALID_ARGUMENT;
    };
    with_gi(gi_handle(index, gi), |_, all, pos| {
        let g = &all.gpu_instances[pos];
        if !g.compute_instances.contains(&ci) {
            return abi::ERROR_NOT_FOUND;
        }
        put(
            info,
            NvmlComputeInstanceInfo {
                device: std::ptr::without_provenance_mut(index + 1),
                gpu_instance: gi_handle(index, gi),
                id: ci,
                profile_id: 0,
                placement: abi::GpuInstancePlacement {
                    start: 0,
                    size: g.slices,
                },
            },
        )
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlComputeInstanceDestroy(compute_instance: Handle) -> Return {
    let Some((index, gi, ci)) = split_ci(compute_instance.addr(), CI_TAG) else {
        return abi::ERROR_INVALID_ARGUMENT;
    };
    with_gi(gi_handle(index, gi), |_, all, pos| {
        let g = &mut all.gpu_instances[pos];
        let before = g.compute_instances.len();
        g.compute_instances.retain(|c| *c != ci);
        if g.compute_instances.len() == before {
            return abi::ERROR_NOT_FOUND;
        }
        save(all)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpuInstanceDestroy(gpu_instance: Handle) -> Return {
    with_gi(gpu_instance, |_, all, pos| {
        if !all.gpu_instances[pos].compute_instances.is_empty() {
            return abi::ERROR_IN_USE;
        }
        all.gpu_instances.remove(pos);
        save(all)
    })
}

/// The card's (gi, ci) pairs in creation-id order: the MIG devices, by index.
fn mig_devices(d: &Device) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = load()
        .gpu_instances
        .iter()
        .filter(|g| g.device == d.uuid)
        .flat_map(|g| g.compute_instances.iter().map(move |c| (g.id, *c)))
        .collect();
    out.sort_unstable();
    out
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: DeviceHandle,
    count: *mut c_uint,
) -> Return {
    with_device(device, |d| {
        if !mig_enabled(d) {
            return put(count, 0);
        }
        let most = d.mig_profiles.iter().map(|p| p.instance_count).max();
        put(count, most.unwrap_or(0))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: DeviceHandle,
    index: c_uint,
    mig_device: *mut DeviceHandle,
) -> Return {
    let card = device_index(device);
    with_device(device, |d| match mig_devices(d).get(index as usize) {
        Some(&(gi, ci)) => put(mig_device, ci_handle(MIG_TAG, card, gi, ci).cast()),
        None => abi::ERROR_NOT_FOUND,
    })
}

fn with_mig(handle: DeviceHandle, f: impl FnOnce(&Device, u32, u32) -> Return) -> Return {
    let Some((index, gi, ci)) = split_ci(handle.addr(), MIG_TAG) else {
        return abi::ERROR_INVALID_ARGUMENT;
    };
    with_card(index, |d| {
        if mig_devices(d).contains(&(gi, ci)) {
            f(d, gi, ci)
        } else {
            abi::ERROR_NOT_FOUND
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGpuInstanceId(device: DeviceHandle, id: *mut c_uint) -> Return {
    with_mig(device, |_, gi, _| put(id, gi))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetComputeInstanceId(device: DeviceHandle, id: *mut c_uint) -> Return {
    with_mig(device, |_, _, ci| put(id, ci))
}

/// Whether `handle` is a MIG device handle of this stand-in.
pub fn is_mig_handle(handle: DeviceHandle) -> bool {
    handle.addr() & TAG_MASK == MIG_TAG
}

/// `nvmlDeviceGetUUID` on a MIG device handle.
pub fn mig_device_uuid(handle: DeviceHandle, uuid: *mut c_char, length: c_uint) -> Return {
    with_mig(handle, |d, gi, ci| {
        put_str(uuid, length, &mig_uuid(&d.uuid, gi, ci))
    })
}

/// A MIG device's memory (MiB): its GPU instance profile's size, and the fixture's
/// `migMemoryUsedMib` as used (absent answers `abi::ERROR_NOT_SUPPORTED`).
pub fn mig_device_memory(handle: DeviceHandle) -> Result<(u64, u64), Return> {
    let mut out = Err(abi::ERROR_NOT_FOUND);
    let status = with_mig(handle, |d, gi, _| {
        let profile = load()
            .gpu_instances
            .iter()
            .find(|g| g.device == d.uuid && g.id == gi)
            .and_then(|g| d.mig_profiles.iter().find(|p| p.id == g.profile_id))
            .map(|p| p.memory_size_mb);
        out = match (profile, d.mig_memory_used_mib) {
            (Some(total), Some(used)) => Ok((total, used.min(total))),
            (None, _) => Err(abi::ERROR_NOT_FOUND),
            (_, None) => Err(abi::ERROR_NOT_SUPPORTED),
        };
        abi::SUCCESS
    });
    if status != abi::SUCCESS {
        return Err(status);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip() {
        let g = gi_handle(3, 9);
        assert_eq!(split_gi(g), Some((3, 9)));
        let c = ci_handle(CI_TAG, 3, 9, 2);
        assert_eq!(split_ci(c.addr(), CI_TAG), Some((3, 9, 2)));
        assert_eq!(split_ci(c.addr(), MIG_TAG), None);
        assert_eq!(split_gi(c), None);
        // A plain device handle is none of them.
        assert_eq!(split_gi(std::ptr::without_provenance_mut(4)), None);
    }

    #[test]
    fn mig_uuids_are_derived_and_distinct() {
        let card = "GPU-1f0e2d3c-4b5a-4697-8877-a6b5c4d3e2f1";
        assert_eq!(
            mig_uuid(card, 1, 0),
            "MIG-1f0e2d3c-0001-0000-8877-a6b5c4d3e2f1"
        );
        assert_ne!(mig_uuid(card, 1, 0), mig_uuid(card, 2, 0));
        assert!(overlaps(0, 4, 3, 1));
        assert!(!overlaps(0, 4, 4, 4));
    }
}
