//! The seed's AMD node (two RX 7800 XT cards) as a host root `device-manager preflight` can
//! drive the real Docker engine from: its staged vrocm tree, scripts and device nodes. Shared
//! by the preflight tests and the preflight benchmark.

use std::{
    path::{Path, PathBuf},
    process::Output,
};

use crate::{
    docker::{self, device_node, drivable_host, require_engine},
    machines::amd,
    operator, stand_in,
    sysfs::HostTree,
};

/// A file of `tests/fixtures/preflight`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/preflight")
        .join(name)
}

pub fn shim_library() -> PathBuf {
    stand_in::built(
        "gpustack_fake_slicing_shim",
        "GPUSTACK_FAKE_SLICING_SHIM_LIBRARY",
    )
}

/// How the node's staged vrocm tree looks.
#[derive(Clone, Copy)]
pub enum Shim {
    /// The stand-in shim, loadable.
    Loads,
    /// A file the loader refuses, and a reader that prints a greeting naming the shim's path.
    Refused,
}

/// The seed's node as a host root the binary can drive Docker from.
pub struct Node {
    _dir: tempfile::TempDir,
    pub tree: HostTree,
}

impl Node {
    pub fn new(shim: Shim) -> Self {
        require_engine();
        let dir = tempfile::tempdir().unwrap();
        let tree = HostTree::new(dir.path());
        amd::seed_node(&tree);
        drivable_host(&tree);
        let lib = "/etc/gpustack/lib/amd";
        tree.file(
            &format!("{lib}/ld.so.preload"),
            std::fs::read(fixture("ld.so.preload")).unwrap(),
        );
        match shim {
            Shim::Loads => {
                stand_in::install(&tree, &shim_library(), &format!("{lib}/libvrocm.so"));
                install_script(&tree, "rocm-monitor-silent", &format!("{lib}/rocm-monitor"));
            }
            Shim::Refused => {
                tree.file(&format!("{lib}/libvrocm.so"), "not a shared object\n");
                install_script(
                    &tree,
                    "rocm-monitor-greeting",
                    &format!("{lib}/rocm-monitor"),
                );
            }
        }
        install_script(
            &tree,
            "rocm-monitor-silent",
            &format!("{lib}/rocm-cumask-check"),
        );
        install_script(&tree, "rocm-smi", "/usr/bin/rocm-smi");
        for node in [
            "/dev/kfd",
            "/dev/dri/card1",
            "/dev/dri/renderD128",
            "/dev/dri/card2",
            "/dev/dri/renderD129",
        ] {
            device_node(&tree, node);
        }
        Self { _dir: dir, tree }
    }

    /// The binary on this node (host root = system root = the tree; the engine sees it there).
    pub fn preflight(&self, extra: &[&str]) -> Output {
        let image = docker::probe_image(&[shim_library()]);
        let root = self.tree.root().display().to_string();
        let mut args = vec![
            "device-manager".to_owned(),
            "preflight".to_owned(),
            "--manufacturer=amd".to_owned(),
            format!("--host-root={root}"),
            format!("--probe-image={image}"),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        operator()
            .args(&args)
            .env("GPUSTACK_SYSTEM_ROOT", &root)
            .env("GPUSTACK_PREFLIGHT_ENGINE_ROOT", &root)
            .output()
            .unwrap()
    }
}

pub fn install_script(tree: &HostTree, name: &str, host: &str) {
    let target = tree.path(host);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(fixture(name), &target).unwrap();
}
