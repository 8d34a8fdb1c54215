//! Misbehaving peers at the hub (issue 35's bad input): a cluster whose clock is an hour ahead,
//! one that answers 500 to every list, one that answers a list with a 50 MB object and one
//! whose watch sends a 50 MB event, all mirrored by one hub (the real `worker-gateway`) beside
//! a well-behaved embedded cluster. The hub shows each bad peer `Degraded` with the reason,
//! keeps serving and following the good cluster (its mirror and the fleet view), and its
//! resident memory stays within
//! [`GROWTH_BOUND_KB`] of where it started while the 50 MB answers are sent again and again (a
//! watchdog samples `/proc/PID/status` and kills the hub past the bound).
//!
//! Each bad peer is a stand-in HTTPS server in this process speaking as much of the Kubernetes
//! API as the hub's mirror uses (`/version`, discovery of the Devices kind, its CRD, list and
//! watch of Devices): it stands in for a cluster's API server gone wrong in one way. Its clock
//! skew is an offset on what it says (its `Date` header and its objects' timestamps), as a
//! server whose system clock is wrong says it.

use std::{
    convert::Infallible,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use base64::Engine;
use futures::StreamExt;
use gpustack_serving::certs::{Names, generate};
use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess, free_port},
    hub::{add_device, http_over_unix, upstream, upstream_status as worker},
    wait::{poll_until, wait_until},
    watchdog::{Watchdog, rss_kb},
};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::{
    body::{Bytes, Frame},
    service::service_fn,
};
use hyper_util::rt::TokioIo;
use jiff::{SignedDuration, Timestamp};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use serde_json::{Value, json};

/// The most the hub's resident memory may grow under the attack: one answer is read to at most
/// 16 MiB (the mirror's bound on a response, `gateway/src/mirror/bounded.rs`), and kube's
/// client copies what it read at most three times (chunks, one buffer, its text) before it
/// fails; the rest is slack for the good cluster's work meanwhile.
const GROWTH_BOUND_KB: u64 = 64 * 1024;
/// The oversized object.
const HUGE_BYTES: usize = 50 * 1000 * 1000;
/// The whole test's time limit.
const LIMIT: Duration = Duration::from_secs(150);

type Body = BoxBody<Bytes, Infallible>;

/// How a stand-in peer misbehaves.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// Its clock is an hour ahead.
    Skewed,
    /// 500 to every list.
    Failing,
    /// A list answered with one object of [`HUGE_BYTES`].
    Huge,
    /// A list of nothing, then a watch event of an object of [`HUGE_BYTES`].
    HugeEvent,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::Skewed => "skewed",
            Fault::Failing => "failing",
            Fault::Huge => "huge",
            Fault::HugeEvent => "huge-event",
        }
    }

    /// What its clock reads off the true one.
    fn clock(self) -> SignedDuration {
        match self {
            Fault::Skewed => SignedDuration::from_hours(1),
            _ => SignedDuration::ZERO,
        }
    }
}

/// What a peer counts: the misbehaving answers asked for (lists; watches of the huge event),
/// and the most bytes of one the hub took.
#[derive(Default)]
struct Counts {
    asked: AtomicU64,
    sent_most: AtomicU64,
}

/// A stand-in peer on 127.0.0.1.
struct Peer {
    fault: Fault,
    port: u16,
    ca_pem: String,
    acceptor: tokio_rustls::TlsAcceptor,
    counts: Arc<Counts>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

fn json_response(code: u16, clock: SignedDuration, body: &Value) -> hyper::Response<Body> {
    respond(
        code,
        clock,
        Full::new(Bytes::from(body.to_string())).boxed(),
    )
}

fn respond(code: u16, clock: SignedDuration, body: Body) -> hyper::Response<Body> {
    let date = jiff::fmt::rfc2822::DateTimePrinter::new()
        .timestamp_to_rfc9110_string(&(Timestamp::now() + clock))
        .expect("an HTTP date");
    hyper::Response::builder()
        .status(code)
        .header("Content-Type", "application/json")
        .header("Date", date)
        .body(body)
        .expect("a response")
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code})
}

