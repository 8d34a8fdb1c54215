//! Moore Threads nodes: host trees (PCI functions behind PCIe switches, NUMA nodes, the MTML
//! library) and the JSON fixture that the stand-in `libmtml.so` (crate `gpustack-fake-mtml`)
//! serves through the real MTML C ABI. Detection finds the stand-in under the fixture root
//! where the mthreads container runtime injects the real library, and loads it by path.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{
    stand_in,
    sysfs::{HostTree, PciFunction},
};

/// Where the mthreads container runtime injects MTML.
pub const RUNTIME_MTML_PATH: &str = "/usr/lib/x86_64-linux-gnu/libmtml.so";
/// The MUSA toolkit's copy.
pub const MUSA_MTML_PATH: &str = "/usr/local/musa/lib/libmtml.so";

/// The environment variable the stand-in reads its fixture from.
pub const FIXTURE_ENV: &str = "GPUSTACK_FAKE_MTML_FIXTURE";

pub const NAME: &str = "MTT S4000";
/// 48 GB of GDDR6 as `mtmlMemoryGetTotal` reports it (bytes).
pub const MEMORY_BYTES: u64 = 48 * 1024 * 1024 * 1024;
pub const MEMORY_MIB: u64 = 49152;
pub const MUSA_CORES: u32 = 8192;
pub const DRIVER_VERSION: &str = "2.7.0";
/// The GPU with uncorrected ECC errors.
pub const UNHEALTHY_INDEX: usize = 2;
/// The GPU whose power MTML does not report.
pub const NO_POWER_INDEX: usize = 4;
/// The GPU whose temperature MTML does not report.
pub const NO_TEMPERATURE_INDEX: usize = 6;

/// A built node: the host tree to pass as `GPUSTACK_SYSTEM_ROOT`, and the MTML fixture to pass
/// as `GPUSTACK_FAKE_MTML_FIXTURE`.
pub struct MthreadsNode {
    pub root: PathBuf,
    pub mtml_fixture: PathBuf,
}

/// The stand-in library built into this target directory (`cargo build` puts
/// `libgpustack_fake_mtml.so` beside the test executables' `deps/` folder), or the one named by
/// `GPUSTACK_FAKE_MTML_LIB`.
pub fn fake_mtml_library() -> PathBuf {
    stand_in::built("gpustack_fake_mtml", "GPUSTACK_FAKE_MTML_LIB")
}

