//! What image mode keeps installed, decided from plain values: which applications
//! `--disable-applications` leaves enabled, which manufacturers' device managers the cluster's
//! nodes call for, which objects follow, and which of the objects found are the worker's to
//! prune. Objects a Helm release owns are never the worker's: neither patched nor deleted.

use std::collections::{BTreeMap, BTreeSet};

use gpustack_api::Manufacturer;
use kube::api::ObjectMeta;

use super::objects::{self, Input};
use crate::install::Desired;

/// The applications `--disable-applications` names (the reference's seven less `*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Application {
    /// Kueue, the queueing and admission of workloads.
    Kueue,
    /// Node Feature Discovery, the nodes' CPU labels.
    NodeFeatureDiscovery,
    /// The NFS CSI driver, for model stores on NFS.
    CsiDriverNfs,
    /// The S3 CSI driver, for model stores on S3.
    CsiDriverS3,
    /// The device manager, this binary's per-node accelerator agent.
    DeviceManager,
    /// The model manager, this binary's per-node model CSI plugin.
    ModelManager,
}

impl Application {
    /// Every application.
    pub const ALL: [Application; 6] = [
        Application::Kueue,
        Application::NodeFeatureDiscovery,
        Application::CsiDriverNfs,
        Application::CsiDriverS3,
        Application::DeviceManager,
        Application::ModelManager,
    ];

    /// The name `--disable-applications` takes.
    pub fn name(self) -> &'static str {
        match self {
            Application::Kueue => "kueue",
            Application::NodeFeatureDiscovery => "node-feature-discovery",
            Application::CsiDriverNfs => "csi-driver-nfs",
            Application::CsiDriverS3 => "csi-driver-s3",
            Application::DeviceManager => "device-manager",
            Application::ModelManager => "model-manager",
        }
    }

    /// The name in PascalCase, for Event reasons (`KueueMissing`).
    pub fn pascal(self) -> &'static str {
        match self {
            Application::Kueue => "Kueue",
            Application::NodeFeatureDiscovery => "NodeFeatureDiscovery",
            Application::CsiDriverNfs => "CsiDriverNfs",
            Application::CsiDriverS3 => "CsiDriverS3",
            Application::DeviceManager => "DeviceManager",
            Application::ModelManager => "ModelManager",
        }
    }
}

/// The applications `disabled` (the flag's values: `*` or names) leaves enabled.
pub fn enabled(disabled: &[String]) -> BTreeSet<Application> {
    if disabled.iter().any(|d| d.trim() == "*") {
        return BTreeSet::new();
    }
    Application::ALL
        .into_iter()
        .filter(|a| !disabled.iter().any(|d| d.trim() == a.name()))
        .collect()
}

