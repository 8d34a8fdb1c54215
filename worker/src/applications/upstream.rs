//! Kueue, Node Feature Discovery and the NFS and S3 CSI drivers come from their own upstream
//! charts, never from the worker. Where one is enabled but missing, the worker names what to
//! install. How each is recognised:
//!
//! - Kueue: a webhook configuration with a webhook on `kueue.x-k8s.io` `clusterqueues` (Kueue's
//!   controller serves it). Not its CRDs: on an embedded cluster the worker brings those itself,
//!   and they stay behind an uninstall.
//! - NFD: CRD `nodefeatures.nfd.k8s-sigs.io` (NFD's chart ships it in `crds/`).
//! - NFS / S3: a CSIDriver of the driver's name, the operator's (`nfs.csi.gpustack.ai`,
//!   `s3.csi.gpustack.ai`) or the upstream chart's default (`nfs.csi.k8s.io`,
//!   `ru.yandex.s3.csi`).
//!
//! The versions are the chart's dependencies (`deploy/chart/gpustack-operator/Chart.yaml`; a
//! test keeps them equal).

use std::collections::BTreeSet;

use serde_json::Value;

use super::plan::Application;

/// The Kueue release the worker expects.
pub const KUEUE_VERSION: &str = "0.18.10";
/// The Node Feature Discovery release the worker expects.
pub const NFD_VERSION: &str = "0.19.0";
/// The NFS CSI driver release the worker expects.
pub const CSI_NFS_VERSION: &str = "4.13.4";
/// The S3 CSI driver release the worker expects.
pub const CSI_S3_VERSION: &str = "0.43.7";

/// The CRD whose presence shows Node Feature Discovery is installed.
pub const NFD_CRD: &str = "nodefeatures.nfd.k8s-sigs.io";
/// CSIDriver names that show an NFS driver is installed.
pub const NFS_DRIVERS: [&str; 2] = ["nfs.csi.gpustack.ai", "nfs.csi.k8s.io"];
/// CSIDriver names that show an S3 driver is installed.
pub const S3_DRIVERS: [&str; 2] = ["s3.csi.gpustack.ai", "ru.yandex.s3.csi"];

/// The applications from upstream charts.
pub const UPSTREAM: [Application; 4] = [
    Application::Kueue,
    Application::NodeFeatureDiscovery,
    Application::CsiDriverNfs,
    Application::CsiDriverS3,
];

/// What the cluster was seen to hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Some webhook configuration serves Kueue's ClusterQueues.
    pub kueue_webhook: bool,
    /// Node Feature Discovery's CRD is present.
    pub nfd_crd: bool,
    /// The names of the cluster's CSIDrivers.
    pub csi_drivers: BTreeSet<String>,
}

/// Whether any of `configurations` (webhook configuration objects, as JSON) has a webhook on
/// Kueue's ClusterQueues.
pub fn serves_kueue(configurations: &[Value]) -> bool {
    configurations.iter().any(|c| {
        c["webhooks"].as_array().into_iter().flatten().any(|w| {
            w["rules"].as_array().into_iter().flatten().any(|r| {
                let has = |field: &str, want: &str| {
                    r[field]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|v| v == want || v == "*")
                };
                has("apiGroups", "kueue.x-k8s.io") && has("resources", "clusterqueues")
            })
        })
    })
}

/// One enabled application that the cluster lacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    /// The application missing.
    pub application: Application,
    /// What was looked for and not found.
    pub looked_for: String,
    /// The command that installs it.
    pub install: String,
}

impl Missing {
    /// The one line that says it (conditions, Events, `/readyz`).
    pub fn message(&self) -> String {
        format!(
            "{} is enabled but not installed ({} not found): install it with `{}`, or pass --disable-applications={}",
            self.application.name(),
            self.looked_for,
            self.install,
            self.application.name()
        )
    }
}

/// The upstream command that installs `app` at the chart's pinned version.
pub fn install_command(app: Application) -> String {
    match app {
        Application::Kueue => format!(
            "helm install kueue oci://registry.k8s.io/kueue/charts/kueue --version {KUEUE_VERSION} -n kueue-system --create-namespace"
        ),
        Application::NodeFeatureDiscovery => format!(
            "helm install node-feature-discovery node-feature-discovery --repo https://kubernetes-sigs.github.io/node-feature-discovery/charts --version {NFD_VERSION} -n node-feature-discovery --create-namespace"
        ),
        Application::CsiDriverNfs => format!(
            "helm install csi-driver-nfs csi-driver-nfs --repo https://raw.githubusercontent.com/kubernetes-csi/csi-driver-nfs/master/charts --version {CSI_NFS_VERSION} -n kube-system --set driver.name=nfs.csi.gpustack.ai"
        ),
        Application::CsiDriverS3 => format!(
            "helm install csi-driver-s3 csi-s3 --repo https://yandex-cloud.github.io/k8s-csi-s3/charts --version {CSI_S3_VERSION} -n kube-system"
        ),
        Application::DeviceManager | Application::ModelManager => String::new(),
    }
}

