//! OpenAPI documents. `/openapi/v3` lists one document per group-version; each names every
//! kind's operations (with the `x-kubernetes-group-version-kind` and `fieldValidation` that
//! kubectl looks for before it relies on server-side validation) and the schemas of its kinds:
//! a CRD's own, a built-in kind's definition with every definition it reaches
//! ([`crate::builtin_schemas`], which `kubectl explain` walks), or a permissive one for a kind
//! with neither. `/openapi/v2` has the same schemas as Kubernetes publishes them there, as JSON
//! or as gnostic protobuf ([`crate::openapi_proto`]): kubectl validates the items of a
//! `kind: List` file against it on the client side.

use axum::{
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::{
    builtin_schemas,
    negotiate::{self, OpenApiV2},
    openapi_proto,
    resource::ResourceDef,
    response::json_response,
    status::ApiError,
};

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

/// Which document a schema is written for.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    /// Swagger 2.0: `#/definitions/` refs, a `$ref` with its field's description beside it.
    V2,
    /// OpenAPI 3.0: `#/components/schemas/` refs; a `$ref` with siblings is wrapped in `allOf`
    /// (3.0 ignores a `$ref`'s siblings), as kube-apiserver writes it.
    V3,
}

const V3_REF_PREFIX: &str = "#/components/schemas/";

/// A built-in definition as OpenAPI 3.0 writes it.
fn v3_definition(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let target = m
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(builtin_schemas::REF_PREFIX));
            let mut out: Map<String, Value> = m
                .iter()
                .filter(|(k, _)| !(target.is_some() && k.as_str() == "$ref"))
                .map(|(k, v)| (k.clone(), v3_definition(v)))
                .collect();
            if let Some(name) = target {
                let r = json!({"$ref": format!("{V3_REF_PREFIX}{name}")});
                if out.is_empty() {
                    return r;
                }
                out.insert("allOf".into(), json!([r]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(v3_definition).collect()),
        other => other.clone(),
    }
}

/// Adds the schemas of kind `d` at `version` to `schemas`: a built-in kind's definition and
/// every definition it reaches, or a CRD's schema (a permissive one without). Returns the name
/// of the kind's own.
fn add_kind_schemas(
    schemas: &mut Map<String, Value>,
    d: &ResourceDef,
    version: &str,
    form: Form,
) -> String {
    let shared = d.schema.as_deref().and_then(|doc| {
        let (root, _) = builtin_schemas::kind_definition(doc, &d.group, version, &d.kind)?;
        Some((doc, root))
    });
    if let Some((doc, root)) = shared {
        let defs = builtin_schemas::definitions_of(doc);
        for name in builtin_schemas::reachable(doc, &[root]) {
            if schemas.contains_key(name) {
                continue;
            }
            if let Some(def) = defs.and_then(|defs| defs.get(name)) {
                let def = match form {
                    Form::V2 => def.clone(),
                    Form::V3 => v3_definition(def),
                };
                schemas.insert(name.to_owned(), def);
            }
        }
        return root.to_owned();
    }
    let name = schema_name(d, version);
    let s = kind_schema(d, version);
    let s = match form {
        Form::V2 => v2_schema(&s),
        Form::V3 => s,
    };
    schemas.insert(name.clone(), s);
    name
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
        let name = add_kind_schemas(&mut schemas, d, version, Form::V3);
        let r = format!("{V3_REF_PREFIX}{name}");
        let collection = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{prefix}/{}", d.plural)
        };
        // Only the verbs the resource serves (a mirror's are reads only).
        let ops = |wanted: &[(&str, &str, &str, Option<&[&str]>)]| -> Map<String, Value> {
            wanted
                .iter()
                .filter(|(verb, ..)| d.allows(verb))
                .map(|(_, method, action, body)| {
                    (method.to_string(), operation(d, version, action, &r, *body))
                })
                .collect()
        };
        const WRITE: &[&str] = &["application/json", "application/yaml"];
        const PATCH: &[&str] = &[
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ];
        let on_collection = ops(&[
            ("list", "get", "list", None),
            ("create", "post", "post", Some(WRITE)),
        ]);
        if !on_collection.is_empty() {
            paths.insert(collection.clone(), Value::Object(on_collection));
        }
        let on_object = ops(&[
            ("get", "get", "get", None),
            ("update", "put", "put", Some(WRITE)),
            ("patch", "patch", "patch", Some(PATCH)),
            ("delete", "delete", "delete", None),
        ]);
        if !on_object.is_empty() {
            paths.insert(format!("{collection}/{{name}}"), Value::Object(on_object));
        }
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

