//! Instance defaulting and validation (§3.6): what an Instance asks of its pool must fit what
//! one request can get there (cards and CPUs bounded by the pool's capacity, memory by the
//! unit's times the units taken, storage by the pool's), a slice or partition is one card and
//! one of the two, a profile must be one the pool offers, and the privileges the Settings gate
//! stay off unless allowed.

use gpustack_api::{
    instance::{InstanceResources, InstanceSpec},
    instance_type::InstanceType,
};
use serde_json::{Value, json};

use super::{quantity::Quantity, reasons::Reason, verdict::FieldError};

const RES: &str = "spec.resources";

/// The Settings that gate an Instance's privileges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Privileges {
    pub privileged: bool,
    pub host_path: bool,
}

/// The defaulted object: a slice takes one card and, unless told, all its cores' time; a
/// partition one card.
pub fn default(instance: &Value) -> Value {
    let mut out = instance.clone();
    let r = &mut out["spec"]["resources"];
    let slice = !r["acceleratorSlicedMemoryPercentage"].is_null();
    let partition = !r["acceleratorPartitionedProfile"].is_null();
    if (slice || partition) && r["accelerator"].is_null() {
        r["accelerator"] = json!(1);
    }
    if slice && r["acceleratorSlicedCoresPercentage"].is_null() {
        r["acceleratorSlicedCoresPercentage"] = json!(100);
    }
    out
}

fn percent_ok(p: Option<i64>) -> bool {
    p.is_none_or(|p| (1..=100).contains(&p))
}

/// The profiles the pool's cards offer, by name.
fn offered(it: &InstanceType) -> Vec<String> {
    let mut names: Vec<String> = it
        .status
        .as_ref()
        .and_then(|s| s.detail.as_ref())
        .and_then(|d| d.sliced_detail.as_ref())
        .and_then(|d| d.physical.as_ref())
        .map(|p| p.profiles.iter().map(|p| p.name.clone()).collect())
        .unwrap_or_default();
    if let Some(s) = &it.status {
        names.extend(s.remaining_profiles.keys().cloned());
    }
    names.sort();
    names.dedup();
    names
}

/// The accelerator part of the rules; the number of units the instance takes.
fn accelerators(r: &InstanceResources, it: &InstanceType, errors: &mut Vec<FieldError>) -> i64 {
    let name = it.metadata.name.as_deref().unwrap_or("");
    let status = it.status.clone().unwrap_or_default();
    let slice = r.accelerator_sliced_memory_percentage.is_some();
    let partition = r.accelerator_partitioned_profile.is_some();
    let cards = r
        .accelerator
        .unwrap_or(if slice || partition { 1 } else { 0 });
    if slice && partition {
        errors.push(FieldError::forbidden(
            format!("{RES}.acceleratorPartitionedProfile"),
            "a hardware partition and a logical slice percentage are mutually exclusive",
            Reason::MultipleFamilies,
        ));
    }
    if (slice || partition) && cards != 1 {
        let what = if slice { "logical slice" } else { "partition" };
        errors.push(FieldError::invalid(
            format!("{RES}.accelerator"),
            &cards.to_string(),
            format!("a {what} is always exactly 1 accelerator"),
            if slice {
                Reason::SliceNotSingleCard
            } else {
                Reason::PartitionNotSingleCard
            },
        ));
    }
    if slice {
        let sliceable = status
            .accelerator_sliced
            .as_ref()
            .is_some_and(|v| v.capacity > 0);
        if !sliceable {
            errors.push(FieldError::forbidden(
                format!("{RES}.acceleratorSlicedMemoryPercentage"),
                format!("instance type {name} does not offer logical slices"),
                Reason::ProfileNotOffered,
            ));
        }
        for (field, p) in [
            (
                "acceleratorSlicedMemoryPercentage",
                r.accelerator_sliced_memory_percentage,
            ),
            (
                "acceleratorSlicedCoresPercentage",
                r.accelerator_sliced_cores_percentage,
            ),
        ] {
            if !percent_ok(p) {
                let v = p.map(|p| p.to_string()).unwrap_or_default();
                errors.push(FieldError::invalid(
                    format!("{RES}.{field}"),
                    &v,
                    "must be within (0, 100]",
                    Reason::OutOfRange,
                ));
            }
        }
    }
    if let Some(profile) = &r.accelerator_partitioned_profile {
        let offered = offered(it);
        if !offered.contains(profile) {
            errors.push(FieldError::invalid(
                format!("{RES}.acceleratorPartitionedProfile"),
                profile,
                format!("partition profile {profile:?} is not offered by instance type {name}; offered: [{}]", offered.join(", ")),
                Reason::ProfileNotOffered,
            ));
        }
    }
    if !slice && !partition {
        let capacity = status.accelerator.as_ref().map_or(0, |v| v.capacity);
        if cards < 1 || cards > capacity {
            errors.push(FieldError::invalid(
                format!("{RES}.accelerator"),
                &cards.to_string(),
                format!("must be from 1 to the pool's capacity of {capacity} cards"),
                Reason::OutOfRange,
            ));
        }
    }
    cards.max(1)
}

