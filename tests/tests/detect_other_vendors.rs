//! What every library-backed manufacturer shares: a node with the hardware but without a usable
//! management library reports no accelerators and says which library it looked for and where,
//! and the PCI gate honours vendor-id and class overrides.

use gpustack_tests::{
    operator, stderr, stdout,
    sysfs::{HostTree, PciFunction},
};

fn node_with(vendor: &str, class: &str) -> (tempfile::TempDir, HostTree) {
    let dir = tempfile::tempdir().unwrap();
    let tree = HostTree::new(dir.path());
    tree.kernel_release("5.10.0-182.0.0.95.oe2203sp3.aarch64")
        .numa_node(0, "0-47");
    tree.pci_function(&PciFunction {
        path: &["pci0000:00", "0000:00:00.0", "0000:01:00.0"],
        vendor,
        device: "d802",
        class,
        revision: "20",
        numa_node: 0,
    });
    (dir, tree)
}

fn detect(tree: &HostTree, manufacturer: &str) -> std::process::Output {
    operator()
        .args([
            "dm",
            "detect",
            &format!("--manufacturer={manufacturer}"),
            "--no-fast-failed",
        ])
        .env("GPUSTACK_SYSTEM_ROOT", tree.root())
        .output()
        .unwrap()
}

#[test]
fn missing_library_is_named() {
    let (_dir, tree) = node_with("19e5", "120000");
    let out = detect(&tree, "ascend");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "[]\n");
    let err = stderr(&out);
    assert!(
        err.contains("found 1 ascend PCI function(s) (0000:01:00.0)"),
        "{err}"
    );
    assert!(
        err.contains("libdcmi.so") && err.contains("/usr/local/Ascend/lib64"),
        "{err}"
    );
}

#[test]
fn unloadable_library_is_named() {
    // A file where the vendor's library belongs that is no library (here an empty
    // libcndev.so): nothing is detected, and the warning names the file and why. Manufacturers
    // leave the PCI-only path one by one, so this does not rely on one staying there.
    let (_dir, tree) = node_with("cabc", "120000");
    tree.file("/usr/local/neuware/lib64/libcndev.so", b"");
    let out = detect(&tree, "cambricon");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "[]\n");
    let err = stderr(&out);
    assert!(
        err.contains("found 1 cambricon PCI function(s) (0000:01:00.0)"),
        "{err}"
    );
    assert!(
        err.contains("/usr/local/neuware/lib64/libcndev.so could not be loaded"),
        "{err}"
    );
}

#[test]
fn vendor_id_override_and_class_filter() {
    // A MetaX card that reports another vendor id, named through the override.
    let (_dir, tree) = node_with("abcd", "030200");
    let run = |env: &[(&str, &str)]| {
        let mut cmd = operator();
        cmd.args(["dm", "detect", "--manufacturer=metax", "--no-fast-failed"])
            .env("GPUSTACK_SYSTEM_ROOT", tree.root());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        // A run that finds nothing is still a measurement under --no-fast-failed.
        assert_eq!(out.status.code(), Some(0), "{env:?}: {}", stderr(&out));
        stderr(&out)
    };
    assert!(!run(&[]).contains("PCI function"));
    assert!(
        run(&[("GPUSTACK_METAX_PCI_VENDOR_ID", "abcd")]).contains("found 1 metax PCI function")
    );
    // The class filter drops display controllers when told to look at accelerators only.
    let only_accelerators = run(&[
        ("GPUSTACK_METAX_PCI_VENDOR_ID", "abcd"),
        ("GPUSTACK_PCI_CLASS_PREFIXES", "12"),
    ]);
    assert!(
        !only_accelerators.contains("PCI function"),
        "{only_accelerators}"
    );
}
