//! What the worker puts in its cluster before serving, in every replica and idempotently: the
//! system namespace, the project's CRDs, its Service and APIServices, and the Settings Secret.
//! Absent objects are created, drifted ones aligned, terminating ones left alone; the whole
//! pass runs again every 30 seconds.

use std::collections::BTreeMap;

use base64::Engine;
use futures::future::BoxFuture;
use kube::{
    api::{Api, DynamicObject, Patch, PatchParams, PostParams},
    core::{ApiResource, GroupVersionKind},
};
use serde_json::{Value, json};

use crate::names;

/// How the aggregator reaches the worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// A real cluster: the Service selects the worker's Pods; port 443 → the secure port.
    Pods {
        /// The worker's HTTPS port in its Pods.
        secure_port: u16,
    },
    /// An embedded cluster on this machine: the Service points at loopback.
    Loopback {
        /// The worker's HTTPS port on this machine.
        secure_port: u16,
    },
}

/// One object the worker keeps present.
#[derive(Clone, Debug)]
pub struct Desired {
    /// The object's resource.
    pub resource: ApiResource,
    /// Its namespace (none for cluster-scoped objects).
    pub namespace: Option<String>,
    /// The object.
    pub object: Value,
}

impl Desired {
    /// The object's name.
    pub fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or("")
    }

    /// `kind namespace/name` for messages.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.resource.kind, self.name()),
            None => format!("{} {}", self.resource.kind, self.name()),
        }
    }
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Every object of the install, in the order they are ensured (namespace first, the
/// APIServices last: they announce a server that must find its kinds).
pub fn desired(system_namespace: &str, reach: &Reach, ca_pem: &str) -> Vec<Desired> {
    let labels = json!({"app.kubernetes.io/managed-by": "gpustack-operator"});
    let mut out = vec![Desired {
        resource: resource("", "v1", "Namespace", "namespaces"),
        namespace: None,
        object: json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": system_namespace, "labels": labels},
        }),
    }];
    // An embedded cluster has no Kueue: the worker brings the Kueue kinds it reads and writes.
    // On a real cluster Kueue owns them and they are never touched.
    let kueue = match reach {
        Reach::Loopback { .. } => gpustack_api::crds::kueue(),
        Reach::Pods { .. } => Vec::new(),
    };
    for crd in gpustack_api::crds::all().into_iter().chain(kueue) {
        out.push(Desired {
            resource: resource(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
            ),
            namespace: None,
            object: serde_json::to_value(crd).expect("a CRD serializes"),
        });
    }
    let port = service_port(reach);
    let spec = match reach {
        Reach::Pods { secure_port } => json!({
            "selector": {"app.kubernetes.io/name": names::SERVICE},
            "ports": [{"name": "https", "port": port, "targetPort": secure_port, "protocol": "TCP"}],
        }),
        Reach::Loopback { secure_port } => json!({
            "clusterIP": "127.0.0.1",
            "ports": [{"name": "https", "port": port, "targetPort": secure_port, "protocol": "TCP"}],
        }),
    };
    out.push(Desired {
        resource: resource("", "v1", "Service", "services"),
        namespace: Some(system_namespace.to_owned()),
        object: json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": names::SERVICE, "namespace": system_namespace, "labels": labels},
            "spec": spec,
        }),
    });
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    for group in [names::WORKER_GROUP, names::SETTINGS_GROUP] {
        out.push(apiservice(group, system_namespace, port, &ca_bundle, 100));
    }
    // The admission webhooks last: they call a server that must find its kinds too.
    for (kind, plural, object) in
        crate::admission::hooks::configurations(system_namespace, names::SERVICE, port, &ca_bundle)
    {
        out.push(Desired {
            resource: resource("admissionregistration.k8s.io", "v1", kind, plural),
            namespace: None,
            object,
        });
    }
    out
}

