//! Fencing of the mirror's writes when several hub replicas share the database: each upstream
//! is mirrored under a lease (`mirror_leases`: holder, epoch, expiry by the database's clock),
//! and every write batch carrying an upstream's changes checks, in its own transaction, that
//! this replica still holds that upstream's lease at the epoch it took it with and that the
//! lease has not expired. A batch that fails the check writes nothing of that upstream; its
//! changes are refused ([`StoreError::Fenced`]), the refusal is counted and logged once, and
//! whoever runs that upstream's mirror is told to stop it ([`Fencing::hold`]'s `Notify`).
//!
//! The lease keeper (the gateway's) decides when to take, renew and give up a lease; this
//! module only knows which epochs this replica holds now.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, PoisonError},
};

use prometheus::{IntCounterVec, Opts};
use tokio::sync::Notify;

use crate::store::types::StoreError;

/// The upstream and lease epoch a change is written under.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fence {
    /// The upstream (the mirrored cluster's name).
    pub upstream: String,
    /// The lease's epoch when this replica took it.
    pub epoch: i64,
}

/// Which leases this replica holds, and what a refused batch does.
pub struct Fencing {
    replica: String,
    held: Mutex<HashMap<String, (i64, Arc<Notify>)>>,
    /// Refusals logged already: each (upstream, epoch) is logged once.
    logged: Mutex<HashSet<Fence>>,
    refused: IntCounterVec,
}

impl Fencing {
    /// Fencing for replica `replica` (its id in `mirror_leases.holder`). Its refused-batch
    /// counter ([`Fencing::refused_batches`]) is for the caller to register.
    pub fn new(replica: String) -> Result<Self, prometheus::Error> {
        let refused = IntCounterVec::new(
            Opts::new(
                "gpustack_gateway_mirror_fenced_batches_total",
                "Write batches of an upstream's mirror refused because this replica no longer held its lease (another replica mirrors it).",
            ),
            &["cluster"],
        )?;
        Ok(Fencing {
            replica,
            held: Mutex::default(),
            logged: Mutex::default(),
            refused,
        })
    }

    /// This replica's id.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// The counter of refused batches, by upstream (label `cluster`).
    pub fn refused_batches(&self) -> &IntCounterVec {
        &self.refused
    }

    /// Notes that this replica holds `upstream`'s lease at `epoch`; the returned `Notify` is
    /// woken when a batch of that upstream is refused (the lease is lost: stop its mirror).
    pub fn hold(&self, upstream: &str, epoch: i64) -> Arc<Notify> {
        let lost = Arc::new(Notify::new());
        self.held_map()
            .insert(upstream.to_owned(), (epoch, lost.clone()));
        lost
    }

    /// Notes that this replica no longer holds `upstream`'s lease: its writes are refused
    /// from now on, before they reach the database.
    pub fn release(&self, upstream: &str) {
        self.held_map().remove(upstream);
    }

    /// The epoch of `upstream`'s lease while this replica holds it.
    pub fn epoch_of(&self, upstream: &str) -> Option<i64> {
        self.held_map().get(upstream).map(|(epoch, _)| *epoch)
    }

    /// The fence a change of `upstream` is written under, or `Fenced` when this replica does
    /// not hold its lease.
    pub(super) fn fence(&self, upstream: &str) -> Result<Fence, StoreError> {
        match self.held_map().get(upstream) {
            Some((epoch, _)) => Ok(Fence {
                upstream: upstream.to_owned(),
                epoch: *epoch,
            }),
            None => Err(StoreError::Fenced {
                upstream: upstream.to_owned(),
                epoch: None,
            }),
        }
    }

    /// A batch's changes of `fence` were refused by the database: counted, logged once per
    /// epoch, and the mirror told to stop (the lease is no longer held here).
    pub(super) fn refused(&self, fence: &Fence) {
        self.refused.with_label_values(&[&fence.upstream]).inc();
        let first = self
            .logged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(fence.clone());
        if first {
            tracing::warn!(
                upstream = %fence.upstream,
                epoch = fence.epoch,
                replica = %self.replica,
                "a mirror write batch was refused: this replica no longer holds the upstream's lease (another replica took it over); its mirror stops here"
            );
        }
        let mut held = self.held_map();
        if held
            .get(&fence.upstream)
            .is_some_and(|(e, _)| *e == fence.epoch)
            && let Some((_, lost)) = held.remove(&fence.upstream)
        {
            lost.notify_one();
        }
    }

    fn held_map(&self) -> std::sync::MutexGuard<'_, HashMap<String, (i64, Arc<Notify>)>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The distinct fences of a batch, as the columns of the lease check's `UNNEST`.
pub(super) fn distinct<'a>(fences: impl Iterator<Item = &'a Fence>) -> (Vec<String>, Vec<i64>) {
    let mut seen = HashSet::new();
    let (mut upstreams, mut epochs) = (Vec::new(), Vec::new());
    for f in fences {
        if seen.insert(f) {
            upstreams.push(f.upstream.clone());
            epochs.push(f.epoch);
        }
    }
    (upstreams, epochs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fence(upstream: &str, epoch: i64) -> Fence {
        Fence {
            upstream: upstream.into(),
            epoch,
        }
    }

    #[test]
    fn a_change_is_fenced_only_while_its_lease_is_held() {
        let f = Fencing::new("r1".into()).unwrap();
        assert!(matches!(
            f.fence("east"),
            Err(StoreError::Fenced { epoch: None, .. })
        ));
        f.hold("east", 3);
        assert_eq!(f.fence("east").unwrap(), fence("east", 3));
        f.release("east");
        assert!(f.fence("east").is_err());
    }

    #[tokio::test]
    async fn a_refusal_is_counted_each_time_and_stops_the_holder_once() {
        let f = Fencing::new("r1".into()).unwrap();
        let lost = f.hold("east", 3);
        f.refused(&fence("east", 3));
        // Told: the stored permit makes this return at once.
        tokio::time::timeout(std::time::Duration::from_secs(1), lost.notified())
            .await
            .expect("the holder was told");
        assert!(f.fence("east").is_err(), "no longer held");
        f.refused(&fence("east", 3));
        assert_eq!(f.refused_batches().with_label_values(&["east"]).get(), 2);
    }

    #[test]
    fn a_refusal_of_an_older_epoch_leaves_a_newer_hold() {
        let f = Fencing::new("r1".into()).unwrap();
        f.hold("east", 4);
        f.refused(&fence("east", 3));
        assert_eq!(f.fence("east").unwrap().epoch, 4);
    }

    #[test]
    fn distinct_fences_are_listed_once_in_first_seen_order() {
        let fences = [fence("b", 1), fence("a", 2), fence("b", 1)];
        assert_eq!(
            distinct(fences.iter()),
            (vec!["b".to_owned(), "a".to_owned()], vec![1, 2])
        );
    }
}
