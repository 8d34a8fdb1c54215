//! The mutating half of the Pod webhook (§3.3): the credits a slice or partition takes, from
//! the card of the pool (the InstanceType) its queue fronts, written to requests and limits;
//! the default core share of a slice; and, for shared requests of several cards, a node pin to
//! nodes that have that many cards.

use gpustack_api::instance_type::InstanceType;
use serde_json::{Value, json};

use super::{
    affinity,
    pod_requests::{Claim, Family, Part},
    reasons::Reason,
    verdict::{FieldError, Refusal},
};

/// Credits of one whole card (2^9 · 5^5), the unit grid of `.units`.
pub const CARD_UNITS: i64 = 1_600_000;
/// Credits of one percent of a card's memory.
pub const PERCENT_UNITS: i64 = CARD_UNITS / 100;

/// What the mutation needs to know of the pool behind the Pod's queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    /// The InstanceType behind the queue.
    pub instance_type: String,
    /// `<manufacturer>-<groupID>`.
    pub accelerator_group: Option<String>,
    /// VRAM of one card.
    pub card_mib: Option<u64>,
    /// The partition profiles the pool's cards offer, with their memory.
    pub profiles: Vec<(String, u64)>,
}

impl Pool {
    /// What the mutation needs of `it`.
    pub fn of(it: &InstanceType) -> Self {
        let detail = it.status.as_ref().and_then(|s| s.detail.as_ref());
        Pool {
            instance_type: it.metadata.name.clone().unwrap_or_default(),
            accelerator_group: it.spec.accelerator_group.clone().filter(|g| !g.is_empty()),
            card_mib: detail.and_then(|d| d.memory_mib()).filter(|m| *m > 0),
            profiles: detail
                .and_then(|d| d.sliced_detail.as_ref())
                .and_then(|s| s.physical.as_ref())
                .map(|p| {
                    p.profiles
                        .iter()
                        .map(|p| (p.name.clone(), p.memory_mib))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    fn not_ready(&self, why: &str) -> Refusal {
        Refusal::retry(
            Reason::InstanceTypeNotReady,
            format!(
                "instance type {} is not ready yet ({why}); retry",
                self.instance_type
            ),
        )
    }

    /// The profile a key names: `mig-1g.10gb` matches an offered `1g.10gb` or `mig-1g.10gb`.
    fn profile(&self, named: &str) -> Option<u64> {
        self.profiles
            .iter()
            .find(|(p, _)| p == named || named.split_once('-').is_some_and(|(_, rest)| rest == p))
            .map(|(_, mib)| *mib)
    }
}

/// Whether the claims need the pool's facts: slices and partitions are priced by its card,
/// and shared requests of several cards pinned by its group.
pub fn needs_pool(claims: &[Claim]) -> bool {
    claims.iter().any(|c| {
        c.key.part == Part::Head
            && (c.key.family.slicing()
                || (c.key.family == Family::Shared && c.whole().unwrap_or(0) >= 2))
    })
}

/// The mutated Pod (`pod` is the whole object as JSON), or why it cannot be admitted.
pub fn mutate(
    pod: &Value,
    claims: &[Claim],
    pool: Option<&Pool>,
    name: &str,
) -> Result<Value, Refusal> {
    let mut out = pod.clone();
    let mut errors = Vec::new();
    for head in claims.iter().filter(|c| c.key.part == Part::Head) {
        let part = |p: Part| {
            claims.iter().find(|c| {
                c.group == head.group
                    && c.index == head.index
                    && c.key.base == head.key.base
                    && c.key.family == head.key.family
                    && c.key.part == p
            })
        };
        let list = head.group.field().trim_start_matches("spec.");
        match head.key.family {
            Family::Sliced => {
                let Some(pool) = pool else { continue };
                let units = if let Some(pct) = part(Part::MemoryPercentage) {
                    match pct.whole().filter(|p| (1..=100).contains(p)) {
                        Some(p) => p * PERCENT_UNITS,
                        None => {
                            errors.push(FieldError::invalid(
                                pct.field(),
                                &pct.value,
                                format!("{} must be within (0, 100]", pct.key.name()),
                                Reason::OutOfRange,
                            ));
                            continue;
                        }
                    }
                } else if let Some(mib) = part(Part::MemoryMib) {
                    let card = pool
                        .card_mib
                        .ok_or_else(|| pool.not_ready("the card's memory is not known"))?;
                    match mib.whole().filter(|m| *m > 0) {
                        Some(m) if m as u64 > card => {
                            errors.push(FieldError::invalid(
                                mib.field(),
                                &mib.value,
                                format!(
                                    "{} must not exceed the per-card VRAM ({card} MiB)",
                                    mib.key.name()
                                ),
                                Reason::ExceedsCardMemory,
                            ));
                            continue;
                        }
                        Some(m) => mib_units(m as u64, card),
                        // The validating half names what is wrong.
                        None => continue,
                    }
                } else {
                    continue;
                };
                let head_name = head.key.family_name();
                let container = &mut out["spec"][list][head.index];
                mirror(container, claims, head);
                set(
                    container,
                    &format!("{head_name}.units"),
                    &units.to_string(),
                    true,
                );
                if part(Part::CoresPercentage).is_none() {
                    set(
                        container,
                        &format!("{head_name}.cores-percentage"),
                        "100",
                        false,
                    );
                }
            }
            Family::Partitioned => {
                let Some(pool) = pool else { continue };
                let Some(profile) = claims.iter().find_map(|c| match &c.key.part {
                    Part::Profile(p)
                        if c.group == head.group
                            && c.index == head.index
                            && c.key.base == head.key.base =>
                    {
                        Some((c, p))
                    }
                    _ => None,
                }) else {
                    continue;
                };
                let Some(mib) = pool.profile(profile.1) else {
                    let offered: Vec<&str> =
                        pool.profiles.iter().map(|(p, _)| p.as_str()).collect();
                    errors.push(FieldError::invalid(
                        profile.0.field(),
                        &profile.0.value,
                        format!(
                            "partition profile {:?} is not offered by the target pool (instance type {}); offered: [{}]",
                            profile.1,
                            pool.instance_type,
                            offered.join(", ")
                        ),
                        Reason::ProfileNotOffered,
                    ));
                    continue;
                };
                let card = pool
                    .card_mib
                    .ok_or_else(|| pool.not_ready("the card's memory is not known"))?;
                let units = mib_units(mib, card).to_string();
                let container = &mut out["spec"][list][head.index];
                mirror(container, claims, head);
                set(
                    container,
                    &format!("{}.units", head.key.family_name()),
                    &units,
                    true,
                );
            }
            Family::Shared => {
                let Some(n) = head.whole().filter(|n| *n >= 2) else {
                    continue;
                };
                let Some(pool) = pool else { continue };
                let group = pool
                    .accelerator_group
                    .as_deref()
                    .ok_or_else(|| pool.not_ready("it names no accelerator group"))?;
                affinity::require(
                    &mut out["spec"],
                    affinity::greater_than(
                        &format!(
                            "{}{group}.count",
                            gpustack_api::labels::ACCELERATABLE_PREFIX
                        ),
                        n - 1,
                    ),
                );
            }
            Family::Exclusive => {}
        }
    }
    match Refusal::invalid("Pod", name, errors) {
        Some(refusal) => Err(refusal),
        None => Ok(out),
    }
}

/// Credits of `mib` of a card of `card_mib`: floor(mib · M / VRAM).
pub fn mib_units(mib: u64, card_mib: u64) -> i64 {
    let units = u128::from(mib) * CARD_UNITS as u128 / u128::from(card_mib.max(1));
    i64::try_from(units).unwrap_or(i64::MAX)
}

/// Copies the family's keys of `head`'s container into whichever of limits and requests lacks
/// them, so that both say the same.
fn mirror(container: &mut Value, claims: &[Claim], head: &Claim) {
    let same = |c: &&Claim| {
        c.group == head.group
            && c.index == head.index
            && c.key.base == head.key.base
            && c.key.family == head.key.family
    };
    for c in claims
        .iter()
        .filter(same)
        .filter(|c| c.key.part != Part::Units)
    {
        set(container, &c.key.name(), &c.value, false);
    }
}

/// Writes `key: value` into the container's limits and requests (`force` replaces a value
/// already there; otherwise it is a default).
fn set(container: &mut Value, key: &str, value: &str, force: bool) {
    for list in ["limits", "requests"] {
        let map = &mut container["resources"][list];
        if !map.is_object() {
            *map = json!({});
        }
        if force || map.get(key).is_none() {
            map[key] = json!(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::pod_requests::{Bases, claims};
    use k8s_openapi::api::core::v1::PodSpec;

    fn pool() -> Pool {
        Pool {
            instance_type: "h100".into(),
            accelerator_group: Some("nvidia-0".into()),
            card_mib: Some(81920),
            profiles: vec![("1g.10gb".into(), 9856), ("3g.40gb".into(), 40192)],
        }
    }

    fn pod(limits: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "resources": {"limits": limits}}]}})
    }

    fn run(pod: &Value, pool: Option<&Pool>) -> Result<Value, Refusal> {
        let spec: PodSpec = serde_json::from_value(pod["spec"].clone()).unwrap();
        let cs = claims(&spec, &Bases::resolve(|_| None).names);
        mutate(pod, &cs, pool, "p")
    }

    #[test]
    fn credits_from_memory() {
        assert_eq!(PERCENT_UNITS, 16000);
        let cases = [
            // (limits, units, cores)
            (
                json!({"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "25"}),
                "400000",
                "100",
            ),
            (
                json!({"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "100", "nvidia.com/gpu.sliced.cores-percentage": "30"}),
                "1600000",
                "30",
            ),
            // floor(20480 · 1.6M / 81920) = 400000.
            (
                json!({"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-mib": "20480"}),
                "400000",
                "100",
            ),
            // floor(1000 · 1.6M / 81920) = 19531 (19531.25).
            (
                json!({"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-mib": "1000"}),
                "19531",
                "100",
            ),
            // The percentage wins; a units value given by the user is replaced.
            (
                json!({"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "10", "nvidia.com/gpu.sliced.memory-mib": "1000", "nvidia.com/gpu.sliced.units": "7"}),
                "160000",
                "100",
            ),
        ];
        for (limits, units, cores) in cases {
            let out = run(&pod(limits.clone()), Some(&pool())).unwrap();
            let res = &out["spec"]["containers"][0]["resources"];
            for list in ["limits", "requests"] {
                assert_eq!(
                    res[list]["nvidia.com/gpu.sliced.units"], units,
                    "{limits} {list}"
                );
                assert_eq!(
                    res[list]["nvidia.com/gpu.sliced.cores-percentage"], cores,
                    "{limits} {list}"
                );
            }
        }
        // Partition: floor(9856 · 1.6M / 81920) = 192500.
        let out = run(
            &pod(json!({"nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-1g.10gb": "1"})),
            Some(&pool()),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu.partitioned.units"],
            "192500"
        );
    }

    #[test]
    fn shared_cards_pin_to_nodes_with_enough() {
        let out = run(&pod(json!({"nvidia.com/gpu.shared": "3"})), Some(&pool())).unwrap();
        assert_eq!(
            out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchExpressions"][0],
            json!({"key": "acceleratable.feature.gpustack.ai/nvidia-0.count", "operator": "Gt", "values": ["2"]})
        );
        let one = pod(json!({"nvidia.com/gpu.shared": "1"}));
        assert_eq!(run(&one, Some(&pool())).unwrap(), one);
        let whole = pod(json!({"nvidia.com/gpu": "4"}));
        assert_eq!(run(&whole, None).unwrap(), whole);
    }

    #[test]
    fn refusals() {
        let err = |limits: Value, pool: Option<&Pool>| run(&pod(limits), pool).unwrap_err();
        let e = err(
            json!({"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "150"}),
            Some(&pool()),
        );
        assert_eq!((e.code, e.reason), (422, Reason::OutOfRange));
        assert!(
            e.message
                .ends_with("nvidia.com/gpu.sliced.memory-percentage must be within (0, 100]"),
            "{}",
            e.message
        );
        let e = err(
            json!({"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-mib": "90000"}),
            Some(&pool()),
        );
        assert_eq!(e.reason, Reason::ExceedsCardMemory);
        assert!(
            e.message
                .ends_with("must not exceed the per-card VRAM (81920 MiB)"),
            "{}",
            e.message
        );
        let e = err(
            json!({"nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-7g.80gb": "1"}),
            Some(&pool()),
        );
        assert_eq!(e.reason, Reason::ProfileNotOffered);
        assert!(
            e.message.contains("partition profile \"mig-7g.80gb\" is not offered by the target pool (instance type h100); offered: [1g.10gb, 3g.40gb]"),
            "{}",
            e.message
        );
        let unknown = Pool {
            card_mib: None,
            ..pool()
        };
        let e = err(
            json!({"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-mib": "100"}),
            Some(&unknown),
        );
        assert_eq!((e.code, e.reason), (503, Reason::InstanceTypeNotReady));
        assert_eq!(
            e.message,
            "instance type h100 is not ready yet (the card's memory is not known); retry"
        );
    }

    #[test]
    fn the_pool_is_needed_only_to_price_or_pin() {
        let needs = |limits: Value| {
            let spec: PodSpec = serde_json::from_value(pod(limits)["spec"].clone()).unwrap();
            needs_pool(&claims(&spec, &Bases::resolve(|_| None).names))
        };
        assert!(needs(json!({"nvidia.com/gpu.sliced": "1"})));
        assert!(needs(json!({"nvidia.com/gpu.partitioned": "1"})));
        assert!(needs(json!({"nvidia.com/gpu.shared": "2"})));
        assert!(!needs(json!({"nvidia.com/gpu.shared": "1"})));
        assert!(!needs(json!({"nvidia.com/gpu": "8"})));
        assert!(!needs(json!({"cpu": "1"})));
    }
}
