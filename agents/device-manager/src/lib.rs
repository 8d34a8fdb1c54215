//! The per-node accelerator agent.
//!
//! - [`detect`]: one detection or monitor pass over the requested manufacturers.
//! - [`pci`]: the PCI scan that gates every vendor library.
//! - [`vendors`]: one [`detector::Detector`] per manufacturer.
//! - [`system_root`]: every host path resolved under one root (`GPUSTACK_SYSTEM_ROOT`).
//!
//! The commands (`device-manager detect`, `monitor`) are thin shells over [`detect`].

pub mod card_usage;
pub mod detect;
pub mod detector;
pub mod grouping;
pub mod host_env;
pub mod injection;
pub mod ledger;
pub mod library;
pub mod pci;
pub mod plugin;
pub mod preflight;
pub mod serve;
pub mod system_root;
pub mod vendors;
