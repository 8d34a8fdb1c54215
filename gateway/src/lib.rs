//! The hub of the fleet.
//!
//! This crate will hold the SQLite store and its watch fan-out, the Kubernetes-compatible REST
//! surface, embedded clusters and upstream mirrors. Until those land, `worker-gateway` reports
//! that it is not available in this build.
