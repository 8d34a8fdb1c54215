//! `device-manager detect` and `monitor` for T-Head PPUs through the real binary, with HGML
//! loaded by path from the fixture root: the stand-in `libhgml.so` (crate `gpustack-fake-nvml`)
//! serves the node's PPUs through HGML's C ABI.

use std::{path::Path, process::Output};

use gpustack_api::{
    Manufacturer,
    devices::{DevicesGroup, Placement},
    monitor::MetricsGroup,
};
use gpustack_tests::{
    machines::thead::{self, PPUS, TheadNode},
    run_on_host, stderr, stdout, succeeded,
};

fn run(root: &Path, fixture: Option<&Path>, env: &[(&str, &str)], args: &[&str]) -> Output {
    run_on_host(root, (thead::FIXTURE_ENV, fixture), env, args)
}

fn detect_on(node: &TheadNode, env: &[(&str, &str)]) -> Vec<DevicesGroup> {
    let out = run(
        &node.root,
        Some(&node.hgml_fixture),
        env,
        &["device-manager", "detect", "--manufacturer=thead"],
    );
    serde_yaml_ng::from_str(&succeeded(&out)).unwrap()
}

#[test]
fn zw810e_node_reports_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = thead::zw810e_node(dir.path());
    let groups = detect_on(&node, &[]);

    assert_eq!(groups.len(), 1, "eight cards of one product: {groups:?}");
    let g = &groups[0];
    assert_eq!(g.id, "ppu-zw810e");
    assert_eq!(g.manufacturer, Manufacturer::Thead);
    assert_eq!(g.name, "PPU-ZW810E");
    assert_eq!(g.memory, 98_304);
    assert_eq!(g.cores, Some(thead::PPU_CORES));
    assert_eq!(g.driver_version, "1.3.2-d7f5a2");
    assert_eq!(g.runtime_version, "13.0", "HGGC 13000 as major.minor");
    assert_eq!(g.compute_capability, "8.0");
    assert_eq!(g.family, "", "no source names a PPU family");

    assert_eq!(g.accelerators.len(), 8);
    for (i, (acc, ppu)) in g.accelerators.iter().zip(PPUS.iter()).enumerate() {
        assert_eq!(acc.id, ppu.uuid, "card {i}: the UUID as HGML answers it");
        assert_eq!(acc.index, i as u32, "card {i}: HGML order");
        assert_eq!(
            acc.physical_indexes,
            ppu.minor.into_iter().collect::<Vec<_>>(),
            "card {i}: minor from HGML, omitted when refused"
        );
        let s = &thead::SWITCHES[i / 2];
        let t = &acc.topology;
        assert_eq!(t.pci_bus_id, ppu.bus_id, "card {i}");
        assert_eq!(t.pci_class, "120000", "card {i}");
        assert_eq!(
            t.pci_switches,
            [s.downstream[i % 2], s.upstream, s.root_port],
            "card {i}: innermost first"
        );
        assert_eq!(t.pci_root_id, s.root_port, "card {i}");
        assert_eq!(t.numa_affinity, ppu.numa_node.to_string(), "card {i}");
        assert_eq!(
            t.cpu_affinity,
            thead::NUMA_CPUS[ppu.numa_node as usize],
            "card {i}"
        );
        assert_eq!(t.roce, None);
        assert_eq!(
            acc.status.unhealthy,
            i == thead::UNHEALTHY_INDEX,
            "card {i}: only the card with uncorrected ECC errors"
        );
        if i == thead::MIG_INDEX {
            continue;
        }
        let logical = acc.status.logical_sliced.as_ref().expect("logical slicing");
        assert_eq!(
            (logical.count, logical.cores_percentage_overcommit),
            (128, true),
            "card {i}"
        );
        assert_eq!(acc.status.physical_sliced, None, "card {i}");
    }
    // Concrete figures, so that a shared mistake in the loop's expectations cannot hide.
    assert_eq!(g.accelerators[0].physical_indexes, [1]);
    assert!(
        g.accelerators[thead::NO_MINOR_INDEX]
            .physical_indexes
            .is_empty()
    );
    assert_eq!(g.accelerators[4].topology.pci_root_id, "0000:95:01.0");
    assert_eq!(g.accelerators[4].topology.cpu_affinity, "48-95,144-191");

    // The MIG card: its profiles, no logical slicing.
    let mig = &g.accelerators[thead::MIG_INDEX].status;
    assert_eq!(
        mig.logical_sliced, None,
        "a MIG card is not logically sliced"
    );
    let physical = mig.physical_sliced.as_ref().expect("physical slicing");
    let names: Vec<_> = physical.profiles.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["1g.24gb", "2g.48gb", "4g.96gb"],
        "the +me variant is not offered"
    );
    assert_eq!(physical.count, 4, "the largest profile count");
    let two = &physical.profiles[1];
    assert_eq!(
        (
            two.memory_mib,
            two.compute_slices,
            two.memory_slices,
            two.count
        ),
        (48_768, 2, 2, 2)
    );
    assert_eq!(
        two.placements,
        [
            Placement {
                start: 0,
                length: 2
            },
            Placement {
                start: 2,
                length: 2
            }
        ]
    );

    let detail = g.accelerator_sliced_detail.as_ref().unwrap();
    let logical = detail.logical.as_ref().unwrap();
    assert_eq!(
        (logical.count, logical.cores_percentage_overcommit),
        (7 * 128, true)
    );
    let physical = detail.physical.as_ref().unwrap();
    assert_eq!(physical.count, 4);
    assert_eq!(physical.profiles.len(), 3);
}

