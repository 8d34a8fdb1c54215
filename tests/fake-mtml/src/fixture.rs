//! The JSON fixture the stand-in serves: the driver version and the devices in MTML index
//! order, in MTML's own units (bytes, °C, percent, mW) so that fixtures read like
//! `mthreads-gmi`.
//!
//! A device field that is absent makes the matching MTML call answer
//! `MTML_ERROR_NOT_SUPPORTED`, as the real library does for a query the product lacks.

pub use gpustack_fake_abi::LoadError;
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

/// The fixture named by `GPUSTACK_FAKE_MTML_FIXTURE`.
pub fn load() -> Result<Fixture, LoadError> {
    gpustack_fake_abi::load("GPUSTACK_FAKE_MTML_FIXTURE")
}
