//! `device-manager detect` and `monitor` for Huawei Ascend through the real binary, with DCMI
//! loaded by path from the fixture root: the stand-in `libdcmi.so` (crate `gpustack-fake-dcmi`)
//! serves each node's NPUs through the DCMI C ABI.

use std::{path::Path, process::Output};

use gpustack_api::{Manufacturer, devices::DevicesGroup, monitor::MetricsGroup};
use gpustack_tests::{
    machines::ascend::{self, AscendNode},
    run_on_host, stderr, succeeded,
};

fn run(root: &Path, fixture: Option<&Path>, args: &[&str]) -> Output {
    run_on_host(root, (ascend::FIXTURE_ENV, fixture), &[], args)
}

fn detect(node: &AscendNode, extra: &[&str]) -> Vec<DevicesGroup> {
    let mut args = vec!["device-manager", "detect", "--manufacturer=ascend"];
    args.extend_from_slice(extra);
    let out = run(&node.root, Some(&node.dcmi_fixture), &args);
    serde_yaml_ng::from_str(&succeeded(&out)).unwrap()
}

fn monitor(node: &AscendNode) -> Vec<MetricsGroup> {
    let out = run(
        &node.root,
        Some(&node.dcmi_fixture),
        &["device-manager", "monitor", "--manufacturer=ascend"],
    );
    serde_yaml_ng::from_str(&succeeded(&out)).unwrap()
}

fn assert_a2_node(groups: &[DevicesGroup]) {
    assert_eq!(groups.len(), 1, "eight NPUs of one product: {groups:?}");
    let g = &groups[0];
    assert_eq!(g.id, "910b3");
    assert_eq!(g.manufacturer, Manufacturer::Ascend);
    assert_eq!(g.name, "Ascend910B3");
    assert_eq!(g.memory, 65536, "HBM, not the DDR also reported");
    assert_eq!(g.cores, Some(20));
    assert_eq!(g.driver_version, "24.1.rc2");
    assert_eq!(g.runtime_version, "8.0.RC2");
    assert_eq!(g.runtime_version, ascend::A2_CANN_VERSION);
    assert_eq!(g.compute_capability, "");
    assert_eq!(g.family, "910B");

    let npus = ascend::a2_npus();
    assert_eq!(g.accelerators.len(), 8);
    for (i, (acc, npu)) in g.accelerators.iter().zip(&npus).enumerate() {
        assert_eq!(acc.id, npu.id(), "NPU {i}");
        assert_eq!(
            acc.index, i as u32,
            "NPU {i}: logic id order, not PCI order"
        );
        assert_eq!(acc.physical_indexes, [i as u32, i as u32, 0], "NPU {i}");
        let t = &acc.topology;
        assert_eq!(t.pci_bus_id, npu.bus_id, "NPU {i}");
        assert_eq!(t.pci_class, "120000", "NPU {i}");
        assert_eq!(t.pci_switches, [npu.root_port], "NPU {i}");
        assert_eq!(t.pci_root_id, npu.root_port, "NPU {i}");
        assert_eq!(t.numa_affinity, npu.numa_node.to_string(), "NPU {i}");
        assert_eq!(
            t.cpu_affinity,
            if npu.numa_node == 0 { "0-95" } else { "96-191" },
            "NPU {i}"
        );
        let roce = t.roce.as_ref().expect("910B NPUs have a RoCE port");
        assert_eq!(roce.ip, npu.roce_ip, "NPU {i}");
        assert_eq!(roce.ip, format!("192.168.100.{}", 10 + i), "NPU {i}");
        assert_eq!(roce.subnet_mask, "255.255.255.0");
        assert_eq!(roce.gateway, ascend::A2_ROCE_GATEWAY);
        assert_eq!(
            acc.status.unhealthy,
            i == ascend::A2_UNHEALTHY_INDEX,
            "NPU {i}: only NPU 6 has an alarm"
        );
        let logical = acc
            .status
            .logical_sliced
            .as_ref()
            .expect("910B with CANN 8: logical slicing");
        assert_eq!(
            (logical.count, logical.cores_percentage_overcommit),
            (63, true)
        );
        assert_eq!(acc.status.physical_sliced, None);
    }
    let detail = g.accelerator_sliced_detail.as_ref().unwrap();
    let logical = detail.logical.as_ref().unwrap();
    assert_eq!(
        (logical.count, logical.cores_percentage_overcommit),
        (8 * 63, true)
    );
    assert_eq!(detail.physical, None);
}

