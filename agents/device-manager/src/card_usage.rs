//! What a vendor library answers about the work on a carved card: the processes it lists and
//! the memory of the partitions containers hold, with the reason when it cannot say. A leaf that
//! both the monitor's per-slice view ([`crate::serve::slices`]) and the vendor readers
//! (`vendors::nvidia::processes`) name, so that neither imports the other.

use serde::Serialize;

/// A partition held by a live container, from the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionHold {
    pub pod_uid: String,
    pub container: String,
    pub device_id: String,
    pub id: String,
    pub profile: String,
    /// The units charged for it, of
    /// [`UNITS_PER_ACCELERATOR`](gpustack_api::devices::UNITS_PER_ACCELERATOR).
    pub units: u64,
}

/// A partition's memory as the library reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionMemory {
    pub total_mib: u64,
    pub used_mib: u64,
}

/// Why a figure is missing (devices.md §6).
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    Unsupported,
    Permission,
    TransientDriverError,
    InvalidData,
}

/// One process the library listed on a card.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessRow {
    pub pid: u32,
    /// `None`: the library could not say.
    pub memory_used_mib: Option<u64>,
}

/// A carved card: its id and what the library answered for it.
pub struct CardRows {
    pub accelerator: String,
    pub rows: Result<Vec<ProcessRow>, Reason>,
}
