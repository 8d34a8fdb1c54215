//! The contract every vendor detector implements.
//!
//! An empty result is a measurement ("this node has none"); an error means "could not measure",
//! and the caller keeps what it knew before. A missing driver or library is a measurement with a
//! warning, not an error.

use gpustack_api::{
    devices::{DeviceTopology, DevicesGroup},
    manufacturer::ResolvedManufacturer,
    monitor::AcceleratorMetrics,
};

use std::{ffi::OsString, fmt::Display};

use crate::{
    library::{self, Located},
    pci::PciDevice,
    system_root::SystemRoot,
};

/// What a detector gets to work with.
pub struct DetectContext<'a> {
    /// The root that host paths (sysfs, `/dev`, libraries) are resolved under.
    pub root: &'a SystemRoot,
    /// The manufacturer with the deployment's overrides applied.
    pub manufacturer: &'a ResolvedManufacturer,
    /// This manufacturer's PCI functions, or `None` when the PCI check is off.
    pub pci: Option<&'a [PciDevice]>,
    /// Environment lookup (toolkit homes, `GPUSTACK_*` switches).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Things the operator should know (missing library, unreadable field); printed on stderr.
    pub warnings: &'a mut Vec<String>,
}

impl DetectContext<'_> {
    /// `GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY`: whether a group's id carries its cards' memory,
    /// so that cards of one product with different memory form different groups.
    pub fn group_id_with_memory(&self) -> bool {
        (self.env)("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY").is_some_and(|v| v == "true" || v == "1")
    }

    /// Logs `message` and keeps it for the operator's warnings.
    pub fn warn(&mut self, message: impl Into<String>) {
        let message = message.into();
        tracing::warn!(manufacturer = %self.manufacturer.manufacturer, "{message}");
        self.warnings.push(message);
    }

    /// `found N <manufacturer> PCI function(s) (<bus ids>) but ` when the PCI check ran, else
    /// nothing: the start of a message about a library that stands between the hardware and us.
    pub fn found_functions(&self) -> String {
        match self.pci {
            Some(functions) => format!(
                "found {} {} PCI function(s) ({}) but ",
                functions.len(),
                self.manufacturer.manufacturer,
                functions
                    .iter()
                    .map(|f| f.bus_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => String::new(),
        }
    }

    /// Finds this manufacturer's management library under the system root. When there is none,
    /// says so and returns `None`: a warning where the PCI check saw the vendor's hardware, a
    /// debug line otherwise (without the check, most nodes are expected to lack the library).
    /// `hint` tells the operator what to mount or install.
    pub fn locate_library(&mut self, hint: &str) -> Option<FoundLibrary> {
        let spec = self.manufacturer.manufacturer.spec();
        match library::locate(self.root, spec, self.env) {
            Some(Located::Path(p)) => Some(FoundLibrary {
                shown: self.root.host_path(&p).display().to_string(),
                path: p.into_os_string(),
                by_name: false,
            }),
            Some(Located::LoaderSearch(name)) => Some(FoundLibrary {
                path: name.clone().into(),
                shown: name,
                by_name: true,
            }),
            None => {
                let message = format!(
                    "{}none of {} under {}; reporting no {} accelerators ({hint})",
                    self.found_functions(),
                    spec.libraries.join(", "),
                    library::search_dirs(spec, self.env).join(":"),
                    self.manufacturer.manufacturer,
                );
                if self.pci.is_some() {
                    self.warn(message);
                } else {
                    tracing::debug!("{message}");
                }
                None
            }
        }
    }

    /// Says why a located library cannot be used (`problem` reads after its name: "could not be
    /// loaded: …", "did not initialise: …"). Quiet when neither the PCI check nor a file on disk
    /// suggests the vendor is here: a bare name the loader could not resolve on a node without
    /// the hardware.
    pub fn library_unusable(&mut self, found: &FoundLibrary, problem: impl Display, hint: &str) {
        let message = format!(
            "{}{} {problem}; reporting no {} accelerators ({hint})",
            self.found_functions(),
            found.shown,
            self.manufacturer.manufacturer,
        );
        if found.by_name && self.pci.is_none() {
            tracing::debug!("{message}");
        } else {
            self.warn(message);
        }
    }

    /// The PCI function at `bus_id`: from the scan, or read directly when the check is off.
    pub fn pci_device(&self, bus_id: &str) -> Option<PciDevice> {
        match self.pci {
            Some(devices) => devices.iter().find(|d| d.bus_id == bus_id).cloned(),
            None => crate::pci::read_device(self.root, bus_id),
        }
    }

    /// The topology of the PCI function at the bus id a library gave (in sysfs form): from the
    /// scan or sysfs, else only the bus id; nothing when the library gave none.
    pub fn topology(&self, bus_id: Option<String>) -> DeviceTopology {
        let Some(bus_id) = bus_id else {
            return DeviceTopology::default();
        };
        self.pci_device(&bus_id)
            .or_else(|| crate::pci::read_device(self.root, &bus_id))
            .map(|f| f.topology())
            .unwrap_or(DeviceTopology {
                pci_bus_id: bus_id,
                ..DeviceTopology::default()
            })
    }
}

/// A vendor library located for loading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundLibrary {
    /// What to hand the loader: a path under the system root, or a bare name for its search.
    pub path: OsString,
    /// How messages name it: the host path, or the bare name.
    pub shown: String,
    /// Only the dynamic loader's own search can find it.
    pub by_name: bool,
}

/// Why a pass could not measure.
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    /// A call into the vendor's management library returned an error.
    #[error("{library}: {call} failed: {message}")]
    LibraryCall {
        /// The library as shown to the operator (path or soname).
        library: String,
        /// The library function that failed.
        call: &'static str,
        /// The library's own error text.
        message: String,
    },
    /// A host file (sysfs, `/proc`, `/dev`) could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The path, as resolved under the system root.
        path: String,
        /// The underlying IO error.
        #[source]
        source: std::io::Error,
    },
    /// The vendor detector panicked; the pass reports it instead of crashing.
    #[error("the {manufacturer} detector panicked: {message}")]
    Panicked {
        /// The manufacturer whose detector panicked.
        manufacturer: String,
        /// The panic payload when it is text, else `unknown panic`.
        message: String,
    },
}

/// One manufacturer's way of finding and sampling its accelerators.
pub trait Detector {
    /// The node's accelerators of this manufacturer, grouped by product.
    fn detect(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<DevicesGroup>, DetectError>;

    /// One utilization sample of each accelerator.
    fn monitor(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<AcceleratorMetrics>, DetectError>;
}
