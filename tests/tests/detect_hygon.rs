//! Hygon DCUs are read like AMD cards, from the amdgpu-family sysfs attributes and KFD, without
//! the vendor's libraries.

use gpustack_api::{Manufacturer, devices::DevicesGroup, monitor::MetricsGroup};
use gpustack_tests::{machines::hygon, operator, stderr, stdout, sysfs::HostTree};

fn run(tree: &HostTree, sub: &str) -> String {
    let out = operator()
        .args(["dm", sub, "--manufacturer=hygon"])
        .env("GPUSTACK_SYSTEM_ROOT", tree.root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout(&out)
}

#[test]
fn detect_reads_hygon_dcus_from_sysfs() {
    let dir = tempfile::tempdir().unwrap();
    let tree = HostTree::new(dir.path());
    hygon::k100_ai_node(&tree);
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&run(&tree, "detect")).unwrap();
    assert_eq!(groups.len(), 1);
    let g = &groups[0];
    assert_eq!(g.manufacturer, Manufacturer::Hygon);
    assert_eq!((g.id.as_str(), g.name.as_str()), ("k100-ai", "K100_AI"));
    assert_eq!(g.memory, 65536);
    assert_eq!(g.cores, Some(120));
    assert_eq!(g.compute_capability, "gfx928");
    assert_eq!(g.driver_version, "6.3.12-V1.10.0a");
    assert_eq!(g.runtime_version, "25.04");
    let accs: Vec<_> = g
        .accelerators
        .iter()
        .map(|a| {
            (
                a.id.as_str(),
                a.index,
                a.physical_indexes.clone(),
                a.topology.numa_affinity.as_str(),
                a.topology.cpu_affinity.as_str(),
            )
        })
        .collect();
    assert_eq!(
        accs,
        [
            ("GPU-8e1c3a0d7b2f4451", 0, vec![0, 128], "0", "0-31,64-95"),
            ("GPU-8e1c3a0d7b2f4452", 1, vec![1, 129], "1", "32-63,96-127"),
        ]
    );
    // Hygon's logical slicing: four slices, disjoint compute units (no overcommit).
    let sliced = g.accelerators[0].status.logical_sliced.as_ref().unwrap();
    assert_eq!(
        (sliced.count, sliced.cores_percentage_overcommit),
        (4, false)
    );
}

#[test]
fn monitor_samples_hygon_dcus() {
    let dir = tempfile::tempdir().unwrap();
    let tree = HostTree::new(dir.path());
    hygon::k100_ai_node(&tree);
    let groups: Vec<MetricsGroup> = serde_yaml_ng::from_str(&run(&tree, "monitor")).unwrap();
    let second = &groups[0].accelerators[1];
    assert_eq!(second.memory_usage, Some(513));
    assert_eq!(second.cores_utilization, Some(10));
    assert_eq!(second.power_usage, Some(95));
}
