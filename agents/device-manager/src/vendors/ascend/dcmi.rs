//! The only `unsafe` of the Ascend detector: loading Huawei's DCMI (`libdcmi.so`) by path,
//! resolving its symbols and calling them. Everything above this module sees plain Rust types
//! and `Result`s; nothing here interprets what DCMI answers.
//!
//! Signatures and struct layouts follow Huawei's `dcmi_interface_api.h` and the DCMI API
//! reference (Ascend 910/93 DCMI API, one page per function): `dcmi_chip_info`,
//! `dcmi_hbm_info`, `dcmi_get_memory_info_stru`, `dcmi_die_id` (`DIE_ID_COUNT` 5) and
//! `dcmi_pcie_info_all`. Every call returns `int`, 0 on success and a negative `DCMI_ERR_CODE_*`
//! otherwise. C enums (`enum dcmi_die_type`) are `int`-sized on the Linux ABIs DCMI ships for.
//!
//! Only `dcmi_init`, a card list and `dcmi_get_device_num_in_card` are required; a symbol an
//! older driver lacks makes just that call answer [`CallError::Missing`].

#![allow(unsafe_code)]

use std::{
    ffi::{OsStr, c_char, c_int, c_uchar, c_uint, c_ulong, c_ulonglong},
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

use libloading::Library;

use crate::vendors::ffi::{CallError, OpenError, c_text, check, loader, present};

/// `MAX_CHIP_NAME_LEN`.
const MAX_CHIP_NAME_LEN: usize = 32;
/// `DIE_ID_COUNT`: words in a die id.
pub const DIE_ID_COUNT: usize = 5;
/// `MAX_CARD_NUM`: the longest card list DCMI returns.
const MAX_CARD_NUM: usize = 64;
/// Longest driver version string we accept (`MAX_VER_LEN` is 255, plus the NUL).
const VERSION_BUF: usize = 256;

/// `enum dcmi_die_type`: `VDIE` is the die id the reference and Huawei's device plugin use.
pub const VDIE: c_int = 1;
/// `DCMI_UTILIZATION_RATE_AICORE`.
pub const UTILIZATION_AICORE: c_int = 2;
/// `enum dcmi_port_type` `DCMI_ROCE_PORT`, and the NPU's first (on 910B/910C only) RoCE port.
const ROCE_PORT: c_int = 1;
const ROCE_PORT_ID: c_int = 0;
/// `enum dcmi_ip_addr_type` `DCMI_IPADDR_TYPE_V6`.
const IPADDR_TYPE_V6: c_int = 1;

/// `struct dcmi_chip_info`.
#[repr(C)]
#[allow(dead_code)] // Fields DCMI writes that we do not read still shape the layout.
struct RawChipInfo {
    chip_type: [c_uchar; MAX_CHIP_NAME_LEN],
    chip_name: [c_uchar; MAX_CHIP_NAME_LEN],
    chip_ver: [c_uchar; MAX_CHIP_NAME_LEN],
    aicore_cnt: c_uint,
}

/// `struct dcmi_hbm_info`; sizes in MB.
#[repr(C)]
#[allow(dead_code)] // Fields DCMI writes that we do not read still shape the layout.
struct RawHbmInfo {
    memory_size: c_ulonglong,
    freq: c_uint,
    memory_usage: c_ulonglong,
    temp: c_int,
    bandwith_util_rate: c_uint,
}

/// `struct dcmi_get_memory_info_stru` (`dcmi_get_device_memory_info_v3`); sizes in MB. The
/// header's comment says 96 bytes, which holds only where `long` is 4 bytes; on LP64 it is 112.
#[repr(C)]
#[allow(dead_code)] // Fields DCMI writes that we do not read still shape the layout.
struct RawMemoryInfo {
    memory_size: c_ulonglong,
    memory_available: c_ulonglong,
    freq: c_uint,
    hugepagesize: c_ulong,
    hugepages_total: c_ulong,
    hugepages_free: c_ulong,
    utiliza: c_uint,
    reserve: [c_uchar; 60],
}

/// `struct dcmi_die_id`.
#[repr(C)]
#[allow(dead_code)] // Fields DCMI writes that we do not read still shape the layout.
struct RawDieId {
    soc_die: [c_uint; DIE_ID_COUNT],
}

/// `struct dcmi_pcie_info_all` (64 bytes).
#[repr(C)]
#[allow(dead_code)] // Fields DCMI writes that we do not read still shape the layout.
struct RawPcieInfo {
    venderid: c_uint,
    subvenderid: c_uint,
    deviceid: c_uint,
    subdeviceid: c_uint,
    domain: c_int,
    bdf_busid: c_uint,
    bdf_deviceid: c_uint,
    bdf_funcid: c_uint,
    reserve: [c_uchar; 32],
}

/// `struct dcmi_ip_addr`: a union of `ip6[16]` / `ip4[4]` bytes, then
/// `enum dcmi_ip_addr_type` (0 IPv4, 1 IPv6, 2 any).
#[repr(C)]
struct RawIpAddr {
    u_addr: [c_uchar; 16],
    ip_type: c_int,
}

impl RawIpAddr {
    fn zeroed() -> Self {
        Self {
            u_addr: [0; 16],
            ip_type: 0,
        }
    }

    fn to_ip(&self) -> IpAddr {
        ip_from_raw(self.u_addr, self.ip_type)
    }
}

/// An address as `struct dcmi_ip_addr` carries it: IPv6 when the type says so, else the IPv4
/// address in the union's first four bytes.
fn ip_from_raw(bytes: [u8; 16], ip_type: c_int) -> IpAddr {
    if ip_type == IPADDR_TYPE_V6 {
        IpAddr::V6(Ipv6Addr::from(bytes))
    } else {
        IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]))
    }
}

