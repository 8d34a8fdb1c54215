//! Who is asking, and what they ask to do, as the cluster's authorizer sees it. Pure.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, Method};
use gpustack_kube_rest::path::{Route, parse};

pub use gpustack_delegated_auth::identity::{Attributes, User};

/// Paths every caller may reach, authenticated or not: health, metrics and the OpenAPI
/// documents (the aggregator fetches them). The admission webhooks are not among them: a
/// review must come from the API server (`Auth::check_review`).
pub fn always_allowed(path: &str) -> bool {
    matches!(path, "/livez" | "/readyz" | "/healthz" | "/metrics")
        || path.starts_with("/livez/")
        || path.starts_with("/readyz/")
        || path.starts_with("/healthz/")
        || path.starts_with("/openapi/")
}

/// The authorization attributes of a request.
pub fn attributes(method: &Method, path: &str, watch: bool) -> Attributes {
    match parse(path) {
        Route::Resource(p) => {
            let verb = match (method.as_str(), p.name.is_some()) {
                ("GET" | "HEAD", _) if watch || p.watch => "watch",
                ("GET" | "HEAD", true) => "get",
                ("GET" | "HEAD", false) => "list",
                ("POST", _) => "create",
                ("PUT", _) => "update",
                ("PATCH", _) => "patch",
                ("DELETE", true) => "delete",
                ("DELETE", false) => "deletecollection",
                (other, _) => return non_resource(other, path),
            };
            Attributes::Resource {
                verb: verb.into(),
                group: p.group,
                version: p.version,
                resource: p.resource,
                subresource: p.subresource.unwrap_or_default(),
                namespace: p.namespace.unwrap_or_default(),
                name: p.name.unwrap_or_default(),
            }
        }
        _ => non_resource(method.as_str(), path),
    }
}

fn non_resource(method: &str, path: &str) -> Attributes {
    Attributes::NonResource {
        verb: method.to_ascii_lowercase(),
        path: path.to_owned(),
    }
}

/// The user the front proxy vouches for, from its headers (trusted only after its client
/// certificate was verified); `None` without a user name.
pub fn from_request_headers(headers: &HeaderMap, names: &HeaderNames) -> Option<User> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect()
    };
    let name = names
        .username
        .iter()
        .find_map(|h| values(h).into_iter().find(|v| !v.is_empty()))?;
    let groups = names.group.iter().flat_map(|h| values(h)).collect();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (header, value) in headers {
        let h = header.as_str();
        for prefix in &names.extra_prefix {
            if let Some(key) = h.strip_prefix(&prefix.to_ascii_lowercase())
                && let Ok(v) = value.to_str()
            {
                extra
                    .entry(percent_decode(key))
                    .or_default()
                    .push(v.to_owned());
            }
        }
    }
    Some(User {
        name,
        uid: String::new(),
        groups,
        extra,
    })
}

/// The header names the front proxy uses (from the cluster's
/// `extension-apiserver-authentication` ConfigMap).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderNames {
    /// Headers naming the user.
    pub username: Vec<String>,
    /// Headers naming the groups.
    pub group: Vec<String>,
    /// Prefixes of headers naming extra attributes.
    pub extra_prefix: Vec<String>,
}

impl Default for HeaderNames {
    fn default() -> Self {
        HeaderNames {
            username: vec!["X-Remote-User".into()],
            group: vec!["X-Remote-Group".into()],
            extra_prefix: vec!["X-Remote-Extra-".into()],
        }
    }
}

/// Extra keys arrive percent-encoded (as kube-apiserver sends them).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn verbs_follow_the_method_and_the_path() {
        let get = |m: Method, p: &str, w: bool| match attributes(&m, p, w) {
            Attributes::Resource { verb, .. } => verb,
            Attributes::NonResource { verb, .. } => format!("nonresource:{verb}"),
        };
        let devs = "/apis/worker.gpustack.ai/v1/devices";
        assert_eq!(get(Method::GET, devs, false), "list");
        assert_eq!(get(Method::GET, devs, true), "watch");
        assert_eq!(get(Method::GET, &format!("{devs}/n"), false), "get");
        assert_eq!(get(Method::DELETE, devs, false), "deletecollection");
        assert_eq!(get(Method::DELETE, &format!("{devs}/n"), false), "delete");
        assert_eq!(
            get(Method::PATCH, &format!("{devs}/n/status"), false),
            "patch"
        );
        assert_eq!(get(Method::GET, "/apis", false), "nonresource:get");
        let Attributes::Resource {
            namespace,
            resource,
            subresource,
            group,
            ..
        } = attributes(
            &Method::PUT,
            "/apis/gpustack.ai/v1/namespaces/gpustack-system/settings/x",
            false,
        )
        else {
            panic!()
        };
        assert_eq!(
            (
                namespace.as_str(),
                resource.as_str(),
                subresource.as_str(),
                group.as_str()
            ),
            ("gpustack-system", "settings", "", "gpustack.ai")
        );
    }

    #[test]
    fn front_proxy_headers_make_the_user() {
        let mut h = HeaderMap::new();
        h.insert("x-remote-user", HeaderValue::from_static("alice"));
        h.append("x-remote-group", HeaderValue::from_static("dev"));
        h.append(
            "x-remote-group",
            HeaderValue::from_static("system:authenticated"),
        );
        h.insert("x-remote-extra-scopes%2fa", HeaderValue::from_static("s1"));
        let u = from_request_headers(&h, &HeaderNames::default()).unwrap();
        assert_eq!(u.name, "alice");
        assert_eq!(u.groups, ["dev", "system:authenticated"]);
        assert_eq!(u.extra["scopes/a"], ["s1"]);
        assert!(from_request_headers(&HeaderMap::new(), &HeaderNames::default()).is_none());
    }

    #[test]
    fn open_paths() {
        for p in ["/livez", "/readyz", "/metrics", "/openapi/v2"] {
            assert!(always_allowed(p), "{p}");
        }
        for p in [
            "/apis",
            "/apis/worker.gpustack.ai/v1/devices",
            "/version",
            "/metricsx",
            "/mutate-gpustack-worker-core-v1-pod",
            "/validate-gpustack-worker-core-v1-pod",
        ] {
            assert!(!always_allowed(p), "{p}");
        }
    }
}
