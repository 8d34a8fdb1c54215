//! NVIDIA nodes: host trees (PCI functions, NUMA nodes, the NVML library) and the JSON fixture
//! that the stand-in `libnvidia-ml.so.1` (crate `gpustack-fake-nvml`) serves through the real
//! NVML C ABI. Detection finds the stand-in under the fixture root exactly where the driver
//! installs the real library, and loads it by path.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{
    stand_in,
    sysfs::{HostTree, PciFunction},
};

/// Where the driver's packages install NVML on Debian/Ubuntu x86_64.
pub const NVML_HOST_PATH: &str = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1";

/// The environment variable the stand-in reads its fixture from.
pub const FIXTURE_ENV: &str = "GPUSTACK_FAKE_NVML_FIXTURE";

/// A built node: the host tree to pass as `GPUSTACK_SYSTEM_ROOT`, and the NVML fixture to pass
/// as `GPUSTACK_FAKE_NVML_FIXTURE`.
pub struct NvidiaNode {
    pub root: PathBuf,
    pub nvml_fixture: PathBuf,
}

/// The stand-in library built into this target directory (`cargo build --workspace` puts
/// `libgpustack_fake_nvml.so` beside the test executables' `deps/` folder), or the one named by
/// `GPUSTACK_FAKE_NVML_LIB`.
pub fn fake_nvml_library() -> PathBuf {
    stand_in::built("gpustack_fake_nvml", "GPUSTACK_FAKE_NVML_LIB")
}

/// Copies the stand-in into the tree as the driver's `libnvidia-ml.so.1`.
pub fn install_fake_nvml(tree: &HostTree) {
    stand_in::install(tree, &fake_nvml_library(), NVML_HOST_PATH);
}

/// One GPU as the fixture describes it to NVML.
#[derive(Clone, Debug)]
pub struct Gpu {
    pub uuid: &'static str,
    /// Sysfs form, `0000:18:00.0`; NVML's form is derived (`00000000:18:00.0`).
    pub bus_id: &'static str,
    pub minor: u32,
    pub numa_node: i32,
    pub memory_used_mib: u64,
    pub ecc_uncorrected: u64,
    /// Over the card's life (`NVML_AGGREGATE_ECC`): at least the volatile count.
    pub ecc_uncorrected_lifetime: u64,
    pub gpu_util: u32,
    pub temperature: u32,
    pub power_mw: u32,
}

impl Gpu {
    /// NVML's bus id: an 8-digit domain, upper-case hex.
    pub fn nvml_bus_id(&self) -> String {
        format!("0000{}", self.bus_id).to_ascii_uppercase()
    }
}

