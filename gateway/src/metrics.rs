//! The hub's Prometheus series, in the registry the binary passes in: each upstream's mirror
//! (read from the status board at every scrape, so an unsubscribed upstream's series go with
//! it) and the store's newest resourceVersion. The API server's request series live in the
//! same registry ([`gpustack_apiserver::api::request_metrics`]).
//!
//! Label values come from bounded sets: the subscribed upstreams (only the admin subscribes),
//! the kinds mirrored, the phases. No label carries an object's name.

use prometheus::{
    Encoder, GaugeVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
    core::{Collector, Desc},
    proto::MetricFamily,
};

use crate::mirror::{FailurePhase, Phase, StatusBoard};

const PHASES: [Phase; 4] = [
    Phase::Pending,
    Phase::Syncing,
    Phase::Ready,
    Phase::Degraded,
];

/// The label that ties a series to one upstream.
const CLUSTER: &str = "cluster";

/// The hub's series, registered once.
#[derive(Clone)]
pub struct HubMetrics {
    registry: Registry,
    store_resource_version: IntGauge,
}

impl HubMetrics {
    /// Registers the hub's series in `registry`, reading the upstreams' status from `board`.
    pub fn register(registry: &Registry, board: StatusBoard) -> Result<Self, prometheus::Error> {
        let store_resource_version = IntGauge::new(
            "gpustack_gateway_store_resource_version",
            "The newest resourceVersion the store handed out.",
        )?;
        registry.register(Box::new(store_resource_version.clone()))?;
        registry.register(Box::new(UpstreamCollector::new(board)?))?;
        Ok(HubMetrics {
            registry: registry.clone(),
            store_resource_version,
        })
    }

    /// Every series in the registry, the store's version set to `resource_version` first.
    pub fn gather(&self, resource_version: u64) -> Vec<MetricFamily> {
        self.store_resource_version
            .set(i64::try_from(resource_version).unwrap_or(i64::MAX));
        self.registry.gather()
    }
}

/// Only the series of upstream `own`: a cluster's token sees its own cluster's, not the other
/// clusters' nor the hub-wide ones (which sum every cluster's activity).
pub fn own_cluster_only(families: Vec<MetricFamily>, own: &str) -> Vec<MetricFamily> {
    families
        .into_iter()
        .filter_map(|mut f| {
            let kept: Vec<_> = f
                .take_metric()
                .into_iter()
                .filter(|m| {
                    m.get_label()
                        .iter()
                        .any(|l| l.name() == CLUSTER && l.value() == own)
                })
                .collect();
            // The text format has no empty families.
            (!kept.is_empty()).then(|| {
                f.set_metric(kept);
                f
            })
        })
        .collect()
}

/// The exposition text of `families`.
pub fn encode(families: &[MetricFamily]) -> Result<Vec<u8>, prometheus::Error> {
    let mut out = Vec::new();
    TextEncoder::new().encode(families, &mut out)?;
    Ok(out)
}

/// The families of the upstreams' series, filled afresh from a snapshot of the board.
struct UpstreamFamilies {
    phase: IntGaugeVec,
    last_sync: GaugeVec,
    lag: GaugeVec,
    objects: IntGaugeVec,
    failures: IntCounterVec,
    relists: IntCounterVec,
    resumes: IntCounterVec,
}

impl UpstreamFamilies {
    fn new() -> Result<Self, prometheus::Error> {
        Ok(UpstreamFamilies {
            phase: IntGaugeVec::new(
                Opts::new(
                    "gpustack_gateway_upstream_phase",
                    "1 for the phase each upstream's mirror is in, 0 for the others.",
                ),
                &[CLUSTER, "phase"],
            )?,
            last_sync: GaugeVec::new(
                Opts::new(
                    "gpustack_gateway_upstream_last_sync_timestamp_seconds",
                    "When each upstream's mirror was last known to match it (Unix time).",
                ),
                &[CLUSTER],
            )?,
            lag: GaugeVec::new(
                Opts::new(
                    "gpustack_gateway_upstream_lag_seconds",
                    "Seconds since each upstream's mirror was last known to match it, at the scrape (absent until it first did).",
                ),
                &[CLUSTER],
            )?,
            objects: IntGaugeVec::new(
                Opts::new(
                    "gpustack_gateway_upstream_objects",
                    "Mirrored objects per upstream and kind.",
                ),
                &[CLUSTER, "kind"],
            )?,
            failures: IntCounterVec::new(
                Opts::new(
                    "gpustack_gateway_upstream_failures_total",
                    "Mirror failures per upstream since the gateway started, by the phase that failed (discovery, list, watch, write, sweep).",
                ),
                &[CLUSTER, "phase"],
            )?,
            relists: IntCounterVec::new(
                Opts::new(
                    "gpustack_gateway_upstream_relists_total",
                    "Lists of a mirrored kind that had been synced before (its stored version could not be resumed, or its watch expired), per upstream since the gateway started.",
                ),
                &[CLUSTER],
            )?,
            resumes: IntCounterVec::new(
                Opts::new(
                    "gpustack_gateway_upstream_resumes_total",
                    "Watches of a mirrored kind resumed from a stored version per upstream since the gateway started.",
                ),
                &[CLUSTER],
            )?,
        })
    }

    fn collectors(&self) -> [&dyn Collector; 7] {
        [
            &self.phase,
            &self.last_sync,
            &self.lag,
            &self.objects,
            &self.failures,
            &self.relists,
            &self.resumes,
        ]
    }

