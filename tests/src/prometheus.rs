//! A real Prometheus (Debian's `prometheus` package, installed on first use when missing)
//! started on a loopback port, scraping HTTPS targets every second, queried through its
//! HTTP API; and the same package's `promtool`, which checks a service's exposition text.

use std::{
    io::Write,
    path::Path,
    process::{Child, Command, Stdio},
};

use crate::embedded::free_port;

pub struct Prometheus {
    child: Child,
    pub port: u16,
}

fn installed() -> bool {
    Command::new("prometheus")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

impl Prometheus {
    /// Scrapes `https://<target>/metrics` (certificate not verified: the agent's is generated).
    pub fn start(dir: &Path, target: &str) -> Prometheus {
        Self::start_with(
            dir,
            &format!(
                "  - job_name: device-manager\n    scheme: https\n    tls_config:\n      insecure_skip_verify: true\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
    }

    /// Scrapes what `scrape_configs` (the YAML list under `scrape_configs:`) says, every second.
    pub fn start_with(dir: &Path, scrape_configs: &str) -> Prometheus {
        if !installed() {
            let status = Command::new("apt-get")
                .args(["install", "-y", "prometheus"])
                .status()
                .expect("apt-get");
            assert!(
                status.success() && installed(),
                "installing Debian's prometheus package"
            );
        }
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n{scrape_configs}"
            ),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("starting prometheus");
        Prometheus { child, port }
    }

    /// The active targets (`job`, `health`, `lastError`, ...), or `None` while Prometheus is
    /// not answering.
    pub fn targets(&self) -> Option<Vec<serde_json::Value>> {
        let body = self.api("targets", &[])?;
        body["data"]["activeTargets"].as_array().cloned()
    }

    /// The instant-query result vector for `query` (empty until scraped), or `None` while
    /// Prometheus is not answering.
    pub fn query(&self, query: &str) -> Option<Vec<serde_json::Value>> {
        let body = self.api("query", &[("query", query)])?;
        body["data"]["result"].as_array().cloned()
    }

    /// GET `/api/v1/<endpoint>` with `params`, its JSON answer.
    fn api(&self, endpoint: &str, params: &[(&str, &str)]) -> Option<serde_json::Value> {
        let mut cmd = Command::new("curl");
        cmd.args(["-s", "--fail", "--max-time", "5", "--get"])
            .arg(format!("http://127.0.0.1:{}/api/v1/{endpoint}", self.port));
        for (k, v) in params {
            cmd.args(["--data-urlencode", &format!("{k}={v}")]);
        }
        let out = cmd.output().ok()?;
        serde_json::from_slice(&out.stdout).ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `promtool check metrics` on `text`, the `/metrics` answer of `service`, and fails with
/// promtool's findings (parse errors and lint problems alike). A machine without promtool fails
/// the test, saying how to install it: `.ci/run` does.
#[track_caller]
pub fn check_metrics(service: &str, text: &str) {
    assert!(
        text.lines()
            .any(|l| !l.starts_with('#') && !l.trim().is_empty()),
        "{service}'s /metrics holds no sample:\n{text}"
    );
    let mut child = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!(
            "promtool is needed to check {service}'s /metrics and could not be run ({e}): \
             install Debian's prometheus package (apt-get install --no-install-recommends prometheus)"
        ),
    };
    let mut stdin = child.stdin.take().expect("promtool's stdin");
    stdin
        .write_all(text.as_bytes())
        .expect("writing to promtool");
    drop(stdin);
    let out = child.wait_with_output().expect("promtool's answer");
    assert!(
        out.status.success(),
        "promtool check metrics refused {service}'s /metrics ({}):\n{}{}\n--- the text ---\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
