//! The request pipeline in front of the verbs, as tower layers in the order a request passes
//! them (kube-apiserver's filter chain): [`resolve`] the cluster a path names, [`authenticate`]
//! the caller (with impersonation), answer the cluster's [`health`] checks, [`authorize`] with
//! RBAC, and [`aggregate`] (forward what an APIService's backend serves). Each passes what it
//! found on in the request's extensions ([`Target`], [`auth::UserInfo`]); the verbs read them.
//! Around them all, each listener opens a request's span ([`route_template`] names it).

use std::sync::Arc;

use axum::{
    extract::{Request, State},
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::{
    AuthState, Core, aggregation, auth,
    caller::Caller,
    clusters::Served,
    path::{self, Route, parse, split_cluster},
    request_metrics::ServedResource,
    status::ApiError,
};

/// The route of a path as its span names it: no cluster, namespace or object name, only what
/// kind of thing is asked for (`/clusters/{cluster}/api/v1/namespaces/{namespace}/pods/{name}`).
pub fn route_template(uri_path: &str) -> String {
    match split_cluster(uri_path) {
        (Some(_), rest) => format!("/clusters/{{cluster}}{}", path::template(rest)),
        (None, rest) => path::template(rest),
    }
}

/// The cluster a request is for, and what it asks of it.
#[derive(Clone, Debug)]
pub struct Target {
    /// The cluster's name.
    pub cluster: String,
    /// How the cluster is served (its token, whether read-only).
    pub served: Served,
    /// What the path under the cluster's prefix asks for.
    pub route: Route,
    /// The path under the cluster's prefix.
    pub rest: String,
}

/// What an earlier layer found; missing only if the layers were put together in the wrong
/// order (then [`out_of_order`]), which every request would show at once.
fn found<T: Clone + Send + Sync + 'static>(req: &Request) -> Option<T> {
    req.extensions().get::<T>().cloned()
}

/// The answer when what an earlier layer finds is missing.
pub(crate) fn out_of_order() -> Response {
    ApiError::internal("the request pipeline is out of order").into_response()
}

/// Finds the served cluster the path names (or the root's). The server's own health at the
/// root is answered here, open to all, as kube-apiserver's: it names no cluster (kubectl's
/// `get --raw` drops the kubeconfig's `/clusters/NAME` prefix). Unknown cluster names answer
/// 404 only to a caller with some token of this server, so that names cannot be probed
/// anonymously.
pub async fn resolve(
    State((core, callers)): State<(Arc<Core>, Arc<AuthState>)>,
    mut req: Request,
    next: Next,
) -> Response {
    let full = req.uri().path().to_owned();
    let (named, rest) = split_cluster(&full);
    let route = parse(rest);
    if route == Route::Health && named.is_none() {
        return super::health(&core, rest).await;
    }
    let served = match named {
        Some(n) => core.served.get(n).map(|s| (n.to_owned(), s)),
        None => core
            .root
            .as_ref()
            .and_then(|r| core.served.get(r).map(|s| (r.clone(), s))),
    };
    let Some((cluster, served)) = served else {
        if callers.require_token
            && callers.access(&core.served).caller(req.headers()) == Caller::Unknown
        {
            return ApiError::unauthorized().into_response();
        }
        return ApiError::not_found_path().into_response();
    };
    // A resource the cluster serves names the request's metrics (anything else is `other`).
    let metric = match &route {
        Route::Resource(p)
            if core
                .registry
                .serves(&cluster, &p.group, &p.version, &p.resource) =>
        {
            Some(ServedResource::of(p))
        }
        _ => None,
    };
    req.extensions_mut().insert(Target {
        cluster,
        served,
        route,
        rest: rest.to_owned(),
    });
    let mut response = next.run(req).await;
    if let Some(metric) = metric {
        response.extensions_mut().insert(metric);
    }
    response
}