type InitFn = unsafe extern "C" fn() -> c_int;
type CardListFn = unsafe extern "C" fn(*mut c_int, *mut c_int, c_int) -> c_int;
type CardIntFn = unsafe extern "C" fn(c_int, *mut c_int) -> c_int;
type LogicIdFn = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;
type PhyIdFn = unsafe extern "C" fn(c_uint, *mut c_uint) -> c_int;
type ChipInfoFn = unsafe extern "C" fn(c_int, c_int, *mut RawChipInfo) -> c_int;
type HbmInfoFn = unsafe extern "C" fn(c_int, c_int, *mut RawHbmInfo) -> c_int;
type MemoryInfoFn = unsafe extern "C" fn(c_int, c_int, *mut RawMemoryInfo) -> c_int;
type DieFn = unsafe extern "C" fn(c_int, c_int, c_int, *mut RawDieId) -> c_int;
type DeviceUintFn = unsafe extern "C" fn(c_int, c_int, *mut c_uint) -> c_int;
type DeviceIntFn = unsafe extern "C" fn(c_int, c_int, *mut c_int) -> c_int;
type PcieInfoFn = unsafe extern "C" fn(c_int, c_int, *mut RawPcieInfo) -> c_int;
type UtilizationFn = unsafe extern "C" fn(c_int, c_int, c_int, *mut c_uint) -> c_int;
type VersionFn = unsafe extern "C" fn(*mut c_char, c_uint) -> c_int;
type DeviceIpFn =
    unsafe extern "C" fn(c_int, c_int, c_int, c_int, *mut RawIpAddr, *mut RawIpAddr) -> c_int;
type GatewayFn = unsafe extern "C" fn(c_int, c_int, c_int, c_int, *mut RawIpAddr) -> c_int;
type ShareGetFn = unsafe extern "C" fn(c_int, c_int, *mut c_int) -> c_int;
type ShareSetFn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;

/// The resolved entry points. Plain function pointers: valid while [`DcmiLibrary::_library`] is loaded,
/// which the struct guarantees by owning both and never handing a pointer out.
struct Entries {
    init: InitFn,
    card_list: (&'static str, CardListFn),
    device_num_in_card: CardIntFn,
    logic_id: Option<LogicIdFn>,
    phy_id_from_logic_id: Option<PhyIdFn>,
    chip_info: Option<ChipInfoFn>,
    hbm_info: Option<HbmInfoFn>,
    memory_info_v3: Option<MemoryInfoFn>,
    die_v2: Option<DieFn>,
    health: Option<DeviceUintFn>,
    pcie_info_v2: Option<PcieInfoFn>,
    utilization_rate: Option<UtilizationFn>,
    temperature: Option<DeviceIntFn>,
    power_info: Option<DeviceIntFn>,
    driver_version: Option<VersionFn>,
    device_ip: Option<DeviceIpFn>,
    device_gateway: Option<GatewayFn>,
    share_enable_get: Option<ShareGetFn>,
    share_enable_set: Option<ShareSetFn>,
}

/// A loaded `libdcmi.so`.
pub struct DcmiLibrary {
    entries: Entries,
    // Dropped after `entries` (declaration order); the pointers there never outlive it.
    _library: Library,
}

/// What `dcmi_get_device_chip_info` reports, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChipInfo {
    pub chip_type: String,
    pub chip_name: String,
    pub chip_ver: String,
    pub aicore_count: u32,
}

