//! One detector per manufacturer, behind the same [`Detector`] interface, so that deepening one
//! vendor never touches another.
//!
//! Layout: `<v>.rs` is a vendor's detector, whose module doc maps each library call to the field
//! it fills; `<v>/facts.rs` holds the pure interpretation of what the library answers, with
//! table tests; `<v>/<lib>.rs` is the binding, the vendor's only `unsafe`, with its documented
//! symbol table and layout assertions against the vendor header. What the bindings share is
//! written once: `ffi` loads a library, resolves its symbols and names what went wrong
//! (`OpenError`, `CallError`); `nvml_shaped` is the NVML-shaped libraries' C ABI
//! (IXML, HGML) and the detection code NVML, IXML and HGML share.

mod amdgpu;
mod ascend;
mod cambricon;
mod ffi;
mod iluvatar;
mod metax;
mod mthreads;
pub(crate) mod nvidia;
mod nvml_shaped;
pub mod partitions;
mod thead;

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, LogicalSliced},
};

use crate::{detector::Detector, system_root::SystemRoot};

pub fn detector_for(m: Manufacturer) -> Box<dyn Detector> {
    match m {
        Manufacturer::Amd => Box::new(amdgpu::AMD),
        Manufacturer::Hygon => Box::new(amdgpu::HYGON),
        Manufacturer::Nvidia => Box::new(nvidia::Nvml),
        Manufacturer::Ascend => Box::new(ascend::Dcmi),
        Manufacturer::Cambricon => Box::new(cambricon::Cndev),
        Manufacturer::Iluvatar => Box::new(iluvatar::Ixml),
        Manufacturer::Metax => Box::new(metax::Mxsml),
        Manufacturer::Mthreads => Box::new(mthreads::Mtml),
        Manufacturer::Thead => Box::new(thead::Hgml),
    }
}

/// The logical slicing every card of `m` offers, from its table entry (`None` where it has
/// none).
fn logical_slicing(m: Manufacturer) -> Option<LogicalSliced> {
    m.spec().logical_slicing.map(|s| LogicalSliced {
        cores_percentage_overcommit: s.cores_percentage_overcommit,
        count: s.count,
    })
}

/// What every library-backed detector shares, checked for each of them: the library is found
/// under the system root, and when it is missing or unusable the manufacturer reports no
/// accelerators (a measurement, not a failure) and says why — loudly only where the PCI check saw
/// the vendor's hardware.
#[cfg(test)]
mod library_behaviour {
    use gpustack_api::Manufacturer;

    use crate::{
        detect::{Options, detect, monitor},
        system_root::SystemRoot,
    };

