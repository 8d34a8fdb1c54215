//! InstanceType defaulting and validation (§3.6). Defaults: `generalGroup` is `generic`; the
//! pool labels and the `schedule.gpustack.ai/queue-entrance` label (the LocalQueue that fronts
//! the InstanceType's ClusterQueue, which is named after it) are stamped. A new InstanceType
//! must say what it is and what one unit holds; afterwards only its display name, description
//! and `inactive` may change.

use gpustack_api::instance_type::InstanceTypeSpec;
use serde_json::{Value, json};

use super::{reasons::Reason, verdict::FieldError};
use crate::names;

/// The label a pool's LocalQueue name is found by.
pub use gpustack_api::labels::QUEUE_ENTRANCE;
/// The CPU key of a pool whose CPU is not known.
pub const GENERIC: &str = "generic";

/// The defaulted object (`it` is the whole InstanceType as JSON); `aware_cpu` is the setting
/// `instance-type-aware-cpu-manufacturer`. The pool labels are the ones the controllers give
/// the InstanceTypes they derive, so that an admin's pool is selected the same way.
pub fn default(it: &Value, aware_cpu: bool) -> Value {
    let mut out = it.clone();
    let spec = &mut out["spec"];
    if spec["generalGroup"].as_str().is_none_or(str::is_empty) {
        spec["generalGroup"] = json!(GENERIC);
    }
    let parsed: InstanceTypeSpec = crate::typed::from_json(spec).unwrap_or_default();
    let name = out["metadata"]["name"].as_str().unwrap_or("").to_owned();
    let labels = &mut out["metadata"]["labels"];
    if !labels.is_object() {
        *labels = json!({});
    }
    for (k, v) in crate::controllers::flavors::pool_labels(&parsed, aware_cpu) {
        if labels.get(&k).is_none() {
            labels[k] = json!(v);
        }
    }
    // The controllers may have named the entrance already; a default never overrides them.
    if !name.is_empty() && labels.get(QUEUE_ENTRANCE).is_none() {
        labels[QUEUE_ENTRANCE] = json!(names::local_queue_name(&name));
    }
    out
}

fn positive_integer(s: &str) -> bool {
    !s.is_empty() && !s.starts_with('0') && s.bytes().all(|b| b.is_ascii_digit())
}

/// `<positive integer>Gi`, the suffix case-sensitive.
fn whole_gibibytes(s: &str) -> bool {
    s.strip_suffix("Gi").is_some_and(positive_integer)
}

/// What is wrong with a new InstanceType.
pub fn validate_create(spec: &InstanceTypeSpec) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let blank = |v: &Option<String>| v.as_deref().is_none_or(|s| s.trim().is_empty());
    let acceleratable = spec.acceleratable.unwrap_or(false);
    if acceleratable && blank(&spec.accelerator_group) {
        errors.push(FieldError::required(
            "spec.acceleratorGroup",
            "an acceleratable instance type needs its accelerator group (<manufacturer>-<groupID>)",
            Reason::FieldRequired,
        ));
    }
    for (field, v) in [("spec.os", &spec.os), ("spec.arch", &spec.arch)] {
        if blank(v) {
            errors.push(FieldError::required(
                field,
                "is required",
                Reason::FieldRequired,
            ));
        }
    }
    let unit = spec.unit_resources.as_ref();
    match unit.and_then(|u| u.cpu.as_deref()) {
        None => errors.push(FieldError::required(
            "spec.unitResources.cpu",
            "is required",
            Reason::FieldRequired,
        )),
        Some(cpu) if !positive_integer(cpu) => errors.push(FieldError::invalid(
            "spec.unitResources.cpu",
            cpu,
            "must be a positive whole number without a unit",
            Reason::FieldInvalid,
        )),
        Some(cpu) if !acceleratable && cpu != "1" => errors.push(FieldError::invalid(
            "spec.unitResources.cpu",
            cpu,
            "must be exactly 1 when the instance type is not acceleratable",
            Reason::FieldInvalid,
        )),
        Some(_) => {}
    }
    for (field, v) in [
        (
            "spec.unitResources.ram",
            unit.and_then(|u| u.ram.as_deref()),
        ),
        ("spec.localStorage", spec.local_storage.as_deref()),
    ] {
        match v {
            None => errors.push(FieldError::required(
                field,
                "is required",
                Reason::FieldRequired,
            )),
            Some(v) if !whole_gibibytes(v) => errors.push(FieldError::invalid(
                field,
                v,
                "must be a positive whole number of Gi, like 16Gi",
                Reason::FieldInvalid,
            )),
            Some(_) => {}
        }
    }
    errors
}

