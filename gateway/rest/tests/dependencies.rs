//! The toolkit must stay free of storage and of any Kubernetes client, so that a server
//! without SQLite (the worker's aggregated API) can use it. Checked on the resolved dependency
//! tree, as cargo builds it.

use std::process::Command;

#[test]
fn no_store_and_no_kubernetes_client_in_the_dependency_tree() {
    let out = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tree",
            "--offline",
            "-p",
            "gpustack-kube-rest",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(crates.contains(&"gpustack-kube-rest"), "{tree}");
    assert!(crates.contains(&"serde_json"), "the tree was read: {tree}");
    for banned in [
        "sqlx",
        "sqlx-core",
        "libsqlite3-sys",
        "kube",
        "kube-client",
        "kube-core",
        "gpustack-gateway",
    ] {
        assert!(
            !crates.contains(&banned),
            "{banned} is in the toolkit's dependency tree"
        );
    }
}