/// What is wrong with an Instance of pool `it` (`None`: the pool does not exist).
pub fn validate(
    spec: &InstanceSpec,
    it: Option<&InstanceType>,
    allowed: Privileges,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if spec.privileged == Some(true) && !allowed.privileged {
        errors.push(FieldError::forbidden(
            "spec.privileged",
            "privileged instances are not allowed (setting instance-privileged-allowed)",
            Reason::FieldInvalid,
        ));
    }
    if !spec.host_path_volumes.is_empty() && !allowed.host_path {
        errors.push(FieldError::forbidden(
            "spec.hostPathVolumes",
            "hostPath volumes are not allowed (setting instance-host-path-volume-allowed)",
            Reason::FieldInvalid,
        ));
    }
    let Some(it) = it else {
        errors.push(FieldError::invalid(
            "spec.instanceType",
            &spec.instance_type,
            format!("instance type {} does not exist", spec.instance_type),
            Reason::NoInstanceType,
        ));
        return errors;
    };
    let r = &spec.resources;
    let accelerated = it.spec.acceleratable.unwrap_or(false);
    let any_accelerator = r.accelerator.is_some()
        || r.accelerator_sliced_memory_percentage.is_some()
        || r.accelerator_partitioned_profile.is_some();
    let units = if accelerated {
        accelerators(r, it, &mut errors)
    } else {
        if any_accelerator {
            errors.push(FieldError::forbidden(
                format!("{RES}.accelerator"),
                format!("instance type {} has no accelerators", spec.instance_type),
                Reason::FieldInvalid,
            ));
        }
        let cpus = r.cpu.unwrap_or(1);
        let capacity = it
            .status
            .as_ref()
            .and_then(|s| s.cpu.as_ref())
            .map(|v| v.capacity);
        if cpus < 1 || capacity.is_some_and(|c| cpus > c) {
            errors.push(FieldError::invalid(
                format!("{RES}.cpu"),
                &cpus.to_string(),
                format!(
                    "must be from 1 to the pool's capacity of {} CPU units",
                    capacity.unwrap_or(0)
                ),
                Reason::OutOfRange,
            ));
        }
        cpus.max(1)
    };
    // Memory and storage against the pool's unit.
    let unit_ram = it
        .spec
        .unit_resources
        .as_ref()
        .and_then(|u| u.ram.as_deref());
    for (field, asked, limit, what) in [
        (
            "ram",
            r.ram.as_deref(),
            unit_ram.and_then(|u| Quantity::parse(u).ok()?.times(units)),
            "the unit's memory times the units taken",
        ),
        (
            "storage",
            r.storage.as_deref(),
            it.spec
                .local_storage
                .as_deref()
                .and_then(|s| Quantity::parse(s).ok()),
            "the pool's local storage",
        ),
    ] {
        let Some(asked) = asked else { continue };
        match (Quantity::parse(asked), limit) {
            (Err(_), _) => errors.push(FieldError::invalid(
                format!("{RES}.{field}"),
                asked,
                "must be a quantity like 16Gi",
                Reason::FieldInvalid,
            )),
            (Ok(q), Some(limit)) if q > limit => errors.push(FieldError::invalid(
                format!("{RES}.{field}"),
                asked,
                format!("must not exceed {what}"),
                Reason::OutOfRange,
            )),
            _ => {}
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(accelerated: bool) -> InstanceType {
        serde_json::from_value(json!({
            "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType", "metadata": {"name": "h100"},
            "spec": {"acceleratable": accelerated, "acceleratorGroup": "nvidia-h100", "os": "linux", "arch": "amd64",
                     "unitResources": {"cpu": "8", "ram": "64Gi"}, "localStorage": "100Gi"},
            "status": {"accelerator": {"onceMaxRequest": 8, "remaining": 8, "capacity": 8},
                       "acceleratorSliced": {"onceMaxRequest": 100, "remaining": 800, "capacity": 800},
                       "cpu": {"onceMaxRequest": 4, "remaining": 4, "capacity": 4},
                       "detail": {"memory": "80Gi", "slicedDetail": {"physical": {"count": 7, "profiles": [{"name": "1g.10gb", "count": 7, "memoryMib": 9856}]}}}},
        }))
        .unwrap()
    }

    fn check(
        resources: Value,
        extra: Value,
        accelerated: bool,
        allowed: Privileges,
    ) -> Vec<(String, Reason)> {
        let mut spec = json!({"instanceType": "h100", "resources": resources});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        let spec: InstanceSpec = serde_json::from_value(spec).unwrap();
        validate(&spec, Some(&pool(accelerated)), allowed)
            .into_iter()
            .map(|e| (e.field, e.reason))
            .collect()
    }

    #[test]
    fn fits_its_pool() {
        let none = Privileges::default();
        let ok: Vec<(String, Reason)> = vec![];
        assert_eq!(
            check(
                json!({"accelerator": 2, "ram": "128Gi", "storage": "100Gi"}),
                json!({}),
                true,
                none
            ),
            ok
        );
        assert_eq!(
            check(
                json!({"acceleratorSlicedMemoryPercentage": 25}),
                json!({}),
                true,
                none
            ),
            ok
        );
        assert_eq!(
            check(
                json!({"acceleratorPartitionedProfile": "1g.10gb", "accelerator": 1}),
                json!({}),
                true,
                none
            ),
            ok
        );
        assert_eq!(
            check(json!({"cpu": 4, "ram": "256Gi"}), json!({}), false, none),
            ok
        );
        let f = |s: &str| format!("spec.resources.{s}");
        let cases = [
            (
                json!({"accelerator": 9}),
                true,
                vec![(f("accelerator"), Reason::OutOfRange)],
            ),
            (
                json!({"accelerator": 2, "ram": "129Gi"}),
                true,
                vec![(f("ram"), Reason::OutOfRange)],
            ),
            (
                json!({"accelerator": 1, "storage": "101Gi"}),
                true,
                vec![(f("storage"), Reason::OutOfRange)],
            ),
            (
                json!({"acceleratorSlicedMemoryPercentage": 25, "acceleratorPartitionedProfile": "1g.10gb"}),
                true,
                vec![(f("acceleratorPartitionedProfile"), Reason::MultipleFamilies)],
            ),
            (
                json!({"acceleratorSlicedMemoryPercentage": 25, "accelerator": 2}),
                true,
                vec![(f("accelerator"), Reason::SliceNotSingleCard)],
            ),
            (
                json!({"acceleratorSlicedMemoryPercentage": 120}),
                true,
                vec![(f("acceleratorSlicedMemoryPercentage"), Reason::OutOfRange)],
            ),
            (
                json!({"acceleratorPartitionedProfile": "7g.80gb"}),
                true,
                vec![(
                    f("acceleratorPartitionedProfile"),
                    Reason::ProfileNotOffered,
                )],
            ),
            (
                json!({"cpu": 5}),
                false,
                vec![(f("cpu"), Reason::OutOfRange)],
            ),
            (
                json!({"accelerator": 1}),
                false,
                vec![(f("accelerator"), Reason::FieldInvalid)],
            ),
        ];
        for (resources, accelerated, want) in cases {
            assert_eq!(
                check(resources.clone(), json!({}), accelerated, none),
                want,
                "{resources}"
            );
        }
        let mut unsliceable = pool(true);
        unsliceable.status.as_mut().unwrap().accelerator_sliced = None;
        let spec: InstanceSpec = serde_json::from_value(
            json!({"instanceType": "h100", "resources": {"acceleratorSlicedMemoryPercentage": 10}}),
        )
        .unwrap();
        let e = validate(&spec, Some(&unsliceable), none);
        assert_eq!(
            e[0].detail,
            "instance type h100 does not offer logical slices"
        );
        let e = validate(&spec, None, none);
        assert_eq!(
            e[0].to_string(),
            "spec.instanceType: Invalid value: \"h100\": instance type h100 does not exist"
        );
    }

    #[test]
    fn privileges_follow_the_settings() {
        let extra = json!({"privileged": true, "hostPathVolumes": [{"name": "d", "path": "/data", "mountPath": "/d"}]});
        let got = check(
            json!({"accelerator": 1}),
            extra.clone(),
            true,
            Privileges::default(),
        );
        assert_eq!(
            got.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
            ["spec.privileged", "spec.hostPathVolumes"]
        );
        assert_eq!(
            check(
                json!({"accelerator": 1}),
                extra,
                true,
                Privileges {
                    privileged: true,
                    host_path: true
                }
            ),
            vec![]
        );
    }

    #[test]
    fn defaults_a_slice() {
        let out =
            default(&json!({"spec": {"resources": {"acceleratorSlicedMemoryPercentage": 10}}}));
        assert_eq!(
            out["spec"]["resources"],
            json!({"acceleratorSlicedMemoryPercentage": 10, "accelerator": 1, "acceleratorSlicedCoresPercentage": 100})
        );
        let whole = json!({"spec": {"resources": {"accelerator": 2}}});
        assert_eq!(default(&whole), whole);
    }
}