/// Total and used memory in MB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryFigures {
    pub total_mb: u64,
    pub used_mb: u64,
}

/// `dcmi_pcie_info_all`'s address and ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcieAddress {
    pub domain: i32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
}

impl DcmiLibrary {
    /// Loads the library at `path` (a file path, or a bare name for the loader's own search)
    /// and resolves its symbols. Does not call `dcmi_init`.
    pub fn open(path: &OsStr) -> Result<Self, OpenError> {
        let library = loader::load(path)?;

        macro_rules! optional {
            ($name:literal, $ty:ty) => {{
                // SAFETY: `$ty` is the function's prototype in dcmi_interface_api.h; the copied
                // pointer is stored next to `library`, which outlives it (see `DcmiLibrary`).
                unsafe { loader::symbol::<$ty>(&library, &[$name]) }
            }};
        }

        let init = optional!("dcmi_init", InitFn)
            .ok_or_else(|| OpenError::MissingSymbol("dcmi_init".into()))?;
        // `dcmi_get_card_list` is current; `dcmi_get_card_num_list` is its deprecated twin with
        // the same signature, still the only one in older drivers.
        let card_list = optional!("dcmi_get_card_list", CardListFn)
            .map(|f| ("dcmi_get_card_list", f))
            .or_else(|| {
                optional!("dcmi_get_card_num_list", CardListFn)
                    .map(|f| ("dcmi_get_card_num_list", f))
            })
            .ok_or_else(|| OpenError::MissingSymbol("dcmi_get_card_list".into()))?;
        let device_num_in_card = optional!("dcmi_get_device_num_in_card", CardIntFn)
            .ok_or_else(|| OpenError::MissingSymbol("dcmi_get_device_num_in_card".into()))?;
        let entries = Entries {
            init,
            card_list,
            device_num_in_card,
            logic_id: optional!("dcmi_get_device_logic_id", LogicIdFn),
            phy_id_from_logic_id: optional!("dcmi_get_device_phyid_from_logicid", PhyIdFn),
            chip_info: optional!("dcmi_get_device_chip_info", ChipInfoFn),
            hbm_info: optional!("dcmi_get_device_hbm_info", HbmInfoFn),
            memory_info_v3: optional!("dcmi_get_device_memory_info_v3", MemoryInfoFn),
            die_v2: optional!("dcmi_get_device_die_v2", DieFn),
            health: optional!("dcmi_get_device_health", DeviceUintFn),
            pcie_info_v2: optional!("dcmi_get_device_pcie_info_v2", PcieInfoFn),
            utilization_rate: optional!("dcmi_get_device_utilization_rate", UtilizationFn),
            temperature: optional!("dcmi_get_device_temperature", DeviceIntFn),
            power_info: optional!("dcmi_get_device_power_info", DeviceIntFn),
            driver_version: optional!("dcmi_get_driver_version", VersionFn),
            device_ip: optional!("dcmi_get_device_ip", DeviceIpFn),
            device_gateway: optional!("dcmi_get_device_gateway", GatewayFn),
            share_enable_get: optional!("dcmi_get_device_share_enable", ShareGetFn),
            share_enable_set: optional!("dcmi_set_device_share_enable", ShareSetFn),
        };
        Ok(Self {
            entries,
            _library: library,
        })
    }

    /// `dcmi_init`.
    pub fn init(&self) -> Result<(), CallError> {
        // SAFETY: no arguments; the pointer is valid while `self` holds the library.
        check("dcmi_init", unsafe { (self.entries.init)() })
    }

