//! Writing the ledger's `Devices.status` off the allocation path: the ledger loop hands the
//! latest status over, and this task writes it once the device plugins have been quiet for a
//! moment ([`crate::plugin::activity`]), or at the latest after [`MAX_DELAY`]. A status
//! handed over meanwhile supersedes the pending one: only the latest is written. A failed
//! write, or one before the `Devices` object exists, is retried.

use std::{sync::Arc, time::Duration};

use gpustack_api::{Manufacturer, devices::DevicesStatus};
use kube::Client;
use tokio::sync::watch;

use super::objects;
use crate::plugin::activity::{Activity, wait_before_write};

/// How long allocations must have been idle before the status is written.
pub const QUIET: Duration = Duration::from_millis(50);
/// The longest a changed status waits for a quiet moment.
pub const MAX_DELAY: Duration = Duration::from_secs(1);
/// How long a failed write waits before the next try.
const RETRY: Duration = Duration::from_secs(1);

/// Where the status goes.
pub struct Target {
    pub client: Client,
    pub node: String,
    pub ours: Vec<Manufacturer>,
}

/// Writes each new status handed over on `latest` until `stop`.
pub async fn run(
    target: Target,
    activity: Arc<Activity>,
    mut latest: watch::Receiver<Option<DevicesStatus>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut written: Option<DevicesStatus> = None;
    loop {
        tokio::select! {
            changed = latest.changed() => if changed.is_err() { return },
            _ = stop.wait_for(|s| *s) => return,
        }
        loop {
            let started = tokio::time::Instant::now();
            while let Some(wait) =
                wait_before_write(activity.idle_for(), started.elapsed(), QUIET, MAX_DELAY)
            {
                tokio::time::sleep(wait).await;
            }
            let Some(status) = latest.borrow_and_update().clone() else {
                break;
            };
            if written.as_ref() == Some(&status) {
                break;
            }
            let t = std::time::Instant::now();
            match objects::publish_status(&target.client, &target.node, &target.ours, &status).await
            {
                Ok(true) => {
                    tracing::debug!(
                        write_us = t.elapsed().as_micros() as u64,
                        "wrote the Devices status"
                    );
                    written = Some(status);
                    break;
                }
                outcome => {
                    match outcome {
                        Err(e) => tracing::warn!("writing the Devices status: {e}"),
                        _ => tracing::debug!("no Devices object yet for the status"),
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(RETRY) => {}
                        _ = stop.wait_for(|s| *s) => return,
                    }
                }
            }
        }
    }
}
