//! Iluvatar CoreX nodes: host trees (PCI functions, NUMA nodes, the IXML library) and the JSON
//! fixture that the stand-in `libixml.so` serves. The stand-in is the same cdylib as NVIDIA's
//! (crate `gpustack-fake-nvml`), which also exports the unversioned NVML names IXML has; it is
//! installed where the CoreX SDK puts the real library and loaded by path from there.
//!
//! Figures follow a real MR-V100 (CoreX 4.4.0): `ixsmi` reports "Iluvatar MR-V100", 32768 MiB,
//! "CUDA Version: 10.2", a 150 W power limit and UUIDs like
//! `GPU-75401a56-2224-5257-8e2c-8f6dac7c37bc`; `lspci` shows `Processing accelerators [1200]:
//! Device [1e3e:0002]`; the CUDA layer reports compute capability 7.1.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{
    machines::nvidia::fake_nvml_library,
    stand_in,
    sysfs::{HostTree, PciFunction},
};

/// Where the CoreX SDK installs IXML.
pub const IXML_HOST_PATH: &str = "/usr/local/corex/lib64/libixml.so";

pub use crate::machines::nvidia::FIXTURE_ENV;

/// A built node: the host tree to pass as `GPUSTACK_SYSTEM_ROOT`, and the IXML fixture to pass
/// as `GPUSTACK_FAKE_NVML_FIXTURE`.
pub struct IluvatarNode {
    pub root: PathBuf,
    pub ixml_fixture: PathBuf,
}

/// One GPU as the fixture describes it to IXML.
#[derive(Clone, Debug)]
pub struct Gpu {
    pub uuid: &'static str,
    /// Sysfs form, `0000:15:00.0`.
    pub bus_id: &'static str,
    /// The PCIe root port above the card.
    pub root_port: &'static str,
    pub host_bridge: &'static str,
    /// `/dev/iluvatar<minor>`.
    pub minor: u32,
    pub numa_node: i32,
    pub memory_used_mib: u64,
    pub gpu_util: u32,
    pub temperature: u32,
    /// `None`: the card refuses the power query.
    pub power_mw: Option<u32>,
    /// `ixmlDeviceGetHealth` bitmask.
    pub health: u64,
}

impl Gpu {
    /// IXML's bus id: an 8-digit domain, upper-case hex (`ixsmi` shows `00000000:15:00.0`).
    pub fn ixml_bus_id(&self) -> String {
        format!("0000{}", self.bus_id).to_ascii_uppercase()
    }
}

pub const MR_V100_NAME: &str = "Iluvatar MR-V100";
pub const MR_V100_MEMORY_MIB: u64 = 32768;
pub const DRIVER_VERSION: &str = "4.4.0";
/// `nvmlSystemGetCudaDriverVersion` for "CUDA Version: 10.2".
pub const CUDA_DRIVER_VERSION: i32 = 10020;
/// `ixmlHealthECCError`.
pub const HEALTH_ECC_ERROR: u64 = 0x10;

/// The card with an ECC health error.
pub const UNHEALTHY_INDEX: usize = 2;
/// The card that refuses the power query.
pub const NO_POWER_INDEX: usize = 3;