/// The Devices CRD the project installs, as JSON.
fn devices_crd() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/crds/devices.worker.gpustack.ai.yaml");
    let text = std::fs::read_to_string(&path).expect("the Devices CRD");
    serde_yaml_ng::from_str(&text).expect("the Devices CRD's YAML")
}

/// The start of a Devices object whose annotation holds [`HUGE_BYTES`]; [`HUGE_OBJECT_END`]
/// closes it.
const HUGE_OBJECT: &str = r#"{"apiVersion":"worker.gpustack.ai/v1alpha1","kind":"Devices","metadata":{"name":"huge","uid":"00000000-0000-0000-0000-00000000000h","resourceVersion":"7","annotations":{"filler":""#;
const HUGE_OBJECT_END: &str = r#""}},"spec":{}}"#;

/// A list of Devices whose one item is the huge object.
fn huge_list(counts: Arc<Counts>) -> Body {
    let prefix = format!(
        r#"{{"apiVersion":"worker.gpustack.ai/v1alpha1","kind":"DevicesList","metadata":{{"resourceVersion":"7"}},"items":[{HUGE_OBJECT}"#
    );
    huge_body(prefix, format!("{HUGE_OBJECT_END}]}}"), counts)
}

/// A watch whose one event adds the huge object (then nothing more).
fn huge_event(counts: Arc<Counts>) -> Body {
    let prefix = format!(r#"{{"type":"ADDED","object":{HUGE_OBJECT}"#);
    huge_body(prefix, format!("{HUGE_OBJECT_END}}}\n"), counts)
}

/// `prefix`, [`HUGE_BYTES`] of filler, `suffix`, streamed a MiB at a time as the hub reads it;
/// `counts` keeps the most of one the hub took.
fn huge_body(prefix: String, suffix: String, counts: Arc<Counts>) -> Body {
    let chunk = Bytes::from(vec![b'A'; 1 << 20]);
    let chunks = HUGE_BYTES / chunk.len();
    let parts = std::iter::once(Bytes::from(prefix))
        .chain(std::iter::repeat_n(chunk, chunks))
        .chain(std::iter::once(Bytes::from(suffix)));
    let mut sent = 0u64;
    let stream = futures::stream::iter(parts).map(move |b| {
        sent += b.len() as u64;
        counts.sent_most.fetch_max(sent, Ordering::Relaxed);
        Ok::<_, Infallible>(Frame::data(b))
    });
    BodyExt::boxed(StreamBody::new(stream))
}

/// One device of the peer, stamped with its clock.
fn device(fault: Fault) -> Value {
    let created = (Timestamp::now() + fault.clock()).to_string();
    json!({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices",
        "metadata": {"name": format!("{}-1", fault.name()), "uid": format!("00000000-0000-0000-0000-{:012}", fault as u8),
            "resourceVersion": "5", "creationTimestamp": created}, "spec": {}})
}

/// The peer's answer to `request`.
fn answer(
    fault: Fault,
    counts: &Arc<Counts>,
    request: &hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<Body> {
    let clock = fault.clock();
    let path = request.uri().path();
    let watch = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    match path {
        "/version" => json_response(
            200,
            clock,
            &json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0", "platform": "linux/amd64"}),
        ),
        "/apis/worker.gpustack.ai/v1alpha1" => json_response(
            200,
            clock,
            &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "worker.gpustack.ai/v1alpha1",
                "resources": [{"name": "devices", "singularName": "devices", "namespaced": false, "kind": "Devices",
                    "verbs": ["get", "list", "watch"]}]}),
        ),
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/devices.worker.gpustack.ai" => {
            json_response(200, clock, &devices_crd())
        }
        "/apis/worker.gpustack.ai/v1alpha1/devices" if watch && fault == Fault::HugeEvent => {
            counts.asked.fetch_add(1, Ordering::Relaxed);
            respond(200, clock, huge_event(counts.clone()))
        }
        "/apis/worker.gpustack.ai/v1alpha1/devices" if watch => {
            // A watch with nothing to say, held open until the hub lets go.
            let quiet = futures::stream::pending::<Result<Frame<Bytes>, Infallible>>();
            respond(200, clock, BodyExt::boxed(StreamBody::new(quiet)))
        }
        "/apis/worker.gpustack.ai/v1alpha1/devices" => {
            counts.asked.fetch_add(1, Ordering::Relaxed);
            match fault {
                Fault::Skewed => json_response(
                    200,
                    clock,
                    &json!({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "DevicesList",
                        "metadata": {"resourceVersion": "5"}, "items": [device(fault)]}),
                ),
                Fault::Failing => json_response(
                    500,
                    clock,
                    &status(500, "InternalError", "etcdserver: request timed out"),
                ),
                Fault::Huge => respond(200, clock, huge_list(counts.clone())),
                Fault::HugeEvent => json_response(
                    200,
                    clock,
                    &json!({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "DevicesList",
                        "metadata": {"resourceVersion": "6"}, "items": []}),
                ),
            }
        }
        _ => json_response(
            404,
            clock,
            &status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
        ),
    }
}

