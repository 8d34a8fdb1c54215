//! Calling a webhook: HTTPS/1.1 POSTs over rustls (ring), trusting only the webhook's
//! `caBundle`, on kept-alive connections. As kube-apiserver keeps one client per webhook
//! client configuration, [`Clients`] keeps one [`Pool`] per CA bundle and endpoint: a TLS
//! handshake per call would cost more than most webhooks take to answer.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use http_body_util::{BodyExt, Full, Limited};
use hyper::{body::Bytes, client::conn::http1::SendRequest};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};

use crate::api::aggregation::front_proxy::FrontProxy;

/// The largest webhook response read.
const MAX_RESPONSE: usize = 3 << 20;
/// Idle connections kept per endpoint; more are closed once their call is answered.
const MAX_IDLE: usize = 32;
/// Endpoints kept per cluster; past it the least recently added one is dropped (a Service that
/// keeps changing address must not grow the map without bound).
const MAX_ENDPOINTS: usize = 64;

/// Why a call failed (before any answer could be read as a review).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("only https URLs may be called: {0}")]
    NotHttps(String),
    #[error("bad {what} in {url}")]
    BadUrl { what: &'static str, url: String },
    #[error("caBundle: {0}")]
    CaBundle(String),
    #[error("caBundle holds no certificate")]
    EmptyCaBundle,
    #[error("tls configuration: {0}")]
    TlsConfig(#[source] rustls::Error),
    #[error("bad server name {0}")]
    ServerName(String),
    #[error("dial tcp {host}:{port}: {source}")]
    Dial {
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("tls: {0}")]
    Tls(#[source] std::io::Error),
    #[error("{0}")]
    Http(#[from] hyper::Error),
    #[error("building the request: {0}")]
    Request(#[from] hyper::http::Error),
    #[error("the connection closed before the request could be sent")]
    Closed,
    #[error("reading the response: {0}")]
    Body(String),
    #[error("the server responded with {status}: {body}")]
    Status { status: u16, body: String },
    #[error("Post \"https://{host}:{port}{path}\": context deadline exceeded")]
    Timeout {
        host: String,
        port: u16,
        path: String,
    },
}

/// Where to connect and what name the certificate must carry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Address {
    pub host: String,
    pub port: u16,
    /// The path and query.
    pub path: String,
    /// The name the server's certificate is checked against.
    pub server_name: String,
}

/// Splits an `https://host[:port][/path]` URL.
pub fn parse_url(url: &str) -> Result<Address, CallError> {
    let bad = |what| CallError::BadUrl {
        what,
        url: url.to_owned(),
    };
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| CallError::NotHttps(url.to_owned()))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], rest[i..].to_owned()),
        None => (rest, "/".to_owned()),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(|| bad("host"))?;
        (h.to_owned(), after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (authority.to_owned(), None),
        }
    };
    let port = match port {
        Some(p) => p.parse().map_err(|_| bad("port"))?,
        None => 443,
    };
    if host.is_empty() {
        return Err(bad("host"));
    }
    Ok(Address {
        server_name: host.clone(),
        host,
        port,
        path,
    })
}

/// The TLS settings of calls trusting `ca`, presenting `identity`'s client certificate when
/// the cluster has one: a webhook then knows the review comes from the API server (as
/// kube-apiserver does when its admission configuration gives it a client certificate).
fn tls_config(ca: &[u8], identity: Option<&FrontProxy>) -> Result<rustls::ClientConfig, CallError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca) {
        let cert = cert.map_err(|e| CallError::CaBundle(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| CallError::CaBundle(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(CallError::EmptyCaBundle);
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(CallError::TlsConfig)
        .and_then(|b| {
            let b = b.with_root_certificates(roots);
            match identity {
                Some(id) => b
                    .with_client_auth_cert(id.client_chain.clone(), id.client_key.clone_key())
                    .map_err(CallError::TlsConfig),
                None => Ok(b.with_no_client_auth()),
            }
        })
}

/// What one pool serves: a CA bundle and an endpoint (the path is per request).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PoolKey {
    ca: Vec<u8>,
    /// The client certificate presented (DER), if any.
    client: Option<Vec<u8>>,
    host: String,
    port: u16,
    server_name: String,
}

/// Kept-alive connections to one endpoint, trusting one CA bundle.
pub struct Pool {
    tls: tokio_rustls::TlsConnector,
    server_name: ServerName<'static>,
    host: String,
    port: u16,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

impl Pool {
    fn new(key: &PoolKey, identity: Option<&FrontProxy>) -> Result<Self, CallError> {
        Ok(Pool {
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls_config(&key.ca, identity)?)),
            server_name: ServerName::try_from(key.server_name.clone())
                .map_err(|e| CallError::ServerName(format!("{}: {e}", key.server_name)))?,
            host: key.host.clone(),
            port: key.port,
            idle: Mutex::new(Vec::new()),
        })
    }

    fn take_idle(&self) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(s) = idle.pop() {
            if !s.is_closed() {
                return Some(s);
            }
        }
        None
    }

    fn give_back(&self, s: SendRequest<Full<Bytes>>) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE && !s.is_closed() {
            idle.push(s);
        }
    }

    /// How many idle connections are kept now.
    pub fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, CallError> {
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|source| CallError::Dial {
                host: self.host.clone(),
                port: self.port,
                source,
            })?;
        let _ = tcp.set_nodelay(true);
        let tls = self
            .tls
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(CallError::Tls)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        // Ends when the server closes the connection or the last sender is dropped.
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    async fn send(&self, path: &str, body: Bytes) -> Result<Bytes, CallError> {
        let host = if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        };
        let mut request = Some(
            hyper::Request::post(path)
                .header(hyper::header::HOST, host)
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .header(hyper::header::ACCEPT, "application/json")
                .body(Full::new(body))?,
        );
        // A kept connection the server closed meanwhile fails before the request is written:
        // the request comes back and goes on the next connection (a fresh one at last).
        loop {
            let (mut sender, reused) = match self.take_idle() {
                Some(s) => (s, true),
                None => (self.connect().await?, false),
            };
            if sender.ready().await.is_err() {
                if reused {
                    continue;
                }
                return Err(CallError::Closed);
            }
            let Some(req) = request.take() else {
                unreachable!("a request is put back before each retry");
            };
            let response = match sender.try_send_request(req).await {
                Ok(r) => r,
                Err(mut e) => match e.take_message() {
                    Some(req) if reused => {
                        request = Some(req);
                        continue;
                    }
                    _ => return Err(e.into_error().into()),
                },
            };
            let status = response.status();
            let bytes = Limited::new(response.into_body(), MAX_RESPONSE)
                .collect()
                .await
                .map_err(|e| CallError::Body(e.to_string()))?
                .to_bytes();
            self.give_back(sender);
            if !status.is_success() {
                return Err(CallError::Status {
                    status: status.as_u16(),
                    body: String::from_utf8_lossy(&bytes[..bytes.len().min(256)]).into_owned(),
                });
            }
            return Ok(bytes);
        }
    }
}

