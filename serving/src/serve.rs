//! Serving a router on HTTPS and unix-socket listeners with the bounds a process shared by many
//! clients needs: a cap on open connections per listener (past it, new clients wait in the
//! kernel's backlog), a deadline for the TLS handshake and for each request's headers (a client
//! that connects and says nothing is dropped), HTTP/2 keep-alive pings (a peer that vanished is
//! noticed), a backoff on failed accepts (a full descriptor table must not spin the loop nor
//! flood the log), and a bounded graceful drain at stop.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use axum::Router;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, UnixListener},
    sync::{OwnedSemaphorePermit, Semaphore, watch},
    task::JoinSet,
};
use tokio_rustls::TlsAcceptor;

/// Bounds applied to every listener.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Open connections per listener.
    pub max_connections: usize,
    /// How long a client has for the TLS handshake, and for each request's headers.
    pub setup_timeout: Duration,
    /// How long stop waits for open connections (watches are ended by the caller).
    pub drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            setup_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// Where connections come from.
pub enum Listener {
    /// HTTPS: TCP with the TLS acceptor (its config carries the certificate).
    Tls { tcp: TcpListener, tls: TlsAcceptor },
    /// Plain HTTP on a unix socket (its file mode is the access control).
    Unix(UnixListener),
}

/// A listener and the router it serves.
pub struct Endpoint {
    pub listener: Listener,
    pub router: Router,
}

/// Serves `endpoints` until `stop` turns true; then stops accepting, calls `on_stop` (for
/// instance to end long-lived watches), and drains open connections for at most
/// [`Limits::drain_timeout`]. Returns whether every connection closed in time.
pub async fn serve(
    endpoints: Vec<Endpoint>,
    limits: Limits,
    stop: watch::Receiver<bool>,
    on_stop: impl FnOnce(),
) -> bool {
    let graceful = Arc::new(GracefulShutdown::new());
    let mut loops = JoinSet::new();
    for e in endpoints {
        loops.spawn(accept_loop(
            e,
            limits.clone(),
            graceful.clone(),
            stop.clone(),
        ));
    }
    while loops.join_next().await.is_some() {}
    on_stop();
    let Ok(graceful) = Arc::try_unwrap(graceful) else {
        // Every loop has ended, so nothing else holds it.
        return false;
    };
    let drained = tokio::time::timeout(limits.drain_timeout, graceful.shutdown())
        .await
        .is_ok();
    if !drained {
        tracing::warn!(
            "connections still open after {:?}; closing anyway",
            limits.drain_timeout
        );
    }
    drained
}

/// Serves `router` over TLS on `tcp` with the default [`Limits`] until `stop` turns true: the
/// one HTTPS port of a node agent, bounded as the API servers' ports are.
pub async fn serve_tls(
    tcp: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    stop: watch::Receiver<bool>,
) -> bool {
    let listener = Listener::Tls {
        tcp,
        tls: TlsAcceptor::from(tls),
    };
    serve(
        vec![Endpoint { listener, router }],
        Limits::default(),
        stop,
        || {},
    )
    .await
}

