//! End to end: API aggregation, authentication and authorization of the real
//! `worker-gateway --embedded-cluster` process, driven by the real `kubectl` and kube-rs.
//!
//! The extension API server behind the APIService is [`Backend`], a small HTTPS server written
//! here: it stands in for the worker's aggregated API (being written separately). It trusts
//! what the cluster's `kube-system/extension-apiserver-authentication` ConfigMap says (the
//! front-proxy CA, the allowed client name), as the worker will, and echoes the identity it
//! was handed in `X-Remote-*` headers.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use base64::Engine;
use futures::{StreamExt, TryStreamExt};
use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess, assert_refused, free_port},
    wait::wait_until,
};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::{body::Bytes, service::service_fn};
use hyper_util::rt::TokioIo;
use kube::{
    Api, Client,
    api::{DynamicObject, WatchEvent, WatchParams},
    config::{KubeConfigOptions, Kubeconfig},
    core::{ApiResource, GroupVersionKind},
};
use rustls::pki_types::{CertificateDer, pem::PemObject};
use serde_json::{Value, json};

// The stand-in webhook server's certificate helper.
#[path = "../../apiserver/tests/support/webhook.rs"]
mod webhook;

const GROUP: &str = "stand-in.gpustack.ai";
const APISERVICE: &str = "v1.stand-in.gpustack.ai";

type Body = BoxBody<Bytes, std::convert::Infallible>;

/// What the backend saw of each request: X-Remote-User, X-Remote-Group values, and whether an
/// Authorization header reached it.
#[derive(Clone, Debug)]
struct Seen {
    user: String,
    groups: Vec<String>,
    authorization: bool,
}

/// The stand-in for the worker's aggregated API (see the module doc): serves
/// `/apis/stand-in.gpustack.ai/v1` (one kind, `widgets`), lists of widgets that echo the
/// caller's identity in annotations, and watches that send one ADDED event at once and then
/// stay open. Client certificates must chain to the front-proxy CA and be the allowed name.
struct Backend {
    ca_pem: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
    connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Backend {
    /// Serves on `port` with a certificate for `worker.default.svc`, trusting `front_proxy_ca`
    /// for client certificates named one of `allowed_names`.
    async fn start(port: u16, front_proxy_ca: &str, allowed_names: Vec<String>) -> Backend {
        let (ca_pem, cert, key) = webhook::serving_certificate(&["worker.default.svc"]);
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(front_proxy_ca.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![cert], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (recorded, conns) = (seen.clone(), connections.clone());
        let allowed = Arc::new(allowed_names);
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, recorded, allowed) =
                    (acceptor.clone(), recorded.clone(), allowed.clone());
                let conn = tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    // The client certificate chained to the front-proxy CA (the verifier saw to
                    // it); its subject must also be an allowed name (its CN, found in the DER).
                    let named = tls.get_ref().1.peer_certificates().is_some_and(|certs| {
                        allowed
                            .iter()
                            .any(|n| certs[0].windows(n.len()).any(|w| w == n.as_bytes()))
                    });
                    if !named {
                        return;
                    }
                    let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let recorded = recorded.clone();
                        async move { Ok::<_, hyper::Error>(answer(req, &recorded)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
                conns.lock().unwrap().push(conn.abort_handle());
            }
        });
        Backend {
            ca_pem,
            seen,
            task,
            connections,
        }
    }

