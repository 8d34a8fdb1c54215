//! The JSON fixture the stand-in serves: one system and its PPUs, in HGML's own units where it
//! has one (mW, °C, percent, MB for profile memory) and MiB for card memory, so that fixtures
//! read like `ppu-smi`.
//!
//! A device field that is absent makes the matching HGML call answer
//! `HGML_ERROR_NOT_SUPPORTED`, as the real library does for a query the product lacks.

use serde::Deserialize;

/// The variable naming the fixture file.
pub const FIXTURE_ENV: &str = "GPUSTACK_FAKE_HGML_FIXTURE";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fixture {
    /// `hgmlSystemGetDriverVersion`, e.g. `1.3.2-d7f5a2`.
    #[serde(default)]
    pub driver_version: Option<String>,
    /// `hgmlSystemGetHggcDriverVersion_v2`, e.g. `13000` for HGGC 13.0.
    #[serde(default)]
    pub hggc_driver_version: Option<i32>,
    /// `hgmlInit_v2` answers this status instead of initialising (a driver that is installed
    /// but not loaded answers 9, `HGML_ERROR_DRIVER_NOT_LOADED`).
    #[serde(default)]
    pub init_status: Option<u32>,
    /// In HGML enumeration order.
    #[serde(default)]
    pub devices: Vec<Device>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Device {
    pub uuid: String,
    pub name: String,
    /// HGML's form: `00000000:1B:00.0`.
    pub pci_bus_id: String,
    /// `(device << 16) | vendor`.
    #[serde(default)]
    pub pci_device_id: u32,
    pub memory_total_mib: u64,
    #[serde(default)]
    pub memory_used_mib: Option<u64>,
    #[serde(default)]
    pub minor: Option<u32>,
    #[serde(default)]
    pub cores: Option<u32>,
    #[serde(default)]
    pub compute_capability: Option<ComputeCapability>,
    /// Uncorrected volatile DRAM ECC errors (`hgmlDeviceGetMemoryErrorCounter`).
    #[serde(default)]
    pub ecc_uncorrected_volatile: Option<u64>,
    #[serde(default)]
    pub mig_mode: Option<MigMode>,
    /// GPU-instance profiles by enumeration index; an index not listed answers
    /// `HGML_ERROR_NOT_SUPPORTED`. Served only while `migMode.current` is 1.
    #[serde(default)]
    pub mig_profiles: Vec<MigProfile>,
    #[serde(default)]
    pub utilization: Option<Utilization>,
    /// GPU sensor, °C.
    #[serde(default)]
    pub temperature: Option<u32>,
    #[serde(default)]
    pub power_usage_mw: Option<u32>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct ComputeCapability {
    pub major: i32,
    pub minor: i32,
}

/// `HGML_DEVICE_MIG_DISABLE` 0 / `HGML_DEVICE_MIG_ENABLE` 1.
#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct MigMode {
    pub current: u32,
    pub pending: u32,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigProfile {
    /// The enumeration index `hgmlDeviceGetGpuInstanceProfileInfoV` is asked for.
    pub index: u32,
    /// The creation id the record carries (differs from the index on this hardware).
    pub id: u32,
    pub name: String,
    pub slice_count: u32,
    pub instance_count: u32,
    pub memory_size_mb: u64,
    pub placements: Vec<Slot>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct Slot {
    pub start: u32,
    pub size: u32,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct Utilization {
    pub gpu: u32,
    pub memory: u32,
}

/// Why a fixture could not be served.
#[derive(Debug)]
pub enum LoadError {
    /// The variable is unset, or the file it names cannot be read: the "driver" is not there.
    Missing,
    Invalid,
}

/// The fixture named by `GPUSTACK_FAKE_HGML_FIXTURE`.
pub fn load() -> Result<Fixture, LoadError> {
    let path = std::env::var_os(FIXTURE_ENV).ok_or(LoadError::Missing)?;
    let text = std::fs::read_to_string(path).map_err(|_| LoadError::Missing)?;
    serde_json::from_str(&text).map_err(|_| LoadError::Invalid)
}
