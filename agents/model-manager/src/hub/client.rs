//! The HTTP side of the hub: one `reqwest` client per node configuration, redirects followed by
//! hand so that the `Authorization` header is dropped on a cross-host or https→http hop, and
//! transport errors reduced to words that carry no URL (a redirect may carry a signed one).

use std::{fmt, time::Duration};

use reqwest::{Response, StatusCode, Url, header};

use super::listing::{self, ListingError, MAX_ENTRIES, MAX_PAGE_BYTES};
use crate::{
    failure::{Failure, Reason},
    manifest::ManifestEntry,
};

pub const USER_AGENT: &str = "gpustack-operator";
pub const MAX_REDIRECTS: usize = 10;

/// A hub token. Held in memory for an attempt only; `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct HubToken(String);

impl HubToken {
    /// A token, trimmed; `None` when it is empty.
    pub fn new(token: impl Into<String>) -> Option<Self> {
        let t = token.into();
        (!t.trim().is_empty()).then(|| Self(t.trim().to_owned()))
    }
}

impl fmt::Debug for HubToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HubToken(<redacted>)")
    }
}

/// How this node reaches the hub (from `NodeModelStore.spec.hub`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HubSettings {
    /// The hub's base URL; empty means [`DEFAULT_ENDPOINT`].
    pub endpoint: String,
    /// Proxy for HTTPS requests; empty means none.
    pub https_proxy: String,
    /// Hosts reached without the proxy (comma-separated, as `NO_PROXY`).
    pub no_proxy: String,
    /// Extra trusted CAs (PEM), from the CA bundle ConfigMap.
    pub ca_pem: Option<Vec<u8>>,
}

pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// An HTTPS client for one hub endpoint (rustls, the settings' proxy and CAs).
#[derive(Clone)]
pub struct HubClient {
    http: reqwest::Client,
    endpoint: Url,
}

/// A transport error in words safe for status: never the URL, never the token.
fn transport_failure(e: &reqwest::Error) -> Failure {
    let text = format!("{e:?}").to_ascii_lowercase();
    let detail = if e.is_timeout() {
        "timeout"
    } else if text.contains("tls") || text.contains("certificate") {
        "TLS failure"
    } else {
        "connection failure"
    };
    Failure::new(Reason::SourceUnavailable, detail)
}

