//! When a replica takes, renews and gives up an upstream's lease (hub replicas sharing a
//! PostgreSQL database; the statements are [`crate::hub_store::leases`]'). Pure: instants in,
//! a decision out.
//!
//! The database computes every expiry with its own clock. A replica only knows that a renewal
//! it *sent* at instant `t` and that succeeded leaves the lease valid until at least `t +
//! lease` (the database added the lease time to a later instant of its own clock), so it
//! counts from when it sent the request, never from when the answer came: it gives up no
//! later than the database lets another replica take over.

use std::time::{Duration, Instant};

/// A lease this replica holds, as it knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    /// The epoch it was taken at (the fencing token).
    pub epoch: i64,
    /// When the last successful take or renewal was sent.
    pub renewed_at: Instant,
    /// When the last failed renewal was sent, if one failed since.
    pub failed_at: Option<Instant>,
}

/// What to do next about a held lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Renew it now.
    Renew,
    /// Nothing until this much time has passed.
    Wait(Duration),
    /// It may have expired: stop mirroring the upstream.
    GiveUp,
}

/// How often a held lease is renewed: three tries within one lease time.
pub fn renew_every(lease: Duration) -> Duration {
    lease / 3
}

/// How long after a failed renewal to try again: several more tries before it expires.
pub fn retry_after_failure(lease: Duration) -> Duration {
    lease / 15
}

/// How often a replica that holds no lease of an upstream tries to take it: a dead holder's
/// upstream is taken over within this of its lease's expiry.
pub fn take_every(lease: Duration) -> Duration {
    (lease / 15).max(Duration::from_millis(100))
}

/// What to do about `held` at `now`, each lease lasting `lease`.
pub fn next(held: &Held, now: Instant, lease: Duration) -> Next {
    let deadline = held.renewed_at + lease;
    if now >= deadline {
        return Next::GiveUp;
    }
    let mut due = held.renewed_at + renew_every(lease);
    if let Some(failed) = held.failed_at {
        due = due.max(failed + retry_after_failure(lease));
    }
    // Woken at the deadline at the latest, to give up in time.
    let due = due.min(deadline);
    if now >= due {
        Next::Renew
    } else {
        Next::Wait(due - now)
    }
}

/// `held` after a renewal sent at `sent` succeeded.
pub fn renewed(held: Held, sent: Instant) -> Held {
    Held {
        renewed_at: sent,
        failed_at: None,
        ..held
    }
}

/// `held` after a renewal sent at `sent` could not reach the database (it is still held
/// until its deadline; tried again soon).
pub fn renewal_failed(held: Held, sent: Instant) -> Held {
    Held {
        failed_at: Some(sent),
        ..held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    fn held(at: Instant) -> Held {
        Held {
            epoch: 1,
            renewed_at: at,
            failed_at: None,
        }
    }

    #[test]
    fn a_fresh_lease_waits_a_third_of_its_time_then_renews() {
        let t = Instant::now();
        let h = held(t);
        assert_eq!(next(&h, t, LEASE), Next::Wait(Duration::from_secs(5)));
        assert_eq!(
            next(&h, t + Duration::from_secs(2), LEASE),
            Next::Wait(Duration::from_secs(3))
        );
        assert_eq!(next(&h, t + Duration::from_secs(5), LEASE), Next::Renew);
    }

    #[test]
    fn a_renewal_counts_from_when_it_was_sent() {
        let t = Instant::now();
        let h = renewed(held(t), t + Duration::from_secs(5));
        assert_eq!(h.renewed_at, t + Duration::from_secs(5));
        assert_eq!(
            next(&h, t + Duration::from_secs(6), LEASE),
            Next::Wait(Duration::from_secs(4))
        );
    }

    #[test]
    fn a_failed_renewal_is_retried_soon_and_the_lease_given_up_at_its_deadline() {
        let t = Instant::now();
        let h = renewal_failed(held(t), t + Duration::from_secs(5));
        assert_eq!(
            next(&h, t + Duration::from_secs(5), LEASE),
            Next::Wait(Duration::from_secs(1))
        );
        assert_eq!(next(&h, t + Duration::from_secs(6), LEASE), Next::Renew);
        // Failing on until the deadline: given up then, never later.
        let h = renewal_failed(h, t + Duration::from_millis(14_500));
        assert_eq!(
            next(&h, t + Duration::from_millis(14_600), LEASE),
            Next::Wait(Duration::from_millis(400))
        );
        assert_eq!(next(&h, t + LEASE, LEASE), Next::GiveUp);
        // A replica that wakes up long after (paused) gives up before anything else.
        assert_eq!(next(&h, t + 10 * LEASE, LEASE), Next::GiveUp);
    }

    #[test]
    fn a_free_lease_is_looked_at_often_but_never_in_a_busy_loop() {
        assert_eq!(take_every(LEASE), Duration::from_secs(1));
        assert_eq!(
            take_every(Duration::from_millis(300)),
            Duration::from_millis(100)
        );
    }
}
