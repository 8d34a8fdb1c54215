//! Python grpcio as an independent gRPC client: a virtual environment under the target
//! directory with `grpcio` and `grpcio-tools` from PyPI (installed on first use), and stubs
//! generated from the same vendored `.proto` files the Rust side compiles.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The checkout's root (the tests crate lives in `tests/`).
pub fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("checkout root")
        .to_owned()
}

/// The venv's python, installing grpcio and grpcio-tools when missing.
pub fn python() -> PathBuf {
    crate::python_venv::python_with(
        "python-grpc",
        "grpc, grpc_tools",
        &["grpcio", "grpcio-tools"],
    )
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
