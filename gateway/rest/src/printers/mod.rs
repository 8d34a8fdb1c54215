//! The columns `kubectl get` shows for each built-in kind, as kube-apiserver prints them: each
//! column a name, a type, a priority (1: only with `-o wide`) and a pure function computing its
//! cell from the object. [`columns()`] looks a kind's set up by group and kind; kinds without one
//! get the Age column (see [`crate::table::columns`]). CRDs' columns are JSONPaths from the CRD.
//!
//! - [`core`]: ConfigMap, Secret, ServiceAccount, Namespace, Node, Service, Event,
//!   ResourceQuota; [`pod`]: Pod.
//! - [`workloads`]: Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob,
//!   PodDisruptionBudget.
//! - [`cluster`]: RBAC, CustomResourceDefinition, APIService, webhook configurations,
//!   PriorityClass, Lease, CSIDriver, CSINode, CertificateSigningRequest, Ingress, IngressClass,
//!   NetworkPolicy.
//! - [`endpoints`]: Endpoints, EndpointSlice; [`storage`]: PersistentVolumeClaim,
//!   PersistentVolume.
//! - [`format`](mod@format): field access and the formatting the printers share.

pub mod cluster;
pub mod core;
pub mod endpoints;
pub mod format;
pub mod pod;
pub mod storage;
pub mod workloads;

use crate::columns::{CellFn, PrinterColumn};

/// One column of a built-in kind.
pub struct Col {
    /// The column's header.
    pub name: &'static str,
    /// The OpenAPI type of its cells.
    pub type_: &'static str,
    /// `name` for the column holding the object's name.
    pub format: &'static str,
    /// 0: always shown; 1 and above: only with `-o wide`.
    pub priority: i64,
    /// Computes a cell from the object.
    pub cell: CellFn,
}

/// A column shown by `kubectl get`.
pub const fn col(name: &'static str, type_: &'static str, cell: CellFn) -> Col {
    Col {
        name,
        type_,
        format: "",
        priority: 0,
        cell,
    }
}

/// A column shown only by `kubectl get -o wide`.
pub const fn wide(name: &'static str, type_: &'static str, cell: CellFn) -> Col {
    Col {
        priority: 1,
        ..col(name, type_, cell)
    }
}

/// The `Age` column.
pub const AGE: Col = col("Age", "string", format::age);

/// The columns of kinds kube-apiserver prints with its default table: `Created At`.
pub const CREATED_AT: &[Col] = &[col("Created At", "date", format::created_at)];

/// Built-in kinds' columns after Name, by (group, kind).
const PRINTERS: &[(&str, &str, &[Col])] = &[
    ("", "ConfigMap", core::CONFIG_MAP),
    ("", "Secret", core::SECRET),
    ("", "ServiceAccount", core::SERVICE_ACCOUNT),
    ("", "Namespace", core::NAMESPACE),
    ("", "Node", core::NODE),
    ("", "Service", core::SERVICE),
    ("", "Endpoints", endpoints::ENDPOINTS),
    (
        "",
        "PersistentVolumeClaim",
        storage::PERSISTENT_VOLUME_CLAIM,
    ),
    ("", "PersistentVolume", storage::PERSISTENT_VOLUME),
    ("", "ReplicationController", workloads::REPLICA_SET),
    (
        "discovery.k8s.io",
        "EndpointSlice",
        endpoints::ENDPOINT_SLICE,
    ),
    ("", "Event", core::EVENT),
    ("events.k8s.io", "Event", core::EVENT),
    ("", "ResourceQuota", core::RESOURCE_QUOTA),
    ("", "Pod", pod::POD),
    ("apps", "Deployment", workloads::DEPLOYMENT),
    ("apps", "ReplicaSet", workloads::REPLICA_SET),
    ("apps", "StatefulSet", workloads::STATEFUL_SET),
    ("apps", "DaemonSet", workloads::DAEMON_SET),
    ("batch", "Job", workloads::JOB),
    ("batch", "CronJob", workloads::CRON_JOB),
    (
        "policy",
        "PodDisruptionBudget",
        workloads::POD_DISRUPTION_BUDGET,
    ),
    ("rbac.authorization.k8s.io", "ClusterRole", CREATED_AT),
    ("rbac.authorization.k8s.io", "Role", CREATED_AT),
    (
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        cluster::ROLE_BINDING,
    ),
    (
        "rbac.authorization.k8s.io",
        "RoleBinding",
        cluster::ROLE_BINDING,
    ),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        CREATED_AT,
    ),
    ("apiregistration.k8s.io", "APIService", cluster::API_SERVICE),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        cluster::WEBHOOKS,
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        cluster::WEBHOOKS,
    ),
    (
        "scheduling.k8s.io",
        "PriorityClass",
        cluster::PRIORITY_CLASS,
    ),
    ("coordination.k8s.io", "Lease", cluster::LEASE),
    ("storage.k8s.io", "CSIDriver", cluster::CSI_DRIVER),
    ("storage.k8s.io", "CSINode", cluster::CSI_NODE),
    (
        "certificates.k8s.io",
        "CertificateSigningRequest",
        cluster::CERTIFICATE_SIGNING_REQUEST,
    ),
    ("networking.k8s.io", "Ingress", cluster::INGRESS),
    ("networking.k8s.io", "IngressClass", cluster::INGRESS_CLASS),
    (
        "networking.k8s.io",
        "NetworkPolicy",
        cluster::NETWORK_POLICY,
    ),
];

/// The printer columns of the built-in kind `group`/`kind`, if kube-apiserver has a printer
/// for it. A Name column comes first unless the set places one itself (Events: last, wide).
pub fn columns(group: &str, kind: &str) -> Option<Vec<PrinterColumn>> {
    let (_, _, cols) = PRINTERS
        .iter()
        .find(|(g, k, _)| *g == group && *k == kind)?;
    Some(
        cols.iter()
            .map(|c| PrinterColumn {
                format: c.format.into(),
                ..PrinterColumn::computed(c.name, c.type_, c.priority, c.cell)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_looked_up_by_group_and_kind() {
        let names =
            |g, k| -> Vec<String> { columns(g, k).unwrap().into_iter().map(|c| c.name).collect() };
        assert_eq!(names("", "Secret"), ["Type", "Data", "Age"]);
        assert_eq!(names("events.k8s.io", "Event"), names("", "Event"));
        assert_eq!(names("rbac.authorization.k8s.io", "Role"), ["Created At"]);
        assert!(columns("apps", "Pod").is_none());
        assert!(columns("", "SelfSubjectReview").is_none());
    }

    #[test]
    fn no_kind_is_listed_twice() {
        let mut keys: Vec<_> = PRINTERS.iter().map(|(g, k, _)| (*g, *k)).collect();
        keys.sort_unstable();
        let before = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), before);
    }
}
