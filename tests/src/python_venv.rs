//! Python packages from PyPI for independent clients (grpcio, Helm's engine): one virtual
//! environment per purpose under the target directory, installed on first use.

use std::{path::PathBuf, process::Command, sync::Mutex};

/// Serialises the one-time installs across test threads.
static INSTALL: Mutex<()> = Mutex::new(());

/// The python of the venv `target/<name>`, where `import` succeeds; when it does not yet, the
/// venv is made and `pip install` runs with `pip_args`.
pub fn python_with(name: &str, import: &str, pip_args: &[&str]) -> PathBuf {
    let _held = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let venv = crate::profile_dir()
        .parent()
        .expect("target dir")
        .join(name);
    let python = venv.join("bin/python");
    let ready = || {
        Command::new(&python)
            .args(["-c", &format!("import {import}")])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ready() {
        let made = Command::new("python3")
            .arg("-m")
            .arg("venv")
            .arg(&venv)
            .status()
            .expect("python3 -m venv");
        assert!(made.success(), "creating {}", venv.display());
        let pip = Command::new(venv.join("bin/pip"))
            .args(["install", "-q"])
            .args(pip_args)
            .status()
            .expect("pip install");
        assert!(pip.success(), "installing {pip_args:?} from PyPI");
        assert!(
            ready(),
            "`import {import}` fails after installing {pip_args:?}"
        );
    }
    python
}
