//! The one retry schedule of the workspace: a first wait, doubled after each further failure
//! up to a cap. Each user names its own base and cap (the hub's readiness checks, its
//! watches, the accept loop, the collector's passes, the model manager's failed digests).

use std::time::Duration;

/// `base`, doubling, at most `cap`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after the first failure.
    pub base: Duration,
    /// The longest wait.
    pub cap: Duration,
}

impl Backoff {
    /// A schedule starting at `base` and never waiting longer than `cap`.
    pub const fn new(base: Duration, cap: Duration) -> Self {
        Backoff { base, cap }
    }

    /// The wait after failed attempt number `attempt` (0 for the first failure).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// The wait after the `n`th failure in a row, counting from 1 (0 is taken as 1).
    pub fn after_failures(&self, n: u64) -> Duration {
        let attempt = u32::try_from(n.saturating_sub(1)).unwrap_or(u32::MAX);
        self.delay(attempt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_the_base_to_the_cap() {
        let b = Backoff::new(Duration::from_secs(5), Duration::from_secs(60));
        let got: Vec<u64> = (0..7).map(|a| b.delay(a).as_secs()).collect();
        assert_eq!(got, [5, 10, 20, 40, 60, 60, 60]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn counts_of_failures_start_at_one() {
        let b = Backoff::new(Duration::from_millis(5), Duration::from_secs(1));
        assert_eq!(b.after_failures(0), Duration::from_millis(5));
        assert_eq!(b.after_failures(1), Duration::from_millis(5));
        assert_eq!(b.after_failures(2), Duration::from_millis(10));
        assert_eq!(b.after_failures(8), Duration::from_millis(640));
        assert_eq!(b.after_failures(9), Duration::from_secs(1));
        assert_eq!(b.after_failures(u64::MAX), Duration::from_secs(1));
    }

    #[test]
    fn a_huge_base_saturates_at_the_cap() {
        let b = Backoff::new(Duration::MAX / 2, Duration::MAX);
        assert_eq!(b.delay(3), Duration::MAX);
    }
}
