//! The JSON fixture the stand-in serves: the driver version and the cards, each with its NPUs,
//! in DCMI's own units (MB, °C, percent, 0.1 W) so that fixtures read like `npu-smi info`.
//!
//! A device field that is absent makes the matching DCMI call answer
//! `DCMI_ERR_CODE_NOT_SUPPORT`, as the real library does for a query the product lacks (no HBM
//! on a 310P, no power reading through some boards).

use std::net::IpAddr;

pub use gpustack_fake_abi::LoadError;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fixture {
    /// `dcmi_get_driver_version`, e.g. `24.1.rc2`.
    #[serde(default)]
    pub driver_version: Option<String>,
    /// In `dcmi_get_card_list` order.
    #[serde(default)]
    pub cards: Vec<Card>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Card {
    pub card_id: i32,
    /// Device `i` of the card has device id `i`.
    #[serde(default)]
    pub devices: Vec<Device>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Device {
    pub logic_id: i32,
    pub phy_id: u32,
    pub chip_type: String,
    pub chip_name: String,
    #[serde(default)]
    pub chip_ver: String,
    #[serde(default)]
    pub aicore_count: u32,
    /// The five `soc_die` words of the VDIE die id.
    pub die_id: [u32; 5],
    /// `dcmi_get_device_hbm_info`; absent on chips without HBM.
    #[serde(default)]
    pub hbm: Option<Memory>,
    /// `dcmi_get_device_memory_info_v3` (DDR).
    #[serde(default)]
    pub ddr: Option<Memory>,
    /// `dcmi_get_device_health`: 0 normal, 1-3 alarms.
    #[serde(default)]
    pub health: Option<u32>,
    /// `dcmi_get_device_pcie_info_v2`.
    #[serde(default)]
    pub pcie: Option<Pcie>,
    /// `dcmi_get_device_utilization_rate` with `DCMI_UTILIZATION_RATE_AICORE`.
    #[serde(default)]
    pub aicore_utilization: Option<u32>,
    /// °C.
    #[serde(default)]
    pub temperature: Option<i32>,
    /// Units of 0.1 W, as `dcmi_get_device_power_info` reports.
    #[serde(default)]
    pub power_deciwatts: Option<i32>,
    /// The RoCE port (`dcmi_get_device_ip`, `dcmi_get_device_gateway`); absent on cards
    /// without one.
    #[serde(default)]
    pub roce: Option<Roce>,
    /// The container-share flag (`dcmi_get_device_share_enable`); absent on a driver without
    /// the call. `dcmi_set_device_share_enable` changes it for the life of the process.
    #[serde(default)]
    pub share_enabled: Option<bool>,
    /// `dcmi_set_device_share_enable` answers `DCMI_ERR_CODE_OPER_NOT_PERMITTED` (as for a
    /// caller that is not root on the host) and changes nothing.
    #[serde(default)]
    pub share_locked: bool,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Roce {
    pub ip: IpAddr,
    pub mask: IpAddr,
    #[serde(default)]
    pub gateway: Option<IpAddr>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Memory {
    pub total_mb: u64,
    pub used_mb: u64,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pcie {
    pub domain: i32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
    #[serde(default)]
    pub vendor_id: u32,
    #[serde(default)]
    pub device_id: u32,
}

/// The file named by `GPUSTACK_FAKE_DCMI_SET_LOG`, where every `dcmi_set_*` call is appended
/// as a line (`dcmi_set_device_share_enable <card> <device> <flag> -> <return code>`), so a test
/// can see what was changed on the "driver" and in which order.
pub fn set_log() -> Option<std::path::PathBuf> {
    std::env::var_os("GPUSTACK_FAKE_DCMI_SET_LOG").map(Into::into)
}

/// The fixture named by `GPUSTACK_FAKE_DCMI_FIXTURE`.
pub fn load() -> Result<Fixture, LoadError> {
    gpustack_fake_abi::load("GPUSTACK_FAKE_DCMI_FIXTURE")
}
