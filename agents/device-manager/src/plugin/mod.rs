//! The kubelet device plugin (API v1beta1): one gRPC server per (manufacturer, mode) on
//! `<dir of --kube-socket>/<mfr>.<mode>.sock`, registered with the kubelet.
//!
//! - [`tokens`]: the device IDs, health and NUMA topology each plugin advertises (pure).
//! - [`decide`]: what `Allocate` may grant against the ledger (pure).
//! - [`partition`]: which card and slot a partitioned request gets (pure), and its marker.
//! - [`server`]: the gRPC service, pod identification, reservation and annotation.
//! - [`register`]: registration, and re-registration when the kubelet restarts.
//! - [`activity`]: when allocations run, so that the status writer keeps out of their way.

pub mod activity;
pub mod decide;
pub mod partition;
pub mod register;
pub mod server;
pub mod tokens;