/// The hash of a group-version's document (kubectl caches documents by it), from what the
/// document is built of rather than the document: each of its kinds' description, and its
/// schema's content (a shared document of definitions by its digest). Building every document to
/// hash it would cost every `kubectl apply` that asks for the index.
fn group_version_hash(defs: &[ResourceDef], group: &str, version: &str) -> String {
    let mut h = Sha256::new();
    for d in defs
        .iter()
        .filter(|d| d.group == group && d.serves(version))
    {
        let described = ResourceDef {
            schema: None,
            ..d.clone()
        };
        h.update(format!("{described:?}").as_bytes());
        if let Some(s) = d.schema.as_deref() {
            match builtin_schemas::digest_of(s) {
                Some(digest) => h.update(digest.as_bytes()),
                None => h.update(s.to_string().as_bytes()),
            }
        }
    }
    h.finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02X}"))
        .collect()
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
        let hash = group_version_hash(defs, &g, &v);
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// A CRD schema as Kubernetes publishes it in OpenAPI v2, which kubectl's client-side
/// validation (`k8s.io/kube-openapi/pkg/util/proto`) can parse: no `oneOf`/`anyOf`/`allOf`/
/// `not`, no `nullable` (a nullable value loses its type, items and properties, and is not
/// required), nothing below `x-kubernetes-preserve-unknown-fields` (unknown fields are allowed
/// there), no `type: array` without items, and no empty `properties` (an object of anything).
pub fn v2_schema(s: &Value) -> Value {
    let Some(m) = s.as_object() else {
        return s.clone();
    };
    let mut out = Map::new();
    let nullable = m.get("nullable").and_then(Value::as_bool) == Some(true);
    let preserve = m
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true);
    let nullable_props: Vec<&str> = m
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, v)| v.get("nullable").and_then(Value::as_bool) == Some(true))
                .map(|(k, _)| k.as_str())
                .collect()
        })
        .unwrap_or_default();
    for (k, v) in m {
        match k.as_str() {
            "oneOf" | "anyOf" | "allOf" | "not" | "nullable" => {}
            "type" if nullable => {}
            "items" | "properties" if nullable || preserve => {}
            "properties" => {
                let props: Map<String, Value> = v
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(n, p)| (n.clone(), v2_schema(p)))
                    .collect();
                if !props.is_empty() {
                    out.insert(k.clone(), Value::Object(props));
                }
            }
            "items" | "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), v2_schema(v));
            }
            "required" => {
                let req: Vec<Value> = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| !r.as_str().is_some_and(|r| nullable_props.contains(&r)))
                    .cloned()
                    .collect();
                if !req.is_empty() {
                    out.insert(k.clone(), Value::Array(req));
                }
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if out.get("type").and_then(Value::as_str) == Some("array") && !out.contains_key("items") {
        out.remove("type");
    }
    Value::Object(out)
}

/// The swagger 2.0 document: every served kind's schema (v2-converted), with its
/// `x-kubernetes-group-version-kind`. No paths: kubectl only looks kinds up here.
pub fn v2_document(defs: &[ResourceDef]) -> Value {
    let mut definitions = Map::new();
    for d in defs {
        for v in &d.versions {
            add_kind_schemas(&mut definitions, d, v, Form::V2);
        }
    }
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": {}, "definitions": definitions})
}

