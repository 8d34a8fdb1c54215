//! Runs a parsed command with the component that implements it. One module per command family;
//! each turns flags into the component's options and owns its process plumbing.

mod device_manager;
mod device_manager_serve;
mod gateway;
mod model_manager;
mod one_machine;
mod preflight;
mod process;
mod worker;

use std::process::ExitCode;

use crate::cli::Command;

pub fn run(command: Command) -> ExitCode {
    match command {
        Command::DeviceManager(dm) => device_manager::run(dm),
        Command::WorkerGateway(a) => gateway::run(*a),
        Command::ModelManager(a) => model_manager::run(a),
        Command::Worker(a) => worker::run(*a),
    }
}
