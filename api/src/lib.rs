#![warn(missing_docs)]
//! The contract of gpustack-operator: the types every component and every user sees.
//!
//! - [`devices`], [`instance_type`], [`instance`], [`model_store`], [`model_artifact`]:
//!   [`topology_source`]: `worker.gpustack.ai/v1alpha1` CRDs.
//! - [`kueue`]: the Kueue kinds the worker reads and writes (CRDs for clusters without Kueue).
//! - [`monitor`] and [`devices::DevicesGroup`]: what `device-manager monitor` and `detect` print.
//! - [`manufacturer`]: the nine manufacturers as data.
//! - [`yaml`]: how those types are written for people.
//! - [`crds`]: the CRDs the operator installs, as committed; with the `schema` feature (the
//!   tests'), the types' JSON schemas and the CRDs generated from them too.
//!
//! Pure: no IO, no Kubernetes client, no async runtime.

pub mod crds;
pub mod devices;
pub mod instance;
pub mod instance_type;
pub mod kueue;
pub mod labels;
pub mod manufacturer;
pub mod model_artifact;
pub mod model_store;
pub mod monitor;
pub mod nfd;
pub mod time;
pub mod topology_source;
pub mod yaml;

pub use manufacturer::Manufacturer;
