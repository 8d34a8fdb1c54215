//! When the device plugins last allocated. The `Devices` status writer waits for a quiet
//! moment, so that its write to the API server never queues in front of an `Allocate`'s
//! annotation write (the API server commits writes one after another: a status write in
//! flight delays the next annotation by a whole commit).

use std::{
    sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

/// Allocations in flight and when the last one ended.
#[derive(Debug)]
pub struct Activity {
    in_flight: AtomicUsize,
    last: Mutex<Instant>,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
        }
    }
}

/// Held while one `Allocate` runs.
pub struct Busy<'a>(&'a Activity);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        *self.0.last.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Activity {
    pub fn begin(&self) -> Busy<'_> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Busy(self)
    }

    /// How long no allocation has run; `None` while one does.
    pub fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        Some(
            self.last
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .elapsed(),
        )
    }
}

/// How long a write that has waited `waited` so far waits on: `None` to write now. It writes
/// once allocations have been idle for `quiet`, or at the latest after `max_delay`, so that a
/// steady stream of allocations still sees the status written.
pub fn wait_before_write(
    idle: Option<Duration>,
    waited: Duration,
    quiet: Duration,
    max_delay: Duration,
) -> Option<Duration> {
    let left = max_delay.checked_sub(waited).filter(|l| !l.is_zero())?;
    match idle {
        Some(i) if i >= quiet => None,
        Some(i) => Some((quiet - i).min(left)),
        None => Some(quiet.min(left)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn writes_once_quiet_or_at_the_latest_after_the_delay() {
        let (quiet, max) = (50 * MS, 1000 * MS);
        // Quiet long enough: now.
        assert_eq!(
            wait_before_write(Some(60 * MS), Duration::ZERO, quiet, max),
            None
        );
        // Idle for a while: the rest of the quiet time.
        assert_eq!(
            wait_before_write(Some(20 * MS), Duration::ZERO, quiet, max),
            Some(30 * MS)
        );
        // An allocation in flight: another quiet period, but never past the delay.
        assert_eq!(
            wait_before_write(None, Duration::ZERO, quiet, max),
            Some(quiet)
        );
        assert_eq!(wait_before_write(None, 980 * MS, quiet, max), Some(20 * MS));
        assert_eq!(wait_before_write(None, 1000 * MS, quiet, max), None);
        assert_eq!(
            wait_before_write(Some(Duration::ZERO), 1200 * MS, quiet, max),
            None
        );
    }

    #[test]
    fn activity_counts_what_is_in_flight() {
        let a = Activity::default();
        let busy = a.begin();
        assert_eq!(a.idle_for(), None);
        drop(busy);
        assert!(a.idle_for().is_some_and(|d| d < Duration::from_secs(5)));
    }
}
