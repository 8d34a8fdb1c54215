//! A tmpfs of a fixed size for a test's store, so that the store's watermarks measure a
//! filesystem the test owns rather than the host's disk (whose fill level varies).
//! Mounting needs CAP_SYS_ADMIN; callers decide what to do without it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A mounted tmpfs, unmounted on drop.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// Mounts a tmpfs of `size` (as the mount option spells it: `4m`, `64m`) on `dir`.
pub fn mount(dir: &Path, size: &str) -> Result<Tmpfs, nix::Error> {
    std::fs::create_dir_all(dir).expect("the mount point");
    nix::mount::mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        Some(format!("size={size}").as_str()),
    )
    .map(|()| Tmpfs(dir.to_path_buf()))
}