/// Who asks: the owner-only unix socket is the admin; over HTTPS the bearer token says.
/// `Impersonate-*` headers are honoured with their RBAC checks, never ignored; a mirror has no
/// RBAC of its own to check them against, so it refuses them.
pub async fn authenticate(
    State((core, callers)): State<(Arc<Core>, Arc<AuthState>)>,
    mut req: Request,
    next: Next,
) -> Response {
    let Some(target) = found::<Target>(&req) else {
        return out_of_order();
    };
    let user = match super::caller::bearer(req.headers()) {
        _ if !callers.require_token => Some(auth::UserInfo::admin()),
        Some(token) => {
            match auth::tokens::authenticate(
                &core,
                &callers,
                &target.cluster,
                &target.served,
                token,
            )
            .await
            {
                // A token for other audiences (asked for by a TokenRequest) is not for this API.
                Ok(found) => found
                    .filter(|(_, audiences)| {
                        audiences.iter().any(|a| a == auth::tokens::API_AUDIENCE)
                    })
                    .map(|(user, _)| user),
                Err(e) => return e.into_response(),
            }
        }
        None => None,
    };
    let Some(user) = user else {
        return ApiError::unauthorized().into_response();
    };
    let user = if target.served.read_only {
        if auth::impersonation::requested(req.headers()).is_ok_and(|r| r.is_none()) {
            user
        } else {
            return ApiError::new(403, "Forbidden", "impersonation is not served by a mirror")
                .into_response();
        }
    } else {
        match auth::impersonated(&core, &target.cluster, user, req.headers()).await {
            Ok(u) => u,
            Err(e) => return e.into_response(),
        }
    };
    req.extensions_mut().insert(user);
    next.run(req).await
}

/// A cluster's own health paths, for any caller it authenticated (no RBAC check).
pub async fn health(State(core): State<Arc<Core>>, req: Request, next: Next) -> Response {
    let Some(target) = found::<Target>(&req) else {
        return out_of_order();
    };
    if target.route == Route::Health {
        return super::health(&core, &target.rest).await;
    }
    next.run(req).await
}

/// RBAC for every request to an embedded cluster; a mirror's token only reads it (the verbs
/// refuse writes to a mirror).
pub async fn authorize(State(core): State<Arc<Core>>, req: Request, next: Next) -> Response {
    let (Some(target), Some(user)) = (found::<Target>(&req), found::<auth::UserInfo>(&req)) else {
        return out_of_order();
    };
    if !target.served.read_only {
        let query = req.uri().query().unwrap_or_default();
        let attributes = auth::request_attributes(req.method(), &target.route, &target.rest, query);
        match auth::authorize(&core, &target.cluster, &user, &attributes).await {
            Ok(d) if d.allowed => {}
            Ok(_) => return auth::forbidden(&user, &attributes).into_response(),
            Err(e) => return e.into_response(),
        }
    }
    next.run(req).await
}

/// What falls under an APIService with a backend is forwarded to it, as kube-aggregator does
/// (mirrors aggregate nothing).
pub async fn aggregate(
    State((core, callers, aggregator)): State<(Arc<Core>, Arc<AuthState>, aggregation::Aggregator)>,
    req: Request,
    next: Next,
) -> Response {
    let (Some(target), Some(user)) = (found::<Target>(&req), found::<auth::UserInfo>(&req)) else {
        return out_of_order();
    };
    if target.served.read_only || aggregation::registry::group_version(&target.rest).is_none() {
        return next.run(req).await;
    }
    let service = match aggregator.services(&core.kinds, &target.cluster).await {
        Ok(services) => aggregation::registry::route(&services, &target.rest).cloned(),
        Err(e) => return e.into_response(),
    };
    let Some(service) = service else {
        return next.run(req).await;
    };
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, core.options.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => return super::too_large(),
    };
    aggregation::forward(
        &core,
        &callers,
        &aggregator,
        &target.cluster,
        &service,
        &user,
        parts,
        &target.rest,
        body,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::route_template;

    #[test]
    fn spans_name_no_cluster_and_no_object() {
        assert_eq!(
            route_template("/clusters/team-a/apis/apps/v1/namespaces/prod/deployments/web"),
            "/clusters/{cluster}/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
        );
        assert_eq!(route_template("/api/v1/nodes"), "/api/v1/nodes");
    }
}
