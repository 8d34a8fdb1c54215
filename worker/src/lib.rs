//! The per-cluster control plane.
//!
//! This crate will hold the aggregated extension API server, admission webhooks, the capacity and
//! Kueue controllers and leader election. Until those land, `worker` reports that it is not
//! available in this build.
