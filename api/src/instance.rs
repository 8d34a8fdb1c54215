//! `Instance` (`worker.gpustack.ai/v1alpha1`, namespaced): a user's machine carved from a pool
//! (an InstanceType). The worker turns one into a Pod of the same name (and a NodePort Service
//! when it declares ports) queued at the pool's Kueue entrance; field names follow the reference
//! system so manifests carry over.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
#[cfg(feature = "schema")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A workload users run on a pool: one Pod with a slice, partition or whole cards.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[cfg_attr(not(feature = "schema"), kube(schema = "disabled"))]
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
    /// A name for people; the object's name stays the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Free text for people.
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
    /// Environment variables of the `main` container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<InstanceEnv>,
    /// Ports reached through a NodePort Service.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<InstancePort>,
    /// What the instance takes from its pool.
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
    /// Whether `spec.stop` is set.
    pub fn stopped(&self) -> bool {
        self.stop == Some(true)
    }
}

/// One environment variable.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct InstanceEnv {
    /// The variable's name.
    pub name: String,
    /// Its value.
    #[serde(default)]
    pub value: String,
}

/// A port the instance listens on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct InstancePort {
    /// The container port.
    pub port: i32,
    /// `TCP` (the default), `UDP` or `SCTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// A name for the port, unique within the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl InstancePort {
    /// The protocol, `TCP` when not given.
    pub fn protocol(&self) -> &str {
        self.protocol.as_deref().unwrap_or("TCP")
    }
}

/// A reference to an object of the instance's namespace by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct LocalReference {
    /// The object's name.
    #[serde(default)]
    pub name: String,
}

/// The instance's workspace: ephemeral or persistent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct InstanceVolume {
    /// An emptyDir of the given capacity, gone with the Pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<EphemeralVolume>,
    /// An `InstancePersistentVolume` (a claim of the same name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent: Option<LocalReference>,
}

/// A workspace that lives as long as the Pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct EphemeralVolume {
    /// Like `10Gi`.
    pub capacity: String,
}

/// What one instance takes from its pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
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

/// A host directory mounted into the `main` container.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HostPathVolume {
    /// The volume's name, unique within the instance.
    pub name: String,
    /// The directory on the node.
    pub path: String,
    /// Where it appears in the container.
    pub mount_path: String,
}

/// What the worker reports of an instance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    /// `Starting`, `Ready`, `Stopping`, `Stopped`, `Deleting`, or the Pod's summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Why the instance is in its phase, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_message: Option<String>,
    /// The node its Pod runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Where users reach the instance (computed on read from the access settings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_addresses: Vec<String>,
    /// The node's addresses, external first.
    #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "hostIPs")]
    pub host_ips: Vec<Ip>,
    /// The Pod's addresses.
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
    /// The phase, empty before the first status.
    pub fn phase(&self) -> &str {
        self.phase.as_deref().unwrap_or("")
    }
}

/// One address.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct Ip {
    /// An IPv4 or IPv6 address.
    pub ip: String,
}

/// A declared port and where it is reached.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatusPort {
    /// The container port.
    pub port: i32,
    /// `TCP`, `UDP` or `SCTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The port's name, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The node port of its Service, once allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_port: Option<i32>,
}
