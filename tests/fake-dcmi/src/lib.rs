//! A test stand-in for Huawei's `libdcmi.so`, the DCMI management library of the Ascend NPU
//! driver, which cannot exist on a build machine (it needs the driver and the NPUs). It is not
//! Huawei code and talks to no hardware: it serves the cards of a JSON fixture (named by the
//! environment variable `GPUSTACK_FAKE_DCMI_FIXTURE`, see [`fixture`]) through the real DCMI C
//! ABI, so that the Ascend detector is exercised through its real loading path (`dlopen` by
//! path) on machines without an NPU.
//!
//! It exports exactly the DCMI functions the detector and preflight call, with `dcmi_interface_api.h`'s names,
//! argument types, return codes (0, or a negative `DCMI_ERR_CODE_*`) and struct layouts
//! (`dcmi_chip_info`, `dcmi_hbm_info`, `dcmi_get_memory_info_stru`, `dcmi_die_id`,
//! `dcmi_pcie_info_all`, `dcmi_ip_addr`). Both card-list entry points are exported (`dcmi_get_card_list` and its
//! deprecated twin `dcmi_get_card_num_list`); the detector prefers the first.
//!
//! The one setter, `dcmi_set_device_share_enable`, changes the fixture's flag in memory and
//! appends what it was asked to a log file a test names (see [`fixture::set_log`]).
//!
//! `dcmi_init` reads the fixture: an unset variable or unreadable file answers
//! `DCMI_ERR_CODE_DEVICE_NOT_EXIST` (no driver), bad JSON `DCMI_ERR_CODE_INNER_ERR`; any other
//! call before a successful `dcmi_init` answers `DCMI_ERR_CODE_NOT_REDAY` (sic, the header's
//! spelling).

// The contract of every exported function is the header's: pointers are the caller's, valid for
// the documented sizes. Null pointers are checked and answered with DCMI_ERR_CODE_INVALID_PARAMETER.
#![allow(clippy::missing_safety_doc)]

pub mod fixture;

use std::{
    ffi::{c_char, c_int, c_uchar, c_uint, c_ulong, c_ulonglong},
    net::IpAddr,
    sync::Mutex,
};

use fixture::{Device, Fixture, LoadError};
use gpustack_fake_abi::{Answers, c_array};

pub const DCMI_OK: c_int = 0;
const DCMI_ERROR_CODE_BASE: c_int = -8000;
pub const DCMI_ERR_CODE_INVALID_PARAMETER: c_int = DCMI_ERROR_CODE_BASE - 1;
pub const DCMI_ERR_CODE_OPER_NOT_PERMITTED: c_int = DCMI_ERROR_CODE_BASE - 2;
pub const DCMI_ERR_CODE_INNER_ERR: c_int = DCMI_ERROR_CODE_BASE - 5;
pub const DCMI_ERR_CODE_INVALID_DEVICE_ID: c_int = DCMI_ERROR_CODE_BASE - 7;
pub const DCMI_ERR_CODE_DEVICE_NOT_EXIST: c_int = DCMI_ERROR_CODE_BASE - 8;
pub const DCMI_ERR_CODE_NOT_REDAY: c_int = DCMI_ERROR_CODE_BASE - 12;
pub const DCMI_ERR_CODE_NOT_SUPPORT: c_int = DCMI_ERROR_CODE_BASE - 255;

const MAX_CHIP_NAME_LEN: usize = 32;
const DIE_ID_COUNT: usize = 5;
/// `enum dcmi_die_type`.
const NDIE: c_int = 0;
const VDIE: c_int = 1;
/// `DCMI_UTILIZATION_RATE_AICORE`.
const UTILIZATION_RATE_AICORE: c_int = 2;

/// `struct dcmi_chip_info`.
#[repr(C)]
pub struct DcmiChipInfo {
    pub chip_type: [c_uchar; MAX_CHIP_NAME_LEN],
    pub chip_name: [c_uchar; MAX_CHIP_NAME_LEN],
    pub chip_ver: [c_uchar; MAX_CHIP_NAME_LEN],
    pub aicore_cnt: c_uint,
}

/// `struct dcmi_hbm_info`; sizes in MB.
#[repr(C)]
pub struct DcmiHbmInfo {
    pub memory_size: c_ulonglong,
    pub freq: c_uint,
    pub memory_usage: c_ulonglong,
    pub temp: c_int,
    pub bandwith_util_rate: c_uint,
}

/// `struct dcmi_get_memory_info_stru`; sizes in MB.
#[repr(C)]
pub struct DcmiMemoryInfo {
    pub memory_size: c_ulonglong,
    pub memory_available: c_ulonglong,
    pub freq: c_uint,
    pub hugepagesize: c_ulong,
    pub hugepages_total: c_ulong,
    pub hugepages_free: c_ulong,
    pub utiliza: c_uint,
    pub reserve: [c_uchar; 60],
}

