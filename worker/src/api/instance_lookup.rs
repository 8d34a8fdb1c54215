//! The Instance a subresource request names, and the Pod that is its (the same name, labelled
//! part of the Instance's UID): a Pod of that name that is not the Instance's is none of its.
//! Both come from the worker's cache; only what it does not hold (an Instance created a moment
//! ago, the Pod of a stopped one) is asked of the cluster.

use std::sync::Arc;

use gpustack_api::instance::Instance;
use gpustack_kube_rest::status::ApiError;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};

use super::resources::WORKER_GROUP;
use crate::controllers::{instance_cache::InstanceCache, instance_pod::PART_OF};

/// A cluster that could not be read: 503, for the caller to retry.
pub fn unavailable(e: kube::Error) -> ApiError {
    ApiError::new(
        503,
        "ServiceUnavailable",
        format!("reading the cluster: {e}"),
    )
}

/// The Instance `namespace/name` and its Pod, when that Pod is the Instance's (the same name,
/// part of its UID); 404 naming the Instance when it does not exist.
pub async fn instance_and_pod(
    client: &kube::Client,
    cache: &InstanceCache,
    namespace: &str,
    name: &str,
) -> Result<(Arc<Instance>, Option<Arc<Pod>>), ApiError> {
    let instance = match cache.instance(namespace, name) {
        Some(i) => i,
        None => Api::<Instance>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(unavailable)?
            .map(Arc::new)
            .ok_or_else(|| {
                ApiError::new(
                    404,
                    "NotFound",
                    format!("instances.{WORKER_GROUP} \"{name}\" not found"),
                )
            })?,
    };
    let pod = match cache.pod(namespace, name) {
        Some(p) => Some(p),
        None => Api::<Pod>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(unavailable)?
            .map(Arc::new),
    }
    .filter(|p| p.labels().get(PART_OF).map(String::as_str) == instance.metadata.uid.as_deref());
    Ok((instance, pod))
}