/// One S4000 of the node, in MTML index order.
#[derive(Clone, Debug)]
pub struct Gpu {
    pub uuid: String,
    /// Sysfs form, `0000:19:00.0`.
    pub bus_id: &'static str,
    /// Bridges above it, innermost first: switch downstream port, upstream port, root port.
    pub switches: [&'static str; 3],
    pub numa_node: u32,
    pub used_bytes: u64,
    pub utilization: u32,
    pub temperature: Option<u32>,
    pub power_mw: Option<u32>,
    pub uncorrected_ecc: u64,
}

impl Gpu {
    pub fn used_mib(&self) -> u64 {
        self.used_bytes / (1024 * 1024)
    }
}

/// The eight GPUs: two per PCIe switch, two switches per socket.
pub fn gpus() -> Vec<Gpu> {
    let place: [(&str, [&str; 3], u32); 8] = [
        (
            "0000:19:00.0",
            ["0000:18:00.0", "0000:17:00.0", "0000:16:01.0"],
            0,
        ),
        (
            "0000:1a:00.0",
            ["0000:18:01.0", "0000:17:00.0", "0000:16:01.0"],
            0,
        ),
        (
            "0000:3b:00.0",
            ["0000:3a:00.0", "0000:39:00.0", "0000:38:01.0"],
            0,
        ),
        (
            "0000:3c:00.0",
            ["0000:3a:01.0", "0000:39:00.0", "0000:38:01.0"],
            0,
        ),
        (
            "0000:9b:00.0",
            ["0000:9a:00.0", "0000:99:00.0", "0000:98:01.0"],
            1,
        ),
        (
            "0000:9c:00.0",
            ["0000:9a:01.0", "0000:99:00.0", "0000:98:01.0"],
            1,
        ),
        (
            "0000:bb:00.0",
            ["0000:ba:00.0", "0000:b9:00.0", "0000:b8:01.0"],
            1,
        ),
        (
            "0000:bc:00.0",
            ["0000:ba:01.0", "0000:b9:00.0", "0000:b8:01.0"],
            1,
        ),
    ];
    place
        .iter()
        .enumerate()
        .map(|(i, &(bus_id, switches, numa_node))| Gpu {
            uuid: format!("2d7e41a0-93c5-4b1e-a6f2-0c58e3b9d1{:02x}", 0x40 + i),
            bus_id,
            switches,
            numa_node,
            used_bytes: (1536 + 2048 * i as u64) * 1024 * 1024,
            utilization: 9 * i as u32,
            temperature: (i != NO_TEMPERATURE_INDEX).then_some(38 + i as u32),
            power_mw: (i != NO_POWER_INDEX).then_some(61_250 + 10_000 * i as u32),
            uncorrected_ecc: if i == UNHEALTHY_INDEX { 3 } else { 0 },
        })
        .collect()
}

/// An 8x Moore Threads MTT S4000 (48 GB) server: two NUMA nodes (0: CPUs 0-47, 1: 48-95), two
/// GPUs per PCIe switch, driver 2.7.0 with MTML where the mthreads runtime injects it (or at
/// `library`). GPU 2 has uncorrected ECC errors, GPU 4's power and GPU 6's temperature are not
/// reported.
pub fn s4000_node(dir: &Path) -> MthreadsNode {
    s4000_node_with_library(dir, RUNTIME_MTML_PATH)
}

/// [`s4000_node`] with MTML installed at `library` (a host path).
pub fn s4000_node_with_library(dir: &Path, library: &str) -> MthreadsNode {
    let tree = HostTree::new(dir.join("root"));
    tree.kernel_release("5.15.0-105-generic")
        .numa_node(0, "0-47")
        .numa_node(1, "48-95");
    let gpus = gpus();
    for (i, gpu) in gpus.iter().enumerate() {
        let [down, up, root_port] = gpu.switches;
        let host_bridge = format!("pci0000:{}", &root_port[5..7]);
        // The two GPUs of a switch share its root port and upstream port.
        if i % 2 == 0 {
            tree.pci_bridge(&[&host_bridge, root_port], "8086");
            tree.pci_bridge(&[&host_bridge, root_port, up], "1000");
        }
        tree.pci_bridge(&[&host_bridge, root_port, up, down], "1000");
        tree.pci_function(&PciFunction {
            path: &[&host_bridge, root_port, up, down, gpu.bus_id],
            vendor: "1ed5",
            device: "0222",
            class: "030000",
            revision: "00",
            numa_node: gpu.numa_node as i32,
        });
    }
    install_fake_mtml(&tree, library);

    let devices: Vec<Value> = gpus
        .iter()
        .map(|gpu| {
            json!({
                "uuid": gpu.uuid,
                "name": NAME,
                // MTML prints the domain with eight digits, as NVML does.
                "sbdf": format!("0000{}", gpu.bus_id),
                "memoryTotalBytes": MEMORY_BYTES,
                "memoryUsedBytes": gpu.used_bytes,
                "gpuCores": MUSA_CORES,
                "gpuUtilization": gpu.utilization,
                "temperature": gpu.temperature,
                "powerMw": gpu.power_mw,
                "uncorrectedEccErrors": gpu.uncorrected_ecc,
            })
        })
        .collect();
    let mtml_fixture = dir.join("mtml.json");
    std::fs::write(
        &mtml_fixture,
        serde_json::to_vec_pretty(&json!({"driverVersion": DRIVER_VERSION, "devices": devices}))
            .unwrap(),
    )
    .unwrap();
    MthreadsNode {
        root: tree.root().to_path_buf(),
        mtml_fixture,
    }
}

/// Copies the stand-in into the tree at `host_path`.
pub fn install_fake_mtml(tree: &HostTree, host_path: &str) {
    stand_in::install(tree, &fake_mtml_library(), host_path);
}
