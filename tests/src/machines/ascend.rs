//! Huawei Ascend nodes: host trees (PCI functions, NUMA nodes, the CANN toolkit's version file,
//! the DCMI library) and the JSON fixture that the stand-in `libdcmi.so` (crate
//! `gpustack-fake-dcmi`) serves through the real DCMI C ABI. Detection finds the stand-in under
//! the fixture root exactly where the Ascend driver (or the DCMI package) installs the real
//! library, and loads it by path.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{
    stand_in,
    sysfs::{HostTree, PciFunction},
};

/// Where the Ascend driver package installs DCMI.
pub const DRIVER_DCMI_PATH: &str = "/usr/local/Ascend/driver/lib64/driver/libdcmi.so";
/// Where the standalone DCMI package installs it.
pub const PACKAGE_DCMI_PATH: &str = "/usr/local/dcmi/libdcmi.so";

/// The environment variable the stand-in reads its fixture from.
pub const FIXTURE_ENV: &str = "GPUSTACK_FAKE_DCMI_FIXTURE";

/// A built node: the host tree to pass as `GPUSTACK_SYSTEM_ROOT`, and the DCMI fixture to pass
/// as `GPUSTACK_FAKE_DCMI_FIXTURE`.
pub struct AscendNode {
    pub root: PathBuf,
    pub dcmi_fixture: PathBuf,
}

/// The stand-in library built into this target directory (`cargo build` puts
/// `libgpustack_fake_dcmi.so` beside the test executables' `deps/` folder), or the one named by
/// `GPUSTACK_FAKE_DCMI_LIB`.
pub fn fake_dcmi_library() -> PathBuf {
    stand_in::built("gpustack_fake_dcmi", "GPUSTACK_FAKE_DCMI_LIB")
}

/// Copies the stand-in into the tree at `host_path` (one of the two places DCMI lives).
pub fn install_fake_dcmi(tree: &HostTree, host_path: &str) {
    stand_in::install(tree, &fake_dcmi_library(), host_path);
}

/// One NPU of the Atlas 800T A2 node, in `npu-smi` order (NPU id = logic id = index).
#[derive(Clone, Debug)]
pub struct Npu {
    /// `dcmi_get_device_die_v2` (VDIE) words.
    pub die_id: [u32; 5],
    /// Sysfs form, `0000:c1:00.0`.
    pub bus_id: &'static str,
    pub numa_node: i32,
    /// Root port above it.
    pub root_port: &'static str,
    pub hbm_used_mb: u64,
    pub health: u32,
    pub aicore_util: u32,
    pub temperature: i32,
    /// `None`: DCMI refuses the power query for this NPU.
    pub power_deciwatts: Option<i32>,
    /// The RoCE port's address: one /24 per node, NPU i at .(10 + i).
    pub roce_ip: String,
}

impl Npu {
    /// The accelerator id detection must report.
    pub fn id(&self) -> String {
        self.die_id
            .iter()
            .map(|w| format!("{w:08X}"))
            .collect::<Vec<_>>()
            .join("-")
    }

    fn host_bridge(&self) -> String {
        format!("pci0000:{}", &self.root_port[5..7])
    }
}

/// The NPU with a major alarm on the 800T A2 node.
pub const A2_UNHEALTHY_INDEX: usize = 6;
/// The NPU whose power DCMI does not report.
pub const A2_NO_POWER_INDEX: usize = 7;

pub const A2_CHIP_NAME: &str = "910B3";
/// `npu-smi info`: "HBM-Usage(MB) ... / 65536" for the 64 GB 910B3.
pub const A2_HBM_MB: u64 = 65536;
pub const A2_AICORES: u32 = 20;
pub const A2_DRIVER_VERSION: &str = "24.1.rc2";
pub const A2_CANN_VERSION: &str = "8.0.RC2";
/// The gateway of every NPU's RoCE port (`hccn_tool -i N -gateway -g`).
pub const A2_ROCE_GATEWAY: &str = "192.168.100.1";

/// The eight 910B3 of an Atlas 800T A2 in NPU order. As on the real server, NPU order is not PCI
/// order: NPUs 0-3 sit on the second socket's buses (c1, c2, 81, 82), 4-7 on the first's.
pub fn a2_npus() -> Vec<Npu> {
    let place: [(&str, &str, i32); 8] = [
        ("0000:c1:00.0", "0000:c0:00.0", 1),
        ("0000:c2:00.0", "0000:c0:08.0", 1),
        ("0000:81:00.0", "0000:80:00.0", 1),
        ("0000:82:00.0", "0000:80:08.0", 1),
        ("0000:01:00.0", "0000:00:00.0", 0),
        ("0000:02:00.0", "0000:00:08.0", 0),
        ("0000:41:00.0", "0000:40:00.0", 0),
        ("0000:42:00.0", "0000:40:08.0", 0),
    ];
    place
        .iter()
        .enumerate()
        .map(|(i, &(bus_id, root_port, numa_node))| {
            let n = i as i32;
            Npu {
                die_id: [
                    0x4f2a_1c30 + i as u32,
                    0x0b1e_0000 | (0x11 * i as u32),
                    0x6d00_a5c2,
                    0x0000_0002 + i as u32,
                    0x8120_4e00 ^ ((i as u32) << 4),
                ],
                bus_id,
                numa_node,
                root_port,
                hbm_used_mb: 3370 + 1000 * i as u64,
                health: if i == A2_UNHEALTHY_INDEX { 2 } else { 0 },
                aicore_util: 10 * i as u32,
                temperature: 40 + n,
                power_deciwatts: (i != A2_NO_POWER_INDEX).then_some(923 + 10 * n),
                roce_ip: format!("192.168.100.{}", 10 + i),
            }
        })
        .collect()
}

