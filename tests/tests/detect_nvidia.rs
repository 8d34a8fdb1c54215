//! `device-manager detect` and `monitor` for NVIDIA through the real binary, with NVML loaded
//! by path from the fixture root: the stand-in `libnvidia-ml.so.1` (crate `gpustack-fake-nvml`)
//! serves each node's devices through the NVML C ABI.

use std::{path::Path, process::Output};

use gpustack_api::{
    Manufacturer,
    devices::{DevicesGroup, Placement},
    monitor::MetricsGroup,
};
use gpustack_tests::{
    machines::nvidia::{self, NvidiaNode},
    run_on_host, stderr, stdout, succeeded,
};

fn run(root: &Path, fixture: Option<&Path>, args: &[&str]) -> Output {
    run_on_host(root, (nvidia::FIXTURE_ENV, fixture), &[], args)
}

fn on_node(node: &NvidiaNode, args: &[&str]) -> Output {
    run(&node.root, Some(&node.nvml_fixture), args)
}

fn detect(node: &NvidiaNode, extra: &[&str]) -> Vec<DevicesGroup> {
    let mut args = vec!["device-manager", "detect", "--manufacturer=nvidia"];
    args.extend_from_slice(extra);
    serde_yaml_ng::from_str(&succeeded(&on_node(node, &args))).unwrap()
}

fn monitor(node: &NvidiaNode) -> Vec<MetricsGroup> {
    let out = on_node(
        node,
        &["device-manager", "monitor", "--manufacturer=nvidia"],
    );
    serde_yaml_ng::from_str(&succeeded(&out)).unwrap()
}

