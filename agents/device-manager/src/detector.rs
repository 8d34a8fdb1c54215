//! The contract every vendor detector implements.
//!
//! An empty result is a measurement ("this node has none"); an error means "could not measure",
//! and the caller keeps what it knew before. A missing driver or library is a measurement with a
//! warning, not an error.

use gpustack_api::{
    devices::DevicesGroup, manufacturer::ResolvedManufacturer, monitor::AcceleratorMetrics,
};

use crate::{pci::PciDevice, system_root::SystemRoot};

/// What a detector gets to work with.
pub struct DetectContext<'a> {
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
    pub fn warn(&mut self, message: impl Into<String>) {
        let message = message.into();
        tracing::warn!(manufacturer = %self.manufacturer.manufacturer, "{message}");
        self.warnings.push(message);
    }

    /// The PCI function at `bus_id`: from the scan, or read directly when the check is off.
    pub fn pci_device(&self, bus_id: &str) -> Option<PciDevice> {
        match self.pci {
            Some(devices) => devices.iter().find(|d| d.bus_id == bus_id).cloned(),
            None => crate::pci::read_device(self.root, bus_id),
        }
    }
}

/// Why a pass could not measure.
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    #[error("{library}: {call} failed: {message}")]
    LibraryCall {
        library: String,
        call: &'static str,
        message: String,
    },
    #[error("reading {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the {manufacturer} detector panicked: {message}")]
    Panicked {
        manufacturer: String,
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
