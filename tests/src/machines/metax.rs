//! MetaX nodes: host trees (PCI functions with their DRM nodes, NUMA nodes, an SR-IOV virtual
//! function, the MXSML library) and the JSON fixture that the stand-in `libmxsml.so` (crate
//! `gpustack-fake-mxsml`) serves through the real MXSML C ABI. Detection finds the stand-in
//! under the fixture root where the MetaX driver (or MACA) installs the real library, and loads
//! it by path.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{
    stand_in,
    sysfs::{HostTree, PciFunction},
};

/// Where the MetaX driver package installs MXSML (`mx-smi`'s copy).
pub const DRIVER_MXSML_PATH: &str = "/opt/mxdriver/lib/libmxsml.so";
/// Where MACA installs it.
pub const MACA_MXSML_PATH: &str = "/opt/maca/lib/libmxsml.so";

/// The environment variable the stand-in reads its fixture from.
pub const FIXTURE_ENV: &str = "GPUSTACK_FAKE_MXSML_FIXTURE";

pub const NAME: &str = "MXC500";
/// 64 GiB of HBM as `mxSmlGetMemoryInfo` reports it (`vramTotal`, KB).
pub const VRAM_KB: i64 = 64 * 1024 * 1024;
pub const MEMORY_MIB: u64 = 65536;
pub const DRIVER_VERSION: &str = "2.14.6";
pub const MACA_VERSION: &str = "2.32.0.6";
/// The GPU with uncorrectable DRAM errors.
pub const UNHEALTHY_INDEX: usize = 5;
/// The GPU whose board power MXSML does not report.
pub const NO_POWER_INDEX: usize = 6;
/// The GPU with SR-IOV enabled (PF mode) and one virtual function.
pub const PF_INDEX: usize = 7;
/// The virtual function of GPU 7: MXSML device id 8, a function of its own in sysfs.
pub const VF_BUS_ID: &str = "0000:d7:00.1";

/// A built node: the host tree to pass as `GPUSTACK_SYSTEM_ROOT`, and the MXSML fixture to pass
/// as `GPUSTACK_FAKE_MXSML_FIXTURE`.
pub struct MetaxNode {
    pub root: PathBuf,
    pub mxsml_fixture: PathBuf,
}

/// How the virtual function shows itself; the node has one either way.
#[derive(Clone, Copy, Debug)]
pub struct VfShape {
    /// MXSML reports the VF's mode (2); `false`: mode 0, as an MXSML that does not say.
    pub mode_reported: bool,
    /// Sysfs links the VF to its physical function (`physfn`).
    pub physfn_link: bool,
}

/// The stand-in library built into this target directory (`cargo build` puts
/// `libgpustack_fake_mxsml.so` beside the test executables' `deps/` folder), or the one named
/// by `GPUSTACK_FAKE_MXSML_LIB`.
pub fn fake_mxsml_library() -> PathBuf {
    stand_in::built("gpustack_fake_mxsml", "GPUSTACK_FAKE_MXSML_LIB")
}

/// One MXC500 of the node, in MXSML id order.
#[derive(Clone, Debug)]
pub struct Gpu {
    pub uuid: String,
    /// Sysfs form, `0000:0f:00.0`.
    pub bus_id: &'static str,
    /// The root port above it.
    pub root_port: &'static str,
    pub numa_node: u32,
    /// `/dev/dri/card<N>` (card0 is the BMC's VGA) and `renderD<M>`.
    pub card: u32,
    pub render: u32,
    pub vram_used_kb: i64,
    pub xcore_usage: i32,
    pub hotspot_centidegrees: i32,
    pub board_power_mw: Option<Vec<u32>>,
    pub dram_ue: u32,
}

impl Gpu {
    pub fn used_mib(&self) -> u64 {
        (self.vram_used_kb / 1024) as u64
    }
}

/// The eight GPUs: four per socket, each below its own root port.
pub fn gpus() -> Vec<Gpu> {
    let place: [(&str, &str, u32); 8] = [
        ("0000:0f:00.0", "0000:0e:01.0", 0),
        ("0000:34:00.0", "0000:33:01.0", 0),
        ("0000:48:00.0", "0000:47:01.0", 0),
        ("0000:5a:00.0", "0000:59:01.0", 0),
        ("0000:87:00.0", "0000:86:01.0", 1),
        ("0000:ae:00.0", "0000:ad:01.0", 1),
        ("0000:c2:00.0", "0000:c1:01.0", 1),
        ("0000:d7:00.0", "0000:d6:01.0", 1),
    ];
    place
        .iter()
        .enumerate()
        .map(|(i, &(bus_id, root_port, numa_node))| Gpu {
            uuid: format!(
                "GPU-5c1e09a2-7b3d-4f60-8e21-{:012x}",
                0x003a_9000_0010_u64 + i as u64
            ),
            bus_id,
            root_port,
            numa_node,
            card: i as u32 + 1,
            render: 128 + i as u32,
            vram_used_kb: 1024 * (812 + 1000 * i as i64),
            xcore_usage: 11 * i as i32,
            hotspot_centidegrees: 4012 + 150 * i as i32,
            board_power_mw: (i != NO_POWER_INDEX).then(|| vec![90_400 + 1000 * i as u32, 45_600]),
            dram_ue: if i == UNHEALTHY_INDEX { 2 } else { 0 },
        })
        .collect()
}

