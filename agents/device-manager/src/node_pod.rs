//! The part of a Pod the node agent reads, decoded alone.
//!
//! The agent watches, lists, reads and annotates the Pods on its node, and of each it needs only
//! the metadata (names, UID, annotations, creation and deletion times), each container's name,
//! environment variable names and limits, and the phase. Decoding k8s-openapi's whole `Pod`
//! instead compiled its decoder (every field of every nested type, once per input kube decodes
//! from) into the agent: about 110,000 of the crate's 922,000 lines of LLVM IR (issue 41). Fields
//! not named here are skipped by the decoder.

use std::collections::BTreeMap;

use k8s_openapi::{NamespaceResourceScope, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use serde::Deserialize;

/// A Pod as the node agent sees it: `v1` `Pod`, through kube's typed `Api` and watcher.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodePod {
    /// The Pod's metadata, whole.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Its containers.
    pub spec: Option<NodePodSpec>,
    /// Its phase.
    pub status: Option<NodePodStatus>,
}

/// A Pod's containers (`spec.containers`).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodePodSpec {
    /// The Pod's containers (not its init containers: the plugins serve the main ones).
    #[serde(default)]
    pub containers: Vec<NodeContainer>,
}

/// One container: what a device plugin matches and renders against.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeContainer {
    /// The container's name.
    pub name: String,
    /// The names of the environment variables it sets (the injection leaves those alone).
    #[serde(default, deserialize_with = "env_names")]
    pub env: Vec<String>,
    /// Its resource limits as the API server writes them, quantities as text (`"2"`, `"10Gi"`).
    #[serde(default, rename = "resources", deserialize_with = "limits")]
    pub limits: BTreeMap<String, String>,
}

/// A Pod's phase (`status.phase`).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodePodStatus {
    /// `Pending`, `Running`, `Succeeded`, `Failed` or `Unknown`.
    pub phase: Option<String>,
}

impl NodePod {
    /// The phase, when the Pod has one.
    pub fn phase(&self) -> Option<&str> {
        self.status.as_ref()?.phase.as_deref()
    }

    /// The container named `name`.
    pub fn container(&self, name: &str) -> Option<&NodeContainer> {
        self.containers().iter().find(|c| c.name == name)
    }

    /// The Pod's containers (none when it has no spec).
    pub fn containers(&self) -> &[NodeContainer] {
        self.spec.as_ref().map_or(&[], |s| &s.containers)
    }
}

/// `env: [{name, value | valueFrom}]` as its names.
fn env_names<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    struct Named {
        name: String,
    }
    let env: Option<Vec<Named>> = Option::deserialize(d)?;
    Ok(env.into_iter().flatten().map(|e| e.name).collect())
}

/// `resources: {limits: {name: quantity}}` as its limits.
fn limits<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    #[derive(Deserialize)]
    struct Resources {
        limits: Option<BTreeMap<String, String>>,
    }
    let resources: Option<Resources> = Option::deserialize(d)?;
    Ok(resources.and_then(|r| r.limits).unwrap_or_default())
}

impl k8s_openapi::Resource for NodePod {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = NamespaceResourceScope;
}

impl k8s_openapi::Metadata for NodePod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use kube::Resource;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pod_decodes_to_what_the_agent_reads() {
        let pod: NodePod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p", "namespace": "ns", "uid": "u-1",
                "creationTimestamp": "2026-12-07T10:00:00Z",
                "annotations": {"a": "b"},
            },
            "spec": {
                "nodeName": "n1",
                "initContainers": [{"name": "init", "image": "i"}],
                "containers": [
                    {
                        "name": "main", "image": "i",
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "resources": {"limits": {"nvidia.com/gpu": "2", "memory": "10Gi"}, "requests": {"cpu": "1"}},
                        "ports": [{"containerPort": 80}],
                    },
                    {"name": "side", "image": "i", "resources": {}},
                ],
                "volumes": [{"name": "v", "emptyDir": {}}],
            },
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]},
        }))
        .unwrap();
        assert_eq!(pod.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(pod.metadata.annotations.as_ref().unwrap()["a"], "b");
        assert!(pod.metadata.creation_timestamp.is_some());
        assert_eq!(pod.phase(), Some("Pending"));
        let names: Vec<&str> = pod.containers().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["main", "side"]);
        let main = pod.container("main").unwrap();
        assert_eq!(main.env, ["A", "B"]);
        assert_eq!(main.limits["nvidia.com/gpu"], "2");
        assert_eq!(main.limits["memory"], "10Gi");
        let side = pod.container("side").unwrap();
        assert!(side.env.is_empty() && side.limits.is_empty());
        assert!(pod.container("init").is_none());
    }

    #[test]
    fn a_pod_without_spec_or_status_decodes_empty() {
        let pod: NodePod = serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap();
        assert!(pod.containers().is_empty());
        assert_eq!(pod.phase(), None);
        let pod: NodePod =
            serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "env": null, "resources": null}]}}))
                .unwrap();
        assert!(pod.container("c").unwrap().limits.is_empty());
    }

    #[test]
    fn a_wrongly_typed_field_it_reads_is_refused() {
        let bad = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"x": []}}}]}});
        assert!(serde_json::from_value::<NodePod>(bad).is_err());
    }

    #[test]
    fn it_addresses_the_core_pods_resource() {
        assert_eq!(
            NodePod::url_path(&(), Some("ns")),
            "/api/v1/namespaces/ns/pods"
        );
        assert_eq!(NodePod::kind(&()), "Pod");
        assert_eq!(NodePod::api_version(&()), "v1");
    }
}
