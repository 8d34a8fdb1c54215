//! Python grpcio as an independent gRPC client: a virtual environment under the target
//! directory with `grpcio` and `grpcio-tools` from PyPI (installed on first use), and stubs
//! generated from the same vendored `.proto` files the Rust side compiles.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
};

/// Serialises the one-time install across test threads.
static INSTALL: Mutex<()> = Mutex::new(());

/// The checkout's root (the tests crate lives in `tests/`).
pub fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("checkout root")
        .to_owned()
}

/// The venv's python, installing grpcio and grpcio-tools when missing.
pub fn python() -> PathBuf {
    let _held = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let venv = crate::profile_dir()
        .parent()
        .expect("target dir")
        .join("python-grpc");
    let python = venv.join("bin/python");
    let ready = Command::new(&python)
        .args(["-c", "import grpc, grpc_tools"])
        .status()
        .is_ok_and(|s| s.success());
    if !ready {
        let made = Command::new("python3")
            .arg("-m")
            .arg("venv")
            .arg(&venv)
            .status()
            .expect("python3 -m venv");
        assert!(made.success(), "creating {}", venv.display());
        let pip = Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "grpcio", "grpcio-tools"])
            .status()
            .expect("pip install grpcio grpcio-tools");
        assert!(
            pip.success(),
            "installing grpcio and grpcio-tools from PyPI"
        );
    }
    python
}

/// Generates the device plugin stubs (`api_pb2.py`, `api_pb2_grpc.py`) into `out`.
pub fn device_plugin_stubs(python: &Path, out: &Path) {
    let dir = checkout().join("agents/proto/proto/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1");
    let status = Command::new(python)
        .args(["-m", "grpc_tools.protoc"])
        .arg(format!("-I{}", dir.display()))
        .arg(format!("--python_out={}", out.display()))
        .arg(format!("--grpc_python_out={}", out.display()))
        .arg("api.proto")
        .status()
        .expect("running grpc_tools.protoc");
    assert!(status.success(), "generating the Python stubs");
}

/// Runs the Python device plugin client against `socket`: `GetDevicePluginOptions`, the first
/// `ListAndWatch` list and, as `request` asks (`{"preferred": {"available": [..],
/// "mustInclude": [..], "size": n}, "preStart": [ids], "allocate": [ids]}`),
/// `GetPreferredAllocation`, `PreStartContainer` and `Allocate`; the answers as JSON (see the
/// script for the keys).
pub fn device_plugin_client(socket: &Path, request: &serde_json::Value) -> serde_json::Value {
    let python = python();
    let stubs = tempfile::tempdir().expect("stub dir");
    device_plugin_stubs(&python, stubs.path());
    let script = checkout().join("tests/fixtures/python/device_plugin_client.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(socket)
        .arg(request.to_string())
        .env("PYTHONPATH", stubs.path())
        .output()
        .expect("running the Python client");
    assert!(
        out.status.success(),
        "python client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the Python client prints JSON")
}
