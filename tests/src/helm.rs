//! Helm's own engine for the chart tests: PyPI's `helm-sdkpy` wheel carries Helm's Go code as a
//! shared library. It is installed on first use into a virtual environment under the target
//! directory (`pip install --ignore-requires-python`: the wheel declares a newer Python than the
//! 3.11 it runs on), and driven one action per run by `tests/fixtures/python/helm_chart.py`.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::{Value, json};

use crate::python_grpc::checkout;

/// The chart under test.
pub fn chart_dir() -> PathBuf {
    checkout().join("deploy/chart/gpustack-operator")
}

/// The venv's python with `helm_sdkpy` importable, installing it when missing.
pub fn python() -> PathBuf {
    crate::python_venv::python_with(
        "python-helm",
        "helm_sdkpy",
        &["--ignore-requires-python", "helm-sdkpy"],
    )
}

/// Helm refused an action; its message, as Helm wrote it.
#[derive(Debug)]
pub struct Refused(pub String);

/// Helm bound to one cluster (a kubeconfig) and a release namespace.
pub struct Helm {
    python: PathBuf,
    kubeconfig: PathBuf,
    namespace: String,
}

impl Helm {
    pub fn new(kubeconfig: &Path, namespace: &str) -> Self {
        Helm {
            python: python(),
            kubeconfig: kubeconfig.to_owned(),
            namespace: namespace.to_owned(),
        }
    }

    /// Runs one action of `helm_chart.py`; its JSON result, or Helm's refusal.
    pub fn run(&self, args: &[&str]) -> Result<Value, Refused> {
        let out = Command::new(&self.python)
            .arg(checkout().join("tests/fixtures/python/helm_chart.py"))
            .arg(&self.kubeconfig)
            .arg(&self.namespace)
            .args(args)
            .output()
            .expect("running helm_chart.py");
        if !out.status.success() {
            return Err(Refused(String::from_utf8_lossy(&out.stderr).into_owned()));
        }
        Ok(serde_json::from_slice(&out.stdout).expect("helm_chart.py prints JSON"))
    }

    /// Lint messages of `chart` (severity and path).
    pub fn lint(&self, chart: &Path) -> Vec<Value> {
        let v = self.run(&["lint", chart.to_str().unwrap()]).expect("lint");
        v["messages"].as_array().cloned().unwrap_or_default()
    }

    pub fn install(&self, release: &str, values: &Value) -> Result<Value, Refused> {
        self.release_action("install", release, values)
    }

    pub fn upgrade(&self, release: &str, values: &Value) -> Result<Value, Refused> {
        self.release_action("upgrade", release, values)
    }

    /// `install` or `upgrade` of the chart under test with `values`.
    fn release_action(
        &self,
        action: &str,
        release: &str,
        values: &Value,
    ) -> Result<Value, Refused> {
        self.chart_action(action, release, &chart_dir(), values, &json!({}))
    }

    /// `install` or `upgrade` of `chart` with `values` and the SDK's keyword `options`
    /// (`{"server_side_apply": true}`).
    pub fn chart_action(
        &self,
        action: &str,
        release: &str,
        chart: &Path,
        values: &Value,
        options: &Value,
    ) -> Result<Value, Refused> {
        self.run(&[
            action,
            release,
            chart.to_str().unwrap(),
            &values.to_string(),
            &options.to_string(),
        ])
    }

    /// The release's revisions, oldest first: `{"version", "status"}` each.
    pub fn history(&self, release: &str) -> Result<Vec<Value>, Refused> {
        let v = self.run(&["history", release])?;
        Ok(v.as_array().cloned().unwrap_or_default())
    }

    pub fn uninstall(&self, release: &str) -> Result<Value, Refused> {
        self.run(&["uninstall", release])
    }

    /// Release names in the namespace, every state.
    pub fn releases(&self) -> Vec<String> {
        let v = self.run(&["list"]).expect("list");
        serde_json::from_value(v).expect("names")
    }
}
