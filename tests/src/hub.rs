//! Helpers for end-to-end tests of the hub (`worker-gateway` mirroring upstreams): a gateway
//! process that may start with nothing to serve, plain HTTP/1.1 over its unix socket, and a
//! stand-in for the GPUStack server's per-cluster Kubernetes proxy.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    os::unix::net::UnixStream,
    path::{Path, PathBuf},
    process::ExitStatus,
    sync::{Arc, Mutex},
};

use crate::{
    embedded::{DEADLINE, GatewayProcess, free_port},
    wait::wait_until,
};

/// The CRD manifests generated from the API types.
pub fn crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds")
}

/// An upstream: an embedded cluster in its own gateway process under `root`, with the worker
/// CRDs installed and one Devices object per name in `devices`.
pub fn upstream(root: &Path, cluster: &str, devices: &[&str]) -> GatewayProcess {
    upstream_with(root, cluster, devices, &[])
}

/// [`upstream`], its gateway started with `extra` flags.
pub fn upstream_with(
    root: &Path,
    cluster: &str,
    devices: &[&str],
    extra: &[&str],
) -> GatewayProcess {
    let gw = start_upstream(&root.join(cluster), cluster, free_port(), extra);
    gw.kubectl_ok(&["apply", "-f", crds_dir().to_str().expect("UTF-8 path")]);
    gw.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/devices.worker.gpustack.ai",
        "--timeout=20s",
    ]);
    for d in devices {
        add_device(&gw, d);
    }
    gw
}

/// The embedded cluster `cluster` on `port` with its data in `data`, with `extra` flags.
pub fn start_upstream(data: &Path, cluster: &str, port: u16, extra: &[&str]) -> GatewayProcess {
    let serve = format!("--embedded-cluster={cluster}");
    let mut args = vec![serve.as_str()];
    args.extend_from_slice(extra);
    GatewayProcess::start_with(data, cluster, port, &args)
}

/// Creates the Devices object `name` (labelled with its cluster of origin) in `gw`.
pub fn add_device(gw: &GatewayProcess, name: &str) {
    add_devices(gw, &[name]);
}

/// Creates a Devices object (labelled with its cluster of origin) in `gw` for each of `names`,
/// one after another in one `kubectl create`.
pub fn add_devices(gw: &GatewayProcess, names: &[&str]) {
    let Some(first) = names.first() else {
        return;
    };
    let manifests: String = names
        .iter()
        .map(|name| {
            format!(
                "---\napiVersion: worker.gpustack.ai/v1alpha1\nkind: Devices\nmetadata:\n  name: {name}\n  labels: {{cluster-of-origin: {}}}\nspec: {{}}\n",
                gw.cluster
            )
        })
        .collect();
    let file = gw.data_dir.with_extension(format!("{first}.yaml"));
    std::fs::write(&file, manifests).expect("writing a manifest");
    gw.kubectl_ok(&["create", "-f", file.to_str().expect("UTF-8 path")]);
}

