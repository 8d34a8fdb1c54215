//! The compute processes on NVIDIA cards (`nvmlDeviceGetComputeRunningProcesses_v3`: host PID
//! and the card memory each holds), for the snapshot's per-slice view.

use nvml_wrapper::{Nvml, enums::device::UsedGpuMemory, error::NvmlError};

use crate::serve::slices::{CardRows, ProcessRow, Reason};

const MIB: u64 = 1024 * 1024;

fn reason(e: &NvmlError) -> Reason {
    match e {
        NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_) => Reason::Unsupported,
        NvmlError::NoPermission => Reason::Permission,
        _ => Reason::TransientDriverError,
    }
}

/// Each of `cards` (by UUID) with its processes, or why they could not be read.
pub fn list(nvml: &Nvml, cards: &[String]) -> Vec<CardRows> {
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
