//! Serving a router on HTTPS and unix-socket listeners with the bounds a process shared by many
//! clients needs: caps on open connections per listener and per client address, and on the
//! connections of one address in their setup at once (see [`crate::connections`]); idle
//! connections give way to newcomers when a listener is full and are closed after an idle
//! timeout; a deadline for the TLS handshake and first request, and for each request's headers
//! (a client that connects and says nothing is dropped); HTTP/2 keep-alive pings (a peer that
//! vanished is noticed); a backoff on failed accepts (a full descriptor table must not spin the
//! loop nor flood the log); and a bounded graceful drain at stop.

use std::{pin::pin, sync::Arc, time::Duration};

use axum::Router;
use futures::future::BoxFuture;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::conn::auto,
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, UnixListener},
    sync::watch,
    task::JoinSet,
    time::Instant,
};
use tokio_rustls::TlsAcceptor;
use tokio_util::task::TaskTracker;

use crate::{
    backoff::Backoff,
    connections::{Admission, Caps, Registry, Source, Ticket},
    in_flight::{Conn, Tracked},
};

/// Bounds applied to every listener. The defaults suit a hub or worker serving hundreds of
/// clients, a few of them (the API server's aggregation proxy, controllers) holding many
/// connections each.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Open connections per listener.
    pub max_connections: usize,
    /// Open connections per client address (an IPv6 /64) on a TCP listener: half the listener
    /// by default, so one busy peer is served and the rest stays for the others.
    pub max_connections_per_source: usize,
    /// Connections of one client address in their setup (TLS handshake and first request) at
    /// once on a TCP listener; the others wait their turn within the setup deadline.
    pub max_handshakes_per_source: usize,
    /// How long a client has for the TLS handshake and first request.
    pub setup_timeout: Duration,
    /// How long a connection may stay without a request in flight (waiting for its next one,
    /// or sending its headers) before it is closed gracefully: TLS close_notify for HTTP/1.1,
    /// GOAWAY for HTTP/2.
    pub idle_timeout: Duration,
    /// How long stop waits for open connections (watches are ended by the caller).
    pub drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            max_connections_per_source: 512,
            max_handshakes_per_source: 64,
            setup_timeout: Duration::from_secs(10),
            // kube-apiserver's HTTP/2 idle timeout.
            idle_timeout: Duration::from_secs(90),
            drain_timeout: Duration::from_secs(10),
        }
    }
}

impl Limits {
    fn caps(&self) -> Caps {
        Caps {
            total: self.max_connections,
            per_source: self.max_connections_per_source,
            handshakes_per_source: self.max_handshakes_per_source,
        }
    }
}

/// Where connections come from.
pub enum Listener {
    /// HTTPS: TCP with the TLS acceptor (its config carries the certificate).
    Tls {
        /// The bound TCP socket.
        tcp: TcpListener,
        /// The TLS acceptor, with the serving certificate.
        tls: TlsAcceptor,
    },
    /// Plain HTTP on a unix socket (its file mode is the access control).
    Unix(UnixListener),
}

/// A listener and the router it serves.
pub struct Endpoint {
    /// Where connections come from.
    pub listener: Listener,
    /// What serves their requests.
    pub router: Router,
}

/// A server's whole run, resolving to whether every connection closed in time at stop.
///
/// Boxed here, in the crate that compiles it: a crate that awaited the unboxed future would
/// compile this crate's accept loop, connection task and hyper's HTTP/1.1 and HTTP/2 servers
/// again for itself (async bodies are compiled where they are polled), about 60,000 lines of
/// LLVM IR in each of the five crates that serve (issue 41's build time).
pub type Serving = BoxFuture<'static, bool>;

/// Serves `endpoints` until `stop` turns true; then stops accepting, calls `on_stop` (for
/// instance to end long-lived watches), and drains open connections for at most
/// [`Limits::drain_timeout`]. Resolves to whether every connection closed in time.
pub fn serve(
    endpoints: Vec<Endpoint>,
    limits: Limits,
    stop: watch::Receiver<bool>,
    on_stop: impl FnOnce() + Send + 'static,
) -> Serving {
    serve_boxed(endpoints, limits, stop, Box::new(on_stop))
}

