//! OpenAPI documents. `/openapi/v3` lists one document per group-version; each names every
//! kind's operations (with the `x-kubernetes-group-version-kind` and `fieldValidation` that
//! kubectl looks for before it relies on server-side validation) and a schema per kind: the
//! CRD's own, or a permissive one for built-in kinds. `/openapi/v2` is served as JSON only;
//! kubectl asks for protobuf there, gets 406 and falls back to its compiled-in types.

use axum::{http::StatusCode, response::Response};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{json_response, resources::ResourceDef, status::ApiError};

fn gvk(d: &ResourceDef, version: &str) -> Value {
    json!({"group": d.group, "version": version, "kind": d.kind})
}

/// The schema name Kubernetes uses: reversed group, version, kind (`io.k8s.api.core.v1.Pod`).
fn schema_name(d: &ResourceDef, version: &str) -> String {
    let group = if d.group.is_empty() {
        "io.k8s.api.core".to_owned()
    } else {
        d.group.split('.').rev().collect::<Vec<_>>().join(".")
    };
    format!("{group}.{version}.{}", d.kind)
}

fn kind_schema(d: &ResourceDef, version: &str) -> Value {
    let mut s = match &d.schema {
        Some(s) => Value::clone(s),
        None => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    };
    if let Some(m) = s.as_object_mut() {
        let props = m.entry("properties").or_insert_with(|| json!({}));
        if let Some(p) = props.as_object_mut() {
            p.entry("apiVersion").or_insert(json!({"type": "string"}));
            p.entry("kind").or_insert(json!({"type": "string"}));
            p.entry("metadata")
                .or_insert(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        }
        m.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([gvk(d, version)]),
        );
    }
    s
}

fn query_param(name: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
}

fn operation(
    d: &ResourceDef,
    version: &str,
    action: &str,
    schema_ref: &str,
    body: Option<&[&str]>,
) -> Value {
    let mut op = json!({
        "operationId": format!("{action}{}", d.kind),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(d, version),
        "parameters": [query_param("dryRun"), query_param("fieldManager"), query_param("fieldValidation")],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": schema_ref}}}}},
    });
    if let Some(types) = body {
        let content: Map<String, Value> = types
            .iter()
            .map(|t| (t.to_string(), json!({"schema": {"$ref": schema_ref}})))
            .collect();
        op["requestBody"] = json!({"content": content});
    }
    op
}

/// The document of one group-version, or `None` when nothing is served there.
pub fn v3_group_version(defs: &[ResourceDef], group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    for d in defs
        .iter()
        .filter(|d| d.group == group && d.serves(version))
    {
        let name = schema_name(d, version);
        let r = format!("#/components/schemas/{name}");
        schemas.insert(name, kind_schema(d, version));
        let collection = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{prefix}/{}", d.plural)
        };
        paths.insert(
            collection.clone(),
            json!({
                "get": operation(d, version, "list", &r, None),
                "post": operation(d, version, "post", &r, Some(&["application/json", "application/yaml"])),
            }),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({
                "get": operation(d, version, "get", &r, None),
                "put": operation(d, version, "put", &r, Some(&["application/json", "application/yaml"])),
                "patch": operation(d, version, "patch", &r, Some(&["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"])),
                "delete": operation(d, version, "delete", &r, None),
            }),
        );
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// `/openapi/v3`: where each group-version's document is, with a content hash.
pub fn v3_root(defs: &[ResourceDef]) -> Value {
    let mut gvs: Vec<(String, String)> = Vec::new();
    for d in defs {
        for v in &d.versions {
            let gv = (d.group.clone(), v.clone());
            if !gvs.contains(&gv) {
                gvs.push(gv);
            }
        }
    }
    let mut paths = Map::new();
    for (g, v) in gvs {
        let key = if g.is_empty() {
            format!("api/{v}")
        } else {
            format!("apis/{g}/{v}")
        };
        let doc = v3_group_version(defs, &g, &v).unwrap_or(Value::Null);
        let hash: String = Sha256::digest(doc.to_string().as_bytes())
            .iter()
            .take(16)
            .map(|b| format!("{b:02X}"))
            .collect();
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v2` for a request with `accept`.
pub fn v2(accept: &str, defs: &[ResourceDef]) -> Result<Response, ApiError> {
    let json_ok = accept.is_empty()
        || accept.split(',').any(|a| {
            let a = a.split(';').next().unwrap_or("").trim();
            a == "application/json" || a == "*/*"
        });
    if !json_ok {
        return Err(ApiError::not_acceptable(accept));
    }
    let mut definitions = Map::new();
    for d in defs {
        for v in &d.versions {
            definitions.insert(
                schema_name(d, v),
                json!({"type": "object", "x-kubernetes-group-version-kind": [gvk(d, v)]}),
            );
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": {}, "definitions": definitions}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resources::builtins;

    #[test]
    fn patch_operations_carry_gvk_and_field_validation() {
        let defs = builtins();
        let doc = v3_group_version(&defs, "", "v1").unwrap();
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "", "version": "v1", "kind": "ConfigMap"})
        );
        assert!(
            patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
        );
        // No strategic-merge content type: kubectl then computes its patches from compiled types.
        assert!(
            patch["requestBody"]["content"]
                .get("application/strategic-merge-patch+json")
                .is_none()
        );
        assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"].is_object());
        assert!(doc["paths"]["/api/v1/nodes/{name}"].is_object());
    }

    #[test]
    fn root_lists_every_group_version() {
        let root = v3_root(&builtins());
        let url = root["paths"]["apis/coordination.k8s.io/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/apis/coordination.k8s.io/v1?hash="));
        assert!(root["paths"]["api/v1"].is_object());
    }
}
