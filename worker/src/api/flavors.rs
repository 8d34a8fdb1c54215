//! `worker.gpustack.ai/v1` `instancetypeflavors` (short `instypeflavor`): read-only, computed
//! from the ResourceFlavors the controllers derive from nodes. One per accelerator group (and
//! one for CPUs), named as InstanceTypes group them (`gpustack--<group>`, `gpustack--generic`;
//! with the CPU key too when pools are CPU-aware). It appears with its first flavor and goes
//! with its last, which a watch reports as ADDED and DELETED.

use std::collections::BTreeMap;

use axum::{
    body::{Body, Bytes},
    http::{Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use futures::StreamExt;
use gpustack_api::{
    kueue::ResourceFlavor,
    labels::{NOTE_PREFIX, RESOURCE_TYPE},
};
use gpustack_kube_rest::{
    list, negotiate,
    path::ResourcePath,
    resource::ResourceDef,
    response::json_response,
    status::ApiError,
    table::IncludeObject,
    watch::{Framer, error_event},
};
use kube::{Api, ResourceExt, api::ListParams, runtime::watcher};
use serde_json::{Value, json};

use super::{resources::WORKER_GROUP, views::Asked};
use crate::{controllers::chain_settings::ChainSettings, names::DERIVED_PREFIX, settings::store};

/// The flavors of nodes: those the controllers derived.
const DERIVED: &str = "resource.gpustack.ai/type=nodes";

/// The view's objects by name, from the derived flavors.
pub fn compute(
    flavors: &[ResourceFlavor],
    aware_cpu: bool,
    resource_version: &str,
) -> BTreeMap<String, Value> {
    let mut groups: BTreeMap<String, Vec<&ResourceFlavor>> = BTreeMap::new();
    for f in flavors {
        if f.labels().get(RESOURCE_TYPE).map(String::as_str) != Some("nodes") {
            continue;
        }
        let note = |k: &str| f.annotations().get(&format!("{NOTE_PREFIX}{k}")).cloned();
        let cpu = note("generalGroup").unwrap_or_else(|| "generic".into());
        let name = match (note("acceleratorGroup"), aware_cpu) {
            (Some(a), true) => format!("{DERIVED_PREFIX}{cpu}--{a}"),
            (Some(a), false) => format!("{DERIVED_PREFIX}{a}"),
            (None, true) => format!("{DERIVED_PREFIX}{cpu}"),
            (None, false) => format!("{DERIVED_PREFIX}generic"),
        };
        groups.entry(name).or_default().push(f);
    }
    groups
        .into_iter()
        .map(|(name, members)| {
            let first = members[0];
            let notes: serde_json::Map<String, Value> = first
                .annotations()
                .iter()
                .filter_map(|(k, v)| Some((k.strip_prefix(NOTE_PREFIX)?.to_owned(), json!(v))))
                .filter(|(k, _)| k != "topologyProfile" && k != "cpuDetail" && (aware_cpu || k != "generalGroup"))
                .collect();
            let capacity: u64 = members
                .iter()
                .filter_map(|f| {
                    f.labels()
                        .iter()
                        .find(|(k, _)| k.ends_with(".capacity"))
                        .and_then(|(_, v)| v.parse::<u64>().ok())
                })
                .sum();
            let created = members
                .iter()
                .filter_map(|f| f.metadata.creation_timestamp.as_ref())
                .min()
                .cloned();
            let obj = json!({
                "apiVersion": format!("{WORKER_GROUP}/v1"),
                "kind": "InstanceTypeFlavor",
                "metadata": {"name": name, "creationTimestamp": created, "resourceVersion": resource_version},
                "spec": notes,
                "status": {
                    "flavors": members.iter().map(|f| f.name_any()).collect::<Vec<_>>(),
                    "capacity": capacity,
                },
            });
            (name, obj)
        })
        .collect()
}

/// The `flavors` resource: served from the cluster's ResourceFlavors.
#[derive(Clone)]
pub struct Flavors {
    /// The cluster client.
    pub client: kube::Client,
    /// The worker's namespace.
    pub namespace: String,
    /// The resource's description.
    pub def: ResourceDef,
}

fn unavailable(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        503,
        "ServiceUnavailable",
        format!("reading the resource flavors: {e}"),
    )
}

impl Flavors {
    async fn aware(&self) -> bool {
        store::read(&self.client, &self.namespace)
            .await
            .map(|(values, _)| ChainSettings::from_values(&values).aware_cpu_manufacturer)
            .unwrap_or(false)
    }

    async fn current(&self) -> Result<(BTreeMap<String, Value>, String), ApiError> {
        let api: Api<ResourceFlavor> = Api::all(self.client.clone());
        let list = api
            .list(&ListParams::default().labels(DERIVED))
            .await
            .map_err(unavailable)?;
        let rv = list.metadata.resource_version.clone().unwrap_or_default();
        Ok((compute(&list.items, self.aware().await, &rv), rv))
    }

    /// Answers one request for flavors.
    pub async fn handle(&self, p: &ResourcePath, asked: Asked) -> Result<Response, ApiError> {
        let accept = asked.accept();
        let representation = negotiate::for_resource(accept, asked.method == Method::GET)
            .ok_or_else(|| ApiError::not_acceptable(accept))?;
        let q = asked.query.as_deref();
        let include_param = q.and_then(|q| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix("includeObject="))
        });
        let include = IncludeObject::parse(include_param).map_err(ApiError::bad_request)?;
        if p.subresource.is_some() || p.namespace.is_some() {
            return Err(ApiError::not_found_path());
        }
        match (&asked.method, &p.name) {
            (&Method::GET, None) if asked.watch => Ok(self.watch(representation, include).await),
            (&Method::GET, None) => {
                let (objects, rv) = self.current().await?;
                let items = objects.into_values().collect();
                let list = list::render(
                    &self.def,
                    "v1",
                    representation,
                    include,
                    items,
                    json!({"resourceVersion": rv}),
                );
                Ok(json_response(StatusCode::OK, &list))
            }
            (&Method::GET, Some(name)) => {
                let (mut objects, _) = self.current().await?;
                let obj = objects.remove(name).ok_or_else(|| {
                    ApiError::not_found(WORKER_GROUP, "instancetypeflavors", name)
                })?;
                Ok(json_response(
                    StatusCode::OK,
                    &super::views::represent(&self.def, "v1", representation, include, obj),
                ))
            }
            _ => Err(ApiError::new(
                405,
                "MethodNotAllowed",
                "instancetypeflavors are computed from the cluster's resource flavors: they can only be read",
            )),
        }
    }

    /// Follows the flavors; each change of the view is an event (ADDED, MODIFIED, DELETED).
    async fn watch(
        &self,
        representation: negotiate::Representation,
        include: IncludeObject,
    ) -> Response {
        let framer = Framer::new(self.def.clone(), "v1", representation, include);
        let aware = self.aware().await;
        let config = watcher::Config::default().labels(DERIVED);
        let mut shown: BTreeMap<String, Value> = BTreeMap::new();
        let mut flavors: BTreeMap<String, ResourceFlavor> = BTreeMap::new();
        let mut listing = Vec::new();
        let watched = gpustack_watch::objects::<ResourceFlavor>(self.client.clone(), None, config);
        let events = watched.map(move |ev| {
            let changed = match ev {
                Ok(watcher::Event::Init) => {
                    listing.clear();
                    false
                }
                Ok(watcher::Event::InitApply(f)) => {
                    listing.push(f);
                    false
                }
                Ok(watcher::Event::InitDone) => {
                    flavors = std::mem::take(&mut listing)
                        .into_iter()
                        .map(|f| (f.name_any(), f))
                        .collect();
                    true
                }
                Ok(watcher::Event::Apply(f)) => {
                    flavors.insert(f.name_any(), f);
                    true
                }
                Ok(watcher::Event::Delete(f)) => {
                    flavors.remove(&f.name_any());
                    true
                }
                Err(e) => {
                    return Ok::<_, std::convert::Infallible>(error_event(&unavailable(e)));
                }
            };
            if !changed {
                return Ok(Bytes::new());
            }
            let rv = flavors
                .values()
                .filter_map(|f| f.resource_version())
                .max_by_key(|v| v.parse::<u64>().unwrap_or(0))
                .unwrap_or_default();
            let all: Vec<ResourceFlavor> = flavors.values().cloned().collect();
            let now = compute(&all, aware, &rv);
            let mut out = Vec::new();
            for (name, obj) in &now {
                let kind = match shown.get(name) {
                    None => "ADDED",
                    Some(prev)
                        if prev["spec"] != obj["spec"] || prev["status"] != obj["status"] =>
                    {
                        "MODIFIED"
                    }
                    Some(_) => continue,
                };
                out.extend_from_slice(&framer.event(kind, obj.clone()));
            }
            for (name, obj) in &shown {
                if !now.contains_key(name) {
                    out.extend_from_slice(&framer.event("DELETED", obj.clone()));
                }
            }
            shown = now;
            Ok(Bytes::from(out))
        });
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            Body::from_stream(events),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flavor(name: &str, accel: Option<&str>, capacity: &str) -> ResourceFlavor {
        let mut notes =
            BTreeMap::from([(format!("{NOTE_PREFIX}generalGroup"), "amd-epyc".to_owned())]);
        let mut labels = BTreeMap::from([(RESOURCE_TYPE.to_owned(), "nodes".to_owned())]);
        match accel {
            Some(a) => {
                notes.insert(format!("{NOTE_PREFIX}acceleratorGroup"), a.to_owned());
                labels.insert(
                    format!("acceleratable.feature.gpustack.ai/{a}.capacity"),
                    capacity.to_owned(),
                );
            }
            None => {
                labels.insert(
                    "general.feature.gpustack.ai/amd-epyc.capacity".to_owned(),
                    capacity.to_owned(),
                );
            }
        }
        let mut f = ResourceFlavor::default();
        f.metadata.name = Some(name.into());
        f.metadata.labels = Some(labels);
        f.metadata.annotations = Some(notes);
        f
    }

    #[test]
    fn one_per_group_summing_its_flavors() {
        let rfs = [
            flavor("a-8d", Some("nvidia-h100"), "16"),
            flavor("a-7d", Some("nvidia-h100"), "7"),
            flavor("cpu", None, "96"),
        ];
        let v = compute(&rfs, false, "9");
        assert_eq!(
            v.keys().collect::<Vec<_>>(),
            ["gpustack--generic", "gpustack--nvidia-h100"]
        );
        assert_eq!(v["gpustack--nvidia-h100"]["status"]["capacity"], 23);
        assert_eq!(
            v["gpustack--nvidia-h100"]["status"]["flavors"],
            json!(["a-8d", "a-7d"])
        );
        let aware = compute(&rfs, true, "9");
        assert!(
            aware.contains_key("gpustack--amd-epyc--nvidia-h100")
                && aware.contains_key("gpustack--amd-epyc")
        );
    }
}
