//! Node-wide download limits, hot-swapped from `NodeModelStore.spec.download`: at most
//! `concurrency` requests in flight, and a token bucket at `bytesPerSecond` (0 = unlimited,
//! burst max(bps, 32 KiB)).

use std::{
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use tokio::{sync::Notify, time::Instant};

pub const MIN_BURST: u64 = 32 * 1024;

#[derive(Debug)]
struct State {
    concurrency: usize,
    in_flight: usize,
    bytes_per_second: u64,
    /// May go negative: a debt that later takers wait out.
    tokens: f64,
    refilled: Instant,
}

/// The node's download limits: at most `concurrency` requests to the hub at once, and a token
/// bucket of `bytes_per_second` shared by every download (0: unlimited).
#[derive(Debug)]
pub struct DownloadLimits {
    state: Mutex<State>,
    freed: Notify,
}

/// Held for the life of one HTTP request (headers and body).
pub struct RequestPermit {
    limits: Arc<DownloadLimits>,
}

impl Drop for RequestPermit {
    fn drop(&mut self) {
        self.limits.lock().in_flight -= 1;
        self.limits.freed.notify_waiters();
    }
}

impl DownloadLimits {
    /// Limits of `concurrency` requests at once (at least 1) and `bytes_per_second` (0: unlimited).
    pub fn new(concurrency: u32, bytes_per_second: u64) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                concurrency: concurrency.max(1) as usize,
                in_flight: 0,
                bytes_per_second,
                tokens: burst(bytes_per_second),
                refilled: Instant::now(),
            }),
            freed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies new limits; requests already in flight finish.
    pub fn set(&self, concurrency: u32, bytes_per_second: u64) {
        let mut s = self.lock();
        s.concurrency = concurrency.max(1) as usize;
        if s.bytes_per_second != bytes_per_second {
            s.bytes_per_second = bytes_per_second;
            s.tokens = s.tokens.min(burst(bytes_per_second));
        }
        drop(s);
        self.freed.notify_waiters();
    }

    /// Requests holding a permit now.
    pub fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    pub(crate) async fn request_permit(self: &Arc<Self>) -> RequestPermit {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut s = self.lock();
                if s.in_flight < s.concurrency {
                    s.in_flight += 1;
                    return RequestPermit {
                        limits: Arc::clone(self),
                    };
                }
            }
            freed.await;
        }
    }

    /// Waits until `n` bytes may be passed on.
    pub async fn take_bytes(&self, n: usize) {
        let wait = {
            let mut s = self.lock();
            if s.bytes_per_second == 0 {
                return;
            }
            let now = Instant::now();
            let rate = s.bytes_per_second as f64;
            let elapsed = now.duration_since(s.refilled).as_secs_f64();
            s.tokens = (s.tokens + elapsed * rate).min(burst(s.bytes_per_second));
            s.refilled = now;
            s.tokens -= n as f64;
            (s.tokens < 0.0).then(|| Duration::from_secs_f64(-s.tokens / rate))
        };
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
    }
}

fn burst(bps: u64) -> f64 {
    bps.max(MIN_BURST) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn concurrency_is_bounded_and_hot_swapped() {
        let limits = DownloadLimits::new(2, 0);
        let a = limits.request_permit().await;
        let _b = limits.request_permit().await;
        let third = tokio::spawn({
            let l = Arc::clone(&limits);
            async move { l.request_permit().await }
        });
        tokio::task::yield_now().await;
        assert!(!third.is_finished());
        assert_eq!(limits.in_flight(), 2);
        drop(a);
        let c = tokio::time::timeout(Duration::from_secs(5), third)
            .await
            .expect("a freed permit wakes a waiter")
            .unwrap();
        limits.set(3, 0);
        let _d = tokio::time::timeout(Duration::from_secs(5), limits.request_permit())
            .await
            .expect("raising the limit admits more");
        assert_eq!(limits.in_flight(), 3);
        drop(c);
    }

    #[tokio::test]
    async fn the_bucket_paces_bytes() {
        let limits = DownloadLimits::new(1, 64 * 1024);
        let start = std::time::Instant::now();
        // The burst (64 KiB) passes at once; the next 64 KiB take about a second.
        for _ in 0..4 {
            limits.take_bytes(32 * 1024).await;
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(900), "{took:?}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }
}