impl Peer {
    /// Its certificates, for a free port; it serves once [`Peer::serve`] is called.
    fn new(fault: Fault) -> Peer {
        let g = generate(&Names {
            ca_common_name: "peer-ca",
            common_name: "localhost",
            subject_alt_names: &["localhost", "127.0.0.1"],
        })
        .expect("the peer's certificates");
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(g.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .expect("the peer's certificate");
        let key = PrivateKeyDer::from_pem_slice(g.key_pem.as_bytes()).expect("the peer's key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Peer {
            fault,
            port: free_port(),
            ca_pem: g.ca_pem,
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            counts: Arc::default(),
            task: None,
        }
    }

    /// Listens and answers every connection as its fault says.
    async fn serve(&mut self) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .expect("the peer's port");
        let (fault, acceptor, served) = (self.fault, self.acceptor.clone(), self.counts.clone());
        self.task = Some(tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, counts) = (acceptor.clone(), served.clone());
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = service_fn(move |request| {
                        let response = answer(fault, &counts, &request);
                        async move { Ok::<_, Infallible>(response) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        }));
    }

    /// A kubeconfig for it in `dir`.
    fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority-data: {ca}\nusers:\n- name: u\n  user:\n    token: stand-in\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n",
            self.port
        );
        let path = dir.join(format!("{}.kubeconfig", self.fault.name()));
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// Runs `f` on a blocking thread (the stand-in peers serve from this runtime meanwhile).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .expect("a blocking task")
}

/// Waits until `cluster` is `Degraded` with a reason saying `says`.
fn degraded_saying(hub: &GatewayProcess, cluster: &str, says: &str) -> Value {
    let mut last = Value::Null;
    let found = poll_until(DEADLINE * 2, || {
        last = worker(hub, cluster);
        let reason = last["lastError"].as_str().unwrap_or_default();
        (last["phase"] == "Degraded" && reason.contains(says)).then(|| last.clone())
    });
    found.unwrap_or_else(|| {
        panic!("{cluster} was never Degraded saying {says:?}; its status: {last}")
    })
}

