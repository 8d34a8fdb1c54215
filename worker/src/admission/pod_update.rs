//! The Pod webhook on UPDATE: what was admitted stays as admitted. A Pod's accelerator claims
//! and its queue decide its pool, its credits and Kueue's quota; an update (or, on clusters with
//! in-place resize, a `pods/resize`) that changed either would hold what nobody admitted. The
//! API server's own Pod rules forbid most spec changes; this keeps the promise where they do
//! not (resize) and for the queue label, which is metadata.

use super::{pod_requests::Claim, reasons::Reason, verdict::FieldError};

/// The changes an update makes to what was admitted; empty when it keeps them.
pub fn changes(
    old_claims: &[Claim],
    new_claims: &[Claim],
    old_queue: Option<&str>,
    new_queue: Option<&str>,
    queue_label: &str,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if old_queue != new_queue {
        errors.push(FieldError::forbidden(
            format!("metadata.labels[{queue_label}]"),
            "the queue of an admitted Pod may not change; create a new Pod",
            Reason::FieldImmutable,
        ));
    }
    let same = |a: &Claim, b: &Claim| {
        a.group == b.group && a.index == b.index && a.key == b.key && a.amount == b.amount
    };
    let mut fields: Vec<String> = old_claims
        .iter()
        .filter(|o| !new_claims.iter().any(|n| same(o, n)))
        .chain(
            new_claims
                .iter()
                .filter(|n| !old_claims.iter().any(|o| same(o, n))),
        )
        .map(Claim::field)
        .collect();
    fields.sort();
    fields.dedup();
    errors.extend(fields.into_iter().map(|f| {
        FieldError::forbidden(
            f,
            "the accelerator requests of an admitted Pod may not change; create a new Pod",
            Reason::FieldImmutable,
        )
    }));
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::pod_requests::claims;
    use k8s_openapi::api::core::v1::PodSpec;
    use serde_json::json;

    const QUEUE: &str = "kueue.x-k8s.io/queue-name";

    fn spec(limits: serde_json::Value) -> PodSpec {
        serde_json::from_value(json!({"containers": [
            {"name": "main", "image": "cuda", "resources": {"limits": limits}}]}))
        .unwrap()
    }

    fn claims_of(limits: serde_json::Value) -> Vec<Claim> {
        claims(&spec(limits), &["nvidia.com/gpu".to_owned()])
    }

    #[test]
    fn an_unchanged_pod_passes() {
        let c = claims_of(
            json!({"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "10"}),
        );
        assert!(changes(&c, &c, Some("q"), Some("q"), QUEUE).is_empty());
        // The same amount written differently is the same claim.
        let milli = claims_of(
            json!({"nvidia.com/gpu.sliced": "1000m", "nvidia.com/gpu.sliced.memory-percentage": "10"}),
        );
        assert!(changes(&c, &milli, Some("q"), Some("q"), QUEUE).is_empty());
    }

    #[test]
    fn more_slices_or_another_queue_are_refused() {
        let old = claims_of(
            json!({"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "10"}),
        );
        let new = claims_of(
            json!({"nvidia.com/gpu.sliced": "4", "nvidia.com/gpu.sliced.memory-percentage": "10"}),
        );
        let errors = changes(&old, &new, Some("q"), Some("q"), QUEUE);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(
            errors[0].field,
            "spec.containers[0].resources.limits[nvidia.com/gpu.sliced]"
        );
        assert_eq!(errors[0].reason, Reason::FieldImmutable);

        let moved = changes(&old, &old, Some("q"), Some("other"), QUEUE);
        assert_eq!(moved[0].field, format!("metadata.labels[{QUEUE}]"));
        let dropped = changes(&old, &[], Some("q"), None, QUEUE);
        assert_eq!(dropped.len(), 3, "{dropped:?}");
    }
}