#[test]
fn hgx_h100_node_reports_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::hgx_h100_node(dir.path());
    let groups = detect(&node, &[]);

    assert_eq!(groups.len(), 1, "eight cards of one product: {groups:?}");
    let g = &groups[0];
    assert_eq!(g.id, "h100-80gb-hbm3");
    assert_eq!(g.manufacturer, Manufacturer::Nvidia);
    assert_eq!(g.name, "NVIDIA H100 80GB HBM3");
    assert_eq!(g.memory, 81559, "HBM: no ECC correction");
    assert_eq!(g.cores, Some(16896));
    assert_eq!(g.driver_version, "550.54.15");
    assert_eq!(g.runtime_version, "12.4");
    assert_eq!(g.compute_capability, "9.0");
    assert_eq!(g.family, "Hopper");

    let expected: [(&str, &str, u32, &str, [&str; 3]); 8] = [
        (
            "GPU-5b2e7a1c-0d3f-4a8b-9c6e-1f2a3b4c5d60",
            "0000:18:00.0",
            2,
            "0",
            ["0000:17:00.0", "0000:16:00.0", "0000:15:01.0"],
        ),
        (
            "GPU-6c3f8b2d-1e4a-4b9c-8d7f-2a3b4c5d6e71",
            "0000:2a:00.0",
            3,
            "0",
            ["0000:17:10.0", "0000:16:00.0", "0000:15:01.0"],
        ),
        (
            "GPU-7d4a9c3e-2f5b-4cad-9e8a-3b4c5d6e7f82",
            "0000:3a:00.0",
            0,
            "0",
            ["0000:39:00.0", "0000:38:00.0", "0000:37:01.0"],
        ),
        (
            "GPU-8e5bad4f-3a6c-4dbe-8f9b-4c5d6e7f8a93",
            "0000:5d:00.0",
            1,
            "0",
            ["0000:39:10.0", "0000:38:00.0", "0000:37:01.0"],
        ),
        (
            "GPU-9f6cbe5a-4b7d-4ecf-9a0c-5d6e7f8a9ba4",
            "0000:9a:00.0",
            6,
            "1",
            ["0000:99:00.0", "0000:98:00.0", "0000:97:01.0"],
        ),
        (
            "GPU-a07dcf6b-5c8e-4fd0-8b1d-6e7f8a9bacb5",
            "0000:ab:00.0",
            7,
            "1",
            ["0000:99:10.0", "0000:98:00.0", "0000:97:01.0"],
        ),
        (
            "GPU-b18ed07c-6d9f-40e1-9c2e-7f8a9bacbdc6",
            "0000:ba:00.0",
            4,
            "1",
            ["0000:b9:00.0", "0000:b8:00.0", "0000:b7:01.0"],
        ),
        (
            "GPU-c29fe18d-7ea0-41f2-8d3f-8a9bacbdced7",
            "0000:db:00.0",
            5,
            "1",
            ["0000:b9:10.0", "0000:b8:00.0", "0000:b7:01.0"],
        ),
    ];
    assert_eq!(g.accelerators.len(), 8);
    for (i, (acc, (id, bus, minor, numa, switches))) in
        g.accelerators.iter().zip(expected).enumerate()
    {
        assert_eq!(acc.id, id, "card {i}");
        assert_eq!(acc.index, i as u32);
        assert_eq!(acc.physical_indexes, [minor], "card {i}: minor from NVML");
        let t = &acc.topology;
        assert_eq!(t.pci_bus_id, bus, "card {i}");
        assert_eq!(t.pci_class, "030200", "card {i}");
        assert_eq!(t.pci_switches, switches, "card {i}");
        assert_eq!(
            t.pci_root_id, switches[2],
            "card {i}: the root port is the outermost bridge"
        );
        assert_eq!(t.numa_affinity, numa, "card {i}");
        assert_eq!(
            t.cpu_affinity,
            if numa == "0" { "0-55" } else { "56-111" },
            "card {i}"
        );
        // Card 2's uncorrected errors are in its lifetime (aggregate) count only.
        assert_eq!(
            acc.status.unhealthy,
            i == 5,
            "card {i}: only card 5 has uncorrected ECC errors since the driver loaded"
        );
        let logical = acc
            .status
            .logical_sliced
            .as_ref()
            .expect("MIG off: logical slicing");
        assert_eq!(
            (logical.count, logical.cores_percentage_overcommit),
            (128, true)
        );
        assert_eq!(acc.status.physical_sliced, None);
    }
    let detail = g.accelerator_sliced_detail.as_ref().unwrap();
    let logical = detail.logical.as_ref().unwrap();
    assert_eq!(
        (logical.count, logical.cores_percentage_overcommit),
        (8 * 128, true)
    );
    assert_eq!(detail.physical, None);
}

#[test]
fn hgx_h100_node_yaml_shape() {
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::hgx_h100_node(dir.path());
    let out = on_node(
        &node,
        &["device-manager", "detect", "--manufacturer=nvidia"],
    );
    let text = succeeded(&out);
    // Versions and bus ids are strings, quoted where YAML would read them as numbers.
    assert!(text.contains("runtimeVersion: \"12.4\""), "{text}");
    assert!(text.contains("computeCapability: \"9.0\""), "{text}");
    assert!(text.contains("pciBusId: \"0000:18:00.0\""), "{text}");
    // A value YAML would read as a number must stay a string once parsed back untyped.
    let value: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(value[0]["runtimeVersion"], "12.4");
    assert_eq!(value[0]["computeCapability"], "9.0");
    assert_eq!(
        value[0]["accelerators"][0]["topology"]["pciClass"],
        "030200"
    );
    assert_eq!(
        value[0]["accelerators"][0]["physicalIndexes"],
        serde_json::json!([2])
    );
}

#[test]
fn group_id_can_carry_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::hgx_h100_node(dir.path());
    // Through the helper that clears the vendors' own variables, as every other run here.
    let out = run_on_host(
        &node.root,
        (nvidia::FIXTURE_ENV, Some(&node.nvml_fixture)),
        &[("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY", "true")],
        &["device-manager", "detect", "--manufacturer=nvidia"],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    assert_eq!(groups[0].id, "h100-80gb-hbm3-80g");
}