/// `/openapi/v2` for a request with `accept`: JSON, or gnostic protobuf (what kubectl asks for).
pub fn v2(accept: &str, defs: &[ResourceDef]) -> Result<Response, ApiError> {
    let form = negotiate::for_openapi_v2(accept).ok_or_else(|| ApiError::not_acceptable(accept))?;
    let doc = v2_document(defs);
    Ok(match form {
        OpenApiV2::Json => json_response(StatusCode::OK, &doc),
        OpenApiV2::Protobuf => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, openapi_proto::MEDIA_TYPE_LEGACY)],
            openapi_proto::encode_document(&doc),
        )
            .into_response(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::builtins;

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
    fn v2_schemas_are_what_kubectl_can_parse() {
        let crd = json!({
            "type": "object",
            "required": ["spec", "status"],
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["a", "n"],
                    "properties": {
                        "a": {"type": "string", "x-kubernetes-validations": [{"rule": "self != ''"}]},
                        "n": {"type": "integer", "nullable": true},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                 "properties": {"x": {"type": "string"}}},
                        "either": {"x-kubernetes-int-or-string": true,
                                   "anyOf": [{"type": "integer"}, {"type": "string"}]},
                        "untyped": {"type": "array", "x-kubernetes-preserve-unknown-fields": true,
                                    "items": {"type": "string"}},
                        "empty": {"type": "object", "properties": {}},
                        "list": {"type": "array", "items": {"type": "object", "nullable": true,
                                 "properties": {"y": {"type": "string"}}}},
                        "map": {"type": "object", "additionalProperties": {"type": "string", "nullable": true}},
                    },
                },
                "status": {"type": "object", "nullable": true, "properties": {"s": {"type": "string"}}},
            },
        });
        assert_eq!(
            v2_schema(&crd),
            json!({
                "type": "object",
                "required": ["spec"],
                "properties": {
                    "spec": {
                        "type": "object",
                        "required": ["a"],
                        "properties": {
                            "a": {"type": "string", "x-kubernetes-validations": [{"rule": "self != ''"}]},
                            "n": {},
                            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                            "either": {"x-kubernetes-int-or-string": true},
                            "untyped": {"x-kubernetes-preserve-unknown-fields": true},
                            "empty": {"type": "object"},
                            "list": {"type": "array", "items": {}},
                            "map": {"type": "object", "additionalProperties": {}},
                        },
                    },
                    "status": {},
                },
            })
        );
    }

    #[test]
    fn v2_is_served_as_json_or_gnostic_protobuf() {
        let defs = builtins();
        let doc = v2_document(&defs);
        assert_eq!(
            doc["definitions"]["io.k8s.api.core.v1.ConfigMap"]["x-kubernetes-group-version-kind"],
            json!([{"group": "", "version": "v1", "kind": "ConfigMap"}])
        );
        let content_type = |accept: &str| {
            let r = v2(accept, &defs).unwrap();
            r.headers()[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(content_type(""), "application/json");
        assert_eq!(content_type("application/json"), "application/json");
        // kubectl's `@` spelling is no valid media type: the answer uses the dotted one.
        for accept in [openapi_proto::MEDIA_TYPE, openapi_proto::MEDIA_TYPE_LEGACY] {
            assert_eq!(content_type(accept), openapi_proto::MEDIA_TYPE_LEGACY);
        }
        assert_eq!(
            v2("application/vnd.kubernetes.protobuf", &defs)
                .unwrap_err()
                .code,
            406
        );
    }

    fn with_schemas() -> Vec<ResourceDef> {
        let mut defs = builtins();
        builtin_schemas::attach(&mut defs);
        defs
    }

    /// Every `$ref` string in `v`.
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m.iter().for_each(|(k, c)| match (k.as_str(), c) {
                ("$ref", Value::String(r)) => out.push(r.clone()),
                _ => refs(c, out),
            }),
            Value::Array(a) => a.iter().for_each(|c| refs(c, out)),
            _ => {}
        }
    }

    #[test]
    fn v2_definitions_of_a_deployment_reach_an_integer_replicas() {
        let doc = v2_document(&with_schemas());
        let defs = &doc["definitions"];
        let deployment = &defs["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
        );
        let spec = &deployment["properties"]["spec"];
        assert_eq!(
            spec["$ref"],
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        let spec = &defs["io.k8s.api.apps.v1.DeploymentSpec"];
        assert_eq!(spec["properties"]["replicas"]["type"], "integer");
        assert!(spec["properties"]["replicas"]["description"].is_string());
        let mut all = Vec::new();
        refs(defs, &mut all);
        for r in all {
            let name = r.strip_prefix("#/definitions/").unwrap();
            assert!(defs.get(name).is_some(), "{r} dangles");
        }
        // The protobuf form carries them too.
        assert!(openapi_proto::encode_document(&doc).len() > 100_000);
    }

    #[test]
    fn v3_document_of_apps_v1_resolves_every_ref() {
        let defs = with_schemas();
        let doc = v3_group_version(&defs, "apps", "v1").unwrap();
        let schemas = &doc["components"]["schemas"];
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(all.len() > 100);
        for r in &all {
            let name = r.strip_prefix("#/components/schemas/").unwrap();
            assert!(schemas.get(name).is_some(), "{r} dangles");
        }
        let create = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]["post"];
        assert_eq!(
            create["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.Deployment"
        );
        // A `$ref` with its field's description is wrapped in allOf, as kube-apiserver writes it.
        let spec = &schemas["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"];
        assert_eq!(
            spec["allOf"],
            json!([{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}])
        );
        assert!(spec.get("$ref").is_none() && spec["description"].is_string());
        assert_eq!(
            schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"]["type"],
            "integer"
        );
        // Only what apps/v1 reaches: no RBAC.
        assert!(schemas.get("io.k8s.api.rbac.v1.Role").is_none());
        assert!(schemas.get("io.k8s.api.core.v1.PodSpec").is_some());
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

    #[test]
    fn a_group_version_hash_changes_with_its_kinds_only() {
        let defs = with_schemas();
        let hash = |defs: &[ResourceDef], gv: &str| {
            v3_root(defs)["paths"][gv]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            hash(&defs, "apis/apps/v1"),
            hash(&with_schemas(), "apis/apps/v1")
        );
        let mut changed = defs.clone();
        let crd = changed
            .iter_mut()
            .find(|d| d.kind == "CustomResourceDefinition")
            .unwrap();
        crd.schema = None;
        assert_ne!(
            hash(&defs, "apis/apiextensions.k8s.io/v1"),
            hash(&changed, "apis/apiextensions.k8s.io/v1")
        );
        assert_eq!(hash(&defs, "apis/apps/v1"), hash(&changed, "apis/apps/v1"));
        let mut custom = crate::resource::from_crd(&json!({
            "metadata": {"name": "ws.e.com"},
            "spec": {"group": "e.com", "names": {"plural": "ws", "kind": "W"}, "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object"}}}]}}))
        .unwrap();
        let before = hash(&[custom.clone()], "apis/e.com/v1");
        custom.schema = Some(json!({"type": "object", "properties": {}}).into());
        assert_ne!(before, hash(&[custom], "apis/e.com/v1"));
    }

    #[test]
    fn a_read_only_server_documents_reads_only() {
        let defs = crate::resource::read_only(builtins());
        let doc = v3_group_version(&defs, "", "v1").unwrap();
        for (path, item) in doc["paths"].as_object().unwrap() {
            let methods: Vec<&str> = item
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(methods, ["get"], "{path}");
        }
    }
}