#[test]
fn zw810e_node_yaml_shape() {
    let dir = tempfile::tempdir().unwrap();
    let node = thead::zw810e_node(dir.path());
    let out = run(
        &node.root,
        Some(&node.hgml_fixture),
        &[],
        &["device-manager", "detect", "--manufacturer=thead"],
    );
    let text = succeeded(&out);
    assert!(text.contains("runtimeVersion: \"13.0\""), "{text}");
    assert!(text.contains("computeCapability: \"8.0\""), "{text}");
    assert!(text.contains("pciBusId: \"0000:18:00.0\""), "{text}");
    assert!(!text.contains("family:"), "{text}");
    let value: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(value[0]["manufacturer"], "thead");
    assert_eq!(value[0]["cores"], thead::PPU_CORES);
    assert!(
        value[0]["accelerators"][thead::NO_MINOR_INDEX]
            .get("physicalIndexes")
            .is_none(),
        "{text}"
    );
}

#[test]
fn group_id_can_carry_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let node = thead::zw810e_node(dir.path());
    let groups = detect_on(&node, &[("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY", "true")]);
    assert_eq!(groups[0].id, "ppu-zw810e-96g");
}

#[test]
fn zw810e_node_monitor() {
    let dir = tempfile::tempdir().unwrap();
    let node = thead::zw810e_node(dir.path());
    let out = run(
        &node.root,
        Some(&node.hgml_fixture),
        &[],
        &["device-manager", "monitor", "--manufacturer=thead"],
    );
    let text = succeeded(&out);
    let groups: Vec<MetricsGroup> = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].manufacturer, Manufacturer::Thead);
    let samples = &groups[0].accelerators;
    assert_eq!(samples.len(), 8);
    for (i, (s, ppu)) in samples.iter().zip(PPUS.iter()).enumerate() {
        assert_eq!(s.id, ppu.uuid, "card {i}");
        assert_eq!(s.memory, Some(98_304), "card {i}");
        assert_eq!(s.memory_usage, Some(ppu.memory_used_mib), "card {i}");
        assert_eq!(
            s.memory_utilization,
            Some((ppu.memory_used_mib * 100 / 98_304) as u32),
            "card {i}"
        );
        assert_eq!(s.cores_utilization, Some(ppu.gpu_util), "card {i}");
        assert_eq!(s.temperature, Some(ppu.temperature as i32), "card {i}");
        assert_eq!(s.power_usage, ppu.power_mw.map(|mw| mw / 1000), "card {i}");
        assert_eq!(s.unhealthy, i == thead::UNHEALTHY_INDEX, "card {i}");
    }
    // Concrete figures, so that a shared mistake in the expectations above cannot hide.
    assert_eq!(samples[0].memory_utilization, Some(83));
    assert_eq!(samples[0].cores_utilization, Some(97));
    assert_eq!(samples[0].power_usage, Some(351));
    assert_eq!(samples[0].temperature, Some(63));
    assert!(samples[thead::UNHEALTHY_INDEX].unhealthy);
    assert_eq!(
        samples[thead::NO_POWER_INDEX].power_usage,
        None,
        "a refused power query is absent, never 0"
    );
    let value: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    assert!(
        value[0]["accelerators"][thead::NO_POWER_INDEX]
            .get("powerUsage")
            .is_none(),
        "{text}"
    );
}

