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

#[cfg(test)]
mod tests {
    use super::*;

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
