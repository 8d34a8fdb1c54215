//! The ClusterQueue of an InstanceType (worker.md §2.3): quota from its pool's flavors, the
//! admission checks, and the stop policy that keeps Kueue from admitting what cannot run.

use std::collections::BTreeMap;

use gpustack_api::{
    devices::UNITS_PER_ACCELERATOR,
    instance_type::InstanceType,
    kueue::{
        AdmissionCheckStrategyRule, AdmissionChecksStrategy, BorrowWithinCohort, ClusterQueue,
        ClusterQueueSpec, FlavorFungibility, FlavorQuotas, Preemption, ResourceFlavor,
        ResourceGroup, ResourceQuota,
    },
    labels::{
        ACCELERATABLE_PREFIX, CREDITS_PREFIX, EMPTY_PLAN_HOLD, GENERAL_PREFIX, RESOURCE_TYPE,
    },
};
use k8s_openapi::apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::LabelSelector};
use kube::api::ObjectMeta;

use super::{
    chain_settings::ChainSettings,
    flavors::{matches, pool_labels},
};

pub const NODE_DEVICES_CHECK: &str = "gpustack-node-devices";
pub const NODE_DEVICES_CONTROLLER: &str = "worker.gpustack.ai/node-devices";
pub const JOINT_CHECK: &str = "gpustack-model-deployment-joint";
pub const JOINT_CONTROLLER: &str = "worker.gpustack.ai/model-deployment-joint";

/// Kueue's stop policies.
pub const NONE: &str = "None";
pub const HOLD: &str = "Hold";
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

/// The queue the InstanceType calls for.
pub fn desired_queue(
    it: &InstanceType,
    flavors: &[&ResourceFlavor],
    current: Option<&ClusterQueue>,
    node_devices_active: bool,
    settings: &ChainSettings,
) -> ClusterQueue {
    let name = it.metadata.name.clone().unwrap_or_default();
    let accelerated = it.spec.acceleratable.unwrap_or(false);
    let resource = covered_resource(it);
    let quotas: Vec<FlavorQuotas> = flavors
        .iter()
        .map(|f| {
            let capacity = label_number(f, "capacity");
            let quota = if accelerated {
                capacity * UNITS_PER_ACCELERATOR
            } else {
                capacity
            };
            FlavorQuotas {
                name: f.metadata.name.clone().unwrap_or_default(),
                resources: vec![ResourceQuota {
                    name: resource.clone(),
                    nominal_quota: Quantity(quota.to_string()),
                }],
            }
        })
        .collect();
    let (policy, empty_plan) = stop_policy(it, !quotas.is_empty(), current, settings);
    // A draining queue keeps its plan until what it admitted has left.
    let resource_groups = if quotas.is_empty() && policy == HOLD_AND_DRAIN && reserving(current) > 0
    {
        current
            .map(|c| c.spec.resource_groups.clone())
            .unwrap_or_default()
    } else if quotas.is_empty() {
        Vec::new()
    } else {
        vec![ResourceGroup {
            covered_resources: vec![resource],
            flavors: quotas,
        }]
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
    let annotations =
        empty_plan.then(|| BTreeMap::from([(EMPTY_PLAN_HOLD.to_owned(), "true".to_owned())]));
    ClusterQueue {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            annotations,
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
            stop_policy: Some(policy.to_owned()),
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
    match policy {
        HOLD_AND_DRAIN if reserving(Some(cq)) > 0 => {
            ("Draining", Some("draining: the pool has no nodes".into()))
        }
        HOLD_AND_DRAIN => ("Inactive", Some("held: the pool has no nodes".into())),
        HOLD if cq
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(EMPTY_PLAN_HOLD)) =>
        {
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
