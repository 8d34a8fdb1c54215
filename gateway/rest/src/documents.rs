//! The documents every API server answers the same way from its resource descriptions:
//! health, `/version`, discovery (legacy and aggregated) and OpenAPI. Resource routes are the
//! server's own.

use axum::{
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::Value;

use crate::{
    discovery::{self, ServerVersion},
    negotiate, openapi,
    path::Route,
    resource::ResourceDef,
    response::json_response,
    status::ApiError,
};

/// An aggregated discovery document (`apidiscovery.k8s.io` version `v`) with its content type.
pub fn aggregated_response(doc: &Value, v: &str) -> Response {
    let ct = format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList");
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, ct)],
        doc.to_string(),
    )
        .into_response()
}

/// The answer to `route` when it names a document; `None` for resource routes (and paths that
/// name nothing), which the caller serves. `defs` is called only when a document needs it.
pub fn answer(
    route: &Route,
    accept: &str,
    version: &ServerVersion,
    defs: impl FnOnce() -> Vec<ResourceDef>,
) -> Option<Result<Response, ApiError>> {
    let ok = |v: Option<Value>| {
        v.map(|v| json_response(StatusCode::OK, &v))
            .ok_or_else(ApiError::not_found_path)
    };
    Some(match route {
        Route::Health => Ok(StatusCode::OK.into_response()),
        Route::Version => ok(Some(version.to_json())),
        Route::CoreVersions | Route::Groups | Route::Group(_) | Route::GroupVersion { .. } => {
            let top = matches!(route, Route::CoreVersions | Route::Groups);
            match negotiate::for_discovery(accept, top) {
                None => Err(ApiError::not_acceptable(accept)),
                Some(negotiate::Discovery::Aggregated(v)) => Ok(aggregated_response(
                    &discovery::aggregated(&defs(), *route == Route::CoreVersions, v),
                    v,
                )),
                Some(_) => match route {
                    Route::CoreVersions => ok(Some(discovery::core_versions())),
                    Route::Groups => ok(Some(discovery::group_list(&defs()))),
                    Route::Group(g) => ok(discovery::group(&defs(), g)),
                    Route::GroupVersion { group, version } => {
                        ok(discovery::resource_list(&defs(), group, version))
                    }
                    _ => Err(ApiError::not_found_path()),
                },
            }
        }
        Route::OpenApiV2 => openapi::v2(accept, &defs()),
        Route::OpenApiV3Root => ok(Some(openapi::v3_root(&defs()))),
        Route::OpenApiV3 { group, version } => {
            ok(openapi::v3_group_version(&defs(), group, version))
        }
        Route::Resource(_) | Route::NotFound => return None,
    })
}