#[test]
fn refused_figures_are_absent_in_monitor() {
    // A card that answers only identity and memory: every other figure is absent, never 0.
    let dir = tempfile::tempdir().unwrap();
    let tree = thead::tree(dir.path());
    thead::install_fake_hgml(&tree, thead::HGML_HOST_PATH);
    let fixture = serde_json::json!({
        "devices": [{
            "uuid": PPUS[0].uuid,
            "name": thead::PPU_NAME,
            "pciBusId": PPUS[0].hgml_bus_id(),
            "memoryTotalMib": thead::PPU_MEMORY_MIB,
        }],
    });
    let path = thead::write_fixture(dir.path(), &fixture);
    let out = run(
        tree.root(),
        Some(&path),
        &[],
        &["device-manager", "monitor", "--manufacturer=thead"],
    );
    let value: serde_json::Value = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    let sample = &value[0]["accelerators"][0];
    assert_eq!(sample["id"], PPUS[0].uuid);
    assert_eq!(sample["memoryUsage"], 0);
    for absent in ["coresUtilization", "temperature", "powerUsage"] {
        assert!(sample.get(absent).is_none(), "{absent}: {sample}");
    }

    let out = run(
        tree.root(),
        Some(&path),
        &[],
        &["device-manager", "detect", "--manufacturer=thead"],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    let g = &groups[0];
    assert_eq!(
        (
            g.cores,
            g.driver_version.as_str(),
            g.runtime_version.as_str()
        ),
        (None, "", "")
    );
    assert_eq!(g.compute_capability, "");
    let acc = &g.accelerators[0];
    assert!(
        !acc.status.unhealthy,
        "a refused ECC query holds nothing against the card"
    );
    assert!(acc.status.logical_sliced.is_some(), "no MIG query: logical");
    assert!(acc.physical_indexes.is_empty());
}

#[test]
fn missing_library_reports_nothing_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let tree = thead::tree(dir.path());
    for command in ["detect", "monitor"] {
        let out = run(
            tree.root(),
            None,
            &[],
            &[
                "device-manager",
                command,
                "--manufacturer=thead",
                "--no-fast-failed",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{command}: {}", stderr(&out));
        assert_eq!(stdout(&out).trim(), "[]", "{command}");
        let err = stderr(&out);
        assert!(
            err.contains("found 8 thead PCI function(s) (0000:18:00.0, 0000:19:00.0,"),
            "{command}: names the cards: {err}"
        );
        assert!(err.contains("libhgml.so"), "{command}: {err}");
        assert!(
            err.contains("/usr/local/PPU_SDK/lib:"),
            "{command}: names where it looked: {err}"
        );
    }
}

#[test]
fn driver_that_does_not_initialise_is_an_empty_measurement() {
    // libhgml.so is installed but hgmlInit_v2 fails: without a fixture the stand-in answers
    // HGML_ERROR_DRIVER_NOT_LOADED, as HGML does without the PPU kernel driver; with one it
    // answers the status the fixture names.
    let dir = tempfile::tempdir().unwrap();
    let node = thead::zw810e_node(dir.path());
    let broken_dir = dir.path().join("broken");
    std::fs::create_dir_all(&broken_dir).unwrap();
    let broken = thead::write_fixture(&broken_dir, &serde_json::json!({"initStatus": 18}));
    for (fixture, status) in [
        (None, "HGML_ERROR_DRIVER_NOT_LOADED"),
        (Some(broken.as_path()), "HGML_ERROR_LIB_RM_VERSION_MISMATCH"),
    ] {
        for command in ["detect", "monitor"] {
            let out = run(
                &node.root,
                fixture,
                &[],
                &[
                    "device-manager",
                    command,
                    "--manufacturer=thead",
                    "--no-fast-failed",
                ],
            );
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            assert_eq!(stdout(&out).trim(), "[]", "{command}");
            let err = stderr(&out);
            assert!(
                err.contains("/usr/local/PPU_SDK/lib/libhgml.so did not initialise"),
                "{command}: {err}"
            );
            assert!(err.contains(status), "{command}: {err}");
        }
    }
}

#[test]
fn ppu_home_names_the_library_directory() {
    // An SDK installed elsewhere, named by PPU_HOME, with the library in lib64/.
    let dir = tempfile::tempdir().unwrap();
    let tree = thead::tree(dir.path());
    thead::install_fake_hgml(&tree, "/opt/PPU_SDK-2.1.0/lib64/libhgml.so");
    let fixture = thead::write_fixture(dir.path(), &thead::fixture());
    let out = run(
        tree.root(),
        Some(&fixture),
        &[("PPU_HOME", "/opt/PPU_SDK-2.1.0")],
        &["device-manager", "detect", "--manufacturer=thead"],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].accelerators.len(), 8);
}

#[test]
fn pci_check_gates_the_library() {
    // HGML is installed and serves eight cards, but sysfs shows no T-Head function: with the
    // PCI check on the library is not loaded; with --no-pci-check the cards are reported with
    // only the bus id as topology.
    let dir = tempfile::tempdir().unwrap();
    let node = thead::zw810e_node(dir.path());
    std::fs::remove_dir_all(node.root.join("sys")).unwrap();
    let out = run(
        &node.root,
        Some(&node.hgml_fixture),
        &[],
        &[
            "device-manager",
            "detect",
            "--manufacturer=thead",
            "--no-fast-failed",
        ],
    );
    assert_eq!(stdout(&out).trim(), "[]", "{}", stderr(&out));
    assert!(!stderr(&out).contains("libhgml.so"), "{}", stderr(&out));

    let out = run(
        &node.root,
        Some(&node.hgml_fixture),
        &[],
        &[
            "device-manager",
            "detect",
            "--manufacturer=thead",
            "--no-pci-check",
        ],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    let accs = &groups[0].accelerators;
    assert_eq!(accs.len(), 8);
    assert_eq!(accs[7].topology.pci_bus_id, "0000:ba:00.0");
    assert_eq!(accs[7].topology.pci_class, "", "no sysfs: only the bus id");
}

#[test]
fn mig_card_without_profiles_reports_no_slicing_and_says_so() {
    // MIG is on but HGML offers no profile: the card advertises neither logical slices (it
    // cannot serve them) nor an empty physical capability.
    let dir = tempfile::tempdir().unwrap();
    let tree = thead::tree(dir.path());
    thead::install_fake_hgml(&tree, thead::HGML_HOST_PATH);
    let mut fixture = thead::fixture();
    fixture["devices"][0]["migMode"] = serde_json::json!({"current": 1, "pending": 1});
    let path = thead::write_fixture(dir.path(), &fixture);
    let out = run(
        tree.root(),
        Some(&path),
        &[],
        &["device-manager", "detect", "--manufacturer=thead"],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    let status = &groups[0].accelerators[0].status;
    assert_eq!(status.logical_sliced, None);
    assert_eq!(status.physical_sliced, None);
    assert!(groups[0].accelerators[1].status.logical_sliced.is_some());
    let err = stderr(&out);
    assert!(
        err.contains("T-Head PPU 0 is in MIG mode but HGML offers no publishable MIG profile"),
        "{err}"
    );
}