fn serve_boxed(
    endpoints: Vec<Endpoint>,
    limits: Limits,
    stop: watch::Receiver<bool>,
    on_stop: Box<dyn FnOnce() + Send>,
) -> Serving {
    Box::pin(async move {
        let connections = TaskTracker::new();
        let mut loops = JoinSet::new();
        for e in endpoints {
            loops.spawn(accept_loop(
                e,
                limits.clone(),
                connections.clone(),
                stop.clone(),
            ));
        }
        while loops.join_next().await.is_some() {}
        on_stop();
        connections.close();
        let drained = tokio::time::timeout(limits.drain_timeout, connections.wait())
            .await
            .is_ok();
        if !drained {
            tracing::warn!(
                "connections still open after {:?}; closing anyway",
                limits.drain_timeout
            );
        }
        drained
    })
}

/// Serves `router` over TLS on `tcp` with the default [`Limits`] until `stop` turns true: the
/// one HTTPS port of a node agent, bounded as the API servers' ports are.
pub fn serve_tls(
    tcp: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    stop: watch::Receiver<bool>,
) -> Serving {
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
}

/// Resolves when `stop` is (or turns) true, or its sender is gone.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Accepts on one listener until `stop`, each connection served in its own task on
/// `connections`.
async fn accept_loop(
    endpoint: Endpoint,
    limits: Limits,
    connections: TaskTracker,
    mut stop: watch::Receiver<bool>,
) {
    let registry = Registry::new(limits.caps());
    let for_connections = stop.clone();
    let accepting = async {
        let mut backoff = AcceptBackoff::default();
        loop {
            let (conn, source) = match accept(&endpoint.listener).await {
                Ok(accepted) => {
                    backoff.succeeded();
                    accepted
                }
                Err(e) => {
                    tokio::time::sleep(backoff.failed(&e)).await;
                    continue;
                }
            };
            // Past the cap, the accepted client waits (and those behind it in the backlog)
            // until a connection closes or goes idle.
            let ticket = loop {
                match registry.admit(source) {
                    Admission::Open(t) => break Some(t),
                    Admission::Refused => break None,
                    Admission::Full => registry.changed().await,
                }
            };
            let Some(ticket) = ticket else {
                tracing::debug!(?source, "connection refused: its address holds its share");
                continue;
            };
            let task = connection(
                conn,
                ticket,
                endpoint.router.clone(),
                limits.clone(),
                for_connections.clone(),
            );
            connections.spawn(task);
        }
    };
    let sweeping = async {
        // Checked four times per timeout: an idle connection goes within 1.25 timeouts.
        let period = (limits.idle_timeout / 4).max(Duration::from_millis(10));
        let mut tick = tokio::time::interval(period);
        loop {
            tick.tick().await;
            let closed = registry.idle_past(limits.idle_timeout);
            if closed > 0 {
                tracing::debug!(closed, "idle connections closed");
            }
        }
    };
    tokio::select! {
        _ = stopped(&mut stop) => {}
        () = accepting => {}
        () = sweeping => {}
    }
}

