//! `device-manager detect` and `monitor`: one pass of the device-manager library, printed as
//! YAML on standard output. Both are pure reads.

use std::{process::ExitCode, time::Duration};

use gpustack_api::yaml;
use gpustack_device_manager::{
    detect::{self, Options, Report},
    system_root::SystemRoot,
};
use serde::Serialize;

use super::not_in_this_build;
use crate::cli::args::{DetectArgs, DeviceManagerCommand};

/// How often an empty single-manufacturer pass is tried before giving up, and how far apart.
const FAST_FAIL_ATTEMPTS: u32 = 3;
const FAST_FAIL_INTERVAL: Duration = Duration::from_secs(1);

pub fn run(command: DeviceManagerCommand) -> ExitCode {
    match command {
        DeviceManagerCommand::Detect(args) => one_shot(&args, "detect", detect::detect),
        DeviceManagerCommand::Monitor(args) => one_shot(&args, "monitor", detect::monitor),
        DeviceManagerCommand::Serve(_) => not_in_this_build("device-manager serve"),
        DeviceManagerCommand::Preflight(_) => not_in_this_build("device-manager preflight"),
    }
}

type Pass<T> = fn(&SystemRoot, &dyn Fn(&str) -> Option<String>, &Options) -> Report<T>;

/// Runs `pass`, retrying an empty result when exactly one manufacturer was asked for and
/// `--no-fast-failed` was not given (the reference's first-pass rule, bounded for a one-shot).
fn one_shot<T: Serialize>(args: &DetectArgs, what: &str, pass: Pass<T>) -> ExitCode {
    let env = |name: &str| std::env::var(name).ok();
    let root = SystemRoot::from_env(env);
    let opts = Options {
        manufacturers: args.manufacturer.clone(),
        no_pci_check: args.no_pci_check,
    };
    let single = match args.manufacturer.as_slice() {
        [one] if !args.no_fast_failed => Some(*one),
        _ => None,
    };
    let attempts = if single.is_some() {
        FAST_FAIL_ATTEMPTS
    } else {
        1
    };
    let mut attempt = 1;
    let report = loop {
        let report = pass(&root, &env, &opts);
        let empty = report.items.is_empty();
        match single {
            Some(m) if empty && attempt < attempts => {
                tracing::info!(
                    "{what}: no {m} accelerator found (attempt {attempt} of {attempts}); retrying in {}s",
                    FAST_FAIL_INTERVAL.as_secs()
                );
                std::thread::sleep(FAST_FAIL_INTERVAL);
                attempt += 1;
            }
            _ => break report,
        }
    };
    let text = match yaml::to_string(&report.items) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("error: writing the {what} result: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{text}");
    let mut failed = false;
    for (m, e) in &report.failures {
        tracing::error!(manufacturer = %m, "could not measure: {e}");
        eprintln!("error: could not measure {m}: {e}");
        failed = true;
    }
    if let (Some(m), true) = (single, report.items.is_empty()) {
        eprintln!(
            "error: no {m} accelerator found after {attempts} attempts; pass --no-fast-failed to accept an empty result"
        );
        failed = true;
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
