//! Label, annotation and resource-name keys shared by the components.

/// Marks nodes (and the objects that follow them) the operator manages.
pub const MANAGED: &str = "gpustack.ai/managed";
/// On every object of the gateway's fleet view: the upstream cluster it came from.
pub const CLUSTER: &str = "gpustack.ai/cluster";
/// On probe containers that `device-manager preflight` starts, so that they can be swept.
pub const PREFLIGHT: &str = "gpustack.ai/preflight";
/// Node feature label: the node has at least one accelerator.
pub const ACCELERATABLE: &str = "feature.gpustack.ai/acceleratable";
/// Prefix of the per-manufacturer and per-product node feature labels.
pub const ACCELERATABLE_PREFIX: &str = "acceleratable.feature.gpustack.ai/";
/// Pod annotation: the JSON allocation record the device plugin writes, keyed by container.
pub const ACCELERATOR_ALLOCATED: &str = "device.gpustack.ai/accelerator.allocated";
/// Pod annotations: preferred accelerators, comma separated.
pub const ACCELERATOR_PREFERRED_ID: &str = "device.gpustack.ai/accelerator.preferred-id";
/// Pod annotation: preferred accelerators by index, comma separated.
pub const ACCELERATOR_PREFERRED_INDEX: &str = "device.gpustack.ai/accelerator.preferred-index";
/// The CSI driver of the model cache.
pub const MODEL_CSI_DRIVER: &str = "model.csi.gpustack.ai";
/// Node label: the model cache's CSI driver is registered on the node (its CSINode lists it).
/// Kept by the worker; the Workload webhook pins PodSets that mount the driver to it.
pub const MODEL_CSI_REGISTERED: &str = "model.gpustack.ai/csi-registered";
/// API groups.
pub const WORKER_GROUP: &str = "worker.gpustack.ai";
/// The API group of the gpustack server's kinds.
pub const GPUSTACK_GROUP: &str = "gpustack.ai";

/// Node feature labels of the CPU: `<prefix><cpu manufacturer>`, `<prefix><gKey>` and
/// `<prefix><gKey>.count`.
pub const GENERAL_PREFIX: &str = "general.feature.gpustack.ai/";
/// On CPU-only nodes while pools do not mix (`instance-type-mixed-on-node=false`).
pub const CPU_ONLY: &str = "feature.gpustack.ai/cpu-only";
/// The node's topology profile (`fnv64-<hash>`), also on its `Devices` and flavors.
pub const TOPOLOGY_PROFILE: &str = "topology.gpustack.ai/profile";
/// Fit labels on the Node, per accelerator group: the most free units on one sliceable card,
/// and how many cards have a free share.
pub const FIT_SLICED_PREFIX: &str = "sliced-max-free-units.fit.gpustack.ai/";
/// Fit labels on the Node, per accelerator group: how many cards have a free share.
pub const FIT_SHARED_PREFIX: &str = "shared-free-cards.fit.gpustack.ai/";
/// What derived an object: `nodes` (flavors) or `instancetypes` (queues).
pub const RESOURCE_TYPE: &str = "resource.gpustack.ai/type";
/// Annotation prefix of the facts a flavor notes about its hardware.
pub const NOTE_PREFIX: &str = "note.gpustack.ai/";
/// On an InstanceType: the LocalQueue name Pods use to reach it.
pub const QUEUE_ENTRANCE: &str = "schedule.gpustack.ai/queue-entrance";
/// On a LocalQueue: the full name of its ClusterQueue.
pub const QUEUE: &str = "schedule.gpustack.ai/queue";
/// On an InstanceType the worker derived from nodes.
pub const DERIVED_FROM_NODE: &str = "schedule.gpustack.ai/derived-from-node";
/// On a ClusterQueue held only because it has no flavors yet.
pub const EMPTY_PLAN_HOLD: &str = "topology.gpustack.ai/empty-plan-hold";
/// On a ClusterQueue held and drained while its flavors move to another topology profile: the
/// stop policy to restore once the old flavors hold no quota (kept here to survive restarts).
pub const MIGRATION_HOLD: &str = "topology.gpustack.ai/migration-hold";
/// Finalizer of the objects whose teardown the worker runs.
pub const CONTROLLED: &str = "gpustack.ai/controlled";
/// Well-known node labels.
pub const OS: &str = "kubernetes.io/os";
/// Well-known node label: the CPU architecture (`amd64`, `arm64`).
pub const ARCH: &str = "kubernetes.io/arch";
/// Well-known node label: the node's hostname.
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// Credits of one whole accelerator in Kueue's quota (equal to the unit grid).
pub const CREDITS_PREFIX: &str = "credits.gpustack.ai/";
