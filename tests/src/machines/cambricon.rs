//! Cambricon nodes: a host tree (PCI functions behind PCIe switches, NUMA nodes, the Neuware
//! toolkit's version file, the CNDev library) and the JSON fixture that the stand-in
//! `libcndev.so` (crate `gpustack-fake-cndev`) serves through the real CNDev C ABI. Detection
//! finds the stand-in under the fixture root exactly where the MLU driver package installs the
//! real library, and loads it by path.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{
    stand_in,
    sysfs::{HostTree, PciFunction},
};

/// Where the MLU driver package (Neuware) installs CNDev.
pub const CNDEV_PATH: &str = "/usr/local/neuware/lib64/libcndev.so";

/// The environment variable the stand-in reads its fixture from.
pub const FIXTURE_ENV: &str = "GPUSTACK_FAKE_CNDEV_FIXTURE";

/// A built node: the host tree to pass as `GPUSTACK_SYSTEM_ROOT`, and the CNDev fixture to pass
/// as `GPUSTACK_FAKE_CNDEV_FIXTURE`.
pub struct CambriconNode {
    pub root: PathBuf,
    pub cndev_fixture: PathBuf,
}

/// The stand-in library built into this target directory (`cargo build` puts
/// `libgpustack_fake_cndev.so` beside the test executables' `deps/` folder), or the one named by
/// `GPUSTACK_FAKE_CNDEV_LIB`.
pub fn fake_cndev_library() -> PathBuf {
    stand_in::built("gpustack_fake_cndev", "GPUSTACK_FAKE_CNDEV_LIB")
}

/// Copies the stand-in into the tree at `host_path`.
pub fn install_fake_cndev(tree: &HostTree, host_path: &str) {
    stand_in::install(tree, &fake_cndev_library(), host_path);
}

