#![warn(missing_docs)]
//! Serving, shared by every service of the binary (the API servers, the worker, the node
//! agents): what a process needs to answer HTTPS and unix-socket clients, and nothing of any
//! API.
//!
//! - [`any_server_cert`]: a client check that takes any server certificate, for self-made ones
//!   trusted otherwise.
//! - [`backoff`]: the one retry schedule (a base doubling to a cap) every service uses.
//! - [`certs`]: a generated CA and serving certificate for given names, rustls server
//!   configurations (ring provider only), and a certificate slot reloaded when its files change.
//! - [`listen`]: TCP listeners with a deep accept queue.
//! - [`serve`]: HTTPS and unix-socket serving with connection caps, setup deadlines, accept
//!   backoff and a bounded graceful drain.
//! - [`trace_context`]: a server span per request (HTTP, gRPC) joined to the caller's W3C
//!   `traceparent`, and the trace context written on outgoing requests.
//! - [`grpc_metrics`]: gRPC calls counted by method and code, a tower layer on tonic servers.
//! - [`grpc`]: a node agent's gRPC services served on a unix socket, traced and counted.
//! - [`open_gauge`]: a gauge of answers still streaming (open watches).
//! - [`connections`]: who holds a listener's connections (per-address shares, setup turns,
//!   which idle connection gives way); [`in_flight`] tells it when requests are in flight.
//!
//! Deliberately absent: any REST toolkit, store or Kubernetes client, so that a node agent's
//! crate graph holds nothing of the API servers (`tests/tests/crate_dependencies.rs` checks the tree).

pub mod any_server_cert;
pub mod backoff;
pub mod certs;
pub mod connections;
pub mod grpc;
pub mod grpc_metrics;
pub mod in_flight;
pub mod listen;
pub mod open_gauge;
pub mod serve;
pub mod trace_context;
