//! Telling a connection's registry entry when requests are in flight: a service wrapper marks
//! each request busy from its call until its response body has been sent (or dropped), and the
//! connection's first request ends its setup.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
};

use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::OwnedSemaphorePermit;

use crate::connections::{Busy, Ticket};

/// A connection's registration and its setup turn, shared by its task and its service.
#[derive(Debug)]
pub struct Conn {
    /// The connection's place in the registry.
    pub ticket: Ticket,
    /// The source's setup turn, held until the first request arrives.
    turn: Mutex<Option<OwnedSemaphorePermit>>,
    started: AtomicBool,
}

impl Conn {
    /// A connection holding `ticket`, and its source's setup turn if it took one.
    pub fn new(ticket: Ticket, turn: Option<OwnedSemaphorePermit>) -> Arc<Self> {
        Arc::new(Conn {
            ticket,
            turn: Mutex::new(turn),
            started: AtomicBool::new(false),
        })
    }

    /// Whether a request has arrived (the setup is over).
    pub fn started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    fn request(&self) -> Busy {
        if !self.started.swap(true, Ordering::AcqRel) {
            // The next of the source's connections may set up.
            drop(self.turn.lock().unwrap_or_else(|p| p.into_inner()).take());
        }
        self.ticket.request()
    }
}

/// `inner`, with every request counted on `conn` until its response is sent.
#[derive(Clone, Debug)]
pub struct Tracked<S> {
    /// The service requests go to.
    pub inner: S,
    /// The connection they are counted on.
    pub conn: Arc<Conn>,
}

impl<S, R, B> hyper::service::Service<R> for Tracked<S>
where
    S: hyper::service::Service<R, Response = hyper::Response<B>>,
    S::Future: Send + 'static,
    B: Body + Unpin,
{
    type Response = hyper::Response<Counted<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn call(&self, req: R) -> Self::Future {
        let busy = self.conn.request();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| Counted { body, _busy: busy }))
        })
    }
}

/// A response body that keeps its request counted until it is dropped.
#[derive(Debug)]
pub struct Counted<B> {
    body: B,
    _busy: Busy,
}

impl<B: Body + Unpin> Body for Counted<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
