//! Python grpcio as the kubelet-side CSI client: a venv under the target directory with grpcio
//! and grpcio-tools from PyPI, and stubs generated from the vendored `csi.proto`.

#![allow(dead_code)]

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use super::olah::{target_dir, workspace_root};

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub struct CsiClient {
    python: PathBuf,
    stubs: PathBuf,
    script: PathBuf,
    socket: PathBuf,
}

#[derive(Debug, serde::Deserialize)]
pub struct Outcome {
    pub code: String,
    #[serde(default)]
    pub details: String,
    #[serde(default)]
    pub response: serde_json::Value,
}

impl CsiClient {
    /// Installs grpcio (once) and generates the stubs into `work`.
    pub fn new(work: &Path, socket: &Path) -> Self {
        let venv = target_dir().join("grpcio-venv");
        let python = venv.join("bin/python");
        if !venv.join("bin/.grpcio-installed").exists() {
            run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
            run(Command::new(venv.join("bin/pip")).args([
                "install",
                "--quiet",
                "grpcio",
                "grpcio-tools",
            ]));
            std::fs::write(venv.join("bin/.grpcio-installed"), b"").unwrap();
        }
        let protos = workspace_root().join("agents/proto/proto");
        let stubs = work.join("stubs");
        std::fs::create_dir_all(&stubs).unwrap();
        run(Command::new(&python)
            .args(["-m", "grpc_tools.protoc", "-I"])
            .arg(&protos)
            .arg(format!("--python_out={}", stubs.display()))
            .arg(format!("--grpc_python_out={}", stubs.display()))
            .arg("csi/v1/csi.proto"));
        for pkg in ["csi", "csi/v1"] {
            std::fs::write(stubs.join(pkg).join("__init__.py"), b"").unwrap();
        }
        Self {
            python,
            stubs,
            script: workspace_root().join("agents/model-manager/tests/csi_client.py"),
            socket: socket.to_path_buf(),
        }
    }

    /// One call, e.g. `call("Node.NodePublishVolume", json!({...}))`.
    pub fn call(&self, method: &str, request: serde_json::Value) -> Outcome {
        let out = Command::new(&self.python)
            .arg(&self.script)
            .arg(&self.stubs)
            .arg(&self.socket)
            .arg(method)
            .arg(request.to_string())
            .output()
            .expect("running the Python CSI client");
        assert!(
            out.status.success(),
            "csi_client.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("the client prints JSON")
    }
}
