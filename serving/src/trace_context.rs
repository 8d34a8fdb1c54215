//! Traces across hops: a server span per request (HTTP or gRPC) whose parent is the caller's
//! W3C `traceparent`, and the current span's context written on outgoing requests, so that
//! one client request through every component is one trace.
//!
//! The spans are at `debug` level: with neither `-v` nor an exporter they are disabled, and
//! each request pays one level check (the route is not even computed). Whether a span is
//! exported is the binary's choice (its subscriber's OpenTelemetry layer, `src/logging.rs`).
//!
//! Propagation goes through opentelemetry's global text-map propagator, the one process-wide
//! value here: it is opentelemetry's own API for it, and the binary installs the W3C one only
//! when it exports (until then it is the no-op one, which reads and writes nothing).

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use opentelemetry::{
    propagation::{Extractor, Injector},
    trace::TraceContextExt,
};
use tracing::{Span, field::Empty};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C header that carries the caller's trace and span.
pub const TRACEPARENT: &str = "traceparent";

struct Reading<'a>(&'a HeaderMap);

impl Extractor for Reading<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct Writing<'a>(&'a mut HeaderMap);

impl Injector for Writing<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// Makes the caller's trace (its `traceparent`) the parent of `span`, which must not have been
/// entered yet. Nothing is read for a disabled span or a request without trace context.
pub fn adopt_parent(span: &Span, headers: &HeaderMap) {
    if span.is_disabled() || !headers.contains_key(TRACEPARENT) {
        return;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Reading(headers)));
    // Without an OpenTelemetry layer there is no trace to join: nothing to do, not an error.
    let _ = span.set_parent(parent);
}

/// Writes `span`'s trace context into `headers` (replacing any a caller sent), so that the next
/// hop's spans join its trace. Nothing is written unless `span` is exported.
pub fn inject(span: &Span, headers: &mut HeaderMap) {
    if span.is_disabled() {
        return;
    }
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return;
    }
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&cx, &mut Writing(headers))
    });
}

/// A client layer: every request carries the trace context of the span it is sent from (kube
/// clients, built by the binary).
#[derive(Clone, Copy, Debug, Default)]
pub struct InjectLayer;

impl<S> tower::Layer<S> for InjectLayer {
    type Service = Injecting<S>;

    fn layer(&self, inner: S) -> Injecting<S> {
        Injecting { inner }
    }
}

/// See [`InjectLayer`].
#[derive(Clone, Debug)]
pub struct Injecting<S> {
    inner: S,
}

impl<S, B> tower::Service<Request<B>> for Injecting<S>
where
    S: tower::Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> S::Future {
        inject(&Span::current(), req.headers_mut());
        self.inner.call(req)
    }
}

/// What a server speaks, which names its spans' attributes (OpenTelemetry's semantic
/// conventions for HTTP and RPC servers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Http,
    Grpc,
}

/// A server layer: a root span per request (or the child of the caller's `traceparent`),
/// named by its method and route template, closed with the answer's status once its headers
/// are ready (a watch's or a stream's body flows after it).
#[derive(Clone, Copy)]
pub struct ServerSpans {
    protocol: Protocol,
    /// The route template of a path: never the raw path, which names objects.
    route: fn(&str) -> String,
}

impl ServerSpans {
    /// HTTP requests, their routes named by `route`.
    pub fn http(route: fn(&str) -> String) -> Self {
        ServerSpans {
            protocol: Protocol::Http,
            route,
        }
    }

    /// gRPC calls: the path is the method (`/package.Service/Method`), a bounded set.
    pub fn grpc() -> Self {
        ServerSpans {
            protocol: Protocol::Grpc,
            route: |path| path.trim_start_matches('/').to_owned(),
        }
    }

    fn open<B>(&self, req: &Request<B>) -> Span {
        // One callsite for both protocols: a field left unrecorded is not exported.
        let span = tracing::debug_span!(
            parent: None,
            "request",
            otel.name = Empty,
            otel.kind = "server",
            otel.status_code = Empty,
            http.request.method = Empty,
            http.route = Empty,
            http.response.status_code = Empty,
            rpc.system = Empty,
            rpc.method = Empty,
            rpc.grpc.status_code = Empty,
        );
        if span.is_disabled() {
            return span;
        }
        let route = (self.route)(req.uri().path());
        match self.protocol {
            Protocol::Http => {
                let method = req.method().as_str();
                span.record("otel.name", format!("{method} {route}").as_str());
                span.record("http.request.method", method);
                span.record("http.route", route.as_str());
            }
            Protocol::Grpc => {
                span.record("otel.name", route.as_str());
                span.record("rpc.system", "grpc");
                span.record("rpc.method", route.as_str());
            }
        }
        adopt_parent(&span, req.headers());
        span
    }

