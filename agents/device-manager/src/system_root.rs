//! Every host path the detectors read (`/sys`, `/dev`, `/proc`, vendor library directories) is
//! resolved under one root, so that tests and operators can point detection at a fixture tree or
//! a mounted host filesystem (`GPUSTACK_SYSTEM_ROOT`, default `/`).

use std::{
    fs, io,
    path::{Path, PathBuf},
};

/// The root that absolute host paths are resolved under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemRoot(PathBuf);

impl Default for SystemRoot {
    fn default() -> Self {
        Self(PathBuf::from("/"))
    }
}

impl SystemRoot {
    /// Host paths resolve under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self(root.into())
    }

    /// From `GPUSTACK_SYSTEM_ROOT` as looked up by `env`, else `/`.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Self {
        env("GPUSTACK_SYSTEM_ROOT")
            .filter(|r| !r.is_empty())
            .map(Self::new)
            .unwrap_or_default()
    }

    /// The root itself.
    pub fn root(&self) -> &Path {
        &self.0
    }

    /// `abs` (a host path such as `/sys/bus/pci/devices`) under this root.
    pub fn path(&self, abs: impl AsRef<Path>) -> PathBuf {
        let abs = abs.as_ref();
        self.0.join(abs.strip_prefix("/").unwrap_or(abs))
    }

    /// The host path of a path under this root (the inverse of [`Self::path`]).
    pub fn host_path(&self, resolved: &Path) -> PathBuf {
        match resolved.strip_prefix(&self.0) {
            Ok(rel) => Path::new("/").join(rel),
            Err(_) => resolved.to_path_buf(),
        }
    }

    /// A sysfs-style attribute: the file's text, trimmed. `None` if it is absent or unreadable.
    pub fn read_attr(&self, abs: impl AsRef<Path>) -> Option<String> {
        fs::read_to_string(self.path(abs))
            .ok()
            .map(|s| s.trim().to_owned())
    }

    /// Entry names of a directory, sorted; empty if it is absent.
    pub fn list_dir(&self, abs: impl AsRef<Path>) -> io::Result<Vec<String>> {
        let mut names = match fs::read_dir(self.path(abs)) {
            Ok(entries) => entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect::<Vec<_>>(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        names.sort();
        Ok(names)
    }

    /// The kernel release (`/proc/sys/kernel/osrelease`), used to recognise WSL.
    pub fn kernel_release(&self) -> Option<String> {
        self.read_attr("/proc/sys/kernel/osrelease")
    }

    /// Whether the kernel is a WSL one, where PCI functions are not visible in sysfs.
    pub fn is_wsl(&self) -> bool {
        self.kernel_release().is_some_and(|r| {
            let r = r.to_ascii_lowercase();
            r.contains("microsoft") || r.contains("wsl")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_under_root() {
        let r = SystemRoot::new("/fixture");
        assert_eq!(
            r.path("/sys/bus/pci"),
            PathBuf::from("/fixture/sys/bus/pci")
        );
        assert_eq!(
            r.host_path(Path::new("/fixture/sys/devices")),
            PathBuf::from("/sys/devices")
        );
        assert_eq!(SystemRoot::default().path("/dev"), PathBuf::from("/dev"));
    }

    #[test]
    fn recognises_wsl() {
        let dir = tempfile::tempdir().unwrap();
        let root = SystemRoot::new(dir.path());
        assert!(!root.is_wsl());
        fs::create_dir_all(root.path("/proc/sys/kernel")).unwrap();
        fs::write(
            root.path("/proc/sys/kernel/osrelease"),
            "5.15.153.1-microsoft-standard-WSL2\n",
        )
        .unwrap();
        assert!(root.is_wsl());
    }
}
