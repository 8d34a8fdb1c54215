//! Calling a webhook: HTTPS/1.1 POSTs over rustls (ring), trusting only the webhook's
//! `caBundle`, on kept-alive connections ([`crate::api::kept_alive`]): one pool per CA bundle
//! and endpoint, as kube-apiserver keeps one client per webhook client configuration. Each call
//! carries the admitted request's trace context (W3C `traceparent`).

use std::{sync::Arc, time::Duration};

use gpustack_serving::trace_context;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;

use crate::api::{
    aggregation::front_proxy::FrontProxy,
    kept_alive::{Endpoint, Pool, Pools, SendError, Trust},
};

/// The largest webhook response read.
const MAX_RESPONSE: usize = 3 << 20;
/// Endpoints kept per cluster; past it the least recently added one is dropped.
const MAX_ENDPOINTS: usize = 64;

/// Why a call failed (before any answer could be read as a review).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The webhook's URL is not `https://`.
    #[error("only https URLs may be called: {0}")]
    NotHttps(String),
    /// The webhook's URL could not be taken apart.
    #[error("bad {what} in {url}")]
    BadUrl {
        /// Which part of the URL is bad (host, port, path).
        what: &'static str,
        /// The URL.
        url: String,
    },
    /// Connecting or sending failed.
    #[error(transparent)]
    Send(#[from] SendError),
    /// The request could not be built.
    #[error("building the request: {0}")]
    Request(#[from] hyper::http::Error),
    /// The response body could not be read.
    #[error("reading the response: {0}")]
    Body(String),
    /// The webhook answered with an HTTP error.
    #[error("the server responded with {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// No answer within the webhook's timeout (worded as kube-apiserver's Go client words it).
    #[error("Post \"https://{host}:{port}{path}\": context deadline exceeded")]
    Timeout {
        /// The host called.
        host: String,
        /// The port called.
        port: u16,
        /// The path called.
        path: String,
    },
}

/// Where to connect and what name the certificate must carry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Address {
    /// The host to connect to.
    pub host: String,
    /// The port to connect to.
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

/// The connections of one cluster's webhooks, by CA bundle and endpoint. Dropped with the
/// configurations they were built for (see `Loaded` in the parent module), so a changed
/// `caBundle` or Service gets fresh connections.
pub struct Clients(Pools);

impl Default for Clients {
    fn default() -> Self {
        // Connecting is bounded by the call's own timeout (see [`post`]).
        Clients(Pools::new(MAX_ENDPOINTS, Duration::from_secs(30)))
    }
}

impl Clients {
    /// The pool for `addr` trusting `ca`, presenting `identity`'s certificate.
    pub fn pool(
        &self,
        addr: &Address,
        ca: &[u8],
        identity: Option<&FrontProxy>,
    ) -> Result<Arc<Pool>, CallError> {
        let endpoint = Endpoint {
            host: addr.host.clone(),
            port: addr.port,
            server_name: addr.server_name.clone(),
        };
        Ok(self
            .0
            .pool(&endpoint, &Trust::Bundle(ca.to_vec()), identity)?)
    }

    /// How many endpoints have a pool.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no endpoint has a pool.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// POSTs `body` to the pool's endpoint and reads the whole answer.
async fn exchange(pool: &Arc<Pool>, path: &str, body: Bytes) -> Result<Bytes, CallError> {
    let mut request = hyper::Request::post(path)
        .header(hyper::header::HOST, pool.endpoint().authority())
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "application/json")
        .body(Full::new(body))?;
    // The webhook's spans join the trace of the request it admits.
    trace_context::inject(&tracing::Span::current(), request.headers_mut());
    let (response, lease) = pool.send(request).await?;
    let status = response.status();
    let bytes = Limited::new(response.into_body(), MAX_RESPONSE)
        .collect()
        .await
        .map_err(|e| CallError::Body(e.to_string()))?
        .to_bytes();
    lease.give_back();
    if !status.is_success() {
        return Err(CallError::Status {
            status: status.as_u16(),
            body: String::from_utf8_lossy(&bytes[..bytes.len().min(256)]).into_owned(),
        });
    }
    Ok(bytes)
}

/// POSTs `body` (JSON) to `addr` on a connection of `pool`; the response body of a 200.
/// Everything, connecting included, must fit in `timeout`.
pub async fn post(
    pool: &Arc<Pool>,
    addr: &Address,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Bytes, CallError> {
    match tokio::time::timeout(timeout, exchange(pool, &addr.path, Bytes::from(body))).await {
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