/// The port of the worker's Service: 443 in front of its Pods, the process's own on loopback.
fn service_port(reach: &Reach) -> u16 {
    match reach {
        Reach::Pods { .. } => 443,
        Reach::Loopback { secure_port } => *secure_port,
    }
}

/// The APIService `v1.<group>` that points the aggregator at this process.
fn apiservice(
    group: &str,
    system_namespace: &str,
    port: u16,
    ca_bundle: &str,
    priority: u16,
) -> Desired {
    let labels = json!({"app.kubernetes.io/managed-by": "gpustack-operator"});
    Desired {
        resource: resource("apiregistration.k8s.io", "v1", "APIService", "apiservices"),
        namespace: None,
        object: json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": format!("v1.{group}"), "labels": labels},
            "spec": {
                "group": group,
                "version": "v1",
                "service": {"namespace": system_namespace, "name": names::SERVICE, "port": port},
                "caBundle": ca_bundle,
                "groupPriorityMinimum": priority,
                "versionPriority": 100,
            },
        }),
    }
}

/// The APIService of `fleet.gpustack.ai/v1`, registered once the gateway has answered.
pub fn fleet_apiservice(system_namespace: &str, reach: &Reach, ca_pem: &str) -> Desired {
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    apiservice(
        crate::fleet::resources::FLEET_GROUP,
        system_namespace,
        service_port(reach),
        &ca_bundle,
        // Below the worker's own groups: a short name both serve (`devices`) stays the
        // cluster's own; the fleet's is asked for by its full name.
        50,
    )
}

/// Whether `have` already holds everything `want` says (the server may add defaults).
pub fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w
            .iter()
            .all(|(k, wv)| h.get(k).is_some_and(|hv| contains(hv, wv))),
        (Value::Array(h), Value::Array(w)) => {
            h.len() == w.len() && h.iter().zip(w).all(|(hv, wv)| contains(hv, wv))
        }
        _ => have == want,
    }
}

/// What one pass did to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Already as wanted.
    Present,
    /// Created.
    Created,
    /// Present and repaired.
    Aligned,
    /// Being deleted: left alone until it is gone.
    Terminating,
}

/// Installing one object failed.
#[derive(Debug, thiserror::Error)]
#[error("{object}: {source}")]
pub struct InstallError {
    /// The object (`kind/name`).
    pub object: String,
    /// The cause.
    #[source]
    pub source: kube::Error,
}

/// Makes one object present and aligned.
pub fn ensure<'a>(
    client: &'a kube::Client,
    d: &'a Desired,
) -> BoxFuture<'a, Result<Outcome, InstallError>> {
    Box::pin(async move {
        let api: Api<DynamicObject> = match &d.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &d.resource),
            None => Api::all_with(client.clone(), &d.resource),
        };
        let fail = |source| InstallError {
            object: d.describe(),
            source,
        };
        let obj: DynamicObject =
            serde_json::from_value(d.object.clone()).expect("desired objects are objects");
        let Some(current) = api.get_opt(d.name()).await.map_err(fail)? else {
            return match api.create(&PostParams::default(), &obj).await {
                Ok(_) => Ok(Outcome::Created),
                // Another replica made it first.
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Outcome::Present),
                Err(e) => Err(fail(e)),
            };
        };
        if current.metadata.deletion_timestamp.is_some() {
            return Ok(Outcome::Terminating);
        }
        let have = serde_json::to_value(&current).unwrap_or(Value::Null);
        // The body is `spec`, or `webhooks` for a webhook configuration: every top-level field
        // but the type and metadata.
        let drifted: Vec<(&String, &Value)> = d
            .object
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
            .filter(|(k, want)| !contains(&have[k.as_str()], want))
            .collect();
        let want_labels = d.object["metadata"].get("labels").cloned();
        let labels_ok = want_labels
            .as_ref()
            .is_none_or(|l| contains(&have["metadata"]["labels"], l));
        if drifted.is_empty() && labels_ok {
            return Ok(Outcome::Present);
        }
        let mut patch = json!({});
        for (k, want) in drifted {
            patch[k.as_str()] = want.clone();
        }
        if !labels_ok {
            patch["metadata"] = json!({"labels": want_labels});
        }
        api.patch(d.name(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(fail)?;
        Ok(Outcome::Aligned)
    })
}