/// A PCIe switch with two GPUs below it, reached through one root port.
struct Switch {
    host_bridge: &'static str,
    root_port: &'static str,
    upstream: &'static str,
    /// One downstream port per GPU, in the GPUs' order.
    downstream: [&'static str; 2],
}

/// The 8x H100 node: GPU index, uuid, bus id, minor, NUMA node. Minor numbers follow the order
/// the driver probed the cards in, which is not NVML's order: `physicalIndexes` must come from
/// NVML, not from the index.
pub const H100_GPUS: [Gpu; 8] = [
    h100(
        0,
        "GPU-5b2e7a1c-0d3f-4a8b-9c6e-1f2a3b4c5d60",
        "0000:18:00.0",
        2,
        0,
    ),
    h100(
        1,
        "GPU-6c3f8b2d-1e4a-4b9c-8d7f-2a3b4c5d6e71",
        "0000:2a:00.0",
        3,
        0,
    ),
    h100(
        2,
        "GPU-7d4a9c3e-2f5b-4cad-9e8a-3b4c5d6e7f82",
        "0000:3a:00.0",
        0,
        0,
    ),
    h100(
        3,
        "GPU-8e5bad4f-3a6c-4dbe-8f9b-4c5d6e7f8a93",
        "0000:5d:00.0",
        1,
        0,
    ),
    h100(
        4,
        "GPU-9f6cbe5a-4b7d-4ecf-9a0c-5d6e7f8a9ba4",
        "0000:9a:00.0",
        6,
        1,
    ),
    h100(
        5,
        "GPU-a07dcf6b-5c8e-4fd0-8b1d-6e7f8a9bacb5",
        "0000:ab:00.0",
        7,
        1,
    ),
    h100(
        6,
        "GPU-b18ed07c-6d9f-40e1-9c2e-7f8a9bacbdc6",
        "0000:ba:00.0",
        4,
        1,
    ),
    h100(
        7,
        "GPU-c29fe18d-7ea0-41f2-8d3f-8a9bacbdced7",
        "0000:db:00.0",
        5,
        1,
    ),
];

/// The card with uncorrected ECC errors on the H100 node.
pub const H100_UNHEALTHY_INDEX: usize = 5;
/// The card with uncorrected errors in its lifetime count only.
pub const H100_RETIRED_ERRORS_INDEX: usize = 2;

/// One GPU-instance profile as `nvidia-smi mig -lgip` / `-lgipp` list it: NVML's enumeration
/// index, creation id, name, compute slices, instances, memory (MiB) and slot starts; every
/// slot spans `memory_slices`.
#[derive(Clone, Copy, Debug)]
pub struct MigProfile {
    pub index: u32,
    pub id: u32,
    pub name: &'static str,
    pub compute_slices: u32,
    pub memory_slices: u32,
    pub count: u32,
    pub memory_mib: u64,
    pub starts: &'static [u32],
}

const fn mig(
    index: u32,
    id: u32,
    name: &'static str,
    (compute_slices, memory_slices): (u32, u32),
    count: u32,
    memory_mib: u64,
    starts: &'static [u32],
) -> MigProfile {
    MigProfile {
        index,
        id,
        name,
        compute_slices,
        memory_slices,
        count,
        memory_mib,
        starts,
    }
}

const SEVEN: &[u32] = &[0, 1, 2, 3, 4, 5, 6];

/// An A100-SXM4-80GB's profiles (driver 535), in NVML's enumeration order; memory is the GiB
/// column × 1024 (9.50 GiB → 9728).
/// What the NVML stand-in reports used on each MIG device of the A100 fixture (MiB).
pub const A100_MIG_MEMORY_USED_MIB: u64 = 1_536;

pub const A100_MIG_PROFILES: [MigProfile; 7] = [
    mig(0, 19, "MIG 1g.10gb", (1, 1), 7, 9728, SEVEN),
    mig(1, 14, "MIG 2g.20gb", (2, 2), 3, 19968, &[0, 2, 4]),
    mig(2, 9, "MIG 3g.40gb", (3, 4), 2, 40192, &[0, 4]),
    mig(3, 5, "MIG 4g.40gb", (4, 4), 1, 40192, &[0]),
    mig(4, 0, "MIG 7g.80gb", (7, 8), 1, 81152, &[0]),
    mig(7, 20, "MIG 1g.10gb+me", (1, 1), 1, 9728, SEVEN),
    mig(9, 15, "MIG 1g.20gb", (1, 2), 4, 19968, &[0, 2, 4, 6]),
];

/// An H100 80GB HBM3's profiles (driver 550), as above.
pub const H100_MIG_PROFILES: [MigProfile; 7] = [
    mig(0, 19, "MIG 1g.10gb", (1, 1), 7, 9984, SEVEN),
    mig(1, 14, "MIG 2g.20gb", (2, 2), 3, 20096, &[0, 2, 4]),
    mig(2, 9, "MIG 3g.40gb", (3, 4), 2, 40448, &[0, 4]),
    mig(3, 5, "MIG 4g.40gb", (4, 4), 1, 40448, &[0]),
    mig(4, 0, "MIG 7g.80gb", (7, 8), 1, 81152, &[0]),
    mig(7, 20, "MIG 1g.10gb+me", (1, 1), 1, 9984, SEVEN),
    mig(9, 15, "MIG 1g.20gb", (1, 2), 4, 20096, &[0, 2, 4, 6]),
];

/// The fixture's `migProfiles` list.
pub fn mig_profiles(profiles: &[MigProfile]) -> Value {
    profiles
        .iter()
        .map(|p| {
            json!({
                "index": p.index,
                "id": p.id,
                "name": p.name,
                "sliceCount": p.compute_slices,
                "instanceCount": p.count,
                "memorySizeMb": p.memory_mib,
                "placements": p.starts.iter().map(|&start| json!({"start": start, "size": p.memory_slices})).collect::<Vec<_>>(),
            })
        })
        .collect()
}

const fn h100(i: u32, uuid: &'static str, bus_id: &'static str, minor: u32, numa_node: i32) -> Gpu {
    Gpu {
        uuid,
        bus_id,
        minor,
        numa_node,
        memory_used_mib: 1024 * i as u64 + 1,
        ecc_uncorrected: if i as usize == H100_UNHEALTHY_INDEX {
            2
        } else {
            0
        },
        // Card 2 had uncorrected errors before the driver last loaded (their pages are retired
        // since): only the volatile count makes a card unhealthy now.
        ecc_uncorrected_lifetime: match i as usize {
            H100_UNHEALTHY_INDEX => 3,
            H100_RETIRED_ERRORS_INDEX => 4,
            _ => 0,
        },
        gpu_util: 10 * i,
        temperature: 30 + i,
        power_mw: 70_000 + 1_500 * i,
    }
}

/// Two GPUs per switch, two switches per socket: 18/2a and 3a/5d on NUMA node 0, 9a/ab and
/// ba/db on node 1. Paths are innermost-first `[downstream, upstream, root port]`.
const H100_SWITCHES: [Switch; 4] = [
    Switch {
        host_bridge: "pci0000:15",
        root_port: "0000:15:01.0",
        upstream: "0000:16:00.0",
        downstream: ["0000:17:00.0", "0000:17:10.0"],
    },
    Switch {
        host_bridge: "pci0000:37",
        root_port: "0000:37:01.0",
        upstream: "0000:38:00.0",
        downstream: ["0000:39:00.0", "0000:39:10.0"],
    },
    Switch {
        host_bridge: "pci0000:97",
        root_port: "0000:97:01.0",
        upstream: "0000:98:00.0",
        downstream: ["0000:99:00.0", "0000:99:10.0"],
    },
    Switch {
        host_bridge: "pci0000:b7",
        root_port: "0000:b7:01.0",
        upstream: "0000:b8:00.0",
        downstream: ["0000:b9:00.0", "0000:b9:10.0"],
    },
];

/// The PCI bridges above an H100 node GPU, innermost first, as detection must report them.
pub fn h100_switch_path(index: usize) -> [&'static str; 3] {
    let s = &H100_SWITCHES[index / 2];
    [s.downstream[index % 2], s.upstream, s.root_port]
}

pub const H100_DRIVER_VERSION: &str = "550.54.15";
pub const H100_CUDA_VERSION: i32 = 12040;
/// What NVML reports for an H100 SXM5 80GB.
pub const H100_MEMORY_MIB: u64 = 81559;
pub const H100_CORES: u32 = 16896;
pub const H100_NAME: &str = "NVIDIA H100 80GB HBM3";

/// An HGX H100 8-GPU node: two sockets (NUMA 0: CPUs 0-55, NUMA 1: 56-111), four Broadcom PCIe
/// switches with two SXM5 GPUs each, driver 550 with CUDA 12.4, GPU 5 with uncorrected ECC
/// errors, MIG off everywhere.
pub fn hgx_h100_node(dir: &Path) -> NvidiaNode {
    let tree = HostTree::new(dir.join("root"));
    tree.kernel_release("5.15.0-105-generic")
        .numa_node(0, "0-55")
        .numa_node(1, "56-111");
    for (s, switch) in H100_SWITCHES.iter().enumerate() {
        let numa_node = if s < 2 { 0 } else { 1 };
        let root_port = [switch.host_bridge, switch.root_port];
        bridge(&tree, &root_port, "8086", numa_node);
        let upstream = [switch.host_bridge, switch.root_port, switch.upstream];
        bridge(&tree, &upstream, "1000", numa_node);
        for (slot, downstream) in switch.downstream.iter().enumerate() {
            let gpu = &H100_GPUS[2 * s + slot];
            let port = [
                switch.host_bridge,
                switch.root_port,
                switch.upstream,
                downstream,
            ];
            bridge(&tree, &port, "1000", numa_node);
            let path = [
                switch.host_bridge,
                switch.root_port,
                switch.upstream,
                downstream,
                gpu.bus_id,
            ];
            tree.pci_function(&PciFunction {
                path: &path,
                vendor: "10de",
                device: "2330",
                class: "030200",
                revision: "a1",
                numa_node: gpu.numa_node,
            });
        }
    }
    // The node's NICs (one per switch pair on a real HGX) are Mellanox: not NVIDIA's vendor id.
    tree.pci_function(&PciFunction {
        path: &["pci0000:15", "0000:15:03.0", "0000:1c:00.0"],
        vendor: "15b3",
        device: "1021",
        class: "020700",
        revision: "00",
        numa_node: 0,
    });
    install_fake_nvml(&tree);
    let devices: Vec<Value> = H100_GPUS
        .iter()
        .map(|g| {
            json!({
                "uuid": g.uuid,
                "name": H100_NAME,
                "pciBusId": g.nvml_bus_id(),
                "pciDeviceId": 0x2330_10de_u32,
                "pciSubSystemId": 0x16c1_10de_u32,
                "memoryTotalMib": H100_MEMORY_MIB,
                "memoryUsedMib": g.memory_used_mib,
                "memoryReservedMib": 530,
                "cores": H100_CORES,
                "minor": g.minor,
                "cudaComputeCapability": {"major": 9, "minor": 0},
                "eccEnabled": true,
                "eccUncorrectedVolatile": g.ecc_uncorrected,
                "eccCorrectedVolatile": 0,
                "eccUncorrectedAggregate": g.ecc_uncorrected_lifetime,
                "eccCorrectedAggregate": 12,
                "memoryBusWidth": 5120,
                "migMode": {"current": 0, "pending": 0},
                "migProfiles": mig_profiles(&H100_MIG_PROFILES),
                "utilization": {"gpu": g.gpu_util, "memory": g.gpu_util / 2},
                "temperature": g.temperature,
                "powerUsageMw": g.power_mw,
            })
        })
        .collect();
    let nvml_fixture = dir.join("nvml.json");
    write_json(
        &nvml_fixture,
        &json!({
            "driverVersion": H100_DRIVER_VERSION,
            "cudaDriverVersion": H100_CUDA_VERSION,
            "devices": devices,
        }),
    );
    NvidiaNode {
        root: tree.root().to_path_buf(),
        nvml_fixture,
    }
}

pub const A100_UUID: &str = "GPU-1f0e2d3c-4b5a-4697-8877-a6b5c4d3e2f1";
pub const A100_BUS_ID: &str = "0000:07:00.0";
pub const A100_NAME: &str = "NVIDIA A100-SXM4-80GB";
pub const A100_MEMORY_MIB: u64 = 81920;
pub const A100_DRIVER_VERSION: &str = "535.161.08";
pub const A100_CUDA_VERSION: i32 = 12020;

/// One A100-SXM4-80GB with MIG enabled, straight below a root port on a one-socket machine
/// whose firmware reports no NUMA node (`numa_node` -1). In MIG mode NVML does not report
/// utilization: the monitor must leave it absent.
pub fn a100_mig_node(dir: &Path) -> NvidiaNode {
    let tree = HostTree::new(dir.join("root"));
    tree.kernel_release("6.8.0-45-generic").numa_node(0, "0-31");
    bridge(&tree, &["pci0000:00", "0000:00:03.1"], "1022", -1);
    tree.pci_function(&PciFunction {
        path: &["pci0000:00", "0000:00:03.1", A100_BUS_ID],
        vendor: "10de",
        device: "20b2",
        class: "030200",
        revision: "a1",
        numa_node: -1,
    });
    install_fake_nvml(&tree);
    let nvml_fixture = dir.join("nvml.json");
    write_json(
        &nvml_fixture,
        &json!({
            "driverVersion": A100_DRIVER_VERSION,
            "cudaDriverVersion": A100_CUDA_VERSION,
            "devices": [{
                "uuid": A100_UUID,
                "name": A100_NAME,
                "pciBusId": "00000000:07:00.0",
                "pciDeviceId": 0x20b2_10de_u32,
                "memoryTotalMib": A100_MEMORY_MIB,
                "memoryUsedMib": 13,
                "cores": 6912,
                "minor": 0,
                "cudaComputeCapability": {"major": 8, "minor": 0},
                "eccEnabled": true,
                "eccUncorrectedVolatile": 0,
                "eccUncorrectedAggregate": 0,
                "memoryBusWidth": 5120,
                "migMode": {"current": 1, "pending": 1},
                "migProfiles": mig_profiles(&A100_MIG_PROFILES),
                "migMemoryUsedMib": A100_MIG_MEMORY_USED_MIB,
                "temperature": 31,
                "powerUsageMw": 62_345,
            }],
        }),
    );
    NvidiaNode {
        root: tree.root().to_path_buf(),
        nvml_fixture,
    }
}

pub const L4_BUS_ID: &str = "0000:01:00.0";

/// An NVIDIA L4 in the PCI tree but no NVML anywhere under the root (a container started
/// without the nvidia runtime). Returns the root.
pub fn no_nvml_node(dir: &Path) -> PathBuf {
    let tree = HostTree::new(dir.join("root"));
    tree.kernel_release("6.1.0-18-amd64").numa_node(0, "0-15");
    bridge(&tree, &["pci0000:00", "0000:00:01.0"], "8086", -1);
    tree.pci_function(&PciFunction {
        path: &["pci0000:00", "0000:00:01.0", L4_BUS_ID],
        vendor: "10de",
        device: "27b8",
        class: "030200",
        revision: "a1",
        numa_node: -1,
    });
    tree.root().to_path_buf()
}

fn bridge(tree: &HostTree, path: &[&str], vendor: &str, numa_node: i32) {
    tree.pci_function(&PciFunction {
        path,
        vendor,
        device: "0000",
        class: "060400",
        revision: "00",
        numa_node,
    });
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}
