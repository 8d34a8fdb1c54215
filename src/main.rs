//! `gpustack-operator`: one binary for the control plane, the hub and the node agents.
//!
//! This file only wires things together: it sets the allocator up, completes and parses the
//! command line, sets up logging, and hands the command to [`commands::run`].

use std::process::ExitCode;

use gpustack_operator::{
    allocator,
    cli::{self, Parsed},
    commands, logging,
};

fn main() -> ExitCode {
    allocator::cap_arenas(&|name| std::env::var(name).ok());
    // kube, the OTLP exporter and our listeners all use rustls; exactly one provider, ring.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (cli, args) = match cli::parse(args, &|name| std::env::var(name).ok()) {
        Parsed::Run(cli, args) => (cli, args),
        Parsed::Print(text) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Parsed::Usage(text) => {
            eprintln!("{}", text.trim_end());
            return ExitCode::from(cli::EXIT_USAGE as u8);
        }
    };
    let guard = match logging::init(&cli.global) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let code = {
        let span = tracing::info_span!("command", command = cli.command.name());
        let _entered = span.enter();
        tracing::debug!(cmdline = %cli::env_flags::shell_join(&args), "starting");
        commands::run(cli.command)
    };
    drop(guard);
    code
}
