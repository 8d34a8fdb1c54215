//! The plugin's mount syscalls: a read-only, nosuid, nodev bind mount of a published tree onto
//! a Pod's target, and its removal. Needs CAP_SYS_ADMIN (the DaemonSet runs privileged).

use std::{io, path::Path};

use nix::{
    errno::Errno,
    mount::{MntFlags, MsFlags},
};

use crate::mountinfo::{self, MountEntry};

/// Binds `source` onto `target` (created 0750), then remounts it read-only, nosuid, nodev.
/// A failed remount is unbound again, so a writable mount never stays.
pub fn bind_read_only(source: &Path, target: &Path) -> Result<(), Errno> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(target)
    {
        Ok(()) => {}
        Err(e) => return Err(Errno::from_raw(e.raw_os_error().unwrap_or(libc_eio()))),
    }
    nix::mount::mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )?;
    let seal = MsFlags::MS_BIND
        | MsFlags::MS_REMOUNT
        | MsFlags::MS_RDONLY
        | MsFlags::MS_NOSUID
        | MsFlags::MS_NODEV;
    if let Err(e) = nix::mount::mount(None::<&str>, target, None::<&str>, seal, None::<&str>) {
        let _ = unmount(target);
        return Err(e);
    }
    Ok(())
}

fn libc_eio() -> i32 {
    nix::libc::EIO
}

/// Unmounts `target`; "not mounted" and "does not exist" count as done.
pub fn unmount(target: &Path) -> Result<(), Errno> {
    match nix::mount::umount2(target, MntFlags::empty()) {
        Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The current mount table of this process.
pub fn mount_table() -> io::Result<Vec<MountEntry>> {
    Ok(mountinfo::parse(&std::fs::read_to_string(
        "/proc/self/mountinfo",
    )?))
}
