//! Pure facts about Ascend NPUs: naming, families, ids, toolkit versions and which cards offer
//! logical slices. No IO; each function has a table test.

use std::net::IpAddr;

use gpustack_api::devices::{LogicalSliced, Roce};

/// The product name: DCMI's `chip_type` and `chip_name` joined (`Ascend` + `910B3` →
/// `Ascend910B3`), as `npu-smi` and the reference show it; the group id later drops the
/// `Ascend` brand (`910b3`). A `chip_name` that already carries the type is kept as is.
pub fn product_name(chip_type: &str, chip_name: &str) -> String {
    let (chip_type, chip_name) = (chip_type.trim(), chip_name.trim());
    if chip_type.is_empty()
        || chip_name
            .to_ascii_lowercase()
            .starts_with(&chip_type.to_ascii_lowercase())
    {
        chip_name.to_owned()
    } else {
        format!("{chip_type}{chip_name}")
    }
}

/// The product family of a chip name (`910B3`, `Ascend910B3`, `910_9392`, `310P3`, `950PR`):
/// `910`, `910B`, `910C`, `950`, `310P`, `310B`; `None` for anything else.
///
/// Atlas A3 (910C) dies report themselves as `910_93xx`; every `950*` is family `950`; the
/// first-generation 910 (`910A`, `910ProB`, ...) is `910`.
pub fn family(chip_name: &str) -> Option<&'static str> {
    let upper = chip_name.trim().to_ascii_uppercase();
    let name = upper.strip_prefix("ASCEND").unwrap_or(&upper).trim_start();
    if name.starts_with("950") {
        Some("950")
    } else if name.starts_with("910B") {
        Some("910B")
    } else if name.starts_with("910C") || name.starts_with("910_93") {
        Some("910C")
    } else if name.starts_with("910") {
        Some("910")
    } else if name.starts_with("310P") {
        Some("310P")
    } else if name.starts_with("310B") {
        Some("310B")
    } else {
        None
    }
}

/// The accelerator id from a `VDIE` die id: each 32-bit word as 8 upper-case hex digits,
/// joined by `-` (`5A3C1B2E-0000A1B2-...`), the form Huawei's own device plugin and exporter
/// print. An all-zero die id identifies nothing and gives `None`.
pub fn die_id(words: &[u32]) -> Option<String> {
    (!words.is_empty() && words.iter().any(|w| *w != 0)).then(|| {
        words
            .iter()
            .map(|w| format!("{w:08X}"))
            .collect::<Vec<_>>()
            .join("-")
    })
}

/// The sysfs bus id of a DCMI PCIe address (`dcmi_pcie_info_all`'s domain/bus/device/function).
pub fn bus_id(domain: i32, bus: u32, device: u32, function: u32) -> String {
    format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        domain.max(0),
        bus,
        device,
        function
    )
}

/// The CANN release from the toolkit's `latest/version.cfg`. Lines look like
/// `runtime_running_version=[7.3.0.1.231:8.0.RC2]`: an internal component version, a colon, the
/// CANN release. The `toolkit_running_version` line is preferred, then `runtime_running_version`,
/// then any `*_running_version` line; `# ...` comments are skipped.
pub fn cann_version_from_cfg(text: &str) -> Option<String> {
    let entries: Vec<(&str, &str)> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let release = |v: &str| {
        let inner = v.trim_start_matches('[').trim_end_matches(']');
        let release = inner.rsplit_once(':').map_or(inner, |(_, r)| r).trim();
        (!release.is_empty()).then(|| release.to_owned())
    };
    ["toolkit_running_version", "runtime_running_version"]
        .iter()
        .find_map(|key| entries.iter().find(|(k, _)| k == key))
        .or_else(|| {
            entries
                .iter()
                .find(|(k, _)| k.ends_with("_running_version"))
        })
        .and_then(|(_, v)| release(v))
}

