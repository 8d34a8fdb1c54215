//! The Hugging Face-compatible hub: listing a tree at a commit and fetching its files.

pub(crate) mod client;
pub(crate) mod listing;

pub use client::{HubClient, HubSettings, HubToken};
