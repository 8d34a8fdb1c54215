//! Forwarding a request to an APIService's backend, as kube-aggregator does: HTTPS/1.1 over
//! rustls, the backend's certificate checked against `caBundle` for `NAME.NAMESPACE.svc` (or
//! not at all with `insecureSkipTLSVerify`), the cluster's front-proxy client certificate
//! presented, the caller's identity in `X-Remote-*` headers (whatever `X-Remote-*` and
//! `Authorization` the caller sent dropped), and the response streamed back as it arrives.

use std::{sync::Arc, time::Duration};

use axum::{
    body::{Body, Bytes},
    http::{HeaderMap, HeaderName, HeaderValue, Method, header},
    response::Response,
};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::{
    DigitallySignedStruct, SignatureScheme,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature},
    pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject},
};

use super::{
    front_proxy::{EXTRA_PREFIX, FrontProxy, GROUP_HEADER, USER_HEADER},
    registry::Backend,
};
use crate::api::{auth::UserInfo, services::ServiceAddress};

/// How long connecting (TCP and TLS), and then the response's headers, may take; and the
/// longest a response (a watch) may stream.
#[derive(Clone, Debug)]
pub struct Timeouts {
    pub connect: Duration,
    pub response_headers: Duration,
    pub longest: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            response_headers: Duration::from_secs(60),
            longest: Duration::from_secs(3600),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("dial tcp {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("dial tcp {addr}: i/o timeout")]
    ConnectTimeout { addr: String },
    #[error("tls handshake with {addr}: {source}")]
    Handshake {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the APIService has no caBundle and does not skip TLS verification")]
    NoTrust,
    #[error("its caBundle holds no certificate")]
    EmptyCaBundle,
    #[error("its caBundle")]
    CaBundle(#[from] rustls::pki_types::pem::Error),
    #[error("building the TLS configuration")]
    Tls(#[from] rustls::Error),
    #[error("the server name {0} is not valid")]
    ServerName(String),
    #[error("the request")]
    Request(#[from] axum::http::Error),
    #[error("talking to the backend")]
    Http(#[from] hyper::Error),
    #[error("the backend sent no response headers within {0:?}")]
    HeadersTimeout(Duration),
}

/// Accepts any server certificate (`insecureSkipTLSVerify`), still checking the handshake's
/// signatures.
#[derive(Debug)]
struct SkipVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for SkipVerification {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The TLS client configuration for `backend`, presenting `identity`.
pub fn client_config(
    backend: &Backend,
    identity: &FrontProxy,
) -> Result<Arc<rustls::ClientConfig>, ProxyError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = if backend.insecure_skip_tls_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SkipVerification(provider)))
    } else {
        let ca = backend.ca_bundle.as_deref().ok_or(ProxyError::NoTrust)?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca) {
            roots.add(cert?)?;
        }
        if roots.is_empty() {
            return Err(ProxyError::EmptyCaBundle);
        }
        builder.with_root_certificates(roots)
    };
    let mut config = builder.with_client_auth_cert(
        identity.client_chain.clone(),
        identity.client_key.clone_key(),
    )?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The TLS client configuration of kube-apiserver's connections to kubelets when it is given
/// no `--kubelet-certificate-authority` (the kubelet's certificate is not checked) and no
/// `--kubelet-client-certificate` (none is presented).
pub fn kubelet_client_config() -> Result<Arc<rustls::ClientConfig>, ProxyError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(SkipVerification(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Headers never passed on: hop-by-hop ones, and those the proxy sets itself.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

/// `X-Remote-Extra-` keys are percent-encoded (as Go's `url.PathEscape`).
fn escape_extra_key(key: &str) -> String {
    let mut out = String::new();
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The headers sent to the backend: the caller's, less credentials, hop-by-hop headers and
/// anything claiming an identity, plus the identity the cluster authenticated.
pub fn forwarded_headers(incoming: &HeaderMap, user: &UserInfo) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in incoming {
        let n = name.as_str();
        if hop_by_hop(name)
            || name == header::AUTHORIZATION
            || n.starts_with("x-remote-")
            || n.starts_with("impersonate-")
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    let mut add = |name: &str, value: &str| {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            out.append(n, v);
        }
    };
    add(USER_HEADER, &user.username);
    for g in &user.groups {
        add(GROUP_HEADER, g);
    }
    for (key, values) in &user.extra {
        let name = format!("{EXTRA_PREFIX}{}", escape_extra_key(key));
        for v in values {
            add(&name, v);
        }
    }
    out
}

/// Sends one request to `addr` and answers the backend's response once its headers arrived;
/// its body streams from the connection, which lasts at most `timeouts.longest`.
pub async fn send(
    addr: &ServiceAddress,
    tls: Arc<rustls::ClientConfig>,
    method: Method,
    path_and_query: &str,
    headers: HeaderMap,
    body: Bytes,
    timeouts: &Timeouts,
) -> Result<hyper::Response<Incoming>, ProxyError> {
    let target = if addr.host.contains(':') {
        format!("[{}]:{}", addr.host, addr.port)
    } else {
        format!("{}:{}", addr.host, addr.port)
    };
    let name = ServerName::try_from(addr.server_name.clone())
        .map_err(|_| ProxyError::ServerName(addr.server_name.clone()))?;
    let connect = async {
        let tcp = tokio::net::TcpStream::connect((addr.host.as_str(), addr.port))
            .await
            .map_err(|source| ProxyError::Connect {
                addr: target.clone(),
                source,
            })?;
        let _ = tcp.set_nodelay(true);
        tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .map_err(|source| ProxyError::Handshake {
                addr: target.clone(),
                source,
            })
    };
    let stream = tokio::time::timeout(timeouts.connect, connect)
        .await
        .map_err(|_| ProxyError::ConnectTimeout {
            addr: target.clone(),
        })??;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let longest = timeouts.longest;
    tokio::spawn(async move {
        // Dropping the connection ends a response still streaming past the bound.
        let _ = tokio::time::timeout(longest, conn).await;
    });
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(path_and_query)
        .body(Full::new(body))?;
    *request.headers_mut() = {
        let mut h = headers;
        h.insert(
            header::HOST,
            HeaderValue::from_str(&format!("{}:{}", addr.server_name, addr.port))
                .unwrap_or(HeaderValue::from_static("localhost")),
        );
        h
    };
    tokio::time::timeout(timeouts.response_headers, sender.send_request(request))
        .await
        .map_err(|_| ProxyError::HeadersTimeout(timeouts.response_headers))?
        .map_err(ProxyError::Http)
}

/// A response body that holds `G` (a watch slot) until it is dropped.
struct Holding<G> {
    body: Incoming,
    _held: G,
}

impl<G: Unpin> hyper::body::Body for Holding<G> {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, hyper::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The backend's response as the caller's: hop-by-hop headers dropped, the body streamed
/// through chunk by chunk, `held` kept until the body is done or dropped.
pub fn respond<G: Unpin + Send + 'static>(
    response: hyper::Response<Incoming>,
    held: G,
) -> Response {
    let (parts, body) = response.into_parts();
    let mut out = Response::new(Body::new(Holding { body, _held: held }));
    *out.status_mut() = parts.status;
    for (name, value) in &parts.headers {
        if !hop_by_hop(name) || name == header::CONTENT_LENGTH {
            out.headers_mut().append(name.clone(), value.clone());
        }
    }
    out
}

/// Whether a request is a watch (counted against the caller's open watches).
pub fn is_watch(method: &Method, path: &str, query: &str) -> bool {
    *method == Method::GET
        && (path.split('/').nth(4) == Some("watch")
            || query
                .split('&')
                .any(|kv| matches!(kv, "watch=true" | "watch=1" | "watch=True")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn watches_are_recognized() {
        let p = "/apis/example.com/v1/namespaces/a/things";
        assert!(is_watch(&Method::GET, p, "watch=true&timeoutSeconds=5"));
        assert!(is_watch(
            &Method::GET,
            "/apis/example.com/v1/watch/things",
            ""
        ));
        assert!(!is_watch(&Method::GET, p, "watch=false"));
        assert!(!is_watch(&Method::POST, p, "watch=true"));
    }

    #[test]
    fn the_callers_identity_replaces_what_it_claimed() {
        let mut incoming = HeaderMap::new();
        for (n, v) in [
            ("authorization", "Bearer secret"),
            ("x-remote-user", "forged"),
            ("X-Remote-Group", "system:masters"),
            ("x-remote-extra-scopes", "all"),
            ("impersonate-user", "someone"),
            ("connection", "keep-alive"),
            ("accept", "application/json"),
        ] {
            incoming.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_static(v),
            );
        }
        let user = UserInfo {
            username: "system:serviceaccount:ns:sa".into(),
            uid: String::new(),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:authenticated".into(),
            ],
            extra: BTreeMap::from([(
                "authentication.kubernetes.io/pod-name".to_owned(),
                vec!["p".to_owned()],
            )]),
        };
        let out = forwarded_headers(&incoming, &user);
        assert!(out.get("authorization").is_none());
        assert!(out.get("impersonate-user").is_none());
        assert!(out.get("connection").is_none());
        assert_eq!(out["accept"], "application/json");
        let all = |n: &str| {
            out.get_all(n)
                .iter()
                .map(|v| v.to_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(all("x-remote-user"), ["system:serviceaccount:ns:sa"]);
        assert_eq!(
            all("x-remote-group"),
            ["system:serviceaccounts", "system:authenticated"]
        );
        assert!(all("x-remote-extra-scopes").is_empty());
        assert_eq!(
            all("x-remote-extra-authentication.kubernetes.io%2Fpod-name"),
            ["p"]
        );
    }
}
