//! The admission caller's series, as kube-apiserver's `apiserver_admission_webhook_*`: webhook
//! calls by webhook, type and result, and their latency. A webhook's name comes from a stored
//! configuration, so the names labelled are capped: past [`MAX_WEBHOOKS`] distinct names a call
//! is counted under `other` (a flood of configurations cannot grow the series without bound).

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

/// Distinct webhook names labelled; the rest read `other`.
pub const MAX_WEBHOOKS: usize = 64;
/// The label of a webhook past the cap.
pub const OTHER_WEBHOOK: &str = "other";

/// What came of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallResult {
    /// Allowed without a patch.
    Allowed,
    /// Allowed with a patch (mutating webhooks).
    Patched,
    /// Refused by the webhook.
    Denied,
    /// The call failed and the webhook's `failurePolicy: Fail` refused the request.
    Error,
    /// The call failed and `failurePolicy: Ignore` let the request through.
    Ignored,
}

impl CallResult {
    fn as_str(self) -> &'static str {
        match self {
            CallResult::Allowed => "allowed",
            CallResult::Patched => "patched",
            CallResult::Denied => "denied",
            CallResult::Error => "error",
            CallResult::Ignored => "ignored",
        }
    }
}

/// The series, registered in the registry passed in; clones share them.
#[derive(Clone)]
pub struct CallMetrics {
    calls: IntCounterVec,
    duration: HistogramVec,
    names: Arc<Mutex<BTreeSet<String>>>,
}

impl CallMetrics {
    /// Registers the series in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let calls = IntCounterVec::new(
            Opts::new(
                "gpustack_gateway_admission_webhook_calls_total",
                "Admission webhook calls by webhook, type (validating, admit) and result (allowed, patched, denied, error, ignored).",
            ),
            &["webhook", "type", "result"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "gpustack_gateway_admission_webhook_duration_seconds",
                "Time one admission webhook call took, connection and answer included, by webhook and type.",
            )
            // kube-apiserver's apiserver_admission_webhook_admission_duration_seconds buckets.
            .buckets(vec![0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0]),
            &["webhook", "type"],
        )?;
        registry.register(Box::new(calls.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        Ok(CallMetrics {
            calls,
            duration,
            names: Arc::default(),
        })
    }

    /// Counts one call of `webhook` (mutating: type `admit`, else `validating`).
    pub fn observe(&self, webhook: &str, mutating: bool, result: CallResult, took: Duration) {
        let webhook = self.label(webhook);
        let kind = if mutating { "admit" } else { "validating" };
        self.calls
            .with_label_values(&[webhook.as_str(), kind, result.as_str()])
            .inc();
        self.duration
            .with_label_values(&[webhook.as_str(), kind])
            .observe(took.as_secs_f64());
    }

    fn label(&self, webhook: &str) -> String {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        if names.contains(webhook) {
            return webhook.to_owned();
        }
        if names.len() < MAX_WEBHOOKS {
            names.insert(webhook.to_owned());
            return webhook.to_owned();
        }
        OTHER_WEBHOOK.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(registry: &Registry) -> usize {
        registry.gather().iter().map(|f| f.get_metric().len()).sum()
    }

    #[test]
    fn calls_are_counted_by_webhook_type_and_result_with_the_names_capped() {
        let registry = Registry::new();
        let m = CallMetrics::register(&registry).unwrap();
        let ms = Duration::from_millis(1);
        m.observe("pods.worker.gpustack.ai", false, CallResult::Denied, ms);
        m.observe("pods.worker.gpustack.ai", true, CallResult::Patched, ms);
        assert_eq!(
            m.calls
                .with_label_values(&["pods.worker.gpustack.ai", "validating", "denied"])
                .get(),
            1
        );
        for i in 0..10 * MAX_WEBHOOKS {
            m.observe(&format!("w{i}.example.com"), false, CallResult::Allowed, ms);
        }
        let before = series(&registry);
        for i in 0..1000 {
            m.observe(
                &format!("late{i}.example.com"),
                false,
                CallResult::Allowed,
                ms,
            );
        }
        assert_eq!(
            series(&registry),
            before,
            "the series stay flat past the cap"
        );
        assert!(
            m.calls
                .with_label_values(&[OTHER_WEBHOOK, "validating", "allowed"])
                .get()
                > 1000
        );
    }
}
