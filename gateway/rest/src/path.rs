//! Request paths: which document or resource a path names.

/// A path under a cluster's root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/healthz`, `/livez` or `/readyz`.
    Health,
    /// `/api`: the core group's versions.
    CoreVersions,
    /// `/apis`: the group list.
    Groups,
    /// `/apis/G`: one group's versions.
    Group(String),
    /// `/api/v1` or `/apis/G/V`.
    GroupVersion {
        /// The group; empty for the core group.
        group: String,
        /// The version.
        version: String,
    },
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3`: the index of group-version documents.
    OpenApiV3Root,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/G/V`.
    OpenApiV3 {
        /// The group; empty for the core group.
        group: String,
        /// The version.
        version: String,
    },
    /// A resource, collection or subresource.
    Resource(ResourcePath),
    /// Anything else.
    NotFound,
}

/// A resource, collection or subresource path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourcePath {
    /// The API group; empty for the core group.
    pub group: String,
    /// The version in the path.
    pub version: String,
    /// The namespace, for a namespaced path.
    pub namespace: Option<String>,
    /// The resource's plural name.
    pub resource: String,
    /// The object's name; `None` for a collection.
    pub name: Option<String>,
    /// The subresource (`status`, `scale`, `log`...).
    pub subresource: Option<String>,
    /// The deprecated `/watch/` path form.
    pub watch: bool,
}

/// Splits `/clusters/NAME/rest` into `(Some(NAME), "/rest")`.
pub fn split_cluster(path: &str) -> (Option<&str>, &str) {
    match path.strip_prefix("/clusters/") {
        Some(rest) => match rest.find('/') {
            Some(i) => (Some(&rest[..i]), &rest[i..]),
            None => (Some(rest), "/"),
        },
        None => (None, path),
    }
}

/// What `path` (without its cluster prefix) names.
pub fn parse(path: &str) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        ["healthz"] | ["livez"] | ["readyz"] => Route::Health,
        ["healthz" | "livez" | "readyz", _] => Route::Health,
        ["api"] => Route::CoreVersions,
        ["apis"] => Route::Groups,
        ["apis", g] => Route::Group((*g).into()),
        ["api", v] => Route::GroupVersion {
            group: String::new(),
            version: (*v).into(),
        },
        ["apis", g, v] => Route::GroupVersion {
            group: (*g).into(),
            version: (*v).into(),
        },
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3Root,
        ["openapi", "v3", "api", v] => Route::OpenApiV3 {
            group: String::new(),
            version: (*v).into(),
        },
        ["openapi", "v3", "apis", g, v] => Route::OpenApiV3 {
            group: (*g).into(),
            version: (*v).into(),
        },
        ["api", v, rest @ ..] => resource(String::new(), v, rest),
        ["apis", g, v, rest @ ..] => resource((*g).into(), v, rest),
        _ => Route::NotFound,
    }
}

/// The route template of `path`, as a span names a request: the group, version, resource and
/// subresource kept, what names objects (namespace, name) as `{namespace}` and `{name}`.
pub fn template(path: &str) -> String {
    let prefix = |group: &str, version: &str| {
        if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        }
    };
    match parse(path) {
        Route::Version => "/version".into(),
        Route::Health => {
            let mut segs = path.split('/').filter(|s| !s.is_empty());
            let check = segs.next().unwrap_or_default();
            match segs.next() {
                Some(_) => format!("/{check}/{{check}}"),
                None => format!("/{check}"),
            }
        }
        Route::CoreVersions => "/api".into(),
        Route::Groups => "/apis".into(),
        Route::Group(g) => format!("/apis/{g}"),
        Route::GroupVersion { group, version } => prefix(&group, &version),
        Route::OpenApiV2 => "/openapi/v2".into(),
        Route::OpenApiV3Root => "/openapi/v3".into(),
        Route::OpenApiV3 { group, version } => format!("/openapi/v3{}", prefix(&group, &version)),
        Route::Resource(p) => {
            let mut t = prefix(&p.group, &p.version);
            if p.watch {
                t.push_str("/watch");
            }
            if p.namespace.is_some() {
                t.push_str("/namespaces/{namespace}");
            }
            t.push('/');
            t.push_str(&p.resource);
            if p.name.is_some() {
                t.push_str("/{name}");
            }
            if let Some(sub) = &p.subresource {
                t.push('/');
                t.push_str(sub);
            }
            t
        }
        Route::NotFound => "/{unmatched}".into(),
    }
}