/// The names of the Devices the hub serves at `path` (over its socket).
fn device_names(hub: &GatewayProcess, path: &str) -> Vec<String> {
    let (code, body) = http_over_unix(&hub.socket(), "GET", path, None).expect("a list");
    assert_eq!(code, 200, "{path}: {body}");
    let doc: Value = serde_json::from_str(&body).unwrap();
    let mut names: Vec<String> = doc["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_peers_are_degraded_with_reasons_while_the_rest_is_served_in_bounded_memory() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    let good = Arc::new(blocking(move || upstream(&root, "good", &["g-1", "g-2"])).await);
    // Every peer serves right away but the huge ones, which listen only once the hub's memory
    // before the attack is known (until then the hub retries them).
    let mut peers = [
        Peer::new(Fault::Skewed),
        Peer::new(Fault::Failing),
        Peer::new(Fault::Huge),
        Peer::new(Fault::HugeEvent),
    ];
    for p in &mut peers[..2] {
        p.serve().await;
    }
    let mut upstreams = format!(
        "- name: good\n  kubeconfig: {}\n",
        good.kubeconfig().display()
    );
    for p in &peers {
        upstreams.push_str(&format!(
            "- name: {}\n  kubeconfig: {}\n",
            p.fault.name(),
            p.kubeconfig(dir.path()).display()
        ));
    }
    let file = dir.path().join("upstreams.yaml");
    std::fs::write(&file, upstreams).unwrap();
    let flag = format!("--upstreams={}", file.display());
    let root = dir.path().to_owned();
    let hub = Arc::new(
        blocking(move || {
            GatewayProcess::start_with(
                &root.join("hub"),
                "good",
                free_port(),
                &[&flag, "--worker-conn-mode=loopback"],
            )
        })
        .await,
    );
    let pid = hub.pid().expect("the hub's pid");
    let watchdog = Watchdog::on(pid, GROWTH_BOUND_KB);
    for p in &mut peers[2..] {
        p.serve().await;
    }

    let (h, g) = (hub.clone(), good.clone());
    let statuses = blocking(move || {
        let statuses = [
            degraded_saying(&h, "skewed", "clock is 1h ahead of the hub's"),
            degraded_saying(&h, "failing", "etcdserver: request timed out"),
            degraded_saying(&h, "huge", "a response of more than 16777216 bytes"),
            degraded_saying(&h, "huge-event", "a watch event of more than 3145728 bytes"),
        ];
        // The rest is served, and followed: the good cluster is Ready, its mirror answers,
        // and a change made now reaches the hub.
        wait_until("good to be Ready", DEADLINE, || {
            (worker(&h, "good")["phase"] == "Ready").then_some(())
        });
        add_device(&g, "g-3");
        wait_until("g-3 at the hub", DEADLINE, || {
            let path = "/clusters/good/apis/worker.gpustack.ai/v1alpha1/devices";
            (device_names(&h, path) == ["g-1", "g-2", "g-3"]).then_some(())
        });
        // The fleet view serves the good cluster's Devices and the skewed one's (only its
        // clock is wrong), and nothing of the huge answer.
        let path = "/clusters/_fleet/apis/worker.gpustack.ai/v1alpha1/devices";
        let names = wait_until("the fleet view's Devices", DEADLINE, || {
            let names = device_names(&h, path);
            let want = ["g-1", "g-2", "g-3", "skewed-1"];
            want.iter()
                .all(|w| names.iter().any(|n| n.ends_with(w)))
                .then_some(names)
        });
        assert!(!names.iter().any(|n| n.contains("huge")), "{names:?}");
        statuses
    })
    .await;
    for s in &statuses {
        eprintln!("{}: {} ({})", s["cluster"], s["phase"], s["lastError"]);
    }

    // The attack goes on: each 50 MB answer is asked for again and again (with backoff),
    // and the hub never takes all of one.
    let mut said = Vec::new();
    for huge in &peers[2..] {
        let counts = huge.counts.clone();
        let again = blocking(move || {
            poll_until(DEADLINE * 2, || {
                (counts.asked.load(Ordering::Relaxed) >= 3).then_some(())
            })
        })
        .await;
        let asked = huge.counts.asked.load(Ordering::Relaxed);
        let name = huge.fault.name();
        assert!(again.is_some(), "{name} was asked {asked} times");
        let sent_most = huge.counts.sent_most.load(Ordering::Relaxed);
        assert!(
            sent_most < HUGE_BYTES as u64,
            "{name}: the hub took {sent_most} bytes of one {HUGE_BYTES}-byte answer"
        );
        said.push(format!(
            "{name} asked {asked} times, at most {} MiB of one answer sent",
            sent_most >> 20
        ));
    }
    let peak = watchdog.peak_kb();
    let growth = watchdog.growth_kb();
    eprintln!(
        "hub VmRSS: {} MiB before the huge peers answered, {} MiB at most (growth {} MiB, bound {} MiB); {}; {:?}",
        watchdog.baseline / 1024,
        peak / 1024,
        growth / 1024,
        GROWTH_BOUND_KB / 1024,
        said.join("; "),
        started.elapsed()
    );
    assert!(
        rss_kb(pid).is_some(),
        "the hub is gone: the watchdog killed it past {GROWTH_BOUND_KB} KiB"
    );
    assert!(growth < GROWTH_BOUND_KB, "grew {growth} KiB");
    assert!(started.elapsed() < LIMIT, "took {:?}", started.elapsed());
}
