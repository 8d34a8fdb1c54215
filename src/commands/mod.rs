//! Runs a parsed command with the component that implements it. One module per command family;
//! each turns flags into the component's options and owns its process plumbing.

mod device_manager;
mod device_manager_serve;
mod gateway;
mod model_manager;
mod preflight;
mod process;

use std::process::ExitCode;

use crate::cli::Command;

pub fn run(command: Command) -> ExitCode {
    let name = command.name();
    match command {
        Command::DeviceManager(dm) => device_manager::run(dm),
        Command::WorkerGateway(a) => gateway::run(*a),
        Command::ModelManager(a) => model_manager::run(a),
        Command::Worker(_) => not_in_this_build(name),
    }
}

/// A command whose implementation has not landed: say so and fail, never pretend to run.
pub fn not_in_this_build(name: &str) -> ExitCode {
    tracing::error!("{name} is not available in this build yet");
    eprintln!("error: {name} is not available in this build yet");
    ExitCode::FAILURE
}