#[test]
fn atlas_800t_a2_node_reports_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = ascend::atlas_800t_a2_node(dir.path());
    assert_a2_node(&detect(&node, &[]));
}

#[test]
fn atlas_800t_a2_node_without_the_pci_check() {
    // Topology then comes from reading the function DCMI names straight from sysfs.
    let dir = tempfile::tempdir().unwrap();
    let node = ascend::atlas_800t_a2_node(dir.path());
    assert_a2_node(&detect(&node, &["--no-pci-check"]));
}

#[test]
fn atlas_800t_a2_node_yaml_shape() {
    let dir = tempfile::tempdir().unwrap();
    let node = ascend::atlas_800t_a2_node(dir.path());
    let out = run(
        &node.root,
        Some(&node.dcmi_fixture),
        &["device-manager", "detect", "--manufacturer=ascend"],
    );
    let text = succeeded(&out);
    // A bus id YAML could read as a number is quoted; one with hex letters need not be.
    assert!(text.contains("pciBusId: \"0000:01:00.0\""), "{text}");
    let value: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(value[0]["family"], "910B");
    assert_eq!(
        value[0]["accelerators"][0]["topology"]["pciBusId"],
        "0000:c1:00.0"
    );
    assert_eq!(value[0]["runtimeVersion"], "8.0.RC2");
    assert_eq!(
        value[0]["accelerators"][0]["topology"]["pciClass"],
        "120000"
    );
    assert_eq!(
        value[0]["accelerators"][0]["physicalIndexes"],
        serde_json::json!([0, 0, 0])
    );
    assert_eq!(
        value[0]["accelerators"][0]["id"],
        "4F2A1C30-0B1E0000-6D00A5C2-00000002-81204E00"
    );
    let err = stderr(&out);
    assert!(!err.contains("left out"), "{err}");
}

#[test]
fn group_id_can_carry_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let node = ascend::atlas_800t_a2_node(dir.path());
    // Through the helper that clears the vendors' own variables, as every other run here.
    let out = run_on_host(
        &node.root,
        (ascend::FIXTURE_ENV, Some(&node.dcmi_fixture)),
        &[("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY", "true")],
        &["device-manager", "detect", "--manufacturer=ascend"],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    assert_eq!(groups[0].id, "910b3-64g");
}

#[test]
fn atlas_800t_a2_node_monitor() {
    let dir = tempfile::tempdir().unwrap();
    let node = ascend::atlas_800t_a2_node(dir.path());
    let groups = monitor(&node);
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].manufacturer, Manufacturer::Ascend);
    let samples = &groups[0].accelerators;
    assert_eq!(samples.len(), 8);
    for (i, (s, npu)) in samples.iter().zip(ascend::a2_npus()).enumerate() {
        assert_eq!(s.id, npu.id(), "NPU {i}");
        assert_eq!(s.memory, Some(65536), "NPU {i}");
        assert_eq!(s.memory_usage, Some(3370 + 1000 * i as u64), "NPU {i}");
        assert_eq!(
            s.memory_utilization,
            Some(((3370 + 1000 * i as u64) * 100 / 65536) as u32),
            "NPU {i}"
        );
        assert_eq!(s.cores_utilization, Some(10 * i as u32), "NPU {i}");
        assert_eq!(s.temperature, Some(40 + i as i32), "NPU {i}");
        let power = (i != ascend::A2_NO_POWER_INDEX).then_some(92 + i as u32);
        assert_eq!(
            s.power_usage, power,
            "NPU {i}: 0.1 W units, refused is absent"
        );
        assert_eq!(s.unhealthy, i == ascend::A2_UNHEALTHY_INDEX, "NPU {i}");
    }
    // Absent in the YAML too, not printed as 0.
    let out = run(
        &node.root,
        Some(&node.dcmi_fixture),
        &["device-manager", "monitor", "--manufacturer=ascend"],
    );
    let value: serde_json::Value = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    let last = &value[0]["accelerators"][ascend::A2_NO_POWER_INDEX];
    assert!(last.get("powerUsage").is_none(), "{last}");
    assert_eq!(last["temperature"], 47);
}

