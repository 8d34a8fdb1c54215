//! `device-manager detect` and `monitor` for Moore Threads through the real binary, with MTML
//! loaded by path from the fixture root: the stand-in `libmtml.so` (crate `gpustack-fake-mtml`)
//! serves the node's GPUs through the MTML C ABI.

use std::{path::Path, process::Output};

use gpustack_api::{Manufacturer, devices::DevicesGroup, monitor::MetricsGroup};
use gpustack_tests::{
    machines::mthreads::{self, MthreadsNode},
    run_on_host, stderr,
};

fn run(root: &Path, fixture: Option<&Path>, args: &[&str]) -> Output {
    run_on_host(root, (mthreads::FIXTURE_ENV, fixture), &[], args)
}

/// Standard output of a successful run that released every MTML handle it took.
/// Also checks the stand-in's report that every MTML handle was freed.
fn succeeded(out: &Output) -> String {
    let err = stderr(out);
    assert!(!err.contains("not freed"), "{err}");
    gpustack_tests::succeeded(out)
}

fn detect(node: &MthreadsNode, extra: &[&str]) -> Vec<DevicesGroup> {
    let mut args = vec!["device-manager", "detect", "--manufacturer=mthreads"];
    args.extend_from_slice(extra);
    let out = run(&node.root, Some(&node.mtml_fixture), &args);
    serde_yaml_ng::from_str(&succeeded(&out)).unwrap()
}

fn assert_s4000_node(groups: &[DevicesGroup]) {
    assert_eq!(groups.len(), 1, "eight GPUs of one product: {groups:?}");
    let g = &groups[0];
    assert_eq!(g.id, "mtt-s4000");
    assert_eq!(g.manufacturer, Manufacturer::Mthreads);
    assert_eq!(g.name, mthreads::NAME);
    assert_eq!(g.memory, mthreads::MEMORY_MIB);
    assert_eq!(g.cores, Some(mthreads::MUSA_CORES));
    assert_eq!(g.driver_version, mthreads::DRIVER_VERSION);
    assert_eq!(g.runtime_version, "", "MTML reports no MUSA version");
    assert_eq!(g.compute_capability, "");
    assert_eq!(g.family, "");

    let gpus = mthreads::gpus();
    assert_eq!(g.accelerators.len(), 8);
    for (i, (acc, gpu)) in g.accelerators.iter().zip(&gpus).enumerate() {
        assert_eq!(acc.id, gpu.uuid, "GPU {i}");
        assert_eq!(acc.index, i as u32, "GPU {i}");
        assert_eq!(acc.physical_indexes, [i as u32], "GPU {i}: [index]");
        let t = &acc.topology;
        assert_eq!(t.pci_bus_id, gpu.bus_id, "GPU {i}: from MTML's sbdf");
        assert_eq!(t.pci_class, "030000", "GPU {i}");
        assert_eq!(t.pci_switches, gpu.switches, "GPU {i}");
        assert_eq!(t.pci_root_id, gpu.switches[2], "GPU {i}");
        assert_eq!(t.numa_affinity, gpu.numa_node.to_string(), "GPU {i}");
        assert_eq!(
            t.cpu_affinity,
            if gpu.numa_node == 0 { "0-47" } else { "48-95" },
            "GPU {i}"
        );
        assert_eq!(
            acc.status.unhealthy,
            i == mthreads::UNHEALTHY_INDEX,
            "GPU {i}: only GPU 2 has uncorrected ECC errors"
        );
        let logical = acc.status.logical_sliced.as_ref().expect("logical slicing");
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
        (8 * 16, false)
    );
    assert_eq!(detail.physical, None);
}

#[test]
fn s4000_node_reports_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = mthreads::s4000_node(dir.path());
    assert_s4000_node(&detect(&node, &[]));
}

#[test]
fn s4000_node_without_the_pci_check() {
    // Topology then comes from reading the function MTML names straight from sysfs.
    let dir = tempfile::tempdir().unwrap();
    let node = mthreads::s4000_node(dir.path());
    assert_s4000_node(&detect(&node, &["--no-pci-check"]));
}

#[test]
fn library_from_the_musa_toolkit_and_yaml_shape() {
    let dir = tempfile::tempdir().unwrap();
    let node = mthreads::s4000_node_with_library(dir.path(), mthreads::MUSA_MTML_PATH);
    let out = run(
        &node.root,
        Some(&node.mtml_fixture),
        &["device-manager", "detect", "--manufacturer=mthreads"],
    );
    let text = succeeded(&out);
    assert!(text.contains("pciBusId: \"0000:19:00.0\""), "{text}");
    let value: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(value[0]["name"], "MTT S4000");
    assert!(value[0].get("runtimeVersion").is_none(), "{text}");
    assert!(value[0].get("family").is_none(), "{text}");
    assert_eq!(
        value[0]["accelerators"][3]["physicalIndexes"],
        serde_json::json!([3])
    );
    let err = stderr(&out);
    assert!(!err.contains("left out"), "{err}");
}

