//! Builds host trees (`/sys`, `/proc`, library directories) that reproduce real machines, for
//! detection to read through `GPUSTACK_SYSTEM_ROOT`. Paths are given as host paths (`/sys/...`)
//! and created under the fixture's root; PCI devices get the same symlink layout as sysfs.

use std::{
    fs,
    path::{Path, PathBuf},
};

/// A host tree under a directory.
pub struct HostTree {
    root: PathBuf,
}

/// Identity of one PCI function. Ids are hex without `0x`.
#[derive(Clone, Debug)]
pub struct PciFunction<'a> {
    /// The path below `/sys/devices`, outermost first, ending with the function's bus id:
    /// `["pci0000:00", "0000:00:01.1", "0000:01:00.0", "0000:04:00.0"]`.
    pub path: &'a [&'a str],
    pub vendor: &'a str,
    pub device: &'a str,
    pub class: &'a str,
    pub revision: &'a str,
    /// `-1` where the platform reports no NUMA node.
    pub numa_node: i32,
}

impl HostTree {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        fs::create_dir_all(&root).unwrap();
        Self { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The fixture path of a host path.
    pub fn path(&self, host: &str) -> PathBuf {
        self.root.join(host.trim_start_matches('/'))
    }

    /// Writes a file (creating its directories).
    pub fn file(&self, host: &str, content: impl AsRef<[u8]>) -> &Self {
        let path = self.path(host);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
        self
    }

    /// A symlink at `host` pointing to `target` (relative, as sysfs links are, so that they
    /// resolve inside the fixture).
    pub fn symlink(&self, host: &str, target: &str) -> &Self {
        let path = self.path(host);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
        self
    }

    /// A PCI function under `/sys/devices/...` with its attributes, linked from
    /// `/sys/bus/pci/devices/<bus id>`. Returns the function's host directory
    /// (`/sys/bus/pci/devices/<bus id>`) for further attributes.
    pub fn pci_function(&self, f: &PciFunction<'_>) -> String {
        let bus_id = *f.path.last().expect("a PCI path ends with the bus id");
        let real = format!("/sys/devices/{}", f.path.join("/"));
        for (name, value) in [
            ("vendor", format!("0x{}", f.vendor)),
            ("device", format!("0x{}", f.device)),
            ("class", format!("0x{}", f.class)),
            ("revision", format!("0x{}", f.revision)),
            ("subsystem_vendor", format!("0x{}", f.vendor)),
            ("subsystem_device", "0x0000".to_owned()),
            ("numa_node", f.numa_node.to_string()),
        ] {
            self.file(&format!("{real}/{name}"), format!("{value}\n"));
        }
        self.symlink(
            &format!("/sys/bus/pci/devices/{bus_id}"),
            &format!("../../../devices/{}", f.path.join("/")),
        );
        format!("/sys/bus/pci/devices/{bus_id}")
    }

    /// A PCI bridge on a device path (class 0604), so that the scan sees a switch there.
    pub fn pci_bridge(&self, path: &[&str], vendor: &str) -> &Self {
        self.pci_function(&PciFunction {
            path,
            vendor,
            device: "0000",
            class: "060400",
            revision: "00",
            numa_node: -1,
        });
        self
    }

    /// `/sys/devices/system/node/node<N>/cpulist`.
    pub fn numa_node(&self, node: u32, cpulist: &str) -> &Self {
        self.file(
            &format!("/sys/devices/system/node/node{node}/cpulist"),
            format!("{cpulist}\n"),
        )
    }

    /// `/proc/sys/kernel/osrelease`.
    pub fn kernel_release(&self, release: &str) -> &Self {
        self.file("/proc/sys/kernel/osrelease", format!("{release}\n"))
    }
}
