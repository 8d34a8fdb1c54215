//! The tailer: every event any replica commits, read back in version order and sent to this
//! replica's fan-out, where its watchers take them. Woken by `LISTEN` (another replica's
//! commit), by this replica's own commits, and, in case a notification was lost while the
//! connection was away, by a poll every [`POLL`].
//!
//! Versions are committed in order (see [`super::writer`]), so reading what follows the last
//! version sent never skips an event that commits later.

use std::{sync::Arc, time::Duration};

use sqlx::{PgPool, postgres::PgListener};
use tokio::sync::{Notify, broadcast, watch};

use super::{compaction, reads, writer::CHANNEL};
use crate::store::types::{StoreError, StoredEvent};

/// How a replica's tailer learns that some replica committed.
#[derive(Clone, Copy, Debug)]
pub enum Wakeup {
    /// `LISTEN` on the writers' `NOTIFY` (and a slow poll as a safety net): the default.
    Listen,
    /// A poll of the log this often, nothing else: the alternative `Listen` was chosen over
    /// (the tests measure both: `LISTEN` fans out in about 1 ms at p50, a 10 ms poll in 7 ms,
    /// and polling reads the log every 10 ms on every replica while nothing happens).
    #[cfg_attr(not(test), allow(dead_code))]
    Poll(std::time::Duration),
}

/// How often the log is read with no notification: the safety net, not the path.
const POLL: Duration = Duration::from_secs(1);

/// How many events one read takes.
const PAGE: i64 = 512;

/// How long to wait before reading again after the database failed.
const RETRY: Duration = Duration::from_millis(500);

/// Sends every event after `last` to `fanout`, publishing the last version sent on `sent`,
/// until every receiver of `sent` is gone. Where the log was trimmed past what it had sent (it
/// fell that far behind), it ends every open watch through `watch_epoch`: their clients
/// resume, or list again where their version is gone.
pub async fn run(
    pool: PgPool,
    mut last: u64,
    fanout: broadcast::Sender<StoredEvent>,
    sent: watch::Sender<u64>,
    committed: Arc<Notify>,
    wakeup: Wakeup,
    watch_epoch: watch::Sender<u64>,
) {
    let (poll, listens) = match wakeup {
        Wakeup::Listen => (POLL, true),
        Wakeup::Poll(every) => (every, false),
    };
    let mut listener = if listens { listen(&pool).await } else { None };
    loop {
        match reads::tail(&pool, last, PAGE).await {
            Ok(events) => {
                let full = events.len() == usize::try_from(PAGE).unwrap_or(usize::MAX);
                let skipped = match trimmed_past(&pool, last, &events).await {
                    Ok(skipped) => skipped,
                    Err(e) => {
                        tracing::warn!(error = %e, "reading the mirror's event log from PostgreSQL failed");
                        tokio::select! {
                            () = sent.closed() => return,
                            () = tokio::time::sleep(RETRY) => continue,
                        }
                    }
                };
                for ev in events {
                    last = ev.rv;
                    // No receivers is fine: nobody is watching.
                    let _ = fanout.send(ev);
                }
                if let Some(compacted) = skipped {
                    tracing::warn!(
                        from = last,
                        trimmed_to = compacted,
                        "the mirror's event log was trimmed past what this replica had sent; \
                         ending its watches"
                    );
                    last = last.max(compacted);
                    watch_epoch.send_modify(|e| *e += 1);
                }
                sent.send_replace(last);
                if full {
                    continue;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading the mirror's event log from PostgreSQL failed");
                tokio::select! {
                    () = sent.closed() => return,
                    () = tokio::time::sleep(RETRY) => continue,
                }
            }
        }
        let woken = tokio::select! {
            () = sent.closed() => return,
            () = committed.notified(), if listens => Wake::Committed,
            heard = notification(listener.as_mut()) => Wake::Heard(heard),
            () = tokio::time::sleep(poll) => Wake::Poll,
        };
        // Notifications that arrived meanwhile are answered by the one read that follows.
        if let Some(l) = listener.as_mut() {
            while l.next_buffered().is_some() {}
        }
        match woken {
            // Listened again at the next poll.
            Wake::Heard(false) => listener = None,
            Wake::Poll if listens && listener.is_none() => listener = listen(&pool).await,
            _ => {}
        }
    }
}

/// The newest trimmed version where the log was trimmed past `last` before `events` (read
/// after `last`) were: versions are handed out one after another, so only a first event that
/// does not follow `last` asks the database, read after the events (the trim publishes its
/// version before it deletes).
async fn trimmed_past(
    pool: &PgPool,
    last: u64,
    events: &[StoredEvent],
) -> Result<Option<u64>, StoreError> {
    if events.first().is_none_or(|ev| ev.rv == last + 1) {
        return Ok(None);
    }
    let compacted = compaction::compacted(pool).await?;
    Ok((compacted > last).then_some(compacted))
}

/// What woke the tailer.
enum Wake {
    /// This replica committed.
    Committed,
    /// A notification (`true`), or the listener's connection failed (`false`).
    Heard(bool),
    /// The poll.
    Poll,
}

/// The next notification on `listener` (`false`: its connection failed); never without one.
async fn notification(listener: Option<&mut PgListener>) -> bool {
    match listener {
        Some(l) => l.recv().await.is_ok(),
        None => std::future::pending().await,
    }
}

/// A listener on the mirror's channel, or `None` while the database cannot be reached (the
/// poll covers for it).
async fn listen(pool: &PgPool) -> Option<PgListener> {
    let mut listener = PgListener::connect_with(pool).await.ok()?;
    listener.listen(CHANNEL).await.ok()?;
    Some(listener)
}
