//! Peers that tests run: a fault hub in-process (optionally behind HTTPS), the real olah, and a
//! Python grpcio CSI client.

pub mod fault_hub;
pub mod grpcio;
pub mod olah;
pub mod tls_front;
pub mod tmpfs;
