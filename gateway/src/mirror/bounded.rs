//! Bounds on what an upstream may send the hub, so that a misbehaving peer (one that answers a
//! list with a 50 MB object, or a watch event that never ends) costs the hub's memory a known
//! amount instead of whatever it sends: kube's client reads a whole list (and a whole watch
//! line) into memory before decoding it.
//!
//! - A response that is not a watch (a list page, a get, discovery) may be at most
//!   [`MAX_RESPONSE`] bytes: a page is [`super::run`]'s 25 objects, and a Kubernetes object is
//!   at most about 1.5 MiB (etcd's request limit), mostly far less.
//! - A watch streams for as long as it lasts; each event (one line) may be at most
//!   [`MAX_EVENT`] bytes, twice the largest object.
//!
//! Past its bound the body fails with [`TooLarge`], which fails that list or watch like any
//! other error: the upstream is shown `Degraded` with the reason, and retried with backoff.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use futures::future::BoxFuture;
use hyper::body::{Body, Bytes, Frame};
use kube::client::DynBody;
use tower::{BoxError, Layer, Service};

/// The most a response other than a watch may hold.
pub const MAX_RESPONSE: u64 = 16 * 1024 * 1024;
/// The most one watch event (a line of the stream) may hold.
pub const MAX_EVENT: u64 = 3 * 1024 * 1024;

/// An upstream's response past its bound.
#[derive(Debug, thiserror::Error)]
#[error(
    "the upstream sent {what} of more than {limit} bytes: refused (a Kubernetes object is at most about 1.5 MiB)"
)]
pub struct TooLarge {
    what: &'static str,
    limit: u64,
}

/// What a body is bounded by.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Limit {
    /// All of it.
    Total(u64),
    /// Each line (a watch event).
    Line(u64),
}

impl Limit {
    /// The limit for a request to `query`: a watch's lines, else the whole response.
    fn of(query: Option<&str>) -> Limit {
        let watch = query.is_some_and(|q| {
            q.split('&')
                .any(|p| matches!(p, "watch=true" | "watch=1" | "watch=True"))
        });
        if watch {
            Limit::Line(MAX_EVENT)
        } else {
            Limit::Total(MAX_RESPONSE)
        }
    }

    /// The count after `data` when `seen` was counted before it, or the bound it broke.
    fn count(self, seen: u64, data: &[u8]) -> Result<u64, TooLarge> {
        let (max, what, now) = match self {
            Limit::Total(max) => (max, "a response", seen + data.len() as u64),
            Limit::Line(max) => {
                // The longest line in `data`: the one it continues, then each it holds.
                let mut longest = seen;
                let mut current = seen;
                for part in data.split_inclusive(|b| *b == b'\n') {
                    current += part.len() as u64;
                    longest = longest.max(current);
                    if part.ends_with(b"\n") {
                        current = 0;
                    }
                }
                if longest > max {
                    return Err(TooLarge {
                        what: "a watch event",
                        limit: max,
                    });
                }
                return Ok(current);
            }
        };
        if now > max {
            return Err(TooLarge { what, limit: max });
        }
        Ok(now)
    }
}

/// A response body that fails once it passes its [`Limit`].
pub struct BoundedBody {
    inner: Box<DynBody>,
    limit: Limit,
    seen: u64,
}

impl Body for BoundedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        if let Some(data) = frame.data_ref() {
            match this.limit.count(this.seen, data) {
                Ok(seen) => this.seen = seen,
                Err(e) => return Poll::Ready(Some(Err(e.into()))),
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}

/// Bounds every response of the client it is layered on.
pub struct BoundLayer;

impl<S> Layer<S> for BoundLayer {
    type Service = Bounded<S>;

    fn layer(&self, inner: S) -> Bounded<S> {
        Bounded(inner)
    }
}

/// See [`BoundLayer`].
pub struct Bounded<S>(S);

impl<S> Service<http::Request<kube::client::Body>> for Bounded<S>
where
    S: Service<
            http::Request<kube::client::Body>,
            Response = http::Response<Box<DynBody>>,
            Error = BoxError,
        >,
    S::Future: Send + 'static,
{
    type Response = http::Response<BoundedBody>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let limit = Limit::of(request.uri().query());
        let answer = self.0.call(request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|inner| BoundedBody {
                inner,
                limit,
                seen: 0,
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_are_bounded_by_event_and_the_rest_by_response() {
        assert_eq!(
            Limit::of(Some("watch=true&resourceVersion=5")),
            Limit::Line(MAX_EVENT)
        );
        assert_eq!(Limit::of(Some("limit=25")), Limit::Total(MAX_RESPONSE));
        assert_eq!(Limit::of(None), Limit::Total(MAX_RESPONSE));
        assert_eq!(Limit::of(Some("watchful=true")), Limit::Total(MAX_RESPONSE));
    }

    #[test]
    fn a_response_fails_once_its_total_passes_the_bound() {
        let limit = Limit::Total(10);
        assert_eq!(limit.count(4, b"123456").unwrap(), 10);
        assert!(limit.count(10, b"x").is_err());
    }

    #[test]
    fn a_watch_fails_only_on_a_line_past_the_bound() {
        let limit = Limit::Line(5);
        // Many short events over time: never past it.
        let mut seen = 0;
        for _ in 0..100 {
            seen = limit.count(seen, b"abcd\n").unwrap();
        }
        assert_eq!(seen, 0);
        // A line continued across frames counts from its start.
        let seen = limit.count(0, b"ab\nabc").unwrap();
        assert_eq!(seen, 3);
        assert!(limit.count(seen, b"def\n").is_err(), "abcdef is 7");
        // A long line in the middle of a frame.
        assert!(limit.count(0, b"a\nabcdefgh\nb").is_err());
        assert_eq!(limit.count(0, b"abcd\nabcd").unwrap(), 4);
    }
}