#[test]
fn hgx_h100_node_monitor() {
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::hgx_h100_node(dir.path());
    let groups = monitor(&node);
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].manufacturer, Manufacturer::Nvidia);
    let samples = &groups[0].accelerators;
    assert_eq!(samples.len(), 8);
    for (i, (s, gpu)) in samples.iter().zip(nvidia::H100_GPUS.iter()).enumerate() {
        assert_eq!(s.id, gpu.uuid, "card {i}");
        assert_eq!(s.memory, Some(81559), "card {i}");
        let used = 1024 * i as u64 + 1;
        assert_eq!(s.memory_usage, Some(used), "card {i}");
        assert_eq!(
            s.memory_utilization,
            Some((used * 100 / 81559) as u32),
            "card {i}"
        );
        assert_eq!(s.cores_utilization, Some(10 * i as u32), "card {i}");
        assert_eq!(s.temperature, Some(30 + i as i32), "card {i}");
        assert_eq!(
            s.power_usage,
            Some((70_000 + 1_500 * i as u32) / 1000),
            "card {i}"
        );
        assert_eq!(s.unhealthy, i == 5, "card {i}");
    }
    assert_eq!(samples[7].memory_utilization, Some(8));
    assert_eq!(samples[7].power_usage, Some(80));
}

#[test]
fn a100_with_mig_reports_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::a100_mig_node(dir.path());
    let groups = detect(&node, &[]);
    assert_eq!(groups.len(), 1);
    let g = &groups[0];
    assert_eq!(g.id, "a100-sxm4-80gb");
    assert_eq!(g.name, "NVIDIA A100-SXM4-80GB");
    assert_eq!(g.memory, 81920);
    assert_eq!(g.cores, Some(6912));
    assert_eq!(
        (g.driver_version.as_str(), g.runtime_version.as_str()),
        ("535.161.08", "12.2")
    );
    assert_eq!(
        (g.compute_capability.as_str(), g.family.as_str()),
        ("8.0", "Ampere")
    );

    let acc = &g.accelerators[0];
    assert_eq!(acc.id, nvidia::A100_UUID);
    assert_eq!((acc.index, acc.physical_indexes.as_slice()), (0, &[0][..]));
    assert_eq!(acc.topology.pci_bus_id, "0000:07:00.0");
    assert_eq!(acc.topology.pci_root_id, "0000:00:03.1");
    assert_eq!(acc.topology.pci_switches, ["0000:00:03.1"]);
    assert_eq!(acc.topology.numa_affinity, "0", "no NUMA node reported: 0");
    assert_eq!(acc.topology.cpu_affinity, "0-31");
    assert!(!acc.status.unhealthy);
    assert_eq!(
        acc.status.logical_sliced, None,
        "a partitioned card offers no logical slices"
    );

    let physical = acc
        .status
        .physical_sliced
        .as_ref()
        .expect("MIG on: profiles");
    assert_eq!(physical.count, 7, "the largest profile count");
    let profiles: Vec<_> = physical
        .profiles
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.memory_mib,
                p.compute_slices,
                p.memory_slices,
                p.count,
            )
        })
        .collect();
    // The driver's answers (the fixture's `nvidia-smi mig -lgip` rows), in size order.
    assert_eq!(
        profiles,
        [
            ("1g.10gb", 9728, 1, 1, 7),
            ("1g.20gb", 19968, 1, 2, 4),
            ("2g.20gb", 19968, 2, 2, 3),
            ("3g.40gb", 40192, 3, 4, 2),
            ("4g.40gb", 40192, 4, 4, 1),
            ("7g.80gb", 81152, 7, 8, 1),
        ],
        "+me variants are not offered"
    );
    let placements = |name: &str| {
        physical
            .profiles
            .iter()
            .find(|p| p.name == name)
            .unwrap()
            .placements
            .clone()
    };
    let runs = |starts: &[u32], length: u32| -> Vec<Placement> {
        starts
            .iter()
            .map(|&start| Placement { start, length })
            .collect()
    };
    assert_eq!(placements("1g.10gb"), runs(&[0, 1, 2, 3, 4, 5, 6], 1));
    assert_eq!(placements("1g.20gb"), runs(&[0, 2, 4, 6], 2));
    assert_eq!(placements("2g.20gb"), runs(&[0, 2, 4], 2));
    assert_eq!(placements("3g.40gb"), runs(&[0, 4], 4));
    assert_eq!(placements("4g.40gb"), runs(&[0], 4));
    assert_eq!(placements("7g.80gb"), runs(&[0], 8));

    let detail = g.accelerator_sliced_detail.as_ref().unwrap();
    assert_eq!(detail.logical, None);
    let summed = detail.physical.as_ref().unwrap();
    assert_eq!(summed.count, 7);
    assert_eq!(summed.profiles.len(), 6);
}

