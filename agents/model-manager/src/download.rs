//! The node's downloader: request limits shared by every attempt, and the per-file fetcher.

pub mod fetch;
pub mod limits;

pub use fetch::{ByteCounters, Checkpoint, FileFetch, Tuning};
pub use limits::DownloadLimits;