    /// The card ids (`dcmi_get_card_list`, or `dcmi_get_card_num_list` on older drivers).
    pub fn card_list(&self) -> Result<Vec<i32>, CallError> {
        let (call, f) = self.entries.card_list;
        let mut count: c_int = 0;
        let mut list = [0 as c_int; MAX_CARD_NUM];
        // SAFETY: both out-pointers are valid; `list_len` tells DCMI the array's length.
        check(call, unsafe {
            f(&mut count, list.as_mut_ptr(), MAX_CARD_NUM as c_int)
        })?;
        let n = usize::try_from(count).unwrap_or(0).min(MAX_CARD_NUM);
        Ok(list[..n].to_vec())
    }

    /// `dcmi_get_device_num_in_card`: NPU chips on a card.
    pub fn device_num_in_card(&self, card: i32) -> Result<i32, CallError> {
        let mut n: c_int = 0;
        // SAFETY: valid out-pointer.
        check("dcmi_get_device_num_in_card", unsafe {
            (self.entries.device_num_in_card)(card, &mut n)
        })?;
        Ok(n)
    }

    /// `dcmi_get_device_logic_id`.
    pub fn logic_id(&self, card: i32, device: i32) -> Result<i32, CallError> {
        const CALL: &str = "dcmi_get_device_logic_id";
        let f = present(self.entries.logic_id, CALL)?;
        let mut id: c_int = 0;
        // SAFETY: valid out-pointer; note the out-parameter comes first in this prototype.
        check(CALL, unsafe { f(&mut id, card, device) })?;
        Ok(id)
    }

    /// `dcmi_get_device_phyid_from_logicid`.
    pub fn phy_id(&self, logic_id: u32) -> Result<u32, CallError> {
        const CALL: &str = "dcmi_get_device_phyid_from_logicid";
        let f = present(self.entries.phy_id_from_logic_id, CALL)?;
        let mut id: c_uint = 0;
        // SAFETY: valid out-pointer.
        check(CALL, unsafe { f(logic_id, &mut id) })?;
        Ok(id)
    }

    /// `dcmi_get_device_chip_info`.
    pub fn chip_info(&self, card: i32, device: i32) -> Result<ChipInfo, CallError> {
        const CALL: &str = "dcmi_get_device_chip_info";
        let f = present(self.entries.chip_info, CALL)?;
        let mut raw = RawChipInfo {
            chip_type: [0; MAX_CHIP_NAME_LEN],
            chip_name: [0; MAX_CHIP_NAME_LEN],
            chip_ver: [0; MAX_CHIP_NAME_LEN],
            aicore_cnt: 0,
        };
        // SAFETY: `raw` is a `struct dcmi_chip_info` DCMI fills in.
        check(CALL, unsafe { f(card, device, &mut raw) })?;
        Ok(ChipInfo {
            chip_type: c_text(&raw.chip_type),
            chip_name: c_text(&raw.chip_name),
            chip_ver: c_text(&raw.chip_ver),
            aicore_count: raw.aicore_cnt,
        })
    }

    /// `dcmi_get_device_hbm_info`: on-package memory, MB.
    pub fn hbm_info(&self, card: i32, device: i32) -> Result<MemoryFigures, CallError> {
        const CALL: &str = "dcmi_get_device_hbm_info";
        let f = present(self.entries.hbm_info, CALL)?;
        let mut raw = RawHbmInfo {
            memory_size: 0,
            freq: 0,
            memory_usage: 0,
            temp: 0,
            bandwith_util_rate: 0,
        };
        // SAFETY: `raw` is a `struct dcmi_hbm_info` DCMI fills in.
        check(CALL, unsafe { f(card, device, &mut raw) })?;
        Ok(MemoryFigures {
            total_mb: raw.memory_size,
            used_mb: raw.memory_usage,
        })
    }

