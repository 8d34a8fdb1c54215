//! The controllers' series, as controller-runtime names them for its controllers: reconciles
//! by controller and result, their durations, the work waiting, and whether this replica
//! leads. Registered in the registry the worker's `/metrics` serves; the `controller` label
//! takes the loops' names only.

use std::time::Duration;

use prometheus::{
    HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

/// Counts of what the loops wrote, for logs and benchmarks.
#[derive(Default, Debug)]
pub struct Counters {
    /// Plans computed.
    pub plans: std::sync::atomic::AtomicU64,
    /// Writes made.
    pub writes: std::sync::atomic::AtomicU64,
}

/// The engine's loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loop {
    /// One node's labels, capacity and features.
    Node,
    /// The Kueue chain, planned as a whole.
    Chain,
    /// The admission checks' verdicts on Workloads.
    Workloads,
    /// One Instance: its Pod, Service and status.
    Instances,
    /// One node's model-manager registration label.
    ModelManagerNodes,
}

impl Loop {
    /// Every controller, for the series present from the start.
    pub const ALL: [Loop; 5] = [
        Loop::Node,
        Loop::Chain,
        Loop::Workloads,
        Loop::Instances,
        Loop::ModelManagerNodes,
    ];

    /// The `controller` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Loop::Node => "node",
            Loop::Chain => "chain",
            Loop::Workloads => "workloads",
            Loop::Instances => "instances",
            Loop::ModelManagerNodes => "model-manager-nodes",
        }
    }

    /// Whether the loop's waiting work is measured (kube-runtime's controller, behind the
    /// Instances, does not tell its queue's length: no depth series rather than a false 0).
    fn depth_measured(self) -> bool {
        self != Loop::Instances
    }
}

/// The controllers' reconcile counts, durations, queue depths and leadership.
#[derive(Clone)]
pub struct ReconcileMetrics {
    total: IntCounterVec,
    duration: HistogramVec,
    depth: IntGaugeVec,
    leader: IntGauge,
}

impl ReconcileMetrics {
    /// Registers the series in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let total = IntCounterVec::new(
            Opts::new(
                "gpustack_worker_reconcile_total",
                "Reconciles by controller and result (success, or error when a write failed).",
            ),
            &["controller", "result"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "gpustack_worker_reconcile_duration_seconds",
                "Time one reconcile took, its writes included, by controller.",
            )
            .buckets(vec![
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            ]),
            &["controller"],
        )?;
        let depth = IntGaugeVec::new(
            Opts::new(
                "gpustack_worker_workqueue_depth",
                "Reconciles waiting to run, by controller.",
            ),
            &["controller"],
        )?;
        let leader = IntGauge::new(
            "gpustack_worker_leader",
            "1 while this replica leads (runs the controllers), else 0.",
        )?;
        registry.register(Box::new(total.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(depth.clone()))?;
        registry.register(Box::new(leader.clone()))?;
        let m = ReconcileMetrics {
            total,
            duration,
            depth,
            leader,
        };
        // Every controller's series exist from the start: a rate over them reads 0, not nothing.
        for l in Loop::ALL {
            for result in ["success", "error"] {
                m.total.with_label_values(&[l.as_str(), result]);
            }
            if l.depth_measured() {
                m.depth.with_label_values(&[l.as_str()]);
            }
        }
        Ok(m)
    }

    /// Records one reconcile: whether it succeeded and how long it took.
    pub fn observe(&self, controller: Loop, ok: bool, took: Duration) {
        let result = if ok { "success" } else { "error" };
        self.total
            .with_label_values(&[controller.as_str(), result])
            .inc();
        self.duration
            .with_label_values(&[controller.as_str()])
            .observe(took.as_secs_f64());
    }

    /// The work waiting: the nodes marked dirty, and whether the chain is.
    pub fn set_depth(&self, nodes: usize, chain: bool) {
        let set = |l: Loop, n: i64| self.depth.with_label_values(&[l.as_str()]).set(n);
        set(Loop::Node, i64::try_from(nodes).unwrap_or(i64::MAX));
        set(Loop::Chain, i64::from(chain));
    }

    /// Whether an admission-check pass is due (its loop runs apart from the others).
    pub fn set_workloads_depth(&self, due: bool) {
        self.depth
            .with_label_values(&[Loop::Workloads.as_str()])
            .set(i64::from(due));
    }

    /// The nodes a model-manager registration pass still has to look at.
    pub fn set_model_manager_nodes_depth(&self, pending: usize) {
        self.depth
            .with_label_values(&[Loop::ModelManagerNodes.as_str()])
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
    }

    /// Whether this replica leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_exist_from_the_start_and_count_by_result() {
        let registry = Registry::new();
        let m = ReconcileMetrics::register(&registry).unwrap();
        assert_eq!(
            m.total.with_label_values(&["chain", "error"]).get(),
            0,
            "present before any reconcile"
        );
        m.observe(Loop::Chain, false, Duration::from_millis(3));
        m.observe(Loop::Node, true, Duration::from_millis(1));
        m.observe(Loop::Instances, true, Duration::from_millis(2));
        m.set_depth(4, true);
        m.set_workloads_depth(false);
        m.set_model_manager_nodes_depth(2);
        m.set_leader(true);
        assert_eq!(m.total.with_label_values(&["chain", "error"]).get(), 1);
        assert_eq!(m.total.with_label_values(&["node", "success"]).get(), 1);
        assert_eq!(m.depth.with_label_values(&["node"]).get(), 4);
        assert_eq!(m.depth.with_label_values(&["chain"]).get(), 1);
        assert_eq!(
            m.total.with_label_values(&["instances", "success"]).get(),
            1
        );
        assert_eq!(
            m.total
                .with_label_values(&["model-manager-nodes", "error"])
                .get(),
            0,
            "every controller's counters are present from the start"
        );
        assert_eq!(m.depth.with_label_values(&["model-manager-nodes"]).get(), 2);
        assert_eq!(m.leader.get(), 1);
        let names: Vec<String> = registry
            .gather()
            .iter()
            .map(|f| f.name().to_owned())
            .collect();
        assert_eq!(
            names,
            [
                "gpustack_worker_leader",
                "gpustack_worker_reconcile_duration_seconds",
                "gpustack_worker_reconcile_total",
                "gpustack_worker_workqueue_depth",
            ]
        );
    }
}