/// Four MR-V100 cards, two per socket, each straight below its own root port. Minor numbers
/// follow the driver's probe order, not IXML's, so `physicalIndexes` must come from IXML.
pub const GPUS: [Gpu; 4] = [
    Gpu {
        uuid: "GPU-75401a56-2224-5257-8e2c-8f6dac7c37bc",
        bus_id: "0000:15:00.0",
        root_port: "0000:14:01.0",
        host_bridge: "pci0000:14",
        minor: 1,
        numa_node: 0,
        memory_used_mib: 116,
        gpu_util: 0,
        temperature: 32,
        power_mw: Some(21_400),
        health: 0,
    },
    Gpu {
        uuid: "GPU-3c0e8f21-9a47-5b1d-8e6f-0a2b4c6d8e10",
        bus_id: "0000:2a:00.0",
        root_port: "0000:29:01.0",
        host_bridge: "pci0000:29",
        minor: 0,
        numa_node: 0,
        memory_used_mib: 20_876,
        gpu_util: 87,
        temperature: 61,
        power_mw: Some(118_950),
        health: 0,
    },
    Gpu {
        uuid: "GPU-9d1f2a33-4b5c-5d6e-8f70-81a2b3c4d5e6",
        bus_id: "0000:98:00.0",
        root_port: "0000:97:01.0",
        host_bridge: "pci0000:97",
        minor: 3,
        numa_node: 1,
        memory_used_mib: 4_096,
        gpu_util: 12,
        temperature: 40,
        power_mw: Some(45_000),
        health: HEALTH_ECC_ERROR,
    },
    Gpu {
        uuid: "GPU-e4f5a6b7-c8d9-5eaf-80b1-c2d3e4f5a6b7",
        bus_id: "0000:b1:00.0",
        root_port: "0000:b0:01.0",
        host_bridge: "pci0000:b0",
        minor: 2,
        numa_node: 1,
        memory_used_mib: 0,
        gpu_util: 0,
        temperature: 30,
        power_mw: None,
        health: 0,
    },
];

/// NUMA 0 and 1 CPU lists (two 28-core sockets with SMT, as on the MR-V100 host).
pub const NUMA_CPUS: [&str; 2] = ["0-27,56-83", "28-55,84-111"];

/// Copies the stand-in into the tree as the CoreX SDK's `libixml.so`.
pub fn install_fake_ixml(tree: &HostTree, host_path: &str) {
    stand_in::install(tree, &fake_nvml_library(), host_path);
}

/// The node's PCI tree without any CoreX library: four MR-V100 (class 1200, device 0002)
/// below their root ports, and an Intel NIC that is not Iluvatar's.
pub fn tree(dir: &Path) -> HostTree {
    let tree = HostTree::new(dir.join("root"));
    tree.kernel_release("5.15.0-119-generic")
        .numa_node(0, NUMA_CPUS[0])
        .numa_node(1, NUMA_CPUS[1]);
    for gpu in &GPUS {
        tree.pci_function(&PciFunction {
            path: &[gpu.host_bridge, gpu.root_port],
            vendor: "8086",
            device: "347a",
            class: "060400",
            revision: "04",
            numa_node: gpu.numa_node,
        });
        tree.pci_function(&PciFunction {
            path: &[gpu.host_bridge, gpu.root_port, gpu.bus_id],
            vendor: "1e3e",
            device: "0002",
            class: "120000",
            revision: "00",
            numa_node: gpu.numa_node,
        });
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

/// The 4x MR-V100 node with IXML installed in `/usr/local/corex/lib64`.
pub fn mr_v100_node(dir: &Path) -> IluvatarNode {
    let tree = tree(dir);
    install_fake_ixml(&tree, IXML_HOST_PATH);
    let devices: Vec<Value> = GPUS
        .iter()
        .map(|g| {
            let mut d = json!({
                "uuid": g.uuid,
                "name": MR_V100_NAME,
                "pciBusId": g.ixml_bus_id(),
                "pciDeviceId": 0x0002_1e3e_u32,
                "memoryTotalMib": MR_V100_MEMORY_MIB,
                "memoryUsedMib": g.memory_used_mib,
                "minor": g.minor,
                "cudaComputeCapability": {"major": 7, "minor": 1},
                "utilization": {"gpu": g.gpu_util, "memory": g.gpu_util / 2},
                "temperature": g.temperature,
                "health": g.health,
            });
            if let Some(p) = g.power_mw {
                d["powerUsageMw"] = json!(p);
            }
            d
        })
        .collect();
    let ixml_fixture = dir.join("ixml.json");
    std::fs::write(
        &ixml_fixture,
        serde_json::to_vec_pretty(&json!({
            "driverVersion": DRIVER_VERSION,
            "cudaDriverVersion": CUDA_DRIVER_VERSION,
            "devices": devices,
        }))
        .unwrap(),
    )
    .unwrap();
    IluvatarNode {
        root: tree.root().to_path_buf(),
        ixml_fixture,
    }
}