    fn fill(&self, board: &StatusBoard, now: jiff::Timestamp) {
        for (c, s) in board.all() {
            for p in PHASES {
                self.phase
                    .with_label_values(&[c.as_str(), p.as_str()])
                    .set(i64::from(s.phase == p));
            }
            if let Some(t) = s.last_sync_time {
                self.last_sync
                    .with_label_values(&[c.as_str()])
                    .set(t.as_second() as f64);
                let lag = now.duration_since(t).as_secs_f64().max(0.0);
                self.lag.with_label_values(&[c.as_str()]).set(lag);
            }
            for (kind, n) in &s.counts {
                self.objects
                    .with_label_values(&[c.as_str(), kind.as_str()])
                    .set(i64::try_from(*n).unwrap_or(i64::MAX));
            }
            for phase in FailurePhase::ALL {
                let n = s.failures.get(&phase).copied().unwrap_or(0);
                self.failures
                    .with_label_values(&[c.as_str(), phase.as_str()])
                    .inc_by(n);
            }
            self.relists
                .with_label_values(&[c.as_str()])
                .inc_by(s.relists);
            self.resumes
                .with_label_values(&[c.as_str()])
                .inc_by(s.resumes);
        }
    }
}

/// The upstreams' series: the board holds their state, so each scrape reads it rather than
/// every mirror updating metrics as it goes.
struct UpstreamCollector {
    board: StatusBoard,
    descs: Vec<Desc>,
}

impl UpstreamCollector {
    fn new(board: StatusBoard) -> Result<Self, prometheus::Error> {
        let families = UpstreamFamilies::new()?;
        let descs = families
            .collectors()
            .iter()
            .flat_map(|c| c.desc().into_iter().cloned())
            .collect();
        Ok(UpstreamCollector { board, descs })
    }
}

impl Collector for UpstreamCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        // The same options `new` built successfully, so this cannot fail.
        let Ok(families) = UpstreamFamilies::new() else {
            return Vec::new();
        };
        families.fill(&self.board, jiff::Timestamp::now());
        families
            .collectors()
            .iter()
            .flat_map(|c| c.collect())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::status::Happening;

    fn text(families: &[MetricFamily]) -> String {
        String::from_utf8(encode(families).unwrap()).unwrap()
    }

    fn east_board() -> StatusBoard {
        let board = StatusBoard::new(std::time::Duration::from_secs(1));
        board.add("east", None, jiff::Timestamp::UNIX_EPOCH, None);
        board.record(
            "east",
            Happening::Reached {
                served: vec![],
                not_served: vec![],
            },
        );
        board.set_count("east", "Devices.worker.gpustack.ai", 7);
        board.record(
            "east",
            Happening::Failed {
                phase: FailurePhase::Sweep,
                message: "down".into(),
            },
        );
        board
    }

    #[test]
    fn metrics_name_each_upstream_phase_count_and_failure() {
        let registry = Registry::new();
        let metrics = HubMetrics::register(&registry, east_board()).unwrap();
        let text = text(&metrics.gather(42));
        for line in [
            "gpustack_gateway_upstream_phase{cluster=\"east\",phase=\"Degraded\"} 1",
            "gpustack_gateway_upstream_phase{cluster=\"east\",phase=\"Ready\"} 0",
            "gpustack_gateway_upstream_objects{cluster=\"east\",kind=\"Devices.worker.gpustack.ai\"} 7",
            "gpustack_gateway_upstream_failures_total{cluster=\"east\",phase=\"sweep\"} 1",
            "gpustack_gateway_upstream_failures_total{cluster=\"east\",phase=\"watch\"} 0",
            "gpustack_gateway_upstream_relists_total{cluster=\"east\"} 0",
            "gpustack_gateway_store_resource_version 42",
            "# TYPE gpustack_gateway_upstream_failures_total counter",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(
            text.contains(
                "gpustack_gateway_upstream_last_sync_timestamp_seconds{cluster=\"east\"}"
            )
        );
    }

    #[test]
    fn the_lag_is_the_time_since_the_last_sync() {
        let board = StatusBoard::new(std::time::Duration::from_secs(1));
        let synced = jiff::Timestamp::UNIX_EPOCH;
        board.add("east", Some(synced), synced, None);
        board.add("west", None, synced, None);
        let families = UpstreamFamilies::new().unwrap();
        families.fill(&board, synced + jiff::SignedDuration::from_secs(90));
        assert_eq!(families.lag.with_label_values(&["east"]).get(), 90.0);
        // Never synced: no lag at all, not 0.
        let text = text(&families.lag.collect());
        assert!(!text.contains("west"), "{text}");
    }

    #[test]
    fn a_cluster_reader_sees_its_own_series_only() {
        let registry = Registry::new();
        let board = east_board();
        board.add("west", None, jiff::Timestamp::UNIX_EPOCH, None);
        let metrics = HubMetrics::register(&registry, board).unwrap();
        let text = text(&own_cluster_only(metrics.gather(42), "east"));
        assert!(text.contains("cluster=\"east\""), "{text}");
        assert!(!text.contains("west"), "{text}");
        assert!(!text.contains("gpustack_gateway_store_"), "{text}");
        // Nothing of its own: no family at all (the text format has no empty ones).
        assert!(own_cluster_only(metrics.gather(42), "north").is_empty());
    }

    #[test]
    fn an_unsubscribed_upstream_leaves_no_series() {
        let registry = Registry::new();
        let board = east_board();
        let metrics = HubMetrics::register(&registry, board.clone()).unwrap();
        board.remove("east");
        let text = text(&metrics.gather(1));
        assert!(!text.contains("east"), "{text}");
    }
}
