//! Helpers for end-to-end tests of embedded clusters: a free port, the real `worker-gateway`
//! process (waited for with [`crate::wait`]), and a `kubectl` runner bound to its kubeconfig.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Output, Stdio},
    time::Duration,
};

use crate::wait::wait_until;

/// How long a gateway may take to come up, or a condition to hold.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Writes `text` to `dir/name` (a manifest for `kubectl -f`) and returns the path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writing a manifest");
    path.to_str().expect("a UTF-8 path").to_owned()
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("binding an ephemeral port");
    l.local_addr().expect("local address").port()
}

/// The kubectl to run: `$KUBECTL` or `kubectl` on the PATH.
pub fn kubectl_binary() -> PathBuf {
    std::env::var_os("KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("kubectl"))
}

/// A kubectl command with `flags` (see [`GatewayProcess::kubectl_flags`]) and `args`, ignoring
/// the developer's `KUBECONFIG`.
pub fn kubectl_with(flags: &[String], args: &[&str]) -> Command {
    let mut cmd = Command::new(kubectl_binary());
    cmd.args(flags).args(args).env_remove("KUBECONFIG");
    cmd
}

/// Runs `cmd` (a `kubectl get -w`, say) with its standard output read line by line on a thread;
/// the child (to stop) and its lines as they come.
pub fn stream_lines(mut cmd: Command) -> (Child, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader};
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting the command");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// Writes to `path` a copy of `kubeconfig` whose user presents `token` instead.
pub fn with_token(kubeconfig: &Path, token: &str, path: &Path) {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let mut doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    doc["users"][0]["user"]["token"] = serde_yaml_ng::Value::String(token.to_owned());
    std::fs::write(path, serde_yaml_ng::to_string(&doc).unwrap()).unwrap();
}

/// A TLS client configuration trusting only the CA a gateway generated under `data_dir`
/// (`tls/ca.crt`), for raw HTTPS clients.
pub fn trusting_gateway_ca(data_dir: &Path) -> rustls::ClientConfig {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(data_dir.join("tls/ca.crt")).expect("the CA file") {
        roots
            .add(cert.expect("a CA certificate"))
            .expect("a usable CA");
    }
    rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth()
}

/// kubectl with `kubeconfig` and its own discovery cache `cache`.
pub fn kubectl_as(kubeconfig: &Path, cache: &Path, args: &[&str]) -> Output {
    kubectl_with(
        &[
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--cache-dir={}", cache.display()),
        ],
        args,
    )
    .output()
    .unwrap()
}

/// The HTTP status of the last response a kubectl run with `-v=6` logged (its
/// `round_trippers` line: `GET <url> 403 Forbidden in 3 milliseconds`, or the structured
/// `status="403 Forbidden"` of newer releases), so that a refusal is asserted by its exact
/// status rather than by kubectl's failing at all.
pub fn kubectl_status(out: &Output) -> Option<u16> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    stderr
        .lines()
        .rev()
        .filter(|l| l.contains("round_trippers"))
        .find_map(|l| {
            if let Some(at) = l.find("status=\"") {
                return l[at + 8..].get(..3)?.parse().ok();
            }
            let mut words = l.split("] ").nth(1)?.split_whitespace();
            let (_verb, _url) = (words.next()?, words.next()?);
            words.next()?.parse().ok()
        })
}

/// Asserts that kubectl (run with `-v=6`) failed and that the last response was `status`.
pub fn assert_refused(out: &Output, status: u16, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    // What kubectl printed beside its `-v=6` log (klog lines start with a level letter and the
    // date, `I1206 …`).
    let refusal = stderr
        .lines()
        .filter(|l| l.starts_with("Error") || l.starts_with("error"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!out.status.success(), "{what}: kubectl succeeded");
    assert_eq!(
        kubectl_status(out),
        Some(status),
        "{what}: want HTTP {status}; kubectl said: {refusal}"
    );
}

/// How many ports [`GatewayProcess::start`] tries before a taken one fails the test.
const PORT_TRIES: usize = 3;

/// What the gateway logs when its port is taken.
const PORT_TAKEN: &str = "Address already in use";

/// A gateway that exited before it was ready, with its log.
#[derive(Debug)]
struct EarlyExit {
    status: ExitStatus,
    log: String,
}

impl std::fmt::Display for EarlyExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (status, log) = (self.status, &self.log);
        write!(
            f,
            "the gateway exited ({status}) before it was ready:\n{log}"
        )
    }
}

