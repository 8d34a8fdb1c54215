//! The ClusterQueue of an InstanceType (worker.md §2.3): quota from its pool's flavors, the
//! admission checks, and the stop policy that keeps Kueue from admitting what cannot run.

use std::collections::{BTreeMap, BTreeSet};

use gpustack_api::{
    devices::UNITS_PER_ACCELERATOR,
    instance_type::InstanceType,
    kueue::{
        AdmissionCheckStrategyRule, AdmissionChecksStrategy, BorrowWithinCohort, ClusterQueue,
        ClusterQueueSpec, FlavorFungibility, FlavorQuotas, Preemption, ResourceFlavor,
        ResourceGroup, ResourceQuota, Workload,
    },
    labels::{
        ACCELERATABLE_PREFIX, CREDITS_PREFIX, EMPTY_PLAN_HOLD, GENERAL_PREFIX, MIGRATION_HOLD,
        RESOURCE_TYPE,
    },
};
use k8s_openapi::apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::LabelSelector};
use kube::api::ObjectMeta;

use super::{chain_settings::ChainSettings, flavors::pool_labels, label_match::matches};

/// The AdmissionCheck that holds Workloads until their nodes' devices fit.
pub const NODE_DEVICES_CHECK: &str = "gpustack-node-devices";
/// The controller name of that check.
pub const NODE_DEVICES_CONTROLLER: &str = "worker.gpustack.ai/node-devices";
/// The AdmissionCheck for model deployments spanning several Pods.
pub const JOINT_CHECK: &str = "gpustack-model-deployment-joint";
/// The controller name of that check.
pub const JOINT_CONTROLLER: &str = "worker.gpustack.ai/model-deployment-joint";

/// Kueue's stop policies.
pub const NONE: &str = "None";
/// Stop admitting, keep what runs.
pub const HOLD: &str = "Hold";
/// Stop admitting and evict what runs.
pub const HOLD_AND_DRAIN: &str = "HoldAndDrain";

/// The flavors of `flavors` that belong to the InstanceType's pool, smallest per-node count
/// first (Kueue tries flavors in order, so small requests fill small nodes).
pub fn pool_flavors<'a>(
    it: &InstanceType,
    flavors: &'a [ResourceFlavor],
    aware_cpu: bool,
) -> Vec<&'a ResourceFlavor> {
    let pool = pool_labels(&it.spec, aware_cpu);
    let mut out: Vec<&ResourceFlavor> = flavors
        .iter()
        .filter(|f| {
            matches(
                f.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()),
                &pool,
            )
        })
        .collect();
    out.sort_by_key(|f| (per_node(f), f.metadata.name.clone()));
    out
}

/// The flavor's own feature label, the one `<own>.count` and `<own>.capacity` hang off
/// (an accelerated flavor also carries its CPU's label, without a capacity).
fn own_label(f: &ResourceFlavor) -> Option<String> {
    let labels = f.metadata.labels.as_ref()?;
    labels
        .keys()
        .find(|k| {
            (k.starts_with(ACCELERATABLE_PREFIX) || k.starts_with(GENERAL_PREFIX))
                && labels.contains_key(&format!("{k}.capacity"))
        })
        .cloned()
}

