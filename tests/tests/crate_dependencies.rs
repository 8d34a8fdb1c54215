//! What each light crate must not pull in, checked on the resolved dependency tree as cargo
//! builds it:
//! - the REST toolkit stays free of storage and of any Kubernetes client, so that a server
//!   without SQLite (the worker's aggregated API) can use it;
//! - the serving crate (certificates, listeners) holds nothing of the API servers;
//! - the node agents serve with the serving crate alone: nothing of the API servers (toolkit,
//!   store, embedded API server, hub) is in their graph;
//! - the delegated-auth crate (the reviews and the `/metrics` guard the agents share with the
//!   worker) holds a kube client and nothing of the API servers;
//! - the embedded API server holds nothing of the hub built on it;
//! - the binary is built without k8s-openapi's schemas (a third of that crate's build): it
//!   reads the committed CRDs and built-in kinds' document, which the tests generate.

use std::process::Command;

/// `cargo tree` of `package`'s normal dependencies, one line per crate as `format` writes it.
fn cargo_tree(package: &str, format: &str) -> String {
    let out = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "--offline", "-p", package, "-e", "normal"])
        .args(["--prefix", "none", "--format", format])
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The names of the crates in `package`'s normal dependency tree.
fn tree(package: &str) -> Vec<String> {
    let tree = cargo_tree(package, "{p}");
    let crates: Vec<String> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(crates.iter().any(|c| c == package), "{tree}");
    crates
}

/// Fails naming the first of `banned` in `package`'s tree; `present` proves the tree was read.
fn assert_free_of(package: &str, present: &str, banned: &[&str]) {
    let crates = tree(package);
    assert!(
        crates.iter().any(|c| c == present),
        "{present} is missing: the tree of {package} was not read"
    );
    for b in banned {
        assert!(
            !crates.iter().any(|c| c == b),
            "{b} is in the dependency tree of {package}"
        );
    }
}

const STORE_AND_CLIENT: &[&str] = &[
    "sqlx",
    "sqlx-core",
    "libsqlite3-sys",
    "kube",
    "kube-client",
    "kube-core",
];

const API_SERVERS: &[&str] = &[
    "gpustack-kube-rest",
    "gpustack-apiserver",
    "gpustack-gateway",
    "gpustack-worker",
];

#[test]
fn no_store_and_no_kubernetes_client_in_the_toolkit() {
    let mut banned = STORE_AND_CLIENT.to_vec();
    banned.extend(["gpustack-apiserver", "gpustack-gateway", "gpustack-serving"]);
    assert_free_of("gpustack-kube-rest", "serde_json", &banned);
}

#[test]
fn the_serving_crate_holds_nothing_of_the_api_servers() {
    let mut banned = STORE_AND_CLIENT.to_vec();
    banned.extend(API_SERVERS);
    assert_free_of("gpustack-serving", "rustls", &banned);
}

#[test]
fn the_delegated_auth_crate_holds_nothing_of_the_api_servers() {
    let mut banned = vec!["sqlx", "sqlx-core", "libsqlite3-sys", "gpustack-serving"];
    banned.extend(API_SERVERS);
    assert_free_of("gpustack-delegated-auth", "kube-client", &banned);
}

#[test]
fn the_node_agents_hold_nothing_of_the_api_servers() {
    for agent in ["gpustack-device-manager", "gpustack-model-manager"] {
        assert_free_of(agent, "gpustack-serving", API_SERVERS);
    }
}

#[test]
fn the_api_server_holds_nothing_of_the_hub() {
    assert_free_of(
        "gpustack-apiserver",
        "sqlx",
        &["gpustack-gateway", "gpustack-worker"],
    );
}

#[test]
fn the_binary_is_built_without_kubernetes_schemas() {
    let tree = cargo_tree("gpustack-operator", "{p} [{f}]");
    let openapi: Vec<&str> = tree
        .lines()
        .filter(|l| l.starts_with("k8s-openapi "))
        .collect();
    assert!(!openapi.is_empty(), "k8s-openapi is missing: {tree}");
    for line in openapi {
        assert!(
            line.contains("v1_33") && !line.contains("schemars"),
            "the binary's k8s-openapi: {line}"
        );
    }
}