/// A `worker-gateway --embedded-cluster=NAME` process on 127.0.0.1 and a free port.
pub struct GatewayProcess {
    child: Option<Child>,
    pub cluster: String,
    pub data_dir: PathBuf,
    pub port: u16,
    /// kubectl's discovery cache, private to this gateway.
    pub cache_dir: PathBuf,
    socket: PathBuf,
}

impl GatewayProcess {
    /// Starts the gateway and waits until kubectl reaches `/readyz` with the written kubeconfig.
    pub fn start(data_dir: &Path, cluster: &str) -> Self {
        Self::start_with_env(data_dir, cluster, &[])
    }

    /// Starts a gateway on `port` serving what `args` say (`--embedded-cluster`, `--upstreams`,
    /// ...); `cluster` names the (embedded or mirrored) cluster whose kubeconfig kubectl uses.
    pub fn start_with(data_dir: &Path, cluster: &str, port: u16, args: &[&str]) -> Self {
        Self::start_with_socket(
            data_dir,
            cluster,
            port,
            &data_dir.with_extension("sock"),
            args,
        )
    }

    /// Starts the gateway without waiting for it (see [`GatewayProcess::start_with_socket`]).
    pub fn spawn(data_dir: &Path, cluster: &str, port: u16, socket: &Path, args: &[&str]) -> Self {
        Self::spawn_with_env(data_dir, cluster, port, socket, args, &[])
    }

    /// [`GatewayProcess::start`] with `env` set for the process (what [`crate::operator`]
    /// clears, `OTEL_*` say).
    pub fn start_with_env(data_dir: &Path, cluster: &str, env: &[(&str, &str)]) -> Self {
        let serve = format!("--embedded-cluster={cluster}");
        let socket = data_dir.with_extension("sock");
        // `free_port` lets its port go before the gateway binds it, and a test running beside
        // this one may bind it first: then the gateway exits at once, and another port is tried.
        for _ in 1..PORT_TRIES {
            let logged = std::fs::metadata(data_dir.with_extension("log")).map_or(0, |m| m.len());
            let gw = Self::spawn_with_env(data_dir, cluster, free_port(), &socket, &[&serve], env);
            match gw.try_wait_ready() {
                Ok(gw) => return gw,
                // Only this try's lines: the log file is appended to.
                Err(exit)
                    if exit
                        .log
                        .get(logged as usize..)
                        .is_some_and(|l| l.contains(PORT_TAKEN)) =>
                {
                    continue;
                }
                Err(exit) => panic!("{exit}"),
            }
        }
        let gw = Self::spawn_with_env(data_dir, cluster, free_port(), &socket, &[&serve], env);
        gw.wait_ready()
    }