fn label_number(f: &ResourceFlavor, suffix: &str) -> u64 {
    own_label(f)
        .and_then(|own| {
            f.metadata
                .labels
                .as_ref()?
                .get(&format!("{own}.{suffix}"))?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn per_node(f: &ResourceFlavor) -> u64 {
    label_number(f, "count")
}

/// The resource Kueue meters for the pool: `credits.gpustack.ai/<manufacturer>` or `cpu`.
pub fn covered_resource(it: &InstanceType) -> String {
    match (
        &it.spec.accelerator_group,
        it.spec.acceleratable.unwrap_or(false),
    ) {
        (Some(group), true) => {
            let manufacturer = group.split_once('-').map_or(group.as_str(), |(m, _)| m);
            format!("{CREDITS_PREFIX}{manufacturer}")
        }
        _ => "cpu".to_owned(),
    }
}

/// The stop policy and whether the queue is held only for want of flavors.
fn stop_policy(
    it: &InstanceType,
    has_flavors: bool,
    current: Option<&ClusterQueue>,
    settings: &ChainSettings,
) -> (&'static str, bool) {
    if it.metadata.deletion_timestamp.is_some() {
        return (HOLD_AND_DRAIN, false);
    }
    if it.spec.inactive == Some(true) {
        return (HOLD, false);
    }
    if has_flavors {
        return (NONE, false);
    }
    let awaiting_first = current.is_none_or(|cq| {
        cq.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(EMPTY_PLAN_HOLD))
    });
    if awaiting_first {
        (HOLD, true)
    } else if settings.drain_when_no_flavors {
        (HOLD_AND_DRAIN, false)
    } else {
        // An empty queue under IgnoreUndeclared would admit everything: keep it held.
        (HOLD, false)
    }
}

/// Workloads the queue holds quota for, as Kueue last reported.
pub fn reserving(cq: Option<&ClusterQueue>) -> i32 {
    cq.and_then(|c| c.status.as_ref()?.reserving_workloads)
        .unwrap_or(0)
}

/// What one node of the pool holds in the flavor's quota unit: credits of its cards, or cores.
pub fn quota_of(accelerated: bool, per_node: u64) -> u64 {
    if accelerated {
        per_node * UNITS_PER_ACCELERATOR
    } else {
        per_node
    }
}

/// The plan the pool's flavors call for: one group over the metered resource, one quota per
/// flavor (`.capacity` of it), in the flavors' order.
pub fn flavor_plan(it: &InstanceType, flavors: &[&ResourceFlavor]) -> Vec<ResourceGroup> {
    let accelerated = it.spec.acceleratable.unwrap_or(false);
    let resource = covered_resource(it);
    let quotas: Vec<FlavorQuotas> = flavors
        .iter()
        .map(|f| FlavorQuotas {
            name: f.metadata.name.clone().unwrap_or_default(),
            resources: vec![ResourceQuota {
                name: resource.clone(),
                nominal_quota: Quantity(
                    quota_of(accelerated, label_number(f, "capacity")).to_string(),
                ),
            }],
        })
        .collect();
    if quotas.is_empty() {
        return Vec::new();
    }
    vec![ResourceGroup {
        covered_resources: vec![resource],
        flavors: quotas,
    }]
}

/// A flavor's hardware identity: its name without the topology profile suffix.
fn hardware_identity(flavor: &str) -> &str {
    flavor
        .rsplit_once("-fnv64-")
        .map_or(flavor, |(base, _)| base)
}

fn nonzero(q: &Quantity) -> bool {
    q.0.chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .any(|c| c.is_ascii_digit() && c != '0')
}

/// Whether Kueue reports quota reserved or used on the flavor.
fn status_usage(cq: &ClusterQueue, flavor: &str) -> bool {
    cq.status.as_ref().is_some_and(|s| {
        s.flavors_reservation
            .iter()
            .chain(&s.flavors_usage)
            .filter(|u| u.name == flavor)
            .flat_map(|u| &u.resources)
            .any(|r| r.total.as_ref().is_some_and(nonzero))
    })
}

fn plan_names(groups: &[ResourceGroup]) -> BTreeSet<&str> {
    groups
        .iter()
        .flat_map(|g| g.flavors.iter().map(|f| f.name.as_str()))
        .collect()
}

/// The flavors of the queue's current plan that `proposed` replaces with the same hardware
/// under another topology profile while they still hold quota (Kueue's usage in the queue's
/// status, or Workloads in `held` holding quota on them). Workloads admitted under the old
/// hierarchy must leave before the plan switches. A flavor dropped for other reasons (a
/// cordoned node, a lost card) is not a migration: the queue is not drained for it.
pub fn migrating_busy(
    current: &ClusterQueue,
    proposed: &[ResourceGroup],
    held: &BTreeSet<String>,
) -> Vec<String> {
    let old = plan_names(&current.spec.resource_groups);
    let new = plan_names(proposed);
    old.difference(&new)
        .filter(|dropped| {
            let id = hardware_identity(dropped);
            new.iter()
                .any(|n| !old.contains(n) && hardware_identity(n) == id)
                && (held.contains(**dropped) || status_usage(current, dropped))
        })
        .map(|d| (*d).to_owned())
        .collect()
}

/// Per ClusterQueue, the flavors Workloads hold quota on (reserved, not evicted): what a
/// migrating queue waits for.
pub fn held_flavors<'a>(
    workloads: impl Iterator<Item = &'a Workload>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut held: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for wl in workloads.filter(|w| w.quota_reserved() && !w.evicted()) {
        if let Some(admission) = wl.status.as_ref().and_then(|s| s.admission.as_ref()) {
            held.entry(admission.cluster_queue.clone())
                .or_default()
                .extend(
                    admission
                        .pod_set_assignments
                        .iter()
                        .flat_map(|a| a.flavors.values().cloned()),
                );
        }
    }
    held
}

