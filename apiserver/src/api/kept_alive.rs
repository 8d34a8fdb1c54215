//! Kept-alive HTTPS/1.1 connections to the servers the API server calls: admission webhooks and
//! APIService backends. As kube-apiserver keeps one transport per client configuration,
//! [`Pools`] keeps one [`Pool`] per trust, client certificate and endpoint: a TCP and TLS
//! handshake per call costs more than most calls take to answer.
//!
//! A connection goes back to its pool only once its response was read to the end
//! ([`Lease::give_back`], or [`LeasedBody`] for a streamed body); one dropped midway is closed.

use std::{
    collections::HashMap,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};

use gpustack_serving::any_server_cert::AnyServerCertificate;
use http_body_util::Full;
use hyper::{
    Request, Response,
    body::{Bytes, Frame, Incoming},
    client::conn::http1::SendRequest,
};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};

use crate::api::aggregation::front_proxy::FrontProxy;

/// Idle connections kept per endpoint; more are closed once their call is answered.
const MAX_IDLE: usize = 32;

/// How the server's certificate is checked.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Trust {
    /// Against the certificates of this PEM bundle (a `caBundle`).
    Bundle(Vec<u8>),
    /// Not at all (an APIService's `insecureSkipTLSVerify`); the handshake's signatures still are.
    SkipVerification,
}

/// Where to connect, and the name the server's certificate must carry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The host name or address to connect to.
    pub host: String,
    /// The TCP port.
    pub port: u16,
    /// The name the server's certificate must carry (SNI and verification).
    pub server_name: String,
}

