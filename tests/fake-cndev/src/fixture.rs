//! The JSON fixture the stand-in serves: the driver version and the cards, in CNDev order, in
//! CNDev's own units (MB, °C, percent, W) so that fixtures read like `cnmon info`.
//!
//! A card field that is absent makes the matching CNDev call answer
//! `CNDEV_ERROR_NOT_SUPPORTED`, as the real library does for a query the product lacks.

use std::ffi::CString;

pub use gpustack_fake_abi::LoadError;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fixture {
    /// `cndevGetVersionInfo`'s driver version, the same for every card.
    #[serde(default)]
    pub driver_version: Option<Version>,
    /// In `cndevGetDeviceCount` / `cndevGetDeviceHandleByIndex` order.
    #[serde(default)]
    pub devices: Vec<Device>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub build: u32,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Device {
    /// `cndevGetUUID`: 36 characters, no `MLU-` prefix (CNDev stores the bare UUID).
    pub uuid: String,
    /// `cndevGetCardNameStringByDevId`; absent answers `Unknown`, as CNDev does.
    #[serde(default)]
    pub name: Option<CString>,
    /// `cndevGetCoreCount`.
    #[serde(default)]
    pub core_count: Option<i32>,
    /// `cndevGetMemoryUsage`'s physical memory.
    #[serde(default)]
    pub memory: Option<Memory>,
    /// `cndevGetCardHealthState`: 1 healthy, 0 sick.
    #[serde(default)]
    pub health: Option<i32>,
    /// `cndevGetECCInfo`'s `uncorrectedError`.
    #[serde(default)]
    pub ecc_uncorrected: Option<u64>,
    /// `cndevGetPCIeInfo`.
    #[serde(default)]
    pub pcie: Option<Pcie>,
    /// `cndevGetDeviceUtilizationInfo`'s `averageCoreUtilization`, percent.
    #[serde(default)]
    pub utilization: Option<i32>,
    /// `cndevGetTemperatureInfo`.
    #[serde(default)]
    pub temperature: Option<Temperature>,
    /// `cndevGetPowerInfo`'s `usage`, W.
    #[serde(default)]
    pub power_w: Option<i32>,
    /// `cndevGetSMLUMode`: whether the card is in sMLU mode; absent on a library without the
    /// call. `cndevSetSMLUMode` changes it for the life of the process.
    #[serde(default)]
    pub smlu_mode: Option<bool>,
    /// `cndevSetSMLUMode` answers `CNDEV_ERROR_NO_PERMISSION` and changes nothing.
    #[serde(default)]
    pub smlu_locked: bool,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Memory {
    pub total_mb: i64,
    pub used_mb: i64,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Temperature {
    pub board: i32,
    pub chip: i32,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pcie {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
    #[serde(default)]
    pub vendor_id: u16,
    #[serde(default)]
    pub device_id: u32,
}

/// The file named by `GPUSTACK_FAKE_CNDEV_SET_LOG`, where every `cndevSet*` call is appended as
/// a line (`cndevSetSMLUMode <card index> <mode> -> <return code>`), so a test can see what was
/// changed on the "driver" and in which order.
pub fn set_log() -> Option<std::path::PathBuf> {
    std::env::var_os("GPUSTACK_FAKE_CNDEV_SET_LOG").map(Into::into)
}

/// The fixture named by `GPUSTACK_FAKE_CNDEV_FIXTURE`.
pub fn load() -> Result<Fixture, LoadError> {
    gpustack_fake_abi::load("GPUSTACK_FAKE_CNDEV_FIXTURE")
}
