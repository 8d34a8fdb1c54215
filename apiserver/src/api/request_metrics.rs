//! Requests answered, by method and status code, counted around everything a listener serves
//! (the clusters and what the hub adds); and the refusal of methods HTTP does not define,
//! before any of it is reached.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use axum::{
    extract::{Request, State},
    http::{Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::status::ApiError;

/// Requests answered, by method and status code.
#[derive(Clone, Default)]
pub struct RequestMetrics {
    counts: Arc<Mutex<BTreeMap<(String, u16), u64>>>,
}

impl RequestMetrics {
    pub fn count(&self, method: &Method, code: StatusCode) {
        let mut m = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry((method_label(method).to_owned(), code.as_u16()))
            .or_default() += 1;
    }

    /// The counts so far, by (method label, status code).
    pub fn snapshot(&self) -> BTreeMap<(String, u16), u64> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The `method` label: the methods HTTP defines, and `other` for anything a client invents, so
/// that the label set stays bounded whatever is sent.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// Whether HTTP defines `method` (anything else is a client's invention).
pub fn is_standard_method(method: &Method) -> bool {
    method_label(method) != "other"
}

/// The outermost layer of a listener: a method HTTP does not define names no verb of any path
/// here (405), and every answer is counted.
pub async fn count_and_refuse_unknown_methods(
    State(metrics): State<RequestMetrics>,
    req: Request,
    next: Next,
) -> Response {
    let method = req.method().clone();
    let response = if is_standard_method(&method) {
        next.run(req).await
    } else {
        ApiError::method_not_allowed(method.as_str()).into_response()
    };
    metrics.count(&method, response.status());
    response
}
