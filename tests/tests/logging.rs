//! klog-style logging flags change what the binary writes on stderr.

use gpustack_tests::{operator, stderr};

/// `dm detect` on an empty host tree logs a retry line at info level and, with `-v`, more.
fn detect_logs(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut all = vec!["dm", "detect", "--manufacturer=amd"];
    all.extend_from_slice(args);
    let out = operator()
        .args(&all)
        .env("GPUSTACK_SYSTEM_ROOT", dir.path())
        .output()
        .unwrap();
    stderr(&out)
}

fn retry_lines(logs: &str) -> Vec<&str> {
    logs.lines()
        .filter(|l| l.contains("no amd accelerator found (attempt"))
        .collect()
}

#[test]
fn default_header_has_time_level_and_target() {
    let logs = detect_logs(&[]);
    let line = retry_lines(&logs)[0];
    assert!(line.starts_with("20") && line.contains(" INFO "), "{line}");
    assert!(
        line.contains("gpustack_operator::commands::device_manager"),
        "{line}"
    );
    assert!(!logs.contains("DEBUG"), "{logs}");
}

#[test]
fn skip_headers_leaves_the_message() {
    let logs = detect_logs(&["--skip_headers"]);
    let line = retry_lines(&logs)[0];
    assert!(line.starts_with("command{"), "{line}");
    assert!(!line.contains("INFO"), "{line}");
}

#[test]
fn add_dir_header_names_the_source_line() {
    let logs = detect_logs(&["--add_dir_header"]);
    let line = retry_lines(&logs)[0];
    assert!(line.contains("src/commands/device_manager.rs:"), "{line}");
}

#[test]
fn verbosity_and_vmodule_enable_debug() {
    assert!(detect_logs(&["-v=2"]).contains("DEBUG"));
    let logs = detect_logs(&["--vmodule=gpustack_operator=2"]);
    assert!(
        logs.contains("DEBUG") && logs.contains("starting"),
        "{logs}"
    );
}

#[test]
fn backtrace_at_a_log_line() {
    // Find the retry line's own file:line, then ask for a backtrace there.
    let logs = detect_logs(&["--add_dir_header"]);
    let line = retry_lines(&logs)[0];
    let at = line
        .split_whitespace()
        .find(|w| w.starts_with("src/commands/device_manager.rs:"))
        .unwrap()
        .trim_end_matches(':');
    let logs = detect_logs(&[&format!(
        "--log_backtrace_at={}",
        at.trim_start_matches("src/commands/")
    )]);
    assert!(logs.contains("backtrace at device_manager.rs:"), "{logs}");
}
