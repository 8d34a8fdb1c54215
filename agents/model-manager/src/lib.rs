//! The per-node model cache: the CSI node service for `model.csi.gpustack.ai`, the hub client
//! and downloader, the on-disk cache and its garbage collection.
//!
//! Pure decisions (the manifest digest, file filters, GC plans, hub response interpretation) sit
//! in their own modules with table tests; IO (the store, the hub client, the downloader) takes
//! its roots, clients and limits as arguments.

#![warn(missing_docs)]

mod artifacts;
mod authorize;
pub mod csi;
pub mod download;
mod durable;
pub mod failure;
pub mod filter;
pub mod gc;
pub mod hashing;
mod hex;
pub mod http;
pub mod hub;
pub mod manifest;
pub mod materializer;
pub mod mount;
mod mountinfo;
mod recover;
pub mod serve;
mod status;
pub mod store;
