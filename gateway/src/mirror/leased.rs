//! An upstream's mirror on a hub replica that shares its PostgreSQL database with others: it
//! runs only while this replica holds the upstream's lease ([`lease`] decides when to take,
//! renew and give up; [`Leasing`] holds the statements). A replica that takes the lease
//! starts the mirror, which resumes each kind's watch from the versions stored in the
//! database (as after a restart); one that loses it (not renewed in time, or a write batch
//! refused by the fencing check) stops it and waits to take it again.

use std::{sync::Arc, time::Instant};

use tokio::sync::Notify;

use super::{
    lease::{self, Held, Next},
    progress::AbortOnDrop,
    run::Mirror,
};
use crate::hub_store::Leasing;

/// Mirrors `mirror`'s upstream whenever this replica holds its lease, until aborted.
pub async fn run(mirror: Mirror, leasing: Leasing) {
    let name = mirror.upstream.name.clone();
    let gauge = leasing.held_gauge().with_label_values(&[name.as_str()]);
    gauge.set(0);
    loop {
        let (epoch, taken_at) = take(&leasing, &name).await;
        let hold = Hold::new(&leasing, &name, epoch);
        gauge.set(1);
        tracing::info!(upstream = %name, replica = %leasing.replica(), epoch, "took the upstream's lease: mirroring it from the stored versions");
        let task = AbortOnDrop(tokio::spawn(mirror.clone().run()));
        let held = Held {
            epoch,
            renewed_at: taken_at,
            failed_at: None,
        };
        let why = keep(&leasing, &name, held, &hold.lost).await;
        drop(task);
        drop(hold);
        gauge.set(0);
        tracing::warn!(upstream = %name, replica = %leasing.replica(), epoch, reason = why, "stopped mirroring the upstream: this replica no longer holds its lease");
    }
}

/// This replica's hold of a lease in the fencing of its writes, released when dropped (the
/// mirror stopped, or the task aborted).
struct Hold {
    leasing: Leasing,
    name: String,
    lost: Arc<Notify>,
}

impl Hold {
    fn new(leasing: &Leasing, name: &str, epoch: i64) -> Self {
        Hold {
            lost: leasing.fencing().hold(name, epoch),
            leasing: leasing.clone(),
            name: name.to_owned(),
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.leasing.fencing().release(&self.name);
    }
}

/// Takes `name`'s lease as soon as it is free or expired: its epoch, and when the taking
/// statement was sent.
async fn take(leasing: &Leasing, name: &str) -> (i64, Instant) {
    let every = lease::take_every(leasing.lease());
    loop {
        let sent = Instant::now();
        match tokio::time::timeout(leasing.lease(), leasing.take(name)).await {
            Ok(Ok(Some(epoch))) => return (epoch, sent),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                tracing::debug!(upstream = %name, error = %e, "taking the upstream's lease failed")
            }
            Err(_) => tracing::debug!(upstream = %name, "taking the upstream's lease timed out"),
        }
        tokio::time::sleep(every).await;
    }
}

/// Keeps `held` renewed until it is lost; why it was.
async fn keep(leasing: &Leasing, name: &str, mut held: Held, lost: &Notify) -> &'static str {
    let time = leasing.lease();
    loop {
        match lease::next(&held, Instant::now(), time) {
            Next::GiveUp => return "it could not be renewed before it expired",
            Next::Wait(d) => {
                tokio::select! {
                    () = tokio::time::sleep(d) => {}
                    () = lost.notified() => return "a write batch was refused: another replica holds it",
                }
            }
            Next::Renew => {
                let sent = Instant::now();
                // Never waited on past the lease's deadline.
                let left = (held.renewed_at + time).saturating_duration_since(sent);
                match tokio::time::timeout(left, leasing.renew(name, held.epoch)).await {
                    Ok(Ok(true)) => held = lease::renewed(held, sent),
                    Ok(Ok(false)) => return "it expired or was taken over by another replica",
                    Ok(Err(e)) => {
                        tracing::warn!(upstream = %name, error = %e, "renewing the upstream's lease failed; trying again");
                        held = lease::renewal_failed(held, sent);
                    }
                    Err(_) => held = lease::renewal_failed(held, sent),
                }
            }
        }
    }
}
