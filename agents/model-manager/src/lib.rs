//! The per-node model cache.
//!
//! This crate will hold the CSI node service for `model.csi.gpustack.ai`, the hub client and
//! downloader, the on-disk cache and its garbage collection. Until those land, `model-manager`
//! reports that it is not available in this build.