/// The CANN release from `latest/compiler/version.info`: its `version_dir=8.0.RC2` line (the
/// release directory), else its `Version=` line.
pub fn cann_version_from_info(text: &str) -> Option<String> {
    let value = |key: &str| {
        text.lines()
            .filter_map(|l| l.trim().split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(key))
            .map(|(_, v)| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    value("version_dir").or_else(|| value("Version"))
}

/// The major number of a CANN release (`8.0.RC2` → 8).
pub fn cann_major(version: &str) -> Option<u32> {
    version.trim().split('.').next()?.parse().ok()
}

/// Family × CANN major pairs for which the product's image ships the vcann-rt slicing shim
/// (the reference's table).
const SLICEABLE: [(&str, &[u32]); 4] = [
    ("910B", &[8, 9]),
    ("910C", &[8, 9]),
    ("950", &[9]),
    ("310P", &[9]),
];

/// Logical slicing of a card: 63 slices with core overcommit, for the families above.
///
/// With a known CANN major the pair must be in the table. When the toolkit is not visible (the
/// device manager's container usually mounts only the driver) the family alone decides: the
/// shim is chosen per workload image at allocation time, so withholding slices from every node
/// without a host toolkit would hide a capability the node has.
pub fn logical_slicing(family: Option<&str>, cann_major: Option<u32>) -> Option<LogicalSliced> {
    let (_, majors) = SLICEABLE.iter().find(|(f, _)| Some(*f) == family)?;
    if let Some(major) = cann_major
        && !majors.contains(&major)
    {
        return None;
    }
    Some(LogicalSliced {
        cores_percentage_overcommit: true,
        count: 63,
    })
}

/// The RoCE block of an NPU's topology. An unset address (0.0.0.0 or ::, what DCMI reports for
/// a port nobody configured) is no address; an unknown gateway is left empty.
pub fn roce(ip: IpAddr, mask: IpAddr, gateway: Option<IpAddr>) -> Option<Roce> {
    (!ip.is_unspecified()).then(|| Roce {
        ip: ip.to_string(),
        subnet_mask: mask.to_string(),
        gateway: gateway
            .filter(|g| !g.is_unspecified())
            .map(|g| g.to_string())
            .unwrap_or_default(),
    })
}

/// DCMI's power (units of 0.1 W) in whole watts; a negative reading is no reading.
pub fn watts(deciwatts: i32) -> Option<u32> {
    u32::try_from(deciwatts).ok().map(|d| d / 10)
}

/// `dcmi_get_device_health` other than 0 (normal) is an alarm, or (`0xFFFFFFFF`) a device DCMI
/// no longer sees: both make the card unhealthy.
pub fn unhealthy(health: u32) -> bool {
    health != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families() {
        let table = [
            ("910B3", Some("910B")),
            ("Ascend910B2", Some("910B")),
            ("910B4-1", Some("910B")),
            ("910_9392", Some("910C")),
            ("Ascend910_9391", Some("910C")),
            ("910C", Some("910C")),
            ("910A", Some("910")),
            ("910ProB", Some("910")),
            ("950PR", Some("950")),
            ("950DT", Some("950")),
            ("310P3", Some("310P")),
            ("Ascend310P1", Some("310P")),
            ("310B4", Some("310B")),
            ("310", None),
            ("", None),
        ];
        for (name, want) in table {
            assert_eq!(family(name), want, "{name}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(product_name("Ascend", "910B3"), "Ascend910B3");
        assert_eq!(product_name("Ascend", "Ascend910B3"), "Ascend910B3");
        assert_eq!(product_name("", "310P3"), "310P3");
    }

    #[test]
    fn die_ids() {
        assert_eq!(
            die_id(&[0x5a3c1b2e, 0xa1b2, 0, 0x10, 0xffffffff]).as_deref(),
            Some("5A3C1B2E-0000A1B2-00000000-00000010-FFFFFFFF")
        );
        assert_eq!(die_id(&[0; 5]), None);
        assert_eq!(die_id(&[]), None);
    }

    #[test]
    fn bus_ids() {
        assert_eq!(bus_id(0, 0xc1, 0, 0), "0000:c1:00.0");
        assert_eq!(bus_id(2, 1, 0x1f, 3), "0002:01:1f.3");
    }

    #[test]
    fn toolkit_versions() {
        let cfg = "# version: 1.0\nruntime_running_version=[7.3.0.1.231:8.0.RC2]\ncompiler_running_version=[7.3.0.1.231:8.0.RC2]\n";
        assert_eq!(cann_version_from_cfg(cfg).as_deref(), Some("8.0.RC2"));
        let cfg =
            "opp_running_version=[8.1.0:8.1.RC1]\ntoolkit_running_version=[8.1.0.1:8.1.RC1]\n";
        assert_eq!(cann_version_from_cfg(cfg).as_deref(), Some("8.1.RC1"));
        assert_eq!(cann_version_from_cfg("# nothing\n"), None);
        let info = "Version=7.3.0.1.231\nversion_dir=8.0.RC2\ntimestamp=20240601\n";
        assert_eq!(cann_version_from_info(info).as_deref(), Some("8.0.RC2"));
        assert_eq!(
            cann_version_from_info("Version=8.2.RC1\n").as_deref(),
            Some("8.2.RC1")
        );
        assert_eq!(cann_major("8.0.RC2"), Some(8));
        assert_eq!(cann_major("RC"), None);
    }

    #[test]
    fn slicing_follows_family_and_cann() {
        let sliced = |f, m| logical_slicing(Some(f), m).map(|l| l.count);
        assert_eq!(sliced("910B", Some(8)), Some(63));
        assert_eq!(sliced("910C", Some(9)), Some(63));
        assert_eq!(sliced("910B", Some(7)), None);
        assert_eq!(sliced("950", Some(8)), None);
        assert_eq!(sliced("950", Some(9)), Some(63));
        assert_eq!(sliced("310P", Some(8)), None);
        assert_eq!(sliced("310P", None), Some(63));
        assert_eq!(sliced("910", None), None);
        assert_eq!(sliced("310B", Some(9)), None);
        assert_eq!(logical_slicing(None, Some(8)), None);
        assert!(
            logical_slicing(Some("910B"), None)
                .unwrap()
                .cores_percentage_overcommit
        );
    }

    #[test]
    fn roce_addresses() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let r = roce(
            ip("192.168.1.10"),
            ip("255.255.255.0"),
            Some(ip("192.168.1.1")),
        )
        .unwrap();
        assert_eq!(
            (r.ip.as_str(), r.subnet_mask.as_str(), r.gateway.as_str()),
            ("192.168.1.10", "255.255.255.0", "192.168.1.1")
        );
        let r = roce(ip("10.0.0.2"), ip("255.0.0.0"), Some(ip("0.0.0.0"))).unwrap();
        assert_eq!(r.gateway, "");
        assert_eq!(roce(ip("0.0.0.0"), ip("0.0.0.0"), None), None);
    }

    #[test]
    fn units() {
        assert_eq!(watts(923), Some(92));
        assert_eq!(watts(-1), None);
        assert!(!unhealthy(0));
        assert!(unhealthy(2));
        assert!(unhealthy(0xFFFF_FFFF));
    }
}