/// What an update changes that may not change.
pub fn validate_update(old: &InstanceTypeSpec, new: &InstanceTypeSpec) -> Vec<FieldError> {
    let frozen = |s: &InstanceTypeSpec| InstanceTypeSpec {
        display_name: None,
        description: None,
        inactive: None,
        ..s.clone()
    };
    if frozen(old) == frozen(new) {
        return Vec::new();
    }
    vec![FieldError::forbidden(
        "spec",
        "is immutable except displayName, description and inactive",
        Reason::FieldImmutable,
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: Value) -> InstanceTypeSpec {
        serde_json::from_value(v).unwrap()
    }

    fn good() -> Value {
        json!({"acceleratable": true, "acceleratorGroup": "nvidia-0", "os": "linux", "arch": "amd64",
               "unitResources": {"cpu": "8", "ram": "64Gi"}, "localStorage": "100Gi"})
    }

    #[test]
    fn defaults_group_and_labels() {
        let out = default(
            &json!({"metadata": {"name": "h100"}, "spec": {"acceleratable": true, "acceleratorGroup": "nvidia-h100", "os": "linux"}}),
            false,
        );
        assert_eq!(out["spec"]["generalGroup"], "generic");
        assert_eq!(
            out["metadata"]["labels"]["feature.gpustack.ai/acceleratable"],
            "true"
        );
        assert_eq!(out["metadata"]["labels"]["kubernetes.io/os"], "linux");
        assert_eq!(
            out["metadata"]["labels"]["acceleratable.feature.gpustack.ai/nvidia-h100"],
            "true"
        );
        // `gpustack-fnv64-` and the FNV-1a 64 of "h100", computed outside this code (Python:
        // h = 0xcbf29ce484222325; per byte h ^= b, h *= 0x100000001b3 mod 2^64).
        assert_eq!(
            out["metadata"]["labels"]["schedule.gpustack.ai/queue-entrance"],
            "gpustack-fnv64-ce751ccd5ff9fac2"
        );
        let kept = default(
            &json!({"metadata": {"name": "c", "labels": {"a": "b"}}, "spec": {"generalGroup": "amd-epyc"}}),
            true,
        );
        assert_eq!(kept["spec"]["generalGroup"], "amd-epyc");
        assert_eq!(kept["metadata"]["labels"]["a"], "b");
        assert_eq!(
            kept["metadata"]["labels"]["feature.gpustack.ai/acceleratable"],
            "false"
        );
        // CPU-aware grouping labels the pool with its CPU key.
        assert_eq!(
            kept["metadata"]["labels"]["general.feature.gpustack.ai/amd-epyc"],
            "true"
        );
        // Defaulting twice changes nothing more; an entrance already named is kept.
        assert_eq!(default(&out, false), out);
        let named = default(
            &json!({"metadata": {"name": "x", "labels": {QUEUE_ENTRANCE: "q"}}, "spec": {}}),
            false,
        );
        assert_eq!(named["metadata"]["labels"][QUEUE_ENTRANCE], "q");
    }

    #[test]
    fn create_rules() {
        assert_eq!(validate_create(&spec(good())), vec![]);
        let cpu_pool = json!({"os": "linux", "arch": "arm64", "unitResources": {"cpu": "1", "ram": "2Gi"}, "localStorage": "10Gi"});
        assert_eq!(validate_create(&spec(cpu_pool)), vec![]);
        let cases: Vec<(Value, Vec<(&str, Reason)>)> = vec![
            (
                json!({}),
                vec![
                    ("spec.os", Reason::FieldRequired),
                    ("spec.arch", Reason::FieldRequired),
                    ("spec.unitResources.cpu", Reason::FieldRequired),
                    ("spec.unitResources.ram", Reason::FieldRequired),
                    ("spec.localStorage", Reason::FieldRequired),
                ],
            ),
            (
                json!({"acceleratable": true, "acceleratorGroup": ""}),
                vec![("spec.acceleratorGroup", Reason::FieldRequired)],
            ),
            (
                json!({"acceleratable": false, "unitResources": {"cpu": "2"}}),
                vec![("spec.unitResources.cpu", Reason::FieldInvalid)],
            ),
            (
                json!({"unitResources": {"cpu": "0"}}),
                vec![("spec.unitResources.cpu", Reason::FieldInvalid)],
            ),
            (
                json!({"unitResources": {"cpu": "500m"}}),
                vec![("spec.unitResources.cpu", Reason::FieldInvalid)],
            ),
            (
                json!({"unitResources": {"ram": "16gi"}}),
                vec![("spec.unitResources.ram", Reason::FieldInvalid)],
            ),
            (
                json!({"unitResources": {"ram": "16G"}}),
                vec![("spec.unitResources.ram", Reason::FieldInvalid)],
            ),
            (
                json!({"localStorage": "0Gi"}),
                vec![("spec.localStorage", Reason::FieldInvalid)],
            ),
        ];
        for (patch, want) in cases {
            let mut v = good();
            if patch.as_object().unwrap().is_empty() {
                v = json!({});
            }
            for (k, val) in patch.as_object().unwrap() {
                if k == "unitResources" {
                    for (uk, uv) in val.as_object().unwrap() {
                        v["unitResources"][uk] = uv.clone();
                    }
                } else {
                    v[k] = val.clone();
                }
            }
            let got: Vec<(String, Reason)> = validate_create(&spec(v))
                .into_iter()
                .map(|e| (e.field, e.reason))
                .collect();
            let want: Vec<(String, Reason)> =
                want.into_iter().map(|(f, r)| (f.to_owned(), r)).collect();
            assert_eq!(got, want, "{patch}");
        }
        let not_acc = validate_create(&spec(
            json!({"os": "linux", "arch": "amd64", "unitResources": {"cpu": "4", "ram": "2Gi"}, "localStorage": "1Gi"}),
        ));
        assert_eq!(
            not_acc[0].detail,
            "must be exactly 1 when the instance type is not acceleratable"
        );
    }

    #[test]
    fn update_freezes_all_but_three() {
        let old = spec(good());
        let mut v = good();
        v["displayName"] = json!("H100");
        v["description"] = json!("fast");
        v["inactive"] = json!(true);
        assert_eq!(validate_update(&old, &spec(v)), vec![]);
        for (k, val) in [
            ("os", json!("windows")),
            ("acceleratorGroup", json!("nvidia-1")),
            ("localStorage", json!("1Gi")),
        ] {
            let mut v = good();
            v[k] = val;
            let e = validate_update(&old, &spec(v));
            assert_eq!(e.len(), 1, "{k}");
            assert_eq!(
                e[0].to_string(),
                "spec: Forbidden: is immutable except displayName, description and inactive"
            );
        }
    }
}
