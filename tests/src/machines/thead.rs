//! A T-Head (Alibaba) PPU node: the host tree (PCI functions behind PCIe switches, two NUMA
//! nodes, the HGML library) and the JSON fixture the stand-in `libhgml.so` (crate
//! `gpustack-fake-nvml`, under its `hgml` prefix) serves. The stand-in is installed where the PPU SDK puts the real
//! library, `/usr/local/PPU_SDK/lib/libhgml.so`, and loaded by path from there.
//!
//! Figures from public reports of PPU-ZW810E machines: product name `PPU-ZW810E`, 96 GiB of
//! memory per card (98304 MiB), driver `1.3.2-d7f5a2`, HGGC 13.0 (`hgmlSystemGetHggcDriverVersion`
//! 13000), compute capability 8.0, 8- and 16-card nodes, PCI vendor `1ded`. Not from a source,
//! and illustrative only: the PCI device id, the UUID spelling (NVML's `GPU-` form), the core
//! count, the utilisation/power figures and the MIG profile geometry.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{
    stand_in,
    sysfs::{HostTree, PciFunction},
};

/// Where the PPU SDK installs HGML.
pub const HGML_HOST_PATH: &str = "/usr/local/PPU_SDK/lib/libhgml.so";
/// The variable the stand-in reads its fixture from.
pub const FIXTURE_ENV: &str = "GPUSTACK_FAKE_HGML_FIXTURE";

pub const PPU_NAME: &str = "PPU-ZW810E";
pub const PPU_MEMORY_MIB: u64 = 98_304;
/// Illustrative: no public source gives the PPU's core count.
pub const PPU_CORES: u32 = 128;
pub const DRIVER_VERSION: &str = "1.3.2-d7f5a2";
/// `hgmlSystemGetHggcDriverVersion` for HGGC 13.0.
pub const HGGC_DRIVER_VERSION: i32 = 13_000;
/// Illustrative PCI device id.
pub const PPU_DEVICE_ID: &str = "8810";

/// A built node: the host tree to pass as `GPUSTACK_SYSTEM_ROOT`, and the HGML fixture to pass
/// as `GPUSTACK_FAKE_HGML_FIXTURE`.
pub struct TheadNode {
    pub root: PathBuf,
    pub hgml_fixture: PathBuf,
}

/// One PPU as the fixture describes it to HGML.
#[derive(Clone, Debug)]
pub struct Ppu {
    pub uuid: &'static str,
    /// Sysfs form, `0000:18:00.0`.
    pub bus_id: &'static str,
    /// `None`: the driver refuses the minor number query.
    pub minor: Option<u32>,
    pub numa_node: i32,
    pub memory_used_mib: u64,
    pub ecc_uncorrected: u64,
    pub gpu_util: u32,
    pub temperature: u32,
    /// `None`: the card refuses the power query.
    pub power_mw: Option<u32>,
    pub mig: bool,
}

impl Ppu {
    /// HGML's bus id: an 8-digit domain, upper-case hex.
    pub fn hgml_bus_id(&self) -> String {
        format!("0000{}", self.bus_id).to_ascii_uppercase()
    }
}