    /// Stops listening and drops every connection (open watches included).
    fn stop(&self) {
        self.task.abort();
        for c in self.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn widget(name: &str, user: &str, groups: &str) -> Value {
    json!({"apiVersion": "stand-in.gpustack.ai/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "1",
            "annotations": {"seen-user": user, "seen-groups": groups}}})
}

fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    recorded: &Mutex<Vec<Seen>>,
) -> hyper::Response<Body> {
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or_default().to_owned();
    let all = |n: &str| -> Vec<String> {
        req.headers()
            .get_all(n)
            .iter()
            .map(|v| v.to_str().unwrap_or_default().to_owned())
            .collect()
    };
    let user = all("x-remote-user").join(",");
    let groups = all("x-remote-group");
    recorded.lock().unwrap().push(Seen {
        user: user.clone(),
        groups: groups.clone(),
        authorization: req.headers().contains_key("authorization"),
    });
    let json_body = |code: u16, v: Value| {
        hyper::Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(v.to_string())).boxed())
            .unwrap()
    };
    let item = widget("w1", &user, &groups.join(","));
    match path.as_str() {
        "/apis/stand-in.gpustack.ai/v1" => json_body(
            200,
            json!({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "stand-in.gpustack.ai/v1",
            "resources": [{"name": "widgets", "singularName": "widget", "namespaced": true,
                "kind": "Widget", "verbs": ["get", "list", "watch"], "shortNames": ["wd"]}]}),
        ),
        "/openapi/v3/apis/stand-in.gpustack.ai/v1" => json_body(
            200,
            json!({
            "openapi": "3.0.0", "info": {"title": "stand-in", "version": "v1"}, "paths": {},
            "components": {"schemas": {"ai.gpustack.stand-in.v1.Widget": {"type": "object"}}}}),
        ),
        "/apis/stand-in.gpustack.ai/v1/namespaces/default/widgets"
        | "/apis/stand-in.gpustack.ai/v1/widgets"
            if query.contains("watch=true") || query.contains("watch=1") =>
        {
            // One event now, then nothing more until the client goes: the event must reach the
            // client while the response is still open.
            let (tx, rx) = tokio::sync::mpsc::channel::<
                Result<hyper::body::Frame<Bytes>, std::convert::Infallible>,
            >(4);
            let event = json!({"type": "ADDED", "object": item}).to_string() + "\n";
            tokio::spawn(async move {
                let _ = tx
                    .send(Ok(hyper::body::Frame::data(Bytes::from(event))))
                    .await;
                tx.closed().await;
            });
            hyper::Response::builder()
                .header("content-type", "application/json")
                .body(BodyExt::boxed(StreamBody::new(
                    tokio_stream::wrappers::ReceiverStream::new(rx),
                )))
                .unwrap()
        }
        "/apis/stand-in.gpustack.ai/v1/namespaces/default/widgets"
        | "/apis/stand-in.gpustack.ai/v1/widgets" => json_body(
            200,
            json!({"apiVersion": "stand-in.gpustack.ai/v1", "kind": "WidgetList",
                "metadata": {"resourceVersion": "1"}, "items": [item]}),
        ),
        _ => json_body(
            404,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "NotFound", "code": 404, "message": "not found"}),
        ),
    }
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn apply(gw: &GatewayProcess, dir: &std::path::Path, name: &str, obj: &Value) {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, obj.to_string()).unwrap();
    gw.kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);
}

/// The `Available` condition of the APIService: (status, reason, message).
fn available(gw: &GatewayProcess) -> Option<(String, String, String)> {
    let out = gw.kubectl(&["get", "apiservice", APISERVICE, "-o", "json"]);
    let obj: Value = serde_json::from_slice(&out.stdout).ok()?;
    let c = obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")?
        .clone();
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    Some((s("status"), s("reason"), s("message")))
}

async fn client_of(gw: &GatewayProcess) -> Client {
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(gw.kubeconfig()).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    Client::try_from(config).unwrap()
}

fn start_gateway(dir: &std::path::Path, name: &str, extra: &[&str]) -> GatewayProcess {
    let data = dir.join(name);
    let cluster = format!("--embedded-cluster={name}");
    let mut args = vec![cluster.as_str(), "--apiservice-check-interval=200ms"];
    args.extend_from_slice(extra);
    GatewayProcess::start_with(&data, name, free_port(), &args)
}

