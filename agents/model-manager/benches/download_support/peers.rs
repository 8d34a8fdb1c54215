//! The programs the downloader is measured against: `curl` fetching the files in parallel,
//! `sha256sum` over the same files, and `huggingface_hub.snapshot_download` with and without
//! `hf_transfer` (installed from PyPI into a venv under the target directory). Each returns its
//! wall time and checks what it produced.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use super::hub::HubFile;

pub const HUGGINGFACE_HUB: &str = "huggingface_hub==0.36.2";
pub const HF_TRANSFER: &str = "hf_transfer==0.1.9";

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Flushes dirty pages, so a run does not pay for the previous run's write-back.
pub fn sync() {
    run(&mut Command::new("sync"));
}

fn check_sizes(dir: &Path, files: &[HubFile], who: &str) {
    for f in files {
        let got = std::fs::metadata(dir.join(&f.name))
            .unwrap_or_else(|e| panic!("{who} did not produce {}: {e}", f.name))
            .len();
        assert_eq!(got, f.size, "{who}: size of {}", f.name);
    }
}

/// `curl --parallel` with one transfer per file, all at once; `(curl, curl + sync)`: the second
/// adds flushing what curl wrote, the durability the downloader pays for with its fsyncs.
pub fn curl_parallel(
    hub: &str,
    repo: &str,
    commit: &str,
    files: &[HubFile],
    out: &Path,
) -> (Duration, Duration) {
    std::fs::create_dir_all(out).unwrap();
    let mut cmd = Command::new("curl");
    cmd.args([
        "--silent",
        "--show-error",
        "--fail",
        "--parallel",
        "--parallel-max",
    ])
    .arg(files.len().to_string());
    for f in files {
        cmd.arg("--output")
            .arg(out.join(&f.name))
            .arg(format!("{hub}/{repo}/resolve/{commit}/{}", f.name));
    }
    let started = Instant::now();
    run(&mut cmd);
    let fetched = started.elapsed();
    sync();
    let durable = started.elapsed();
    check_sizes(out, files, "curl");
    (fetched, durable)
}

/// `sha256sum` over the files (one process, one file after another); checks every sum.
pub fn sha256sum(files: &[HubFile]) -> Duration {
    let started = Instant::now();
    let out = run(Command::new("sha256sum").args(files.iter().map(|f| &f.path)));
    let took = started.elapsed();
    for (line, f) in out.lines().zip(files) {
        assert_eq!(
            line.split_whitespace().next(),
            Some(f.oid.as_str()),
            "sha256sum of {}",
            f.name
        );
    }
    took
}

/// The venv's python, installing the pinned clients the first time.
pub fn hf_python(target: &Path) -> PathBuf {
    let venv = target.join("hf-bench-venv");
    let python = venv.join("bin/python");
    let marker = venv.join(format!(".installed-{HUGGINGFACE_HUB}-{HF_TRANSFER}"));
    if !marker.exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
        run(Command::new(venv.join("bin/pip")).args([
            "install",
            "--quiet",
            HUGGINGFACE_HUB,
            HF_TRANSFER,
        ]));
        std::fs::write(&marker, b"").unwrap();
    }
    python
}

const SNAPSHOT: &str = r#"
import sys, time
import huggingface_hub.constants as constants
from huggingface_hub import snapshot_download
repo, revision, cache, transfer = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
if constants.HF_HUB_ENABLE_HF_TRANSFER != transfer:
    sys.exit("HF_HUB_ENABLE_HF_TRANSFER is not what the benchmark asked for")
if transfer:
    import hf_transfer  # fails loudly when it is missing
started = time.perf_counter()
path = snapshot_download(repo_id=repo, revision=revision, cache_dir=cache)
print(time.perf_counter() - started)
print(path)
"#;

/// `snapshot_download` of the repository into a fresh cache under `work`; the time is measured
/// inside Python around the call (interpreter start and imports excluded).
pub fn snapshot_download(
    python: &Path,
    hub: &str,
    repo: &str,
    commit: &str,
    files: &[HubFile],
    work: &Path,
    hf_transfer: bool,
) -> Duration {
    let cache = work.join(if hf_transfer {
        "hf-cache-transfer"
    } else {
        "hf-cache"
    });
    let out = run(Command::new(python)
        .arg("-c")
        .arg(SNAPSHOT)
        .args([repo, commit])
        .arg(&cache)
        .arg(if hf_transfer { "1" } else { "0" })
        .env("HF_ENDPOINT", hub)
        .env("HF_HOME", work.join("hf-home"))
        .env(
            "HF_HUB_ENABLE_HF_TRANSFER",
            if hf_transfer { "1" } else { "0" },
        )
        .env("HF_HUB_DISABLE_TELEMETRY", "1")
        .env("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        .env("HF_HUB_DISABLE_XET", "1")
        .env_remove("HF_TOKEN")
        .env_remove("HTTPS_PROXY")
        .env_remove("HTTP_PROXY"));
    let mut lines = out.lines();
    let secs: f64 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("snapshot_download printed no time: {out}"));
    let snapshot = PathBuf::from(lines.next().expect("the snapshot path").trim());
    let who = if hf_transfer {
        "snapshot_download + hf_transfer"
    } else {
        "snapshot_download"
    };
    check_sizes(&snapshot, files, who);
    std::fs::remove_dir_all(&cache).unwrap();
    Duration::from_secs_f64(secs)
}