fn annotation<'a>(cq: Option<&'a ClusterQueue>, key: &str) -> Option<&'a str> {
    cq?.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The queue the InstanceType calls for. `plan` is the flavor plan to write, `None` when it
/// was refused (the queue keeps the plan it has); `held` names the flavors of this queue that
/// Workloads hold quota on.
pub fn desired_queue(
    it: &InstanceType,
    plan: Option<Vec<ResourceGroup>>,
    current: Option<&ClusterQueue>,
    node_devices_active: bool,
    settings: &ChainSettings,
    held: &BTreeSet<String>,
) -> ClusterQueue {
    let name = it.metadata.name.clone().unwrap_or_default();
    let accelerated = it.spec.acceleratable.unwrap_or(false);
    let kept = || {
        current
            .map(|c| c.spec.resource_groups.clone())
            .unwrap_or_default()
    };
    let proposed = plan.unwrap_or_else(kept);
    let (policy, empty_plan) = stop_policy(it, !proposed.is_empty(), current, settings);
    let migrating =
        policy == NONE && current.is_some_and(|c| !migrating_busy(c, &proposed, held).is_empty());
    let mut annotations = BTreeMap::new();
    if empty_plan {
        annotations.insert(EMPTY_PLAN_HOLD.to_owned(), "true".to_owned());
    }
    let (resource_groups, policy) = if migrating {
        // Hold and drain on the old plan; remember the policy to restore (the one saved by
        // an earlier pass, or the queue's own before the migration began).
        let saved = annotation(current, MIGRATION_HOLD)
            .or_else(|| current.and_then(|c| c.spec.stop_policy.as_deref()))
            .unwrap_or(NONE);
        annotations.insert(MIGRATION_HOLD.to_owned(), saved.to_owned());
        (kept(), HOLD_AND_DRAIN.to_owned())
    } else if policy == NONE {
        let restored = annotation(current, MIGRATION_HOLD)
            .filter(|p| [NONE, HOLD].contains(p))
            .unwrap_or(NONE);
        (proposed, restored.to_owned())
    } else if proposed.is_empty() && policy == HOLD_AND_DRAIN && reserving(current) > 0 {
        // A draining queue keeps its plan until what it admitted has left.
        (kept(), policy.to_owned())
    } else {
        (proposed, policy.to_owned())
    };
    let mut checks = Vec::new();
    if accelerated && settings.derived_from_node && node_devices_active {
        checks.push(AdmissionCheckStrategyRule {
            name: NODE_DEVICES_CHECK.into(),
            on_flavors: Vec::new(),
        });
    }
    checks.push(AdmissionCheckStrategyRule {
        name: JOINT_CHECK.into(),
        on_flavors: Vec::new(),
    });
    let mut labels = pool_labels(&it.spec, settings.aware_cpu_manufacturer);
    labels.insert(RESOURCE_TYPE.to_owned(), "instancetypes".to_owned());
    ClusterQueue {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..ObjectMeta::default()
        },
        spec: ClusterQueueSpec {
            resource_groups,
            cohort_name: None,
            namespace_selector: Some(LabelSelector::default()),
            flavor_fungibility: Some(FlavorFungibility {
                when_can_borrow: Some("MayStopSearch".into()),
                when_can_preempt: Some("TryNextFlavor".into()),
            }),
            preemption: Some(Preemption {
                reclaim_within_cohort: Some("Never".into()),
                borrow_within_cohort: Some(BorrowWithinCohort {
                    policy: "Never".into(),
                }),
                within_cluster_queue: Some("LowerPriority".into()),
            }),
            admission_checks_strategy: Some(AdmissionChecksStrategy {
                admission_checks: checks,
            }),
            stop_policy: Some(policy),
        },
        status: None,
    }
}

/// The pool's phase and why: `Draining` while a held queue still holds quota, `Inactive` while
/// held, else `Active` (or `Inactive` with Kueue's reason when Kueue says the queue is not).
pub fn phase(cq: &ClusterQueue) -> (&'static str, Option<String>) {
    let policy = cq.spec.stop_policy.as_deref().unwrap_or(NONE);
    let kueue_inactive = cq
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Active"))
        .filter(|c| c.status == "False")
        .map(|c| c.message.clone());
    let migrating = annotation(Some(cq), MIGRATION_HOLD).is_some();
    match policy {
        HOLD_AND_DRAIN if migrating => (
            "Draining",
            Some("draining: the pool moves to another topology profile".into()),
        ),
        HOLD_AND_DRAIN if reserving(Some(cq)) > 0 => {
            ("Draining", Some("draining: the pool has no nodes".into()))
        }
        HOLD_AND_DRAIN => ("Inactive", Some("held: the pool has no nodes".into())),
        HOLD if annotation(Some(cq), EMPTY_PLAN_HOLD).is_some() => {
            ("Inactive", Some("held until a node joins the pool".into()))
        }
        HOLD => (
            "Inactive",
            Some("held: the instance type is inactive".into()),
        ),
        _ => match kueue_inactive {
            Some(m) => ("Inactive", Some(m)),
            None => ("Active", None),
        },
    }
}

