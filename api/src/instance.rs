//! `Instance` (`worker.gpustack.ai/v1alpha1`, namespaced): a user's machine carved from a pool
//! (an InstanceType). The worker turns one into a Pod of the same name (and a NodePort Service
//! when it declares ports) queued at the pool's Kueue entrance; field names follow the reference
//! system so manifests carry over.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "worker.gpustack.ai",
    version = "v1alpha1",
    kind = "Instance",
    plural = "instances",
    shortname = "inst",
    category = "gpustack",
    namespaced,
    status = "InstanceStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InstanceSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The InstanceType (pool) the instance is carved from.
    #[serde(rename = "type", default)]
    pub instance_type: String,
    /// The image of the `main` container.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    /// `Always`, `IfNotPresent` (the default) or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// Overrides the image's command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<InstanceEnv>,
    /// Ports reached through a NodePort Service.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<InstancePort>,
    #[serde(default)]
    pub resources: InstanceResources,
    /// Where the workspace volume is mounted (`/workspace` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mount: Option<String>,
    /// The workspace: ephemeral (an emptyDir of this capacity) or a persistent claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<InstanceVolume>,
    /// An `InstanceSSHPublicKey` (a Secret of the same name): adds the `sshd` sidecar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_public_key: Option<LocalReference>,
    /// An `InstanceImagePullSecret` (a Secret of the same name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secret: Option<LocalReference>,
    /// Run the instance's container privileged (allowed only by `instance-privileged-allowed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privileged: Option<bool>,
    /// Host directories mounted in (allowed only by `instance-host-path-volume-allowed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_path_volumes: Vec<HostPathVolume>,
    /// Stopped: its Pod is removed, the object and its workspace claim kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<bool>,
    /// Pins the Pod to this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
}

impl InstanceSpec {
    pub fn stopped(&self) -> bool {
        self.stop == Some(true)
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct InstanceEnv {
    pub name: String,
    #[serde(default)]
    pub value: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstancePort {
    pub port: i32,
    /// `TCP` (the default), `UDP` or `SCTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl InstancePort {
    pub fn protocol(&self) -> &str {
        self.protocol.as_deref().unwrap_or("TCP")
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct LocalReference {
    #[serde(default)]
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct InstanceVolume {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<EphemeralVolume>,
    /// An `InstancePersistentVolume` (a claim of the same name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent: Option<LocalReference>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct EphemeralVolume {
    /// Like `10Gi`.
    pub capacity: String,
}

/// What one instance takes from its pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceResources {
    /// Whole cards; exactly 1 with a slice or a partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<i64>,
    /// A logical slice of one card: its share of the card's memory, (0, 100].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_sliced_memory_percentage: Option<i64>,
    /// The slice's share of the card's cores, (0, 100]; 100 when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_sliced_cores_percentage: Option<i64>,
    /// A hardware partition of one card, by profile (`1g.10gb`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_partitioned_profile: Option<String>,
    /// CPU, like `4` or `1500m`: the units taken of a pool without accelerators; defaulted from
    /// the unit's CPU for an accelerated pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<IntOrString>,
    /// Memory, like `32Gi`; at most the unit's memory times the units taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram: Option<String>,
    /// Local storage, like `50Gi`; at most the pool's `localStorage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_storage: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostPathVolume {
    pub name: String,
    pub path: String,
    pub mount_path: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    /// `Starting`, `Ready`, `Stopping`, `Stopped`, `Deleting`, or the Pod's summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Where users reach the instance (computed on read from the access settings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_addresses: Vec<String>,
    /// The node's addresses, external first.
    #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "hostIPs")]
    pub host_ips: Vec<Ip>,
    #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "podIPs")]
    pub pod_ips: Vec<Ip>,
    /// The declared ports with the node ports they are reached at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<InstanceStatusPort>,
    /// The accelerators the device plugin granted the `main` container (the Pod's
    /// `device.gpustack.ai/accelerator.allocated` annotation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocations: Vec<crate::devices::DevicesStatusGroup>,
}

impl InstanceStatus {
    pub fn phase(&self) -> &str {
        self.phase.as_deref().unwrap_or("")
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Ip {
    pub ip: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatusPort {
    pub port: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_port: Option<i32>,
}
