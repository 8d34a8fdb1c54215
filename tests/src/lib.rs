//! Shared helpers for the cross-component tests in `tests/tests/`: finding and running the real
//! `gpustack-operator` binary with a clean environment.

pub mod bench;
pub mod docker;
pub mod embedded;
pub mod fleet;
pub mod fleet_compare;
pub mod fleet_hosts;
pub mod fleet_load;
pub mod helm;
pub mod hub;
pub mod hub_backend;
pub mod inventory;
pub mod kubelet;
pub mod kubelet_http;
pub mod kubelet_logs;
pub mod kubelet_pods;
pub mod kueue;
pub mod machines;
pub mod module_graph;
pub mod monitoring;
pub mod otlp;
pub mod postgres;
pub mod preflight;
pub mod prometheus;
pub mod python_grpc;
pub mod python_venv;
pub mod sources;
pub mod stand_in;
pub mod string_errors;
pub mod synthetic_hub;
pub mod sysfs;
pub mod wait;
pub mod watchdog;
pub mod watched;
pub mod worker;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// The `gpustack-operator` binary built into this target directory (`cargo build` puts it beside
/// the test executables' `deps/` folder), or the one named by `GPUSTACK_OPERATOR_BIN`.
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("GPUSTACK_OPERATOR_BIN") {
        return PathBuf::from(path);
    }
    let profile_dir = profile_dir();
    let path = profile_dir.join("gpustack-operator");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build` before the tests (the README's test command does)",
        path.display()
    );
    path
}

/// Prints which binary a benchmark measures ([`binary`]), with a word when it is not a release
/// build: its figures are then not comparable with the targets.
pub fn announce_binary() {
    let bin = binary();
    println!("binary: {}", bin.display());
    if !bin.ends_with("release/gpustack-operator") {
        println!("(not a release build: the figures are not comparable with the targets)");
    }
}

/// The target directory's profile folder (`target/debug`), where `cargo build` puts the binary
/// and the stand-in libraries, found from the test executable in its `deps/` folder.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("test executable lives in target/<profile>/deps")
        .to_path_buf()
}

/// A command for the binary with no `GPUSTACK_*` or `OTEL_*` variables inherited, so that the
/// developer's environment cannot change a test's outcome.
pub fn operator() -> Command {
    let mut cmd = Command::new(binary());
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("GPUSTACK_") || name.starts_with("OTEL_") {
            cmd.env_remove(name.as_ref());
        }
    }
    cmd
}

/// Runs the binary with `args` to completion.
pub fn run(args: &[&str]) -> Output {
    operator()
        .args(args)
        .output()
        .expect("running gpustack-operator")
}

/// Runs the binary with `args` on the host tree at `root` (`GPUSTACK_SYSTEM_ROOT`), with a
/// vendor stand-in's fixture variable set to `fixture` or, when `None`, removed. The vendors'
/// toolkit-home variables and `LD_LIBRARY_PATH` are removed too, so that the developer's own
/// installation cannot steer the library search; `env` adds to the result.
pub fn run_on_host(
    root: &Path,
    (fixture_env, fixture): (&str, Option<&Path>),
    env: &[(&str, &str)],
    args: &[&str],
) -> Output {
    let mut cmd = operator();
    cmd.args(args).env("GPUSTACK_SYSTEM_ROOT", root);
    match fixture {
        Some(f) => cmd.env(fixture_env, f),
        None => cmd.env_remove(fixture_env),
    };
    let homes = gpustack_api::Manufacturer::ALL
        .into_iter()
        .flat_map(|m| m.spec().home_env.iter().copied());
    for var in homes.chain(["LD_LIBRARY_PATH"]) {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("running gpustack-operator")
}

/// Standard output of a run that must have succeeded (exit 0; stderr shown otherwise).
pub fn succeeded(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(out));
    stdout(out)
}

/// Standard error as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Standard output as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}
