//! `gpustack.ai/v1` `settings`: get, list, watch, update, patch and apply over the Settings
//! Secret. Create and delete are refused (405): the catalog decides which settings exist.

use std::collections::BTreeMap;

use axum::{
    body::{Body, Bytes},
    http::{Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use futures::StreamExt;
use gpustack_kube_rest::{
    bounded, list,
    negotiate::{self, Representation},
    path::ResourcePath,
    response::json_response,
    status::ApiError,
    table::IncludeObject,
    watch::{Framer, error_event},
};
use serde_json::{Value, json};

use super::views::{Asked, MAX_BODY};
use crate::settings::{
    catalog,
    store::{self, StoreError},
    view::{self, ChangeError, PatchKind},
};

/// Where the settings live, and how they are reached.
#[derive(Clone)]
pub struct Settings {
    /// The cluster client.
    pub client: kube::Client,
    /// The worker's namespace, where the settings Secret lives.
    pub namespace: String,
    /// The `settings` description (see [`super::resources::settings`]).
    pub def: gpustack_kube_rest::resource::ResourceDef,
}

fn query_param<'a>(q: Option<&'a str>, key: &str) -> Option<&'a str> {
    q?.split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

fn store_error(e: StoreError) -> ApiError {
    match e.code() {
        Some(409) => ApiError::new(
            409,
            "Conflict",
            "Operation cannot be fulfilled on settings.gpustack.ai: the object has been modified; please apply your changes to the latest version and try again",
        ),
        _ => ApiError::new(503, "ServiceUnavailable", e.to_string()),
    }
}

impl Settings {
    /// Answers one request for settings.
    pub async fn handle(
        &self,
        p: &ResourcePath,
        asked: Asked,
        body: Bytes,
    ) -> Result<Response, ApiError> {
        let def = &self.def;
        let accept = asked.accept();
        let representation = negotiate::for_resource(accept, asked.method == Method::GET)
            .ok_or_else(|| ApiError::not_acceptable(accept))?;
        let q = asked.query.as_deref();
        let include =
            IncludeObject::parse(query_param(q, "includeObject")).map_err(ApiError::bad_request)?;
        if p.subresource.is_some() {
            return Err(ApiError::not_found_path());
        }
        // Settings live in the system namespace only.
        let here = p.namespace.as_deref().is_none_or(|ns| ns == self.namespace);
        match (&asked.method, &p.name) {
            (&Method::GET, None) if asked.watch => {
                Ok(self.watch(representation, include, here).await)
            }
            (&Method::GET, None) => {
                let (values, meta) = store::read(&self.client, &self.namespace)
                    .await
                    .map_err(store_error)?;
                let items = if here {
                    view::all(&values, &self.namespace, &meta)
                } else {
                    Vec::new()
                };
                let meta = json!({"resourceVersion": meta.resource_version});
                let list = list::render(def, "v1", representation, include, items, meta);
                Ok(json_response(StatusCode::OK, &list))
            }
            (&Method::GET, Some(name)) => {
                let obj = self.get(name, here).await?;
                Ok(json_response(
                    StatusCode::OK,
                    &super::views::represent(def, "v1", representation, include, obj),
                ))
            }
            (&Method::PUT | &Method::PATCH, Some(name)) => {
                let kind = match (&asked.method, content_type(&asked)) {
                    (&Method::PUT, _) => PatchKind::Object,
                    (_, ct) if ct.starts_with("application/json-patch+json") => PatchKind::Json,
                    (_, ct) if ct.starts_with("application/apply-patch+yaml") => PatchKind::Object,
                    (_, ct)
                        if ct.starts_with("application/merge-patch+json")
                            || ct.starts_with("application/strategic-merge-patch+json") =>
                    {
                        PatchKind::Merge
                    }
                    (_, ct) => return Err(ApiError::unsupported_media_type(ct)),
                };
                let dry_run = query_param(q, "dryRun") == Some("All");
                self.change(name, here, kind, &body, dry_run).await
            }
            (&Method::POST, _) => Err(refused("create")),
            (&Method::DELETE, _) => Err(refused("delete")),
            _ => Err(ApiError::method_not_allowed(asked.method.as_str())),
        }
    }

    async fn get(&self, name: &str, here: bool) -> Result<Value, ApiError> {
        let not_found = || ApiError::not_found("gpustack.ai", "settings", name);
        let def = catalog::find(name).filter(|_| here).ok_or_else(not_found)?;
        let (values, meta) = store::read(&self.client, &self.namespace)
            .await
            .map_err(store_error)?;
        Ok(view::object(
            def,
            view::value_of(&values, def),
            &self.namespace,
            &meta,
        ))
    }

    async fn change(
        &self,
        name: &str,
        here: bool,
        kind: PatchKind,
        body: &Bytes,
        dry_run: bool,
    ) -> Result<Response, ApiError> {
        let not_found = || ApiError::not_found("gpustack.ai", "settings", name);
        let def = catalog::find(name).filter(|_| here).ok_or_else(not_found)?;
        let change = bounded::yaml_value(body, MAX_BODY)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid: {e}")))?;
        if kind == PatchKind::Object
            && let Some(n) = change.pointer("/metadata/name").and_then(Value::as_str)
            && n != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        let (values, meta) = store::read(&self.client, &self.namespace)
            .await
            .map_err(store_error)?;
        let current = view::object(def, view::value_of(&values, def), &self.namespace, &meta);
        let new = view::change(def, &current, kind, &change, &values).map_err(|e| match e {
            ChangeError::Patch(m) => ApiError::bad_request(m),
            other => ApiError::invalid("Setting", name, other.to_string()),
        })?;
        let Some(new) = new else {
            return Ok(json_response(StatusCode::OK, &current));
        };
        // An update names the version it read; a patch applies to whatever is current.
        let expected = (kind == PatchKind::Object)
            .then(|| change.pointer("/metadata/resourceVersion")?.as_str())
            .flatten();
        let written = store::write(&self.client, &self.namespace, name, &new, expected, dry_run)
            .await
            .map_err(store_error)?;
        tracing::info!(setting = name, dry_run, "setting changed");
        let obj = view::object(def, &new, &self.namespace, &written);
        Ok(json_response(StatusCode::OK, &obj))
    }

    async fn watch(
        &self,
        representation: Representation,
        include: IncludeObject,
        here: bool,
    ) -> Response {
        let framer = Framer::new(self.def.clone(), "v1", representation, include);
        let namespace = self.namespace.clone();
        let mut last: Option<BTreeMap<String, String>> = None;
        let events = store::watch(&self.client, &self.namespace).map(move |ev| {
            let (values, meta) = match ev {
                Ok(v) => v,
                Err(e) => {
                    return Ok::<_, std::convert::Infallible>(error_event(&ApiError::new(
                        503,
                        "ServiceUnavailable",
                        format!("watching the settings: {e}"),
                    )));
                }
            };
            let mut out = Vec::new();
            for def in catalog::CATALOG.iter().filter(|_| here) {
                let value = view::value_of(&values, def);
                let kind = match &last {
                    None => "ADDED",
                    Some(prev) if view::value_of(prev, def) != value => "MODIFIED",
                    Some(_) => continue,
                };
                let obj = view::object(def, value, &namespace, &meta);
                out.extend_from_slice(&framer.event(kind, obj));
            }
            last = Some(values);
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

fn content_type(asked: &Asked) -> &str {
    asked
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn refused(verb: &str) -> ApiError {
    ApiError::new(
        405,
        "MethodNotAllowed",
        format!(
            "settings cannot be {verb}d: the catalog decides which settings exist; change one with kubectl patch or apply"
        ),
    )
}