#[cfg(test)]
mod tests {
    use gpustack_api::{
        instance_type::InstanceTypeSpec,
        kueue::{ClusterQueueStatus, FlavorUsage, ResourceUsage},
    };

    use super::*;

    const OLD: &str = "gpustack--amd--nvidia-h100-linux-amd64-8d-fnv64-1111111111111111";
    const NEW: &str = "gpustack--amd--nvidia-h100-linux-amd64-8d-fnv64-2222222222222222";
    const OTHER: &str = "gpustack--amd--nvidia-h100-linux-amd64-7d-fnv64-1111111111111111";

    fn it(inactive: bool) -> InstanceType {
        let mut it = InstanceType::new(
            "gpustack--nvidia-h100-linux-amd64",
            InstanceTypeSpec {
                acceleratable: Some(true),
                accelerator_group: Some("nvidia-h100".into()),
                os: Some("linux".into()),
                arch: Some("amd64".into()),
                ..InstanceTypeSpec::default()
            },
        );
        it.spec.inactive = inactive.then_some(true);
        it
    }

    fn plan(flavors: &[&str]) -> Vec<ResourceGroup> {
        vec![ResourceGroup {
            covered_resources: vec!["credits.gpustack.ai/nvidia".into()],
            flavors: flavors
                .iter()
                .map(|f| FlavorQuotas {
                    name: (*f).into(),
                    resources: vec![ResourceQuota {
                        name: "credits.gpustack.ai/nvidia".into(),
                        nominal_quota: Quantity("12800000".into()),
                    }],
                })
                .collect(),
        }]
    }

    /// A queue on `flavors` with `policy`, the migration annotation `saved`, and Kueue
    /// reporting `reserved` credits on each flavor.
    fn queue(flavors: &[&str], policy: &str, saved: Option<&str>, reserved: &str) -> ClusterQueue {
        let mut q = desired_queue(
            &it(false),
            Some(plan(flavors)),
            None,
            false,
            &ChainSettings::default(),
            &BTreeSet::new(),
        );
        q.spec.stop_policy = Some(policy.into());
        q.metadata.annotations =
            saved.map(|s| BTreeMap::from([(MIGRATION_HOLD.to_owned(), s.to_owned())]));
        q.status = Some(ClusterQueueStatus {
            flavors_reservation: flavors
                .iter()
                .map(|f| FlavorUsage {
                    name: (*f).into(),
                    resources: vec![ResourceUsage {
                        name: "credits.gpustack.ai/nvidia".into(),
                        total: Some(Quantity(reserved.into())),
                        borrowed: None,
                    }],
                })
                .collect(),
            ..ClusterQueueStatus::default()
        });
        q
    }

