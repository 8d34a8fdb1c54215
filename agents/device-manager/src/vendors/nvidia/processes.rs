//! The compute processes on NVIDIA cards (`nvmlDeviceGetComputeRunningProcesses_v3`: host PID
//! and the card memory each holds), and the memory of the MIG devices containers hold, for the
//! snapshot's per-slice view.

use nvml_wrapper::{Nvml, enums::device::UsedGpuMemory, error::NvmlError};

use crate::card_usage::{CardRows, PartitionHold, PartitionMemory, ProcessRow, Reason};

const MIB: u64 = 1024 * 1024;

fn reason(e: &NvmlError) -> Reason {
    match e {
        NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_) => Reason::Unsupported,
        NvmlError::NoPermission => Reason::Permission,
        _ => Reason::TransientDriverError,
    }
}

/// The cards NVML lists, by UUID: enumerated once per monitor pass and shared by its reads.
pub type Cards<'nvml> = std::collections::BTreeMap<String, nvml_wrapper::Device<'nvml>>;

/// The cards NVML lists (see [`Cards`]).
pub fn cards_by_uuid(nvml: &Nvml) -> Cards<'_> {
    let mut by_uuid = std::collections::BTreeMap::new();
    if let Ok(count) = nvml.device_count() {
        for index in 0..count {
            if let Ok(device) = nvml.device_by_index(index)
                && let Ok(uuid) = device.uuid()
            {
                by_uuid.insert(uuid, device);
            }
        }
    }
    by_uuid
}

/// The memory of each held partition's MIG device, found among its card's MIG devices by
/// UUID; a partition the driver no longer lists answers `TransientDriverError`.
pub fn partition_memory(
    by_uuid: &Cards<'_>,
    holds: &[PartitionHold],
) -> Vec<Result<PartitionMemory, Reason>> {
    holds
        .iter()
        .map(|h| {
            let card = by_uuid
                .get(&h.device_id)
                .ok_or(Reason::TransientDriverError)?;
            let count = card.mig_device_count().map_err(|e| reason(&e))?;
            let mig = (0..count)
                .filter_map(|i| card.mig_device_by_index(i).ok())
                .find(|m| m.uuid().is_ok_and(|u| u == h.id))
                .ok_or(Reason::TransientDriverError)?;
            let info = mig.memory_info().map_err(|e| reason(&e))?;
            Ok(PartitionMemory {
                total_mib: info.total / MIB,
                used_mib: info.used / MIB,
            })
        })
        .collect()
}

/// Each of `cards` (by UUID) with its processes, or why they could not be read.
pub fn list(by_uuid: &Cards<'_>, cards: &[String]) -> Vec<CardRows> {
    cards
        .iter()
        .map(|card| CardRows {
            accelerator: card.clone(),
            rows: match by_uuid.get(card) {
                None => Err(Reason::TransientDriverError),
                Some(device) => device
                    .running_compute_processes()
                    .map(|list| {
                        list.into_iter()
                            .map(|p| ProcessRow {
                                pid: p.pid,
                                memory_used_mib: match p.used_gpu_memory {
                                    UsedGpuMemory::Used(bytes) => Some(bytes / MIB),
                                    UsedGpuMemory::Unavailable => None,
                                },
                            })
                            .collect()
                    })
                    .map_err(|e| reason(&e)),
            },
        })
        .collect()
}
