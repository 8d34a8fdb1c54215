//! A Hygon DCU node: two K100-AI cards on the `hydcu` driver (an amdgpu fork with the same sysfs
//! attributes and KFD topology), one per NUMA node, DTK 25.04 mounted.

use super::amd::{AmdgpuCard, AmdgpuProduct, add_amdgpu_card};
use crate::sysfs::HostTree;

/// K100-AI: 64 GiB HBM, 120 compute units, gfx928; named by its FRU `product_name`.
pub const K100_AI: AmdgpuProduct<'static> = AmdgpuProduct {
    vendor: "1d94",
    device: "6320",
    revision: "01",
    class: "038000",
    vram_bytes: 64 * 1024 * 1024 * 1024,
    simd_count: 480,
    simd_per_cu: 4,
    gfx_target_version: 90208,
    gc: None,
    product_name: Some("K100_AI"),
};

pub fn k100_ai_node(tree: &HostTree) {
    tree.kernel_release("5.10.134-16.an8.x86_64")
        .numa_node(0, "0-31,64-95")
        .numa_node(1, "32-63,96-127")
        .file("/sys/module/hydcu/version", "6.3.12-V1.10.0a\n")
        .file("/opt/dtk/.info/version", "25.04.1\n");
    for (i, (bus, numa)) in [("0000:41:00.0", 0), ("0000:c1:00.0", 1)]
        .into_iter()
        .enumerate()
    {
        let root_port = if numa == 0 {
            "0000:40:01.1"
        } else {
            "0000:c0:01.1"
        };
        let host = if numa == 0 {
            "pci0000:40"
        } else {
            "pci0000:c0"
        };
        let i = i as u32;
        add_amdgpu_card(
            tree,
            &K100_AI,
            &AmdgpuCard {
                bus_path: &[host, root_port, bus],
                card: i,
                render: 128 + i,
                unique_id: ["8e1c3a0d7b2f4451", "8e1c3a0d7b2f4452"][i as usize],
                vram_used_bytes: (512 + u64::from(i)) * 1024 * 1024,
                busy_percent: 10 * i,
                temp_millicelsius: 41000,
                power_microwatts: 95_000_000,
                kfd_node: i + 2,
                numa_node: numa,
            },
        );
    }
}