/// `struct dcmi_die_id`.
#[repr(C)]
pub struct DcmiDieId {
    pub soc_die: [c_uint; DIE_ID_COUNT],
}

/// `struct dcmi_pcie_info_all`.
#[repr(C)]
pub struct DcmiPcieInfoAll {
    pub venderid: c_uint,
    pub subvenderid: c_uint,
    pub deviceid: c_uint,
    pub subdeviceid: c_uint,
    pub domain: c_int,
    pub bdf_busid: c_uint,
    pub bdf_deviceid: c_uint,
    pub bdf_funcid: c_uint,
    pub reserve: [c_uchar; 32],
}

/// `struct dcmi_ip_addr`: the `ip6[16]`/`ip4[4]` union, then `enum dcmi_ip_addr_type`.
#[repr(C)]
pub struct DcmiIpAddr {
    pub u_addr: [c_uchar; 16],
    pub ip_type: c_int,
}

/// `enum dcmi_port_type` `DCMI_ROCE_PORT`.
const ROCE_PORT: c_int = 1;

fn ip_addr(ip: IpAddr) -> DcmiIpAddr {
    let mut u_addr = [0; 16];
    let ip_type = match ip {
        IpAddr::V4(v4) => {
            u_addr[..4].copy_from_slice(&v4.octets());
            0
        }
        IpAddr::V6(v6) => {
            u_addr = v6.octets();
            1
        }
    };
    DcmiIpAddr { u_addr, ip_type }
}

/// The loaded fixture; DCMI has no shutdown, so it stays until the process ends.
static STATE: Mutex<Option<Fixture>> = Mutex::new(None);

fn state() -> std::sync::MutexGuard<'static, Option<Fixture>> {
    gpustack_fake_abi::lock(&STATE)
}

fn with_fixture(f: impl FnOnce(&Fixture) -> c_int) -> c_int {
    match &*state() {
        Some(fixture) => f(fixture),
        None => DCMI_ERR_CODE_NOT_REDAY,
    }
}

fn with_device(card_id: c_int, device_id: c_int, f: impl FnOnce(&Device) -> c_int) -> c_int {
    with_fixture(|fixture| {
        let device = fixture
            .cards
            .iter()
            .find(|c| c.card_id == card_id)
            .and_then(|c| {
                usize::try_from(device_id)
                    .ok()
                    .and_then(|d| c.devices.get(d))
            });
        match device {
            Some(d) => f(d),
            None => DCMI_ERR_CODE_INVALID_DEVICE_ID,
        }
    })
}

fn with_device_mut(
    card_id: c_int,
    device_id: c_int,
    f: impl FnOnce(&mut Device) -> c_int,
) -> c_int {
    match &mut *state() {
        Some(fixture) => {
            let device = fixture
                .cards
                .iter_mut()
                .find(|c| c.card_id == card_id)
                .and_then(|c| {
                    usize::try_from(device_id)
                        .ok()
                        .and_then(|d| c.devices.get_mut(d))
                });
            match device {
                Some(d) => f(d),
                None => DCMI_ERR_CODE_INVALID_DEVICE_ID,
            }
        }
        None => DCMI_ERR_CODE_NOT_REDAY,
    }
}

/// Appends one line to the set log (see [`fixture::set_log`]), if a test asked for one.
fn log_set(line: &str) {
    use std::io::Write;
    if let Some(path) = fixture::set_log()
        && let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(file, "{line}");
    }
}

/// The status codes of the shared writers.
const ANSWERS: Answers<c_int> = Answers {
    ok: DCMI_OK,
    invalid_argument: DCMI_ERR_CODE_INVALID_PARAMETER,
    insufficient_size: DCMI_ERR_CODE_INVALID_PARAMETER,
};

/// Writes `value` through a caller's out-pointer.
fn put<T>(out: *mut T, value: T) -> c_int {
    ANSWERS.put(out, value)
}