/// An 8x MetaX C500 (64 GB) training server: two NUMA nodes (0: CPUs 0-63, 1: 64-127), each
/// GPU below its own root port with its DRM nodes bound, driver 2.14.6 with MXSML in
/// `/opt/mxdriver/lib`, MACA 2.32.0.6. GPU 5 has uncorrectable DRAM errors, GPU 6's board power
/// is not reported, and GPU 7 runs in SR-IOV PF mode with one virtual function, which MXSML
/// lists as device 8.
pub fn mxc500_node(dir: &Path, vf: VfShape) -> MetaxNode {
    mxc500_node_with_library(dir, vf, DRIVER_MXSML_PATH)
}

/// [`mxc500_node`] with MXSML installed at `library` (a host path).
pub fn mxc500_node_with_library(dir: &Path, vf: VfShape, library: &str) -> MetaxNode {
    let tree = HostTree::new(dir.join("root"));
    tree.kernel_release("5.15.0-125-generic")
        .numa_node(0, "0-63")
        .numa_node(1, "64-127");
    let gpus = gpus();
    for gpu in &gpus {
        let bridge = host_bridge(gpu.root_port);
        tree.pci_bridge(&[&bridge, gpu.root_port], "8086");
        tree.pci_function(&PciFunction {
            path: &[&bridge, gpu.root_port, gpu.bus_id],
            vendor: "9999",
            device: "4001",
            class: "030200",
            revision: "01",
            numa_node: gpu.numa_node as i32,
        });
        let real = format!("/sys/devices/{bridge}/{}/{}", gpu.root_port, gpu.bus_id);
        tree.file(
            &format!("{real}/drm/card{}/dev", gpu.card),
            format!("226:{}\n", gpu.card),
        );
        tree.file(
            &format!("{real}/drm/renderD{}/dev", gpu.render),
            format!("226:{}\n", gpu.render),
        );
    }
    // The VF: a function of its own next to its PF, with no DRM nodes on the host.
    let pf = &gpus[PF_INDEX];
    let bridge = host_bridge(pf.root_port);
    tree.pci_function(&PciFunction {
        path: &[&bridge, pf.root_port, VF_BUS_ID],
        vendor: "9999",
        device: "4002",
        class: "030200",
        revision: "01",
        numa_node: pf.numa_node as i32,
    });
    if vf.physfn_link {
        tree.symlink(
            &format!("/sys/devices/{bridge}/{}/{VF_BUS_ID}/physfn", pf.root_port),
            &format!("../{}", pf.bus_id),
        );
    }
    install_fake_mxsml(&tree, library);

    let mut devices: Vec<Value> = gpus
        .iter()
        .enumerate()
        .map(|(i, gpu)| {
            json!({
                "bdfId": gpu.bus_id,
                "uuid": gpu.uuid,
                "brand": 2,
                "mode": if i == PF_INDEX { 1 } else { 0 },
                "deviceName": NAME,
                "driverVersion": DRIVER_VERSION,
                "vram": {"totalKb": VRAM_KB, "usedKb": gpu.vram_used_kb},
                "xcoreUsage": gpu.xcore_usage,
                "hotspotCentidegrees": gpu.hotspot_centidegrees,
                "boardPowerMw": gpu.board_power_mw,
                "ecc": {"sramUe": 0, "dramUe": gpu.dram_ue},
            })
        })
        .collect();
    devices.push(json!({
        "bdfId": VF_BUS_ID,
        "uuid": "GPU-5c1e09a2-7b3d-4f60-8e21-vf0000000001",
        "brand": 2,
        "mode": if vf.mode_reported { 2 } else { 0 },
        "deviceName": NAME,
        "driverVersion": DRIVER_VERSION,
        "vram": {"totalKb": VRAM_KB / 4, "usedKb": 0},
    }));
    let mxsml_fixture = dir.join("mxsml.json");
    std::fs::write(
        &mxsml_fixture,
        serde_json::to_vec_pretty(&json!({"macaVersion": MACA_VERSION, "devices": devices}))
            .unwrap(),
    )
    .unwrap();
    MetaxNode {
        root: tree.root().to_path_buf(),
        mxsml_fixture,
    }
}

/// Copies the stand-in into the tree at `host_path`.
pub fn install_fake_mxsml(tree: &HostTree, host_path: &str) {
    stand_in::install(tree, &fake_mxsml_library(), host_path);
}

/// `pci0000:0e` for root port `0000:0e:01.0`.
fn host_bridge(root_port: &str) -> String {
    format!("pci0000:{}", &root_port[5..7])
}
