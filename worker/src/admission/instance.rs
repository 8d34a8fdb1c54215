//! Instance defaulting and validation (§3.6): what an Instance asks of its pool must fit what
//! one request can get there (cards and CPUs bounded by the pool's capacity, memory by the
//! unit's times the units taken, storage by the pool's), a slice or partition is one card and
//! one of the two, a profile must be one the pool offers, and the privileges the Settings gate
//! stay off unless allowed.

use gpustack_api::{
    instance::{InstanceResources, InstanceSpec},
    instance_type::InstanceType,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::{quantity::Quantity, reasons::Reason, verdict::FieldError};

const RES: &str = "spec.resources";

/// The Settings that gate an Instance's privileges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Privileges {
    /// `instance-privileged-allowed`: Instances may run privileged.
    pub privileged: bool,
    /// `instance-host-path-volume-allowed`: Instances may mount host paths.
    pub host_path: bool,
}

fn mib() -> Quantity {
    Quantity::parse("1Mi").expect("a quantity")
}

/// Local storage an Instance gets when it names none (at most the pool's).
const DEFAULT_LOCAL_STORAGE: &str = "15Gi";

fn absent_or_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => Quantity::parse(s).is_ok_and(|q| q.is(0)),
        _ => false,
    }
}

/// The share of a unit an accelerated request takes, in percent: a partition its profile's
/// part of the card's memory (1–100), a slice its memory percentage, whole cards 100 each.
fn unit_share(r: &Value, it: &InstanceType) -> i64 {
    let detail = it.status.as_ref().and_then(|s| s.detail.as_ref());
    if let Some(profile) = r["acceleratorPartitionedProfile"].as_str() {
        let card = detail.and_then(|d| d.memory_mib());
        let part = detail
            .and_then(|d| d.sliced_detail.as_ref())
            .and_then(|d| d.physical.as_ref())
            .and_then(|p| p.profiles.iter().find(|p| p.name == profile))
            .map(|p| p.memory_mib);
        return match (part, card) {
            (Some(part), Some(card)) if card > 0 => {
                ((part as i64 * 100) / card as i64).clamp(1, 100)
            }
            _ => 100,
        };
    }
    if let Some(p) = r["acceleratorSlicedMemoryPercentage"]
        .as_i64()
        .filter(|p| *p > 0)
    {
        return p;
    }
    r["accelerator"].as_i64().unwrap_or(1).max(1) * 100
}

/// The defaulted object: the pull policy, the workspace's mount and the resources an Instance
/// leaves out. A slice or a partition is one card (a slice with all its cores' time unless
/// told); CPU and memory follow the pool's unit times the share taken (always, with
/// `overcommit`; otherwise only when not given); local storage is 15Gi, at most the pool's.
/// Without its pool (or stopped) only the plain fields are filled.
pub fn default(instance: &Value, it: Option<&InstanceType>, overcommit: bool) -> Value {
    let mut out = instance.clone();
    let spec = &mut out["spec"];
    if spec["imagePullPolicy"].is_null() {
        spec["imagePullPolicy"] = json!("IfNotPresent");
    }
    if spec["volumeMount"].is_null() {
        spec["volumeMount"] = json!("/workspace");
    }
    if !spec["resources"].is_object() {
        spec["resources"] = json!({});
    }
    let stopped = spec["stop"].as_bool() == Some(true);
    let r = &mut spec["resources"];
    let slice = !r["acceleratorSlicedMemoryPercentage"].is_null();
    let partition = !r["acceleratorPartitionedProfile"].is_null();
    if (slice || partition) && absent_or_zero(&r["accelerator"]) {
        r["accelerator"] = json!(1);
    }
    if slice && r["acceleratorSlicedCoresPercentage"].is_null() {
        r["acceleratorSlicedCoresPercentage"] = json!(100);
    }
    let Some(it) = it.filter(|_| !stopped) else {
        return out;
    };
    let unit = |what: &str| {
        let u = it.spec.unit_resources.as_ref()?;
        Quantity::parse(if what == "cpu" {
            u.cpu.as_deref()?
        } else {
            u.ram.as_deref()?
        })
        .ok()
    };
    let (cpu, ram) = if it.spec.acceleratable.unwrap_or(false) {
        if r["accelerator"].is_null() {
            r["accelerator"] = json!(1);
        }
        let share = unit_share(r, it);
        (
            unit("cpu").map(|u| u.percent(share)),
            unit("ram").map(|u| u.percent(share).ceil_to(mib())),
        )
    } else {
        if absent_or_zero(&r["cpu"]) {
            r["cpu"] = json!(1);
        }
        let n = match &r["cpu"] {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => Quantity::parse(s).ok().and_then(Quantity::whole),
            _ => None,
        };
        (None, n.and_then(|n| unit("ram")?.times(n)))
    };
    for (key, q) in [("cpu", cpu), ("ram", ram)] {
        if let Some(q) = q.filter(|_| overcommit || absent_or_zero(&r[key])) {
            r[key] = json!(q.to_string());
        }
    }
    if r["localStorage"].is_null() {
        let mut storage = Quantity::parse(DEFAULT_LOCAL_STORAGE).expect("a quantity");
        if let Some(cap) = it
            .spec
            .local_storage
            .as_deref()
            .and_then(|s| Quantity::parse(s).ok())
        {
            storage = storage.min(cap);
        }
        r["localStorage"] = json!(storage.to_string());
    }
    out
}

