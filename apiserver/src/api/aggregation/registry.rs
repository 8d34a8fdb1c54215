//! APIServices as data: what a stored `apiregistration.k8s.io/v1` APIService says, and which
//! one a request path belongs to. Pure.

use base64::Engine;
use serde_json::Value;

/// The default `spec.service.port`.
pub const DEFAULT_PORT: u16 = 443;

/// One APIService.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiService {
    /// `VERSION.GROUP`.
    pub name: String,
    /// The API group served.
    pub group: String,
    /// The version of the group served.
    pub version: String,
    /// Where it is served; `None` for a local APIService (served by the cluster itself).
    pub backend: Option<Backend>,
    /// `spec.groupPriorityMinimum`: orders groups in discovery.
    pub group_priority_minimum: i64,
    /// `spec.versionPriority`: orders a group's versions in discovery.
    pub version_priority: i64,
}

/// `spec.service` with how the backend's certificate is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The Service port forwarded to.
    pub port: u16,
    /// `spec.caBundle`, decoded (PEM).
    pub ca_bundle: Option<Vec<u8>>,
    /// `spec.insecureSkipTLSVerify`: the backend's certificate is not checked.
    pub insecure_skip_tls_verify: bool,
}

impl Backend {
    /// The name its serving certificate must carry, as in Kubernetes.
    pub fn server_name(&self) -> String {
        format!("{}.{}.svc", self.name, self.namespace)
    }
}

/// Reads an APIService; `None` when it names no group or version.
pub fn parse(obj: &Value) -> Option<ApiService> {
    let spec = &obj["spec"];
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
    let version = text(&spec["version"])?;
    let group = spec["group"].as_str().unwrap_or_default().to_owned();
    let backend = spec.get("service").filter(|s| s.is_object()).and_then(|s| {
        Some(Backend {
            namespace: text(&s["namespace"])?,
            name: text(&s["name"])?,
            port: s["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(DEFAULT_PORT),
            ca_bundle: spec["caBundle"]
                .as_str()
                .filter(|b| !b.is_empty())
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok()),
            insecure_skip_tls_verify: spec["insecureSkipTLSVerify"].as_bool() == Some(true),
        })
    });
    Some(ApiService {
        name: obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        group,
        version,
        backend,
        group_priority_minimum: spec["groupPriorityMinimum"].as_i64().unwrap_or(0),
        version_priority: spec["versionPriority"].as_i64().unwrap_or(0),
    })
}

/// The group and version of an `/apis/GROUP/VERSION[/...]` path, or of the OpenAPI v3
/// document `/openapi/v3/apis/GROUP/VERSION` (which the backend serves too).
pub fn group_version(path: &str) -> Option<(&str, &str)> {
    let rest = path
        .strip_prefix("/apis/")
        .or_else(|| path.strip_prefix("/openapi/v3/apis/"))?;
    let mut parts = rest.splitn(3, '/');
    let group = parts.next().filter(|g| !g.is_empty())?;
    let version = parts.next().filter(|v| !v.is_empty())?;
    Some((group, version))
}

/// The APIService with a backend that serves the group and version `path` is under.
pub fn route<'a>(services: &'a [ApiService], path: &str) -> Option<&'a ApiService> {
    let (group, version) = group_version(path)?;
    services
        .iter()
        .find(|s| s.backend.is_some() && s.group == group && s.version == version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn remote() -> Value {
        json!({"metadata": {"name": "v1.worker.gpustack.ai"}, "spec": {
            "group": "worker.gpustack.ai", "version": "v1",
            "service": {"namespace": "gpustack-system", "name": "worker"},
            "caBundle": "LS0tLS0=", "groupPriorityMinimum": 100, "versionPriority": 100}})
    }

    #[test]
    fn apiservices_are_read() {
        let s = parse(&remote()).unwrap();
        let b = s.backend.clone().unwrap();
        assert_eq!(
            (b.port, b.server_name().as_str()),
            (443, "worker.gpustack-system.svc")
        );
        assert_eq!(b.ca_bundle.as_deref(), Some(&b"-----"[..]));
        assert_eq!((s.group_priority_minimum, s.version_priority), (100, 100));
        let local = parse(&json!({"metadata": {"name": "v1.apps"},
            "spec": {"group": "apps", "version": "v1"}}))
        .unwrap();
        assert!(local.backend.is_none());
        assert!(parse(&json!({"spec": {"group": "x"}})).is_none());
    }

    #[test]
    fn paths_route_to_their_group_version() {
        let services = [parse(&remote()).unwrap()];
        for p in [
            "/apis/worker.gpustack.ai/v1",
            "/apis/worker.gpustack.ai/v1/namespaces/a/things/b",
            "/openapi/v3/apis/worker.gpustack.ai/v1",
        ] {
            assert!(route(&services, p).is_some(), "{p}");
        }
        for p in [
            "/apis/worker.gpustack.ai",
            "/apis/worker.gpustack.ai/v1alpha1/devices",
            "/api/v1/pods",
            "/apis",
        ] {
            assert!(route(&services, p).is_none(), "{p}");
        }
    }
}