    /// `dcmi_get_device_memory_info_v3`: DDR memory, MB; used = size - available.
    pub fn memory_info(&self, card: i32, device: i32) -> Result<MemoryFigures, CallError> {
        const CALL: &str = "dcmi_get_device_memory_info_v3";
        let f = present(self.entries.memory_info_v3, CALL)?;
        let mut raw = RawMemoryInfo {
            memory_size: 0,
            memory_available: 0,
            freq: 0,
            hugepagesize: 0,
            hugepages_total: 0,
            hugepages_free: 0,
            utiliza: 0,
            reserve: [0; 60],
        };
        // SAFETY: `raw` is a `struct dcmi_get_memory_info_stru` DCMI fills in.
        check(CALL, unsafe { f(card, device, &mut raw) })?;
        Ok(MemoryFigures {
            total_mb: raw.memory_size,
            used_mb: raw.memory_size.saturating_sub(raw.memory_available),
        })
    }

    /// `dcmi_get_device_die_v2` with `die_type`.
    pub fn die_id(
        &self,
        card: i32,
        device: i32,
        die_type: c_int,
    ) -> Result<[u32; DIE_ID_COUNT], CallError> {
        const CALL: &str = "dcmi_get_device_die_v2";
        let f = present(self.entries.die_v2, CALL)?;
        let mut raw = RawDieId {
            soc_die: [0; DIE_ID_COUNT],
        };
        // SAFETY: `raw` is a `struct dcmi_die_id` DCMI fills in.
        check(CALL, unsafe { f(card, device, die_type, &mut raw) })?;
        Ok(raw.soc_die)
    }

    /// `dcmi_get_device_health`: 0 normal, 1 minor, 2 major, 3 critical alarm,
    /// `0xFFFFFFFF` device absent.
    pub fn health(&self, card: i32, device: i32) -> Result<u32, CallError> {
        const CALL: &str = "dcmi_get_device_health";
        let f = present(self.entries.health, CALL)?;
        let mut health: c_uint = 0;
        // SAFETY: valid out-pointer.
        check(CALL, unsafe { f(card, device, &mut health) })?;
        Ok(health)
    }

    /// `dcmi_get_device_pcie_info_v2`.
    pub fn pcie_address(&self, card: i32, device: i32) -> Result<PcieAddress, CallError> {
        const CALL: &str = "dcmi_get_device_pcie_info_v2";
        let f = present(self.entries.pcie_info_v2, CALL)?;
        let mut raw = RawPcieInfo {
            venderid: 0,
            subvenderid: 0,
            deviceid: 0,
            subdeviceid: 0,
            domain: 0,
            bdf_busid: 0,
            bdf_deviceid: 0,
            bdf_funcid: 0,
            reserve: [0; 32],
        };
        // SAFETY: `raw` is a `struct dcmi_pcie_info_all` DCMI fills in.
        check(CALL, unsafe { f(card, device, &mut raw) })?;
        Ok(PcieAddress {
            domain: raw.domain,
            bus: raw.bdf_busid,
            device: raw.bdf_deviceid,
            function: raw.bdf_funcid,
        })
    }

    /// `dcmi_get_device_utilization_rate` of `kind` (`DCMI_UTILIZATION_RATE_*`), percent.
    pub fn utilization(&self, card: i32, device: i32, kind: c_int) -> Result<u32, CallError> {
        const CALL: &str = "dcmi_get_device_utilization_rate";
        let f = present(self.entries.utilization_rate, CALL)?;
        let mut rate: c_uint = 0;
        // SAFETY: valid out-pointer.
        check(CALL, unsafe { f(card, device, kind, &mut rate) })?;
        Ok(rate)
    }

    /// `dcmi_get_device_temperature`, °C.
    pub fn temperature(&self, card: i32, device: i32) -> Result<i32, CallError> {
        const CALL: &str = "dcmi_get_device_temperature";
        let f = present(self.entries.temperature, CALL)?;
        let mut t: c_int = 0;
        // SAFETY: valid out-pointer.
        check(CALL, unsafe { f(card, device, &mut t) })?;
        Ok(t)
    }

    /// `dcmi_get_device_power_info`, in units of 0.1 W.
    pub fn power_deciwatts(&self, card: i32, device: i32) -> Result<i32, CallError> {
        const CALL: &str = "dcmi_get_device_power_info";
        let f = present(self.entries.power_info, CALL)?;
        let mut p: c_int = 0;
        // SAFETY: valid out-pointer.
        check(CALL, unsafe { f(card, device, &mut p) })?;
        Ok(p)
    }

