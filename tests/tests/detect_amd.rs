//! `device-manager detect` and `monitor` on the command reference's node (two RX 7800 XT cards),
//! read from a host tree through `GPUSTACK_SYSTEM_ROOT`, through the real binary.

use gpustack_api::{devices::DevicesGroup, monitor::MetricsGroup};
use gpustack_tests::{machines::amd, operator, stderr, stdout, sysfs::HostTree};

fn seed_tree() -> (tempfile::TempDir, HostTree) {
    let dir = tempfile::tempdir().unwrap();
    let tree = HostTree::new(dir.path());
    amd::seed_node(&tree);
    (dir, tree)
}

fn run_on(tree: &HostTree, args: &[&str]) -> std::process::Output {
    operator()
        .args(args)
        .env("GPUSTACK_SYSTEM_ROOT", tree.root())
        .output()
        .unwrap()
}

/// The command reference's example block for `detect` (a fixture of the api crate).
fn seed_example() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../api/tests/fixtures/seed/detect-rx-7800-xt.yaml"
    );
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn detect_prints_the_seed_accelerator() {
    let (_dir, tree) = seed_tree();
    let out = run_on(&tree, &["device-manager", "detect", "--manufacturer=amd"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let printed = stdout(&out);

    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&printed).unwrap();
    assert_eq!(groups.len(), 1, "both cards are one product");
    let g = &groups[0];
    assert_eq!(g.accelerators.len(), 2);
    let second = &g.accelerators[1];
    assert_eq!(
        (second.id.as_str(), second.index),
        ("GPU-3f0be7a6a1f2c4d9", 1)
    );
    assert_eq!(second.physical_indexes, [2, 129]);
    assert_eq!(second.topology.pci_bus_id, "0000:0c:00.0");
    assert_eq!(second.topology.pci_root_id, "0000:00:03.1");
    assert_eq!(
        second.topology.pci_switches,
        ["0000:0b:00.0", "0000:0a:00.0", "0000:00:03.1"]
    );
    let detail = g
        .accelerator_sliced_detail
        .as_ref()
        .unwrap()
        .logical
        .as_ref()
        .unwrap();
    assert_eq!(detail.count, 256);

    // The seed was printed by a version whose topology had three fields and whose groups had no
    // sliced detail. Without those additions, and with only the first card, the output must be
    // the seed's text exactly (its four-space indent under `logicalSliced` is typesetting).
    let mut value: serde_json::Value = serde_yaml_ng::from_str(&printed).unwrap();
    let group = &mut value[0];
    group
        .as_object_mut()
        .unwrap()
        .remove("acceleratorSlicedDetail");
    group["accelerators"].as_array_mut().unwrap().truncate(1);
    let topology = group["accelerators"][0]["topology"]
        .as_object_mut()
        .unwrap();
    for added in ["pciRootId", "pciClass", "pciSwitches"] {
        assert!(topology.remove(added).is_some(), "{added} is reported");
    }
    let expected = seed_example().replace("\n            ", "\n          ");
    assert_eq!(gpustack_api::yaml::render(&value), expected);
}

#[test]
fn all_manufacturers_is_the_default() {
    let (_dir, tree) = seed_tree();
    let out = run_on(&tree, &["dm", "detect"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        groups.iter().map(|g| g.id.as_str()).collect::<Vec<_>>(),
        ["radeon-rx-7800-xt"]
    );
}

#[test]
fn group_id_with_memory() {
    let (_dir, tree) = seed_tree();
    let out = operator()
        .args(["dm", "detect", "--manufacturer=amd"])
        .env("GPUSTACK_SYSTEM_ROOT", tree.root())
        .env("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY", "true")
        .output()
        .unwrap();
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&stdout(&out)).unwrap();
    assert_eq!(groups[0].id, "radeon-rx-7800-xt-16g");
}

#[test]
fn monitor_prints_one_sample_per_card() {
    let (_dir, tree) = seed_tree();
    let out = run_on(&tree, &["device-manager", "monitor", "--manufacturer=amd"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let printed = stdout(&out);
    let groups: Vec<MetricsGroup> = serde_yaml_ng::from_str(&printed).unwrap();
    assert_eq!(groups.len(), 1);
    let first = serde_json::to_value(&groups[0].accelerators[0]).unwrap();
    assert_eq!(
        first,
        serde_json::json!({
            "id": "GPU-5c88007d760374f3", "memory": 16368, "memoryUsage": 174,
            "memoryUtilization": 1, "coresUtilization": 0, "temperature": 44,
            "powerUsage": 8, "unhealthy": false
        })
    );
    assert_eq!(groups[0].accelerators[1].cores_utilization, Some(3));
    // The seed's shape: field order, and a timestamp with nanoseconds and the local offset.
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines[0], "- manufacturer: amd");
    assert!(lines[1].starts_with("  timestamp: 20"), "{}", lines[1]);
    let stamp = lines[1].trim_start_matches("  timestamp: ");
    assert!(
        stamp.parse::<gpustack_api::time::Timestamp>().is_ok(),
        "{stamp}"
    );
    assert_eq!(
        lines[2..11],
        [
            "  accelerators:",
            "    - id: GPU-5c88007d760374f3",
            "      memory: 16368",
            "      memoryUsage: 174",
            "      memoryUtilization: 1",
            "      coresUtilization: 0",
            "      temperature: 44",
            "      powerUsage: 8",
            "      unhealthy: false",
        ]
    );
}

/// Removes the `/sys/bus/pci/devices` links, as a WSL kernel shows no PCI functions there.
fn hide_pci_bus(tree: &HostTree) {
    std::fs::remove_dir_all(tree.path("/sys/bus/pci/devices")).unwrap();
}

#[test]
fn pci_check_gates_detection_unless_disabled() {
    let (_dir, tree) = seed_tree();
    hide_pci_bus(&tree);
    // With the PCI check on, no function matches: nothing is read.
    let out = run_on(
        &tree,
        &["dm", "detect", "--manufacturer=amd", "--no-fast-failed"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "[]\n");
    // Without it, the cards are found through DRM.
    let out = run_on(
        &tree,
        &["dm", "detect", "--manufacturer=amd", "--no-pci-check"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&stdout(&out)).unwrap();
    assert_eq!(groups[0].accelerators.len(), 2);
}

#[test]
fn wsl_kernel_disables_the_pci_check() {
    let (_dir, tree) = seed_tree();
    hide_pci_bus(&tree);
    tree.kernel_release("5.15.167.4-microsoft-standard-WSL2");
    let out = run_on(&tree, &["dm", "detect", "--manufacturer=amd"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("WSL kernel"), "{}", stderr(&out));
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&stdout(&out)).unwrap();
    assert_eq!(groups[0].accelerators.len(), 2);
}

#[test]
fn single_manufacturer_empty_fails_fast_unless_told_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let tree = HostTree::new(dir.path());
    tree.kernel_release("6.8.0-45-generic");
    let out = run_on(&tree, &["dm", "detect", "--manufacturer=amd"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "[]\n");
    let err = stderr(&out);
    assert!(
        err.contains("attempt 1 of 3") && err.contains("attempt 2 of 3"),
        "{err}"
    );
    assert!(
        err.contains("no amd accelerator found after 3 attempts; pass --no-fast-failed"),
        "{err}"
    );

    let out = run_on(
        &tree,
        &["dm", "detect", "--manufacturer=amd", "--no-fast-failed"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "[]\n");
    assert!(!stderr(&out).contains("attempt"));

    // Several manufacturers: an empty node is an answer, at once.
    let out = run_on(&tree, &["dm", "monitor"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "[]\n");
}

#[test]
fn cards_are_found_without_rocm_mounted() {
    let (_dir, tree) = seed_tree();
    // No ROCm: the product name comes from the host's libdrm table, and no runtime version.
    std::fs::rename(
        tree.path("/opt/rocm/share/libdrm/amdgpu.ids"),
        tree.path("/opt/amdgpu.ids"),
    )
    .unwrap();
    std::fs::remove_dir_all(tree.path("/opt/rocm")).unwrap();
    tree.file(
        "/usr/share/libdrm/amdgpu.ids",
        std::fs::read(tree.path("/opt/amdgpu.ids")).unwrap(),
    );
    let out = run_on(&tree, &["dm", "detect", "--manufacturer=amd"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&stdout(&out)).unwrap();
    assert_eq!(groups[0].name, "AMD Radeon RX 7800 XT");
    assert_eq!(groups[0].runtime_version, "");
    assert_eq!(groups[0].accelerators.len(), 2);

    // Without any name table either, the card is still reported, named by its device id.
    std::fs::remove_file(tree.path("/usr/share/libdrm/amdgpu.ids")).unwrap();
    let out = run_on(&tree, &["dm", "detect", "--manufacturer=amd"]);
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&stdout(&out)).unwrap();
    assert_eq!(groups[0].name, "AMD GPU 747e");
    assert_eq!(groups[0].id, "gpu-747e");
}

#[test]
fn uncorrectable_memory_errors_mark_a_card_unhealthy() {
    let (_dir, tree) = seed_tree();
    tree.file(
        "/sys/bus/pci/devices/0000:0c:00.0/ras/umc_err_count",
        "ue: 2\nce: 17\n",
    );
    let out = run_on(&tree, &["dm", "detect", "--manufacturer=amd"]);
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&stdout(&out)).unwrap();
    let health: Vec<bool> = groups[0]
        .accelerators
        .iter()
        .map(|a| a.status.unhealthy)
        .collect();
    assert_eq!(health, [false, true]);
}

#[test]
fn a_read_that_never_returns_is_bounded() {
    let (_dir, tree) = seed_tree();
    // A FIFO with no writer blocks its reader forever, as a wedged device's attribute can.
    let attr = tree.path("/sys/bus/pci/devices/0000:04:00.0/mem_info_vram_total");
    std::fs::remove_file(&attr).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(&attr)
        .status()
        .unwrap();
    assert!(status.success());
    let mut cmd = operator();
    cmd.args(["dm", "detect", "--manufacturer=amd"])
        .env("GPUSTACK_SYSTEM_ROOT", tree.root())
        .env("GPUSTACK_DETECT_TIMEOUT", "1s");
    // Killed at the deadline, so that a broken read timeout fails the test instead of hanging it.
    let out = output_within(cmd, std::time::Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("detect did not finish within 1s"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "");

    let out = operator()
        .args(["dm", "detect"])
        .env("GPUSTACK_SYSTEM_ROOT", tree.root())
        .env("GPUSTACK_DETECT_TIMEOUT", "soon")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("'GPUSTACK_DETECT_TIMEOUT'"),
        "{}",
        stderr(&out)
    );
}

/// Runs `cmd` to completion, or kills it once `deadline` has passed and fails.
fn output_within(
    mut cmd: std::process::Command,
    deadline: std::time::Duration,
) -> std::process::Output {
    use std::process::Stdio;
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running gpustack-operator");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(deadline) {
        Ok(out) => out.expect("waiting for gpustack-operator"),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("the run did not end within {deadline:?}; killed it");
        }
    }
}