    /// (manufacturer, PCI vendor id, class, where its library lives)
    const CASES: [(Manufacturer, &str, &str, &str); 7] = [
        (
            Manufacturer::Nvidia,
            "10de",
            "030200",
            "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        ),
        (
            Manufacturer::Ascend,
            "19e5",
            "120000",
            "/usr/local/dcmi/libdcmi.so",
        ),
        (
            Manufacturer::Cambricon,
            "cabc",
            "120000",
            "/usr/local/neuware/lib64/libcndev.so",
        ),
        (
            Manufacturer::Iluvatar,
            "1e3e",
            "120000",
            "/usr/local/corex/lib64/libixml.so",
        ),
        (
            Manufacturer::Metax,
            "9999",
            "030200",
            "/opt/mxdriver/lib/libmxsml.so",
        ),
        (
            Manufacturer::Mthreads,
            "1ed5",
            "030000",
            "/usr/lib/x86_64-linux-gnu/libmtml.so",
        ),
        (
            Manufacturer::Thead,
            "1ded",
            "120000",
            "/usr/local/PPU_SDK/lib/libhgml.so",
        ),
    ];

    /// A root with one PCI function of `vendor` and nothing else.
    fn root_with_function(vendor: &str, class: &str) -> (tempfile::TempDir, SystemRoot) {
        let dir = tempfile::tempdir().unwrap();
        let root = SystemRoot::new(dir.path());
        let function = root.path("/sys/bus/pci/devices/0000:01:00.0");
        std::fs::create_dir_all(&function).unwrap();
        std::fs::write(function.join("vendor"), format!("0x{vendor}\n")).unwrap();
        std::fs::write(function.join("class"), format!("0x{class}\n")).unwrap();
        (dir, root)
    }

    fn only(m: Manufacturer, no_pci_check: bool) -> Options {
        Options {
            manufacturers: vec![m],
            no_pci_check,
        }
    }

    #[test]
    fn missing_library_is_an_empty_measurement_with_a_warning() {
        let none = |_: &str| None;
        for (m, vendor, class, library) in CASES {
            let (_dir, root) = root_with_function(vendor, class);
            let name = library.rsplit('/').next().unwrap();
            for report in [
                detect(&root, &none, &only(m, false)).warnings,
                monitor(&root, &none, &only(m, false)).warnings,
            ] {
                let [warning] = report.as_slice() else {
                    panic!("{m}: one warning expected: {report:?}");
                };
                assert!(
                    warning.contains(&format!("found 1 {m} PCI function(s) (0000:01:00.0)")),
                    "{warning}"
                );
                assert!(warning.contains(name), "{m}: {warning}");
                assert!(
                    warning.contains("/usr/lib/x86_64-linux-gnu"),
                    "{m}: {warning}"
                );
                assert!(
                    warning.contains(&format!("reporting no {m} accelerators")),
                    "{warning}"
                );
            }
            let report = detect(&root, &none, &only(m, false));
            assert!(
                report.items.is_empty() && report.failures.is_empty(),
                "{m}: {:?}",
                report.failures
            );
        }
    }

    #[test]
    fn missing_library_without_the_pci_check_is_quiet() {
        for (m, ..) in CASES {
            let dir = tempfile::tempdir().unwrap();
            let root = SystemRoot::new(dir.path());
            let report = detect(&root, &|_: &str| None, &only(m, true));
            assert!(report.items.is_empty() && report.failures.is_empty(), "{m}");
            assert!(report.warnings.is_empty(), "{m}: {:?}", report.warnings);
        }
    }

    #[test]
    fn a_toolkit_home_is_searched_first() {
        for (m, var, home) in [
            (Manufacturer::Iluvatar, "COREX_HOME", "/opt/corex-4.1"),
            (Manufacturer::Thead, "PPU_HOME", "/opt/ppu-sdk"),
        ] {
            let (_, vendor, class, _) = CASES.into_iter().find(|c| c.0 == m).unwrap();
            let (_dir, root) = root_with_function(vendor, class);
            let env = |k: &str| (k == var).then(|| home.to_owned());
            let report = detect(&root, &env, &only(m, false));
            let [warning] = report.warnings.as_slice() else {
                panic!("{m}: one warning expected: {:?}", report.warnings);
            };
            let searched = warning.split(" under ").nth(1).unwrap_or_default();
            assert!(searched.starts_with(&format!("{home}/lib:")), "{warning}");
        }
    }

    #[test]
    fn library_directories_follow_ld_library_path() {
        // A library only on LD_LIBRARY_PATH (under the root) is found there, not on the host.
        let (_dir, root) = root_with_function("10de", "030200");
        let lib = root.path("/opt/driver/libnvidia-ml.so.1");
        std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
        std::fs::write(&lib, b"").unwrap();
        let env = |k: &str| (k == "LD_LIBRARY_PATH").then(|| "/opt/driver".to_owned());
        let report = detect(&root, &env, &only(Manufacturer::Nvidia, false));
        assert!(
            report
                .warnings
                .iter()
                .any(|w| w.contains("/opt/driver/libnvidia-ml.so.1")),
            "{:?}",
            report.warnings
        );
    }

    #[test]
    fn unloadable_library_is_an_empty_measurement_with_a_warning() {
        for (m, vendor, class, library) in CASES {
            let (_dir, root) = root_with_function(vendor, class);
            let file = root.path(library);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, b"not a shared object").unwrap();
            let report = detect(&root, &|_: &str| None, &only(m, false));
            assert!(
                report.items.is_empty() && report.failures.is_empty(),
                "{m}: {:?}",
                report.failures
            );
            let [warning] = report.warnings.as_slice() else {
                panic!("{m}: one warning expected: {:?}", report.warnings);
            };
            assert!(
                warning.contains(&format!("{library} could not be loaded")),
                "{m}: {warning}"
            );
        }
    }
}

/// A driver switch that must be on before a card is shared between containers: Ascend's
/// container-share flag (DCMI), Cambricon's sMLU mode (CNDev). The allocator turns it on where a
/// mode needs it; preflight turns it on to see that it takes, and puts it back.
pub trait SharingSwitch {
    /// The switch's name in preflight rows (`container-share`, `smlu-mode`).
    fn capability(&self) -> &'static str;
    /// How an operator sets it by hand, for messages.
    fn by_hand(&self, a: &Accelerator, on: bool) -> String;
    /// Whether it is on for the card.
    fn is_on(&self, a: &Accelerator) -> Result<bool, SwitchError>;
    /// Turns it on or off for the card.
    fn set(&self, a: &Accelerator, on: bool) -> Result<(), SwitchError>;
}

/// Why a sharing switch could not be read or set.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    /// The management library is absent, unloadable or did not initialise.
    #[error("{library} {reason}")]
    Library { library: String, reason: String },
    /// The card's ledger entry lacks what the library addresses it by.
    #[error("the accelerator has no {what} in its physicalIndexes")]
    Address { what: &'static str },
    /// The library refused the call.
    #[error("{0}")]
    Call(String),
}

/// The manufacturer's sharing switch, its library loaded from under `root`; `None` for a
/// manufacturer that has none.
pub fn sharing_switch(
    m: Manufacturer,
    root: &SystemRoot,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<Result<Box<dyn SharingSwitch>, SwitchError>> {
    let path = |m: Manufacturer| match crate::library::locate(root, m.spec(), env) {
        Some(crate::library::Located::Path(p)) => Ok(p.into_os_string()),
        Some(crate::library::Located::LoaderSearch(name)) => Ok(name.into()),
        None => Err(SwitchError::Library {
            library: m.spec().libraries.join(", "),
            reason: "is not under the system root".into(),
        }),
    };
    match m {
        Manufacturer::Ascend => Some(
            path(m)
                .and_then(|p| ascend::ContainerShare::open(&p))
                .map(|s| Box::new(s) as Box<dyn SharingSwitch>),
        ),
        Manufacturer::Cambricon => Some(
            path(m)
                .and_then(|p| cambricon::SmluMode::open(&p))
                .map(|s| Box::new(s) as Box<dyn SharingSwitch>),
        ),
        _ => None,
    }
}