impl Endpoint {
    /// `host:port`, with an IPv6 host in brackets (what errors and `Host` headers show).
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Why a call failed before a response arrived.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The `caBundle` is not valid PEM.
    #[error("caBundle: {0}")]
    CaBundle(#[source] rustls::pki_types::pem::Error),
    /// The `caBundle` holds no certificate.
    #[error("caBundle holds no certificate")]
    EmptyCaBundle,
    /// The TLS client configuration could not be built.
    #[error("tls configuration: {0}")]
    TlsConfig(#[source] rustls::Error),
    /// The endpoint's host is no valid TLS server name.
    #[error("bad server name {0}")]
    ServerName(String),
    /// The TCP connection failed.
    #[error("dial tcp {addr}: {source}")]
    Dial {
        /// The address dialled.
        addr: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The TCP connection was not made within the connect timeout.
    #[error("dial tcp {addr}: i/o timeout")]
    DialTimeout {
        /// The address dialled.
        addr: String,
    },
    /// The TLS handshake failed (the server's certificate, most often).
    #[error("tls handshake with {addr}: {source}")]
    Handshake {
        /// The address connected to.
        addr: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// HTTP failed on the connection.
    #[error("{0}")]
    Http(#[from] hyper::Error),
    /// The kept-alive connection closed before the request went out.
    #[error("the connection closed before the request could be sent")]
    Closed,
}

/// The TLS client settings for `trust`, presenting `identity`'s certificate when there is one
/// (the cluster's front-proxy client certificate: the server then knows the call comes from the
/// API server).
pub fn client_config(
    trust: &Trust,
    identity: Option<&FrontProxy>,
) -> Result<rustls::ClientConfig, SendError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(SendError::TlsConfig)?;
    let builder = match trust {
        Trust::SkipVerification => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCertificate(provider))),
        Trust::Bundle(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca) {
                roots
                    .add(cert.map_err(SendError::CaBundle)?)
                    .map_err(SendError::TlsConfig)?;
            }
            if roots.is_empty() {
                return Err(SendError::EmptyCaBundle);
            }
            builder.with_root_certificates(roots)
        }
    };
    let mut config = match identity {
        Some(id) => builder
            .with_client_auth_cert(id.client_chain.clone(), id.client_key.clone_key())
            .map_err(SendError::TlsConfig)?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Kept-alive connections to one endpoint, with one trust and client certificate.
pub struct Pool {
    tls: tokio_rustls::TlsConnector,
    endpoint: Endpoint,
    server_name: ServerName<'static>,
    connect_timeout: Duration,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

impl Pool {
    fn new(
        endpoint: &Endpoint,
        trust: &Trust,
        identity: Option<&FrontProxy>,
        connect_timeout: Duration,
    ) -> Result<Self, SendError> {
        Ok(Pool {
            tls: tokio_rustls::TlsConnector::from(Arc::new(client_config(trust, identity)?)),
            server_name: ServerName::try_from(endpoint.server_name.clone())
                .map_err(|_| SendError::ServerName(endpoint.server_name.clone()))?,
            endpoint: endpoint.clone(),
            connect_timeout,
            idle: Mutex::new(Vec::new()),
        })
    }

    fn idle_list(&self) -> std::sync::MutexGuard<'_, Vec<SendRequest<Full<Bytes>>>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take_idle(&self) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle_list();
        while let Some(s) = idle.pop() {
            if !s.is_closed() {
                return Some(s);
            }
        }
        None
    }

    fn keep(&self, s: SendRequest<Full<Bytes>>) {
        let mut idle = self.idle_list();
        if idle.len() < MAX_IDLE && !s.is_closed() {
            idle.push(s);
        }
    }

    /// How many idle connections are kept now.
    pub fn idle(&self) -> usize {
        self.idle_list().len()
    }

    /// The endpoint this pool connects to.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// A new connection (TCP and TLS within the connect timeout), never a kept one.
    pub async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, SendError> {
        let addr = self.endpoint.authority();
        let dial = async {
            let tcp =
                tokio::net::TcpStream::connect((self.endpoint.host.as_str(), self.endpoint.port))
                    .await
                    .map_err(|source| SendError::Dial {
                        addr: addr.clone(),
                        source,
                    })?;
            let _ = tcp.set_nodelay(true);
            self.tls
                .connect(self.server_name.clone(), tcp)
                .await
                .map_err(|source| SendError::Handshake {
                    addr: addr.clone(),
                    source,
                })
        };
        let tls = tokio::time::timeout(self.connect_timeout, dial)
            .await
            .map_err(|_| SendError::DialTimeout { addr: addr.clone() })??;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        // Ends when the server closes the connection, or the last sender and body are dropped.
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// Sends `request` on a kept connection, or a new one when none is idle. A kept connection
    /// the server closed meanwhile fails before the request is written: the request then goes
    /// on the next connection (a new one at last), so nothing is ever sent twice.
    pub async fn send(
        self: &Arc<Self>,
        request: Request<Full<Bytes>>,
    ) -> Result<(Response<Incoming>, Lease), SendError> {
        let mut request = Some(request);
        loop {
            let (mut sender, reused) = match self.take_idle() {
                Some(s) => (s, true),
                None => (self.connect().await?, false),
            };
            if sender.ready().await.is_err() {
                if reused {
                    continue;
                }
                return Err(SendError::Closed);
            }
            let Some(req) = request.take() else {
                unreachable!("a request is put back before each retry");
            };
            match sender.try_send_request(req).await {
                Ok(response) => {
                    let lease = Lease {
                        pool: Arc::clone(self),
                        sender,
                    };
                    return Ok((response, lease));
                }
                Err(mut e) => match e.take_message() {
                    Some(req) if reused => request = Some(req),
                    _ => return Err(e.into_error().into()),
                },
            }
        }
    }
}

/// A connection in use by one call. Given back once its response was read to the end; dropped
/// otherwise (the connection then closes).
pub struct Lease {
    pool: Arc<Pool>,
    sender: SendRequest<Full<Bytes>>,
}

impl Lease {
    /// The response was read to the end: the connection may serve the next call.
    pub fn give_back(self) {
        self.pool.keep(self.sender);
    }
}

/// A streamed response body that gives its connection back when it ends.
pub struct LeasedBody {
    body: Incoming,
    lease: Option<Lease>,
}

impl LeasedBody {
    /// `body`, whose connection `lease` goes back to its pool once the body ends.
    pub fn new(body: Incoming, lease: Lease) -> Self {
        LeasedBody {
            body,
            lease: Some(lease),
        }
    }
}

impl hyper::body::Body for LeasedBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let frame = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(None) = frame
            && let Some(lease) = this.lease.take()
        {
            lease.give_back();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// What one pool serves.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PoolKey {
    trust: Trust,
    /// The client certificate presented (DER), if any.
    client: Option<Vec<u8>>,
    endpoint: Endpoint,
}

/// Pools by trust, client certificate and endpoint, at most `max_endpoints` of them: past it
/// the least recently added is dropped (a Service that keeps changing address must not grow
/// the map without bound).
pub struct Pools {
    max_endpoints: usize,
    connect_timeout: Duration,
    pools: Mutex<ByKey>,
}

/// The pools, and their keys in the order they were added.
#[derive(Default)]
struct ByKey {
    pools: HashMap<PoolKey, Arc<Pool>>,
    order: Vec<PoolKey>,
}

impl Pools {
    /// Pools for at most `max_endpoints` endpoints (the oldest pool goes first), connecting with `connect_timeout`.
    pub fn new(max_endpoints: usize, connect_timeout: Duration) -> Self {
        Pools {
            max_endpoints: max_endpoints.max(1),
            connect_timeout,
            pools: Mutex::default(),
        }
    }

    /// The pool for `endpoint` checked with `trust`, presenting `identity`'s certificate.
    pub fn pool(
        &self,
        endpoint: &Endpoint,
        trust: &Trust,
        identity: Option<&FrontProxy>,
    ) -> Result<Arc<Pool>, SendError> {
        let key = PoolKey {
            trust: trust.clone(),
            client: identity
                .and_then(|id| id.client_chain.first())
                .map(|c| c.as_ref().to_vec()),
            endpoint: endpoint.clone(),
        };
        let mut guard = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        let ByKey { pools, order } = &mut *guard;
        if let Some(p) = pools.get(&key) {
            return Ok(p.clone());
        }
        let pool = Arc::new(Pool::new(endpoint, trust, identity, self.connect_timeout)?);
        if order.len() >= self.max_endpoints {
            let oldest = order.remove(0);
            pools.remove(&oldest);
        }
        order.push(key.clone());
        pools.insert(key, pool.clone());
        Ok(pool)
    }

    /// How many endpoints have a pool.
    pub fn len(&self) -> usize {
        self.pools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pools
            .len()
    }

    /// Whether no endpoint has a pool.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(port: u16) -> Endpoint {
        Endpoint {
            host: "127.0.0.1".into(),
            port,
            server_name: "backend.ns.svc".into(),
        }
    }

    #[test]
    fn a_bundle_without_certificates_is_refused() {
        let trust = |b: &[u8]| Trust::Bundle(b.to_vec());
        assert!(matches!(
            client_config(&trust(b""), None),
            Err(SendError::EmptyCaBundle)
        ));
        assert!(client_config(&trust(b"not pem"), None).is_err());
        assert!(client_config(&Trust::SkipVerification, None).is_ok());
    }

    #[test]
    fn skipping_verification_is_a_trust_of_its_own() {
        let ca = rcgen::generate_simple_self_signed(vec!["a".to_string()])
            .unwrap()
            .cert
            .pem()
            .into_bytes();
        let pools = Pools::new(1, Duration::from_secs(1));
        let checked = pools
            .pool(&endpoint(9443), &Trust::Bundle(ca), None)
            .unwrap();
        let skipped = pools
            .pool(&endpoint(9443), &Trust::SkipVerification, None)
            .unwrap();
        assert!(!Arc::ptr_eq(&checked, &skipped));
        assert_eq!(pools.len(), 1, "bounded: the older pool was dropped");
    }

    /// A TLS server for `backend.ns.svc` on loopback that counts the connections it accepts
    /// and answers each request with its path; it closes each connection after one response
    /// unless `keep_alive`. Its CA bundle (the self-signed certificate) and port.
    async fn backend(keep_alive: bool) -> (Trust, u16, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let cert = rcgen::generate_simple_self_signed(vec!["backend.ns.svc".to_string()]).unwrap();
        let key =
            rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let answer = hyper::service::service_fn(|req: Request<Incoming>| async move {
                        Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(
                            req.uri().path().to_owned(),
                        ))))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(keep_alive)
                        .serve_connection(TokioIo::new(tls), answer)
                        .await;
                });
            }
        });
        (Trust::Bundle(cert.cert.pem().into_bytes()), port, accepted)
    }

    /// Sends GET `path` through `pool` and reads the answer to the end.
    async fn get(pool: &Arc<Pool>, path: &str) -> String {
        use http_body_util::BodyExt;
        let request = Request::get(path)
            .header(hyper::header::HOST, "backend.ns.svc")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let (response, lease) = pool.send(request).await.unwrap();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        lease.give_back();
        String::from_utf8(body.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn calls_share_one_connection() {
        let (trust, port, accepted) = backend(true).await;
        let pools = Pools::new(4, Duration::from_secs(5));
        let pool = pools.pool(&endpoint(port), &trust, None).unwrap();
        for i in 0..5 {
            assert_eq!(
                get(&pool, &format!("/call/{i}")).await,
                format!("/call/{i}")
            );
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(pool.idle(), 1);
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_is_replaced() {
        let (trust, port, accepted) = backend(false).await;
        let pools = Pools::new(4, Duration::from_secs(5));
        let pool = pools.pool(&endpoint(port), &trust, None).unwrap();
        for i in 0..3 {
            assert_eq!(
                get(&pool, &format!("/call/{i}")).await,
                format!("/call/{i}")
            );
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_certificate_for_another_name_is_refused() {
        let (trust, port, _) = backend(true).await;
        let pools = Pools::new(4, Duration::from_secs(5));
        let mut other = endpoint(port);
        other.server_name = "other.ns.svc".into();
        let pool = pools.pool(&other, &trust, None).unwrap();
        let request = Request::get("/").body(Full::new(Bytes::new())).unwrap();
        let err = pool.send(request).await.err().expect("refused");
        assert!(matches!(err, SendError::Handshake { .. }), "{err}");
    }

    #[test]
    fn authorities_bracket_ipv6_hosts() {
        let mut e = endpoint(443);
        assert_eq!(e.authority(), "127.0.0.1:443");
        e.host = "::1".into();
        assert_eq!(e.authority(), "[::1]:443");
    }
}
