//! The retry schedule of an upstream's readiness check: `base`, doubling, capped (the
//! reference's 5 s doubling to 1 min). The base is a parameter so that tests stay fast.

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(5),
            cap: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The wait after failed attempt number `attempt` (0 for the first failure).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }
}

/// The retry schedule of a mirror's watches (kube-runtime's watcher waits it out after each
/// failure): 250 ms doubling to 2 s, from the start again once a watch works. kube-runtime's
/// default doubles to 30 s, so after a 30 s partition the hub waited up to that long before it
/// mirrored the cluster again (issue 35's container fleet took 12.8 s to converge).
#[derive(Clone, Debug, Default)]
pub struct WatchRetry {
    attempt: u32,
}

impl WatchRetry {
    const SCHEDULE: Backoff = Backoff {
        base: Duration::from_millis(250),
        cap: Duration::from_secs(2),
    };
}

impl Iterator for WatchRetry {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let wait = Self::SCHEDULE.delay(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        Some(wait)
    }
}

impl kube::runtime::utils::Backoff for WatchRetry {
    fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_retry_within_two_seconds_and_start_over_once_they_work() {
        use kube::runtime::utils::Backoff as _;
        let mut r = WatchRetry::default();
        let got: Vec<u128> = r.by_ref().take(5).map(|d| d.as_millis()).collect();
        assert_eq!(got, [250, 500, 1000, 2000, 2000]);
        r.reset();
        assert_eq!(r.next(), Some(Duration::from_millis(250)));
    }

    #[test]
    fn doubles_from_five_seconds_to_a_minute() {
        let b = Backoff::default();
        let got: Vec<u64> = (0..7).map(|a| b.delay(a).as_secs()).collect();
        assert_eq!(got, [5, 10, 20, 40, 60, 60, 60]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn base_is_configurable() {
        let b = Backoff {
            base: Duration::from_millis(50),
            cap: Duration::from_millis(300),
        };
        assert_eq!(b.delay(0), Duration::from_millis(50));
        assert_eq!(b.delay(2), Duration::from_millis(200));
        assert_eq!(b.delay(3), Duration::from_millis(300));
    }
}
