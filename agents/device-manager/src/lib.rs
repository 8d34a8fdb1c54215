//! The per-node accelerator agent.
//!
//! - [`detect`]: one detection or monitor pass over the requested manufacturers.
//! - [`pci`]: the PCI scan that gates every vendor library.
//! - [`vendors`]: one [`detector::Detector`] per manufacturer, over the vendors' management
//!   libraries (their layout is in the module's doc).
//! - [`system_root`]: every host path resolved under one root (`GPUSTACK_SYSTEM_ROOT`).
//! - [`serve`]: `device-manager serve`, the kubelet device plugins ([`plugin`]), the Devices
//!   ledger ([`ledger`]) and the monitor; [`host_env`] and [`card_usage`] are the leaves they
//!   and the vendor libraries share, so that none of them imports another; [`node_pod`] is
//!   the part of a Pod they read (decoded alone, not k8s-openapi's whole Pod).
//!
//! The commands (`device-manager detect`, `monitor`) are thin shells over [`detect`].

#![warn(missing_docs)]

mod card_usage;
pub mod detect;
pub mod detector;
mod grouping;
mod host_env;
pub mod injection;
mod ledger;
mod library;
mod node_pod;
mod pci;
mod plugin;
pub mod preflight;
pub mod serve;
pub mod system_root;
mod vendors;