    /// `dcmi_get_driver_version`.
    pub fn driver_version(&self) -> Result<String, CallError> {
        const CALL: &str = "dcmi_get_driver_version";
        let f = present(self.entries.driver_version, CALL)?;
        let mut buf = [0 as c_char; VERSION_BUF];
        // SAFETY: `buf` has `len` writable bytes; DCMI writes a NUL-terminated string into it.
        check(CALL, unsafe { f(buf.as_mut_ptr(), VERSION_BUF as c_uint) })?;
        let bytes: Vec<u8> = buf.iter().map(|&c| c as u8).collect();
        Ok(c_text(&bytes))
    }
}

impl DcmiLibrary {
    /// `dcmi_get_device_ip` of the NPU's RoCE port: (address, subnet mask).
    pub fn roce_address(&self, card: i32, device: i32) -> Result<(IpAddr, IpAddr), CallError> {
        const CALL: &str = "dcmi_get_device_ip";
        let f = present(self.entries.device_ip, CALL)?;
        let (mut ip, mut mask) = (RawIpAddr::zeroed(), RawIpAddr::zeroed());
        // SAFETY: both are `struct dcmi_ip_addr` DCMI fills in.
        check(CALL, unsafe {
            f(card, device, ROCE_PORT, ROCE_PORT_ID, &mut ip, &mut mask)
        })?;
        Ok((ip.to_ip(), mask.to_ip()))
    }

    /// `dcmi_get_device_gateway` of the NPU's RoCE port.
    pub fn roce_gateway(&self, card: i32, device: i32) -> Result<IpAddr, CallError> {
        const CALL: &str = "dcmi_get_device_gateway";
        let f = present(self.entries.device_gateway, CALL)?;
        let mut gateway = RawIpAddr::zeroed();
        // SAFETY: `gateway` is a `struct dcmi_ip_addr` DCMI fills in.
        check(CALL, unsafe {
            f(card, device, ROCE_PORT, ROCE_PORT_ID, &mut gateway)
        })?;
        Ok(gateway.to_ip())
    }
}

impl DcmiLibrary {
    /// `dcmi_get_device_share_enable`: whether the chip's container-share flag is on (the
    /// driver lets more than one container open it). The flag is off after every reboot.
    pub fn share_enabled(&self, card: i32, device: i32) -> Result<bool, CallError> {
        const CALL: &str = "dcmi_get_device_share_enable";
        let f = present(self.entries.share_enable_get, CALL)?;
        let mut flag: c_int = 0;
        // SAFETY: valid out-pointer.
        check(CALL, unsafe { f(card, device, &mut flag) })?;
        Ok(flag == 1)
    }

    /// `dcmi_set_device_share_enable`: turns the chip's container-share flag on (1) or off (0).
    pub fn set_share_enabled(&self, card: i32, device: i32, on: bool) -> Result<(), CallError> {
        const CALL: &str = "dcmi_set_device_share_enable";
        let f = present(self.entries.share_enable_set, CALL)?;
        // SAFETY: plain int arguments.
        check(CALL, unsafe { f(card, device, c_int::from(on)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_header() {
        assert_eq!(size_of::<RawChipInfo>(), 3 * 32 + 4);
        // u64, u32 (+4 padding), u64, i32, u32.
        assert_eq!(size_of::<RawHbmInfo>(), 32);
        assert_eq!(size_of::<RawDieId>(), 20);
        assert_eq!(size_of::<RawPcieInfo>(), 64, "the header says 64");
        assert_eq!(size_of::<RawIpAddr>(), 20);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(size_of::<RawMemoryInfo>(), 112);
    }

    #[test]
    fn addresses() {
        let mut bytes = [0u8; 16];
        bytes[..4].copy_from_slice(&[192, 168, 1, 10]);
        assert_eq!(ip_from_raw(bytes, 0).to_string(), "192.168.1.10");
        let v6 = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
        assert_eq!(ip_from_raw(v6.octets(), IPADDR_TYPE_V6), IpAddr::V6(v6));
    }

    #[test]
    fn unloadable_library_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libdcmi.so");
        std::fs::write(&path, b"not an ELF file").unwrap();
        assert!(matches!(
            DcmiLibrary::open(path.as_os_str()),
            Err(OpenError::Load(_))
        ));
    }
}
