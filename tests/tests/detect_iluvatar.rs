//! `device-manager detect` and `monitor` for Iluvatar CoreX through the real binary, with IXML
//! loaded by path from the fixture root: the stand-in `libixml.so` (crate `gpustack-fake-nvml`,
//! which also exports IXML's unversioned NVML names) serves the node's devices through the C ABI.

use std::{path::Path, process::Output};

use gpustack_api::{Manufacturer, devices::DevicesGroup, monitor::MetricsGroup};
use gpustack_tests::{
    machines::iluvatar::{self, GPUS, IluvatarNode},
    run_on_host, stderr, stdout, succeeded,
};

fn run(root: &Path, fixture: Option<&Path>, env: &[(&str, &str)], args: &[&str]) -> Output {
    run_on_host(root, (iluvatar::FIXTURE_ENV, fixture), env, args)
}

fn detect_on(node: &IluvatarNode, env: &[(&str, &str)]) -> Vec<DevicesGroup> {
    let out = run(
        &node.root,
        Some(&node.ixml_fixture),
        env,
        &["device-manager", "detect", "--manufacturer=iluvatar"],
    );
    serde_yaml_ng::from_str(&succeeded(&out)).unwrap()
}

#[test]
fn mr_v100_node_reports_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = iluvatar::mr_v100_node(dir.path());
    let groups = detect_on(&node, &[]);

    assert_eq!(groups.len(), 1, "four cards of one product: {groups:?}");
    let g = &groups[0];
    assert_eq!(g.id, "mr-v100", "brand stripped from the group id");
    assert_eq!(g.manufacturer, Manufacturer::Iluvatar);
    assert_eq!(g.name, "Iluvatar MR-V100");
    assert_eq!(g.memory, 32768);
    assert_eq!(g.cores, None, "IXML offers no core count");
    assert_eq!(g.driver_version, "4.4.0");
    assert_eq!(g.runtime_version, "10.2");
    assert_eq!(g.compute_capability, "7.1");
    assert_eq!(g.family, "", "no source names an Iluvatar family");

    assert_eq!(g.accelerators.len(), 4);
    for (i, (acc, gpu)) in g.accelerators.iter().zip(GPUS.iter()).enumerate() {
        assert_eq!(acc.id, gpu.uuid, "card {i}: the UUID as IXML answers it");
        assert_eq!(acc.index, i as u32, "card {i}: IXML order");
        assert_eq!(
            acc.physical_indexes,
            [gpu.minor],
            "card {i}: minor from IXML"
        );
        let t = &acc.topology;
        assert_eq!(t.pci_bus_id, gpu.bus_id, "card {i}");
        assert_eq!(t.pci_class, "120000", "card {i}");
        assert_eq!(t.pci_switches, [gpu.root_port], "card {i}");
        assert_eq!(t.pci_root_id, gpu.root_port, "card {i}");
        assert_eq!(t.numa_affinity, gpu.numa_node.to_string(), "card {i}");
        assert_eq!(
            t.cpu_affinity,
            iluvatar::NUMA_CPUS[gpu.numa_node as usize],
            "card {i}"
        );
        assert_eq!(t.roce, None);
        assert_eq!(
            acc.status.unhealthy,
            i == iluvatar::UNHEALTHY_INDEX,
            "card {i}: only the card with an ECC health flag"
        );
        let logical = acc.status.logical_sliced.as_ref().expect("logical slicing");
        assert_eq!(
            (logical.count, logical.cores_percentage_overcommit),
            (128, true),
            "card {i}"
        );
        assert_eq!(acc.status.physical_sliced, None, "card {i}");
    }
    let detail = g.accelerator_sliced_detail.as_ref().unwrap();
    let logical = detail.logical.as_ref().unwrap();
    assert_eq!(
        (logical.count, logical.cores_percentage_overcommit),
        (4 * 128, true)
    );
    assert_eq!(detail.physical, None);
}

#[test]
fn mr_v100_node_yaml_shape() {
    let dir = tempfile::tempdir().unwrap();
    let node = iluvatar::mr_v100_node(dir.path());
    let out = run(
        &node.root,
        Some(&node.ixml_fixture),
        &[],
        &["device-manager", "detect", "--manufacturer=iluvatar"],
    );
    let text = succeeded(&out);
    assert!(text.contains("runtimeVersion: \"10.2\""), "{text}");
    assert!(text.contains("computeCapability: \"7.1\""), "{text}");
    assert!(text.contains("pciBusId: \"0000:15:00.0\""), "{text}");
    assert!(!text.contains("cores:"), "{text}");
    assert!(!text.contains("family:"), "{text}");
    let value: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(value[0]["manufacturer"], "iluvatar");
    assert_eq!(
        value[0]["accelerators"][0]["physicalIndexes"],
        serde_json::json!([1])
    );
}

#[test]
fn group_id_can_carry_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let node = iluvatar::mr_v100_node(dir.path());
    let groups = detect_on(&node, &[("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY", "true")]);
    assert_eq!(groups[0].id, "mr-v100-32g");
}