#[test]
fn a100_with_mig_monitor_leaves_utilization_absent() {
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::a100_mig_node(dir.path());
    let groups = monitor(&node);
    let s = &groups[0].accelerators[0];
    assert_eq!(s.id, nvidia::A100_UUID);
    assert_eq!(
        (s.memory, s.memory_usage, s.memory_utilization),
        (Some(81920), Some(13), Some(0))
    );
    assert_eq!(
        s.cores_utilization, None,
        "NVML refuses utilization in MIG mode: absent, not 0"
    );
    assert_eq!((s.temperature, s.power_usage), (Some(31), Some(62)));
    let text = stdout(&on_node(
        &node,
        &["device-manager", "monitor", "--manufacturer=nvidia"],
    ));
    assert!(!text.contains("coresUtilization"), "{text}");
}

#[test]
fn no_nvml_library_reports_nothing_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let root = nvidia::no_nvml_node(dir.path());
    for command in ["detect", "monitor"] {
        let out = run(
            &root,
            None,
            &[
                "device-manager",
                command,
                "--manufacturer=nvidia",
                "--no-fast-failed",
            ],
        );
        assert_eq!(stdout(&out).trim(), "[]", "{command}");
        assert_eq!(out.status.code(), Some(0), "{command}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("libnvidia-ml.so.1"), "{command}: {err}");
        assert!(
            err.contains("/usr/lib/x86_64-linux-gnu"),
            "{command}: names where it looked: {err}"
        );
        assert!(
            err.contains(nvidia::L4_BUS_ID),
            "{command}: names the card: {err}"
        );
    }
}

