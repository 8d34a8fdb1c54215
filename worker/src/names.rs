//! Names the worker's objects carry, shared with the reference system so manifests carry over.

/// The namespace the worker's objects live in (`KUBERNETES_POD_NAMESPACE` overrides it).
pub const SYSTEM_NAMESPACE: &str = "gpustack-system";
/// The Service the APIServices point at.
pub const SERVICE: &str = "gpustack-operator-worker";
/// The Secret holding the serving CA and certificate, shared by replicas and restarts.
pub const SERVING_SECRET: &str = "gpustack-operator-worker-serving";
pub const WORKER_GROUP: &str = "worker.gpustack.ai";
pub const SETTINGS_GROUP: &str = "gpustack.ai";
