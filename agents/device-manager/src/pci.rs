//! The PCI scan: which functions in `/sys/bus/pci/devices` belong to a manufacturer, and where
//! each sits (bridges above it, NUMA node, CPUs of that node).
//!
//! The scan gates everything vendor-specific: with the PCI check on and no matching function, a
//! vendor's library is never loaded.

use std::path::{Path, PathBuf};

use gpustack_api::{devices::DeviceTopology, manufacturer::PciVendorMatch};

use crate::system_root::SystemRoot;

/// Class prefixes of display, network, processor and processing-accelerator functions.
pub const DEFAULT_CLASS_PREFIXES: &str = "02,03,0b,12";

const DEVICES_DIR: &str = "/sys/bus/pci/devices";

/// One PCI function as sysfs describes it. Hex ids are lowercase without `0x`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciDevice {
    /// Domain:bus:device.function, e.g. `0000:04:00.0`.
    pub bus_id: String,
    pub vendor_id: String,
    pub device_id: String,
    /// Full class code, e.g. `030000`.
    pub class: String,
    pub revision: String,
    pub subsystem_vendor_id: String,
    pub subsystem_device_id: String,
    /// Bridges between the function and its root, innermost first.
    pub switches: Vec<String>,
    /// The outermost bridge above the function, or the function itself.
    pub root_id: String,
    /// NUMA node; `"0"` where the platform reports none (`-1`).
    pub numa_node: String,
    /// CPU list of that NUMA node, e.g. `0-13`; empty if unknown.
    pub cpu_affinity: String,
    /// The function's own sysfs directory as a host path (`/sys/devices/pci0000:00/…/<bus id>`).
    pub sysfs_dir: String,
}

impl PciDevice {
    /// The topology block of an accelerator on this function.
    pub fn topology(&self) -> DeviceTopology {
        DeviceTopology {
            pci_bus_id: self.bus_id.clone(),
            pci_root_id: self.root_id.clone(),
            pci_class: self.class.clone(),
            numa_affinity: self.numa_node.clone(),
            cpu_affinity: self.cpu_affinity.clone(),
            roce: None,
            pci_switches: self.switches.clone(),
        }
    }
}

/// Parses `GPUSTACK_PCI_CLASS_PREFIXES` (comma separated hex prefixes).
pub fn class_prefixes(value: Option<&str>) -> Vec<String> {
    value
        .unwrap_or(DEFAULT_CLASS_PREFIXES)
        .split(',')
        .map(|p| p.trim().trim_start_matches("0x").to_ascii_lowercase())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Every function under `/sys/bus/pci/devices` whose vendor matches and whose class starts with
/// one of `class_prefixes`, sorted by bus id.
pub fn scan(
    root: &SystemRoot,
    vendor: &PciVendorMatch,
    class_prefixes: &[String],
) -> std::io::Result<Vec<PciDevice>> {
    let mut found = Vec::new();
    for bus_id in root.list_dir(DEVICES_DIR)? {
        let dir = format!("{DEVICES_DIR}/{bus_id}");
        let Some(vendor_id) = root.read_attr(format!("{dir}/vendor")).map(hex) else {
            continue;
        };
        let class = root
            .read_attr(format!("{dir}/class"))
            .map(hex)
            .unwrap_or_default();
        if !vendor.matches(&vendor_id, &class)
            || !class_prefixes.iter().any(|p| class.starts_with(p.as_str()))
        {
            continue;
        }
        if let Some(device) = read_device(root, &bus_id) {
            found.push(device);
        }
    }
    Ok(found)
}

/// The function at `bus_id`, if sysfs has it.
pub fn read_device(root: &SystemRoot, bus_id: &str) -> Option<PciDevice> {
    let link = root.path(format!("{DEVICES_DIR}/{bus_id}"));
    read_device_at(root, &std::fs::canonicalize(&link).unwrap_or(link))
}

/// The function whose sysfs directory (resolved, under the root) is `resolved`; reached this way
/// when `/sys/bus/pci` is not visible but a class link (`/sys/class/drm/card0/device`) is.
pub fn read_device_at(root: &SystemRoot, resolved: &Path) -> Option<PciDevice> {
    let bus_id = resolved.file_name()?.to_str()?.to_owned();
    let dir = root.host_path(resolved).to_string_lossy().into_owned();
    let attr = |name: &str| root.read_attr(format!("{dir}/{name}")).map(hex);
    let vendor_id = attr("vendor")?;
    let bridges = bridges_above(resolved, &bus_id);
    let numa_node = match root.read_attr(format!("{dir}/numa_node")) {
        Some(n) if n.parse::<u32>().is_ok() => n,
        _ => "0".to_owned(),
    };
    let cpu_affinity = root
        .read_attr(format!("/sys/devices/system/node/node{numa_node}/cpulist"))
        .unwrap_or_default();
    Some(PciDevice {
        sysfs_dir: dir.clone(),
        bus_id: bus_id.clone(),
        vendor_id,
        device_id: attr("device").unwrap_or_default(),
        class: attr("class").unwrap_or_default(),
        revision: attr("revision").unwrap_or_default(),
        subsystem_vendor_id: attr("subsystem_vendor").unwrap_or_default(),
        subsystem_device_id: attr("subsystem_device").unwrap_or_default(),
        root_id: bridges.last().cloned().unwrap_or_else(|| bus_id.clone()),
        switches: bridges,
        numa_node,
        cpu_affinity,
    })
}

/// Bus ids of the PCI bridges on the resolved sysfs path, innermost first.
fn bridges_above(resolved: &Path, bus_id: &str) -> Vec<String> {
    let mut bridges = Vec::new();
    let mut dir: Option<PathBuf> = resolved.parent().map(Path::to_path_buf);
    while let Some(d) = dir {
        match d.file_name().and_then(|n| n.to_str()) {
            Some(name) if is_bus_id(name) && name != bus_id => bridges.push(name.to_owned()),
            _ => {}
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    bridges
}

/// `dddd:bb:dd.f` in hex.
pub fn is_bus_id(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.chars()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

/// Normalises a bus id from a vendor library (`00000000:04:00.0`, upper case) to sysfs form.
pub fn normalize_bus_id(s: &str) -> String {
    let s = s.trim().to_ascii_lowercase();
    match s.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 => {
            format!("{}:{rest}", &domain[domain.len() - 4..])
        }
        _ => s,
    }
}

fn hex(s: String) -> String {
    s.trim()
        .trim_start_matches("0x")
        .trim_start_matches("0X")
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids() {
        assert!(is_bus_id("0000:04:00.0"));
        assert!(!is_bus_id("pci0000:00"));
        assert!(!is_bus_id("0000:04:00"));
        assert_eq!(normalize_bus_id("00000000:1B:00.0"), "0000:1b:00.0");
        assert_eq!(normalize_bus_id("0000:04:00.0"), "0000:04:00.0");
    }

    #[test]
    fn bridges_innermost_first() {
        let p = Path::new(
            "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:04:00.0",
        );
        assert_eq!(
            bridges_above(p, "0000:04:00.0"),
            ["0000:02:00.0", "0000:01:00.0", "0000:00:01.0"]
        );
    }

    #[test]
    fn class_prefix_list() {
        assert_eq!(class_prefixes(None), ["02", "03", "0b", "12"]);
        assert_eq!(class_prefixes(Some(" 0x03, ,12")), ["03", "12"]);
    }
}