    /// [`GatewayProcess::spawn`] with `env` set for the process.
    pub fn spawn_with_env(
        data_dir: &Path,
        cluster: &str,
        port: u16,
        socket: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data_dir.with_extension("log"))
            .expect("gateway log file");
        let child = crate::operator()
            .args([
                "worker-gateway",
                &format!("--data-dir={}", data_dir.display()),
                "--bind-address=127.0.0.1",
                &format!("--secure-port={port}"),
                &format!("--bind-unix-path={}", socket.display()),
            ])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting worker-gateway");
        GatewayProcess {
            child: Some(child),
            cluster: cluster.to_owned(),
            data_dir: data_dir.to_owned(),
            port,
            cache_dir: data_dir.with_extension("kube-cache"),
            socket: socket.to_owned(),
        }
    }

    /// [`GatewayProcess::start_with`], serving plain HTTP on the unix socket `socket`.
    pub fn start_with_socket(
        data_dir: &Path,
        cluster: &str,
        port: u16,
        socket: &Path,
        args: &[&str],
    ) -> Self {
        Self::spawn(data_dir, cluster, port, socket, args).wait_ready()
    }

    /// Waits until the spawned gateway wrote its kubeconfig and answers `/readyz`.
    fn wait_ready(self) -> Self {
        self.try_wait_ready()
            .unwrap_or_else(|exit| panic!("{exit}"))
    }

    /// [`GatewayProcess::wait_ready`], answering how the gateway exited if it did first.
    fn try_wait_ready(mut self) -> Result<Self, EarlyExit> {
        let port = self.port;
        let gw = &mut self;
        // A gateway that exits (a taken port, a bad flag) fails the wait at once, with its log.
        let kubeconfig = gw.kubeconfig();
        let exited = wait_until(
            &format!("{} to exist", kubeconfig.display()),
            DEADLINE,
            || {
                if kubeconfig.exists() {
                    return Some(None);
                }
                let child = gw.child.as_mut()?;
                child.try_wait().ok().flatten().map(Some)
            },
        );
        if let Some(status) = exited {
            let log = std::fs::read_to_string(gw.log_path()).unwrap_or_default();
            return Err(EarlyExit { status, log });
        }
        wait_until("the gateway to be ready", DEADLINE, || {
            let out = gw.kubectl(&["get", "--raw", "/readyz"]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let kubeconfig = std::fs::read_to_string(gw.kubeconfig()).unwrap_or_default();
            (out.status.success() && text == "ok" && kubeconfig.contains(&format!(":{port}")))
                .then_some(())
        });
        Ok(self)
    }

    /// The plain-HTTP unix socket it serves on.
    pub fn socket(&self) -> PathBuf {
        self.socket.clone()
    }

    /// The file its standard error (the log) goes to.
    pub fn log_path(&self) -> PathBuf {
        self.data_dir.with_extension("log")
    }

    /// The process id, while the process is owned.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.data_dir.join(format!("{}.kubeconfig", self.cluster))
    }

    /// A kubectl command bound to this gateway's kubeconfig and a private cache.
    pub fn kubectl_command(&self, args: &[&str]) -> Command {
        kubectl_with(&self.kubectl_flags(), args)
    }

    /// The flags that bind kubectl to this gateway (for commands run from other threads).
    pub fn kubectl_flags(&self) -> Vec<String> {
        vec![
            format!("--kubeconfig={}", self.kubeconfig().display()),
            format!("--cache-dir={}", self.cache_dir.display()),
        ]
    }

    /// Runs kubectl to completion.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_command(args)
            .output()
            .expect("running kubectl (is it installed?)")
    }

    /// Runs kubectl, requires success, returns standard output.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl get ARGS -o json`, required to succeed, parsed.
    pub fn get_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl_ok(&all)).expect("kubectl prints JSON")
    }

    /// Runs kubectl, requires failure, returns standard error.
    pub fn kubectl_err(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} should have failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn signal(&self, sig: &str) {
        if let Some(child) = &self.child {
            let status = Command::new("kill")
                .args([sig, &child.id().to_string()])
                .status()
                .expect("running kill");
            assert!(status.success(), "kill {sig} failed");
        }
    }

    /// Freezes the process (SIGSTOP): it keeps its sockets but answers nothing.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Lets a frozen process run again (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn stop(mut self) -> ExitStatus {
        self.signal("-TERM");
        self.wait_exit()
    }

    /// Kills the process with SIGKILL (a crash) and waits for it.
    pub fn crash(mut self) -> ExitStatus {
        self.signal("-KILL");
        self.wait_exit()
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("process still owned");
        wait_until("the gateway to exit", DEADLINE, || {
            child.try_wait().expect("waiting for the gateway")
        })
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A kube client with the credentials of `kubeconfig` (an embedded cluster's admin one, say).
pub async fn kube_client(kubeconfig: &Path) -> kube::Client {
    let kubeconfig =
        kube::config::Kubeconfig::read_from(kubeconfig).expect("reading the kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a client configuration from the kubeconfig");
    kube::Client::try_from(config).expect("a kube client")
}
