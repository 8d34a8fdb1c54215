//! Who holds a listener's connections, and who gives one up when it is full.
//!
//! Every open connection is registered with its source (the client's address; none on a unix
//! socket) and whether a request is in flight on it. The rules:
//! - a source holds at most [`Caps::per_source`] connections: past it, a new one is closed at
//!   once, so one address cannot take the listener from the others;
//! - at most [`Caps::handshakes_per_source`] of a source's connections are in their setup (TLS
//!   handshake and first request) at once; the others wait their turn within the setup deadline;
//! - when the listener is full, the idle connection (no request in flight: never sent one, or
//!   between requests) of the source holding the most connections, the longest idle first, is
//!   closed to make room, and the newcomer takes its place once it has closed (so the listener
//!   never holds more than its cap); only when every connection is busy does a newcomer wait
//!   longer;
//! - a connection idle for the idle timeout is closed (see [`Registry::idle_past`]).
//!
//! IPv6 sources are counted per /64, the block one subscriber usually holds.

use std::{
    collections::{HashMap, HashSet},
    net::{IpAddr, Ipv6Addr},
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Where connections come from, as counted: an IPv4 address, an IPv6 /64, or the unix socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// A TCP peer: its IPv4 address or its IPv6 /64.
    Ip(IpAddr),
    /// The unix socket.
    Unix,
}

impl Source {
    /// The source a TCP peer is counted under (an IPv4-mapped IPv6 address as IPv4).
    pub fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V6(v6) => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                Source::Ip(IpAddr::V6(Ipv6Addr::from(prefix)))
            }
            v4 => Source::Ip(v4),
        }
    }
}

/// The bounds a registry enforces.
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    /// Connections the listener holds at most.
    pub total: usize,
    /// Connections one source may hold; not applied to the unix socket (its file mode keeps it
    /// to one user).
    pub per_source: usize,
    /// Connections of one source in their setup at once; not applied to the unix socket.
    pub handshakes_per_source: usize,
}

/// One open connection, as the registry sees it.
#[derive(Debug)]
struct Entry {
    source: Source,
    /// Requests in flight (their response bodies included).
    requests: usize,
    /// Since when no request has been in flight.
    idle_since: Instant,
    /// Told to close when the connection is evicted.
    close: Arc<Notify>,
}

#[derive(Debug)]
struct PerSource {
    open: usize,
    handshakes: Arc<Semaphore>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    open: HashMap<u64, Entry>,
    /// Evicted, told to close, not closed yet: still counted against the cap.
    closing: HashSet<u64>,
    sources: HashMap<Source, PerSource>,
}

/// The open connections of one listener.
#[derive(Debug)]
pub struct Registry {
    caps: Caps,
    state: Mutex<State>,
    /// Told when room may have been made (a connection closed or went idle).
    changed: Notify,
}

/// What [`Registry::admit`] answers.
#[derive(Debug)]
pub enum Admission {
    /// Registered; the connection is counted until the ticket is dropped.
    Open(Ticket),
    /// Its source holds its share already: close it.
    Refused,
    /// The listener is full (an idle connection may have been told to close for it): wait for
    /// [`Registry::changed`] and ask again.
    Full,
}

