//! The real `worker` process against an embedded cluster, and kubectl bound to the worker's own
//! HTTPS endpoint (trusting the CA the worker keeps in its serving Secret).

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
};

use crate::{
    embedded::{DEADLINE, GatewayProcess, free_port, kubectl_with},
    wait::wait_until,
};

/// How long a worker may take to install itself and serve: its start-up writes the CRDs,
/// webhooks and APIServices through a debug embedded cluster, which on a 2-core machine running
/// the suite's other tests beside it has taken past [`DEADLINE`].
const READY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(90);

/// A running worker; killed on drop.
pub struct WorkerProcess {
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
    /// The gateway kubeconfig the worker was started with.
    cluster_kubeconfig: PathBuf,
}

impl WorkerProcess {
    /// Starts `worker` with `--kubeconfig` of `gw`'s cluster on a free loopback port, with
    /// `args` and `env`, and waits until `/readyz` answers ok (its install is complete).
    pub fn start(gw: &GatewayProcess, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_on(gw, dir, free_port(), args, env)
    }

    pub fn start_on(
        gw: &GatewayProcess,
        dir: &Path,
        port: u16,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        Self::start_as(gw, &gw.kubeconfig(), dir, port, args, env)
    }

    /// [`WorkerProcess::start_on`] with the worker's own credentials in `kubeconfig` (a
    /// ServiceAccount's token, say) rather than the cluster admin's; kubectl against the worker
    /// still presents the admin's token.
    pub fn start_as(
        gw: &GatewayProcess,
        kubeconfig: &Path,
        dir: &Path,
        port: u16,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        std::fs::create_dir_all(dir).expect("worker directory");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("worker.log"))
            .expect("worker log");
        let child = crate::operator()
            .args([
                "worker",
                &format!("--kubeconfig={}", kubeconfig.display()),
                "--bind-address=127.0.0.1",
                &format!("--secure-port={port}"),
            ])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting worker");
        let mut w = WorkerProcess {
            child: Some(child),
            port,
            dir: dir.to_owned(),
            cluster_kubeconfig: gw.kubeconfig(),
        };
        w.wait_ready(gw);
        w
    }

    fn wait_ready(&mut self, gw: &GatewayProcess) {
        wait_until("the worker to be ready", READY_DEADLINE, || {
            if let Some(status) = self.child.as_mut()?.try_wait().ok().flatten() {
                panic!("the worker exited ({status}):\n{}", self.log());
            }
            // The kubeconfig needs the CA the worker stored; it appears with the install.
            let ca = gw.kubectl(&[
                "get",
                "secret",
                "-n",
                "gpustack-system",
                "gpustack-operator-worker-serving",
                "-o",
                "jsonpath={.data.ca\\.crt}",
            ]);
            if !ca.status.success() || ca.stdout.is_empty() {
                return None;
            }
            self.write_kubeconfig(&String::from_utf8_lossy(&ca.stdout));
            let out = self.kubectl(&["get", "--raw", "/readyz"]);
            (out.status.success() && out.stdout == b"ok").then_some(())
        });
    }

    /// A kubeconfig `dir/NAME.kubeconfig` for the worker's endpoint with `token`.
    pub fn kubeconfig_with_token(&self, name: &str, token: &str) -> PathBuf {
        let ca = std::fs::read_to_string(self.dir.join("ca.b64")).expect("CA written at start");
        let path = self.dir.join(format!("{name}.kubeconfig"));
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: worker\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority-data: {ca}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: worker\n  context: {{cluster: worker, user: u}}\ncurrent-context: worker\n",
            self.port
        );
        std::fs::write(&path, text).expect("writing the worker kubeconfig");
        path
    }

    fn write_kubeconfig(&self, ca_b64: &str) {
        std::fs::write(self.dir.join("ca.b64"), ca_b64.trim()).expect("writing the CA");
        // The default identity: the cluster's admin token (what `--disable-auths` ignores and
        // delegated authentication accepts).
        let token = admin_token(&self.cluster_kubeconfig);
        let _ = self.kubeconfig_with_token("worker", &token);
    }

    /// The kubeconfig kubectl uses against the worker (the cluster admin's token).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("worker.kubeconfig")
    }

    pub fn kubectl_command(&self, args: &[&str]) -> Command {
        let flags = vec![
            format!("--kubeconfig={}", self.kubeconfig().display()),
            format!("--cache-dir={}", self.dir.join("kube-cache").display()),
        ];
        kubectl_with(&flags, args)
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_command(args)
            .output()
            .expect("running kubectl")
    }

    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl (worker) {args:?} failed: {}\nworker log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn kubectl_err(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            !out.status.success(),
            "kubectl (worker) {args:?} should have failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("worker.log")).unwrap_or_default()
    }

    /// The gateway kubeconfig the worker runs against.
    pub fn cluster_kubeconfig(&self) -> &Path {
        &self.cluster_kubeconfig
    }

    /// SIGTERM, then waits for the exit.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        wait_until("the worker to exit", DEADLINE, || {
            child.try_wait().expect("waiting for the worker")
        })
    }
}

/// How long [`eventually`] waits.
pub const EVENTUALLY: std::time::Duration = std::time::Duration::from_secs(60);

/// Polls `check` (with [`crate::wait::poll`]) until it gives a value, failing after
/// [`EVENTUALLY`] with the last observation and the worker's log.
pub async fn eventually<T, F, Fut>(what: &str, worker: &WorkerProcess, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let last = std::cell::RefCell::new(String::new());
    let got = crate::wait::poll(EVENTUALLY, || {
        let attempt = check();
        let last = &last;
        async move { attempt.await.map_err(|seen| *last.borrow_mut() = seen).ok() }
    })
    .await;
    got.unwrap_or_else(|| {
        panic!(
            "timed out waiting for {what}; last seen: {}\nworker log:\n{}",
            last.borrow(),
            worker.log()
        )
    })
}

/// The LocalQueue name the worker gives the queue of ClusterQueue `name`, computed here
/// independently of the worker (`gpustack-fnv64-` and the FNV-1a 64 of the name, in hex).
pub fn local_queue_name(name: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("gpustack-fnv64-{h:016x}")
}

/// The bearer token of an embedded cluster's admin kubeconfig.
pub fn admin_token(kubeconfig: &Path) -> String {
    let text = std::fs::read_to_string(kubeconfig).expect("reading the cluster kubeconfig");
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("kubeconfig YAML");
    doc["users"][0]["user"]["token"]
        .as_str()
        .expect("the admin kubeconfig carries a token")
        .to_owned()
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