impl HubClient {
    /// A client for `settings`; a bad endpoint, proxy or CA is an `InvalidRequest` failure.
    pub fn new(settings: &HubSettings) -> Result<Self, Failure> {
        let invalid = |what: &str| Failure::new(Reason::InvalidRequest, what.to_owned());
        let endpoint_text = if settings.endpoint.is_empty() {
            DEFAULT_ENDPOINT
        } else {
            settings.endpoint.trim_end_matches('/')
        };
        let endpoint = Url::parse(endpoint_text)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
            .ok_or_else(|| invalid("spec.hub.huggingFaceEndpoint must be an http(s) URL"))?;
        let mut builder = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(30));
        if settings.https_proxy.is_empty() {
            builder = builder.no_proxy();
        } else {
            let proxy = reqwest::Proxy::all(&settings.https_proxy)
                .map_err(|_| invalid("spec.hub.httpsProxy must be a proxy URL"))?
                .no_proxy(reqwest::NoProxy::from_string(&settings.no_proxy));
            builder = builder.proxy(proxy);
        }
        if let Some(pem) = &settings.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .ok()
                .filter(|certs| !certs.is_empty())
                .ok_or_else(|| invalid("the CA bundle's ca.crt must hold PEM certificates"))?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder
            .build()
            .map_err(|_| invalid("the hub client could not be built from spec.hub"))?;
        Ok(Self { http, endpoint })
    }

    /// The hub's base URL.
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }

    fn api_url(&self, segments: &[&str]) -> Url {
        let mut url = self.endpoint.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty();
            for s in segments {
                for part in s.split('/') {
                    path.push(part);
                }
            }
        }
        url
    }

    /// `{ep}/{repo}/resolve/{commit}/{path}`.
    pub fn resolve_url(&self, repo: &str, commit: &str, path: &str) -> Url {
        self.api_url(&[repo, "resolve", commit, path])
    }

    /// GET with an optional bearer token and byte range, following up to ten redirects. The
    /// token is sent only while every hop stays on the first host and never downgrades to http.
    pub async fn get(
        &self,
        url: Url,
        token: Option<&HubToken>,
        range: Option<(u64, Option<u64>)>,
    ) -> Result<Response, Failure> {
        let mut url = url;
        let mut send_token = token.is_some();
        for _ in 0..=MAX_REDIRECTS {
            let mut req = self.http.get(url.clone());
            if let (true, Some(t)) = (send_token, token) {
                req = req.bearer_auth(&t.0);
            }
            if let Some((start, end)) = range {
                let value = match end {
                    Some(end) => format!("bytes={start}-{end}"),
                    None => format!("bytes={start}-"),
                };
                req = req.header(header::RANGE, value);
            }
            let resp = req.send().await.map_err(|e| transport_failure(&e))?;
            if !resp.status().is_redirection() || resp.status() == StatusCode::NOT_MODIFIED {
                return Ok(resp);
            }
            let next = resp
                .headers()
                .get(header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| url.join(l).ok())
                .ok_or_else(|| {
                    Failure::new(
                        Reason::SourceUnavailable,
                        "a redirect without a usable Location",
                    )
                })?;
            if !keeps_authorization(&url, &next) {
                send_token = false;
            }
            url = next;
        }
        Err(Failure::new(
            Reason::SourceUnavailable,
            "too many redirects",
        ))
    }

    async fn get_api_body(
        &self,
        url: Url,
        token: Option<&HubToken>,
    ) -> Result<(Url, Option<String>, Vec<u8>), ListingError> {
        let mut resp = self
            .get(url, token, None)
            .await
            .map_err(|f| ListingError::Unavailable(f.message))?;
        let final_url = resp.url().clone();
        if !resp.status().is_success() {
            let code = resp
                .headers()
                .get("x-error-code")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            return Err(listing::classify_status(
                resp.status().as_u16(),
                code.as_deref(),
            ));
        }
        let link = resp
            .headers()
            .get(header::LINK)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| ListingError::Unavailable(transport_failure(&e).message))?
        {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_PAGE_BYTES {
                return Err(ListingError::Invalid(
                    "a listing page exceeds 16 MiB".into(),
                ));
            }
        }
        Ok((final_url, link, body))
    }

    /// The commit a revision names (branches and annotated tags peeled by the hub).
    pub async fn resolve_revision(
        &self,
        repo: &str,
        revision: &str,
        token: Option<&HubToken>,
    ) -> Result<String, ListingError> {
        let url = self.api_url(&["api/models", repo, "revision", revision]);
        let (_, _, body) = self.get_api_body(url, token).await?;
        listing::parse_revision(&body)
    }

    /// Every file of the tree at `commit`, following `rel="next"` pages on the same host.
    pub async fn list_tree(
        &self,
        repo: &str,
        commit: &str,
        token: Option<&HubToken>,
    ) -> Result<Vec<ManifestEntry>, ListingError> {
        let mut url = self.api_url(&["api/models", repo, "tree", commit]);
        url.set_query(Some("recursive=true"));
        let first_origin = url.clone();
        let mut files = Vec::new();
        loop {
            let (final_url, link, body) = self.get_api_body(url, token).await?;
            files.extend(listing::parse_tree_page(&body)?);
            if files.len() > MAX_ENTRIES {
                return Err(ListingError::Invalid(
                    "the tree has more than 100000 entries".into(),
                ));
            }
            match link
                .map(|l| listing::next_page(&l, &final_url))
                .transpose()?
                .flatten()
            {
                Some(next) if listing::same_origin(&next, &first_origin) => url = next,
                Some(_) => {
                    return Err(ListingError::Invalid(
                        "the next page link leaves the hub's host".into(),
                    ));
                }
                None => return Ok(files),
            }
        }
    }
}

/// Whether a redirect from `from` to `to` may carry the `Authorization` header.
pub fn keeps_authorization(from: &Url, to: &Url) -> bool {
    let same_host = from.host_str() == to.host_str()
        && from.port_or_known_default() == to.port_or_known_default();
    let downgrade = from.scheme() == "https" && to.scheme() == "http";
    same_host && !downgrade
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_follows_only_same_host_without_downgrade() {
        let u = |s: &str| Url::parse(s).unwrap();
        let table = [
            ("https://hub.example/a", "https://hub.example/b", true),
            ("http://hub.example/a", "https://hub.example/b", false), // port 80 -> 443
            ("https://hub.example/a", "http://hub.example:443/b", false),
            ("https://hub.example/a", "https://cdn.example/b", false),
            ("http://127.0.0.1:8080/a", "http://127.0.0.1:8081/b", false),
            ("http://127.0.0.1:8080/a", "http://127.0.0.1:8080/b", true),
        ];
        for (from, to, want) in table {
            assert_eq!(
                keeps_authorization(&u(from), &u(to)),
                want,
                "{from} -> {to}"
            );
        }
    }

    #[test]
    fn urls_are_built_from_segments() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let c = HubClient::new(&HubSettings {
            endpoint: "http://127.0.0.1:1/mirror/".into(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            c.resolve_url("org/model", &"a".repeat(40), "sub dir/a#b.txt")
                .as_str(),
            format!(
                "http://127.0.0.1:1/mirror/org/model/resolve/{}/sub%20dir/a%23b.txt",
                "a".repeat(40)
            )
        );
        assert!(
            HubClient::new(&HubSettings {
                endpoint: "ftp://x".into(),
                ..Default::default()
            })
            .is_err()
        );
        assert_eq!(
            format!("{:?}", HubToken::new("hf_secret")),
            "Some(HubToken(<redacted>))"
        );
    }
}
