//! `device-manager detect` and `monitor` for Cambricon through the real binary, with CNDev loaded
//! by path from the fixture root: the stand-in `libcndev.so` (crate `gpustack-fake-cndev`)
//! serves the node's MLUs through the CNDev C ABI.

use std::{path::Path, process::Output};

use gpustack_api::{Manufacturer, devices::DevicesGroup, monitor::MetricsGroup};
use gpustack_tests::{
    machines::cambricon::{self, CambriconNode},
    run_on_host, stderr, succeeded,
};

fn run(root: &Path, fixture: Option<&Path>, args: &[&str]) -> Output {
    run_on_host(root, (cambricon::FIXTURE_ENV, fixture), &[], args)
}

fn detect(node: &CambriconNode, extra: &[&str]) -> Vec<DevicesGroup> {
    let mut args = vec!["device-manager", "detect", "--manufacturer=cambricon"];
    args.extend_from_slice(extra);
    let out = run(&node.root, Some(&node.cndev_fixture), &args);
    serde_yaml_ng::from_str(&succeeded(&out)).unwrap()
}

fn assert_x8_node(groups: &[DevicesGroup]) {
    assert_eq!(groups.len(), 1, "four MLUs of one product: {groups:?}");
    let g = &groups[0];
    assert_eq!(g.id, "mlu370-x8");
    assert_eq!(g.manufacturer, Manufacturer::Cambricon);
    assert_eq!(g.name, cambricon::X8_NAME);
    assert_eq!(g.memory, cambricon::X8_MEMORY_MB);
    assert_eq!(g.cores, Some(cambricon::X8_CORES));
    assert_eq!(g.driver_version, cambricon::X8_DRIVER_VERSION);
    assert_eq!(g.runtime_version, cambricon::X8_NEUWARE_VERSION);
    assert_eq!(g.compute_capability, "");
    assert_eq!(g.family, "");

    let mlus = cambricon::x8_mlus();
    assert_eq!(g.accelerators.len(), 4);
    for (i, (acc, mlu)) in g.accelerators.iter().zip(&mlus).enumerate() {
        assert_eq!(acc.id, mlu.id(), "MLU {i}");
        assert!(acc.id.starts_with("MLU-"), "MLU {i}: {}", acc.id);
        assert_eq!(acc.index, i as u32, "MLU {i}: CNDev order");
        assert_eq!(acc.physical_indexes, [i as u32], "MLU {i}");
        let t = &acc.topology;
        assert_eq!(t.pci_bus_id, mlu.bus_id, "MLU {i}");
        assert_eq!(t.pci_class, "120000", "MLU {i}");
        assert_eq!(t.pci_switches, mlu.switches, "MLU {i}");
        assert_eq!(t.pci_root_id, mlu.switches[2], "MLU {i}");
        assert_eq!(t.numa_affinity, mlu.numa_node.to_string(), "MLU {i}");
        assert_eq!(
            t.cpu_affinity,
            if mlu.numa_node == 0 {
                "0-31,64-95"
            } else {
                "32-63,96-127"
            },
            "MLU {i}"
        );
        assert_eq!(t.roce, None);
        assert_eq!(
            acc.status.unhealthy,
            i == cambricon::X8_SICK_INDEX || i == cambricon::X8_ECC_INDEX,
            "MLU {i}: sick (health 0) or uncorrected ECC errors"
        );
        let logical = acc
            .status
            .logical_sliced
            .as_ref()
            .expect("MLUs offer logical slices");
        assert_eq!(
            (logical.count, logical.cores_percentage_overcommit),
            (16, false)
        );
        assert_eq!(acc.status.physical_sliced, None);
    }
    let detail = g.accelerator_sliced_detail.as_ref().unwrap();
    let logical = detail.logical.as_ref().unwrap();
    assert_eq!(
        (logical.count, logical.cores_percentage_overcommit),
        (4 * 16, false)
    );
    assert_eq!(detail.physical, None);
}

#[test]
fn mlu370_x8_node_reports_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = cambricon::mlu370_x8_node(dir.path());
    assert_x8_node(&detect(&node, &[]));
}

#[test]
fn mlu370_x8_node_without_the_pci_check() {
    // Topology then comes from reading the function CNDev names straight from sysfs.
    let dir = tempfile::tempdir().unwrap();
    let node = cambricon::mlu370_x8_node(dir.path());
    assert_x8_node(&detect(&node, &["--no-pci-check"]));
}

#[test]
fn mlu370_x8_node_yaml_shape() {
    let dir = tempfile::tempdir().unwrap();
    let node = cambricon::mlu370_x8_node(dir.path());
    let out = run(
        &node.root,
        Some(&node.cndev_fixture),
        &["device-manager", "detect", "--manufacturer=cambricon"],
    );
    let text = succeeded(&out);
    let value: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    let first = &value[0]["accelerators"][0];
    assert_eq!(first["id"], "MLU-3c8e0f1a-7b52-4d1e-9a60-0c5d8e21b400");
    assert_eq!(first["topology"]["pciBusId"], "0000:1a:00.0");
    assert_eq!(first["physicalIndexes"], serde_json::json!([0]));
    assert_eq!(value[0]["driverVersion"], "5.10.22");
    assert_eq!(value[0]["runtimeVersion"], "3.8.4");
    assert!(value[0].get("family").is_none(), "{text}");
    let err = stderr(&out);
    assert!(!err.contains("left out"), "{err}");
}

