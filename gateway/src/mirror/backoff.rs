//! The mirror's retry schedules, on the workspace's one [`Backoff`]: an upstream's readiness
//! check (the reference's 5 s doubling to 1 min; a parameter of the mirror so that tests stay
//! fast) and its watches.

use std::time::Duration;

pub use gpustack_serving::backoff::Backoff;

/// The readiness check's schedule: 5 s doubling to a minute, as the reference.
pub const READINESS: Backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(60));

/// How often a mirror whose write failed asks whether the store answers again (a hub's
/// PostgreSQL restarting) before it watches on from the stored progress: 250 ms doubling to
/// 2 s, so that it converges within about 2 s of the database's return.
pub const STORE: Backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(2));

/// The retry schedule of a mirror's watches (kube-runtime's watcher waits it out after each
/// failure): 250 ms doubling to 2 s, from the start again once a watch works. kube-runtime's
/// default doubles to 30 s, so after a 30 s partition the hub waited up to that long before it
/// mirrored the cluster again (issue 35's container fleet took 12.8 s to converge).
#[derive(Clone, Debug, Default)]
pub struct WatchRetry {
    attempt: u32,
}

impl WatchRetry {
    const SCHEDULE: Backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(2));
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
    fn readiness_doubles_from_five_seconds_to_a_minute() {
        let b = READINESS;
        let got: Vec<u64> = (0..7).map(|a| b.delay(a).as_secs()).collect();
        assert_eq!(got, [5, 10, 20, 40, 60, 60, 60]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(60));
    }
}
