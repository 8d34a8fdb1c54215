//! What unit tests share (this crate's, and the hub's through the `test-support` feature).

use std::time::Duration;

/// Waits until `check` holds, yielding to other tasks in between; panics naming `what` after
/// ten seconds.
pub async fn until(what: &str, check: impl Fn() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !check() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}