    /// Records the answer's status on `span`; whether the span must wait for the body's
    /// trailers (a gRPC answer whose status is not in its headers: a success's never is).
    fn close<B>(&self, span: &Span, response: &Response<B>) -> bool {
        if span.is_disabled() {
            return false;
        }
        let status = response.status();
        match self.protocol {
            Protocol::Http => {
                span.record("http.response.status_code", status.as_u16());
                if status.is_server_error() {
                    span.record("otel.status_code", "ERROR");
                }
            }
            Protocol::Grpc => {
                // Known here when the answer is trailers-only (how an error is sent); a
                // success's status comes in the trailers, read by the body (TracedBody).
                if record_grpc_status(span, response.headers()) {
                    return false;
                }
                if !status.is_success() {
                    span.record("otel.status_code", "ERROR");
                    return false;
                }
                return true;
            }
        }
        false
    }
}

/// Records the `grpc-status` of `headers` (an answer's headers or trailers) on `span`; whether
/// there was one.
fn record_grpc_status(span: &Span, headers: &HeaderMap) -> bool {
    let Some(code) = headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
    else {
        return false;
    };
    span.record("rpc.grpc.status_code", code);
    if code != 0 {
        span.record("otel.status_code", "ERROR");
    }
    true
}

impl<S> tower::Layer<S> for ServerSpans {
    type Service = Traced<S>;

    fn layer(&self, inner: S) -> Traced<S> {
        Traced {
            inner,
            spans: *self,
        }
    }
}

/// See [`ServerSpans`].
#[derive(Clone)]
pub struct Traced<S> {
    inner: S,
    spans: ServerSpans,
}

impl<S, B, R> tower::Service<Request<B>> for Traced<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
{
    type Response = Response<TracedBody<R>>;
    type Error = S::Error;
    type Future = TracedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let span = self.spans.open(&req);
        let inner = {
            let _entered = span.enter();
            self.inner.call(req)
        };
        TracedFuture {
            inner,
            span,
            spans: self.spans,
        }
    }
}

pin_project_lite::pin_project! {
    /// A request's answer, polled inside its span.
    pub struct TracedFuture<F> {
        #[pin]
        inner: F,
        span: Span,
        spans: ServerSpans,
    }
}

impl<F, R, E> Future for TracedFuture<F>
where
    F: Future<Output = Result<Response<R>, E>>,
{
    type Output = Result<Response<TracedBody<R>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        let answer = std::task::ready!(this.inner.poll(cx));
        let trailers = match &answer {
            Ok(response) => this.spans.close(this.span, response),
            Err(_) => false,
        };
        Poll::Ready(answer.map(|response| {
            response.map(|inner| TracedBody {
                inner,
                span: trailers.then(|| this.span.clone()),
            })
        }))
    }
}

pin_project_lite::pin_project! {
    /// An answer's body. A gRPC answer's keeps the call's span open until its trailers,
    /// whose `grpc-status` it records (the span ends with the call, as OpenTelemetry's gRPC
    /// instrumentation has it); any other passes through untouched.
    pub struct TracedBody<B> {
        #[pin]
        inner: B,
        span: Option<Span>,
    }
}

