//! Per-upstream status, kept in memory and served at `GET /apis/workers`. The transitions are a
//! pure function of the previous status and what happened, so they are tested without IO.
//!
//! - `Pending`: the upstream has not yet been reached (readiness check failing or running).
//! - `Syncing`: reached; the first list of some mirrored kind has not completed.
//! - `Ready`: every served kind was listed and its watch is running.
//! - `Degraded`: it was reached, but its watch or health probe fails now; its objects stay
//!   served from the store as of `lastSyncTime`.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, RwLock},
    time::Duration,
};

use jiff::Timestamp;
use serde_json::{Value, json};

use super::failure::FailurePhase;

/// Where an upstream's mirror stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Subscribed, not reached yet.
    Pending,
    /// Reached; some kind's first list is not done.
    Syncing,
    /// Every kind listed and followed.
    Ready,
    /// Failing; the stored objects are served as they were.
    Degraded,
}

impl Phase {
    /// The phase's name, as status and `kubectl get clusters` show it.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Syncing => "Syncing",
            Phase::Ready => "Ready",
            Phase::Degraded => "Degraded",
        }
    }
}

/// What one upstream's mirror reports.
#[derive(Clone, Debug, PartialEq)]
pub struct UpstreamStatus {
    /// Where the mirror stands.
    pub phase: Phase,
    /// When the subscription was made (kept across restarts for stored ones).
    pub subscribed_at: Option<Timestamp>,
    /// What the subscriber asked for, echoed.
    pub cluster_spec: Option<Value>,
    /// When the mirror was last known to match the upstream.
    pub last_sync_time: Option<Timestamp>,
    /// The latest failure, credentials stripped.
    pub last_error: Option<String>,
    last_failure: Option<Timestamp>,
    /// Mirrored kinds (`plural.group`) the upstream serves, and those listed since reached.
    wanted: BTreeSet<String>,
    synced: BTreeSet<String>,
    /// Kinds asked for that the upstream does not serve.
    pub not_served: Vec<String>,
    /// Stored objects per kind.
    pub counts: BTreeMap<String, u64>,
    /// The phase of the latest failure.
    pub last_error_phase: Option<FailurePhase>,
    /// Failures seen since the gateway started, by phase.
    pub failures: BTreeMap<FailurePhase, u64>,
    /// Since the gateway started: lists of a kind that had been synced before (its stored
    /// version could not be resumed, or its watch expired), and watches resumed from a stored
    /// version without a list. Kept across a forced re-subscribe.
    pub relists: u64,
    /// Watches resumed from a stored version without a list, since the gateway started.
    pub resumes: u64,
}

impl Default for UpstreamStatus {
    fn default() -> Self {
        UpstreamStatus {
            phase: Phase::Pending,
            subscribed_at: None,
            cluster_spec: None,
            last_sync_time: None,
            last_error: None,
            last_failure: None,
            wanted: BTreeSet::new(),
            synced: BTreeSet::new(),
            not_served: Vec::new(),
            counts: BTreeMap::new(),
            last_error_phase: None,
            failures: BTreeMap::new(),
            relists: 0,
            resumes: 0,
        }
    }
}

/// What happened to an upstream's mirror.
#[derive(Clone, Debug)]
pub enum Happening {
    /// The readiness check passed: these kinds are served (and will be watched), those not.
    Reached {
        /// Kinds the upstream serves.
        served: Vec<String>,
        /// Kinds asked for that it does not serve.
        not_served: Vec<String>,
    },
    /// A kind's list completed (and was swept).
    Listed(String),
    /// A change from the upstream was written.
    Changed,
    /// Something failed in `phase` (message already stripped of credentials).
    Failed {
        /// Where it failed.
        phase: FailurePhase,
        /// What failed, credentials stripped.
        message: String,
    },
    /// The health probe answered.
    ProbeOk,
}

