//! Cards driven by amdgpu-family drivers, and the command reference's node: two AMD Radeon
//! RX 7800 XT cards (Navi 32, gfx1101) behind the card's own PCIe switch, an in-tree amdgpu driver
//! on kernel 6.16.13, and ROCm 7.2 mounted.

use crate::sysfs::{HostTree, PciFunction};

/// What a product looks like to amdgpu and KFD (AMD's cards and Hygon's DCUs alike).
pub struct AmdgpuProduct<'a> {
    pub vendor: &'a str,
    pub device: &'a str,
    pub revision: &'a str,
    pub class: &'a str,
    pub vram_bytes: u64,
    pub simd_count: u32,
    pub simd_per_cu: u32,
    pub gfx_target_version: u32,
    /// Graphics IP version from IP discovery, where the driver has it.
    pub gc: Option<(u32, u32, u32)>,
    /// The FRU `product_name` attribute, where the board has one.
    pub product_name: Option<&'a str>,
}

/// Radeon RX 7800 XT (Navi 32): 16368 MiB of VRAM as amdgpu reports it, 60 CUs, gfx1101.
pub const RX_7800_XT: AmdgpuProduct<'static> = AmdgpuProduct {
    vendor: "1002",
    device: "747e",
    revision: "c8",
    class: "030000",
    vram_bytes: 16368 * 1024 * 1024,
    simd_count: 120,
    simd_per_cu: 2,
    gfx_target_version: 110001,
    gc: Some((11, 0, 0)),
    product_name: None,
};

/// One card's place and state, as amdgpu, KFD and hwmon show it.
pub struct AmdgpuCard<'a> {
    pub bus_path: &'a [&'a str],
    pub card: u32,
    pub render: u32,
    pub unique_id: &'a str,
    pub vram_used_bytes: u64,
    pub busy_percent: u32,
    pub temp_millicelsius: u32,
    pub power_microwatts: u64,
    pub kfd_node: u32,
    /// `-1` where the platform reports no NUMA node.
    pub numa_node: i32,
}

pub fn add_amdgpu_card(tree: &HostTree, p: &AmdgpuProduct<'_>, c: &AmdgpuCard<'_>) {
    let bus_id = *c.bus_path.last().unwrap();
    // The card's upstream and downstream switch ports sit between the root port and the GPU.
    for depth in 2..c.bus_path.len() {
        tree.pci_bridge(&c.bus_path[..depth], p.vendor);
    }
    let dir = tree.pci_function(&PciFunction {
        path: c.bus_path,
        vendor: p.vendor,
        device: p.device,
        class: p.class,
        revision: p.revision,
        numa_node: c.numa_node,
    });
    let real = format!("/sys/devices/{}", c.bus_path.join("/"));
    tree.file(
        &format!("{real}/drm/card{}/dev", c.card),
        format!("226:{}\n", c.card),
    )
    .file(
        &format!("{real}/drm/renderD{}/dev", c.render),
        format!("226:{}\n", c.render),
    )
    .symlink(
        &format!("/sys/class/drm/card{}", c.card),
        &format!("../../devices/{}/drm/card{}", c.bus_path.join("/"), c.card),
    )
    .symlink(
        &format!("/sys/class/drm/card{}/device", c.card),
        &format!("../../../{bus_id}"),
    )
    .file(&format!("{dir}/unique_id"), format!("{}\n", c.unique_id))
    .file(
        &format!("{dir}/mem_info_vram_total"),
        format!("{}\n", p.vram_bytes),
    )
    .file(
        &format!("{dir}/mem_info_vram_used"),
        format!("{}\n", c.vram_used_bytes),
    )
    .file(
        &format!("{dir}/gpu_busy_percent"),
        format!("{}\n", c.busy_percent),
    )
    .file(&format!("{dir}/ras/umc_err_count"), "ue: 0\nce: 0\n")
    .file(
        &format!("{dir}/hwmon/hwmon{}/temp1_input", c.card),
        format!("{}\n", c.temp_millicelsius),
    )
    .file(
        &format!("{dir}/hwmon/hwmon{}/power1_average", c.card),
        format!("{}\n", c.power_microwatts),
    );
    if let Some((major, minor, revision)) = p.gc {
        for (part, value) in [("major", major), ("minor", minor), ("revision", revision)] {
            tree.file(
                &format!("{dir}/ip_discovery/die/0/GC/0/{part}"),
                format!("{value}\n"),
            );
        }
    }
    if let Some(name) = p.product_name {
        tree.file(&format!("{dir}/product_name"), format!("{name}\n"));
    }
    let unique_decimal = u64::from_str_radix(c.unique_id, 16).unwrap();
    tree.file(
        &format!(
            "/sys/class/kfd/kfd/topology/nodes/{}/properties",
            c.kfd_node
        ),
        format!(
            "cpu_cores_count 0\nsimd_count {}\nsimd_per_cu {}\ngfx_target_version {}\n\
             drm_render_minor {}\nlocation_id {}\ndomain 0\nunique_id {unique_decimal}\n",
            p.simd_count,
            p.simd_per_cu,
            p.gfx_target_version,
            c.render,
            u32::from_str_radix(&bus_id[5..7], 16).unwrap() << 8,
        ),
    );
}

