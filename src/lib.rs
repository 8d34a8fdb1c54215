//! The `gpustack-operator` binary's plumbing: the command line, logging, and the wiring that hands
//! each command to its component crate. No domain logic lives here.

pub mod allocator;
pub mod cli;
pub mod commands;
pub mod logging;
