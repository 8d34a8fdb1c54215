//! The kubelet stand-in's HTTPS side (it stands in for the kubelet's server on port 10250,
//! which cannot run here), over the Pods its [`crate::kubelet_pods::PodRunner`] runs:
//! - `GET /containerLogs/{namespace}/{pod}/{container}` with the kubelet's options (`follow`,
//!   `tailLines`, `sinceSeconds`, `sinceTime`, `timestamps`, `limitBytes`; [`crate::kubelet_logs`]),
//!   streamed as `text/plain` while following, ending when the container goes;
//! - `GET /stats/summary`: the kubelet's Summary document (`node`, `pods[]` with `podRef`,
//!   `containers[]` with `cpu`, `memory`, `logs`, and the Pod's `cpu`, `memory` and
//!   `ephemeral-storage`), measured from the container processes themselves (`/proc/<pid>`).
//!
//! Starting it publishes where it listens as the kubelet does: the Node's
//! `status.daemonEndpoints.kubeletEndpoint.Port` and an `InternalIP` of loopback. Like a kubelet
//! without `--client-ca-file`, it asks callers for no client certificate.

use std::{
    collections::HashMap,
    io::{Read, Seek, SeekFrom},
    path::PathBuf,
    time::Duration,
};

use axum::{
    Router,
    body::Body,
    extract::{Path, Query, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::{Value, json};

use crate::kubelet_logs::{LogOptions, floor_char};
use crate::kubelet_pods::{PodRunner, Pods, RunningPod};

/// How often a followed log is looked at for new lines.
const FOLLOW_PERIOD: Duration = Duration::from_millis(100);
/// Linux reports process CPU time in these ticks per second (`USER_HZ`, fixed by its ABI).
const TICKS_PER_SECOND: u64 = 100;

/// The HTTPS side of a kubelet stand-in, serving until dropped.
pub struct KubeletHttp {
    pub port: u16,
    /// The CA its serving certificate chains to.
    pub ca_pem: String,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Drop for KubeletHttp {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

#[derive(Clone)]
struct Served {
    node: String,
    pods: Pods,
}

impl KubeletHttp {
    /// Serves `runner`'s Pods on a loopback port and publishes it on its Node.
    pub async fn start(client: &kube::Client, runner: &PodRunner) -> Self {
        let names = gpustack_serving::certs::Names {
            ca_common_name: "kubelet-stand-in-ca",
            common_name: &runner.node,
            subject_alt_names: &["127.0.0.1", &runner.node],
        };
        let made = gpustack_serving::certs::generate(&names).expect("a serving certificate");
        let tls = gpustack_serving::certs::server_config(&made.cert_pem, &made.key_pem, None)
            .expect("a TLS configuration");
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let port = tcp.local_addr().expect("bound").port();
        let served = Served {
            node: runner.node.clone(),
            pods: runner.pods(),
        };
        let router = Router::new()
            .route(
                "/containerLogs/{namespace}/{pod}/{container}",
                get(container_logs),
            )
            .route("/stats/summary", get(summary))
            .with_state(served);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(gpustack_serving::serve::serve_tls(
            tcp, tls, router, stopped,
        ));
        // Where the kubelet is reached, as it reports itself on its Node.
        Api::<Node>::all(client.clone())
            .patch_status(
                &runner.node,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
                    "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                        {"type": "Hostname", "address": runner.node}]}})),
            )
            .await
            .expect("the Node's kubelet endpoint");
        KubeletHttp {
            port,
            ca_pem: made.ca_pem,
            stop,
        }
    }
}

fn plain(code: StatusCode, message: String) -> Response {
    (code, [(header::CONTENT_TYPE, "text/plain")], message).into_response()
}

/// What a followed log has still to send.
struct Following {
    pods: Pods,
    uid: String,
    log: PathBuf,
    offset: u64,
    /// A line not yet whole.
    partial: String,
    options: LogOptions,
    /// Bytes left under `limitBytes`.
    left: Option<usize>,
}

impl Following {
    /// The next lines written, once there are some; `None` once the container is gone (or the
    /// limit is reached).
    async fn next(mut self) -> Option<(Result<String, std::io::Error>, Self)> {
        loop {
            if self.left == Some(0) {
                return None;
            }
            let running = self.pods.runs(&self.uid);
            let mut grown = String::new();
            if let Ok(mut f) = std::fs::File::open(&self.log)
                && f.seek(SeekFrom::Start(self.offset)).is_ok()
            {
                let _ = f.read_to_string(&mut grown);
            }
            self.offset += grown.len() as u64;
            self.partial.push_str(&grown);
            let whole = self.partial.rfind('\n').map_or(0, |i| i + 1);
            let lines: String = self.partial.drain(..whole).collect();
            let mut out: String = lines
                .lines()
                .filter_map(|l| self.options.render(l))
                .collect();
            if let Some(left) = self.left.as_mut() {
                out.truncate(floor_char(&out, *left));
                *left -= out.len();
            }
            if !out.is_empty() {
                return Some((Ok(out), self));
            }
            if !running {
                return None;
            }
            tokio::time::sleep(FOLLOW_PERIOD).await;
        }
    }
}

async fn container_logs(
    State(s): State<Served>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let options = match LogOptions::parse(&query, jiff::Timestamp::now()) {
        Ok(o) => o,
        Err(e) => return plain(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let Some(found) = s
        .pods
        .running()
        .into_iter()
        .find(|p| p.namespace == namespace && p.name == pod)
    else {
        return plain(
            StatusCode::NOT_FOUND,
            format!("pod \"{namespace}/{pod}\" does not exist\n"),
        );
    };
    let Some(c) = found.containers.iter().find(|c| c.name == container) else {
        return plain(
            StatusCode::NOT_FOUND,
            format!("container \"{container}\" not found in pod \"{namespace}/{pod}\"\n"),
        );
    };
    let now = std::fs::read_to_string(&c.log).unwrap_or_default();
    let whole = now.rfind('\n').map_or(0, |i| i + 1);
    let first = options.select(&now[..whole]);
    if !options.follow {
        return plain(StatusCode::OK, first);
    }
    let following = Following {
        pods: s.pods.clone(),
        uid: found.uid.clone(),
        log: c.log.clone(),
        offset: whole as u64,
        partial: String::new(),
        left: options.limit_bytes.map(|l| l - first.len()),
        options,
    };
    let rest = futures::stream::unfold(following, Following::next);
    let stream = futures::StreamExt::chain(
        futures::stream::once(async move { Ok::<_, std::io::Error>(first) }),
        rest,
    );
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// A process's CPU time (nanoseconds) and resident memory (bytes), from `/proc`.
fn process_usage(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces) close with ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the state.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((ticks * 1_000_000_000 / TICKS_PER_SECOND, rss_kib * 1024))
}

fn time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// One Pod's entry of the Summary.
fn pod_stats(p: &RunningPod, now: jiff::Timestamp) -> Value {
    let elapsed = (now - p.started)
        .total(jiff::Unit::Nanosecond)
        .unwrap_or(0.0)
        .max(1.0);
    let (mut cpu_ns, mut nano_cores, mut memory, mut logs) = (0u64, 0u64, 0u64, 0u64);
    let containers: Vec<Value> = p
        .containers
        .iter()
        .map(|c| {
            let log_bytes = std::fs::metadata(&c.log).map_or(0, |m| m.len());
            logs += log_bytes;
            let mut entry = json!({"name": c.name, "startTime": time(p.started),
                "logs": {"time": time(now), "usedBytes": log_bytes}});
            // A process gone between listing and reading is not measured: left out, never 0.
            if let Some((ns, rss)) = process_usage(c.pid) {
                let cores = (ns as f64 / elapsed * 1e9) as u64;
                cpu_ns += ns;
                nano_cores += cores;
                memory += rss;
                entry["cpu"] = json!({"time": time(now), "usageNanoCores": cores,
                    "usageCoreNanoSeconds": ns});
                entry["memory"] = json!({"time": time(now), "usageBytes": rss,
                    "workingSetBytes": rss, "rssBytes": rss});
            }
            entry
        })
        .collect();
    json!({
        "podRef": {"name": p.name, "namespace": p.namespace, "uid": p.uid},
        "startTime": time(p.started),
        "containers": containers,
        "cpu": {"time": time(now), "usageNanoCores": nano_cores, "usageCoreNanoSeconds": cpu_ns},
        "memory": {"time": time(now), "usageBytes": memory, "workingSetBytes": memory,
            "rssBytes": memory},
        // The Pod's local storage: its containers' logs (they have no writable layer here).
        "ephemeral-storage": {"time": time(now), "usedBytes": logs},
    })
}

async fn summary(State(s): State<Served>) -> Response {
    let now = jiff::Timestamp::now();
    let pods: Vec<Value> = s.pods.running().iter().map(|p| pod_stats(p, now)).collect();
    let body = json!({
        "node": {"nodeName": s.node, "systemContainers": []},
        "pods": pods,
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}