/// Resolves when `stop` is (or turns) true, or its sender is gone.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn accept_loop(
    endpoint: Endpoint,
    limits: Limits,
    graceful: Arc<GracefulShutdown>,
    mut stop: watch::Receiver<bool>,
) {
    let Endpoint { listener, router } = endpoint;
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let mut backoff = AcceptBackoff::default();
    loop {
        let permit = tokio::select! {
            _ = stopped(&mut stop) => return,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let accepted = tokio::select! {
            _ = stopped(&mut stop) => return,
            a = accept(&listener) => a,
        };
        let conn = match accepted {
            Ok(conn) => {
                backoff.succeeded();
                conn
            }
            Err(e) => {
                drop(permit);
                let wait = backoff.failed(&e);
                tokio::select! {
                    _ = stopped(&mut stop) => return,
                    _ = tokio::time::sleep(wait) => continue,
                }
            }
        };
        let watcher = graceful.watcher();
        let router = router.clone();
        let limits = limits.clone();
        tokio::spawn(async move {
            let (io, router): (Box<dyn Io>, Router) = match conn {
                Accepted::Unix(s) => (Box::new(s), router),
                Accepted::Tls(tcp, peer, tls) => {
                    match tokio::time::timeout(limits.setup_timeout, tls.accept(tcp)).await {
                        Ok(Ok(s)) => {
                            // Who is on the other end, for handlers that authenticate by
                            // certificate or log the client's address.
                            let mut router =
                                router.layer(axum::Extension(axum::extract::ConnectInfo(peer)));
                            if let Some(chain) = s.get_ref().1.peer_certificates() {
                                router =
                                    router.layer(axum::Extension(PeerCertificates(chain.to_vec())));
                            }
                            (Box::new(s), router)
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!("TLS handshake not finished in time");
                            return;
                        }
                    }
                }
            };
            let io = FirstByteDeadline::new(io, limits.setup_timeout);
            let service = TowerToHyperService::new(router);
            let builder = builder(&limits);
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
            if let Err(e) = watcher.watch(conn.into_owned()).await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop::<OwnedSemaphorePermit>(permit);
        });
    }
}

trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// A connection that fails with `TimedOut` when its first byte does not arrive in time. The
/// protocol detection before HTTP/1's header deadline and HTTP/2's pings apply has no deadline
/// of its own, so a client that connects and stays silent is ended here.
struct FirstByteDeadline<I> {
    io: I,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<I> FirstByteDeadline<I> {
    fn new(io: I, within: Duration) -> Self {
        FirstByteDeadline {
            io,
            deadline: Some(Box::pin(tokio::time::sleep(within))),
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for FirstByteDeadline<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    self.deadline = None;
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                let expired = self
                    .deadline
                    .as_mut()
                    .is_some_and(|d| d.as_mut().poll(cx).is_ready());
                if expired {
                    let e = std::io::Error::new(std::io::ErrorKind::TimedOut, "no request in time");
                    return Poll::Ready(Err(e));
                }
                Poll::Pending
            }
        }
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for FirstByteDeadline<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

enum Accepted {
    Tls(tokio::net::TcpStream, std::net::SocketAddr, TlsAcceptor),
    Unix(tokio::net::UnixStream),
}

/// The client certificate chain a TLS connection presented (verified by the listener's
/// client verifier), as a request extension; absent when the client sent none.
#[derive(Clone, Debug)]
pub struct PeerCertificates(pub Vec<rustls::pki_types::CertificateDer<'static>>);

async fn accept(l: &Listener) -> std::io::Result<Accepted> {
    match l {
        Listener::Tls { tcp, tls } => {
            let (s, peer) = tcp.accept().await?;
            let _ = s.set_nodelay(true);
            Ok(Accepted::Tls(s, peer, tls.clone()))
        }
        Listener::Unix(l) => l.accept().await.map(|(s, _)| Accepted::Unix(s)),
    }
}

fn builder(limits: &Limits) -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.setup_timeout);
    b.http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(20))
        .max_concurrent_streams(250);
    b
}

/// Spacing of accept retries after failures: from 5 ms doubling to 1 s, reset by a success.
/// The first failure of a run is logged; the rest are counted and reported when accepting
/// works again, so a full descriptor table costs neither CPU nor log volume.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    failures: u64,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1);

    /// Records a failed accept; returns how long to wait before the next.
    pub fn failed(&mut self, e: &std::io::Error) -> Duration {
        if self.failures == 0 {
            tracing::warn!(error = %e, "accepting connections failed; retrying with backoff");
        }
        self.failures += 1;
        Self::delay(self.failures)
    }

    /// Records a successful accept.
    pub fn succeeded(&mut self) {
        if self.failures > 0 {
            tracing::info!(
                failed = self.failures,
                "accepting connections again after failed attempts"
            );
            self.failures = 0;
        }
    }

    /// The wait after the `n`th failure in a row (n >= 1).
    pub fn delay(n: u64) -> Duration {
        let doublings = n.saturating_sub(1).min(16) as u32;
        Self::FIRST.saturating_mul(1 << doublings).min(Self::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_second_and_resets() {
        assert_eq!(AcceptBackoff::delay(1), Duration::from_millis(5));
        assert_eq!(AcceptBackoff::delay(2), Duration::from_millis(10));
        assert_eq!(AcceptBackoff::delay(8), Duration::from_millis(640));
        assert_eq!(AcceptBackoff::delay(9), Duration::from_secs(1));
        assert_eq!(AcceptBackoff::delay(u64::MAX), Duration::from_secs(1));
        let mut b = AcceptBackoff::default();
        let e = std::io::Error::other("too many open files");
        b.failed(&e);
        assert_eq!(b.failed(&e), Duration::from_millis(10));
        b.succeeded();
        assert_eq!(b.failed(&e), Duration::from_millis(5));
    }

    #[tokio::test]
    async fn a_full_listener_waits_and_a_silent_client_is_dropped() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let router = Router::new().route("/", axum::routing::get(|| async { "hi" }));
        let (stop_tx, stop) = watch::channel(false);
        let limits = Limits {
            max_connections: 1,
            setup_timeout: Duration::from_millis(300),
            drain_timeout: Duration::from_secs(1),
        };
        let server = tokio::spawn(serve(
            vec![Endpoint {
                listener: Listener::Unix(listener),
                router,
            }],
            limits,
            stop,
            || {},
        ));
        // A silent client holds the only slot until the header deadline drops it.
        let mut silent = tokio::net::UnixStream::connect(&path).await.unwrap();
        let started = std::time::Instant::now();
        let mut talker = tokio::net::UnixStream::connect(&path).await.unwrap();
        talker
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        tokio::time::timeout(Duration::from_secs(10), talker.read_to_string(&mut answer))
            .await
            .expect("answered once the silent client was dropped")
            .unwrap();
        assert!(answer.ends_with("hi"), "{answer}");
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "the second client was served while the first held the only slot"
        );
        let mut rest = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut rest))
            .await
            .expect("the silent client is closed")
            .unwrap_or(0);
        assert!(n < 1024, "{n}");
        stop_tx.send(true).unwrap();
        assert!(server.await.unwrap(), "drained");
    }
}
