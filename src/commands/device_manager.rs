//! `device-manager detect` and `monitor`: one pass of the device-manager library, printed as
//! YAML on standard output. Both are pure reads.

use std::{process::ExitCode, time::Duration};

use gpustack_api::yaml;
use gpustack_device_manager::{
    detect::{self, Options, Report},
    system_root::SystemRoot,
};
use serde::Serialize;

use crate::cli::{
    args::{DetectArgs, DeviceManagerCommand},
    duration::GoDuration,
};

/// How often an empty single-manufacturer pass is tried before giving up, and how far apart.
const FAST_FAIL_ATTEMPTS: u32 = 3;
const FAST_FAIL_INTERVAL: Duration = Duration::from_secs(1);

pub fn run(command: DeviceManagerCommand) -> ExitCode {
    match command {
        DeviceManagerCommand::Detect(args) => one_shot(&args, "detect", detect::detect),
        DeviceManagerCommand::Monitor(args) => one_shot(&args, "monitor", detect::monitor),
        DeviceManagerCommand::Serve(args) => super::device_manager_serve::run(args),
        DeviceManagerCommand::Preflight(args) => super::preflight::run(args),
    }
}

type Pass<T> = fn(&SystemRoot, &dyn Fn(&str) -> Option<String>, &Options) -> Report<T>;

/// How long a one-shot may take before it gives up (`GPUSTACK_DETECT_TIMEOUT`, a Go duration):
/// a wedged device can block a sysfs read or a vendor library call indefinitely.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `pass`, retrying an empty result when exactly one manufacturer was asked for and
/// `--no-fast-failed` was not given (the reference's first-pass rule, bounded for a one-shot).
fn one_shot<T: Serialize + Send + 'static>(
    args: &DetectArgs,
    what: &str,
    pass: Pass<T>,
) -> ExitCode {
    let timeout = match std::env::var("GPUSTACK_DETECT_TIMEOUT") {
        Ok(text) => match text.parse::<GoDuration>() {
            Ok(d) if !d.0.is_zero() => d.0,
            _ => {
                eprintln!(
                    "error: invalid value '{text}' for 'GPUSTACK_DETECT_TIMEOUT': must be a duration above 0, like 30s or 2m"
                );
                return ExitCode::from(crate::cli::EXIT_USAGE as u8);
            }
        },
        Err(_) => DEFAULT_TIMEOUT,
    };
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
    let (tx, rx) = std::sync::mpsc::channel();
    let label = what.to_owned();
    let span = tracing::Span::current();
    // The pass runs on its own thread so that a read that never returns cannot hang the command.
    std::thread::spawn(move || {
        let _entered = span.enter();
        let env = |name: &str| std::env::var(name).ok();
        let root = SystemRoot::from_env(env);
        let mut attempt = 1;
        let report = loop {
            let report = pass(&root, &env, &opts);
            match single {
                Some(m) if report.items.is_empty() && attempt < attempts => {
                    tracing::info!(
                        "{label}: no {m} accelerator found (attempt {attempt} of {attempts}); retrying in {}s",
                        FAST_FAIL_INTERVAL.as_secs()
                    );
                    std::thread::sleep(FAST_FAIL_INTERVAL);
                    attempt += 1;
                }
                _ => break report,
            }
        };
        let _ = tx.send(report);
    });
    let Ok(report) = rx.recv_timeout(timeout) else {
        eprintln!(
            "error: {what} did not finish within {} (a device or vendor library is not answering; set GPUSTACK_DETECT_TIMEOUT to wait longer)",
            GoDuration(timeout)
        );
        return ExitCode::FAILURE;
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