/// The seed's node. Card 0 is the accelerator the command reference prints.
pub fn seed_node(tree: &HostTree) {
    tree.kernel_release("6.16.13-arch1-1")
        .numa_node(0, "0-13")
        .file("/opt/rocm/.info/version", "7.2.0-43\n")
        .file(
            "/opt/rocm/share/libdrm/amdgpu.ids",
            "# List of AMDGPU IDs\n1.0.0\n747E,\tC8,\tAMD Radeon RX 7800 XT\n744C,\tC8,\tAMD Radeon RX 7900 XTX\n",
        )
        // The CPU's KFD node comes first, as on a real machine.
        .file("/sys/class/kfd/kfd/topology/nodes/0/properties", "cpu_cores_count 14\nsimd_count 0\ndrm_render_minor 0\n");
    add_amdgpu_card(
        tree,
        &RX_7800_XT,
        &AmdgpuCard {
            bus_path: &[
                "pci0000:00",
                "0000:00:01.1",
                "0000:02:00.0",
                "0000:03:00.0",
                "0000:04:00.0",
            ],
            card: 1,
            render: 128,
            unique_id: "5c88007d760374f3",
            vram_used_bytes: 174 * 1024 * 1024 + 4096,
            busy_percent: 0,
            temp_millicelsius: 44000,
            power_microwatts: 8_000_000,
            kfd_node: 1,
            numa_node: -1,
        },
    );
    add_amdgpu_card(
        tree,
        &RX_7800_XT,
        &AmdgpuCard {
            bus_path: &[
                "pci0000:00",
                "0000:00:03.1",
                "0000:0a:00.0",
                "0000:0b:00.0",
                "0000:0c:00.0",
            ],
            card: 2,
            render: 129,
            unique_id: "3f0be7a6a1f2c4d9",
            vram_used_bytes: 12 * 1024 * 1024,
            busy_percent: 3,
            temp_millicelsius: 39000,
            power_microwatts: 6_500_000,
            kfd_node: 2,
            numa_node: -1,
        },
    );
    // An on-board network function of another vendor: must not confuse the scan.
    tree.pci_function(&PciFunction {
        path: &["pci0000:00", "0000:00:02.1", "0000:05:00.0"],
        vendor: "8086",
        device: "125c",
        class: "020000",
        revision: "04",
        numa_node: -1,
    });
}

/// AMD Instinct MI210 (Aldebaran, gfx90a): 64 GiB of HBM2e, 104 CUs of four SIMDs, a
/// processing accelerator (class 1200) with no display.
pub const MI210: AmdgpuProduct<'static> = AmdgpuProduct {
    vendor: "1002",
    device: "740f",
    revision: "02",
    class: "120000",
    vram_bytes: 65536 * 1024 * 1024,
    simd_count: 416,
    simd_per_cu: 4,
    gfx_target_version: 90010,
    gc: Some((9, 4, 2)),
    product_name: Some("Instinct MI210"),
};

/// How many cards the MI210 node has.
pub const MI210_CARDS: u32 = 4;

/// A one-socket node with four MI210 cards, each below its own root port, ROCm 6.2 installed
/// (its `amdgpu.ids` names the product) on kernel 6.8.
pub fn mi210_node(tree: &HostTree) {
    tree.kernel_release("6.8.0-45-generic")
        .numa_node(0, "0-63")
        .file("/opt/rocm/.info/version", "6.2.0-66\n")
        .file(
            "/opt/rocm/share/libdrm/amdgpu.ids",
            "# List of AMDGPU IDs\n1.0.0\n740F,\t02,\tAMD Instinct MI210\n",
        )
        .file(
            "/sys/class/kfd/kfd/topology/nodes/0/properties",
            "cpu_cores_count 64\nsimd_count 0\ndrm_render_minor 0\n",
        );
    let buses = [
        "0000:41:00.0",
        "0000:61:00.0",
        "0000:c1:00.0",
        "0000:e1:00.0",
    ];
    let ports = [
        "0000:40:01.1",
        "0000:60:01.1",
        "0000:c0:01.1",
        "0000:e0:01.1",
    ];
    let hosts = ["pci0000:40", "pci0000:60", "pci0000:c0", "pci0000:e0"];
    let unique = [
        "9a41c2e07b3d5f18",
        "2c7d9e41a0b6f35e",
        "71e0b4d9c2a8f653",
        "e5a3c8170d4b92f6",
    ];
    for i in 0..MI210_CARDS as usize {
        let path = [hosts[i], ports[i], buses[i]];
        add_amdgpu_card(
            tree,
            &MI210,
            &AmdgpuCard {
                bus_path: &path,
                card: i as u32 + 1,
                render: 128 + i as u32,
                unique_id: unique[i],
                vram_used_bytes: 10 * 1024 * 1024,
                busy_percent: 0,
                temp_millicelsius: 38000 + 1000 * i as u32,
                power_microwatts: 42_000_000,
                kfd_node: i as u32 + 1,
                numa_node: 0,
            },
        );
    }
}
