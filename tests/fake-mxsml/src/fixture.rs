//! The JSON fixture the stand-in serves: the MACA version and the devices in MXSML id order,
//! in MXSML's own units (KB, 0.01 °C, mW, percent) so that fixtures read like `mx-smi`.
//!
//! A device field that is absent makes the matching MXSML call answer
//! `MXSML_OperationNotSupport`, as the real library does for a query the product lacks.

pub use gpustack_fake_abi::LoadError;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fixture {
    /// `mxSmlGetMacaVersion`, e.g. `2.32.0.6`.
    #[serde(default)]
    pub maca_version: Option<String>,
    /// Device `i` has MXSML id `i`.
    #[serde(default)]
    pub devices: Vec<Device>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Device {
    /// `0000:0f:00.0`.
    pub bdf_id: String,
    pub uuid: String,
    /// `mxSmlDeviceBrand_t`: 1 N, 2 C, 3 G.
    #[serde(default)]
    pub brand: u32,
    /// `mxSmlDeviceVirtualizationMode_t`: 0 none, 1 PF, 2 VF.
    #[serde(default)]
    pub mode: u32,
    pub device_name: String,
    /// `mxSmlGetDeviceVersion` with `MXSML_Version_Driver`.
    #[serde(default)]
    pub driver_version: Option<String>,
    /// `mxSmlGetMemoryInfo` `vramTotal` / `vramUse`, KB.
    #[serde(default)]
    pub vram: Option<Vram>,
    /// `mxSmlGetDeviceIpUsage` with `MXSML_Usage_Xcore`, percent.
    #[serde(default)]
    pub xcore_usage: Option<i32>,
    /// `mxSmlGetTemperatureInfo` with `MXSML_Temperature_Hotspot`, 0.01 °C.
    #[serde(default)]
    pub hotspot_centidegrees: Option<i32>,
    /// `mxSmlGetBoardPowerInfo`: each board input's power, mW.
    #[serde(default)]
    pub board_power_mw: Option<Vec<u32>>,
    /// `mxSmlGetTotalEccErrors` (`sramUE`, `dramUE`).
    #[serde(default)]
    pub ecc: Option<Ecc>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Vram {
    pub total_kb: i64,
    pub used_kb: i64,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ecc {
    #[serde(default)]
    pub sram_ue: u32,
    #[serde(default)]
    pub dram_ue: u32,
}

/// The fixture named by `GPUSTACK_FAKE_MXSML_FIXTURE`.
pub fn load() -> Result<Fixture, LoadError> {
    gpustack_fake_abi::load("GPUSTACK_FAKE_MXSML_FIXTURE")
}
