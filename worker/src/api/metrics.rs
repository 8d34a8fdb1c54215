//! `/metrics`: requests served by verb, resource and code, how long they took, and the watches
//! open.

use std::time::Duration;

use axum::body::Body;
use axum::{
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::auth::identity::Attributes;

/// The worker API's request metrics and its registry.
pub struct Metrics {
    /// The resources served: the only values the `resource` label takes besides `other`.
    known: Vec<String>,
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    watches: IntGaugeVec,
}

impl Metrics {
    /// Series for the resources `known` (other names count as `other`).
    pub fn new(known: Vec<String>) -> Self {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "gpustack_worker_api_requests_total",
                "Requests to the worker's API by verb, resource and answer code.",
            ),
            &["verb", "resource", "code"],
        )
        .expect("valid metric");
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "gpustack_worker_api_request_duration_seconds",
                "Time to the answer's headers (a watch counts until it starts).",
            )
            .buckets(vec![
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
            ]),
            &["verb", "resource"],
        )
        .expect("valid metric");
        let watches = IntGaugeVec::new(
            Opts::new(
                "gpustack_worker_api_watches",
                "Watches open on the worker's API, by resource.",
            ),
            &["resource"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(watches.clone()))
            .expect("registered once");
        registry
            .register(Box::new(requests.clone()))
            .expect("registered once");
        registry
            .register(Box::new(latency.clone()))
            .expect("registered once");
        Metrics {
            known,
            registry,
            requests,
            latency,
            watches,
        }
    }

    /// The registry `/metrics` serves, for the other parts of the worker to register in.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The `verb` and `resource` labels of a request. Label values come from a fixed
    /// vocabulary: a non-resource path is not a label (it is whatever the client sent).
    fn labels<'a>(&self, attrs: &'a Attributes) -> (&'a str, &'a str) {
        let (verb, resource) = match attrs {
            Attributes::Resource { verb, resource, .. } => (verb.as_str(), resource.as_str()),
            Attributes::NonResource { .. } => ("other", ""),
        };
        let known = self.known.iter().any(|k| k == resource);
        (verb, if known { resource } else { "other" })
    }

    /// A watch's answer, counted among the open ones until its body is dropped.
    pub fn watching(&self, attrs: &Attributes, body: Body) -> Body {
        let (_, resource) = self.labels(attrs);
        let gauge = self.watches.with_label_values(&[resource]);
        gpustack_serving::open_gauge::counted_while_open(body, gauge)
    }

    /// Records one answered request.
    pub fn observe(&self, attrs: &Attributes, code: u16, took: Duration) {
        let (verb, resource) = self.labels(attrs);
        self.requests
            .with_label_values(&[verb, resource, &code.to_string()])
            .inc();
        self.latency
            .with_label_values(&[verb, resource])
            .observe(took.as_secs_f64());
    }

    /// The `/metrics` answer.
    pub fn render(&self) -> Response {
        let mut out = Vec::new();
        if TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .is_err()
        {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            out,
        )
            .into_response()
    }
}
