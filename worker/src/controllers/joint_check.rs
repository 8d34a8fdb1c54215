//! The `gpustack-model-deployment-joint` admission check, which every pool's ClusterQueue
//! carries (worker.md §2.1): it holds the Workloads of one model deployment until they can be
//! admitted together. This worker serves no ModelDeployment kind yet, so no Workload is part of
//! one, and each is `Ready` as soon as it holds quota. Without an answer Kueue would admit
//! nothing on the worker's queues.

use gpustack_api::kueue::Workload;

/// The field manager of this check's verdicts (each check writes its own entry).
pub const MANAGER: &str = "gpustack-model-deployment-joint";

/// The check's state and message for `wl`.
pub fn verdict(_wl: &Workload) -> (&'static str, String) {
    (
        super::node_devices::READY,
        "not part of a model deployment: nothing to admit jointly".to_owned(),
    )
}