fn resource(group: String, version: &str, rest: &[&str]) -> Route {
    let (watch, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let mk = |namespace: Option<&str>, resource: &str, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(ResourcePath {
            group: group.clone(),
            version: version.into(),
            namespace: namespace.map(String::from),
            resource: resource.into(),
            name: name.map(String::from),
            subresource: sub.map(String::from),
            watch,
        })
    };
    match rest {
        // Namespaces themselves: /namespaces, /namespaces/NAME, /namespaces/NAME/status|finalize.
        ["namespaces"] => mk(None, "namespaces", None, None),
        ["namespaces", n] => mk(None, "namespaces", Some(n), None),
        ["namespaces", n, sub @ ("status" | "finalize")] if group.is_empty() => {
            mk(None, "namespaces", Some(n), Some(sub))
        }
        ["namespaces", ns, r] => mk(Some(ns), r, None, None),
        ["namespaces", ns, r, n] => mk(Some(ns), r, Some(n), None),
        ["namespaces", ns, r, n, sub] => mk(Some(ns), r, Some(n), Some(sub)),
        [r] => mk(None, r, None, None),
        [r, n] => mk(None, r, Some(n), None),
        [r, n, sub] => mk(None, r, Some(n), Some(sub)),
        // A proxy subresource carries the path it proxies to after it (`nodes/NAME/proxy/...`).
        ["namespaces", ns, r, n, "proxy", ..] => mk(Some(ns), r, Some(n), Some("proxy")),
        [r, n, "proxy", ..] if *r != "namespaces" => mk(None, r, Some(n), Some("proxy")),
        _ => Route::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(p: &str) -> ResourcePath {
        match parse(p) {
            Route::Resource(r) => r,
            other => panic!("{p}: {other:?}"),
        }
    }

    #[test]
    fn templates_keep_kinds_and_hide_names() {
        let cases = [
            ("/version", "/version"),
            ("/readyz", "/readyz"),
            ("/livez/ping", "/livez/{check}"),
            ("/apis/a.b/v1", "/apis/a.b/v1"),
            ("/openapi/v3/api/v1", "/openapi/v3/api/v1"),
            (
                "/api/v1/namespaces/secret-team/configmaps/x",
                "/api/v1/namespaces/{namespace}/configmaps/{name}",
            ),
            (
                "/api/v1/namespaces/secret-team",
                "/api/v1/namespaces/{name}",
            ),
            (
                "/apis/worker.gpustack.ai/v1/instancetypes/small/status",
                "/apis/worker.gpustack.ai/v1/instancetypes/{name}/status",
            ),
            (
                "/api/v1/watch/namespaces/a/pods",
                "/api/v1/watch/namespaces/{namespace}/pods",
            ),
            (
                "/api/v1/nodes/n1/proxy/logs/x",
                "/api/v1/nodes/{name}/proxy",
            ),
            ("/some/thing/else", "/{unmatched}"),
        ];
        for (path, expected) in cases {
            assert_eq!(template(path), expected, "{path}");
        }
    }

    #[test]
    fn cluster_prefix() {
        assert_eq!(
            split_cluster("/clusters/demo/api/v1"),
            (Some("demo"), "/api/v1")
        );
        assert_eq!(split_cluster("/clusters/demo"), (Some("demo"), "/"));
        assert_eq!(split_cluster("/api/v1"), (None, "/api/v1"));
    }

    #[test]
    fn discovery_paths() {
        assert_eq!(parse("/version"), Route::Version);
        assert_eq!(parse("/api"), Route::CoreVersions);
        assert_eq!(parse("/apis/"), Route::Groups);
        assert_eq!(
            parse("/apis/example.com"),
            Route::Group("example.com".into())
        );
        assert_eq!(
            parse("/api/v1"),
            Route::GroupVersion {
                group: "".into(),
                version: "v1".into()
            }
        );
        assert_eq!(
            parse("/openapi/v3/apis/a.b/v1"),
            Route::OpenApiV3 {
                group: "a.b".into(),
                version: "v1".into()
            }
        );
        assert_eq!(parse("/readyz"), Route::Health);
        assert_eq!(parse("/nope"), Route::NotFound);
    }

    #[test]
    fn resource_paths() {
        let r = res("/api/v1/namespaces/default/configmaps/x");
        assert_eq!(
            (
                r.namespace.as_deref(),
                r.resource.as_str(),
                r.name.as_deref()
            ),
            (Some("default"), "configmaps", Some("x"))
        );
        let r = res("/api/v1/namespaces/default");
        assert_eq!(
            (r.namespace, r.resource.as_str(), r.name.as_deref()),
            (None, "namespaces", Some("default"))
        );
        let r = res("/api/v1/namespaces/default/status");
        assert_eq!(
            (r.resource.as_str(), r.subresource.as_deref()),
            ("namespaces", Some("status"))
        );
        let r = res("/apis/worker.gpustack.ai/v1alpha1/devices/n1/status");
        assert_eq!(
            (
                r.group.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("worker.gpustack.ai", Some("n1"), Some("status"))
        );
        let r = res("/api/v1/watch/namespaces/a/pods");
        assert!(r.watch);
        assert_eq!(r.namespace.as_deref(), Some("a"));
        let r = res("/api/v1/pods");
        assert_eq!((r.namespace, r.name), (None, None));
        let r = res("/api/v1/nodes/n1/proxy/stats/summary");
        assert_eq!(
            (
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("nodes", Some("n1"), Some("proxy"))
        );
        let r = res("/api/v1/namespaces/a/pods/p/proxy/x/y");
        assert_eq!(
            (r.namespace.as_deref(), r.subresource.as_deref()),
            (Some("a"), Some("proxy"))
        );
    }
}
