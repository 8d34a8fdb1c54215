//! The validating half of the Pod webhook (§3.4): seven rules over the Pod's accelerator
//! claims. "Exactly 1" compares amounts (`1000m` is 1, `1m` is not). Every error names the
//! key it is about, under `resources.limits[<key>]`.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    pod_requests::{Bases, Claim, Family, Group, Part, family_key},
    reasons::Reason,
    verdict::FieldError,
};

const WITHIN_0_100: &str = "must be within (0, 100]";

/// Every rule the claims break; empty when the Pod may be admitted.
pub fn validate(claims: &[Claim], bases: &Bases) -> Vec<FieldError> {
    let mut errors = Vec::new();

    // Rule 7: native sidecars run for the Pod's whole life beside the app; a card held there
    // is a card the app cannot be scheduled against.
    let mut seen = BTreeSet::new();
    for c in claims.iter().filter(|c| c.group == Group::Sidecar) {
        if seen.insert(c.index) {
            errors.push(FieldError::forbidden(
                c.field(),
                "a restartable init container (a native sidecar) may not request an accelerator; move the request to an app container",
                Reason::SidecarRequest,
            ));
        }
    }
    let claims: Vec<&Claim> = claims
        .iter()
        .filter(|c| c.group != Group::Sidecar)
        .collect();

    // Rule 1: one family, in one container group.
    let families: BTreeSet<String> = claims.iter().map(|c| c.key.family_name()).collect();
    if families.len() > 1 {
        let first = claims[0].key.family_name();
        if let Some(other) = claims.iter().find(|c| c.key.family_name() != first) {
            let found: Vec<String> = families.iter().cloned().collect();
            errors.push(FieldError::forbidden(
                other.field(),
                format!(
                    "a Pod may request only one accelerator family, found [{}]",
                    found.join(", ")
                ),
                Reason::MultipleFamilies,
            ));
        }
    }
    if claims.iter().any(|c| c.group == Group::Init)
        && claims.iter().any(|c| c.group == Group::App)
        && let Some(init) = claims.iter().find(|c| c.group == Group::Init)
    {
        errors.push(FieldError::forbidden(
            init.field(),
            "accelerator requests must all sit in one container group; spec.initContainers must give up its request, or spec.containers theirs",
            Reason::SplitContainerGroups,
        ));
    }

    // Per container: rules 2, 3 and 5, and whole numbers everywhere else.
    let mut by_container: BTreeMap<(Group, usize), Vec<&Claim>> = BTreeMap::new();
    for c in &claims {
        by_container.entry((c.group, c.index)).or_default().push(c);
    }
    for keys in by_container.values() {
        errors.extend(container_rules(keys, bases));
    }

    // Rule 4: one partition profile per Pod.
    let profiles: BTreeSet<String> = claims
        .iter()
        .filter(|c| matches!(c.key.part, Part::Profile(_)))
        .map(|c| c.key.name())
        .collect();
    if profiles.len() > 1
        && let Some(second) = claims
            .iter()
            .filter(|c| matches!(c.key.part, Part::Profile(_)))
            .find(|c| Some(&c.key.name()) != profiles.first())
    {
        let found: Vec<String> = profiles.iter().cloned().collect();
        errors.push(FieldError::forbidden(
            second.field(),
            format!(
                "a Pod may request only one partition profile, found [{}]",
                found.join(", ")
            ),
            Reason::MultipleProfiles,
        ));
    }

    // Rule 6: one card is divided for one container.
    let slicing: Vec<&&Claim> = claims.iter().filter(|c| c.key.family.slicing()).collect();
    let containers: BTreeSet<(Group, usize)> = slicing.iter().map(|c| (c.group, c.index)).collect();
    if containers.len() > 1 {
        let first = containers.first().copied();
        if let Some(c) = slicing.iter().find(|c| Some((c.group, c.index)) != first) {
            errors.push(FieldError::forbidden(
                c.field(),
                format!(
                    "at most one container may request a slicing family, found {}",
                    containers.len()
                ),
                Reason::MultipleSlicingContainers,
            ));
        }
    }
    errors
}

