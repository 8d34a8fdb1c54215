//! `instances/<name>/events` (instances.md §5): the Events of the Instance's Pod, as one
//! `InstanceEvents` (the Pod's metadata and the Events whose `involvedObject` is that Pod, by
//! kind, name and UID). An Instance without a Pod of its own (stopped, say) has none.

use axum::{http::StatusCode, response::Response};
use gpustack_kube_rest::{response::json_response, status::ApiError};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::{Api, api::ListParams};
use serde_json::{Value, json};

use super::{
    instance_lookup::{instance_and_pod, unavailable},
    resources::{SERVED_VERSION, WORKER_GROUP},
};
use crate::controllers::instance_cache::InstanceCache;

/// The field selector of the Events of Pod `name` with `uid`.
pub fn selector(name: &str, uid: &str) -> String {
    format!("involvedObject.kind=Pod,involvedObject.name={name},involvedObject.uid={uid}")
}

/// The answer, from the Pod (if any) and its Events.
pub fn answer(namespace: &str, name: &str, pod: Option<&Pod>, events: Vec<Event>) -> Value {
    let metadata = match pod {
        Some(p) => json!({
            "name": p.metadata.name, "namespace": p.metadata.namespace,
            "uid": p.metadata.uid, "creationTimestamp": p.metadata.creation_timestamp,
        }),
        None => json!({"name": name, "namespace": namespace}),
    };
    json!({
        "apiVersion": format!("{WORKER_GROUP}/{SERVED_VERSION}"), "kind": "InstanceEvents",
        "metadata": metadata, "items": events,
    })
}

/// Serves `GET .../namespaces/<namespace>/instances/<name>/events`.
pub async fn serve(
    client: &kube::Client,
    cache: &InstanceCache,
    namespace: &str,
    name: &str,
) -> Result<Response, ApiError> {
    let (_, pod) = instance_and_pod(client, cache, namespace, name).await?;
    let events = match pod.as_ref().and_then(|p| p.metadata.uid.as_deref()) {
        Some(uid) => {
            Api::<Event>::namespaced(client.clone(), namespace)
                .list(&ListParams::default().fields(&selector(name, uid)))
                .await
                .map_err(unavailable)?
                .items
        }
        None => Vec::new(),
    };
    Ok(json_response(
        StatusCode::OK,
        &answer(namespace, name, pod.as_deref(), events),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pods_events_under_its_metadata() {
        assert_eq!(
            selector("box", "u-1"),
            "involvedObject.kind=Pod,involvedObject.name=box,involvedObject.uid=u-1"
        );
        let none = answer("team", "box", None, vec![]);
        assert_eq!(none["kind"], "InstanceEvents");
        assert_eq!(
            none["metadata"],
            json!({"name": "box", "namespace": "team"})
        );
        assert_eq!(none["items"], json!([]));
    }
}