fn supported<T>(value: Option<T>, f: impl FnOnce(T) -> c_int) -> c_int {
    value.map_or(DCMI_ERR_CODE_NOT_SUPPORT, f)
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_init() -> c_int {
    let mut st = state();
    if st.is_none() {
        match fixture::load() {
            Ok(f) => *st = Some(f),
            Err(LoadError::Missing) => return DCMI_ERR_CODE_DEVICE_NOT_EXIST,
            Err(LoadError::Invalid) => return DCMI_ERR_CODE_INNER_ERR,
        }
    }
    DCMI_OK
}

fn card_list(card_num: *mut c_int, card_list: *mut c_int, list_len: c_int) -> c_int {
    with_fixture(|f| {
        if card_list.is_null() || list_len < 0 {
            return DCMI_ERR_CODE_INVALID_PARAMETER;
        }
        if f.cards.len() > list_len as usize {
            return DCMI_ERR_CODE_INVALID_PARAMETER;
        }
        for (i, card) in f.cards.iter().enumerate() {
            // SAFETY: the caller's array has `list_len` elements and `i < cards.len() <= list_len`.
            unsafe { card_list.add(i).write(card.card_id) };
        }
        put(card_num, f.cards.len() as c_int)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_card_list(
    card_num: *mut c_int,
    card_list_out: *mut c_int,
    list_len: c_int,
) -> c_int {
    card_list(card_num, card_list_out, list_len)
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_card_num_list(
    card_num: *mut c_int,
    card_list_out: *mut c_int,
    list_len: c_int,
) -> c_int {
    card_list(card_num, card_list_out, list_len)
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_num_in_card(card_id: c_int, device_num: *mut c_int) -> c_int {
    with_fixture(|f| match f.cards.iter().find(|c| c.card_id == card_id) {
        Some(card) => put(device_num, card.devices.len() as c_int),
        None => DCMI_ERR_CODE_INVALID_DEVICE_ID,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_logic_id(
    device_logic_id: *mut c_int,
    card_id: c_int,
    device_id: c_int,
) -> c_int {
    with_device(card_id, device_id, |d| put(device_logic_id, d.logic_id))
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_phyid_from_logicid(logicid: c_uint, phyid: *mut c_uint) -> c_int {
    with_fixture(|f| {
        let device = f
            .cards
            .iter()
            .flat_map(|c| &c.devices)
            .find(|d| u32::try_from(d.logic_id).ok() == Some(logicid));
        match device {
            Some(d) => put(phyid, d.phy_id),
            None => DCMI_ERR_CODE_INVALID_DEVICE_ID,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_chip_info(
    card_id: c_int,
    device_id: c_int,
    chip_info: *mut DcmiChipInfo,
) -> c_int {
    with_device(card_id, device_id, |d| {
        put(
            chip_info,
            DcmiChipInfo {
                chip_type: c_array(&d.chip_type),
                chip_name: c_array(&d.chip_name),
                chip_ver: c_array(&d.chip_ver),
                aicore_cnt: d.aicore_count,
            },
        )
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_hbm_info(
    card_id: c_int,
    device_id: c_int,
    hbm_info: *mut DcmiHbmInfo,
) -> c_int {
    with_device(card_id, device_id, |d| {
        supported(d.hbm, |m| {
            put(
                hbm_info,
                DcmiHbmInfo {
                    memory_size: m.total_mb,
                    freq: 1600,
                    memory_usage: m.used_mb,
                    temp: d.temperature.unwrap_or(0),
                    bandwith_util_rate: 0,
                },
            )
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_memory_info_v3(
    card_id: c_int,
    device_id: c_int,
    memory_info: *mut DcmiMemoryInfo,
) -> c_int {
    with_device(card_id, device_id, |d| {
        supported(d.ddr, |m| {
            let available = m.total_mb.saturating_sub(m.used_mb);
            put(
                memory_info,
                DcmiMemoryInfo {
                    memory_size: m.total_mb,
                    memory_available: available,
                    freq: 3200,
                    hugepagesize: 2048,
                    hugepages_total: 0,
                    hugepages_free: 0,
                    utiliza: (m.used_mb * 100).checked_div(m.total_mb).unwrap_or(0) as c_uint,
                    reserve: [0; 60],
                },
            )
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_die_v2(
    card_id: c_int,
    device_id: c_int,
    input_type: c_int,
    die_id: *mut DcmiDieId,
) -> c_int {
    with_device(card_id, device_id, |d| match input_type {
        VDIE => put(die_id, DcmiDieId { soc_die: d.die_id }),
        // Only first-generation 910 has an NDIE; the fixture describes none.
        NDIE => DCMI_ERR_CODE_NOT_SUPPORT,
        _ => DCMI_ERR_CODE_INVALID_PARAMETER,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_health(
    card_id: c_int,
    device_id: c_int,
    health: *mut c_uint,
) -> c_int {
    with_device(card_id, device_id, |d| {
        supported(d.health, |h| put(health, h))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_pcie_info_v2(
    card_id: c_int,
    device_id: c_int,
    pcie_info: *mut DcmiPcieInfoAll,
) -> c_int {
    with_device(card_id, device_id, |d| {
        supported(d.pcie, |p| {
            put(
                pcie_info,
                DcmiPcieInfoAll {
                    venderid: p.vendor_id,
                    subvenderid: p.vendor_id,
                    deviceid: p.device_id,
                    subdeviceid: 0,
                    domain: p.domain,
                    bdf_busid: p.bus,
                    bdf_deviceid: p.device,
                    bdf_funcid: p.function,
                    reserve: [0; 32],
                },
            )
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_utilization_rate(
    card_id: c_int,
    device_id: c_int,
    input_type: c_int,
    utilization_rate: *mut c_uint,
) -> c_int {
    with_device(card_id, device_id, |d| {
        if input_type != UTILIZATION_RATE_AICORE {
            // The fixture carries AI core utilization only.
            return DCMI_ERR_CODE_NOT_SUPPORT;
        }
        supported(d.aicore_utilization, |u| put(utilization_rate, u))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_temperature(
    card_id: c_int,
    device_id: c_int,
    temperature: *mut c_int,
) -> c_int {
    with_device(card_id, device_id, |d| {
        supported(d.temperature, |t| put(temperature, t))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_power_info(
    card_id: c_int,
    device_id: c_int,
    power: *mut c_int,
) -> c_int {
    with_device(card_id, device_id, |d| {
        supported(d.power_deciwatts, |p| put(power, p))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_ip(
    card_id: c_int,
    device_id: c_int,
    input_type: c_int,
    port_id: c_int,
    ip: *mut DcmiIpAddr,
    mask: *mut DcmiIpAddr,
) -> c_int {
    with_device(card_id, device_id, |d| {
        if input_type != ROCE_PORT || port_id != 0 {
            return DCMI_ERR_CODE_NOT_SUPPORT;
        }
        supported(d.roce, |r| {
            if ip.is_null() || mask.is_null() {
                return DCMI_ERR_CODE_INVALID_PARAMETER;
            }
            put(ip, ip_addr(r.ip));
            put(mask, ip_addr(r.mask))
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_gateway(
    card_id: c_int,
    device_id: c_int,
    input_type: c_int,
    port_id: c_int,
    gateway: *mut DcmiIpAddr,
) -> c_int {
    with_device(card_id, device_id, |d| {
        if input_type != ROCE_PORT || port_id != 0 {
            return DCMI_ERR_CODE_NOT_SUPPORT;
        }
        supported(d.roce.and_then(|r| r.gateway), |g| put(gateway, ip_addr(g)))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_device_share_enable(
    card_id: c_int,
    device_id: c_int,
    enable_flag: *mut c_int,
) -> c_int {
    with_device(card_id, device_id, |d| {
        supported(d.share_enabled, |on| put(enable_flag, c_int::from(on)))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_set_device_share_enable(
    card_id: c_int,
    device_id: c_int,
    enable_flag: c_int,
) -> c_int {
    let code = with_device_mut(card_id, device_id, |d| {
        if d.share_enabled.is_none() {
            DCMI_ERR_CODE_NOT_SUPPORT
        } else if d.share_locked {
            DCMI_ERR_CODE_OPER_NOT_PERMITTED
        } else if enable_flag != 0 && enable_flag != 1 {
            DCMI_ERR_CODE_INVALID_PARAMETER
        } else {
            d.share_enabled = Some(enable_flag == 1);
            DCMI_OK
        }
    });
    log_set(&format!(
        "dcmi_set_device_share_enable {card_id} {device_id} {enable_flag} -> {code}"
    ));
    code
}

/// Copies `s` NUL-terminated into a caller's buffer of `len` bytes.
fn put_str(buf: *mut c_char, len: c_uint, s: &str) -> c_int {
    ANSWERS.put_str(buf, len, s)
}

#[unsafe(no_mangle)]
pub extern "C" fn dcmi_get_driver_version(driver_ver: *mut c_char, len: c_uint) -> c_int {
    with_fixture(|f| supported(f.driver_version.as_deref(), |v| put_str(driver_ver, len, v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_header() {
        assert_eq!(size_of::<DcmiChipInfo>(), 100);
        assert_eq!(size_of::<DcmiHbmInfo>(), 32);
        assert_eq!(size_of::<DcmiDieId>(), 20);
        assert_eq!(size_of::<DcmiPcieInfoAll>(), 64);
        assert_eq!(size_of::<DcmiIpAddr>(), 20);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(size_of::<DcmiMemoryInfo>(), 112);
    }

    #[test]
    fn strings_are_bounded() {
        assert_eq!(c_array::<u8, 4>("910B3"), [b'9', b'1', b'0', 0]);
        assert_eq!(
            c_array::<u8, 8>("310P"),
            [b'3', b'1', b'0', b'P', 0, 0, 0, 0]
        );
    }

    #[test]
    fn calls_before_init_are_refused() {
        let mut n: c_int = 0;
        assert_eq!(
            dcmi_get_device_num_in_card(0, &mut n),
            DCMI_ERR_CODE_NOT_REDAY
        );
    }
}