/// An Atlas 800T A2 training server: eight Ascend 910B3 (64 GB HBM, 20 AI cores each) on two
/// NUMA nodes (0: CPUs 0-95, 1: 96-191), each NPU straight below its own HiSilicon root port,
/// Ascend HDK 24.1.RC2 with DCMI in the driver's directory, CANN 8.0.RC2 toolkit installed.
/// NPU 6 has a major alarm; NPU 7's power is not reported.
pub fn atlas_800t_a2_node(dir: &Path) -> AscendNode {
    let tree = HostTree::new(dir.join("root"));
    tree.kernel_release("5.10.0-182.0.0.95.oe2203sp3.aarch64")
        .numa_node(0, "0-95")
        .numa_node(1, "96-191");
    let npus = a2_npus();
    for npu in &npus {
        let bridge = npu.host_bridge();
        // HiSilicon root ports carry Huawei's vendor id too, but a bridge class (0604): the
        // class filter keeps them out of the ascend functions.
        tree.pci_bridge(&[&bridge, npu.root_port], "19e5");
        tree.pci_function(&PciFunction {
            path: &[&bridge, npu.root_port, npu.bus_id],
            vendor: "19e5",
            device: "d802",
            class: "120000",
            revision: "20",
            numa_node: npu.numa_node,
        });
    }
    tree.file(
        "/usr/local/Ascend/ascend-toolkit/latest/version.cfg",
        "# version: 1.0\nruntime_running_version=[7.3.0.1.231:8.0.RC2]\ncompiler_running_version=[7.3.0.1.231:8.0.RC2]\nopp_running_version=[7.3.0.1.231:8.0.RC2]\ntoolkit_running_version=[7.3.0.1.231:8.0.RC2]\n",
    );
    install_fake_dcmi(&tree, DRIVER_DCMI_PATH);
    let cards: Vec<Value> = npus
        .iter()
        .enumerate()
        .map(|(i, npu)| {
            let (bus, device, function) = bdf(npu.bus_id);
            json!({
                "cardId": i,
                "devices": [{
                    "logicId": i,
                    "phyId": i,
                    "chipType": "Ascend",
                    "chipName": A2_CHIP_NAME,
                    "chipVer": "V1",
                    "aicoreCount": A2_AICORES,
                    "dieId": npu.die_id,
                    "hbm": {"totalMb": A2_HBM_MB, "usedMb": npu.hbm_used_mb},
                    "ddr": {"totalMb": 15039, "usedMb": 2711},
                    "health": npu.health,
                    "pcie": {"domain": 0, "bus": bus, "device": device, "function": function,
                             "vendorId": 0x19e5, "deviceId": 0xd802},
                    "aicoreUtilization": npu.aicore_util,
                    "temperature": npu.temperature,
                    "powerDeciwatts": npu.power_deciwatts,
                    "roce": {"ip": npu.roce_ip, "mask": "255.255.255.0",
                             "gateway": A2_ROCE_GATEWAY},
                }],
            })
        })
        .collect();
    let dcmi_fixture = dir.join("dcmi.json");
    write_json(
        &dcmi_fixture,
        &json!({"driverVersion": A2_DRIVER_VERSION, "cards": cards}),
    );
    AscendNode {
        root: tree.root().to_path_buf(),
        dcmi_fixture,
    }
}

