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
pub const ACCELERATOR_PREFERRED_INDEX: &str = "device.gpustack.ai/accelerator.preferred-index";
/// The CSI driver of the model cache.
pub const MODEL_CSI_DRIVER: &str = "model.csi.gpustack.ai";
/// API groups.
pub const WORKER_GROUP: &str = "worker.gpustack.ai";
pub const GPUSTACK_GROUP: &str = "gpustack.ai";