#[test]
fn mr_v100_node_monitor() {
    let dir = tempfile::tempdir().unwrap();
    let node = iluvatar::mr_v100_node(dir.path());
    let out = run(
        &node.root,
        Some(&node.ixml_fixture),
        &[],
        &["device-manager", "monitor", "--manufacturer=iluvatar"],
    );
    let text = succeeded(&out);
    let groups: Vec<MetricsGroup> = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].manufacturer, Manufacturer::Iluvatar);
    let samples = &groups[0].accelerators;
    assert_eq!(samples.len(), 4);
    for (i, (s, gpu)) in samples.iter().zip(GPUS.iter()).enumerate() {
        assert_eq!(s.id, gpu.uuid, "card {i}");
        assert_eq!(s.memory, Some(32768), "card {i}");
        assert_eq!(s.memory_usage, Some(gpu.memory_used_mib), "card {i}");
        assert_eq!(
            s.memory_utilization,
            Some((gpu.memory_used_mib * 100 / 32768) as u32),
            "card {i}"
        );
        assert_eq!(s.cores_utilization, Some(gpu.gpu_util), "card {i}");
        assert_eq!(s.temperature, Some(gpu.temperature as i32), "card {i}");
        assert_eq!(s.power_usage, gpu.power_mw.map(|mw| mw / 1000), "card {i}");
        assert_eq!(s.unhealthy, i == iluvatar::UNHEALTHY_INDEX, "card {i}");
    }
    // Concrete figures, so that a shared mistake in the expectations above cannot hide.
    assert_eq!(samples[1].memory_utilization, Some(63));
    assert_eq!(samples[1].power_usage, Some(118));
    assert_eq!(
        samples[iluvatar::NO_POWER_INDEX].power_usage,
        None,
        "a refused power query is absent, never 0"
    );
    let value: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    assert!(
        value[0]["accelerators"][iluvatar::NO_POWER_INDEX]
            .get("powerUsage")
            .is_none(),
        "{text}"
    );
}

#[test]
fn missing_library_reports_nothing_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let tree = iluvatar::tree(dir.path());
    for command in ["detect", "monitor"] {
        let out = run(
            tree.root(),
            None,
            &[],
            &[
                "device-manager",
                command,
                "--manufacturer=iluvatar",
                "--no-fast-failed",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{command}: {}", stderr(&out));
        assert_eq!(stdout(&out).trim(), "[]", "{command}");
        let err = stderr(&out);
        assert!(
            err.contains("found 4 iluvatar PCI function(s) (0000:15:00.0, 0000:2a:00.0, 0000:98:00.0, 0000:b1:00.0)"),
            "{command}: names the cards: {err}"
        );
        assert!(err.contains("libixml.so"), "{command}: {err}");
        assert!(
            err.contains("/usr/local/corex/lib:") && err.contains("/usr/local/corex/lib64:"),
            "{command}: names where it looked: {err}"
        );
    }
}

#[test]
fn library_that_cannot_reach_the_driver_is_an_empty_measurement() {
    // libixml.so is installed but nvmlInit fails (the stand-in without a fixture answers
    // NVML_ERROR_DRIVER_NOT_LOADED, as IXML does without the CoreX kernel driver).
    let dir = tempfile::tempdir().unwrap();
    let node = iluvatar::mr_v100_node(dir.path());
    let out = run(
        &node.root,
        None,
        &[],
        &[
            "device-manager",
            "detect",
            "--manufacturer=iluvatar",
            "--no-fast-failed",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "[]");
    let err = stderr(&out);
    assert!(
        err.contains("/usr/local/corex/lib64/libixml.so did not initialise"),
        "{err}"
    );
    assert!(err.contains("NVML_ERROR_DRIVER_NOT_LOADED"), "{err}");
}

#[test]
fn corex_home_names_the_library_directory() {
    // An SDK installed elsewhere, named by COREX_HOME, with the library in lib/.
    let dir = tempfile::tempdir().unwrap();
    let tree = iluvatar::tree(dir.path());
    iluvatar::install_fake_ixml(&tree, "/opt/corex-4.4.0/lib/libixml.so");
    let node = iluvatar::mr_v100_node(&dir.path().join("fixture-source"));
    let out = run(
        tree.root(),
        Some(&node.ixml_fixture),
        &[("COREX_HOME", "/opt/corex-4.4.0")],
        &["device-manager", "detect", "--manufacturer=iluvatar"],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].accelerators.len(), 4);
    assert_eq!(
        groups[0].accelerators[3].topology.pci_bus_id,
        "0000:b1:00.0"
    );
}

#[test]
fn pci_check_gates_the_library() {
    // IXML is installed and serves four cards, but sysfs shows no Iluvatar function: with the
    // PCI check on the library is not loaded; with --no-pci-check the cards are reported, and
    // their topology is still read from sysfs by bus id where sysfs has it (here: it has not).
    let dir = tempfile::tempdir().unwrap();
    let node = iluvatar::mr_v100_node(dir.path());
    std::fs::remove_dir_all(node.root.join("sys")).unwrap();
    let out = run(
        &node.root,
        Some(&node.ixml_fixture),
        &[],
        &[
            "device-manager",
            "detect",
            "--manufacturer=iluvatar",
            "--no-fast-failed",
        ],
    );
    assert_eq!(stdout(&out).trim(), "[]", "{}", stderr(&out));
    assert!(!stderr(&out).contains("libixml.so"), "{}", stderr(&out));

    let out = run(
        &node.root,
        Some(&node.ixml_fixture),
        &[],
        &[
            "device-manager",
            "detect",
            "--manufacturer=iluvatar",
            "--no-pci-check",
        ],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    let accs = &groups[0].accelerators;
    assert_eq!(accs.len(), 4);
    assert_eq!(accs[0].topology.pci_bus_id, "0000:15:00.0");
    assert_eq!(accs[0].topology.pci_class, "", "no sysfs: only the bus id");
}