/// The fields frozen while an Instance runs (changed only across a stop and start).
const FROZEN: &[&str] = &[
    "type",
    "image",
    "imagePullPolicy",
    "command",
    "privileged",
    "ports",
    "env",
    "volumeMount",
    "imagePullSecret",
    "resources",
    "sshPublicKey",
    "nodeName",
    "hostPathVolumes",
];

/// What is wrong with an update from `old` (whose phase is `old_phase`) to `new`: the
/// workspace never changes; nothing but the display fields and `stop` changes while it runs;
/// it starts only once stopped.
pub fn validate_update(old: &Value, old_phase: &str, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let field = |v: &Value, k: &str| v["spec"].get(k).cloned().unwrap_or(Value::Null);
    if field(old, "volume") != field(new, "volume") {
        errors.push(FieldError::forbidden(
            "spec.volume",
            "is immutable",
            Reason::FieldImmutable,
        ));
    }
    let stopped = |v: &Value| v["spec"]["stop"].as_bool() == Some(true);
    if !stopped(old) {
        for k in FROZEN {
            if field(old, k) != field(new, k) {
                errors.push(FieldError::forbidden(
                    format!("spec.{k}"),
                    "is immutable while the instance runs; stop it first",
                    Reason::FieldImmutable,
                ));
            }
        }
    } else if !stopped(new) && old_phase != "Stopped" {
        errors.push(FieldError::forbidden(
            "spec.stop",
            format!(
                "can only start stopped instance (it is {})",
                if old_phase.is_empty() {
                    "stopping"
                } else {
                    old_phase
                }
            ),
            Reason::NotStopped,
        ));
    }
    errors
}