#[test]
fn atlas_300i_duo_node_two_chips_per_card_and_ddr() {
    let dir = tempfile::tempdir().unwrap();
    let node = ascend::atlas_300i_duo_node(dir.path());
    let groups = detect(&node, &[]);
    assert_eq!(groups.len(), 1, "{groups:?}");
    let g = &groups[0];
    assert_eq!(g.id, "310p3");
    assert_eq!(g.name, "Ascend310P3");
    assert_eq!(g.memory, ascend::DUO_DDR_MB, "no HBM: DDR");
    assert_eq!(g.cores, Some(8));
    assert_eq!(g.driver_version, "24.1.rc2");
    assert_eq!(
        g.runtime_version,
        ascend::DUO_CANN_VERSION,
        "from compiler/version.info"
    );
    assert_eq!(g.family, "310P");
    assert_eq!(
        g.accelerator_sliced_detail, None,
        "310P slicing ships for CANN 9 only"
    );
    let chips = ascend::duo_chips();
    assert_eq!(g.accelerators.len(), 4);
    for (i, (acc, chip)) in g.accelerators.iter().zip(&chips).enumerate() {
        let want_id = chip
            .die_id
            .iter()
            .map(|w| format!("{w:08X}"))
            .collect::<Vec<_>>()
            .join("-");
        assert_eq!(acc.id, want_id, "chip {i}");
        assert_eq!(acc.index, i as u32);
        assert_eq!(
            acc.physical_indexes,
            [chip.phy_id, chip.card_id as u32, chip.device_in_card],
            "chip {i}: [phyId, cardId, deviceIdInCard]"
        );
        assert_eq!(acc.topology.pci_bus_id, chip.bus_id);
        assert_eq!(acc.topology.pci_switches, chip.switches);
        assert_eq!(acc.topology.pci_root_id, chip.switches[2]);
        assert_eq!(acc.topology.numa_affinity, "0", "firmware reports -1");
        assert_eq!(acc.topology.cpu_affinity, "0-63");
        assert_eq!(acc.topology.roce, None, "inference cards have no RoCE port");
        assert!(!acc.status.unhealthy);
        assert_eq!(acc.status.logical_sliced, None);
    }

    let samples = &monitor(&node)[0].accelerators;
    assert_eq!(samples.len(), 4);
    for (i, s) in samples.iter().enumerate() {
        assert_eq!(s.memory, Some(ascend::DUO_DDR_MB));
        assert_eq!(s.memory_usage, Some(1383 + 100 * i as u64), "chip {i}");
        assert_eq!(s.cores_utilization, Some(0), "a measured 0 stays 0");
        assert_eq!(s.power_usage, Some(28));
        assert_eq!(s.temperature, Some(48));
    }
}

#[test]
fn driver_that_does_not_initialise_reports_nothing_and_says_why() {
    // DCMI is installed but answers dcmi_init with an error (here: the stand-in has no
    // fixture, as the real library has no driver behind it).
    let dir = tempfile::tempdir().unwrap();
    let node = ascend::atlas_800t_a2_node(dir.path());
    for command in ["detect", "monitor"] {
        let out = run(
            &node.root,
            None,
            &[
                "device-manager",
                command,
                "--manufacturer=ascend",
                "--no-fast-failed",
            ],
        );
        assert_eq!(succeeded(&out), "[]\n", "{command}");
        let err = stderr(&out);
        assert!(err.contains("found 8 ascend PCI function(s)"), "{err}");
        assert!(err.contains(ascend::DRIVER_DCMI_PATH), "{err}");
        assert!(err.contains("dcmi_init returned -8008"), "{err}");
    }
}
