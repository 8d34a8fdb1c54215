//! The Kueue kinds (`kueue.x-k8s.io/v1beta2`) the worker reads and writes, with only the fields
//! it uses. Kueue's own controller does not run beside the worker in tests or on embedded
//! clusters, so these types also generate the CRDs those clusters serve. Field names and
//! meanings are Kueue's public API; unknown fields of a real Kueue install are ignored on read
//! and never written (the worker applies only the fields it owns).

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{PodTemplateSpec, Taint, Toleration},
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{Condition, LabelSelector, Time},
    },
};
use kube::CustomResource;
#[cfg(feature = "schema")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of Kueue's kinds.
pub const GROUP: &str = "kueue.x-k8s.io";
/// The Kueue API version the worker speaks.
pub const VERSION: &str = "v1beta2";
/// The label a Pod or Workload names its LocalQueue with.
pub const QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// Hardware identity of a set of nodes: the labels that select them.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[cfg_attr(not(feature = "schema"), kube(schema = "disabled"))]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "ResourceFlavor",
    plural = "resourceflavors",
    shortname = "rf",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFlavorSpec {
    /// Labels a node must carry to supply this flavor; Kueue adds them to admitted Pods' node selectors.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_labels: BTreeMap<String, String>,
    /// Taints the flavor's nodes carry; a Workload must tolerate them to be assigned the flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_taints: Vec<Taint>,
    /// Tolerations Kueue adds to the Pods it admits on this flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// The Topology whose levels topology-aware scheduling uses on this flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_name: Option<String>,
}

/// A pool of quota over flavors.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[cfg_attr(not(feature = "schema"), kube(schema = "disabled"))]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "ClusterQueue",
    plural = "clusterqueues",
    shortname = "cq",
    status = "ClusterQueueStatus",
    printcolumn = r#"{"name":"Cohort","type":"string","jsonPath":".spec.cohortName"}"#,
    printcolumn = r#"{"name":"Stop Policy","type":"string","priority":1,"jsonPath":".spec.stopPolicy"}"#,
    printcolumn = r#"{"name":"Pending Workloads","type":"integer","jsonPath":".status.pendingWorkloads"}"#,
    printcolumn = r#"{"name":"Admitted Workloads","type":"integer","priority":1,"jsonPath":".status.admittedWorkloads"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueSpec {
    /// The quota, as groups of resources covered together by the same flavors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_groups: Vec<ResourceGroup>,
    /// The cohort this queue borrows from and lends to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort_name: Option<String>,
    /// The namespaces whose LocalQueues may point at this queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Whether to try the next flavor before borrowing or preempting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor_fungibility: Option<FlavorFungibility>,
    /// When pending Workloads may preempt admitted ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<Preemption>,
    /// The admission checks Workloads must pass, optionally per flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_checks_strategy: Option<AdmissionChecksStrategy>,
    /// `None`, `Hold` or `HoldAndDrain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_policy: Option<String>,
}

/// Resources whose quota is given together, over the same list of flavors.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroup {
    /// The resource names (`cpu`, `memory`, device resources) this group gives quota for.
    pub covered_resources: Vec<String>,
    /// The flavors tried in order, each with its quota of the covered resources.
    pub flavors: Vec<FlavorQuotas>,
}

/// One flavor's quota within a resource group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FlavorQuotas {
    /// The ResourceFlavor's name.
    pub name: String,
    /// The quota of each covered resource on this flavor.
    pub resources: Vec<ResourceQuota>,
}

/// The quota of one resource on one flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuota {
    /// The resource name.
    pub name: String,
    /// How much of it admitted Workloads may use without borrowing.
    pub nominal_quota: Quantity,
}

/// Kueue's flavor fungibility: what to do when the current flavor would need borrowing or preemption.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FlavorFungibility {
    /// `Borrow` or `TryNextFlavor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_can_borrow: Option<String>,
    /// `Preempt` or `TryNextFlavor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_can_preempt: Option<String>,
}

/// When a pending Workload may preempt admitted ones.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Preemption {
    /// `Never`, `LowerPriority` or `Any`: reclaiming quota lent to the cohort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_within_cohort: Option<String>,
    /// Preemption within the cohort while borrowing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrow_within_cohort: Option<BorrowWithinCohort>,
    /// `Never`, `LowerPriority` or `LowerOrNewerEqualPriority`: preemption inside this queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_cluster_queue: Option<String>,
}

/// Preemption within the cohort while borrowing.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct BorrowWithinCohort {
    /// `Never` or `LowerPriority`.
    pub policy: String,
}

/// The admission checks a ClusterQueue's Workloads must pass.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AdmissionChecksStrategy {
    /// One rule per AdmissionCheck.
    #[serde(default)]
    pub admission_checks: Vec<AdmissionCheckStrategyRule>,
}

/// One AdmissionCheck required by a ClusterQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckStrategyRule {
    /// The AdmissionCheck's name.
    pub name: String,
    /// The flavors the check applies to; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_flavors: Vec<String>,
}

/// What Kueue reports of a ClusterQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueStatus {
    /// Kueue's `Active`, and the worker's `TopologyReady` (whether the flavor plan was accepted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])))]
    pub conditions: Vec<Condition>,
    /// Workloads waiting for quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_workloads: Option<i32>,
    /// Workloads holding reserved quota, admitted or awaiting checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserving_workloads: Option<i32>,
    /// Workloads admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admitted_workloads: Option<i32>,
    /// Quota reserved per flavor (admitted or awaiting checks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_reservation: Vec<FlavorUsage>,
    /// Quota used per flavor by admitted Workloads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_usage: Vec<FlavorUsage>,
}

