//! Peers that tests run: a fault hub in-process, the real olah, and a Python grpcio CSI client.

pub mod fault_hub;
pub mod grpcio;
pub mod olah;
