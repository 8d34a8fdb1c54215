//! An HTTPS admission webhook server standing in for the worker's admission webhooks (which are
//! not built yet): AdmissionReview v1 over rustls, with its own generated CA. Shared by the
//! gateway's component tests and the kubectl end-to-end test (included by `#[path]`).
//!
//! - `/mutate` allows, with a JSONPatch adding the label `admitted: "yes"`;
//! - `/validate` refuses objects (or, on DELETE, old objects) labelled `deny: "true"`, with
//!   [`DENIAL`], and warns [`WARNING`] otherwise;
//! - any other path allows.
//!
//! Every review received is recorded, and every connection accepted counted.

#![allow(dead_code)]

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::{body::Bytes, service::service_fn};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};

pub const DENIAL: &str = "objects labelled deny=true are refused";
pub const WARNING: &str = "checked by the stand-in webhook";

pub struct WebhookServer {
    pub addr: SocketAddr,
    /// The CA that signed the server's certificate, PEM.
    pub ca_pem: String,
    /// The reviews received, with the path each came to.
    pub reviews: Arc<Mutex<Vec<(String, Value)>>>,
    /// TCP connections accepted so far.
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WebhookServer {
    /// The `caBundle` of webhooks served here.
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// How many connections the server has accepted.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// `https://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// The requests of the reviews received at `path`.
    pub fn requests(&self, path: &str) -> Vec<Value> {
        self.reviews
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, r)| r["request"].clone())
            .collect()
    }

    /// Serves on 127.0.0.1 (an ephemeral port) with a certificate for `127.0.0.1`, `localhost`
    /// and `hooks.default.svc` (the name a Service `hooks` in `default` is called by).
    pub async fn start() -> WebhookServer {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (ca_pem, cert, key) = serving_certificate(&["localhost", "hooks.default.svc"]);
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let reviews: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let recorded = reviews.clone();
        let connections = Arc::new(AtomicUsize::new(0));
        let accepted = connections.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                accepted.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                let recorded = recorded.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let recorded = recorded.clone();
                        async move {
                            let path = req.uri().path().to_owned();
                            let body = req.into_body().collect().await?.to_bytes();
                            let review: Value = serde_json::from_slice(&body).unwrap_or_default();
                            recorded
                                .lock()
                                .unwrap()
                                .push((path.clone(), review.clone()));
                            let answer = respond(&path, &review);
                            Ok::<_, hyper::Error>(
                                hyper::Response::builder()
                                    .header("content-type", "application/json")
                                    .body(Full::new(Bytes::from(answer.to_string())))
                                    .unwrap(),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        WebhookServer {
            addr,
            ca_pem,
            reviews,
            connections,
            task,
        }
    }
}

/// A new CA and a serving certificate it signs for `names` and 127.0.0.1: the CA (PEM), the
/// certificate and its key.
pub fn serving_certificate(
    names: &[&str],
) -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let mut leaf =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    leaf.subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    let leaf_key = KeyPair::generate().unwrap();
    let leaf_cert = leaf
        .signed_by(&leaf_key, &Issuer::from_params(&ca, &ca_key))
        .unwrap();
    (
        ca_cert.pem(),
        CertificateDer::from(leaf_cert.der().to_vec()),
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
    )
}

fn respond(path: &str, review: &Value) -> Value {
    let request = &review["request"];
    let mut response = json!({"uid": request["uid"], "allowed": true});
    match path {
        "/mutate" => {
            let has_labels = request
                .pointer("/object/metadata/labels")
                .is_some_and(Value::is_object);
            let patch = if has_labels {
                json!([{"op": "add", "path": "/metadata/labels/admitted", "value": "yes"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"admitted": "yes"}}])
            };
            response["patchType"] = json!("JSONPatch");
            response["patch"] =
                json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
        }
        "/validate" => {
            let subject = if request["operation"] == "DELETE" {
                &request["oldObject"]
            } else {
                &request["object"]
            };
            if subject.pointer("/metadata/labels/deny") == Some(&json!("true")) {
                response["allowed"] = json!(false);
                response["status"] = json!({"code": 403, "reason": "Forbidden", "message": DENIAL});
            } else {
                response["warnings"] = json!([WARNING]);
            }
        }
        _ => {}
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// A webhook configuration of `kind` (`Mutating…` or `Validating…`) named `name` with one
/// webhook `hook` for ConfigMaps (all operations) served by `client_config`.
pub fn configuration(
    kind: &str,
    name: &str,
    hook: &str,
    client_config: Value,
    extra: Value,
) -> Value {
    let mut webhook = json!({
        "name": hook,
        "clientConfig": client_config,
        "rules": [{
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["configmaps"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
        }],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    });
    if let (Some(w), Some(e)) = (webhook.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            w.insert(k.clone(), v.clone());
        }
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [webhook],
    })
}