    #[test]
    fn a_profile_migration_holds_and_drains_until_the_old_flavors_are_free() {
        let held_old = BTreeSet::from([OLD.to_owned()]);
        let none = BTreeSet::new();
        let idle = queue(&[OLD], NONE, None, "0");
        let busy = queue(&[OLD], NONE, None, "1600000");
        let migrating_idle = queue(&[OLD], HOLD_AND_DRAIN, Some(NONE), "0");
        let migrating_busy = queue(&[OLD], HOLD_AND_DRAIN, Some(NONE), "1600000");
        // (case, inactive, current, proposed, held) => (flavors, policy, saved policy)
        #[allow(clippy::type_complexity)]
        let cases: [(
            &str,
            bool,
            Option<&ClusterQueue>,
            &[&str],
            &BTreeSet<String>,
            (&[&str], &str, Option<&str>),
        ); 9] = [
            (
                "new queue",
                false,
                None,
                &[NEW],
                &none,
                (&[NEW], NONE, None),
            ),
            (
                "nothing holds the old flavor",
                false,
                Some(&idle),
                &[NEW],
                &none,
                (&[NEW], NONE, None),
            ),
            (
                "a Workload holds it",
                false,
                Some(&idle),
                &[NEW],
                &held_old,
                (&[OLD], HOLD_AND_DRAIN, Some(NONE)),
            ),
            (
                "Kueue reports a reservation",
                false,
                Some(&busy),
                &[NEW],
                &none,
                (&[OLD], HOLD_AND_DRAIN, Some(NONE)),
            ),
            (
                "still draining (after a restart too)",
                false,
                Some(&migrating_busy),
                &[NEW],
                &none,
                (&[OLD], HOLD_AND_DRAIN, Some(NONE)),
            ),
            (
                "drained: switch, restore",
                false,
                Some(&migrating_idle),
                &[NEW],
                &none,
                (&[NEW], NONE, None),
            ),
            (
                "not a migration: a card was lost",
                false,
                Some(&busy),
                &[OTHER],
                &held_old,
                (&[OTHER], NONE, None),
            ),
            (
                "a node joins the new profile, the old stays",
                false,
                Some(&busy),
                &[OLD, NEW],
                &held_old,
                (&[OLD, NEW], NONE, None),
            ),
            (
                "inactive wins",
                true,
                Some(&busy),
                &[NEW],
                &held_old,
                (&[NEW], HOLD, None),
            ),
        ];
        for (case, inactive, current, proposed, held, (flavors, policy, saved)) in cases {
            let q = desired_queue(
                &it(inactive),
                Some(plan(proposed)),
                current,
                false,
                &ChainSettings::default(),
                held,
            );
            let got: Vec<&str> = plan_names(&q.spec.resource_groups).into_iter().collect();
            let mut want: Vec<&str> = flavors.to_vec();
            want.sort();
            assert_eq!(got, want, "{case}");
            assert_eq!(q.spec.stop_policy.as_deref(), Some(policy), "{case}");
            assert_eq!(annotation(Some(&q), MIGRATION_HOLD), saved, "{case}");
        }
        // The saved policy is the one before the migration, whatever the queue says now.
        let saved_hold = queue(&[OLD], HOLD_AND_DRAIN, Some(HOLD), "0");
        let q = desired_queue(
            &it(false),
            Some(plan(&[NEW])),
            Some(&saved_hold),
            false,
            &ChainSettings::default(),
            &none,
        );
        assert_eq!(q.spec.stop_policy.as_deref(), Some(HOLD), "restored");
        assert_eq!(phase(&migrating_busy).0, "Draining");
    }

    #[test]
    fn held_flavors_are_those_of_reserved_workloads_not_evicted() {
        let wl = |name: &str, conditions: &[(&str, &str)], flavor: &str| -> Workload {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"podSets": []},
                "status": {
                    "conditions": conditions.iter().map(|(t, s)| serde_json::json!({
                        "type": t, "status": s, "reason": "R", "message": "",
                        "lastTransitionTime": "2026-12-03T00:00:00Z"})).collect::<Vec<_>>(),
                    "admission": {"clusterQueue": "q", "podSetAssignments": [
                        {"name": "main", "flavors": {"credits.gpustack.ai/nvidia": flavor}}]},
                },
            }))
            .unwrap()
        };
        let all = [
            wl("a", &[("QuotaReserved", "True")], OLD),
            wl("b", &[("QuotaReserved", "True"), ("Evicted", "True")], NEW),
            wl("c", &[("QuotaReserved", "False")], OTHER),
        ];
        let held = held_flavors(all.iter());
        assert_eq!(
            held,
            BTreeMap::from([("q".to_owned(), BTreeSet::from([OLD.to_owned()]))])
        );
    }

    #[test]
    fn a_refused_plan_keeps_the_queue_as_it_is() {
        let none = BTreeSet::new();
        let current = queue(&[OLD], NONE, None, "0");
        let q = desired_queue(
            &it(false),
            None,
            Some(&current),
            false,
            &ChainSettings::default(),
            &none,
        );
        assert_eq!(q.spec.resource_groups, current.spec.resource_groups);
        assert_eq!(q.spec.stop_policy.as_deref(), Some(NONE));
        // A new queue whose first plan is refused waits, held, for a sound one.
        let q = desired_queue(
            &it(false),
            None,
            None,
            false,
            &ChainSettings::default(),
            &none,
        );
        assert!(q.spec.resource_groups.is_empty());
        assert_eq!(q.spec.stop_policy.as_deref(), Some(HOLD));
        assert!(annotation(Some(&q), EMPTY_PLAN_HOLD).is_some());
    }
}
