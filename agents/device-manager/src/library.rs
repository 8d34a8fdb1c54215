//! Finding a vendor's management library on the host, under the system root.
//!
//! Libraries are loaded by path so that detection can run against a mounted host tree or a
//! fixture; only when the root is `/` and no known directory has the library does loading fall
//! back to the dynamic loader's own search (the vendor runtime may have injected it elsewhere).

use std::path::PathBuf;

use gpustack_api::manufacturer::ManufacturerSpec;

use crate::system_root::SystemRoot;

/// Directories searched on every host, after the vendor's own.
const SYSTEM_DIRS: [&str; 8] = [
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/local/nvidia/lib64",
    "/usr/local/lib",
];

/// Directories a vendor installs its library in outside any toolkit home.
fn vendor_dirs(manufacturer: &str) -> &'static [&'static str] {
    match manufacturer {
        // The standalone DCMI package (npu-smi's) installs libdcmi.so here.
        "ascend" => &["/usr/local/dcmi"],
        // The MetaX driver package (mx-smi's) installs libmxsml.so here, apart from MACA.
        "metax" => &["/opt/mxdriver/lib"],
        // The MUSA toolkit's own copy of libmtml.so, where the mthreads runtime did not inject
        // one into the system directories.
        "mthreads" => &["/usr/local/musa/lib"],
        _ => &[],
    }
}

/// Where a library was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Located {
    /// A file under the system root.
    Path(PathBuf),
    /// Not in any known directory, but the root is the real `/`: let the dynamic loader search.
    LoaderSearch(String),
}

/// The directories searched for `spec`'s libraries, as host paths, in order.
pub fn search_dirs(spec: &ManufacturerSpec, env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut homes: Vec<String> = spec.home_env.iter().filter_map(|v| env(v)).collect();
    homes.extend(spec.default_home.map(str::to_owned));
    let mut dirs = Vec::new();
    for home in homes.iter().filter(|h| !h.is_empty()) {
        for sub in [
            "lib",
            "lib64",
            "lib/x86_64-linux-gnu",
            "driver/lib64",
            // Ascend: the driver package puts libdcmi.so here.
            "driver/lib64/driver",
            "lib64/common",
        ] {
            dirs.push(format!("{}/{sub}", home.trim_end_matches('/')));
        }
    }
    dirs.extend(vendor_dirs(spec.name).iter().map(|d| d.to_string()));
    if let Some(paths) = env("LD_LIBRARY_PATH") {
        dirs.extend(
            paths
                .split(':')
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
        );
    }
    dirs.extend(SYSTEM_DIRS.iter().map(|d| d.to_string()));
    dirs.dedup();
    dirs
}

/// The first of `spec`'s libraries found in [`search_dirs`].
pub fn locate(
    root: &SystemRoot,
    spec: &ManufacturerSpec,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<Located> {
    let dirs = search_dirs(spec, env);
    for name in spec.libraries {
        for dir in &dirs {
            let candidate = root.path(format!("{dir}/{name}"));
            if candidate.exists() {
                return Some(Located::Path(candidate));
            }
        }
    }
    (root.root() == std::path::Path::new("/"))
        .then(|| {
            spec.libraries
                .first()
                .map(|n| Located::LoaderSearch((*n).to_owned()))
        })
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpustack_api::Manufacturer;

    #[test]
    fn finds_a_library_under_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = SystemRoot::new(dir.path());
        let spec = Manufacturer::Cambricon.spec();
        let none = |_: &str| None;
        assert_eq!(locate(&root, spec, &none), None);

        let lib = root.path("/usr/local/neuware/lib64/libcndev.so");
        std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
        std::fs::write(&lib, b"").unwrap();
        assert_eq!(locate(&root, spec, &none), Some(Located::Path(lib)));
    }

    #[test]
    fn ascend_driver_directories_are_searched() {
        let none = |_: &str| None;
        let dirs = search_dirs(Manufacturer::Ascend.spec(), &none);
        assert!(dirs.contains(&"/usr/local/Ascend/driver/lib64/driver".to_owned()));
        assert!(dirs.contains(&"/usr/local/dcmi".to_owned()));
        assert!(
            !search_dirs(Manufacturer::Cambricon.spec(), &none)
                .contains(&"/usr/local/dcmi".to_owned())
        );

        let dir = tempfile::tempdir().unwrap();
        let root = SystemRoot::new(dir.path());
        let lib = root.path("/usr/local/Ascend/driver/lib64/driver/libdcmi.so");
        std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
        std::fs::write(&lib, b"").unwrap();
        assert_eq!(
            locate(&root, Manufacturer::Ascend.spec(), &none),
            Some(Located::Path(lib))
        );
    }

    #[test]
    fn metax_and_mthreads_directories_are_searched() {
        let none = |_: &str| None;
        let metax = search_dirs(Manufacturer::Metax.spec(), &none);
        assert!(metax.contains(&"/opt/maca/lib".to_owned()));
        assert!(metax.contains(&"/opt/mxdriver/lib".to_owned()));
        let mthreads = search_dirs(Manufacturer::Mthreads.spec(), &none);
        assert!(mthreads.contains(&"/usr/local/musa/lib".to_owned()));
        assert!(mthreads.contains(&"/usr/lib/x86_64-linux-gnu".to_owned()));
        assert!(!mthreads.contains(&"/opt/mxdriver/lib".to_owned()));

        let env = |k: &str| (k == "MACA_HOME").then(|| "/opt/maca-2.32".to_owned());
        assert_eq!(
            search_dirs(Manufacturer::Metax.spec(), &env)[0],
            "/opt/maca-2.32/lib"
        );
    }

    #[test]
    fn home_variables_come_first() {
        let env = |k: &str| (k == "NEUWARE_HOME").then(|| "/opt/cn".to_owned());
        let dirs = search_dirs(Manufacturer::Cambricon.spec(), &env);
        assert_eq!(dirs[0], "/opt/cn/lib");
        assert!(dirs.contains(&"/usr/local/neuware/lib64".to_owned()));
        assert!(dirs.contains(&"/usr/lib64".to_owned()));
    }
}