/// A CPU amount as written (`4`, `1500m`).
pub fn cpu_text(cpu: &IntOrString) -> String {
    match cpu {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    }
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

/// What is wrong with an Instance of pool `it` (`None`: the pool does not exist), starting
/// from `held` (the stopped Instance it was, for a start).
pub fn validate(
    spec: &InstanceSpec,
    it: Option<&InstanceType>,
    allowed: Privileges,
    held: Option<&InstanceSpec>,
) -> Vec<FieldError> {
    let mut errors = privileges(spec, allowed, held);
    if spec.instance_type.is_empty() {
        errors.push(FieldError::required(
            "spec.type",
            "type must be specified",
            Reason::FieldRequired,
        ));
        return errors;
    }
    let Some(it) = it else {
        errors.push(FieldError::invalid(
            "spec.type",
            &spec.instance_type,
            format!("instance type {} does not exist", spec.instance_type),
            Reason::NoInstanceType,
        ));
        return errors;
    };
    pool_rules(spec, it, &mut errors);
    errors
}

/// The privileges the Settings gate that `spec` newly takes. What `held` (the Instance before
/// a start) already had is kept whatever the Settings say now: a host path is held when the
/// same volume (by value, in any order) was there; one repointed is new.
pub fn privileges(
    spec: &InstanceSpec,
    allowed: Privileges,
    held: Option<&InstanceSpec>,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let held_privileged = held.is_some_and(|h| h.privileged == Some(true));
    if spec.privileged == Some(true) && !allowed.privileged && !held_privileged {
        errors.push(FieldError::forbidden(
            "spec.privileged",
            "privileged instances are not allowed (setting instance-privileged-allowed)",
            Reason::FieldInvalid,
        ));
    }
    if !allowed.host_path {
        for (i, v) in spec.host_path_volumes.iter().enumerate() {
            if held.is_some_and(|h| h.host_path_volumes.contains(v)) {
                continue;
            }
            errors.push(FieldError::forbidden(
                format!("spec.hostPathVolumes[{i}]"),
                "hostPath volumes are not allowed (setting instance-host-path-volume-allowed)",
                Reason::FieldInvalid,
            ));
        }
    }
    errors
}

/// What an Instance asks of pool `it` must fit what one request can get there.
fn pool_rules(spec: &InstanceSpec, it: &InstanceType, errors: &mut Vec<FieldError>) {
    let r = &spec.resources;
    let accelerated = it.spec.acceleratable.unwrap_or(false);
    let any_accelerator = r.accelerator.is_some()
        || r.accelerator_sliced_memory_percentage.is_some()
        || r.accelerator_partitioned_profile.is_some();
    let units = if accelerated {
        accelerators(r, it, errors)
    } else {
        if any_accelerator {
            errors.push(FieldError::forbidden(
                format!("{RES}.accelerator"),
                format!("instance type {} has no accelerators", spec.instance_type),
                Reason::FieldInvalid,
            ));
        }
        let cpus = match r.cpu.as_ref().map(cpu_text) {
            None => 1,
            Some(text) => match Quantity::parse(&text).ok().and_then(Quantity::whole) {
                Some(n) => n,
                None => {
                    errors.push(FieldError::invalid(
                        format!("{RES}.cpu"),
                        &text,
                        "must be a whole number of CPU units",
                        Reason::FieldInvalid,
                    ));
                    1
                }
            },
        };
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
            "localStorage",
            r.local_storage.as_deref(),
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
        let mut spec = json!({"type": "h100", "resources": resources});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        let spec: InstanceSpec = serde_json::from_value(spec).unwrap();
        validate(&spec, Some(&pool(accelerated)), allowed, None)
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
                json!({"accelerator": 2, "ram": "128Gi", "localStorage": "100Gi"}),
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
                json!({"accelerator": 1, "localStorage": "101Gi"}),
                true,
                vec![(f("localStorage"), Reason::OutOfRange)],
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
            json!({"type": "h100", "resources": {"acceleratorSlicedMemoryPercentage": 10}}),
        )
        .unwrap();
        let e = validate(&spec, Some(&unsliceable), none, None);
        assert_eq!(
            e[0].detail,
            "instance type h100 does not offer logical slices"
        );
        let e = validate(&spec, None, none, None);
        assert_eq!(
            e[0].to_string(),
            "spec.type: Invalid value: \"h100\": instance type h100 does not exist"
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
            ["spec.privileged", "spec.hostPathVolumes[0]"]
        );
        // Held before a start: kept whatever the Settings say now; a repointed path is new.
        let mut spec: InstanceSpec = serde_json::from_value(json!({"type": "h100",
            "resources": {"accelerator": 1}, "privileged": true,
            "hostPathVolumes": [{"name": "a", "path": "/a", "mountPath": "/a"},
                {"name": "d", "path": "/data", "mountPath": "/d"}]}))
        .unwrap();
        let held = spec.clone();
        spec.host_path_volumes.reverse();
        assert!(privileges(&spec, Privileges::default(), Some(&held)).is_empty());
        spec.host_path_volumes[0].path = "/etc".into();
        let e = privileges(&spec, Privileges::default(), Some(&held));
        assert_eq!(
            e.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
            ["spec.hostPathVolumes[0]"]
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
    fn defaults_follow_the_pools_unit() {
        let out = default(
            &json!({"spec": {"resources": {"acceleratorSlicedMemoryPercentage": 10}}}),
            None,
            true,
        );
        assert_eq!(
            out["spec"]["resources"],
            json!({"acceleratorSlicedMemoryPercentage": 10, "accelerator": 1, "acceleratorSlicedCoresPercentage": 100})
        );
        assert_eq!(out["spec"]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(out["spec"]["volumeMount"], "/workspace");
        let r = |resources: Value, accelerated: bool, overcommit: bool| {
            default(
                &json!({"spec": {"type": "h100", "resources": resources}}),
                Some(&pool(accelerated)),
                overcommit,
            )["spec"]["resources"]
                .clone()
        };
        // A 25 % slice: a quarter of the unit (8 CPUs, 64Gi).
        assert_eq!(
            r(json!({"acceleratorSlicedMemoryPercentage": 25}), true, true),
            json!({"acceleratorSlicedMemoryPercentage": 25, "acceleratorSlicedCoresPercentage": 100,
                   "accelerator": 1, "cpu": "2", "ram": "16Gi", "localStorage": "15Gi"})
        );
        // A 1g.10gb partition: 9856 of 81920 MiB, 12 % of the unit.
        let mig = r(
            json!({"acceleratorPartitionedProfile": "1g.10gb"}),
            true,
            true,
        );
        assert_eq!(
            (&mig["cpu"], &mig["ram"]),
            (&json!("960m"), &json!("7865Mi"))
        );
        // Whole cards: the unit per card; given values kept without overcommit.
        let two = r(
            json!({"accelerator": 2, "ram": "100Gi", "localStorage": "50Gi"}),
            true,
            false,
        );
        assert_eq!(
            (&two["cpu"], &two["ram"], &two["localStorage"]),
            (&json!("16"), &json!("100Gi"), &json!("50Gi"))
        );
        assert_eq!(
            r(json!({"accelerator": 2, "ram": "100Gi"}), true, true)["ram"],
            "128Gi"
        );
        // A CPU pool: one CPU unit unless told, the unit's memory per CPU.
        let cpu = r(json!({}), false, true);
        assert_eq!((&cpu["cpu"], &cpu["ram"]), (&json!(1), &json!("64Gi")));
        assert_eq!(r(json!({"cpu": 3}), false, true)["ram"], "192Gi");
    }

    #[test]
    fn frozen_while_running_and_started_only_when_stopped() {
        let i = |stop: bool, image: &str, volume: &str| {
            json!({"spec": {"type": "h100", "image": image, "stop": stop,
                            "volume": {"ephemeral": {"capacity": volume}}}})
        };
        let fields = |e: Vec<FieldError>| {
            e.into_iter()
                .map(|e| (e.field, e.reason))
                .collect::<Vec<_>>()
        };
        assert!(validate_update(&i(false, "a", "1Gi"), "Ready", &i(true, "a", "1Gi")).is_empty());
        assert_eq!(
            fields(validate_update(
                &i(false, "a", "1Gi"),
                "Ready",
                &i(false, "b", "1Gi")
            )),
            [("spec.image".to_owned(), Reason::FieldImmutable)]
        );
        assert!(validate_update(&i(true, "a", "1Gi"), "Stopped", &i(true, "b", "1Gi")).is_empty());
        assert_eq!(
            fields(validate_update(
                &i(true, "a", "1Gi"),
                "Stopped",
                &i(true, "a", "2Gi")
            )),
            [("spec.volume".to_owned(), Reason::FieldImmutable)]
        );
        assert!(validate_update(&i(true, "a", "1Gi"), "Stopped", &i(false, "b", "1Gi")).is_empty());
        let e = validate_update(&i(true, "a", "1Gi"), "Stopping", &i(false, "a", "1Gi"));
        assert_eq!(
            e[0].to_string(),
            "spec.stop: Forbidden: can only start stopped instance (it is Stopping)"
        );
    }
}