/// One 310P3 chip of the Atlas 300I Duo node.
#[derive(Clone, Debug)]
pub struct DuoChip {
    pub card_id: i32,
    pub device_in_card: u32,
    pub logic_id: u32,
    pub phy_id: u32,
    pub die_id: [u32; 5],
    pub bus_id: &'static str,
    /// Bridges above it, innermost first.
    pub switches: [&'static str; 3],
}

pub const DUO_CHIP_NAME: &str = "310P3";
/// LPDDR4X per chip as DCMI reports it for the 96 GB card (48 GB per chip, minus the firmware's
/// reservation).
pub const DUO_DDR_MB: u64 = 44280;
pub const DUO_AICORES: u32 = 8;
pub const DUO_CANN_VERSION: &str = "8.0.RC3";

/// Two Atlas 300I Duo inference cards, each two 310P3 chips behind the card's own PCIe switch.
/// Cards are numbered by slot (3 and 5), so card ids differ from the chips' physical ids.
pub fn duo_chips() -> [DuoChip; 4] {
    [
        DuoChip {
            card_id: 3,
            device_in_card: 0,
            logic_id: 0,
            phy_id: 0,
            die_id: [
                0x1d00_3a41,
                0x0200_0c11,
                0x3e4f_0001,
                0x0000_0000,
                0x0000_7731,
            ],
            bus_id: "0000:03:00.0",
            switches: ["0000:02:00.0", "0000:01:00.0", "0000:00:01.0"],
        },
        DuoChip {
            card_id: 3,
            device_in_card: 1,
            logic_id: 1,
            phy_id: 1,
            die_id: [
                0x1d00_3a42,
                0x0200_0c11,
                0x3e4f_0001,
                0x0000_0000,
                0x0000_7732,
            ],
            bus_id: "0000:04:00.0",
            switches: ["0000:02:08.0", "0000:01:00.0", "0000:00:01.0"],
        },
        DuoChip {
            card_id: 5,
            device_in_card: 0,
            logic_id: 2,
            phy_id: 2,
            die_id: [
                0x1d00_5b01,
                0x0200_0c12,
                0x3e4f_0001,
                0x0000_0000,
                0x0000_8801,
            ],
            bus_id: "0000:83:00.0",
            switches: ["0000:82:00.0", "0000:81:00.0", "0000:80:01.0"],
        },
        DuoChip {
            card_id: 5,
            device_in_card: 1,
            logic_id: 3,
            phy_id: 3,
            die_id: [
                0x1d00_5b02,
                0x0200_0c12,
                0x3e4f_0001,
                0x0000_0000,
                0x0000_8802,
            ],
            bus_id: "0000:84:00.0",
            switches: ["0000:82:08.0", "0000:81:00.0", "0000:80:01.0"],
        },
    ]
}

/// An x86 inference server with two Atlas 300I Duo cards (four 310P3 chips, DDR memory and no
/// HBM), one NUMA node, DCMI from the standalone package in `/usr/local/dcmi`, and a CANN
/// 8.0.RC3 toolkit that has only `compiler/version.info`.
pub fn atlas_300i_duo_node(dir: &Path) -> AscendNode {
    let tree = HostTree::new(dir.join("root"));
    tree.kernel_release("5.15.0-119-generic")
        .numa_node(0, "0-63");
    for chip in duo_chips() {
        let host_bridge = format!("pci0000:{}", &chip.switches[2][5..7]);
        let [down, up, root_port] = chip.switches;
        // The two chips of a card share the root port and the switch's upstream port.
        if chip.device_in_card == 0 {
            tree.pci_bridge(&[&host_bridge, root_port], "8086");
            tree.pci_bridge(&[&host_bridge, root_port, up], "19e5");
        }
        tree.pci_bridge(&[&host_bridge, root_port, up, down], "19e5");
        tree.pci_function(&PciFunction {
            path: &[&host_bridge, root_port, up, down, chip.bus_id],
            vendor: "19e5",
            device: "d500",
            class: "120000",
            revision: "23",
            numa_node: -1,
        });
    }
    tree.file(
        "/usr/local/Ascend/ascend-toolkit/latest/compiler/version.info",
        "Version=7.5.0.1.129\nversion_dir=8.0.RC3\ntimestamp=20240910_000000000\n",
    );
    install_fake_dcmi(&tree, PACKAGE_DCMI_PATH);
    let mut cards: Vec<Value> = Vec::new();
    for card_id in [3, 5] {
        let devices: Vec<Value> = duo_chips()
            .iter()
            .filter(|c| c.card_id == card_id)
            .map(|c| {
                let (bus, device, function) = bdf(c.bus_id);
                json!({
                    "logicId": c.logic_id,
                    "phyId": c.phy_id,
                    "chipType": "Ascend",
                    "chipName": DUO_CHIP_NAME,
                    "chipVer": "V1",
                    "aicoreCount": DUO_AICORES,
                    "dieId": c.die_id,
                    "ddr": {"totalMb": DUO_DDR_MB, "usedMb": 1383 + 100 * c.logic_id as u64},
                    "health": 0,
                    "pcie": {"domain": 0, "bus": bus, "device": device, "function": function,
                             "vendorId": 0x19e5, "deviceId": 0xd500},
                    "aicoreUtilization": 0,
                    "temperature": 48,
                    "powerDeciwatts": 285,
                })
            })
            .collect();
        cards.push(json!({"cardId": card_id, "devices": devices}));
    }
    let dcmi_fixture = dir.join("dcmi.json");
    write_json(
        &dcmi_fixture,
        &json!({"driverVersion": A2_DRIVER_VERSION, "cards": cards}),
    );
    AscendNode {
        root: tree.root().to_path_buf(),
        dcmi_fixture,
    }
}

/// `0000:c1:00.0` → (bus, device, function).
fn bdf(bus_id: &str) -> (u32, u32, u32) {
    let hex = |s: &str| u32::from_str_radix(s, 16).unwrap();
    let (_, rest) = bus_id.split_once(':').unwrap();
    let (bus, rest) = rest.split_once(':').unwrap();
    let (device, function) = rest.split_once('.').unwrap();
    (hex(bus), hex(device), hex(function))
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}
