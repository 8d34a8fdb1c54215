//! The Hugging Face-compatible hub: listing a tree at a commit and fetching its files.

pub mod client;
pub mod listing;

pub use client::{HubClient, HubSettings, HubToken};
