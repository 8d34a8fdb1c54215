//! Forwarding a request to an APIService's backend, as kube-aggregator does: HTTPS/1.1 over
//! rustls, the backend's certificate checked against `caBundle` for `NAME.NAMESPACE.svc` (or
//! not at all with `insecureSkipTLSVerify`), the cluster's front-proxy client certificate
//! presented, the caller's identity in `X-Remote-*` headers (whatever `X-Remote-*` and
//! `Authorization` the caller sent dropped), and the response streamed back as it arrives.

use std::{pin::Pin, sync::Arc, time::Duration};

use axum::{
    body::{Body, Bytes},
    http::{HeaderMap, HeaderName, HeaderValue, Method, header},
    response::Response,
};
use http_body_util::Full;
use hyper::body::Incoming;

use super::front_proxy::{EXTRA_PREFIX, GROUP_HEADER, USER_HEADER};
use crate::api::{
    auth::UserInfo,
    kept_alive::{Lease, LeasedBody, Pool, SendError},
};

/// How long connecting (TCP and TLS), and then the response's headers, may take; and the
/// longest a response (a watch) may stream.
#[derive(Clone, Debug)]
pub struct Timeouts {
    /// How long connecting to a backend may take.
    pub connect: Duration,
    /// How long a backend may take to send its response's headers.
    pub response_headers: Duration,
    /// The longest a forwarded request may last (a watch included).
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

/// Why a request could not be forwarded to a backend.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The APIService gives no way to check the backend's certificate.
    #[error("the APIService has no caBundle and does not skip TLS verification")]
    NoTrust,
    /// Connecting or sending failed.
    #[error(transparent)]
    Send(#[from] SendError),
    /// The forwarded request could not be built.
    #[error("the request")]
    Request(#[from] axum::http::Error),
    /// The backend sent no response headers in time.
    #[error("the backend sent no response headers within {0:?}")]
    HeadersTimeout(Duration),
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

/// The request as the backend gets it, `Host` naming the backend's Service.
fn request(
    pool: &Pool,
    method: Method,
    path_and_query: &str,
    mut headers: HeaderMap,
    body: Bytes,
) -> Result<hyper::Request<Full<Bytes>>, ProxyError> {
    let endpoint = pool.endpoint();
    let host = format!("{}:{}", endpoint.server_name, endpoint.port);
    headers.insert(
        header::HOST,
        HeaderValue::from_str(&host).unwrap_or(HeaderValue::from_static("localhost")),
    );
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(path_and_query)
        .body(Full::new(body))?;
    *request.headers_mut() = headers;
    Ok(request)
}

/// Sends one request on a kept-alive connection of `pool` and answers the backend's response
/// once its headers arrived; the connection goes back to the pool when the body was read.
pub async fn send(
    pool: &Arc<Pool>,
    method: Method,
    path_and_query: &str,
    headers: HeaderMap,
    body: Bytes,
    timeouts: &Timeouts,
) -> Result<(hyper::Response<Incoming>, Lease), ProxyError> {
    let request = request(pool, method, path_and_query, headers, body)?;
    tokio::time::timeout(timeouts.response_headers, pool.send(request))
        .await
        .map_err(|_| ProxyError::HeadersTimeout(timeouts.response_headers))?
        .map_err(ProxyError::Send)
}

/// Sends one request on a new connection (an availability check: whether the backend takes
/// new connections, with the certificate it serves now).
pub async fn send_on_new_connection(
    pool: &Pool,
    method: Method,
    path_and_query: &str,
    headers: HeaderMap,
    timeouts: &Timeouts,
) -> Result<hyper::Response<Incoming>, ProxyError> {
    let request = request(pool, method, path_and_query, headers, Bytes::new())?;
    let exchange = async {
        let mut sender = pool.connect().await?;
        Ok::<_, SendError>(sender.send_request(request).await?)
    };
    tokio::time::timeout(timeouts.response_headers, exchange)
        .await
        .map_err(|_| ProxyError::HeadersTimeout(timeouts.response_headers))?
        .map_err(ProxyError::Send)
}

/// A response body that holds `G` (a watch slot) until it is dropped, and ends at the
/// longest time a response may stream (its connection is then closed, never reused).
struct Holding<G> {
    body: LeasedBody,
    deadline: Pin<Box<tokio::time::Sleep>>,
    _held: G,
}

impl<G: Unpin> hyper::body::Body for Holding<G> {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        if this.deadline.as_mut().poll(cx).is_ready() {
            return std::task::Poll::Ready(None);
        }
        Pin::new(&mut this.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The backend's response as the caller's: hop-by-hop headers dropped, the body streamed
/// through chunk by chunk for at most `longest`, `held` kept until the body is done or dropped.
pub fn respond<G: Unpin + Send + 'static>(
    (response, lease): (hyper::Response<Incoming>, Lease),
    longest: Duration,
    held: G,
) -> Response {
    let (parts, body) = response.into_parts();
    let mut out = Response::new(Body::new(Holding {
        body: LeasedBody::new(body, lease),
        deadline: Box::pin(tokio::time::sleep(longest)),
        _held: held,
    }));
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
