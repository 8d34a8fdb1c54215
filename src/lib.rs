//! The `gpustack-operator` binary's plumbing: the command line, logging, and the wiring that hands
//! each command to its component crate. No domain logic lives here.

pub mod allocator;
pub mod cli;
pub mod commands;
pub mod logging;

/// An environment of `pairs` alone, for the tests of what reads the environment.
#[cfg(test)]
pub(crate) fn env_of(
    pairs: &'static [(&'static str, &'static str)],
) -> impl Fn(&str) -> Option<String> {
    move |k: &str| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}
