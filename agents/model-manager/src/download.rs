//! The node's downloader: request limits shared by every attempt, and the per-file fetcher.

pub(crate) mod fetch;
pub(crate) mod limits;

pub(crate) use fetch::FileFetch;
pub use fetch::{ByteCounters, Tuning};
pub use limits::DownloadLimits;
