//! `device-manager detect` and `monitor` for MetaX through the real binary, with MXSML loaded
//! by path from the fixture root: the stand-in `libmxsml.so` (crate `gpustack-fake-mxsml`)
//! serves the node's GPUs through the MXSML C ABI.

use std::{path::Path, process::Output};

use gpustack_api::{Manufacturer, devices::DevicesGroup, monitor::MetricsGroup};
use gpustack_tests::{
    machines::metax::{self, MetaxNode, VfShape},
    run_on_host, stderr, succeeded,
};

/// The VF as a current driver shows it: VF mode in MXSML, `physfn` in sysfs.
const VF_BOTH: VfShape = VfShape {
    mode_reported: true,
    physfn_link: true,
};

fn run(root: &Path, fixture: Option<&Path>, args: &[&str]) -> Output {
    run_on_host(root, (metax::FIXTURE_ENV, fixture), &[], args)
}

fn detect(node: &MetaxNode, extra: &[&str]) -> Vec<DevicesGroup> {
    let mut args = vec!["device-manager", "detect", "--manufacturer=metax"];
    args.extend_from_slice(extra);
    let out = run(&node.root, Some(&node.mxsml_fixture), &args);
    serde_yaml_ng::from_str(&succeeded(&out)).unwrap()
}

fn assert_mxc500_node(groups: &[DevicesGroup]) {
    assert_eq!(groups.len(), 1, "eight GPUs of one product: {groups:?}");
    let g = &groups[0];
    assert_eq!(g.id, "mxc500");
    assert_eq!(g.manufacturer, Manufacturer::Metax);
    assert_eq!(g.name, metax::NAME);
    assert_eq!(g.memory, metax::MEMORY_MIB);
    assert_eq!(g.cores, None, "MXSML reports no core count");
    assert_eq!(g.driver_version, metax::DRIVER_VERSION);
    assert_eq!(g.runtime_version, metax::MACA_VERSION);
    assert_eq!(g.compute_capability, "");
    assert_eq!(g.family, "MXC");

    let gpus = metax::gpus();
    assert_eq!(g.accelerators.len(), 8, "the VF is not an accelerator");
    for (i, (acc, gpu)) in g.accelerators.iter().zip(&gpus).enumerate() {
        assert_eq!(acc.id, gpu.uuid, "GPU {i}");
        assert_eq!(acc.index, i as u32, "GPU {i}: MXSML id");
        assert_eq!(
            acc.physical_indexes,
            [gpu.card, gpu.render],
            "GPU {i}: [cardN, renderDN]"
        );
        let t = &acc.topology;
        assert_eq!(t.pci_bus_id, gpu.bus_id, "GPU {i}");
        assert_eq!(t.pci_class, "030200", "GPU {i}");
        assert_eq!(t.pci_switches, [gpu.root_port], "GPU {i}");
        assert_eq!(t.pci_root_id, gpu.root_port, "GPU {i}");
        assert_eq!(t.numa_affinity, gpu.numa_node.to_string(), "GPU {i}");
        assert_eq!(
            t.cpu_affinity,
            if gpu.numa_node == 0 { "0-63" } else { "64-127" },
            "GPU {i}"
        );
        assert_eq!(t.roce, None);
        assert_eq!(
            acc.status.unhealthy,
            i == metax::UNHEALTHY_INDEX,
            "GPU {i}: only GPU 5 has uncorrectable errors"
        );
        let logical = acc.status.logical_sliced.as_ref().expect("sgpu slicing");
        assert_eq!(
            (logical.count, logical.cores_percentage_overcommit),
            (16, false)
        );
        assert_eq!(acc.status.physical_sliced, None);
    }
    assert!(
        g.accelerators
            .iter()
            .all(|a| a.topology.pci_bus_id != metax::VF_BUS_ID)
    );
    let detail = g.accelerator_sliced_detail.as_ref().unwrap();
    let logical = detail.logical.as_ref().unwrap();
    assert_eq!(
        (logical.count, logical.cores_percentage_overcommit),
        (8 * 16, false)
    );
    assert_eq!(detail.physical, None);
}

#[test]
fn mxc500_node_reports_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = metax::mxc500_node(dir.path(), VF_BOTH);
    assert_mxc500_node(&detect(&node, &[]));
}

#[test]
fn mxc500_node_without_the_pci_check() {
    // Topology and DRM nodes then come from reading the function MXSML names straight from
    // sysfs.
    let dir = tempfile::tempdir().unwrap();
    let node = metax::mxc500_node(dir.path(), VF_BOTH);
    assert_mxc500_node(&detect(&node, &["--no-pci-check"]));
}

#[test]
fn virtual_function_is_skipped_by_either_sign() {
    // An MXSML that does not report the mode: the `physfn` link alone tells.
    let dir = tempfile::tempdir().unwrap();
    let node = metax::mxc500_node(
        dir.path(),
        VfShape {
            mode_reported: false,
            physfn_link: true,
        },
    );
    assert_mxc500_node(&detect(&node, &[]));
    // No `physfn` link to see: MXSML's VF mode alone tells.
    let dir = tempfile::tempdir().unwrap();
    let node = metax::mxc500_node(
        dir.path(),
        VfShape {
            mode_reported: true,
            physfn_link: false,
        },
    );
    assert_mxc500_node(&detect(&node, &[]));
    // Neither: the VF is indistinguishable from a card and shows up (the test has teeth).
    let dir = tempfile::tempdir().unwrap();
    let node = metax::mxc500_node(
        dir.path(),
        VfShape {
            mode_reported: false,
            physfn_link: false,
        },
    );
    let groups = detect(&node, &[]);
    let all: usize = groups.iter().map(|g| g.accelerators.len()).sum();
    assert_eq!(all, 9, "{groups:?}");
}