#[test]
fn group_id_can_carry_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let node = mthreads::s4000_node(dir.path());
    // Through the helper that clears the vendors' own variables, as every other run here.
    let out = run_on_host(
        &node.root,
        (mthreads::FIXTURE_ENV, Some(&node.mtml_fixture)),
        &[("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY", "true")],
        &["device-manager", "detect", "--manufacturer=mthreads"],
    );
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&succeeded(&out)).unwrap();
    assert_eq!(groups[0].id, "mtt-s4000-48g");
}

#[test]
fn s4000_node_monitor() {
    let dir = tempfile::tempdir().unwrap();
    let node = mthreads::s4000_node(dir.path());
    let out = run(
        &node.root,
        Some(&node.mtml_fixture),
        &["device-manager", "monitor", "--manufacturer=mthreads"],
    );
    let text = succeeded(&out);
    let groups: Vec<MetricsGroup> = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].manufacturer, Manufacturer::Mthreads);
    let samples = &groups[0].accelerators;
    assert_eq!(samples.len(), 8);
    for (i, (s, gpu)) in samples.iter().zip(mthreads::gpus()).enumerate() {
        assert_eq!(s.id, gpu.uuid, "GPU {i}");
        assert_eq!(s.memory, Some(mthreads::MEMORY_MIB), "GPU {i}");
        assert_eq!(s.memory_usage, Some(1536 + 2048 * i as u64), "GPU {i}");
        assert_eq!(s.memory_usage, Some(gpu.used_mib()), "GPU {i}");
        assert_eq!(
            s.memory_utilization,
            Some((gpu.used_mib() * 100 / mthreads::MEMORY_MIB) as u32),
            "GPU {i}"
        );
        assert_eq!(s.cores_utilization, Some(9 * i as u32), "GPU {i}");
        let temperature = (i != mthreads::NO_TEMPERATURE_INDEX).then_some(38 + i as i32);
        assert_eq!(s.temperature, temperature, "GPU {i}");
        let power = (i != mthreads::NO_POWER_INDEX).then_some(61 + 10 * i as u32);
        assert_eq!(s.power_usage, power, "GPU {i}: mW to W, refused is absent");
        assert_eq!(s.unhealthy, i == mthreads::UNHEALTHY_INDEX, "GPU {i}");
    }
    // Refused is absent in the YAML too, not printed as 0; a measured 0 stays 0.
    let value: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    let accelerators = &value[0]["accelerators"];
    assert!(
        accelerators[mthreads::NO_POWER_INDEX]
            .get("powerUsage")
            .is_none()
    );
    assert!(
        accelerators[mthreads::NO_TEMPERATURE_INDEX]
            .get("temperature")
            .is_none()
    );
    assert_eq!(accelerators[0]["coresUtilization"], 0);
}

#[test]
fn driver_that_does_not_initialise_reports_nothing_and_says_why() {
    // MTML is present but answers mtmlLibraryInit with an error (here: the stand-in has no
    // fixture, as the real library has no driver behind it).
    let dir = tempfile::tempdir().unwrap();
    let node = mthreads::s4000_node(dir.path());
    for command in ["detect", "monitor"] {
        let out = run(
            &node.root,
            None,
            &[
                "device-manager",
                command,
                "--manufacturer=mthreads",
                "--no-fast-failed",
            ],
        );
        assert_eq!(succeeded(&out), "[]\n", "{command}");
        let err = stderr(&out);
        assert!(err.contains("found 8 mthreads PCI function(s)"), "{err}");
        assert!(err.contains(mthreads::RUNTIME_MTML_PATH), "{err}");
        assert!(err.contains("mtmlLibraryInit returned 1"), "{err}");
    }
}

#[test]
fn missing_library_names_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let node = mthreads::s4000_node(dir.path());
    std::fs::remove_file(
        node.root
            .join(mthreads::RUNTIME_MTML_PATH.trim_start_matches('/')),
    )
    .unwrap();
    let out = run(
        &node.root,
        Some(&node.mtml_fixture),
        &[
            "device-manager",
            "detect",
            "--manufacturer=mthreads",
            "--no-fast-failed",
        ],
    );
    assert_eq!(succeeded(&out), "[]\n");
    let err = stderr(&out);
    assert!(err.contains("found 8 mthreads PCI function(s)"), "{err}");
    assert!(
        err.contains("libmtml.so")
            && err.contains("/usr/local/musa/lib")
            && err.contains("/usr/lib/x86_64-linux-gnu"),
        "{err}"
    );
}