impl UpstreamStatus {
    /// The status after `what` happened at `now`. A probe success turns `Degraded` back into
    /// `Ready` only once no failure was seen for `quiet` (a watch that keeps failing while the
    /// upstream answers probes stays `Degraded`).
    pub fn next(mut self, what: Happening, now: Timestamp, quiet: Duration) -> Self {
        let all_synced = |s: &Self| s.wanted.is_subset(&s.synced);
        match what {
            Happening::Reached { served, not_served } => {
                self.wanted = served.into_iter().collect();
                self.not_served = not_served;
                self.phase = if all_synced(&self) {
                    self.last_sync_time = Some(now);
                    Phase::Ready
                } else if self.phase == Phase::Degraded {
                    Phase::Degraded
                } else {
                    Phase::Syncing
                };
            }
            Happening::Listed(kind) => {
                self.synced.insert(kind);
                if all_synced(&self) {
                    // A completed relist proves the mirror matches the upstream.
                    self.phase = Phase::Ready;
                    self.last_sync_time = Some(now);
                    self.last_error = None;
                    self.last_error_phase = None;
                }
            }
            Happening::Changed => {
                if self.phase == Phase::Ready {
                    self.last_sync_time = Some(now);
                }
            }
            Happening::Failed { phase, message } => {
                self.last_error = Some(message);
                self.last_error_phase = Some(phase);
                self.last_failure = Some(now);
                *self.failures.entry(phase).or_default() += 1;
                // Never synced: still Pending. Synced before (perhaps before a restart, with
                // the mirror served from the store): Degraded.
                if self.phase != Phase::Pending || self.last_sync_time.is_some() {
                    self.phase = Phase::Degraded;
                }
            }
            Happening::ProbeOk => {
                let quiet_enough = self
                    .last_failure
                    .is_none_or(|f| now.duration_since(f).unsigned_abs() >= quiet);
                match self.phase {
                    Phase::Ready => self.last_sync_time = Some(now),
                    Phase::Degraded if quiet_enough && all_synced(&self) => {
                        self.phase = Phase::Ready;
                        self.last_sync_time = Some(now);
                        self.last_error = None;
                        self.last_error_phase = None;
                    }
                    _ => {}
                }
            }
        }
        self
    }

    fn to_json(&self, cluster: &str) -> Value {
        json!({
            "cluster": cluster,
            "subscribedAt": self.subscribed_at.map(|t| t.to_string()),
            "clusterSpec": self.cluster_spec,
            "phase": self.phase.as_str(),
            "lastSyncTime": self.last_sync_time.map(|t| t.to_string()),
            "lastError": self.last_error,
            "lastErrorPhase": self.last_error_phase.map(FailurePhase::as_str),
            "notServed": self.not_served,
            "counts": self.counts,
            "relists": self.relists,
            "resumes": self.resumes,
        })
    }
}

/// Every upstream's status. Cheap to clone; shared by the mirrors and the API.
#[derive(Clone, Default)]
pub struct StatusBoard {
    inner: Arc<RwLock<BTreeMap<String, UpstreamStatus>>>,
    quiet: Duration,
}

impl StatusBoard {
    /// A board where `Degraded` needs `quiet` without failures before probes make it `Ready`.
    pub fn new(quiet: Duration) -> Self {
        StatusBoard {
            inner: Default::default(),
            quiet,
        }
    }

    /// Starts tracking `cluster` as `Pending`; `last_sync_time` is when a previous run last
    /// had it in sync, if it did (its mirror is still served from the store).
    /// A subscription replaced (forced) keeps its list and resume counts. `subscribed_at` and
    /// `cluster_spec` are echoed in the status.
    pub fn add(
        &self,
        cluster: &str,
        last_sync_time: Option<Timestamp>,
        subscribed_at: Timestamp,
        cluster_spec: Option<Value>,
    ) {
        let mut m = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let (relists, resumes) = m.get(cluster).map_or((0, 0), |s| (s.relists, s.resumes));
        m.insert(
            cluster.to_owned(),
            UpstreamStatus {
                last_sync_time,
                subscribed_at: Some(subscribed_at),
                cluster_spec,
                relists,
                resumes,
                ..UpstreamStatus::default()
            },
        );
    }

    /// Counts a relist of one of `cluster`'s kinds.
    pub fn count_relist(&self, cluster: &str) {
        let mut m = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = m.get_mut(cluster) {
            s.relists += 1;
        }
    }

    /// Counts a watch of one of `cluster`'s kinds resumed from a stored version.
    pub fn count_resume(&self, cluster: &str) {
        let mut m = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = m.get_mut(cluster) {
            s.resumes += 1;
        }
    }

    /// Stops tracking `cluster`.
    pub fn remove(&self, cluster: &str) {
        let mut m = self.inner.write().unwrap_or_else(|e| e.into_inner());
        m.remove(cluster);
    }

    /// Every upstream's status, by name.
    pub fn all(&self) -> Vec<(String, UpstreamStatus)> {
        let m = self.inner.read().unwrap_or_else(|e| e.into_inner());
        m.iter().map(|(c, s)| (c.clone(), s.clone())).collect()
    }

    /// Records what happened to the mirror of `cluster`.
    pub fn record(&self, cluster: &str, what: Happening) {
        let mut m = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let current = m.remove(cluster).unwrap_or_default();
        m.insert(
            cluster.to_owned(),
            current.next(what, Timestamp::now(), self.quiet),
        );
    }

    /// Records how many objects of `kind` the mirror of `cluster` stores.
    pub fn set_count(&self, cluster: &str, kind: &str, n: u64) {
        let mut m = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = m.get_mut(cluster) {
            s.counts.insert(kind.to_owned(), n);
        }
    }

