//! Requests answered, counted around everything a listener serves (the clusters and what the
//! hub adds): by method and status code, and by verb, resource and code with their durations,
//! as kube-apiserver's `apiserver_request_total` and `apiserver_request_duration_seconds`; the
//! watches open by resource (as `apiserver_longrunning_requests`); and the refusal of methods HTTP does not define, before any of it is reached.
//!
//! Every label value comes from a bounded set: the methods HTTP defines (else `other`), the
//! verbs, the resources the addressed cluster serves (else `other`), and status codes.

use std::time::Instant;

use axum::{
    extract::{Request, State},
    http::{Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};

use super::{
    auth::resource_verb,
    path::{ResourcePath, Route, parse, split_cluster},
    status::ApiError,
};

/// kube-apiserver's `apiserver_request_duration_seconds` buckets, so that dashboards and SLOs
/// written for it read these too.
const DURATION_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// The `resource` label of a resource path the addressed cluster does not serve.
pub const OTHER_RESOURCE: &str = "other";

/// The resource a request named, once the pipeline found its cluster serves it: the only way
/// a resource's name reaches a label. Carried back on the response's extensions.
#[derive(Clone, Debug)]
pub struct ServedResource(pub String);

impl ServedResource {
    /// The label of `p`: the plural, with its group when it has one (`deployments.apps`).
    pub fn of(p: &ResourcePath) -> Self {
        if p.group.is_empty() {
            ServedResource(p.resource.clone())
        } else {
            ServedResource(format!("{}.{}", p.resource, p.group))
        }
    }
}

/// Requests answered, registered in the registry passed in.
#[derive(Clone)]
pub struct RequestMetrics {
    by_method: IntCounterVec,
    by_resource: IntCounterVec,
    duration: HistogramVec,
    watches: IntGaugeVec,
}

impl RequestMetrics {
    /// The request metrics, registered in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let by_method = IntCounterVec::new(
            Opts::new(
                "gpustack_gateway_http_requests_total",
                "HTTP requests answered, by method and status code.",
            ),
            &["method", "code"],
        )?;
        let by_resource = IntCounterVec::new(
            Opts::new(
                "gpustack_gateway_api_requests_total",
                "API requests answered, by verb, resource and status code.",
            ),
            &["verb", "resource", "code"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "gpustack_gateway_api_request_duration_seconds",
                "Time to the answer's headers, by verb and resource (a watch counts until it starts).",
            )
            .buckets(DURATION_BUCKETS.to_vec()),
            &["verb", "resource"],
        )?;
        let watches = IntGaugeVec::new(
            Opts::new("gpustack_gateway_api_watches", "Watches open, by resource."),
            &["resource"],
        )?;
        registry.register(Box::new(watches.clone()))?;
        registry.register(Box::new(by_method.clone()))?;
        registry.register(Box::new(by_resource.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        Ok(RequestMetrics {
            by_method,
            by_resource,
            duration,
            watches,
        })
    }

    /// Counts one answer.
    pub fn observe(&self, labels: &Labels, code: StatusCode, seconds: f64) {
        let code = code.as_str();
        self.by_method
            .with_label_values(&[labels.method, code])
            .inc();
        self.by_resource
            .with_label_values(&[labels.verb, &labels.resource, code])
            .inc();
        self.duration
            .with_label_values(&[labels.verb, &labels.resource])
            .observe(seconds);
    }
}

/// The labels of one request.
#[derive(Debug, PartialEq, Eq)]
pub struct Labels {
    /// The HTTP method, as its metric label.
    pub method: &'static str,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, ...).
    pub verb: &'static str,
    /// Empty for a path that names no resource (discovery, health, the hub's endpoints).
    pub resource: String,
}

impl Labels {
    /// The labels of a request for `path?query`, given what the pipeline found it served.
    pub fn of(method: &Method, path: &str, query: &str, served: Option<&ServedResource>) -> Self {
        let method_label = method_label(method);
        let (verb, resource) = match parse(split_cluster(path).1) {
            Route::Resource(p) => {
                let verb = match resource_verb(method, &p, query) {
                    "" => "other",
                    v => v,
                };
                let resource = served.map_or(OTHER_RESOURCE, |s| s.0.as_str());
                (verb, resource.to_owned())
            }
            _ => (lowercase_method(method_label), String::new()),
        };
        Labels {
            method: method_label,
            verb,
            resource,
        }
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

/// The verb of a request for a path that names no resource: its method, as RBAC's
/// non-resource verbs are.
fn lowercase_method(label: &'static str) -> &'static str {
    match label {
        "GET" => "get",
        "HEAD" => "head",
        "POST" => "post",
        "PUT" => "put",
        "PATCH" => "patch",
        "DELETE" => "delete",
        "OPTIONS" => "options",
        "CONNECT" => "connect",
        "TRACE" => "trace",
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
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or_default().to_owned();
    let response = if is_standard_method(&method) {
        next.run(req).await
    } else {
        ApiError::method_not_allowed(method.as_str()).into_response()
    };
    let labels = Labels::of(
        &method,
        &path,
        &query,
        response.extensions().get::<ServedResource>(),
    );
    metrics.observe(&labels, response.status(), started.elapsed().as_secs_f64());
    if labels.verb == "watch" && response.status().is_success() {
        let gauge = metrics.watches.with_label_values(&[&labels.resource]);
        return response.map(|body| gpustack_serving::open_gauge::counted_while_open(body, gauge));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(s: &str) -> ServedResource {
        ServedResource(s.to_owned())
    }

    #[test]
    fn verbs_follow_the_method_and_the_path() {
        let cm = served("configmaps");
        let cases = [
            (Method::GET, "/api/v1/namespaces/d/configmaps/x", "", "get"),
            (Method::GET, "/api/v1/namespaces/d/configmaps", "", "list"),
            (Method::GET, "/api/v1/configmaps", "watch=true", "watch"),
            (
                Method::POST,
                "/api/v1/namespaces/d/configmaps",
                "",
                "create",
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/d/configmaps/x",
                "",
                "update",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/d/configmaps",
                "",
                "deletecollection",
            ),
            (
                Method::OPTIONS,
                "/api/v1/namespaces/d/configmaps",
                "",
                "other",
            ),
        ];
        for (method, path, query, verb) in cases {
            let l = Labels::of(&method, path, query, Some(&cm));
            assert_eq!(
                (l.verb, l.resource.as_str()),
                (verb, "configmaps"),
                "{path}"
            );
        }
    }

    #[test]
    fn only_a_served_resource_names_its_label() {
        let path = "/clusters/c/api/v1/namespaces/d/madeup-1234";
        let l = Labels::of(&Method::GET, path, "", None);
        assert_eq!(l.resource, OTHER_RESOURCE);
        // A path that names no resource: its method is the verb, and no resource.
        let l = Labels::of(&Method::GET, "/metrics", "", None);
        assert_eq!((l.method, l.verb, l.resource.as_str()), ("GET", "get", ""));
        let invented = Method::from_bytes(b"INVENTED").unwrap();
        let l = Labels::of(&invented, "/api", "", None);
        assert_eq!((l.method, l.verb), ("other", "other"));
    }

    #[test]
    fn a_grouped_resource_carries_its_group() {
        let p = match parse("/apis/apps/v1/namespaces/d/deployments/x") {
            Route::Resource(p) => p,
            r => panic!("{r:?}"),
        };
        assert_eq!(ServedResource::of(&p).0, "deployments.apps");
    }

    #[test]
    fn answers_are_counted_in_the_registry_passed_in() {
        let registry = Registry::new();
        let m = RequestMetrics::register(&registry).unwrap();
        let labels = Labels::of(&Method::GET, "/api/v1/pods", "", Some(&served("pods")));
        m.observe(&labels, StatusCode::OK, 0.03);
        let families = registry.gather();
        let names: Vec<&str> = families.iter().map(|f| f.name()).collect();
        assert_eq!(
            names,
            [
                "gpustack_gateway_api_request_duration_seconds",
                "gpustack_gateway_api_requests_total",
                "gpustack_gateway_http_requests_total",
            ],
            "the watches gauge has no series until a watch opens"
        );
        let h = m.duration.with_label_values(&["list", "pods"]);
        assert_eq!(h.get_sample_count(), 1);
        // A second registration of the same names is refused, not merged.
        assert!(RequestMetrics::register(&registry).is_err());
    }
}
