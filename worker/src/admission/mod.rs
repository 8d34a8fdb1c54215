//! The worker's admission webhooks ("gate 1", §3 of the reference notes): the Pod webhooks that
//! turn accelerator requests into Kueue credits and refuse what cannot run, the InstanceType
//! defaulting and validation, the Workload fit pin and the NodeModelStore status guard.
//!
//! The rules are pure functions over plain types ([`pod_requests`], [`pod_validate`],
//! [`pod_mutate`], [`instance_type`], [`instance`], [`workload_pin`], [`model_store_guard`]); what a webhook
//! decides is a [`verdict`], named by one [`reasons::Reason`]. [`server`] answers the reviews
//! on the worker's HTTPS port; [`hooks`] lists what is served and registered.

pub mod affinity;
pub mod hooks;
pub mod instance;
pub mod instance_type;
pub mod metrics;
pub mod model_store_guard;
pub mod pod_mutate;
pub mod pod_requests;
pub mod pod_update;
pub mod pod_validate;
pub mod quantity;
pub mod reasons;
pub mod server;
pub mod verdict;
pub mod workload_pin;

pub use server::{Admission, Callers, Options, router};
