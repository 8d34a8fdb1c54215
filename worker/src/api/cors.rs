//! `--cors-allowed-origins`: origins (anchored regular expressions) whose browsers may call the
//! API; an empty list allows every origin, as the flag says.

use axum::{
    http::{HeaderValue, Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use regex::Regex;

/// The CORS policy of `--cors-allowed-origins`.
pub struct Cors {
    origins: Vec<Regex>,
}

impl Cors {
    /// `patterns` were checked when the flags were parsed; any that fails here is skipped.
    pub fn new(patterns: &[String]) -> Self {
        Cors {
            origins: patterns
                .iter()
                .filter_map(|p| Regex::new(&format!("^(?:{p})$")).ok())
                .collect(),
        }
    }

    fn allows(&self, origin: &HeaderValue) -> bool {
        let Ok(o) = origin.to_str() else {
            return false;
        };
        self.origins.is_empty() || self.origins.iter().any(|r| r.is_match(o))
    }

    /// The answer to a CORS preflight (`OPTIONS` with an `Origin`), if this is one.
    pub fn preflight(&self, method: &Method, origin: Option<&HeaderValue>) -> Option<Response> {
        let origin = origin?;
        if method != Method::OPTIONS {
            return None;
        }
        let mut r = StatusCode::NO_CONTENT.into_response();
        self.decorate(Some(origin), &mut r);
        if self.allows(origin) {
            let h = r.headers_mut();
            h.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("POST, GET, OPTIONS, PUT, DELETE, PATCH"),
            );
            h.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static(
                    "Content-Type, Content-Length, Accept-Encoding, X-CSRF-Token, Authorization, X-Requested-With, If-Modified-Since",
                ),
            );
        }
        Some(r)
    }

    /// Adds the CORS headers an allowed origin gets.
    pub fn decorate(&self, origin: Option<&HeaderValue>, response: &mut Response) {
        let Some(origin) = origin.filter(|o| self.allows(o)) else {
            return;
        };
        let h = response.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        h.insert(
            header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
            HeaderValue::from_static("true"),
        );
        h.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("Date"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchored_origins() {
        let c = Cors::new(&["https://a\\.example".to_owned()]);
        let ok = HeaderValue::from_static("https://a.example");
        let bad = HeaderValue::from_static("https://a.example.evil");
        assert!(
            c.preflight(&Method::OPTIONS, Some(&ok))
                .unwrap()
                .headers()
                .contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN)
        );
        assert!(
            !c.preflight(&Method::OPTIONS, Some(&bad))
                .unwrap()
                .headers()
                .contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN)
        );
        assert!(c.preflight(&Method::GET, Some(&ok)).is_none());
        assert!(Cors::new(&[]).allows(&bad));
    }
}
