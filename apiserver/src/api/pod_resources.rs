//! A Pod's extended resources (`nvidia.com/gpu`, the device plugins' pools), checked as
//! kube-apiserver's Pod validation checks them: they cannot be overcommitted, so a container
//! that requests one must set its limit, and the request must equal the limit. Without this a
//! Pod asking one slice in `limits` and three in `requests` is stored, and the scheduler and the
//! device plugin disagree on what it holds.

use gpustack_kube_rest::quantity::value;
use serde_json::Value;

use super::field_errors::{FieldError, Problem};

/// Whether `name` is an extended resource: one with a domain outside `kubernetes.io`, not a
/// quota name (`requests.*`).
pub fn is_extended(name: &str) -> bool {
    let Some((domain, _)) = name.split_once('/') else {
        return false;
    };
    !(domain == "kubernetes.io"
        || domain.ends_with(".kubernetes.io")
        || name.starts_with("requests."))
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The problems of `pod`'s containers' extended resources.
pub fn problems(pod: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    for list in ["initContainers", "containers"] {
        let containers = pod["spec"][list]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for (i, c) in containers.iter().enumerate() {
            let at = format!("spec.{list}[{i}].resources");
            let requests = c["resources"]["requests"].as_object();
            let limits = c["resources"]["limits"].as_object();
            for (name, asked) in requests.into_iter().flatten() {
                if !is_extended(name) {
                    continue;
                }
                match limits.and_then(|l| l.get(name)) {
                    None => out.push(FieldError {
                        problem: Problem::Required,
                        field: format!("{at}.limits"),
                        value: None,
                        detail: "Limit must be set for non overcommitable resources".into(),
                    }),
                    Some(limit) => {
                        let (a, l) = (text(asked), text(limit));
                        let equal = a == l || value(&a).zip(value(&l)).is_some_and(|(x, y)| x == y);
                        if !equal {
                            out.push(FieldError {
                                problem: Problem::Invalid,
                                field: format!("{at}.requests[{name}]"),
                                value: Some(Value::String(a)),
                                detail: format!("must be equal to {name} limit of {l}"),
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(resources: Value) -> Value {
        json!({"spec": {"containers": [{"name": "main", "resources": resources}]}})
    }

    #[test]
    fn extended_requests_must_equal_their_limits() {
        let ok = pod(
            json!({"requests": {"nvidia.com/gpu": "1", "cpu": "2"}, "limits": {"nvidia.com/gpu": "1000m", "cpu": "4"}}),
        );
        assert!(problems(&ok).is_empty());
        let only_limits = pod(json!({"limits": {"nvidia.com/gpu.sliced": "1"}}));
        assert!(
            problems(&only_limits).is_empty(),
            "the request defaults to the limit"
        );
        let differ = pod(
            json!({"requests": {"nvidia.com/gpu.sliced": "3"}, "limits": {"nvidia.com/gpu.sliced": "1"}}),
        );
        let p = problems(&differ);
        assert_eq!(p.len(), 1);
        assert_eq!(
            p[0].field,
            "spec.containers[0].resources.requests[nvidia.com/gpu.sliced]"
        );
        assert_eq!(
            p[0].detail,
            "must be equal to nvidia.com/gpu.sliced limit of 1"
        );
        let no_limit = pod(json!({"requests": {"amd.com/gpu": "1"}}));
        assert_eq!(
            problems(&no_limit)[0].field,
            "spec.containers[0].resources.limits"
        );
    }

    #[test]
    fn only_extended_resources_count() {
        assert!(is_extended("nvidia.com/gpu"));
        assert!(!is_extended("cpu"));
        assert!(!is_extended("hugepages-2Mi"));
        assert!(!is_extended("kubernetes.io/something"));
        assert!(!is_extended("requests.nvidia.com/gpu"));
    }
}
