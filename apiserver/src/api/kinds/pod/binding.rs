//! `pods/NAME/binding`: assigns an unassigned Pod to the node the Binding names, as the
//! scheduler does.

use axum::{http::Method, response::Response};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::api::{
    kinds::subresource::{ObjectRequest, not_allowed, success},
    objects,
    status::ApiError,
};

pub(super) fn serve<'a>(r: &'a ObjectRequest<'a>) -> BoxFuture<'a, Result<Response, ApiError>> {
    Box::pin(async move {
        match r.ctx.method {
            Method::POST => bind(r).await,
            _ => Err(not_allowed(r)),
        }
    })
}

async fn bind(r: &ObjectRequest<'_>) -> Result<Response, ApiError> {
    let name = r.name;
    let body = r.verbs.body().await?;
    let node = body
        .pointer("/target/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::invalid("Binding", name, "target.name: Required value"))?
        .to_owned();
    let annotations = body.pointer("/metadata/annotations").cloned();
    r.verbs
        .update_as_server(&|current| {
            if objects::is_deleting(current) {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!("pod {name} is being deleted, cannot be assigned to a host"),
                ));
            }
            if let Some(bound) = current
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!("pod {name} is already assigned to node \"{bound}\""),
                ));
            }
            let mut new = current.clone();
            new["spec"]["nodeName"] = json!(node);
            for (k, v) in annotations.iter().filter_map(Value::as_object).flatten() {
                new["metadata"]["annotations"][k] = v.clone();
            }
            let mut new = r.verbs.prepare_update(current, new, false)?;
            // The scheduler's condition; the main endpoint would keep the current status.
            let scheduled = json!({"type": "PodScheduled", "status": "True",
                "lastTransitionTime": objects::rfc3339(jiff::Timestamp::now())});
            let mut conditions: Vec<Value> = new
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            conditions.retain(|c| c["type"] != "PodScheduled");
            conditions.push(scheduled);
            if !new["status"].is_object() {
                new["status"] = json!({});
            }
            new["status"]["conditions"] = Value::Array(conditions);
            Ok(new)
        })
        .await?;
    Ok(success())
}
