//! Reclaiming what Pods that are gone left on the node. The kubelet has no Release RPC, so a
//! level loop compares the work directories under the pods directory with the live Pods: a
//! directory of a Pod that no longer exists has its partitions destroyed (the ownership markers
//! the partitioned plugin wrote, [`crate::plugin::partition::Marker`]) and is then removed.
//!
//! A partition the library reports in use is retried on the next pass, up to
//! [`MAX_ATTEMPTS`] times; then it is left alone with an error logged.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    time::{Duration, SystemTime},
};

use super::Env;
use crate::{
    plugin::partition::{MARKER_FILE, Marker},
    system_root::SystemRoot,
    vendors::partitions,
};

/// Passes a directory whose partition cannot be destroyed is retried.
pub const MAX_ATTEMPTS: u32 = 30;
/// A directory younger than this is left alone: its Pod may be one `Allocate` found through a
/// fresh list that the Pod watch has not delivered yet.
const GRACE: Duration = Duration::from_secs(2);

/// The reclaim loop's state.
pub struct Reclaimer {
    root: SystemRoot,
    env: Env,
    pods_dir: String,
    failures: BTreeMap<String, u32>,
}

/// The markers in one Pod directory (`<uid>/c-<container>/partition.json`); unreadable ones
/// are reported and skipped.
fn markers(dir: &Path) -> Vec<Marker> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let file = entry.path().join(MARKER_FILE);
        let Ok(text) = std::fs::read(&file) else {
            continue;
        };
        match serde_json::from_slice::<Marker>(&text) {
            Ok(m) => out.push(m),
            Err(e) => tracing::warn!(file = %file.display(), "unreadable partition marker: {e}"),
        }
    }
    out
}

fn old_enough(dir: &Path) -> bool {
    std::fs::metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_none_or(|age| age >= GRACE)
}

impl Reclaimer {
    pub fn new(root: SystemRoot, env: Env, pods_dir: String) -> Self {
        Self {
            root,
            env,
            pods_dir,
            failures: BTreeMap::new(),
        }
    }

    /// One pass: every directory of a Pod not in `live` is reclaimed.
    pub async fn reclaim(&mut self, live: &BTreeSet<String>) {
        let Ok(entries) = self.root.list_dir(&self.pods_dir) else {
            return;
        };
        self.failures.retain(|uid, _| entries.contains(uid));
        for uid in entries.into_iter().filter(|u| !live.contains(u)) {
            let dir = self.root.path(&self.pods_dir).join(&uid);
            if !old_enough(&dir) || self.failures.get(&uid).is_some_and(|n| *n >= MAX_ATTEMPTS) {
                continue;
            }
            if self.destroy_partitions(&uid, &dir).await {
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => {
                        tracing::info!(pod_uid = %uid, "reclaimed the work directory of a Pod that is gone")
                    }
                    Err(e) => tracing::warn!(dir = %dir.display(), "reclaiming: {e}"),
                }
            }
        }
    }

    /// Destroys the partitions marked in `dir`; false when one must be retried.
    async fn destroy_partitions(&mut self, uid: &str, dir: &Path) -> bool {
        let mut done = true;
        for marker in markers(dir) {
            let result = partitions::destroy_blocking(
                self.root.clone(),
                self.env.clone(),
                marker.manufacturer,
                marker.accelerator.clone(),
                (marker.gpu_instance, marker.compute_instance),
            )
            .await;
            match result {
                Ok(()) => {
                    tracing::info!(pod_uid = %uid, partition = %marker.id, card = %marker.accelerator, "destroyed the partition of a Pod that is gone")
                }
                Err(e) => {
                    done = false;
                    let n = self.failures.entry(uid.to_owned()).or_default();
                    *n += 1;
                    if *n >= MAX_ATTEMPTS {
                        tracing::error!(pod_uid = %uid, partition = %marker.id, "giving up destroying the partition after {n} attempts: {e}");
                    } else if e.is_in_use() {
                        tracing::info!(pod_uid = %uid, partition = %marker.id, "partition still in use, retrying: {e}");
                    } else {
                        tracing::warn!(pod_uid = %uid, partition = %marker.id, "destroying the partition: {e}");
                    }
                }
            }
        }
        done
    }
}
