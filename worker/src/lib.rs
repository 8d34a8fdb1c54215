//! The worker: the per-cluster control plane.
//!
//! Today it installs what it needs in its cluster ([`install`]: namespace, CRDs, Service,
//! APIServices, the Settings Secret) and serves the aggregated API ([`api`]) over HTTPS with a
//! shared serving certificate ([`serving_cert`]), behind delegated authentication and
//! authorization ([`auth`]) and an optional audit log ([`audit`]). [`run`] ties them together.
//!
//! - [`api::views`]: `worker.gpustack.ai/v1` views of the `v1alpha1` custom resources.
//! - [`settings`]: the `gpustack.ai/v1` settings catalog, checks and storage.
//! - [`applications`]: image mode, the node agents kept installed under a Lease.
//! - [`environment`]: the process environment, read once by the binary and handed in.

#![warn(missing_docs)]

pub mod admission;
pub mod api;
pub mod applications;
pub mod audit;
pub mod auth;
pub mod controllers;
pub mod environment;
pub mod fleet;
pub mod install;
pub mod local_node;
pub mod names;
pub mod run;
pub mod serving_cert;
pub mod settings;
pub mod typed;