/// The rules about the keys of one container.
fn container_rules(keys: &[&Claim], bases: &Bases) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let find = |family: Family, part: &Part, base: &str| {
        keys.iter()
            .find(|c| c.key.family == family && &c.key.part == part && c.key.base == base)
            .copied()
    };
    // Head keys required by parts, checked once per (base, family).
    let mut heads_checked = BTreeSet::new();
    for c in keys {
        let base = c.key.base.as_str();
        let head_field = |c: &Claim| {
            c.field()
                .replace(&c.key.name(), &family_key(base, c.key.family))
        };
        match (&c.key.family, &c.key.part) {
            // The mutating webhook owns these.
            (_, Part::Units) => {}
            (Family::Sliced, Part::Head) => {
                if !c.amount.is_some_and(|a| a.is(1)) {
                    errors.push(FieldError::invalid(
                        c.field(),
                        &c.value,
                        "a logical slice request is always a single card; multi-card logical slicing is not supported yet",
                        Reason::SliceNotSingleCard,
                    ));
                }
            }
            (Family::Partitioned, Part::Head) => {
                if !c.amount.is_some_and(|a| a.is(1)) {
                    errors.push(FieldError::invalid(
                        c.field(),
                        &c.value,
                        "a partition request is always a single card; request one Pod per instance",
                        Reason::PartitionNotSingleCard,
                    ));
                }
            }
            // Rule 5.
            (Family::Partitioned, Part::Profile(_)) => {
                if !c.amount.is_some_and(|a| a.is(1)) {
                    errors.push(FieldError::invalid(
                        c.field(),
                        &c.value,
                        "a partition profile request must be exactly 1 instance",
                        Reason::ProfileNotSingleInstance,
                    ));
                }
            }
            (Family::Sliced, Part::MemoryPercentage | Part::CoresPercentage) => {
                if !c.whole().is_some_and(|p| (1..=100).contains(&p)) {
                    errors.push(FieldError::invalid(
                        c.field(),
                        &c.value,
                        WITHIN_0_100,
                        Reason::OutOfRange,
                    ));
                }
            }
            (Family::Sliced, Part::MemoryMib) => {
                if c.whole().is_none_or(|m| m <= 0) {
                    errors.push(FieldError::invalid(
                        c.field(),
                        &c.value,
                        "must be a positive whole number of MiB",
                        Reason::OutOfRange,
                    ));
                }
            }
            _ => {
                if c.whole().is_none_or(|n| n < 0) {
                    errors.push(FieldError::invalid(
                        c.field(),
                        &c.value,
                        "must be a whole number",
                        Reason::NotWholeNumber,
                    ));
                }
            }
        }
        // A part without its head.
        if c.key.part != Part::Head
            && c.key.part != Part::Units
            && find(c.key.family, &Part::Head, base).is_none()
            && heads_checked.insert((base.to_owned(), c.key.family))
        {
            errors.push(FieldError::required(
                head_field(c),
                format!(
                    "{} needs {}: 1 in the same container",
                    c.key.name(),
                    c.key.family_name()
                ),
                Reason::SlicePartMissingHead,
            ));
        }
    }

    // Rule 2's memory budget and rule 3's profile, per head.
    for head in keys.iter().filter(|c| c.key.part == Part::Head) {
        let base = head.key.base.as_str();
        let name_of = |part: &str| format!("{}.{part}", head.key.family_name());
        let field_of = |part: &str| head.field().replace(&head.key.name(), &name_of(part));
        match head.key.family {
            Family::Sliced => {
                let pct = find(Family::Sliced, &Part::MemoryPercentage, base);
                let mib = find(Family::Sliced, &Part::MemoryMib, base);
                let options = format!(
                    "{} or {}",
                    name_of("memory-percentage"),
                    name_of("memory-mib")
                );
                match (pct, mib) {
                    (None, None) => errors.push(FieldError::required(
                        field_of("memory-percentage"),
                        format!(
                            "a logical slice needs its memory budget: exactly one of {options}"
                        ),
                        Reason::SliceMemoryRequired,
                    )),
                    (Some(_), Some(m)) => errors.push(FieldError::forbidden(
                        m.field(),
                        format!("a logical slice takes exactly one of {options}, not both"),
                        Reason::SliceMemoryAmbiguous,
                    )),
                    _ => {}
                }
            }
            Family::Partitioned => {
                let named = keys
                    .iter()
                    .any(|c| c.key.base == base && matches!(c.key.part, Part::Profile(_)));
                if !named {
                    errors.push(FieldError::required(
                        head.field(),
                        format!(
                            "a partition request must name a profile, e.g. {}.{}-<profile>",
                            head.key.family_name(),
                            bases.partition_kind(base)
                        ),
                        Reason::PartitionProfileRequired,
                    ));
                }
            }
            Family::Exclusive | Family::Shared => {}
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::pod_requests::claims;
    use k8s_openapi::api::core::v1::PodSpec;
    use serde_json::{Value, json};

    fn bases() -> Bases {
        Bases::resolve(|_| None)
    }

    fn app(limits: Value) -> Value {
        json!({"containers": [{"name": "app", "resources": {"limits": limits}}]})
    }

    fn check(spec: Value) -> Vec<(Reason, String, String)> {
        let spec: PodSpec = serde_json::from_value(spec).unwrap();
        validate(&claims(&spec, &bases().names), &bases())
            .into_iter()
            .map(|e| (e.reason, e.field, e.detail))
            .collect()
    }

    fn reasons(spec: Value) -> Vec<Reason> {
        check(spec).into_iter().map(|e| e.0).collect()
    }

    const SLICE: &str = "nvidia.com/gpu.sliced";

    #[test]
    fn valid_requests_of_each_family() {
        for spec in [
            app(json!({"nvidia.com/gpu": "2"})),
            app(json!({"nvidia.com/gpu.shared": "3"})),
            app(json!({SLICE: "1", "nvidia.com/gpu.sliced.memory-percentage": "25"})),
            app(
                json!({SLICE: "1000m", "nvidia.com/gpu.sliced.memory-mib": "2048", "nvidia.com/gpu.sliced.cores-percentage": "50"}),
            ),
            app(
                json!({"nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-1g.10gb": "1"}),
            ),
            // The webhook-owned units are never judged.
            app(
                json!({SLICE: "1", "nvidia.com/gpu.sliced.memory-percentage": "25", "nvidia.com/gpu.sliced.units": "junk"}),
            ),
            json!({"initContainers": [{"name": "i", "resources": {"limits": {"amd.com/gpu": "1"}}}], "containers": [{"name": "a"}]}),
            json!({"containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]}),
        ] {
            assert_eq!(check(spec.clone()), vec![], "{spec}");
        }
    }

    #[test]
    fn the_seven_rules() {
        let cases: Vec<(Value, Vec<Reason>, &str)> = vec![
            // 1: one family, one group.
            (
                app(json!({"nvidia.com/gpu": "1", "nvidia.com/gpu.shared": "1"})),
                vec![Reason::MultipleFamilies],
                "a Pod may request only one accelerator family, found [nvidia.com/gpu, nvidia.com/gpu.shared]",
            ),
            (
                json!({
                    "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                    "containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                }),
                vec![Reason::SplitContainerGroups],
                "accelerator requests must all sit in one container group; spec.initContainers must give up its request, or spec.containers theirs",
            ),
            // 2: a slice is one card, with one memory budget in range.
            (
                app(json!({SLICE: "2", "nvidia.com/gpu.sliced.memory-percentage": "25"})),
                vec![Reason::SliceNotSingleCard],
                "a logical slice request is always a single card; multi-card logical slicing is not supported yet",
            ),
            (
                app(json!({SLICE: "1m", "nvidia.com/gpu.sliced.memory-percentage": "25"})),
                vec![Reason::SliceNotSingleCard],
                "a logical slice request is always a single card; multi-card logical slicing is not supported yet",
            ),
            (
                app(json!({SLICE: "1"})),
                vec![Reason::SliceMemoryRequired],
                "a logical slice needs its memory budget: exactly one of nvidia.com/gpu.sliced.memory-percentage or nvidia.com/gpu.sliced.memory-mib",
            ),
            (
                app(
                    json!({SLICE: "1", "nvidia.com/gpu.sliced.memory-percentage": "25", "nvidia.com/gpu.sliced.memory-mib": "10"}),
                ),
                vec![Reason::SliceMemoryAmbiguous],
                "a logical slice takes exactly one of nvidia.com/gpu.sliced.memory-percentage or nvidia.com/gpu.sliced.memory-mib, not both",
            ),
            (
                app(json!({SLICE: "1", "nvidia.com/gpu.sliced.memory-percentage": "101"})),
                vec![Reason::OutOfRange],
                "must be within (0, 100]",
            ),
            (
                app(json!({SLICE: "1", "nvidia.com/gpu.sliced.memory-percentage": "0"})),
                vec![Reason::OutOfRange],
                "must be within (0, 100]",
            ),
            (
                app(
                    json!({SLICE: "1", "nvidia.com/gpu.sliced.memory-mib": "10", "nvidia.com/gpu.sliced.cores-percentage": "150"}),
                ),
                vec![Reason::OutOfRange],
                "must be within (0, 100]",
            ),
            (
                app(json!({"nvidia.com/gpu.sliced.memory-percentage": "25"})),
                vec![Reason::SlicePartMissingHead],
                "nvidia.com/gpu.sliced.memory-percentage needs nvidia.com/gpu.sliced: 1 in the same container",
            ),
            // 3: a partition is one card, naming its profile.
            (
                app(
                    json!({"nvidia.com/gpu.partitioned": "2", "nvidia.com/gpu.partitioned.mig-1g.10gb": "1"}),
                ),
                vec![Reason::PartitionNotSingleCard],
                "a partition request is always a single card; request one Pod per instance",
            ),
            (
                app(json!({"nvidia.com/gpu.partitioned": "1"})),
                vec![Reason::PartitionProfileRequired],
                "a partition request must name a profile, e.g. nvidia.com/gpu.partitioned.mig-<profile>",
            ),
            // 4: one profile.
            (
                app(
                    json!({"nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-1g.10gb": "1", "nvidia.com/gpu.partitioned.mig-2g.20gb": "1"}),
                ),
                vec![Reason::MultipleProfiles],
                "a Pod may request only one partition profile, found [nvidia.com/gpu.partitioned.mig-1g.10gb, nvidia.com/gpu.partitioned.mig-2g.20gb]",
            ),
            // 5: one instance of it.
            (
                app(
                    json!({"nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-1g.10gb": "2"}),
                ),
                vec![Reason::ProfileNotSingleInstance],
                "a partition profile request must be exactly 1 instance",
            ),
            // 6: one slicing container.
            (
                json!({"containers": [
                    {"name": "a", "resources": {"limits": {SLICE: "1", "nvidia.com/gpu.sliced.memory-percentage": "10"}}},
                    {"name": "b", "resources": {"limits": {SLICE: "1", "nvidia.com/gpu.sliced.memory-percentage": "10"}}},
                ]}),
                vec![Reason::MultipleSlicingContainers],
                "at most one container may request a slicing family, found 2",
            ),
            // 7: sidecars claim nothing.
            (
                json!({
                    "initContainers": [{"name": "s", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                    "containers": [{"name": "a"}],
                }),
                vec![Reason::SidecarRequest],
                "a restartable init container (a native sidecar) may not request an accelerator; move the request to an app container",
            ),
            // And whole numbers.
            (
                app(json!({"nvidia.com/gpu": "500m"})),
                vec![Reason::NotWholeNumber],
                "must be a whole number",
            ),
        ];
        for (spec, want, detail) in cases {
            let got = check(spec.clone());
            assert_eq!(
                got.iter().map(|e| e.0).collect::<Vec<_>>(),
                want,
                "{spec}: {got:?}"
            );
            assert_eq!(got[0].2, detail, "{spec}");
        }
    }

    #[test]
    fn errors_sit_under_the_key() {
        let got = check(app(
            json!({SLICE: "2", "nvidia.com/gpu.sliced.memory-percentage": "25"}),
        ));
        assert_eq!(
            got[0].1,
            "spec.containers[0].resources.limits[nvidia.com/gpu.sliced]"
        );
        let got = check(app(json!({SLICE: "1"})));
        assert_eq!(
            got[0].1,
            "spec.containers[0].resources.limits[nvidia.com/gpu.sliced.memory-percentage]"
        );
        // Several rules at once are all reported.
        assert_eq!(
            reasons(app(json!({SLICE: "3", "amd.com/gpu": "1"}))),
            vec![
                Reason::MultipleFamilies,
                Reason::SliceNotSingleCard,
                Reason::SliceMemoryRequired
            ]
        );
    }
}
