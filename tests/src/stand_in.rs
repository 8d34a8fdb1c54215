//! The vendor-library stand-ins (the `tests/fake-*` cdylib crates) as the tests use them: built by
//! `cargo build --workspace` into this target directory, then copied into a fixture host tree at
//! the path the real vendor library would have.

use std::path::{Path, PathBuf};

use crate::sysfs::HostTree;

/// The built `lib<crate_name>.so`, or the file named by the environment variable `override_env`.
pub fn built(crate_name: &str, override_env: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(override_env) {
        return PathBuf::from(path);
    }
    let file = format!("lib{crate_name}.so");
    let profile_dir = crate::profile_dir();
    let candidates = [
        profile_dir.join(&file),
        profile_dir.join("deps").join(&file),
    ];
    candidates
        .iter()
        .find(|p| p.exists())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "{} is missing: run `cargo build --workspace` before the tests (the README's test command does)",
                candidates[0].display()
            )
        })
}

/// Copies `library` into the tree at `host_path`.
pub fn install(tree: &HostTree, library: &Path, host_path: &str) {
    let target = tree.path(host_path);
    std::fs::create_dir_all(target.parent().expect("a library path has a directory")).unwrap();
    std::fs::copy(library, &target)
        .unwrap_or_else(|e| panic!("copying {} to {}: {e}", library.display(), target.display()));
}