impl<B: http_body::Body> http_body::Body for TracedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let frame = std::task::ready!(this.inner.poll_frame(cx));
        let ended = match &frame {
            Some(Ok(f)) => match (f.trailers_ref(), this.span.as_ref()) {
                (Some(trailers), Some(span)) => {
                    record_grpc_status(span, trailers);
                    true
                }
                _ => false,
            },
            // An error or the end without trailers: the span ends as it is.
            Some(Err(_)) | None => true,
        };
        if ended {
            *this.span = None;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::{
        propagation::TraceContextPropagator,
        trace::{InMemorySpanExporter, SdkTracerProvider},
    };
    use tower::{Layer, Service, ServiceExt};
    use tracing_subscriber::layer::SubscriberExt;

    const CALLER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    /// A subscriber exporting to memory, and the W3C propagator (as the binary installs them).
    fn exporting() -> (InMemorySpanExporter, SdkTracerProvider, tracing::Dispatch) {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        (exporter, provider, tracing::Dispatch::new(subscriber))
    }

    fn answer_ok(req: Request<()>) -> std::future::Ready<Result<Response<()>, ()>> {
        let mut out = HeaderMap::new();
        // What the next hop would be sent from inside the request's span.
        inject(&Span::current(), &mut out);
        let mut response = Response::new(());
        *response.status_mut() = http::StatusCode::CREATED;
        response.headers_mut().extend(out);
        let _ = req;
        std::future::ready(Ok(response))
    }

    #[tokio::test]
    async fn a_request_joins_its_callers_trace_and_passes_it_on() {
        let (exporter, provider, dispatch) = exporting();
        let _default = tracing::dispatcher::set_default(&dispatch);
        let route = |path: &str| path.replace("/objects/x", "/objects/{name}");
        let mut service = ServerSpans::http(route).layer(tower::service_fn(answer_ok));
        let req = Request::post("/objects/x")
            .header(TRACEPARENT, CALLER)
            .body(())
            .unwrap();
        let response = service.ready().await.unwrap().call(req).await.unwrap();
        let sent = response.headers()[TRACEPARENT].to_str().unwrap().to_owned();
        drop(_default);
        provider.force_flush().unwrap();
        let spans = exporter.get_finished_spans().unwrap();
        let [span] = spans.as_slice() else {
            panic!("{spans:?}")
        };
        assert_eq!(span.name, "POST /objects/{name}");
        assert_eq!(
            span.span_context.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(span.parent_span_id.to_string(), "b7ad6b7169203331");
        let attribute = |k: &str| {
            span.attributes
                .iter()
                .find(|kv| kv.key.as_str() == k)
                .map(|kv| kv.value.to_string())
        };
        assert_eq!(attribute("http.route").as_deref(), Some("/objects/{name}"));
        assert_eq!(
            attribute("http.response.status_code").as_deref(),
            Some("201")
        );
        // The next hop's parent is this span, in the same trace.
        assert_eq!(
            sent,
            format!(
                "00-0af7651916cd43dd8448eb211c80319c-{}-01",
                span.span_context.span_id()
            )
        );
    }

    /// A body of the frames given, one per poll.
    struct Frames(std::collections::VecDeque<http_body::Frame<hyper::body::Bytes>>);

    impl http_body::Body for Frames {
        type Data = hyper::body::Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(Ok))
        }
    }

    #[tokio::test]
    async fn a_grpc_success_records_the_status_its_trailers_carry() {
        use http_body_util::BodyExt;
        let (exporter, provider, dispatch) = exporting();
        let _default = tracing::dispatcher::set_default(&dispatch);
        let mut service = ServerSpans::grpc().layer(tower::service_fn(|_: Request<()>| async {
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", HeaderValue::from_static("0"));
            let frames = [
                http_body::Frame::data(hyper::body::Bytes::from_static(b"\0\0\0\0\0")),
                http_body::Frame::trailers(trailers),
            ];
            Ok::<_, ()>(Response::new(Frames(frames.into())))
        }));
        let req = Request::post("/v1beta1.DevicePlugin/GetDevicePluginOptions")
            .header(TRACEPARENT, CALLER)
            .body(())
            .unwrap();
        let response = service.ready().await.unwrap().call(req).await.unwrap();
        provider.force_flush().unwrap();
        assert!(
            exporter.get_finished_spans().unwrap().is_empty(),
            "the call's span waits for its trailers"
        );
        let body = response.into_body().collect().await.unwrap();
        assert!(body.trailers().is_some());
        drop(_default);
        provider.force_flush().unwrap();
        let spans = exporter.get_finished_spans().unwrap();
        let [span] = spans.as_slice() else {
            panic!("{spans:?}")
        };
        assert_eq!(span.name, "v1beta1.DevicePlugin/GetDevicePluginOptions");
        assert_eq!(span.parent_span_id.to_string(), "b7ad6b7169203331");
        let status = span
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == "rpc.grpc.status_code")
            .map(|kv| kv.value.to_string());
        assert_eq!(status.as_deref(), Some("0"));
    }

    #[tokio::test]
    async fn nothing_is_read_or_written_without_an_exporter() {
        use tracing_subscriber::{Layer as _, filter::LevelFilter};
        // Logging at info (the binary at -v=0 without an exporter): the span is disabled and
        // the route is never computed.
        let logging = |level: LevelFilter| {
            tracing_subscriber::registry().with(
                tracing_subscriber::fmt::layer()
                    .with_test_writer()
                    .with_filter(level),
            )
        };
        let default = tracing::subscriber::set_default(logging(LevelFilter::INFO));
        let route = |_: &str| -> String { panic!("the route of a disabled span was computed") };
        let mut service = ServerSpans::http(route).layer(tower::service_fn(answer_ok));
        let req = Request::get("/objects/x")
            .header(TRACEPARENT, CALLER)
            .body(())
            .unwrap();
        let response = service.ready().await.unwrap().call(req).await.unwrap();
        assert!(response.headers().get(TRACEPARENT).is_none());
        drop(default);
        // Logging at -v=3 without an exporter: the span lives, no trace context is sent.
        let _default = tracing::subscriber::set_default(logging(LevelFilter::TRACE));
        let mut headers = HeaderMap::new();
        let span = tracing::debug_span!("request");
        assert!(!span.is_disabled());
        inject(&span, &mut headers);
        assert!(headers.is_empty());
    }

    #[tokio::test]
    async fn outgoing_requests_carry_the_current_span() {
        let (_exporter, _provider, dispatch) = exporting();
        let _default = tracing::dispatcher::set_default(&dispatch);
        let mut client = InjectLayer.layer(tower::service_fn(|req: Request<()>| async move {
            Ok::<_, ()>(req.headers().get(TRACEPARENT).cloned())
        }));
        let none = client
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap();
        assert!(none.is_none(), "no span, no trace context");
        let span = tracing::info_span!("reconcile");
        let ready = client.ready().await.unwrap();
        // Sent from inside the span, as a reconcile's request is.
        let sending = {
            let _entered = span.enter();
            ready.call(Request::new(()))
        };
        let sent = sending.await.unwrap().expect("a traceparent");
        let sent = sent.to_str().unwrap().to_owned();
        let cx = span.context();
        let expected = cx.span().span_context().trace_id().to_string();
        assert!(sent.contains(&expected), "{sent} lacks {expected}");
    }
}