/// Serves one connection: its setup (a turn among its source's, the TLS handshake, its first
/// request) within the setup deadline, then requests until it ends, is evicted by the registry
/// (closed gracefully: an HTTP/2 client is told which requests were taken), or the server
/// stops.
async fn connection(
    conn: Accepted,
    ticket: Ticket,
    router: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let deadline = Instant::now() + limits.setup_timeout;
    let setup = async {
        let turn = ticket.handshake_turn().await;
        let (io, router): (Box<dyn Io>, Router) = match conn {
            Accepted::Unix(s) => (Box::new(s), router),
            Accepted::Tls(tcp, peer, tls) => {
                let s = tls.accept(tcp).await?;
                // Who is on the other end, for handlers that authenticate by certificate or
                // log the client's address.
                let mut router = router.layer(axum::Extension(axum::extract::ConnectInfo(peer)));
                if let Some(chain) = s.get_ref().1.peer_certificates() {
                    router = router.layer(axum::Extension(PeerCertificates(chain.to_vec())));
                }
                (Box::new(s), router)
            }
        };
        Ok::<_, std::io::Error>((io, router, turn))
    };
    let (io, router, turn) = tokio::select! {
        () = ticket.closed() => return,
        () = stopped(&mut stop) => return,
        set = tokio::time::timeout_at(deadline, setup) => match set {
            Ok(Ok(set)) => set,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!("connection setup not finished in time");
                return;
            }
        },
    };
    let conn = Conn::new(ticket, Some(turn));
    let service = Tracked {
        inner: TowerToHyperService::new(router),
        conn: conn.clone(),
    };
    let builder = builder(&limits);
    let mut served = pin!(builder.serve_connection_with_upgrades(TokioIo::new(io), service));
    let mut first_request = pin!(tokio::time::sleep_until(deadline));
    let mut grace = pin!(tokio::time::sleep(Duration::MAX));
    let (mut setting_up, mut evicted, mut stopping) = (true, false, false);
    loop {
        tokio::select! {
            ended = served.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            () = &mut first_request, if setting_up => {
                if !conn.started() {
                    tracing::debug!("no request in time");
                    return;
                }
                setting_up = false;
            }
            () = conn.ticket.closed(), if !evicted => {
                // Idle: a graceful close is quick; the grace bounds a request that raced it.
                evicted = true;
                served.as_mut().graceful_shutdown();
                grace.as_mut().reset(Instant::now() + limits.setup_timeout);
            }
            () = &mut grace, if evicted => return,
            () = stopped(&mut stop), if !stopping => {
                stopping = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}

trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

enum Accepted {
    Tls(tokio::net::TcpStream, std::net::SocketAddr, TlsAcceptor),
    Unix(tokio::net::UnixStream),
}

/// The client certificate chain a TLS connection presented (verified by the listener's
/// client verifier), as a request extension; absent when the client sent none.
#[derive(Clone, Debug)]
pub struct PeerCertificates(pub Vec<rustls::pki_types::CertificateDer<'static>>);

async fn accept(l: &Listener) -> std::io::Result<(Accepted, Source)> {
    match l {
        Listener::Tls { tcp, tls } => {
            let (s, peer) = tcp.accept().await?;
            let _ = s.set_nodelay(true);
            Ok((Accepted::Tls(s, peer, tls.clone()), Source::of(peer.ip())))
        }
        Listener::Unix(l) => l
            .accept()
            .await
            .map(|(s, _)| (Accepted::Unix(s), Source::Unix)),
    }
}

fn builder(limits: &Limits) -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    // hyper's header deadline also runs while an HTTP/1.1 connection waits for its next
    // request, and ends it abruptly. Clients keep idle connections 90 s (hyper-util, Go), so a
    // deadline of seconds made them send requests on connections being dropped. Idle
    // connections are closed gracefully by the idle timeout instead; this is a backstop.
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.idle_timeout * 2);
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
    const SCHEDULE: Backoff = Backoff::new(Duration::from_millis(5), Duration::from_secs(1));

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
        Self::SCHEDULE.after_failures(n)
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

    /// One endpoint: `router` on the unix `listener`.
    fn unix(listener: UnixListener, router: Router) -> Vec<Endpoint> {
        vec![Endpoint {
            listener: Listener::Unix(listener),
            router,
        }]
    }

    /// A request over the unix socket at `path`; the answer's text.
    async fn get(path: &std::path::Path, route: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::UnixStream::connect(path).await.unwrap();
        s.write_all(
            format!("GET {route} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut answer = String::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut answer))
            .await
            .expect("answered in time")
            .unwrap();
        answer
    }

    /// Whether the server closes `s` within `within`.
    async fn closed_by_server(s: &mut tokio::net::UnixStream, within: Duration) -> bool {
        use tokio::io::AsyncReadExt;
        let mut rest = Vec::new();
        tokio::time::timeout(within, s.read_to_end(&mut rest))
            .await
            .is_ok()
    }

    /// A server answering "hi" on a unix socket with these deadlines, and a connection to it:
    /// the socket's directory, the connection, the server's stop and its task.
    async fn hi_connection(
        setup_timeout: Duration,
        idle_timeout: Duration,
    ) -> (
        tempfile::TempDir,
        tokio::net::UnixStream,
        watch::Sender<bool>,
        tokio::task::JoinHandle<bool>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let router = Router::new().route("/", axum::routing::get(|| async { "hi" }));
        let (stop_tx, stop) = watch::channel(false);
        let limits = Limits {
            setup_timeout,
            idle_timeout,
            drain_timeout: Duration::from_secs(1),
            ..Limits::default()
        };
        let server = tokio::spawn(serve(unix(listener, router), limits, stop, || {}));
        let s = tokio::net::UnixStream::connect(&path).await.unwrap();
        (dir, s, stop_tx, server)
    }

    #[tokio::test]
    async fn a_connection_idle_past_the_idle_timeout_is_closed() {
        let (_dir, mut s, stop_tx, server) =
            hi_connection(Duration::from_secs(30), Duration::from_millis(400)).await;
        answered(&mut s).await;
        // Kept alive, then closed once idle for the timeout (checked every quarter of it).
        let idle = std::time::Instant::now();
        assert!(closed_by_server(&mut s, Duration::from_secs(5)).await);
        let after = idle.elapsed();
        assert!(
            after >= Duration::from_millis(300) && after < Duration::from_secs(2),
            "closed after {after:?} idle"
        );
        stop_tx.send(true).unwrap();
        assert!(server.await.unwrap(), "drained");
    }

    /// Sends one request on `s` and reads until its answer's body, "hi", has arrived.
    async fn answered(s: &mut tokio::net::UnixStream) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        while !got.ends_with(b"hi") {
            let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
                .await
                .expect("answered")
                .unwrap();
            assert!(n > 0, "closed before the answer");
            got.extend_from_slice(&buf[..n]);
        }
    }

    #[tokio::test]
    async fn a_kept_alive_connection_outlives_the_setup_deadline_until_the_idle_timeout() {
        let (_dir, mut s, stop_tx, server) =
            hi_connection(Duration::from_millis(200), Duration::from_secs(30)).await;
        answered(&mut s).await;
        // Idle for several setup deadlines: a client's pool may reuse it, so it stays open.
        assert!(!closed_by_server(&mut s, Duration::from_secs(1)).await);
        answered(&mut s).await;
        stop_tx.send(true).unwrap();
        assert!(server.await.unwrap(), "drained");
    }

    #[tokio::test]
    async fn idle_clients_give_way_busy_ones_are_waited_for_and_silent_ones_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let slow_started = Arc::new(tokio::sync::Notify::new());
        let router = Router::new()
            .route("/", axum::routing::get(|| async { "hi" }))
            .route(
                "/slow",
                axum::routing::get({
                    let started = slow_started.clone();
                    move || async move {
                        started.notify_one();
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        "slow"
                    }
                }),
            );
        let (stop_tx, stop) = watch::channel(false);
        let limits = Limits {
            max_connections: 1,
            setup_timeout: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(1),
            ..Limits::default()
        };
        let server = tokio::spawn(serve(unix(listener, router), limits, stop, || {}));
        // A silent client holds the only place, idle: a newcomer takes it at once.
        let mut silent = tokio::net::UnixStream::connect(&path).await.unwrap();
        let started = std::time::Instant::now();
        assert!(get(&path, "/").await.ends_with("hi"));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "the newcomer waited for the idle client's deadline"
        );
        assert!(
            closed_by_server(&mut silent, Duration::from_secs(1)).await,
            "the idle client gave way"
        );
        // A busy client keeps its place: the newcomer waits until its answer is sent.
        let slow = tokio::spawn({
            let path = path.clone();
            async move { get(&path, "/slow").await }
        });
        tokio::time::timeout(Duration::from_secs(5), slow_started.notified())
            .await
            .expect("the slow request started");
        let started = std::time::Instant::now();
        assert!(get(&path, "/").await.ends_with("hi"));
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "the newcomer was served while the only place was busy"
        );
        assert!(slow.await.unwrap().ends_with("slow"));
        // Alone, a silent client is dropped at the setup deadline.
        let mut silent = tokio::net::UnixStream::connect(&path).await.unwrap();
        assert!(
            !closed_by_server(&mut silent, Duration::from_secs(1)).await,
            "dropped before its deadline"
        );
        assert!(
            closed_by_server(&mut silent, Duration::from_secs(3)).await,
            "dropped at its deadline"
        );
        stop_tx.send(true).unwrap();
        assert!(server.await.unwrap(), "drained");
    }
}
