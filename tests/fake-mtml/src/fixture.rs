//! The JSON fixture the stand-in serves: the driver version and the devices in MTML index
//! order, in MTML's own units (bytes, °C, percent, mW) so that fixtures read like
//! `mthreads-gmi`.
//!
//! A device field that is absent makes the matching MTML call answer
//! `MTML_ERROR_NOT_SUPPORTED`, as the real library does for a query the product lacks.

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fixture {
    /// `mtmlSystemGetDriverVersion`.
    #[serde(default)]
    pub driver_version: Option<String>,
    /// Device `i` has MTML index `i`.
    #[serde(default)]
    pub devices: Vec<Device>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Device {
    pub uuid: String,
    /// `mtmlDeviceGetName`, e.g. `MTT S4000`.
    pub name: String,
    /// `mtmlDeviceGetPciInfo` `sbdf`, e.g. `00000000:3b:00.0`.
    #[serde(default)]
    pub sbdf: Option<String>,
    /// `mtmlMemoryGetTotal`, bytes.
    #[serde(default)]
    pub memory_total_bytes: Option<u64>,
    /// `mtmlMemoryGetUsed`, bytes.
    #[serde(default)]
    pub memory_used_bytes: Option<u64>,
    /// `mtmlDeviceCountGpuCores`.
    #[serde(default)]
    pub gpu_cores: Option<u32>,
    /// `mtmlGpuGetUtilization`, percent.
    #[serde(default)]
    pub gpu_utilization: Option<u32>,
    /// `mtmlGpuGetTemperature`, °C.
    #[serde(default)]
    pub temperature: Option<u32>,
    /// `mtmlDeviceGetPowerUsage`, mW.
    #[serde(default)]
    pub power_mw: Option<u32>,
    /// `mtmlMemoryGetEccErrorCounter` (uncorrected, volatile, DRAM).
    #[serde(default)]
    pub uncorrected_ecc_errors: Option<u64>,
}

/// Why a fixture could not be served.
#[derive(Debug)]
pub enum LoadError {
    /// The variable is unset, or the file it names cannot be read: the "driver" is not there.
    Missing,
    Invalid,
}

/// The fixture named by `GPUSTACK_FAKE_MTML_FIXTURE`.
pub fn load() -> Result<Fixture, LoadError> {
    let path = std::env::var_os("GPUSTACK_FAKE_MTML_FIXTURE").ok_or(LoadError::Missing)?;
    let text = std::fs::read_to_string(path).map_err(|_| LoadError::Missing)?;
    serde_json::from_str(&text).map_err(|_| LoadError::Invalid)
}