/// One MLU370-X8 of the node, in CNDev order (= index).
#[derive(Clone, Debug)]
pub struct Mlu {
    /// `cndevGetUUID`, bare.
    pub uuid: String,
    /// Sysfs form, `0000:1a:00.0`.
    pub bus_id: &'static str,
    /// Bridges above it, innermost first: switch downstream port, upstream port, root port.
    pub switches: [&'static str; 3],
    pub numa_node: i32,
    pub memory_used_mb: u64,
    /// `cndevGetCardHealthState`: 1 healthy, 0 sick.
    pub health: i32,
    /// `cndevGetECCInfo`'s uncorrected errors.
    pub ecc_uncorrected: u64,
    pub utilization: u32,
    /// Chip and board temperature; a chip reading of 0 is a sensor CNDev does not report.
    pub chip_temperature: i32,
    pub board_temperature: i32,
    /// `None`: CNDev refuses the power query for this card.
    pub power_w: Option<u32>,
}

impl Mlu {
    /// The accelerator id detection must report.
    pub fn id(&self) -> String {
        format!("MLU-{}", self.uuid)
    }
}

pub const X8_NAME: &str = "MLU370-X8";
/// 48 GB of LPDDR5 per card, as `cnmon` reports it in MiB.
pub const X8_MEMORY_MB: u64 = 49152;
/// MLU cores per card as `cndevGetCoreCount` reports them (fixture value).
pub const X8_CORES: u32 = 32;
pub const X8_DRIVER_VERSION: &str = "5.10.22";
pub const X8_NEUWARE_VERSION: &str = "3.8.4";
/// The card CNDev reports as sick (`health` 0).
pub const X8_SICK_INDEX: usize = 2;
/// The card with uncorrected ECC errors (health still 1).
pub const X8_ECC_INDEX: usize = 3;
/// The card whose power CNDev refuses and whose chip sensor reads 0 (board temperature used).
pub const X8_SPARSE_INDEX: usize = 1;

/// The four MLU370-X8 of the node in CNDev order: two behind one PCIe switch on the first
/// socket's root port, two behind another on the second socket's.
pub fn x8_mlus() -> Vec<Mlu> {
    let place: [(&str, [&str; 3], i32); 4] = [
        (
            "0000:1a:00.0",
            ["0000:19:00.0", "0000:18:00.0", "0000:17:02.0"],
            0,
        ),
        (
            "0000:1b:00.0",
            ["0000:19:04.0", "0000:18:00.0", "0000:17:02.0"],
            0,
        ),
        (
            "0000:9b:00.0",
            ["0000:9a:00.0", "0000:99:00.0", "0000:98:02.0"],
            1,
        ),
        (
            "0000:9c:00.0",
            ["0000:9a:04.0", "0000:99:00.0", "0000:98:02.0"],
            1,
        ),
    ];
    let utilization = [0, 37, 88, 12];
    let chip = [41, 0, 47, 39];
    let board = [34, 35, 36, 33];
    let power = [Some(78), None, Some(151), Some(64)];
    place
        .iter()
        .enumerate()
        .map(|(i, &(bus_id, switches, numa_node))| Mlu {
            uuid: format!("3c8e0f1a-7b52-4d1e-9a60-0c5d8e21b4{i:02x}"),
            bus_id,
            switches,
            numa_node,
            memory_used_mb: 1210 + 1000 * i as u64,
            health: if i == X8_SICK_INDEX { 0 } else { 1 },
            ecc_uncorrected: if i == X8_ECC_INDEX { 2 } else { 0 },
            utilization: utilization[i],
            chip_temperature: chip[i],
            board_temperature: board[i],
            power_w: power[i],
        })
        .collect()
}

/// A two-socket x86 server with four Cambricon MLU370-X8 cards (48 GB, PCI `cabc:0370`, class
/// 1200), two per NUMA node (0: CPUs 0-31,64-95; 1: 32-63,96-127) behind one PCIe switch each,
/// MLU driver 5.10.22 with CNDev in Neuware's `lib64`, Neuware 3.8.4 installed. Card 2 is sick,
/// card 3 has uncorrected ECC errors, card 1 reports neither power nor chip temperature.
pub fn mlu370_x8_node(dir: &Path) -> CambriconNode {
    let tree = HostTree::new(dir.join("root"));
    tree.kernel_release("5.15.0-105-generic")
        .numa_node(0, "0-31,64-95")
        .numa_node(1, "32-63,96-127");
    let mlus = x8_mlus();
    for (i, mlu) in mlus.iter().enumerate() {
        let [down, up, root_port] = mlu.switches;
        let host_bridge = format!("pci0000:{}", &root_port[5..7]);
        // Intel root port, Broadcom PEX switch ports: bridge classes, kept out of the scan. The
        // two cards of a pair share the root port and the switch's upstream port.
        if i % 2 == 0 {
            tree.pci_bridge(&[&host_bridge, root_port], "8086");
            tree.pci_bridge(&[&host_bridge, root_port, up], "1000");
        }
        tree.pci_bridge(&[&host_bridge, root_port, up, down], "1000");
        tree.pci_function(&PciFunction {
            path: &[&host_bridge, root_port, up, down, mlu.bus_id],
            vendor: "cabc",
            device: "0370",
            class: "120000",
            revision: "00",
            numa_node: mlu.numa_node,
        });
    }
    tree.file(
        "/usr/local/neuware/version.txt",
        format!("Neuware Version {X8_NEUWARE_VERSION}\n"),
    );
    install_fake_cndev(&tree, CNDEV_PATH);
    let devices: Vec<Value> = mlus
        .iter()
        .map(|m| {
            let (bus, device, function) = bdf(m.bus_id);
            json!({
                "uuid": m.uuid,
                "name": X8_NAME,
                "coreCount": X8_CORES,
                "memory": {"totalMb": X8_MEMORY_MB, "usedMb": m.memory_used_mb},
                "health": m.health,
                "eccUncorrected": m.ecc_uncorrected,
                "pcie": {"domain": 0, "bus": bus, "device": device, "function": function,
                         "vendorId": 0xcabc, "deviceId": 0x0370},
                "utilization": m.utilization,
                "temperature": {"board": m.board_temperature, "chip": m.chip_temperature},
                "powerW": m.power_w,
            })
        })
        .collect();
    let cndev_fixture = dir.join("cndev.json");
    std::fs::write(
        &cndev_fixture,
        serde_json::to_vec_pretty(&json!({
            "driverVersion": {"major": 5, "minor": 10, "build": 22},
            "devices": devices,
        }))
        .unwrap(),
    )
    .unwrap();
    CambriconNode {
        root: tree.root().to_path_buf(),
        cndev_fixture,
    }
}

/// `0000:1a:00.0` → (bus, device, function).
fn bdf(bus_id: &str) -> (u32, u32, u32) {
    let hex = |s: &str| u32::from_str_radix(s, 16).unwrap();
    let (_, rest) = bus_id.split_once(':').unwrap();
    let (bus, rest) = rest.split_once(':').unwrap();
    let (device, function) = rest.split_once('.').unwrap();
    (hex(bus), hex(device), hex(function))
}
