//! The CustomResourceDefinitions generated from the types, as committed under `deploy/crds/`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{
    devices::Devices, instance::Instance, instance_type::InstanceType,
    model_artifact::ModelArtifact, model_store::NodeModelStore, topology_source::TopologySource,
};

/// Every CRD the operator installs, in a stable order.
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

/// The Kueue kinds the worker uses, for clusters where Kueue is not installed (embedded
/// clusters and tests); never installed over a real Kueue.
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

/// The manifest file name of a CRD: `<plural>.<group>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}

/// The manifest text of a CRD, as committed.
pub fn manifest(crd: &CustomResourceDefinition) -> String {
    let body = crate::yaml::to_string(crd).expect("a CRD always serializes");
    format!("# Generated from the gpustack-api types; do not edit.\n{body}")
}