#[test]
fn no_nvml_library_fails_fast_without_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let root = nvidia::no_nvml_node(dir.path());
    let out = run(
        &root,
        None,
        &["device-manager", "detect", "--manufacturer=nvidia"],
    );
    assert_eq!(stdout(&out).trim(), "[]");
    assert_ne!(
        out.status.code(),
        Some(0),
        "an empty single-manufacturer pass is a failure"
    );
    assert!(
        stderr(&out).contains("libnvidia-ml.so.1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn driver_not_loaded_is_an_empty_measurement() {
    // The library is there but NVML cannot reach a driver (the stand-in without a fixture).
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::a100_mig_node(dir.path());
    let out = run(
        &node.root,
        None,
        &[
            "device-manager",
            "detect",
            "--manufacturer=nvidia",
            "--no-fast-failed",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "[]");
    let err = stderr(&out);
    assert!(
        err.contains("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 did not initialise"),
        "{err}"
    );
    // NVML's own answer (NVML_ERROR_DRIVER_NOT_LOADED), not just the hint that follows it.
    assert!(err.contains("NVIDIA driver is not loaded"), "{err}");

    // A broken fixture is a driver that answers with an error too.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{ not json").unwrap();
    let out = run(
        &node.root,
        Some(&bad),
        &[
            "device-manager",
            "detect",
            "--manufacturer=nvidia",
            "--no-fast-failed",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "[]");
    assert!(
        stderr(&out).contains("did not initialise"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn pci_check_gates_the_library() {
    // NVML is installed and serves an H100, but sysfs shows no NVIDIA function: with the PCI
    // check on the library is not even loaded, with --no-pci-check the card is reported.
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::hgx_h100_node(dir.path());
    std::fs::remove_dir_all(node.root.join("sys")).unwrap();

    let out = on_node(
        &node,
        &[
            "device-manager",
            "detect",
            "--manufacturer=nvidia",
            "--no-fast-failed",
        ],
    );
    assert_eq!(stdout(&out).trim(), "[]");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("libnvidia-ml"),
        "library not touched: {}",
        stderr(&out)
    );

    let groups = detect(&node, &["--no-pci-check"]);
    let accs = &groups[0].accelerators;
    assert_eq!(accs.len(), 8);
    // Without sysfs only NVML's bus id is known.
    assert_eq!(accs[0].topology.pci_bus_id, "0000:18:00.0");
    assert_eq!(accs[0].topology.numa_affinity, "");
    assert!(accs[0].topology.pci_switches.is_empty());
}

#[test]
fn no_pci_check_still_reads_topology_from_sysfs() {
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::hgx_h100_node(dir.path());
    let with_check = detect(&node, &[]);
    let without = detect(&node, &["--no-pci-check"]);
    assert_eq!(with_check, without);
    assert_eq!(without[0].accelerators[7].topology.numa_affinity, "1");
}

#[test]
fn no_pci_check_without_nvml_is_quiet_and_empty() {
    // --no-pci-check on a node without NVIDIA hardware: nothing to report, nothing to warn about.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let out = run(
        &root,
        None,
        &[
            "device-manager",
            "detect",
            "--manufacturer=nvidia",
            "--no-pci-check",
            "--no-fast-failed",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "[]");
    assert!(!stderr(&out).contains("libnvidia-ml"), "{}", stderr(&out));
}

#[test]
fn all_manufacturers_on_the_h100_node() {
    // The default --manufacturer is all nine: only NVIDIA has PCI functions here.
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::hgx_h100_node(dir.path());
    let groups = detect(&node, &[]);
    let all: Vec<DevicesGroup> =
        serde_yaml_ng::from_str(&succeeded(&on_node(&node, &["device-manager", "detect"])))
            .unwrap();
    assert_eq!(all, groups);
}

/// Rewrites the node's NVML fixture with `edit`.
fn edit_fixture(node: &NvidiaNode, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&node.nvml_fixture).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(&node.nvml_fixture, serde_json::to_vec(&value).unwrap()).unwrap();
}

#[test]
fn gddr_with_ecc_memory_is_corrected() {
    // The same cards on a 384-bit GDDR bus with ECC on: NVML's total hides 1/16 of the memory.
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::hgx_h100_node(dir.path());
    edit_fixture(&node, |v| {
        for d in v["devices"].as_array_mut().unwrap() {
            d["memoryBusWidth"] = 384.into();
        }
    });
    assert_eq!(detect(&node, &[])[0].memory, 81559 * 16 / 15);
    // The monitor reports what NVML makes usable.
    assert_eq!(monitor(&node)[0].accelerators[0].memory, Some(81559));

    edit_fixture(&node, |v| {
        for d in v["devices"].as_array_mut().unwrap() {
            d["eccEnabled"] = false.into();
        }
    });
    assert_eq!(
        detect(&node, &[])[0].memory,
        81559,
        "ECC off: nothing hidden"
    );
}

#[test]
fn fields_nvml_refuses_are_absent() {
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::hgx_h100_node(dir.path());
    edit_fixture(&node, |v| {
        let card = v["devices"][3].as_object_mut().unwrap();
        for field in [
            "minor",
            "temperature",
            "powerUsageMw",
            "utilization",
            "eccUncorrectedVolatile",
        ] {
            card.remove(field);
        }
    });
    let groups = detect(&node, &[]);
    let card = &groups[0].accelerators[3];
    assert!(
        card.physical_indexes.is_empty(),
        "no minor: no physicalIndexes"
    );
    assert!(
        !card.status.unhealthy,
        "no ECC counter: nothing held against the card"
    );
    assert_eq!(groups[0].accelerators[2].physical_indexes, [0]);

    let sample = &monitor(&node)[0].accelerators[3];
    assert_eq!(
        (
            sample.temperature,
            sample.power_usage,
            sample.cores_utilization
        ),
        (None, None, None)
    );
    assert_eq!(sample.memory_usage, Some(3 * 1024 + 1));
}

#[test]
fn pending_mig_change_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::hgx_h100_node(dir.path());
    edit_fixture(&node, |v| v["devices"][1]["migMode"]["pending"] = 1.into());
    let out = on_node(
        &node,
        &["device-manager", "detect", "--manufacturer=nvidia"],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    assert!(
        groups[0].accelerators[1].status.logical_sliced.is_some(),
        "still off until reset"
    );
    assert!(
        stderr(&out).contains("NVIDIA GPU 1: MIG mode change pending"),
        "{}",
        stderr(&out)
    );
}

/// Turns MIG on for every card of the node.
fn mig_on(v: &mut serde_json::Value) {
    for d in v["devices"].as_array_mut().unwrap() {
        d["migMode"] = serde_json::json!({"current": 1, "pending": 1});
    }
}

/// (name, MiB, compute slices, memory slices, count) of a card's offered profiles.
fn profile_rows(acc: &gpustack_api::devices::Accelerator) -> Vec<(String, u64, u32, u32, i32)> {
    acc.status
        .physical_sliced
        .as_ref()
        .expect("MIG on: profiles")
        .profiles
        .iter()
        .map(|p| {
            (
                p.name.clone(),
                p.memory_mib,
                p.compute_slices,
                p.memory_slices,
                p.count,
            )
        })
        .collect()
}

fn rows(want: &[(&str, u64, u32, u32, i32)]) -> Vec<(String, u64, u32, u32, i32)> {
    want.iter()
        .map(|&(n, m, c, s, k)| (n.to_owned(), m, c, s, k))
        .collect()
}

#[test]
fn h100_with_mig_offers_the_drivers_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::hgx_h100_node(dir.path());
    // A newer driver that gives the smallest profile more memory than the built-in table
    // knows: the driver's figure is the one offered.
    edit_fixture(&node, |v| {
        mig_on(v);
        for d in v["devices"].as_array_mut().unwrap() {
            for p in d["migProfiles"].as_array_mut().unwrap() {
                if p["name"] == "MIG 1g.10gb" {
                    p["memorySizeMb"] = 10240.into();
                }
            }
        }
    });
    let g = &detect(&node, &[])[0];
    assert_eq!(
        profile_rows(&g.accelerators[0]),
        rows(&[
            ("1g.10gb", 10240, 1, 1, 7),
            ("1g.20gb", 20096, 1, 2, 4),
            ("2g.20gb", 20096, 2, 2, 3),
            ("3g.40gb", 40448, 3, 4, 2),
            ("4g.40gb", 40448, 4, 4, 1),
            ("7g.80gb", 81152, 7, 8, 1)
        ])
    );
    let summed = g
        .accelerator_sliced_detail
        .as_ref()
        .unwrap()
        .physical
        .as_ref()
        .unwrap();
    assert_eq!(summed.count, 8 * 7);
    assert_eq!(summed.profiles[0].count, 8 * 7);
}

#[test]
fn mig_card_without_a_table_offers_the_drivers_profiles() {
    // A product the built-in table does not know: only the driver can describe it. The
    // profile shapes are a B200's; the memory figures are the fixture's own.
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::hgx_h100_node(dir.path());
    let b200 = serde_json::json!([
        {"index": 0, "id": 19, "name": "MIG 1g.23gb", "sliceCount": 1, "instanceCount": 7, "memorySizeMb": 23040,
         "placements": (0..7).map(|s| serde_json::json!({"start": s, "size": 1})).collect::<Vec<_>>()},
        {"index": 1, "id": 14, "name": "MIG 2g.45gb", "sliceCount": 2, "instanceCount": 3, "memorySizeMb": 46080,
         "placements": [{"start": 0, "size": 2}, {"start": 2, "size": 2}, {"start": 4, "size": 2}]},
        {"index": 4, "id": 0, "name": "MIG 7g.180gb", "sliceCount": 7, "instanceCount": 1, "memorySizeMb": 181248,
         "placements": [{"start": 0, "size": 8}]},
        {"index": 7, "id": 20, "name": "MIG 1g.23gb+me", "sliceCount": 1, "instanceCount": 1, "memorySizeMb": 23040,
         "placements": [{"start": 0, "size": 1}]},
    ]);
    edit_fixture(&node, |v| {
        mig_on(v);
        for d in v["devices"].as_array_mut().unwrap() {
            d["name"] = "NVIDIA B200".into();
            d["memoryTotalMib"] = 183359.into();
            d["migProfiles"] = b200.clone();
        }
    });
    let out = on_node(
        &node,
        &["device-manager", "detect", "--manufacturer=nvidia"],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    let acc = &groups[0].accelerators[3];
    assert_eq!(
        profile_rows(acc),
        rows(&[
            ("1g.23gb", 23040, 1, 1, 7),
            ("2g.45gb", 46080, 2, 2, 3),
            ("7g.180gb", 181248, 7, 8, 1)
        ])
    );
    let physical = acc.status.physical_sliced.as_ref().unwrap();
    assert_eq!(physical.count, 7);
    assert_eq!(
        physical.profiles[1].placements,
        [0, 2, 4].map(|start| Placement { start, length: 2 })
    );
    assert!(
        !stderr(&out).contains("offers no slices"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn without_gpu_instance_profiles_the_table_is_the_fallback() {
    // A driver that describes no GPU-instance profile: the A100 80GB's built-in table is used,
    // checked here against the `nvidia-smi mig -lgip` listing (GiB × 1024).
    let dir = tempfile::tempdir().unwrap();
    let node = nvidia::a100_mig_node(dir.path());
    edit_fixture(&node, |v| {
        v["devices"][0]
            .as_object_mut()
            .unwrap()
            .remove("migProfiles");
    });
    let groups = detect(&node, &[]);
    let gib = |g: f64| (g * 1024.0) as u64;
    assert_eq!(
        profile_rows(&groups[0].accelerators[0]),
        rows(&[
            ("1g.10gb", gib(9.5), 1, 1, 7),
            ("1g.20gb", gib(19.5), 1, 2, 4),
            ("2g.20gb", gib(19.5), 2, 2, 3),
            ("3g.40gb", gib(39.25), 3, 4, 2),
            ("4g.40gb", gib(39.25), 4, 4, 1),
            ("7g.80gb", gib(79.25), 7, 8, 1)
        ])
    );

    // Without driver profiles or a table, the card offers nothing and says so.
    edit_fixture(&node, |v| v["devices"][0]["name"] = "NVIDIA B200".into());
    let out = on_node(
        &node,
        &["device-manager", "detect", "--manufacturer=nvidia"],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    assert_eq!(groups[0].accelerators[0].status.physical_sliced, None);
    assert!(
        stderr(&out).contains(
            "NVIDIA GPU 0 (NVIDIA B200) is in MIG mode but NVML describes no MIG profile"
        ),
        "{}",
        stderr(&out)
    );
}