/// One pass over everything; every failure is reported, none stops the others.
pub async fn ensure_all(
    client: &kube::Client,
    objects: &[Desired],
    settings_namespace: &str,
    settings_seed: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut errors = Vec::new();
    for d in objects {
        match ensure(client, d).await {
            Ok(Outcome::Present) => {}
            Ok(outcome) => tracing::info!(object = %d.describe(), ?outcome, "install"),
            Err(e) => errors.push(e.to_string()),
        }
        // The Secret goes in once the namespace it lives in exists.
        if d.resource.kind == "Namespace" {
            match crate::settings::store::ensure(client, settings_namespace, settings_seed).await {
                Ok(added) if !added.is_empty() => {
                    tracing::info!(keys = added.len(), "settings seeded or backfilled")
                }
                Ok(_) => {}
                Err(e) => errors.push(e.to_string()),
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_in_order() {
        let objs = desired("gpustack-system", &Reach::Pods { secure_port: 31443 }, "CA");
        let kinds: Vec<&str> = objs.iter().map(|d| d.resource.kind.as_str()).collect();
        assert_eq!(kinds.first(), Some(&"Namespace"));
        assert_eq!(
            kinds
                .iter()
                .filter(|k| **k == "CustomResourceDefinition")
                .count(),
            6
        );
        let apis: Vec<&Desired> = objs
            .iter()
            .filter(|d| d.resource.kind == "APIService")
            .collect();
        assert_eq!(apis.len(), 2);
        assert_eq!(apis[0].object["metadata"]["name"], "v1.worker.gpustack.ai");
        assert_eq!(apis[1].object["metadata"]["name"], "v1.gpustack.ai");
        assert_eq!(apis[0].object["spec"]["groupPriorityMinimum"], 100);
        assert_eq!(apis[0].object["spec"]["service"]["port"], 443);
        assert_eq!(apis[0].object["spec"]["caBundle"], "Q0E=");
        let svc = objs.iter().find(|d| d.resource.kind == "Service").unwrap();
        assert_eq!(svc.object["spec"]["ports"][0]["targetPort"], 31443);
        let local = desired("s", &Reach::Loopback { secure_port: 40000 }, "CA");
        let svc = local.iter().find(|d| d.resource.kind == "Service").unwrap();
        assert_eq!(svc.object["spec"]["clusterIP"], "127.0.0.1");
        assert_eq!(svc.describe(), "Service s/gpustack-operator-worker");
        // Only the body is compared for drift: nothing else may sit beside it.
        for d in &objs {
            let keys: Vec<&String> = d.object.as_object().unwrap().keys().collect();
            let body: Vec<&&String> = keys
                .iter()
                .filter(|k| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
                .collect();
            assert!(body.len() <= 1, "{}: {keys:?}", d.describe());
        }
        let hooks: Vec<&str> = objs
            .iter()
            .filter(|d| d.resource.group == "admissionregistration.k8s.io")
            .map(|d| d.object["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            hooks,
            ["gpustack-worker-mutation", "gpustack-worker-validation"]
        );
        let local_hooks = local.last().unwrap();
        assert_eq!(
            local_hooks.object["webhooks"][0]["clientConfig"]["service"]["port"],
            40000
        );
    }

    #[test]
    fn server_defaults_do_not_count_as_drift() {
        let want = json!({"a": 1, "b": [{"x": 1}]});
        assert!(contains(
            &json!({"a": 1, "b": [{"x": 1, "default": true}], "c": 3}),
            &want
        ));
        assert!(!contains(&json!({"a": 2, "b": [{"x": 1}]}), &want));
        assert!(!contains(
            &json!({"a": 1, "b": [{"x": 1}, {"x": 2}]}),
            &want
        ));
    }
}
