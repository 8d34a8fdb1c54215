//! `gpustack_worker_admission_total{webhook, result, reason}` and the time each review took in
//! the worker, registered in the registry `/metrics` serves. Every label value comes from a
//! closed set (the webhooks, three results, the reasons).

use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

use super::{hooks::Hook, reasons::Reason};

/// What became of a review.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Result {
    /// Allowed unchanged.
    Allowed,
    /// Allowed with a patch.
    Patched,
    /// Refused.
    Denied,
}

impl Result {
    /// The `result` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Result::Allowed => "allowed",
            Result::Patched => "patched",
            Result::Denied => "denied",
        }
    }
}

/// The webhooks' decision counts and latencies, by webhook, result and reason.
#[derive(Clone)]
pub struct AdmissionMetrics {
    total: IntCounterVec,
    duration: HistogramVec,
}

impl AdmissionMetrics {
    /// Registers the series in `registry`.
    pub fn new(registry: &Registry) -> std::result::Result<Self, prometheus::Error> {
        let total = IntCounterVec::new(
            Opts::new(
                "gpustack_worker_admission_total",
                "Admission reviews answered, by webhook, result and reason.",
            ),
            &["webhook", "result", "reason"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "gpustack_worker_admission_duration_seconds",
                "Time the worker took to answer a review, from its body read to its answer.",
            )
            .buckets(vec![
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1.0,
            ]),
            &["webhook"],
        )?;
        registry.register(Box::new(total.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        Ok(AdmissionMetrics { total, duration })
    }

    /// Records one review's outcome and how long it took.
    pub fn observe(&self, hook: Hook, result: Result, reason: Reason, took: Duration) {
        self.total
            .with_label_values(&[hook.name(), result.as_str(), reason.as_str()])
            .inc();
        self.duration
            .with_label_values(&[hook.name()])
            .observe(took.as_secs_f64());
    }
}