/// The status entry of upstream `cluster` at the mirroring gateway `hub` (`GET /apis/workers`
/// over its unix socket, which sees every upstream), or null.
pub fn upstream_status(hub: &GatewayProcess, cluster: &str) -> serde_json::Value {
    let (code, body) = http_over_unix(&hub.socket(), "GET", "/apis/workers", None)
        .expect("/apis/workers over the socket");
    assert_eq!(code, 200, "{body}");
    let doc: serde_json::Value = serde_json::from_str(&body).expect("workers JSON");
    doc["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["cluster"] == cluster).cloned())
        .unwrap_or(serde_json::Value::Null)
}

/// Writes `<root>/upstreams.yaml` naming each of `upstreams` by its cluster and kubeconfig.
pub fn upstreams_file(root: &Path, upstreams: &[&GatewayProcess]) -> PathBuf {
    let text: String = upstreams
        .iter()
        .map(|u| {
            format!(
                "- name: {}\n  kubeconfig: {}\n",
                u.cluster,
                u.kubeconfig().display()
            )
        })
        .collect();
    let file = root.join("upstreams.yaml");
    std::fs::write(&file, text).expect("writing the upstreams file");
    file
}

/// A `worker-gateway` process serving plain HTTP on `<data-dir>.sock` and HTTPS on `port`,
/// which may start with nothing to serve (so there is no kubeconfig to wait for).
pub struct HubProcess {
    gw: GatewayProcess,
    pub data_dir: PathBuf,
    pub socket: PathBuf,
    pub port: u16,
}

impl HubProcess {
    /// Starts the gateway with `args` and waits until it answers `/readyz` on its socket.
    pub fn start(data_dir: &Path, port: u16, args: &[&str]) -> Self {
        let socket = data_dir.with_extension("sock");
        let gw = GatewayProcess::spawn(data_dir, "_admin", port, &socket, args);
        let hub = HubProcess {
            gw,
            data_dir: data_dir.to_owned(),
            socket,
            port,
        };
        wait_until("the hub to answer on its socket", DEADLINE, || {
            let (code, body) = hub.try_request("GET", "/readyz", None).ok()?;
            (code == 200 && body == "ok").then_some(())
        });
        hub
    }

    /// Its log (standard error).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.gw.log_path()).unwrap_or_default()
    }

    /// A request over the unix socket; panics if the socket cannot be reached.
    pub fn request(&self, method: &str, target: &str, json: Option<&str>) -> (u16, String) {
        self.try_request(method, target, json)
            .unwrap_or_else(|e| panic!("{method} {target} over {}: {e}", self.socket.display()))
    }

    pub fn try_request(
        &self,
        method: &str,
        target: &str,
        json: Option<&str>,
    ) -> std::io::Result<(u16, String)> {
        http_over_unix(&self.socket, method, target, json)
    }

    /// The status document of `GET /apis/workers`.
    pub fn workers(&self) -> serde_json::Value {
        let (code, body) = self.request("GET", "/apis/workers", None);
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).expect("workers JSON")
    }

    /// The status of upstream `cluster`, if tracked.
    pub fn worker(&self, cluster: &str) -> Option<serde_json::Value> {
        let doc = self.workers();
        doc["items"]
            .as_array()?
            .iter()
            .find(|w| w["cluster"] == cluster)
            .cloned()
    }

    /// Waits until upstream `cluster` is `phase`, returning its status.
    pub fn wait_phase(&self, cluster: &str, phase: &str) -> serde_json::Value {
        wait_until(&format!("{cluster} to be {phase}"), DEADLINE, || {
            self.worker(cluster).filter(|w| w["phase"] == phase)
        })
    }

    /// The names of the Devices it serves for `cluster` (read over the socket), sorted; none
    /// while the cluster is not served.
    pub fn mirrored(&self, cluster: &str) -> Vec<String> {
        let (code, body) = self.request(
            "GET",
            &format!("/clusters/{cluster}/apis/worker.gpustack.ai/v1alpha1/devices"),
            None,
        );
        if code != 200 {
            return Vec::new();
        }
        let list: serde_json::Value = serde_json::from_str(&body).expect("a list");
        let mut names: Vec<String> = list["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|o| o["metadata"]["name"].as_str().expect("a name").to_owned())
            .collect();
        names.sort();
        names
    }

    /// Waits until it serves exactly the Devices `expected` for `cluster`.
    pub fn wait_mirrored(&self, cluster: &str, expected: &[&str]) {
        wait_until(
            &format!("{cluster}'s mirror to hold {expected:?}"),
            DEADLINE,
            || (self.mirrored(cluster) == expected).then_some(()),
        );
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn stop(self) -> ExitStatus {
        self.gw.stop()
    }

    /// Kills the process with SIGKILL (a crash) and waits for it.
    pub fn crash(self) -> ExitStatus {
        self.gw.crash()
    }

    /// Freezes the process (SIGSTOP).
    pub fn freeze(&self) {
        self.gw.freeze();
    }

    /// Lets a frozen process run again (SIGCONT).
    pub fn thaw(&self) {
        self.gw.thaw();
    }
}

/// Stops `hub`, which mirrors `upstream`'s Devices gpu-a, gpu-b and gpu-c, changes the upstream
/// while the hub is down (creates gpu-d, deletes gpu-a), starts the hub again with `args`, and
/// checks that it caught up by resuming its Devices watch from the stored progress rather than
/// listing again. Returns the restarted hub.
pub fn restart_and_resume(hub: HubProcess, upstream: &GatewayProcess, args: &[&str]) -> HubProcess {
    let (data, port) = (hub.data_dir.clone(), hub.port);
    hub.stop();
    add_device(upstream, "gpu-d");
    upstream.kubectl_ok(&["delete", "devices", "gpu-a"]);
    let hub = HubProcess::start(&data, port, args);
    hub.wait_mirrored(&upstream.cluster, &["gpu-b", "gpu-c", "gpu-d"]);
    // The first run had no progress to resume from, so a resume is the second run's.
    let log = hub.log();
    assert!(
        log.contains("resumed the watch") && log.contains("Devices.worker.gpustack.ai"),
        "the restarted hub relisted instead of resuming:\n{log}"
    );
    hub
}

/// A watch (`target`, with `watch=1`) streamed from the unix socket `socket`: each event, with
/// the instant its bytes arrived, as it arrives (bookmarks left out), until the connection ends
/// (the server killed) or the watch times out (set `timeoutSeconds` under 150).
pub fn stream_watch(
    socket: PathBuf,
    target: String,
) -> std::sync::mpsc::Receiver<(std::time::Instant, serde_json::Value)> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut stream = UnixStream::connect(&socket).expect("the socket");
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(150)))
            .expect("a read timeout");
        write!(
            stream,
            "GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        .expect("the request");
        let (mut raw, mut body, mut buf) = (Vec::new(), Vec::new(), [0u8; 8192]);
        let mut head_done = false;
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            let arrived = std::time::Instant::now();
            raw.extend_from_slice(&buf[..n]);
            if !head_done {
                let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
                    continue;
                };
                raw.drain(..at + 4);
                head_done = true;
            }
            take_chunks(&mut raw, &mut body);
            while let Some(nl) = body.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = body.drain(..=nl).collect();
                let ev: serde_json::Value = serde_json::from_slice(&line).expect("a watch event");
                if ev["type"] != "BOOKMARK" && tx.send((arrived, ev)).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// One HTTP/1.1 request over a unix socket (`Connection: close`), returning the status code
