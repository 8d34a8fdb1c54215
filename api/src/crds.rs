//! The CustomResourceDefinitions generated from the types, as committed under `deploy/crds/`
//! (and the Kueue kinds' under `deploy/kueue-crds/`).
//!
//! The types generate the CRDs only with the `schema` feature (which compiles k8s-openapi's
//! schemas, a third of its build): the binaries install the committed manifests, and the
//! tests, which turn the feature on, check that those are what the types generate.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// A committed manifest: its file name and text.
type Manifest = (&'static str, &'static str);

/// The named manifests under `deploy/<dir>/`, compiled in, each with its file name.
macro_rules! manifests {
    ($dir:literal: $($name:literal),+ $(,)?) => {
        &[$(($name, include_str!(concat!("../../deploy/", $dir, "/", $name)))),+]
    };
}

/// The operator's own CRDs, as committed under `deploy/crds/`.
const OWN: &[Manifest] = manifests!("crds":
    "devices.worker.gpustack.ai.yaml",
    "instancetypes.worker.gpustack.ai.yaml",
    "instances.worker.gpustack.ai.yaml",
    "modelartifacts.worker.gpustack.ai.yaml",
    "nodemodelstores.worker.gpustack.ai.yaml",
    "topologysources.worker.gpustack.ai.yaml",
);

/// The Kueue kinds' CRDs, as committed under `deploy/kueue-crds/`.
const KUEUE: &[Manifest] = manifests!("kueue-crds":
    "resourceflavors.kueue.x-k8s.io.yaml",
    "clusterqueues.kueue.x-k8s.io.yaml",
    "localqueues.kueue.x-k8s.io.yaml",
    "admissionchecks.kueue.x-k8s.io.yaml",
    "topologies.kueue.x-k8s.io.yaml",
    "workloads.kueue.x-k8s.io.yaml",
);

/// Every CRD the operator installs, in a stable order.
pub fn all() -> Vec<CustomResourceDefinition> {
    parsed(OWN)
}

/// The Kueue kinds the worker uses, for clusters where Kueue is not installed (embedded
/// clusters and tests); never installed over a real Kueue.
pub fn kueue() -> Vec<CustomResourceDefinition> {
    parsed(KUEUE)
}

/// The operator's own CRD of resource `plural` (`devices`, `instances`, ...), the only
/// manifest read.
pub fn own(plural: &str) -> Option<CustomResourceDefinition> {
    let file = format!("{plural}.{}.yaml", crate::labels::WORKER_GROUP);
    OWN.iter().find(|(name, _)| *name == file).map(read)
}

fn parsed(manifests: &[Manifest]) -> Vec<CustomResourceDefinition> {
    manifests.iter().map(read).collect()
}

fn read((name, text): &Manifest) -> CustomResourceDefinition {
    // Compiled in and checked by the tests (`tests/crd_manifests.rs`): a manifest that does
    // not parse is a broken build, not a condition to handle.
    serde_yaml_ng::from_str(text)
        .unwrap_or_else(|e| panic!("the committed CRD manifest {name} does not parse: {e}"))
}

/// The CRDs as the types generate them, which the committed manifests must equal.
#[cfg(feature = "schema")]
pub mod generated {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::CustomResourceExt;

    use crate::{
        devices::Devices, instance::Instance, instance_type::InstanceType,
        model_artifact::ModelArtifact, model_store::NodeModelStore,
        topology_source::TopologySource,
    };

    /// What [`super::all`] must be.
    pub fn all() -> Vec<CustomResourceDefinition> {
        vec![
            Devices::crd(),
            InstanceType::crd(),
            Instance::crd(),
            ModelArtifact::crd(),
            NodeModelStore::crd(),
            TopologySource::crd(),
        ]
    }

    /// What [`super::kueue`] must be.
    pub fn kueue() -> Vec<CustomResourceDefinition> {
        use crate::kueue::*;
        vec![
            ResourceFlavor::crd(),
            ClusterQueue::crd(),
            LocalQueue::crd(),
            AdmissionCheck::crd(),
            Topology::crd(),
            Workload::crd(),
        ]
    }
}

/// The manifest file name of a CRD: `<plural>.<group>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}

/// The manifest text of a CRD, as committed.
pub fn manifest(crd: &CustomResourceDefinition) -> String {
    let body = crate::yaml::to_string(crd).expect("a CRD always serializes");
    format!("# Generated from the gpustack-api types; do not edit.\n{body}")
}