/// The pools of one cluster's webhooks, by CA bundle and endpoint. Dropped with the
/// configurations they were built for (see `Loaded` in the parent module), so a changed
/// `caBundle` or Service gets fresh connections.
#[derive(Default)]
pub struct Clients {
    pools: Mutex<Pools>,
}

/// The pools, and their keys in the order they were added.
#[derive(Default)]
struct Pools {
    by_key: HashMap<PoolKey, Arc<Pool>>,
    order: Vec<PoolKey>,
}

impl Clients {
    /// The pool for `addr` trusting `ca`, presenting `identity`'s certificate.
    pub fn pool(
        &self,
        addr: &Address,
        ca: &[u8],
        identity: Option<&FrontProxy>,
    ) -> Result<Arc<Pool>, CallError> {
        let key = PoolKey {
            ca: ca.to_vec(),
            client: identity
                .and_then(|id| id.client_chain.first())
                .map(|c| c.as_ref().to_vec()),
            host: addr.host.clone(),
            port: addr.port,
            server_name: addr.server_name.clone(),
        };
        let mut guard = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        let Pools {
            by_key: pools,
            order,
        } = &mut *guard;
        if let Some(p) = pools.get(&key) {
            return Ok(p.clone());
        }
        let pool = Arc::new(Pool::new(&key, identity)?);
        if order.len() >= MAX_ENDPOINTS {
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
            .by_key
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// POSTs `body` (JSON) to `addr` on a connection of `pool`; the response body of a 200.
/// Everything, connecting included, must fit in `timeout`.
pub async fn post(
    pool: &Pool,
    addr: &Address,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Bytes, CallError> {
    match tokio::time::timeout(timeout, pool.send(&addr.path, Bytes::from(body))).await {
        Ok(r) => r,
        Err(_) => Err(CallError::Timeout {
            host: addr.host.clone(),
            port: addr.port,
            path: addr.path.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_split() {
        let a = parse_url("https://127.0.0.1:9443/mutate?x=1").unwrap();
        assert_eq!(
            (a.host.as_str(), a.port, a.path.as_str()),
            ("127.0.0.1", 9443, "/mutate?x=1")
        );
        let a = parse_url("https://hooks.example.com").unwrap();
        assert_eq!(
            (a.host.as_str(), a.port, a.path.as_str()),
            ("hooks.example.com", 443, "/")
        );
        let a = parse_url("https://[::1]:8443/v").unwrap();
        assert_eq!((a.host.as_str(), a.port), ("::1", 8443));
        assert!(parse_url("http://x/").is_err());
        assert!(parse_url("https://:80/").is_err());
    }

    #[test]
    fn a_bundle_without_certificates_is_refused() {
        assert!(tls_config(b"", None).is_err());
        assert!(tls_config(b"not pem", None).is_err());
    }

    #[test]
    fn one_pool_per_bundle_and_endpoint() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = rcgen::generate_simple_self_signed(vec!["a".to_string()])
            .unwrap()
            .cert
            .pem();
        let other = rcgen::generate_simple_self_signed(vec!["b".to_string()])
            .unwrap()
            .cert
            .pem();
        let clients = Clients::default();
        let a = parse_url("https://127.0.0.1:9443/mutate").unwrap();
        let a_validate = parse_url("https://127.0.0.1:9443/validate").unwrap();
        let b = parse_url("https://127.0.0.1:9444/mutate").unwrap();
        let p1 = clients.pool(&a, ca.as_bytes(), None).unwrap();
        let p2 = clients.pool(&a_validate, ca.as_bytes(), None).unwrap();
        assert!(Arc::ptr_eq(&p1, &p2), "paths share the endpoint's pool");
        let p3 = clients.pool(&a, other.as_bytes(), None).unwrap();
        assert!(!Arc::ptr_eq(&p1, &p3), "another CA bundle, another pool");
        clients.pool(&b, ca.as_bytes(), None).unwrap();
        assert_eq!(clients.len(), 3);
        for port in 0..MAX_ENDPOINTS as u16 {
            let addr = parse_url(&format!("https://127.0.0.1:{}/x", 10000 + port)).unwrap();
            clients.pool(&addr, ca.as_bytes(), None).unwrap();
        }
        assert_eq!(clients.len(), MAX_ENDPOINTS, "bounded");
        assert!(clients.pool(&a, b"", None).is_err());
    }
}
