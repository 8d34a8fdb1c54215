//! `device-manager preflight`: the process plumbing around the library's run — flags to options,
//! the allocator's injection, the report on standard output (written even when the run fails),
//! one line per cause of failure on standard error.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use gpustack_api::yaml;
use gpustack_device_manager::{
    preflight::{self, Options, injection::NodeInjection, runtime::Cli},
    system_root::SystemRoot,
};

use crate::cli::args::PreflightArgs;

/// How long one host command or probe container may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

pub fn run(args: PreflightArgs) -> ExitCode {
    let env = |name: &str| std::env::var(name).ok();
    let chroot = ["/usr/sbin/chroot", "/usr/bin/chroot"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("chroot"));
    let opts = Options {
        manufacturers: args.manufacturer.clone(),
        no_pci_check: args.no_pci_check,
        dry_run: args.dry_run,
        probe_image: Some(args.probe_image.clone()).filter(|s| !s.is_empty()),
        host_root: args.host_root.clone(),
        // The CLI accepts only docker, nerdctl and ctr.
        runtime: args.runtime.as_deref().and_then(Cli::from_flag),
        engine_root: env("GPUSTACK_PREFLIGHT_ENGINE_ROOT")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/")),
        chroot,
        command_timeout: COMMAND_TIMEOUT,
    };
    let system = SystemRoot::from_env(env);
    let injection = match NodeInjection::from_env(&env, &SystemRoot::new(&opts.host_root)) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let outcome = preflight::run(&opts, &system, &env, &injection);
    if let Some(runtime) = &outcome.runtime {
        eprintln!("note: container runtime: {runtime}");
    }
    for w in &outcome.warnings {
        eprintln!("warning: {w}");
    }
    // The report goes out before the verdict, failed run or not.
    match yaml::to_string_with_indent(&outcome.report, 4) {
        Ok(text) => print!("{text}"),
        Err(e) => {
            eprintln!("error: writing the preflight report: {e}");
            return ExitCode::FAILURE;
        }
    }
    let causes = outcome.report.failures();
    for cause in &causes {
        eprintln!("error: {cause}");
    }
    if causes.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