/// The manufacturers among `configured` with at least one node that NFD labels with their
/// PCI vendor (`feature.node.kubernetes.io/pci-<vendor>.present=true`), in table order. A
/// manufacturer with no such node gets no DaemonSet: its selector would match nothing.
pub fn manufacturers_present<'a>(
    configured: &[Manufacturer],
    node_labels: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
) -> Vec<Manufacturer> {
    let labels: Vec<&BTreeMap<String, String>> = node_labels.into_iter().collect();
    let mut out: Vec<Manufacturer> = configured
        .iter()
        .copied()
        .filter(|m| {
            let key = objects::nfd_pci_label(*m);
            labels
                .iter()
                .any(|l| l.get(&key).is_some_and(|v| v == "true"))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The objects to keep applied.
pub fn desired(
    input: &Input,
    enabled: &BTreeSet<Application>,
    present: &[Manufacturer],
) -> Vec<Desired> {
    let mut out = Vec::new();
    if enabled.contains(&Application::DeviceManager) {
        out.extend(objects::device_manager(input, present));
    }
    if enabled.contains(&Application::ModelManager) {
        out.extend(objects::model_manager(input));
    }
    out
}

/// Whether a Helm release owns the object: its annotation `meta.helm.sh/release-name` or its
/// label `app.kubernetes.io/managed-by=Helm`.
pub fn owned_by_helm(meta: &ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("meta.helm.sh/release-name"))
        || meta
            .labels
            .as_ref()
            .and_then(|l| l.get("app.kubernetes.io/managed-by"))
            .is_some_and(|v| v == "Helm")
}

/// Whether the worker applied the object (its `managed-by` label).
pub fn applied_by_worker(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get("app.kubernetes.io/managed-by"))
        .is_some_and(|v| v == objects::MANAGED_BY)
}

/// An object found in the cluster: its kind, namespace and metadata.
#[derive(Clone, Debug)]
pub struct Found {
    /// The object's kind.
    pub kind: String,
    /// The object's metadata.
    pub meta: ObjectMeta,
}

/// Which of `found` to delete: the worker's own that are no longer desired. A Helm release's,
/// someone else's, or one already being deleted is left alone.
pub fn to_prune<'a>(found: &'a [Found], desired: &[Desired]) -> Vec<&'a Found> {
    let wanted: BTreeSet<(&str, Option<&str>, &str)> = desired
        .iter()
        .map(|d| (d.resource.kind.as_str(), d.namespace.as_deref(), d.name()))
        .collect();
    found
        .iter()
        .filter(|f| applied_by_worker(&f.meta) && !owned_by_helm(&f.meta))
        .filter(|f| f.meta.deletion_timestamp.is_none())
        .filter(|f| {
            let key = (
                f.kind.as_str(),
                f.meta.namespace.as_deref(),
                f.meta.name.as_deref().unwrap_or(""),
            );
            !wanted.contains(&key)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_flag_disables_by_name_or_all() {
        assert_eq!(enabled(&[]), Application::ALL.into_iter().collect());
        assert!(enabled(&strings(&["*"])).is_empty());
        assert!(enabled(&strings(&["kueue", "*"])).is_empty());
        let e = enabled(&strings(&["device-manager", "kueue"]));
        assert!(!e.contains(&Application::DeviceManager));
        assert!(!e.contains(&Application::Kueue));
        assert!(e.contains(&Application::ModelManager));
        assert_eq!(e.len(), 4);
    }

    fn node(labels: &[(&str, &str)]) -> BTreeMap<String, String> {
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn manufacturers_are_the_configured_ones_found_on_nodes() {
        let nodes = [
            node(&[("feature.node.kubernetes.io/pci-10de.present", "true")]),
            node(&[("feature.node.kubernetes.io/pci-10de.present", "true")]),
            node(&[("feature.node.kubernetes.io/pci-1002.present", "false")]),
            node(&[("feature.node.kubernetes.io/pci-19e5.present", "true")]),
            node(&[]),
        ];
        assert_eq!(
            manufacturers_present(&Manufacturer::ALL, &nodes),
            [Manufacturer::Ascend, Manufacturer::Nvidia]
        );
        // Only those the worker handles (--manufacturer).
        assert_eq!(
            manufacturers_present(&[Manufacturer::Nvidia, Manufacturer::Amd], &nodes),
            [Manufacturer::Nvidia]
        );
        assert!(manufacturers_present(&Manufacturer::ALL, &[]).is_empty());
    }

    fn kinds_and_names(objs: &[Desired]) -> Vec<String> {
        objs.iter().map(Desired::describe).collect()
    }

    #[test]
    fn objects_follow_the_enabled_applications_and_the_nodes() {
        let input = Input::new("ns", "img:1");
        let all = enabled(&[]);
        let objs = desired(&input, &all, &[Manufacturer::Nvidia]);
        let names = kinds_and_names(&objs);
        assert!(names.contains(&"DaemonSet ns/gpustack-operator-device-manager-nvidia".into()));
        assert!(names.contains(&"DaemonSet ns/gpustack-operator-model-manager".into()));
        assert!(names.contains(&"CSIDriver model.csi.gpustack.ai".into()));
        // No manufacturer on any node: the model manager only.
        let objs = desired(&input, &all, &[]);
        assert!(objs.iter().all(|d| !d.name().contains("device-manager")));
        assert!(!objs.is_empty());
        // Device manager disabled.
        let objs = desired(
            &input,
            &enabled(&strings(&["device-manager"])),
            &[Manufacturer::Nvidia],
        );
        assert!(objs.iter().all(|d| !d.name().contains("device-manager")));
        // Everything disabled.
        assert!(desired(&input, &enabled(&strings(&["*"])), &[Manufacturer::Nvidia]).is_empty());
    }

    fn found(kind: &str, ns: Option<&str>, name: &str, labels: &[(&str, &str)]) -> Found {
        Found {
            kind: kind.into(),
            meta: ObjectMeta {
                name: Some(name.into()),
                namespace: ns.map(Into::into),
                labels: Some(node(labels)),
                ..ObjectMeta::default()
            },
        }
    }

    #[test]
    fn helm_owns_by_annotation_or_label() {
        let mut meta = ObjectMeta::default();
        assert!(!owned_by_helm(&meta));
        meta.annotations = Some(node(&[("meta.helm.sh/release-name", "x")]));
        assert!(owned_by_helm(&meta));
        let meta = ObjectMeta {
            labels: Some(node(&[("app.kubernetes.io/managed-by", "Helm")])),
            ..ObjectMeta::default()
        };
        assert!(owned_by_helm(&meta));
    }

    #[test]
    fn prune_only_the_workers_own_that_are_not_wanted() {
        let ours = [("app.kubernetes.io/managed-by", objects::MANAGED_BY)];
        let input = Input::new("ns", "img:1");
        let want = desired(&input, &enabled(&[]), &[Manufacturer::Nvidia]);
        let mut helm = found(
            "DaemonSet",
            Some("ns"),
            "gpustack-operator-device-manager-amd",
            &ours,
        );
        helm.meta.annotations = Some(node(&[("meta.helm.sh/release-name", "gpustack-operator")]));
        let mut terminating = found(
            "DaemonSet",
            Some("ns"),
            "gpustack-operator-device-manager-thead",
            &ours,
        );
        terminating.meta.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        let all = vec![
            found(
                "DaemonSet",
                Some("ns"),
                "gpustack-operator-device-manager-nvidia",
                &ours,
            ),
            found(
                "DaemonSet",
                Some("ns"),
                "gpustack-operator-device-manager-amd",
                &ours,
            ),
            found("DaemonSet", Some("ns"), "someone-elses", &[]),
            found("CSIDriver", None, "model.csi.gpustack.ai", &ours),
            helm,
            terminating,
        ];
        let pruned: Vec<&str> = to_prune(&all, &want)
            .iter()
            .map(|f| f.meta.name.as_deref().unwrap())
            .collect();
        assert_eq!(pruned, ["gpustack-operator-device-manager-amd"]);
        // Nothing wanted any more: all of the worker's own go, the others stay.
        let pruned = to_prune(&all, &[]);
        assert_eq!(pruned.len(), 3);
    }
}
