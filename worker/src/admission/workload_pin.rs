//! The Workload webhook's fit pin (§3.5): a PodSet that takes a slice of U credits may only go
//! to nodes whose freest card still has U free (`sliced-max-free-units.fit.gpustack.ai/<group>
//! Gt U-1`), and one that shares N ≥ 2 cards to nodes with N cards that have a free share
//! (`shared-free-cards.fit.gpustack.ai/<group> Gt N-1`). The pin is written into the PodSet
//! template only (Kueue's topology assignment reads it there); the Pods never see it. It never
//! refuses anything.
//!
//! A PodSet that mounts the model cache (a CSI volume of [`MODEL_CSI_DRIVER`]) is also pinned
//! to nodes where that driver is registered ([`MODEL_CSI_REGISTERED`]` In [true]`, the label
//! the worker keeps from each node's CSINode), whatever its pool.

use k8s_openapi::api::core::v1::PodSpec;
use serde_json::{Value, json};

use super::{
    affinity,
    pod_mutate::PERCENT_UNITS,
    pod_requests::{Bases, Family, Part, claims},
};

use gpustack_api::labels::{
    FIT_SHARED_PREFIX as SHARED_FIT_PREFIX, FIT_SLICED_PREFIX as SLICED_FIT_PREFIX,
    MODEL_CSI_DRIVER, MODEL_CSI_REGISTERED,
};

/// Whether a PodSet's template mounts the model cache.
fn mounts_model_cache(spec: &PodSpec) -> bool {
    spec.volumes
        .iter()
        .flatten()
        .any(|v| v.csi.as_ref().is_some_and(|c| c.driver == MODEL_CSI_DRIVER))
}

/// The requirements one PodSet's template needs.
fn pins_of(spec: &PodSpec, bases: &Bases, group: &str) -> Vec<Value> {
    let cs = claims(spec, &bases.names);
    let mut pins = Vec::new();
    for head in cs.iter().filter(|c| c.key.part == Part::Head) {
        let part = |p: Part| {
            cs.iter()
                .find(|c| {
                    c.index == head.index
                        && c.group == head.group
                        && c.key.family == head.key.family
                        && c.key.part == p
                })
                .and_then(|c| c.whole())
        };
        match head.key.family {
            Family::Sliced => {
                // The units the Pod webhook wrote; from the percentage when it has not run.
                let units = part(Part::Units)
                    .or_else(|| part(Part::MemoryPercentage).map(|p| p * PERCENT_UNITS));
                if let Some(u) = units.filter(|u| *u > 0) {
                    pins.push(affinity::greater_than(
                        &format!("{SLICED_FIT_PREFIX}{group}"),
                        u - 1,
                    ));
                }
            }
            Family::Shared => {
                if let Some(n) = head.whole().filter(|n| *n >= 2) {
                    pins.push(affinity::greater_than(
                        &format!("{SHARED_FIT_PREFIX}{group}"),
                        n - 1,
                    ));
                }
            }
            Family::Exclusive | Family::Partitioned => {}
        }
    }
    pins
}

/// The Workload (as JSON) with its PodSets pinned to nodes that fit them: by their pool's
/// accelerator `group` when it is known, and to the model cache when they mount it.
pub fn pin(workload: &Value, bases: &Bases, group: Option<&str>) -> Value {
    let mut out = workload.clone();
    let count = out["spec"]["podSets"].as_array().map_or(0, Vec::len);
    for i in 0..count {
        let spec = &mut out["spec"]["podSets"][i]["template"]["spec"];
        let Ok(parsed) = crate::typed::from_json::<PodSpec>(spec) else {
            continue;
        };
        let mut pins = group.map_or_else(Vec::new, |g| pins_of(&parsed, bases, g));
        if mounts_model_cache(&parsed) {
            pins.push(json!({"key": MODEL_CSI_REGISTERED, "operator": "In", "values": ["true"]}));
        }
        for requirement in pins {
            affinity::require(spec, requirement);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(limits: Value) -> Value {
        json!({"spec": {"queueName": "gpustack-fnv64-0", "podSets": [
            {"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "a", "resources": {"limits": limits}}]}}},
        ]}})
    }

    fn expressions(w: &Value) -> Value {
        w["spec"]["podSets"][0]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0]["matchExpressions"]
            .clone()
    }

    #[test]
    fn pins_by_family() {
        let b = Bases::resolve(|_| None);
        let cases = [
            (
                json!({"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.units": "400000"}),
                json!([{"key": "sliced-max-free-units.fit.gpustack.ai/nvidia-0", "operator": "Gt", "values": ["399999"]}]),
            ),
            (
                json!({"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "10"}),
                json!([{"key": "sliced-max-free-units.fit.gpustack.ai/nvidia-0", "operator": "Gt", "values": ["159999"]}]),
            ),
            (
                json!({"nvidia.com/gpu.shared": "4"}),
                json!([{"key": "shared-free-cards.fit.gpustack.ai/nvidia-0", "operator": "Gt", "values": ["3"]}]),
            ),
        ];
        for (limits, want) in cases {
            let w = pin(&workload(limits.clone()), &b, Some("nvidia-0"));
            assert_eq!(expressions(&w), want, "{limits}");
            assert_eq!(
                pin(&w, &b, Some("nvidia-0")),
                w,
                "pinning twice changes nothing"
            );
        }
        for limits in [
            json!({"nvidia.com/gpu.shared": "1"}),
            json!({"nvidia.com/gpu": "2"}),
            json!({"cpu": "1"}),
        ] {
            let w = workload(limits);
            assert_eq!(pin(&w, &b, Some("nvidia-0")), w);
        }
    }

    #[test]
    fn podsets_mounting_the_model_cache_are_pinned_to_its_nodes() {
        let b = Bases::resolve(|_| None);
        let mut w = workload(json!({"nvidia.com/gpu.shared": "2"}));
        w["spec"]["podSets"][0]["template"]["spec"]["volumes"] = json!([
            {"name": "other", "csi": {"driver": "other.csi.example.com"}},
            {"name": "model", "csi": {"driver": MODEL_CSI_DRIVER, "volumeAttributes": {"repo": "x"}}},
        ]);
        // A second term, ORed with the first: each gets the pin.
        w["spec"]["podSets"][0]["template"]["spec"]["affinity"] = json!({"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
        ]}}});
        let model = json!({"key": MODEL_CSI_REGISTERED, "operator": "In", "values": ["true"]});
        let pinned = pin(&w, &b, Some("nvidia-0"));
        let terms = &pinned["spec"]["podSets"][0]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"];
        for t in terms.as_array().unwrap() {
            let exprs = t["matchExpressions"].as_array().unwrap();
            assert!(exprs.contains(&model), "{t}");
            assert_eq!(exprs.len(), 3, "zone, the fit pin and the model pin: {t}");
        }
        // Without a known pool, the model pin alone.
        let alone = pin(&w, &b, None);
        let terms = &alone["spec"]["podSets"][0]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"];
        assert_eq!(terms[0]["matchExpressions"][1], model);
        assert_eq!(
            pin(&alone, &b, None),
            alone,
            "pinning twice changes nothing"
        );
        // Another driver: nothing.
        let mut other = workload(json!({"cpu": "1"}));
        other["spec"]["podSets"][0]["template"]["spec"]["volumes"] =
            json!([{"name": "v", "csi": {"driver": "other.csi.example.com"}}]);
        assert_eq!(pin(&other, &b, None), other);
    }
}