/// and the body (de-chunked).
pub fn http_over_unix(
    socket: &Path,
    method: &str,
    target: &str,
    json: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(DEADLINE))?;
    let body = json.unwrap_or("");
    let content_type = if json.is_some() {
        "Content-Type: application/json\r\n"
    } else {
        ""
    };
    write!(
        stream,
        "{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{content_type}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Ok((
        code,
        if chunked {
            dechunk(rest)
        } else {
            rest.to_owned()
        },
    ))
}

fn dechunk(s: &str) -> String {
    let (mut raw, mut body) = (s.as_bytes().to_vec(), Vec::new());
    take_chunks(&mut raw, &mut body);
    String::from_utf8_lossy(&body).into_owned()
}

/// Moves the chunks of a chunked body that have fully arrived from `raw` to `body`; what stays
/// in `raw` is a chunk still arriving, or the last (empty) one.
fn take_chunks(raw: &mut Vec<u8>, body: &mut Vec<u8>) {
    while let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&raw[..eol]).unwrap_or("0").trim();
        let size = usize::from_str_radix(size, 16).unwrap_or(0);
        if size == 0 || raw.len() < eol + 2 + size + 2 {
            break;
        }
        body.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
        raw.drain(..eol + 2 + size + 2);
    }
}

/// Stands in for the GPUStack server's per-cluster Kubernetes proxy
/// (`http://localhost:PORT/v2/clusters/NAME/proxy/...`), which cannot run on a build machine:
/// it checks the bearer token given for NAME and forwards the request, path prefix removed and
/// without the token, to that cluster's embedded gateway over its unix socket, streaming the
/// answer back (watches included). One request per connection (`Connection: close`).
pub struct GpustackProxy {
    pub port: u16,
    /// Bearer tokens presented, per cluster (wrong ones included).
    pub seen: Arc<Mutex<HashMap<String, Vec<String>>>>,
}

impl GpustackProxy {
    /// Serves `clusters`: name → (unix socket of its gateway, the token it requires).
    pub fn start(clusters: HashMap<String, (PathBuf, String)>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let seen: Arc<Mutex<HashMap<String, Vec<String>>>> = Default::default();
        let clusters = Arc::new(clusters);
        let record = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let clusters = clusters.clone();
                let record = record.clone();
                std::thread::spawn(move || {
                    let _ = forward(conn, &clusters, &record);
                });
            }
        });
        GpustackProxy { port, seen }
    }
}

fn forward(
    client: TcpStream,
    clusters: &HashMap<String, (PathBuf, String)>,
    seen: &Mutex<HashMap<String, Vec<String>>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut headers = Vec::new();
    let mut token = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end().to_owned();
        if line.is_empty() {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("authorization: bearer ") {
            token = line[line.len() - v.len()..].trim().to_owned();
        } else if !lower.starts_with("connection:") && !lower.starts_with("authorization:") {
            headers.push(line);
        }
    }
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let routed = target
        .strip_prefix("/v2/clusters/")
        .and_then(|t| t.split_once("/proxy"))
        .and_then(|(name, rest)| clusters.get(name).map(|c| (name, rest, c)));
    let mut client_w = client;
    let Some((name, rest, (socket, expected))) = routed else {
        return client_w.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    };
    seen.lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(name.to_owned())
        .or_default()
        .push(token.clone());
    if token != *expected {
        let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401,"message":"Unauthorized"}"#;
        return write!(
            client_w,
            "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    }
    let path = if rest.is_empty() || rest.starts_with('?') {
        format!("/{rest}")
    } else {
        rest.to_owned()
    };
    let mut upstream = UnixStream::connect(socket)?;
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    for h in &headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("Connection: close\r\n\r\n");
    upstream.write_all(head.as_bytes())?;
    // Whatever of the body was already read, then the rest, as it comes.
    let buffered = reader.buffer().to_vec();
    upstream.write_all(&buffered)?;
    let mut body_in = reader.into_inner();
    let mut upstream_w = upstream.try_clone()?;
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut body_in, &mut upstream_w);
    });
    std::io::copy(&mut upstream, &mut client_w)?;
    client_w.shutdown(std::net::Shutdown::Both)
}