/// The condition the worker writes on its own Pod.
pub const POD_CONDITION: &str = "gpustack.ai/ApplicationsAvailable";

/// What [`POD_CONDITION`] says for `missing`: status, reason and message.
pub fn pod_condition(missing: &[Missing]) -> (&'static str, &'static str, String) {
    if missing.is_empty() {
        return (
            "True",
            "AllPresent",
            "every enabled upstream application is installed".into(),
        );
    }
    let message = missing
        .iter()
        .map(Missing::message)
        .collect::<Vec<_>>()
        .join("; ");
    ("False", "ApplicationsMissing", message)
}

/// The enabled upstream applications that `observed` lacks, in [`UPSTREAM`] order.
pub fn missing(enabled: &BTreeSet<Application>, observed: &Observed) -> Vec<Missing> {
    let has_driver = |names: &[&str]| names.iter().any(|n| observed.csi_drivers.contains(*n));
    UPSTREAM
        .into_iter()
        .filter(|a| enabled.contains(a))
        .filter_map(|a| {
            let (present, looked_for) = match a {
                Application::Kueue => (
                    observed.kueue_webhook,
                    "a webhook on kueue.x-k8s.io clusterqueues".to_owned(),
                ),
                Application::NodeFeatureDiscovery => (
                    observed.nfd_crd,
                    format!("CustomResourceDefinition {NFD_CRD}"),
                ),
                Application::CsiDriverNfs => (
                    has_driver(&NFS_DRIVERS),
                    format!("CSIDriver {}", NFS_DRIVERS.join(" or ")),
                ),
                Application::CsiDriverS3 => (
                    has_driver(&S3_DRIVERS),
                    format!("CSIDriver {}", S3_DRIVERS.join(" or ")),
                ),
                Application::DeviceManager | Application::ModelManager => return None,
            };
            (!present).then(|| Missing {
                application: a,
                looked_for,
                install: install_command(a),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::applications::plan;

    #[test]
    fn kueue_is_its_webhook_not_its_crds() {
        let kueue = json!({"webhooks": [{"name": "vclusterqueue.kb.io", "rules": [
            {"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["v1beta2"], "resources": ["clusterqueues"], "operations": ["CREATE"]}
        ]}]});
        // The worker's own Workload webhook is not Kueue.
        let ours = json!({"webhooks": [{"name": "w", "rules": [
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"]}
        ]}]});
        assert!(serves_kueue(&[ours.clone(), kueue]));
        assert!(!serves_kueue(&[ours]));
        assert!(!serves_kueue(&[]));
    }

    #[test]
    fn what_is_missing_names_its_install() {
        let all = plan::enabled(&[]);
        let m = missing(&all, &Observed::default());
        let apps: Vec<_> = m.iter().map(|m| m.application).collect();
        assert_eq!(apps, UPSTREAM);
        assert!(m[0].message().contains(
            "helm install kueue oci://registry.k8s.io/kueue/charts/kueue --version 0.18.10"
        ));
        assert!(m[1].message().contains(NFD_CRD));
        // Present, or disabled: not reported.
        let observed = Observed {
            kueue_webhook: true,
            nfd_crd: true,
            csi_drivers: ["nfs.csi.k8s.io".to_owned()].into(),
        };
        let m = missing(&all, &observed);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].application, Application::CsiDriverS3);
        let m = missing(&plan::enabled(&["csi-driver-s3".into()]), &observed);
        assert!(m.is_empty());
        assert!(missing(&plan::enabled(&["*".into()]), &Observed::default()).is_empty());
    }

    #[test]
    fn the_pod_condition_lists_what_is_missing() {
        let (status, reason, _) = pod_condition(&[]);
        assert_eq!((status, reason), ("True", "AllPresent"));
        let m = missing(&plan::enabled(&[]), &Observed::default());
        let (status, reason, message) = pod_condition(&m);
        assert_eq!((status, reason), ("False", "ApplicationsMissing"));
        assert!(message.starts_with("kueue is enabled but not installed"));
        assert!(message.contains("; csi-driver-s3 is enabled"));
    }
}