/// A PCIe switch with two PPUs below it, reached through one root port.
pub struct Switch {
    pub host_bridge: &'static str,
    pub root_port: &'static str,
    pub upstream: &'static str,
    /// One downstream port per PPU, in the PPUs' order.
    pub downstream: [&'static str; 2],
    pub numa_node: i32,
}

pub const SWITCHES: [Switch; 4] = [
    Switch {
        host_bridge: "pci0000:15",
        root_port: "0000:15:01.0",
        upstream: "0000:16:00.0",
        downstream: ["0000:17:00.0", "0000:17:01.0"],
        numa_node: 0,
    },
    Switch {
        host_bridge: "pci0000:36",
        root_port: "0000:36:01.0",
        upstream: "0000:37:00.0",
        downstream: ["0000:38:00.0", "0000:38:01.0"],
        numa_node: 0,
    },
    Switch {
        host_bridge: "pci0000:95",
        root_port: "0000:95:01.0",
        upstream: "0000:96:00.0",
        downstream: ["0000:97:00.0", "0000:97:01.0"],
        numa_node: 1,
    },
    Switch {
        host_bridge: "pci0000:b6",
        root_port: "0000:b6:01.0",
        upstream: "0000:b7:00.0",
        downstream: ["0000:b8:00.0", "0000:b8:01.0"],
        numa_node: 1,
    },
];

/// The card with uncorrected ECC errors.
pub const UNHEALTHY_INDEX: usize = 2;
/// The card that refuses the power query.
pub const NO_POWER_INDEX: usize = 3;
/// The card whose driver does not answer the minor number.
pub const NO_MINOR_INDEX: usize = 5;
/// The card in MIG mode.
pub const MIG_INDEX: usize = 7;

const fn ppu(uuid: &'static str, bus_id: &'static str, minor: u32, numa_node: i32) -> Ppu {
    Ppu {
        uuid,
        bus_id,
        minor: Some(minor),
        numa_node,
        memory_used_mib: 0,
        ecc_uncorrected: 0,
        gpu_util: 0,
        temperature: 35,
        power_mw: Some(98_000),
        mig: false,
    }
}

/// Eight PPU-ZW810E, two per switch, two switches per socket. Minor numbers follow the
/// driver's probe order, not HGML's, so `physicalIndexes` must come from HGML.
pub const PPUS: [Ppu; 8] = [
    Ppu {
        memory_used_mib: 81_920,
        gpu_util: 97,
        temperature: 63,
        power_mw: Some(351_250),
        ..ppu(
            "GPU-1f6a2b3c-4d5e-4f60-8a71-b2c3d4e5f601",
            "0000:18:00.0",
            1,
            0,
        )
    },
    ppu(
        "GPU-2a7b3c4d-5e6f-4071-9b82-c3d4e5f6a712",
        "0000:19:00.0",
        0,
        0,
    ),
    Ppu {
        ecc_uncorrected: 3,
        ..ppu(
            "GPU-3b8c4d5e-6f70-4182-8c93-d4e5f6a7b823",
            "0000:39:00.0",
            3,
            0,
        )
    },
    Ppu {
        power_mw: None,
        ..ppu(
            "GPU-4c9d5e6f-7081-4293-9da4-e5f6a7b8c934",
            "0000:3a:00.0",
            2,
            0,
        )
    },
    ppu(
        "GPU-5dae6f70-8192-43a4-8eb5-f6a7b8c9da45",
        "0000:98:00.0",
        4,
        1,
    ),
    Ppu {
        minor: None,
        ..ppu(
            "GPU-6ebf7081-92a3-44b5-9fc6-a7b8c9daeb56",
            "0000:99:00.0",
            5,
            1,
        )
    },
    ppu(
        "GPU-7fc08192-a3b4-45c6-80d7-b8c9daebfc67",
        "0000:b9:00.0",
        7,
        1,
    ),
    Ppu {
        mig: true,
        ..ppu(
            "GPU-80d192a3-b4c5-46d7-91e8-c9daebfc0d78",
            "0000:ba:00.0",
            6,
            1,
        )
    },
];

/// NUMA 0 and 1 CPU lists (two 48-core sockets with SMT).
pub const NUMA_CPUS: [&str; 2] = ["0-47,96-143", "48-95,144-191"];

/// One GPU-instance profile of the MIG card, as the stand-in serves it.
pub struct MigProfile {
    /// The enumeration index `hgmlDeviceGetGpuInstanceProfileInfoV` is asked for.
    pub index: u32,
    /// The creation id the record carries, which the placement query takes.
    pub id: u32,
    pub name: &'static str,
    pub compute_slices: u32,
    pub count: u32,
    pub memory_mb: u64,
    /// Memory slices of every placement.
    pub slot_size: u32,
    /// First memory slice of every legal placement on an empty card.
    pub starts: &'static [u32],
}

/// The MIG card's profiles. The creation ids differ from the indexes, as the Go operator says
/// they do on this hardware; a media-engine variant is listed and must not be published.
pub const MIG_PROFILES: [MigProfile; 4] = [
    MigProfile {
        index: 0,
        id: 19,
        name: "1g.24gb",
        compute_slices: 1,
        count: 4,
        memory_mb: 24_320,
        slot_size: 1,
        starts: &[0, 1, 2, 3],
    },
    MigProfile {
        index: 1,
        id: 20,
        name: "1g.24gb+me",
        compute_slices: 1,
        count: 1,
        memory_mb: 24_320,
        slot_size: 1,
        starts: &[0, 1, 2, 3],
    },
    MigProfile {
        index: 5,
        id: 14,
        name: "2g.48gb",
        compute_slices: 2,
        count: 2,
        memory_mb: 48_768,
        slot_size: 2,
        starts: &[0, 2],
    },
    MigProfile {
        index: 9,
        id: 0,
        name: "4g.96gb",
        compute_slices: 4,
        count: 1,
        memory_mb: 97_792,
        slot_size: 4,
        starts: &[0],
    },
];

/// Copies the stand-in into the tree at `host_path`.
pub fn install_fake_hgml(tree: &HostTree, host_path: &str) {
    stand_in::install(tree, &fake_hgml_library(), host_path);
}

/// The stand-in `libhgml.so` built into this target directory (the NVML-shaped stand-in, which
/// exports the `hgml` names too), or `GPUSTACK_FAKE_HGML_LIB`.
pub fn fake_hgml_library() -> PathBuf {
    stand_in::built("gpustack_fake_nvml", "GPUSTACK_FAKE_HGML_LIB")
}

/// The node's PCI tree without any PPU SDK: eight PPUs (class 1200) two per PCIe switch, and an
/// Intel NIC that is not T-Head's.
pub fn tree(dir: &Path) -> HostTree {
    let tree = HostTree::new(dir.join("root"));
    tree.kernel_release("5.10.134-16.3.al8.x86_64")
        .numa_node(0, NUMA_CPUS[0])
        .numa_node(1, NUMA_CPUS[1]);
    for (s, pair) in SWITCHES.iter().zip(PPUS.chunks(2)) {
        tree.pci_bridge(&[s.host_bridge, s.root_port], "8086")
            .pci_bridge(&[s.host_bridge, s.root_port, s.upstream], "1000");
        for (down, p) in s.downstream.iter().zip(pair) {
            tree.pci_bridge(&[s.host_bridge, s.root_port, s.upstream, down], "1000");
            tree.pci_function(&PciFunction {
                path: &[s.host_bridge, s.root_port, s.upstream, down, p.bus_id],
                vendor: "1ded",
                device: PPU_DEVICE_ID,
                class: "120000",
                revision: "01",
                numa_node: p.numa_node,
            });
        }
    }
    tree.pci_function(&PciFunction {
        path: &["pci0000:00", "0000:00:1c.0", "0000:03:00.0"],
        vendor: "8086",
        device: "1521",
        class: "020000",
        revision: "01",
        numa_node: 0,
    });
    tree
}

/// The HGML fixture of [`PPUS`].
pub fn fixture() -> Value {
    let devices: Vec<Value> = PPUS
        .iter()
        .map(|p| {
            let mut d = json!({
                "uuid": p.uuid,
                "name": PPU_NAME,
                "pciBusId": p.hgml_bus_id(),
                "memoryTotalMib": PPU_MEMORY_MIB,
                "memoryUsedMib": p.memory_used_mib,
                "cores": PPU_CORES,
                "computeCapability": {"major": 8, "minor": 0},
                "eccUncorrectedVolatile": p.ecc_uncorrected,
                "migMode": {"current": u32::from(p.mig), "pending": u32::from(p.mig)},
                "utilization": {"gpu": p.gpu_util, "memory": p.gpu_util / 2},
                "temperature": p.temperature,
            });
            if let Some(minor) = p.minor {
                d["minor"] = json!(minor);
            }
            if let Some(mw) = p.power_mw {
                d["powerUsageMw"] = json!(mw);
            }
            if p.mig {
                d["migProfiles"] = MIG_PROFILES
                    .iter()
                    .map(|m| {
                        json!({
                            "index": m.index,
                            "id": m.id,
                            "name": m.name,
                            "sliceCount": m.compute_slices,
                            "instanceCount": m.count,
                            "memorySizeMb": m.memory_mb,
                            "placements": m
                                .starts
                                .iter()
                                .map(|s| json!({"start": s, "size": m.slot_size}))
                                .collect::<Vec<_>>(),
                        })
                    })
                    .collect();
            }
            d
        })
        .collect();
    json!({
        "driverVersion": DRIVER_VERSION,
        "hggcDriverVersion": HGGC_DRIVER_VERSION,
        "devices": devices,
    })
}

/// Writes `fixture` beside the tree and returns its path.
pub fn write_fixture(dir: &Path, fixture: &Value) -> PathBuf {
    let path = dir.join("hgml.json");
    std::fs::write(&path, serde_json::to_vec_pretty(fixture).unwrap()).unwrap();
    path
}

/// The 8x PPU-ZW810E node with HGML installed in `/usr/local/PPU_SDK/lib`.
pub fn zw810e_node(dir: &Path) -> TheadNode {
    let tree = tree(dir);
    install_fake_hgml(&tree, HGML_HOST_PATH);
    TheadNode {
        root: tree.root().to_path_buf(),
        hgml_fixture: write_fixture(dir, &fixture()),
    }
}