/// Quota use of one flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FlavorUsage {
    /// The ResourceFlavor's name.
    pub name: String,
    /// Use per resource on this flavor.
    #[serde(default)]
    pub resources: Vec<ResourceUsage>,
}

/// Use of one resource on one flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourceUsage {
    /// The resource name.
    pub name: String,
    /// The amount in use, borrowed included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<Quantity>,
    /// The part of `total` borrowed from the cohort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowed: Option<Quantity>,
}

/// A namespace's door to a ClusterQueue.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[cfg_attr(not(feature = "schema"), kube(schema = "disabled"))]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "LocalQueue",
    plural = "localqueues",
    shortname = "lq",
    namespaced,
    status = "LocalQueueStatus",
    printcolumn = r#"{"name":"ClusterQueue","type":"string","jsonPath":".spec.clusterQueue"}"#,
    printcolumn = r#"{"name":"Pending Workloads","type":"integer","jsonPath":".status.pendingWorkloads"}"#,
    printcolumn = r#"{"name":"Admitted Workloads","type":"integer","jsonPath":".status.admittedWorkloads"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueSpec {
    /// The ClusterQueue this LocalQueue submits to.
    pub cluster_queue: String,
    /// `None`, `Hold` or `HoldAndDrain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_policy: Option<String>,
}

/// What Kueue reports of a LocalQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueStatus {
    /// Workloads of this queue waiting for quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_workloads: Option<i32>,
    /// Workloads of this queue admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admitted_workloads: Option<i32>,
}

/// A check a Workload must pass before admission; its controller answers on the Workload.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[cfg_attr(not(feature = "schema"), kube(schema = "disabled"))]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "AdmissionCheck",
    plural = "admissionchecks",
    status = "AdmissionCheckStatus",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckSpec {
    /// The controller that answers this check on Workloads (the worker's for its checks).
    pub controller_name: String,
}

/// What the check's controller reports of it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckStatus {
    /// `Active` when the controller is running and the check can be evaluated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The node label hierarchy of topology-aware scheduling, outermost first.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[cfg_attr(not(feature = "schema"), kube(schema = "disabled"))]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "Topology",
    plural = "topologies",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpec {
    /// The levels, outermost (e.g. block) to innermost (e.g. hostname).
    pub levels: Vec<TopologyLevel>,
}

/// One level of a Topology.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TopologyLevel {
    /// The node label whose values name the domains of this level.
    pub node_label: String,
}

/// A unit of admission: the Pods of one job, with what Kueue decided for them.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[cfg_attr(not(feature = "schema"), kube(schema = "disabled"))]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "Workload",
    plural = "workloads",
    shortname = "wl",
    namespaced,
    status = "WorkloadStatus",
    printcolumn = r#"{"name":"Queue","type":"string","jsonPath":".spec.queueName"}"#,
    printcolumn = r#"{"name":"Reserved in","type":"string","jsonPath":".status.admission.clusterQueue"}"#,
    printcolumn = r#"{"name":"Admitted","type":"string","jsonPath":".status.conditions[?(@.type=='Admitted')].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// The groups of identical Pods the Workload runs.
    #[serde(default)]
    pub pod_sets: Vec<PodSet>,
    /// The LocalQueue the Workload was submitted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_name: Option<String>,
}

/// A group of identical Pods of a Workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    /// The group's name, unique within the Workload (`main` for a single Pod).
    pub name: String,
    /// How many Pods the group runs.
    #[serde(default = "one")]
    pub count: i32,
    /// The Pods' template, whose requests are charged against quota.
    pub template: PodTemplateSpec,
}

fn one() -> i32 {
    1
}

/// What Kueue decided for a Workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    /// `QuotaReserved`, `Admitted`, `Evicted`, `Finished` and the others Kueue sets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The queue and flavors the Workload was admitted with, once quota is reserved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    /// The verdict of each admission check the queue requires.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])))]
    pub admission_checks: Vec<AdmissionCheckState>,
}

/// Where a Workload was admitted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// The ClusterQueue whose quota it holds.
    pub cluster_queue: String,
    /// The flavors assigned to each Pod group.
    #[serde(default)]
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

/// The flavors assigned to one Pod group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    /// The Pod group's name.
    pub name: String,
    /// Resource name to the flavor it was assigned.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flavors: BTreeMap<String, String>,
    /// How many of the group's Pods the assignment covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    /// Where topology-aware scheduling placed the Pods, when the flavor has a Topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_assignment: Option<TopologyAssignment>,
}

/// Where topology-aware scheduling put the Pods: per domain, its label values (one per level)
/// and how many Pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignment {
    /// The Topology's level labels the domains' values refer to.
    pub levels: Vec<String>,
    /// Each domain the Pods were placed in.
    #[serde(default)]
    pub domains: Vec<TopologyDomainAssignment>,
}

/// One topology domain and how many Pods it received.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TopologyDomainAssignment {
    /// The domain's label values, one per level.
    pub values: Vec<String>,
    /// Pods placed in this domain.
    pub count: i32,
}

/// One admission check's verdict on a Workload: `Pending`, `Ready`, `Retry` or `Rejected`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckState {
    /// The AdmissionCheck's name.
    pub name: String,
    /// `Pending`, `Ready`, `Retry` or `Rejected`.
    pub state: String,
    /// When the state last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Why the check is in this state, for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl Workload {
    /// Whether Kueue has reserved quota for it (the `QuotaReserved` condition is true).
    pub fn quota_reserved(&self) -> bool {
        self.condition_true("QuotaReserved")
    }

    /// Whether it has been evicted (the `Evicted` condition is true).
    pub fn evicted(&self) -> bool {
        self.condition_true("Evicted")
    }

    fn condition_true(&self, kind: &str) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == kind && c.status == "True")
        })
    }
}
