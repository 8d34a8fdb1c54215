//! gRPC calls counted by method and code and timed, as a tower layer on a tonic server (the
//! device plugin's, the CSI driver's): `<prefix>_grpc_calls_total{method, code}` and
//! `<prefix>_grpc_call_duration_seconds{method}`, in the registry passed in.
//!
//! The code is the answer's `grpc-status`: from its headers when the server answered at once
//! (an error), else from its trailers when the body ends. A call whose answer is dropped
//! before its trailers (the client went away mid-stream) counts as `Cancelled`. Label values
//! are bounded: the methods the server declares (else `other`) and the seventeen codes.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Instant,
};

use http::{HeaderMap, Request, Response};
use http_body::{Body, Frame, SizeHint};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

/// gRPC's status codes, by number, as their canonical names.
const CODES: [&str; 17] = [
    "OK",
    "Cancelled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
];

/// The label of a `grpc-status` value, if it carries one.
fn code_of(headers: &HeaderMap) -> Option<&'static str> {
    let v = headers.get("grpc-status")?.to_str().ok()?;
    Some(
        v.parse::<usize>()
            .ok()
            .and_then(|n| CODES.get(n).copied())
            .unwrap_or("Unknown"),
    )
}

/// The series, and the methods whose paths may name a label.
#[derive(Clone)]
pub struct GrpcMetrics {
    calls: IntCounterVec,
    duration: HistogramVec,
    methods: Arc<[&'static str]>,
}

impl GrpcMetrics {
    /// Registers the series as `<prefix>_grpc_…`; `methods` are the paths served
    /// (`/v1beta1.DevicePlugin/Allocate`).
    pub fn register(
        registry: &Registry,
        prefix: &str,
        methods: &[&'static str],
    ) -> Result<Self, prometheus::Error> {
        let calls = IntCounterVec::new(
            Opts::new(
                format!("{prefix}_grpc_calls_total"),
                "gRPC calls answered, by method and status code.",
            ),
            &["method", "code"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                format!("{prefix}_grpc_call_duration_seconds"),
                "Time from a call's request to its status (a stream counts until it ends).",
            )
            .buckets(vec![
                0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 300.0,
            ]),
            &["method"],
        )?;
        registry.register(Box::new(calls.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        Ok(GrpcMetrics {
            calls,
            duration,
            methods: methods.into(),
        })
    }

    fn method(&self, path: &str) -> &'static str {
        self.methods
            .iter()
            .find(|m| **m == path)
            .copied()
            .unwrap_or("other")
    }

    fn observe(&self, method: &str, code: &str, started: Instant) {
        self.calls.with_label_values(&[method, code]).inc();
        self.duration
            .with_label_values(&[method])
            .observe(started.elapsed().as_secs_f64());
    }
}

impl<S> tower::Layer<S> for GrpcMetrics {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            metrics: self.clone(),
        }
    }
}

/// The layer's service.
#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    metrics: GrpcMetrics,
}

/// A call not yet counted: counted once, when its status is known or its answer dropped.
struct Pending {
    metrics: GrpcMetrics,
    method: &'static str,
    started: Instant,
}

impl Pending {
    fn done(self, code: &str) {
        self.metrics.observe(self.method, code, self.started);
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ReqBody, ResBody> tower::Service<Request<ReqBody>> for Counted<S>
where
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>> + Send,
    S::Future: Send + 'static,
    S::Error: 'static,
{
    type Response = Response<Recorded<ResBody>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let pending = Pending {
            method: self.metrics.method(req.uri().path()),
            metrics: self.metrics.clone(),
            started: Instant::now(),
        };
        let answer = self.inner.call(req);
        Box::pin(async move {
            let response = match answer.await {
                Ok(r) => r,
                Err(e) => {
                    pending.done("Unknown");
                    return Err(e);
                }
            };
            let pending = match code_of(response.headers()) {
                Some(code) => {
                    pending.done(code);
                    None
                }
                None => Some(pending),
            };
            Ok(response.map(|inner| Recorded { inner, pending }))
        })
    }
}

/// An answer's body, counting its call from the trailers.
pub struct Recorded<B> {
    inner: B,
    pending: Option<Pending>,
}

impl<B> Drop for Recorded<B> {
    fn drop(&mut self) {
        if let Some(p) = self.pending.take() {
            p.done("Cancelled");
        }
    }
}

impl<B: Body + Unpin> Body for Recorded<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(code) = frame.trailers_ref().and_then(code_of)
                    && let Some(p) = this.pending.take()
                {
                    p.done(code);
                }
            }
            Poll::Ready(None) => {
                if let Some(p) = this.pending.take() {
                    p.done("Unknown");
                }
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use tower::{Layer, ServiceExt};

    /// A one-frame body ending with `trailers`.
    struct Answer {
        trailers: Option<HeaderMap>,
    }

    impl Body for Answer {
        type Data = &'static [u8];
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<&'static [u8]>, Infallible>>> {
            Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
        }
    }

    fn status(code: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("grpc-status", code.parse().unwrap());
        h
    }

    async fn call(m: &GrpcMetrics, path: &str, headers: HeaderMap, trailers: Option<HeaderMap>) {
        let service = tower::service_fn(move |_: Request<()>| {
            let (headers, trailers) = (headers.clone(), trailers.clone());
            async move {
                let mut r = Response::new(Answer { trailers });
                *r.headers_mut() = headers;
                Ok::<_, Infallible>(r)
            }
        });
        let req = Request::builder().uri(path).body(()).unwrap();
        let mut body = m.layer(service).oneshot(req).await.unwrap().into_body();
        while std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx))
            .await
            .is_some()
        {}
    }

    #[tokio::test]
    async fn codes_come_from_headers_or_trailers_and_methods_are_bounded() {
        let registry = Registry::new();
        let m = GrpcMetrics::register(&registry, "t", &["/s.S/Known"]).unwrap();
        call(&m, "/s.S/Known", HeaderMap::new(), Some(status("0"))).await;
        call(&m, "/s.S/Known", status("5"), None).await;
        call(&m, "/s.S/Invented", status("12"), None).await;
        let count = |method: &str, code: &str| m.calls.with_label_values(&[method, code]).get();
        assert_eq!(count("/s.S/Known", "OK"), 1);
        assert_eq!(count("/s.S/Known", "NotFound"), 1);
        assert_eq!(count("other", "Unimplemented"), 1);
        let timed = m.duration.with_label_values(&["/s.S/Known"]);
        assert_eq!(timed.get_sample_count(), 2);
    }
}
