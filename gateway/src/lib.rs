#![warn(missing_docs)]
//! The hub of the fleet: it mirrors upstream clusters into the embedded API server's store and
//! serves them, read-only, through that server's API (`gpustack-apiserver`, which this crate
//! builds on and which knows nothing of it).
//!
//! - [`mirror`]: one task per upstream (named in `--upstreams` or subscribed at run time) that
//!   keeps a copy of its GPU-relevant objects in the store, hosted as a read-only cluster under
//!   the upstream's name and joined to the fleet view (`/clusters/_fleet/`); the set of
//!   subscriptions ([`mirror::subscriptions`]) and the upstreams' status.
//! - [`hub_store`]: what the hub keeps besides objects (subscriptions, watch progress, last
//!   sync times), in tables of its own beside the objects.
//! - [`metrics`]: the hub's Prometheus series, in the registry the binary passes in.
//! - [`ops`]: the hub's operations API, its own router in front of the clusters': the
//!   subscription API (`/apis/workers`) and `/metrics`.
//! - [`server`]: the running hub ([`server::Gateway`]): the API server, with the mirrors hosted
//!   before it serves and stopped before its store closes.

pub mod hub_store;
pub mod metrics;
pub mod mirror;
pub mod ops;
pub mod server;