#[test]
fn library_from_maca_and_yaml_shape() {
    let dir = tempfile::tempdir().unwrap();
    let node = metax::mxc500_node_with_library(dir.path(), VF_BOTH, metax::MACA_MXSML_PATH);
    let out = run(
        &node.root,
        Some(&node.mxsml_fixture),
        &["device-manager", "detect", "--manufacturer=metax"],
    );
    let text = succeeded(&out);
    assert!(text.contains("pciBusId: \"0000:34:00.0\""), "{text}");
    let value: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(value[0]["family"], "MXC");
    assert_eq!(value[0]["runtimeVersion"], metax::MACA_VERSION);
    assert_eq!(
        value[0]["accelerators"][0]["physicalIndexes"],
        serde_json::json!([1, 128])
    );
    assert_eq!(value[0]["accelerators"][0]["id"], metax::gpus()[0].uuid);
    let err = stderr(&out);
    assert!(!err.contains("left out"), "{err}");
}

#[test]
fn group_id_can_carry_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let node = metax::mxc500_node(dir.path(), VF_BOTH);
    // Through the helper that clears the vendors' own variables, as every other run here.
    let out = run_on_host(
        &node.root,
        (metax::FIXTURE_ENV, Some(&node.mxsml_fixture)),
        &[("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY", "true")],
        &["device-manager", "detect", "--manufacturer=metax"],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    assert_eq!(groups[0].id, "mxc500-64g");
}

#[test]
fn mxc500_node_monitor() {
    let dir = tempfile::tempdir().unwrap();
    let node = metax::mxc500_node(dir.path(), VF_BOTH);
    let out = run(
        &node.root,
        Some(&node.mxsml_fixture),
        &["device-manager", "monitor", "--manufacturer=metax"],
    );
    let text = succeeded(&out);
    let groups: Vec<MetricsGroup> = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].manufacturer, Manufacturer::Metax);
    let samples = &groups[0].accelerators;
    assert_eq!(samples.len(), 8, "no sample for the VF");
    for (i, (s, gpu)) in samples.iter().zip(metax::gpus()).enumerate() {
        assert_eq!(s.id, gpu.uuid, "GPU {i}");
        assert_eq!(s.memory, Some(metax::MEMORY_MIB), "GPU {i}");
        assert_eq!(s.memory_usage, Some(gpu.used_mib()), "GPU {i}");
        assert_eq!(s.memory_usage, Some(812 + 1000 * i as u64), "GPU {i}");
        assert_eq!(
            s.memory_utilization,
            Some((gpu.used_mib() * 100 / metax::MEMORY_MIB) as u32),
            "GPU {i}"
        );
        assert_eq!(s.cores_utilization, Some(11 * i as u32), "GPU {i}");
        assert_eq!(
            s.temperature,
            Some(40 + (150 * i as i32 + 12) / 100),
            "GPU {i}: 0.01 °C"
        );
        let power = (i != metax::NO_POWER_INDEX).then_some((136_000 + 1000 * i as u32) / 1000);
        assert_eq!(s.power_usage, power, "GPU {i}: sum of the board's inputs");
        assert_eq!(s.unhealthy, i == metax::UNHEALTHY_INDEX, "GPU {i}");
    }
    // Refused is absent in the YAML too, not printed as 0; a measured 0 stays 0.
    let value: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    let no_power = &value[0]["accelerators"][metax::NO_POWER_INDEX];
    assert!(no_power.get("powerUsage").is_none(), "{no_power}");
    assert_eq!(value[0]["accelerators"][0]["coresUtilization"], 0);
}

#[test]
fn driver_that_does_not_initialise_reports_nothing_and_says_why() {
    // MXSML is installed but answers mxSmlInit with an error (here: the stand-in has no
    // fixture, as the real library has no driver behind it).
    let dir = tempfile::tempdir().unwrap();
    let node = metax::mxc500_node(dir.path(), VF_BOTH);
    for command in ["detect", "monitor"] {
        let out = run(
            &node.root,
            None,
            &[
                "device-manager",
                command,
                "--manufacturer=metax",
                "--no-fast-failed",
            ],
        );
        assert_eq!(succeeded(&out), "[]\n", "{command}");
        let err = stderr(&out);
        assert!(err.contains("found 9 metax PCI function(s)"), "{err}");
        assert!(err.contains(metax::DRIVER_MXSML_PATH), "{err}");
        assert!(err.contains("mxSmlInit returned 2"), "{err}");
    }
}

#[test]
fn missing_library_names_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let node = metax::mxc500_node(dir.path(), VF_BOTH);
    std::fs::remove_file(
        node.root
            .join(metax::DRIVER_MXSML_PATH.trim_start_matches('/')),
    )
    .unwrap();
    let out = run(
        &node.root,
        Some(&node.mxsml_fixture),
        &[
            "device-manager",
            "detect",
            "--manufacturer=metax",
            "--no-fast-failed",
        ],
    );
    assert_eq!(succeeded(&out), "[]\n");
    let err = stderr(&out);
    assert!(err.contains("found 9 metax PCI function(s)"), "{err}");
    assert!(
        err.contains("libmxsml.so") && err.contains("/opt/mxdriver/lib"),
        "{err}"
    );
}