    /// The status of `cluster`'s mirror, if it is subscribed.
    pub fn get(&self, cluster: &str) -> Option<UpstreamStatus> {
        let m = self.inner.read().unwrap_or_else(|e| e.into_inner());
        m.get(cluster).cloned()
    }

    /// The `GET /apis/workers` document, of every upstream or of those in `only`.
    pub fn to_json(&self, only: Option<&[String]>) -> Value {
        let m = self.inner.read().unwrap_or_else(|e| e.into_inner());
        let items: Vec<Value> = m
            .iter()
            .filter(|(c, _)| only.is_none_or(|o| o.contains(c)))
            .map(|(c, s)| s.to_json(c))
            .collect();
        json!({"kind": "WorkerList", "apiVersion": "gateway.gpustack.ai/v1", "items": items})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(message: &str) -> Happening {
        Happening::Failed {
            phase: FailurePhase::Watch,
            message: message.into(),
        }
    }

    const QUIET: Duration = Duration::from_secs(2);

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn reached() -> Happening {
        Happening::Reached {
            served: vec!["devices.worker.gpustack.ai".into(), "nodes".into()],
            not_served: vec!["modelartifacts.worker.gpustack.ai".into()],
        }
    }

    #[test]
    fn pending_until_reached_then_ready_once_every_kind_listed() {
        let s = UpstreamStatus::default().next(failed("refused"), at(0), QUIET);
        assert_eq!(s.phase, Phase::Pending);
        assert_eq!(s.last_error.as_deref(), Some("refused"));
        let s = s.next(reached(), at(1), QUIET);
        assert_eq!(s.phase, Phase::Syncing);
        let s = s.next(Happening::Listed("nodes".into()), at(2), QUIET);
        assert_eq!(s.phase, Phase::Syncing);
        let s = s.next(
            Happening::Listed("devices.worker.gpustack.ai".into()),
            at(3),
            QUIET,
        );
        assert_eq!(s.phase, Phase::Ready);
        assert_eq!(s.last_sync_time, Some(at(3)));
        assert_eq!(s.last_error, None);
        assert_eq!(s.not_served, ["modelartifacts.worker.gpustack.ai"]);
    }

    #[test]
    fn failures_degrade_and_a_quiet_probe_or_relist_recovers() {
        let ready = UpstreamStatus::default()
            .next(reached(), at(0), QUIET)
            .next(Happening::Listed("nodes".into()), at(0), QUIET)
            .next(
                Happening::Listed("devices.worker.gpustack.ai".into()),
                at(1),
                QUIET,
            );
        let down = ready.clone().next(failed("down"), at(5), QUIET);
        assert_eq!(down.phase, Phase::Degraded);
        assert_eq!(down.last_sync_time, Some(at(1)), "kept while degraded");
        let early = down.clone().next(Happening::ProbeOk, at(6), QUIET);
        assert_eq!(early.phase, Phase::Degraded, "failure too recent");
        let back = down.clone().next(Happening::ProbeOk, at(8), QUIET);
        assert_eq!(back.phase, Phase::Ready);
        assert_eq!(back.last_sync_time, Some(at(8)));
        let relisted = down.next(Happening::Listed("nodes".into()), at(6), QUIET);
        assert_eq!(relisted.phase, Phase::Ready);
    }

    #[test]
    fn a_mirror_synced_before_a_restart_is_degraded_not_pending_while_unreachable() {
        let restored = UpstreamStatus {
            last_sync_time: Some(at(0)),
            ..UpstreamStatus::default()
        };
        let s = restored.next(failed("refused"), at(9), QUIET);
        assert_eq!(s.phase, Phase::Degraded);
        assert_eq!(s.last_sync_time, Some(at(0)));
        assert_eq!(s.failures, BTreeMap::from([(FailurePhase::Watch, 1)]));
        assert_eq!(s.last_error_phase, Some(FailurePhase::Watch));
    }

    #[test]
    fn nothing_served_is_ready_at_once_and_board_serves_json() {
        let board = StatusBoard::new(QUIET);
        board.add("east", None, Timestamp::UNIX_EPOCH, None);
        board.record(
            "east",
            Happening::Reached {
                served: vec![],
                not_served: vec!["nodes".into()],
            },
        );
        board.set_count("east", "nodes", 3);
        let doc = board.to_json(None);
        assert_eq!(doc["items"][0]["cluster"], "east");
        assert_eq!(doc["items"][0]["phase"], "Ready");
        assert_eq!(doc["items"][0]["counts"]["nodes"], 3);
        assert_eq!(doc["items"][0]["notServed"][0], "nodes");
    }
}