impl Registry {
    /// An empty registry enforcing `caps`.
    pub fn new(caps: Caps) -> Arc<Self> {
        Arc::new(Registry {
            caps,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is consistent after every statement: a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a connection from `source`, closing an idle one if the listener is full.
    pub fn admit(self: &Arc<Self>, source: Source) -> Admission {
        let mut st = self.lock();
        let held = st.sources.get(&source).map_or(0, |s| s.open);
        if source != Source::Unix && held >= self.caps.per_source {
            return Admission::Refused;
        }
        if st.open.len() + st.closing.len() >= self.caps.total {
            // One eviction at a time: its close makes the room.
            if st.closing.is_empty()
                && let Some(id) = victim(&st)
            {
                evict(&mut st, id);
            }
            return Admission::Full;
        }
        let id = st.next_id;
        st.next_id += 1;
        let close = Arc::new(Notify::new());
        let handshakes = match source {
            Source::Unix => Semaphore::MAX_PERMITS,
            Source::Ip(_) => self.caps.handshakes_per_source,
        };
        let per = st.sources.entry(source).or_insert_with(|| PerSource {
            open: 0,
            handshakes: Arc::new(Semaphore::new(handshakes)),
        });
        per.open += 1;
        let handshakes = per.handshakes.clone();
        st.open.insert(
            id,
            Entry {
                source,
                requests: 0,
                idle_since: Instant::now(),
                close: close.clone(),
            },
        );
        Admission::Open(Ticket {
            id,
            registry: self.clone(),
            close,
            handshakes,
        })
    }

    /// Resolves once room may have been made since the last call (a permit is kept, so a change
    /// between a `Full` answer and this call is not missed).
    pub async fn changed(&self) {
        self.changed.notified().await
    }

    /// Closes every connection idle for `timeout` or longer; how many.
    pub fn idle_past(&self, timeout: Duration) -> usize {
        let mut st = self.lock();
        let now = Instant::now();
        let stale: Vec<u64> = st
            .open
            .iter()
            .filter(|(_, e)| e.requests == 0 && now.duration_since(e.idle_since) >= timeout)
            .map(|(id, _)| *id)
            .collect();
        for id in &stale {
            evict(&mut st, *id);
        }
        if !stale.is_empty() {
            self.changed.notify_one();
        }
        stale.len()
    }

    /// Connections open or closing (evicted ones count until they have closed).
    pub fn open(&self) -> usize {
        let st = self.lock();
        st.open.len() + st.closing.len()
    }
}

/// The idle connection to close for a newcomer: from the source holding the most connections,
/// the one idle the longest. Busy connections are never chosen.
fn victim(st: &State) -> Option<u64> {
    let held = |s: &Source| st.sources.get(s).map_or(0, |p| p.open);
    st.open
        .iter()
        .filter(|(_, e)| e.requests == 0)
        .max_by_key(|(_, e)| (held(&e.source), std::cmp::Reverse(e.idle_since)))
        .map(|(id, _)| *id)
}

/// Stops counting `id` as open (it is closing) and tells its task to close it.
fn evict(st: &mut State, id: u64) {
    if let Some(e) = forget(st, id) {
        st.closing.insert(id);
        e.close.notify_one();
    }
}

fn forget(st: &mut State, id: u64) -> Option<Entry> {
    let e = st.open.remove(&id)?;
    if let Some(per) = st.sources.get_mut(&e.source) {
        per.open -= 1;
        if per.open == 0 {
            st.sources.remove(&e.source);
        }
    }
    Some(e)
}

/// A registered connection; dropping it (the connection ended) frees its place.
#[derive(Debug)]
pub struct Ticket {
    id: u64,
    registry: Arc<Registry>,
    close: Arc<Notify>,
    handshakes: Arc<Semaphore>,
}

impl Ticket {
    /// Resolves when the registry closes this connection (evicted, or idle too long).
    pub async fn closed(&self) {
        self.close.notified().await
    }

    /// A turn to set up (TLS handshake, first request) among its source's connections.
    pub async fn handshake_turn(&self) -> OwnedSemaphorePermit {
        self.handshakes
            .clone()
            .acquire_owned()
            .await
            .expect("the registry never closes a semaphore")
    }

    /// Marks a request in flight until the returned guard is dropped.
    pub fn request(&self) -> Busy {
        if let Some(e) = self.registry.lock().open.get_mut(&self.id) {
            e.requests += 1;
        }
        Busy {
            id: self.id,
            registry: self.registry.clone(),
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut st = self.registry.lock();
        let gone = st.closing.remove(&self.id) || forget(&mut st, self.id).is_some();
        drop(st);
        if gone {
            self.registry.changed.notify_one();
        }
    }
}

/// A request in flight on a connection.
#[derive(Debug)]
pub struct Busy {
    id: u64,
    registry: Arc<Registry>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        let idle = match self.registry.lock().open.get_mut(&self.id) {
            Some(e) => {
                e.requests = e.requests.saturating_sub(1);
                if e.requests == 0 {
                    e.idle_since = Instant::now();
                }
                e.requests == 0
            }
            None => false,
        };
        if idle {
            self.registry.changed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(total: usize, per_source: usize) -> Caps {
        Caps {
            total,
            per_source,
            handshakes_per_source: 2,
        }
    }

    fn ip(s: &str) -> Source {
        Source::of(s.parse().unwrap())
    }

    fn open(r: &Arc<Registry>, s: Source) -> Ticket {
        match r.admit(s) {
            Admission::Open(t) => t,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_source_past_its_share_is_refused_and_others_still_get_in() {
        let r = Registry::new(caps(4, 2));
        let a = [open(&r, ip("127.0.0.2")), open(&r, ip("127.0.0.2"))];
        assert!(matches!(r.admit(ip("127.0.0.2")), Admission::Refused));
        let _b = open(&r, ip("127.0.0.1"));
        drop(a);
        let _again = open(&r, ip("127.0.0.2"));
        // The unix socket has no share.
        let _u: Vec<Ticket> = (0..1).map(|_| open(&r, Source::Unix)).collect();
        assert_eq!(r.open(), 3);
    }

    #[test]
    fn a_full_listener_closes_the_longest_idle_of_the_largest_source() {
        let r = Registry::new(caps(5, 5));
        let busy_peer = open(&r, ip("192.0.2.1"));
        let _working = busy_peer.request();
        let idle_peer = open(&r, ip("192.0.2.1"));
        let mut flood: Vec<Ticket> = (0..3).map(|_| open(&r, ip("192.0.2.2"))).collect();
        // Full: an idle connection of the flooding source is told to close for the newcomer,
        // though the peer's idle one has been idle longer; one at a time.
        assert!(matches!(r.admit(ip("192.0.2.3")), Admission::Full));
        assert!(matches!(r.admit(ip("192.0.2.3")), Admission::Full));
        let evicted: Vec<usize> = (0..flood.len())
            .filter(|i| !r.lock().open.contains_key(&flood[*i].id))
            .collect();
        assert_eq!(evicted.len(), 1);
        assert!(r.lock().open.contains_key(&idle_peer.id));
        // It counts until it has closed; then the newcomer gets in.
        assert_eq!(r.open(), 5);
        drop(flood.remove(evicted[0]));
        let _newcomer = open(&r, ip("192.0.2.3"));
        assert_eq!(r.open(), 5);
        // With only busy connections left, a newcomer waits.
        let r = Registry::new(caps(1, 1));
        let only = open(&r, ip("192.0.2.1"));
        let _busy = only.request();
        assert!(matches!(r.admit(ip("192.0.2.2")), Admission::Full));
    }

    #[tokio::test]
    async fn an_evicted_connection_is_told_and_frees_its_place_once() {
        let r = Registry::new(caps(1, 1));
        let first = open(&r, ip("192.0.2.1"));
        assert!(matches!(r.admit(ip("192.0.2.2")), Admission::Full));
        tokio::time::timeout(Duration::from_secs(1), first.closed())
            .await
            .expect("the evicted connection is told");
        assert!(!r.lock().sources.contains_key(&ip("192.0.2.1")));
        drop(first);
        tokio::time::timeout(Duration::from_secs(1), r.changed())
            .await
            .expect("its close is announced");
        let _second = open(&r, ip("192.0.2.2"));
        assert_eq!(r.open(), 1);
    }

    #[test]
    fn idle_connections_are_closed_past_the_timeout_and_busy_ones_never() {
        let r = Registry::new(caps(4, 4));
        let idle = open(&r, ip("192.0.2.1"));
        let busy = open(&r, ip("192.0.2.1"));
        let guard = busy.request();
        assert_eq!(r.idle_past(Duration::from_secs(60)), 0);
        assert_eq!(r.idle_past(Duration::ZERO), 1);
        assert!(!r.lock().open.contains_key(&idle.id));
        drop(guard);
        assert_eq!(r.idle_past(Duration::ZERO), 1);
        // Counted until their tasks have closed them.
        assert_eq!(r.open(), 2);
        drop((idle, busy));
        assert_eq!(r.open(), 0);
    }

    #[test]
    fn ipv6_is_counted_per_64_and_mapped_ipv4_as_ipv4() {
        assert_eq!(ip("2001:db8:1:2::1"), ip("2001:db8:1:2:ffff::9"));
        assert_ne!(ip("2001:db8:1:2::1"), ip("2001:db8:1:3::1"));
        assert_eq!(ip("::ffff:127.0.0.2"), ip("127.0.0.2"));
    }
}
