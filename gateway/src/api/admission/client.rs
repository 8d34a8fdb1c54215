//! Calling a webhook: one HTTPS/1.1 POST over rustls (ring), trusting only the webhook's
//! `caBundle`.

use std::{sync::Arc, time::Duration};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};

/// The largest webhook response read.
const MAX_RESPONSE: usize = 3 << 20;

/// Where to connect and what name the certificate must carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    pub host: String,
    pub port: u16,
    /// The path and query.
    pub path: String,
    /// The name the server's certificate is checked against.
    pub server_name: String,
}

/// Splits an `https://host[:port][/path]` URL.
pub fn parse_url(url: &str) -> Result<Address, String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| format!("only https URLs may be called: {url}"))?;
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
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("bad host in {url}"))?;
        (h.to_owned(), after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (authority.to_owned(), None),
        }
    };
    let port = match port {
        Some(p) => p.parse().map_err(|_| format!("bad port in {url}"))?,
        None => 443,
    };
    if host.is_empty() {
        return Err(format!("no host in {url}"));
    }
    Ok(Address {
        server_name: host.clone(),
        host,
        port,
        path,
    })
}

/// POSTs `body` (JSON) to `addr`, trusting the PEM certificates of `ca`; the response body of a
/// 200. Everything, connecting included, must fit in `timeout`.
pub async fn post(
    addr: &Address,
    ca: &[u8],
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Bytes, String> {
    match tokio::time::timeout(timeout, post_inner(addr, ca, body)).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "Post \"https://{}:{}{}\": context deadline exceeded",
            addr.host, addr.port, addr.path
        )),
    }
}

fn tls_config(ca: &[u8]) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca) {
        let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
        roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
    }
    if roots.is_empty() {
        return Err("caBundle holds no certificate".into());
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
}

async fn post_inner(addr: &Address, ca: &[u8], body: Vec<u8>) -> Result<Bytes, String> {
    let config = tls_config(ca)?;
    let name = ServerName::try_from(addr.server_name.clone())
        .map_err(|e| format!("bad server name {}: {e}", addr.server_name))?;
    let tcp = tokio::net::TcpStream::connect((addr.host.as_str(), addr.port))
        .await
        .map_err(|e| format!("dial tcp {}:{}: {e}", addr.host, addr.port))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    let conn = tokio::spawn(conn);
    let host = if addr.host.contains(':') {
        format!("[{}]:{}", addr.host, addr.port)
    } else {
        format!("{}:{}", addr.host, addr.port)
    };
    let request = hyper::Request::post(&addr.path)
        .header(hyper::header::HOST, host)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let bytes = Limited::new(response.into_body(), MAX_RESPONSE)
        .collect()
        .await
        .map_err(|e| format!("reading the response: {e}"))?
        .to_bytes();
    conn.abort();
    if !status.is_success() {
        return Err(format!(
            "the server responded with {status}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(256)])
        ));
    }
    Ok(bytes)
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
        assert!(tls_config(b"").is_err());
        assert!(tls_config(b"not pem").is_err());
    }
}
