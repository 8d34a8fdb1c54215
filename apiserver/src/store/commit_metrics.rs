//! The writer's group commits, measured: how long each batch took to apply and make durable,
//! and how many changes it held. The store owns the series (one writer per store); whoever
//! builds the server registers them in the registry it serves.

use std::time::Duration;

use prometheus::{Histogram, HistogramOpts, Registry};

/// The writer's commit series: each batch's duration and size.
#[derive(Clone)]
pub struct CommitMetrics {
    duration: Histogram,
    batch: Histogram,
}

impl CommitMetrics {
    pub(super) fn new() -> Self {
        let duration = Histogram::with_opts(
            HistogramOpts::new(
                "gpustack_gateway_store_commit_duration_seconds",
                "Time to apply and commit one batch of writes (group commit), its fsync included.",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            ]),
        )
        .expect("valid metric");
        let batch = Histogram::with_opts(
            HistogramOpts::new(
                "gpustack_gateway_store_commit_batch_size",
                "Changes committed together in one batch.",
            )
            .buckets(vec![
                1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0,
            ]),
        )
        .expect("valid metric");
        CommitMetrics { duration, batch }
    }

    /// Adds the series to `registry`.
    pub fn register(&self, registry: &Registry) -> Result<(), prometheus::Error> {
        registry.register(Box::new(self.duration.clone()))?;
        registry.register(Box::new(self.batch.clone()))
    }

    pub(super) fn observe(&self, changes: usize, took: Duration) {
        self.duration.observe(took.as_secs_f64());
        self.batch.observe(changes as f64);
    }
}