#[test]
fn an_apiservice_is_discovered_proxied_and_checked() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // One watch per token: proxied watches count too.
    let gw = start_gateway(dir.path(), "demo", &["--max-watches-per-token=1"]);

    // The cluster publishes what an extension API server needs to trust it.
    let cm = json_of(&gw.kubectl_ok(&[
        "get",
        "configmap",
        "-n",
        "kube-system",
        "extension-apiserver-authentication",
        "-o",
        "json",
    ]));
    let data = &cm["data"];
    assert_eq!(
        data["requestheader-allowed-names"],
        r#"["front-proxy-client"]"#
    );
    assert_eq!(
        data["requestheader-username-headers"],
        r#"["X-Remote-User"]"#
    );
    assert_eq!(data["requestheader-group-headers"], r#"["X-Remote-Group"]"#);
    assert_eq!(
        data["requestheader-extra-headers-prefix"],
        r#"["X-Remote-Extra-"]"#
    );
    let kubeconfig = std::fs::read_to_string(gw.kubeconfig()).unwrap();
    let client_ca = data["client-ca-file"].as_str().unwrap();
    assert!(kubeconfig.contains(&base64::engine::general_purpose::STANDARD.encode(client_ca)));
    let front_proxy_ca = data["requestheader-client-ca-file"]
        .as_str()
        .unwrap()
        .to_owned();
    let allowed: Vec<String> =
        serde_json::from_str(data["requestheader-allowed-names"].as_str().unwrap()).unwrap();

    let port = free_port();
    let backend = runtime.block_on(Backend::start(port, &front_proxy_ca, allowed.clone()));
    // No kube-proxy: the Service names the backend's loopback address and port.
    apply(
        &gw,
        dir.path(),
        "svc",
        &json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "worker", "namespace": "default"},
        "spec": {"clusterIP": "127.0.0.1", "ports": [{"port": port}]}}),
    );
    apply(
        &gw,
        dir.path(),
        "apiservice",
        &json!({"apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService", "metadata": {"name": APISERVICE},
        "spec": {"group": GROUP, "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 100,
            "service": {"namespace": "default", "name": "worker", "port": port},
            "caBundle": base64::engine::general_purpose::STANDARD.encode(&backend.ca_pem)}}),
    );

    let up = wait_until("the APIService to be Available", DEADLINE, || {
        available(&gw).filter(|c| c.0 == "True")
    });
    assert_eq!(up.1, "Passed");
    // Discovery: kubectl finds the backend's kind (aggregated discovery), and the legacy
    // documents list the group.
    let resources = wait_until("kubectl api-resources to list widgets", DEADLINE, || {
        let out = gw.kubectl_ok(&["api-resources", &format!("--api-group={GROUP}")]);
        out.contains("widgets").then_some(out)
    });
    assert!(
        resources.contains("wd") && resources.contains("Widget"),
        "{resources}"
    );
    let groups = json_of(&gw.kubectl_ok(&["get", "--raw", "/apis"]));
    let ours = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == GROUP)
        .unwrap();
    assert_eq!(
        ours["preferredVersion"]["groupVersion"],
        "stand-in.gpustack.ai/v1"
    );
    let group = json_of(&gw.kubectl_ok(&["get", "--raw", &format!("/apis/{GROUP}")]));
    assert_eq!(group["versions"][0]["version"], "v1");
    // /apis/GROUP/VERSION itself comes from the backend.
    let list = json_of(&gw.kubectl_ok(&["get", "--raw", &format!("/apis/{GROUP}/v1")]));
    assert_eq!(list["resources"][0]["name"], "widgets");

    // OpenAPI v3: the root names the group and version, and its document is the backend's.
    let root = json_of(&gw.kubectl_ok(&["get", "--raw", "/openapi/v3"]));
    let url = root["paths"][format!("apis/{GROUP}/v1")]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_owned();
    let doc = json_of(&gw.kubectl_ok(&["get", "--raw", &url]));
    assert!(
        doc["components"]["schemas"]["ai.gpustack.stand-in.v1.Widget"].is_object(),
        "{doc}"
    );

    // A list through the proxy, with the caller's identity and without its token.
    let out = json_of(&gw.kubectl_ok(&["get", "widgets", "-n", "default", "-o", "json"]));
    let annotations = &out["items"][0]["metadata"]["annotations"];
    assert_eq!(annotations["seen-user"], "admin");
    assert_eq!(
        annotations["seen-groups"],
        "system:masters,system:authenticated"
    );
    assert!(
        backend.seen().iter().all(|s| !s.authorization),
        "{:?}",
        backend.seen()
    );

    runtime.block_on(async {
        let client = client_of(&gw).await;
        // A forged identity is dropped: the backend sees the authenticated one only.
        let req = http::Request::get(format!("/apis/{GROUP}/v1/namespaces/default/widgets"))
            .header("X-Remote-User", "forged")
            .header("X-Remote-Group", "forged-group")
            .body(Vec::new())
            .unwrap();
        let list: Value = client.request(req).await.unwrap();
        assert_eq!(
            list["items"][0]["metadata"]["annotations"]["seen-user"],
            "admin"
        );
        // (The availability check's requests come as system:kube-aggregator in system:masters.)
        let seen = backend.seen();
        let checks: Vec<&Seen> = seen
            .iter()
            .filter(|s| s.user == "system:kube-aggregator")
            .collect();
        assert!(
            !checks.is_empty(),
            "the availability check reached the backend as system:kube-aggregator: {seen:?}"
        );
        assert!(
            checks.iter().all(|s| s.groups == ["system:masters"]),
            "{seen:?}"
        );
        let last = seen
            .iter()
            .rev()
            .find(|s| s.user != "system:kube-aggregator")
            .cloned()
            .unwrap();
        assert_eq!(last.user, "admin");
        assert!(
            !last.groups.contains(&"forged-group".to_owned()),
            "{last:?}"
        );

        // A watch streams through as the backend sends it (the response stays open).
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(GROUP, "v1", "Widget"),
            "widgets",
        );
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
        let mut events = api
            .watch(&WatchParams::default().timeout(60), "0")
            .await
            .unwrap()
            .boxed();
        let first = tokio::time::timeout(Duration::from_secs(20), events.try_next())
            .await
            .expect("the watch event came through while the stream was open")
            .unwrap()
            .unwrap();
        match first {
            WatchEvent::Added(w) => assert_eq!(w.metadata.name.as_deref(), Some("w1")),
            other => panic!("unexpected event {other:?}"),
        }
        // The token's one watch is open: another is refused (429; asked with kubectl, which
        // does not retry it as kube-rs does), until this one ends.
        let flags = gw.kubectl_flags();
        let path = format!("/apis/{GROUP}/v1/namespaces/default/widgets?watch=true");
        let refused = tokio::task::spawn_blocking(move || {
            gpustack_tests::embedded::kubectl_with(&flags, &["get", "--raw", &path])
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("too many open watches"), "{stderr}");
        drop(events);
        let mut again = api
            .watch(&WatchParams::default().timeout(60), "0")
            .await
            .unwrap()
            .boxed();
        let event = tokio::time::timeout(Duration::from_secs(20), again.try_next()).await;
        assert!(
            matches!(event, Ok(Ok(Some(WatchEvent::Added(_))))),
            "{event:?}"
        );
    });

    // A ServiceAccount is authorized before anything is forwarded, and the backend sees it.
    gw.kubectl_ok(&["create", "serviceaccount", "reader", "-n", "default"]);
    let token = gw.kubectl_ok(&["create", "token", "reader", "-n", "default"]);
    let token = format!("--token={}", token.trim());
    let denied = gw.kubectl(&[&token, "get", "widgets", "-n", "default", "-v=6"]);
    assert_refused(&denied, 403, "the reader before its binding");
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(stderr.contains(
        "widgets.stand-in.gpustack.ai is forbidden: User \"system:serviceaccount:default:reader\" cannot list resource \"widgets\" in API group \"stand-in.gpustack.ai\" in the namespace \"default\""
    ), "{stderr}");
    apply(
        &gw,
        dir.path(),
        "widget-reader",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole", "metadata": {"name": "widget-reader"},
        "rules": [{"apiGroups": [GROUP], "resources": ["widgets"], "verbs": ["list"]}]}),
    );
    apply(
        &gw,
        dir.path(),
        "reader-binding",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding", "metadata": {"name": "reader", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "widget-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}]}),
    );
    let listed = wait_until("the reader to list widgets", DEADLINE, || {
        let out = gw.kubectl(&[&token, "get", "widgets", "-n", "default", "-o", "json"]);
        out.status
            .success()
            .then(|| json_of(&String::from_utf8_lossy(&out.stdout)))
    });
    let annotations = &listed["items"][0]["metadata"]["annotations"];
    assert_eq!(
        annotations["seen-user"],
        "system:serviceaccount:default:reader"
    );
    assert_eq!(
        annotations["seen-groups"],
        "system:serviceaccounts,system:serviceaccounts:default,system:authenticated"
    );

    // A backend that accepts connections and never answers holds up only its own requests.
    let slow = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let slow_port = slow.local_addr().unwrap().port();
    let held: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
    let holder = held.clone();
    std::thread::spawn(move || {
        for conn in slow.incoming() {
            match conn {
                Ok(c) => holder.lock().unwrap().push(c),
                Err(_) => return,
            }
        }
    });
    apply(
        &gw,
        dir.path(),
        "slow-svc",
        &json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "slow", "namespace": "default"},
        "spec": {"clusterIP": "127.0.0.1", "ports": [{"port": slow_port}]}}),
    );
    apply(
        &gw,
        dir.path(),
        "slow-apiservice",
        &json!({"apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService", "metadata": {"name": "v1.slow.gpustack.ai"},
        "spec": {"group": "slow.gpustack.ai", "version": "v1", "groupPriorityMinimum": 100,
            "versionPriority": 100, "insecureSkipTLSVerify": true,
            "service": {"namespace": "default", "name": "slow", "port": slow_port}}}),
    );
    let flags = gw.kubectl_flags();
    let stuck = std::thread::spawn(move || {
        gpustack_tests::embedded::kubectl_with(
            &flags,
            &["get", "--raw", "/apis/slow.gpustack.ai/v1/things", "-v=6"],
        )
        .output()
        .unwrap()
    });
    let before = held.lock().unwrap().len();
    wait_until("the slow backend to hold a request", DEADLINE, || {
        (held.lock().unwrap().len() > before).then_some(())
    });
    let started = std::time::Instant::now();
    gw.kubectl_ok(&[
        "get",
        "--raw",
        &format!("/apis/{GROUP}/v1/namespaces/default/widgets"),
    ]);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let stuck = stuck.join().unwrap();
    assert_refused(&stuck, 503, "the request held by the silent backend");
    gw.kubectl_ok(&["delete", "apiservice", "v1.slow.gpustack.ai"]);

    // The backend goes away: requests answer 503 naming the APIService, and the check marks
    // it unavailable.
    backend.stop();
    drop(backend);
    let err = gw.kubectl_err(&["get", "widgets", "-n", "default"]);
    assert!(err.contains(APISERVICE), "{err}");
    let raw = gw.kubectl(&[
        "get",
        "--raw",
        &format!("/apis/{GROUP}/v1/namespaces/default/widgets"),
        "-v=6",
    ]);
    assert_refused(&raw, 503, "the backend is gone");
    let down = wait_until("the APIService to be unavailable", DEADLINE, || {
        available(&gw).filter(|c| c.0 == "False")
    });
    assert_eq!(down.1, "FailedDiscoveryCheck", "{down:?}");

    // Back on the same port: available again, and served.
    let backend = runtime.block_on(Backend::start(port, &front_proxy_ca, allowed));
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&backend.ca_pem);
    gw.kubectl_ok(&[
        "patch",
        "apiservice",
        APISERVICE,
        "--type=merge",
        "-p",
        &json!({"spec": {"caBundle": ca_bundle}}).to_string(),
    ]);
    wait_until("the APIService to be Available again", DEADLINE, || {
        available(&gw).filter(|c| c.0 == "True")
    });
    gw.kubectl_ok(&["get", "widgets", "-n", "default"]);

    // Without its Service the APIService says so.
    gw.kubectl_ok(&["delete", "service", "worker", "-n", "default"]);
    let gone = wait_until("the APIService to miss its Service", DEADLINE, || {
        available(&gw).filter(|c| c.1 == "ServiceNotFound")
    });
    assert_eq!(gone.0, "False");
    drop(backend);
    gw.stop();
}