#[test]
fn group_id_can_carry_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let node = cambricon::mlu370_x8_node(dir.path());
    // Through the helper that clears the vendors' own variables, as every other run here.
    let out = run_on_host(
        &node.root,
        (cambricon::FIXTURE_ENV, Some(&node.cndev_fixture)),
        &[("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY", "true")],
        &["device-manager", "detect", "--manufacturer=cambricon"],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    assert_eq!(groups[0].id, "mlu370-x8-48g");
}

#[test]
fn mlu370_x8_node_monitor() {
    let dir = tempfile::tempdir().unwrap();
    let node = cambricon::mlu370_x8_node(dir.path());
    let out = run(
        &node.root,
        Some(&node.cndev_fixture),
        &["device-manager", "monitor", "--manufacturer=cambricon"],
    );
    let text = succeeded(&out);
    let groups: Vec<MetricsGroup> = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].manufacturer, Manufacturer::Cambricon);
    let samples = &groups[0].accelerators;
    assert_eq!(samples.len(), 4);
    for (i, (s, mlu)) in samples.iter().zip(cambricon::x8_mlus()).enumerate() {
        assert_eq!(s.id, mlu.id(), "MLU {i}");
        assert_eq!(s.memory, Some(cambricon::X8_MEMORY_MB), "MLU {i}");
        assert_eq!(s.memory_usage, Some(1210 + 1000 * i as u64), "MLU {i}");
        assert_eq!(
            s.memory_utilization,
            Some(((1210 + 1000 * i as u64) * 100 / cambricon::X8_MEMORY_MB) as u32),
            "MLU {i}"
        );
        assert_eq!(s.cores_utilization, Some(mlu.utilization), "MLU {i}");
        let temperature = if i == cambricon::X8_SPARSE_INDEX {
            mlu.board_temperature
        } else {
            mlu.chip_temperature
        };
        assert_eq!(
            s.temperature,
            Some(temperature),
            "MLU {i}: chip, else board"
        );
        assert_eq!(s.power_usage, mlu.power_w, "MLU {i}: refused is absent");
        assert_eq!(
            s.unhealthy,
            i == cambricon::X8_SICK_INDEX || i == cambricon::X8_ECC_INDEX,
            "MLU {i}"
        );
    }
    assert_eq!(
        samples[0].cores_utilization,
        Some(0),
        "a measured 0 stays 0"
    );
    // Absent in the YAML too, not printed as 0.
    let value: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    let sparse = &value[0]["accelerators"][cambricon::X8_SPARSE_INDEX];
    assert!(sparse.get("powerUsage").is_none(), "{sparse}");
    assert_eq!(sparse["temperature"], 35);
}

#[test]
fn driver_that_does_not_initialise_reports_nothing_and_says_why() {
    // CNDev is installed but answers cndevInit with an error (here: the stand-in has no
    // fixture, as the real library has no driver behind it).
    let dir = tempfile::tempdir().unwrap();
    let node = cambricon::mlu370_x8_node(dir.path());
    for command in ["detect", "monitor"] {
        let out = run(
            &node.root,
            None,
            &[
                "device-manager",
                command,
                "--manufacturer=cambricon",
                "--no-fast-failed",
            ],
        );
        assert_eq!(succeeded(&out), "[]\n", "{command}");
        let err = stderr(&out);
        assert!(err.contains("found 4 cambricon PCI function(s)"), "{err}");
        assert!(err.contains(cambricon::CNDEV_PATH), "{err}");
        assert!(
            err.contains("cndevInit returned 1 (CNDEV_ERROR_NO_DRIVER)"),
            "{err}"
        );
    }
}

#[test]
fn missing_library_is_named_with_where_it_was_looked_for() {
    let dir = tempfile::tempdir().unwrap();
    let node = cambricon::mlu370_x8_node(dir.path());
    std::fs::remove_file(
        node.root
            .join(cambricon::CNDEV_PATH.trim_start_matches('/')),
    )
    .unwrap();
    let out = run(
        &node.root,
        Some(&node.cndev_fixture),
        &[
            "device-manager",
            "detect",
            "--manufacturer=cambricon",
            "--no-fast-failed",
        ],
    );
    assert_eq!(succeeded(&out), "[]\n");
    let err = stderr(&out);
    assert!(err.contains("found 4 cambricon PCI function(s)"), "{err}");
    assert!(
        err.contains("libcndev.so") && err.contains("/usr/local/neuware/lib64"),
        "{err}"
    );
}
