//! The one way tests wait for a condition: check it every [`INTERVAL`] until it gives a value
//! or the timeout passes, never a fixed sleep. The same schedule drives a blocking check (a
//! process, a file, kubectl) and an async one (a kube client, a channel); the `poll` forms
//! give `None` on timeout (for callers that fail with what they last saw), the others panic
//! naming what was awaited.

use std::{
    future::Future,
    time::{Duration, Instant},
};

/// How long between two checks.
pub const INTERVAL: Duration = Duration::from_millis(20);

/// When the next check may run: after [`INTERVAL`], or never once `timeout` has passed.
struct Schedule {
    start: Instant,
    timeout: Duration,
}

impl Schedule {
    fn new(timeout: Duration) -> Self {
        Schedule {
            start: Instant::now(),
            timeout,
        }
    }

    /// The wait before the next check; `None` once the time is up.
    fn next(&self) -> Option<Duration> {
        (self.start.elapsed() < self.timeout).then_some(INTERVAL)
    }
}

/// `check`'s first answer, blocking the thread in between; `None` after `timeout`.
pub fn poll_until<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let schedule = Schedule::new(timeout);
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        std::thread::sleep(schedule.next()?);
    }
}

/// [`poll_until`], panicking with `what` after `timeout`.
pub fn wait_until<T>(what: &str, timeout: Duration, check: impl FnMut() -> Option<T>) -> T {
    poll_until(timeout, check)
        .unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}

/// `probe`'s first answer, sleeping on the runtime in between; `None` after `timeout`, also
/// when a probe itself hangs (the whole wait is bounded, not only the gaps).
pub async fn poll<T, F: Future<Output = Option<T>>>(
    timeout: Duration,
    mut probe: impl FnMut() -> F,
) -> Option<T> {
    let schedule = Schedule::new(timeout);
    let checks = async {
        loop {
            if let Some(v) = probe().await {
                return Some(v);
            }
            tokio::time::sleep(schedule.next()?).await;
        }
    };
    tokio::time::timeout(timeout, checks).await.ok().flatten()
}

/// [`poll`], panicking with `what` after `timeout`.
pub async fn until<T, F: Future<Output = Option<T>>>(
    what: &str,
    timeout: Duration,
    probe: impl FnMut() -> F,
) -> T {
    poll(timeout, probe)
        .await
        .unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn a_blocking_check_is_repeated_until_it_answers() {
        let calls = Cell::new(0);
        let got = poll_until(Duration::from_secs(10), || {
            calls.set(calls.get() + 1);
            (calls.get() == 3).then_some("third")
        });
        assert_eq!(got, Some("third"));
        assert_eq!(calls.get(), 3);
    }

    #[test]
    fn a_blocking_check_gives_up_after_the_timeout() {
        let start = Instant::now();
        assert_eq!(poll_until(Duration::from_millis(60), || None::<()>), None);
        assert!(start.elapsed() >= Duration::from_millis(60));
    }

    #[test]
    #[should_panic(expected = "waiting for the impossible")]
    fn waiting_panics_naming_what_it_waited_for() {
        wait_until("the impossible", Duration::from_millis(30), || None::<()>);
    }

    #[tokio::test]
    async fn an_async_probe_is_repeated_until_it_answers_or_the_time_is_up() {
        let calls = Cell::new(0);
        let got = until("the third call", Duration::from_secs(10), || {
            calls.set(calls.get() + 1);
            std::future::ready((calls.get() == 3).then_some(calls.get()))
        })
        .await;
        assert_eq!(got, 3);
        assert_eq!(
            poll(Duration::from_millis(60), || async { None::<()> }).await,
            None
        );
    }
}