/// `kubectl` with `--token=TOKEN` against `gw` (its kubeconfig's server and CA).
fn kubectl_as(gw: &GatewayProcess, token: &str, args: &[&str]) -> std::process::Output {
    let flag = format!("--token={token}");
    let mut all = vec![flag.as_str()];
    all.extend_from_slice(args);
    gw.kubectl(&all)
}

fn create(gw: &GatewayProcess, dir: &std::path::Path, name: &str, obj: &Value) -> Value {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, obj.to_string()).unwrap();
    json_of(&gw.kubectl_ok(&["create", "-f", file.to_str().unwrap(), "-o", "json"]))
}

#[test]
fn service_account_tokens_are_authenticated_and_authorized_with_rbac() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let a = start_gateway(dir.path(), "alpha", &[]);
    let b = start_gateway(dir.path(), "beta", &[]);
    for gw in [&a, &b] {
        gw.kubectl_ok(&["create", "serviceaccount", "bot", "-n", "default"]);
    }

    // TokenRequest (JSON, as kube-rs sends it) and `kubectl create token` (protobuf).
    let token = runtime.block_on(async {
        let client = client_of(&a).await;
        let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600}});
        let req = http::Request::post("/api/v1/namespaces/default/serviceaccounts/bot/token")
            .header("content-type", "application/json")
            .body(body.to_string().into_bytes())
            .unwrap();
        let answer: Value = client.request(req).await.unwrap();
        assert_eq!(answer["spec"]["expirationSeconds"], 3600);
        assert!(answer["status"]["expirationTimestamp"].is_string());
        answer["status"]["token"].as_str().unwrap().to_owned()
    });
    // kubectl sends its TokenRequest as protobuf: the duration is read from it.
    let short = json_of(&a.kubectl_ok(&[
        "create",
        "token",
        "bot",
        "-n",
        "default",
        "--duration=20m",
        "-o",
        "json",
    ]));
    assert_eq!(short["spec"]["expirationSeconds"], 1200, "{short}");
    let second = a.kubectl_ok(&["create", "token", "bot", "-n", "default"]);
    let second = second.trim();
    assert!(!second.is_empty() && second != token);
    let user = "system:serviceaccount:default:bot";
    // The token is never stored in clear.
    let db = std::fs::read(dir.path().join("alpha/gateway.db")).unwrap();
    assert!(!db.windows(token.len()).any(|w| w == token.as_bytes()));

    // Who am I: the ServiceAccount, in its groups.
    let whoami = json_of(&String::from_utf8_lossy(
        &kubectl_as(&a, second, &["auth", "whoami", "-o", "json"]).stdout,
    ));
    assert_eq!(whoami["status"]["userInfo"]["username"], user);
    assert_eq!(
        whoami["status"]["userInfo"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    // The admin is in system:masters.
    let admin = json_of(&a.kubectl_ok(&["auth", "whoami", "-o", "json"]));
    assert!(
        admin["status"]["userInfo"]["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("system:masters"))
    );

    // TokenReview answers for the token; SubjectAccessReview for the account.
    let review = create(
        &a,
        dir.path(),
        "tr",
        &json!({"apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview", "spec": {"token": token}}),
    );
    assert_eq!(review["status"]["authenticated"], true, "{review}");
    assert_eq!(review["status"]["user"]["username"], user);
    let bogus = create(
        &a,
        dir.path(),
        "tr2",
        &json!({"apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview", "spec": {"token": "not-a-token"}}),
    );
    assert_eq!(bogus["status"]["authenticated"], false);
    let sar = |name: &str, ns: &str| {
        create(
            &a,
            dir.path(),
            name,
            &json!({"apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview", "spec": {"user": user,
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "resourceAttributes": {"namespace": ns, "verb": "list", "resource": "pods"}}}),
        )
    };
    assert_eq!(sar("sar1", "default")["status"]["allowed"], false);

    // Without a binding: 403 in kube-apiserver's words, and can-i says no.
    let out = kubectl_as(&a, &token, &["get", "pods", "-n", "default", "-v=6"]);
    assert_refused(&out, 403, "listing pods without a binding");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!(
        "pods is forbidden: User \"{user}\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    )), "{stderr}");
    let can = kubectl_as(
        &a,
        &token,
        &["auth", "can-i", "list", "pods", "-n", "default"],
    );
    assert_eq!(String::from_utf8_lossy(&can.stdout).trim(), "no");
    // Discovery is open to every authenticated user.
    assert!(
        kubectl_as(&a, &token, &["get", "--raw", "/apis"])
            .status
            .success()
    );

    // The default `view` role aggregates its parts, as on any cluster.
    wait_until(
        "the default view ClusterRole to get its rules",
        DEADLINE,
        || {
            let role = json_of(&a.kubectl_ok(&["get", "clusterrole", "view", "-o", "json"]));
            role["rules"]
                .as_array()?
                .iter()
                .any(|r| {
                    r["resources"]
                        .as_array()
                        .is_some_and(|rs| rs.contains(&json!("pods")))
                })
                .then_some(())
        },
    );

    // An aggregated ClusterRole gets the rules of those it selects; a RoleBinding to it lets
    // the account list pods in its namespace, and nowhere else.
    create(
        &a,
        dir.path(),
        "agg",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole", "metadata": {"name": "pod-reader"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"aggregate-to-pod-reader": "true"}}]},
        "rules": []}),
    );
    create(
        &a,
        dir.path(),
        "part",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole", "metadata": {"name": "pod-reader-part",
            "labels": {"aggregate-to-pod-reader": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}),
    );
    wait_until(
        "the aggregated ClusterRole to get its rules",
        DEADLINE,
        || {
            let role = json_of(&a.kubectl_ok(&["get", "clusterrole", "pod-reader", "-o", "json"]));
            (role["rules"][0]["resources"] == json!(["pods"])).then_some(())
        },
    );
    create(
        &a,
        dir.path(),
        "rb",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding", "metadata": {"name": "bot-reads-pods", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "default"}]}),
    );
    wait_until("the binding to take effect", DEADLINE, || {
        kubectl_as(&a, &token, &["get", "pods", "-n", "default"])
            .status
            .success()
            .then_some(())
    });
    let can = kubectl_as(
        &a,
        second,
        &["auth", "can-i", "list", "pods", "-n", "default"],
    );
    assert_eq!(String::from_utf8_lossy(&can.stdout).trim(), "yes");
    assert_eq!(sar("sar2", "default")["status"]["allowed"], true);
    // What the account may do, as `kubectl auth can-i --list` asks (SelfSubjectRulesReview).
    let rules = kubectl_as(&a, &token, &["auth", "can-i", "--list", "-n", "default"]);
    let listed = String::from_utf8_lossy(&rules.stdout);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("pods ") && l.contains("[get list watch]")),
        "{listed}"
    );
    assert!(
        listed.contains("selfsubjectaccessreviews.authorization.k8s.io"),
        "{listed}"
    );
    let elsewhere = kubectl_as(&a, &token, &["get", "pods", "-n", "kube-system", "-v=6"]);
    assert_refused(&elsewhere, 403, "pods outside the RoleBinding's namespace");
    assert!(String::from_utf8_lossy(&elsewhere.stderr).contains("forbidden"));
    assert_refused(
        &kubectl_as(
            &a,
            &token,
            &["create", "configmap", "x", "-n", "default", "-v=6"],
        ),
        403,
        "a verb the role does not grant",
    );

    // Bound as an extension API server is (system:auth-delegator, and the reader of
    // kube-system/extension-apiserver-authentication), the account delegates to the cluster:
    // it reviews tokens and access, and reads whom to trust.
    assert_refused(
        &kubectl_as(
            &a,
            &token,
            &[
                "create",
                "-f",
                dir.path().join("tr.json").to_str().unwrap(),
                "-v=6",
            ],
        ),
        403,
        "a TokenReview before system:auth-delegator",
    );
    create(
        &a,
        dir.path(),
        "delegator",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding", "metadata": {"name": "bot-auth-delegator"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "default"}]}),
    );
    create(
        &a,
        dir.path(),
        "reader",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding", "metadata": {"name": "bot-auth-reader", "namespace": "kube-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "default"}]}),
    );
    let reviewed = wait_until("the account to review tokens", DEADLINE, || {
        let out = kubectl_as(
            &a,
            &token,
            &[
                "create",
                "-f",
                dir.path().join("tr.json").to_str().unwrap(),
                "-o",
                "json",
            ],
        );
        out.status
            .success()
            .then(|| json_of(&String::from_utf8_lossy(&out.stdout)))
    });
    assert_eq!(reviewed["status"]["user"]["username"], user);
    assert!(
        kubectl_as(
            &a,
            &token,
            &[
                "create",
                "-f",
                dir.path().join("sar1.json").to_str().unwrap()
            ]
        )
        .status
        .success()
    );
    let cm = kubectl_as(
        &a,
        &token,
        &[
            "get",
            "configmap",
            "-n",
            "kube-system",
            "extension-apiserver-authentication",
        ],
    );
    assert!(
        cm.status.success(),
        "{}",
        String::from_utf8_lossy(&cm.stderr)
    );
    let others = kubectl_as(
        &a,
        &token,
        &["get", "configmaps", "-n", "kube-system", "-v=6"],
    );
    assert_refused(&others, 403, "ConfigMaps other than the one the Role names");

    // A token for another audience is not for the cluster's API, but TokenReview answers it for
    // that audience.
    let other = json_of(&a.kubectl_ok(&[
        "create",
        "token",
        "bot",
        "-n",
        "default",
        "--audience=worker.example",
        "-o",
        "json",
    ]));
    let other_token = other["status"]["token"].as_str().unwrap();
    let refused = kubectl_as(&a, other_token, &["get", "--raw", "/api", "-v=6"]);
    assert_refused(&refused, 401, "a token for another audience");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Unauthorized"));
    let review = create(
        &a,
        dir.path(),
        "tr-aud",
        &json!({"apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview", "spec": {"token": other_token, "audiences": ["worker.example"]}}),
    );
    assert_eq!(review["status"]["authenticated"], true, "{review}");
    assert_eq!(review["status"]["audiences"], json!(["worker.example"]));

    // A token of one cluster is refused by another (401), even for a same-named account.
    let other = kubectl_as(&b, &token, &["get", "--raw", "/api", "-v=6"]);
    assert_refused(&other, 401, "a token of another cluster");
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert!(stderr.contains("Unauthorized"), "{stderr}");
    let review = create(
        &b,
        dir.path(),
        "tr3",
        &json!({"apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview", "spec": {"token": token}}),
    );
    assert_eq!(review["status"]["authenticated"], false);
    // And a deleted account's tokens prove nothing.
    a.kubectl_ok(&["delete", "serviceaccount", "bot", "-n", "default"]);
    let gone = kubectl_as(&a, &token, &["get", "--raw", "/api", "-v=6"]);
    assert_refused(&gone, 401, "a deleted account's token");
    assert!(String::from_utf8_lossy(&gone.stderr).contains("Unauthorized"));
    a.stop();
    b.stop();
}
