//! `clusters.fleet.gpustack.ai`: the gateway's upstream subscriptions as Kubernetes objects.
//! Reading them renders the gateway's status (`GET /apis/workers`); creating one subscribes
//! through the gateway with the kubeconfig or token held in a Secret of this cluster; deleting
//! one unsubscribes.

use std::collections::BTreeMap;

use gpustack_kube_rest::status::ApiError;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde::Deserialize;
use serde_json::{Value, json};

use super::resources::{FLEET_GROUP, FLEET_VERSION};

const PLURAL: &str = "clusters";
/// Subscriptions' names are DNS labels, as the gateway requires.
const MAX_NAME: usize = 63;
/// Where an unnamed Secret namespace points: the worker's own.
const KUBECONFIG_KEY: &str = "kubeconfig";
const TOKEN_KEY: &str = "token";

/// A `Cluster` object per entry of the gateway's status document.
pub fn from_status(doc: &Value) -> BTreeMap<String, Value> {
    let items = doc["items"].as_array().cloned().unwrap_or_default();
    items
        .into_iter()
        .filter_map(|item| {
            let name = item["cluster"].as_str()?.to_owned();
            let mut status = json!({
                "phase": item["phase"],
                "counts": item["counts"],
            });
            for key in ["lastSyncTime", "lastError", "lastErrorPhase"] {
                if !item[key].is_null() {
                    status[key] = item[key].clone();
                }
            }
            if item["notServed"].as_array().is_some_and(|a| !a.is_empty()) {
                status["notServed"] = item["notServed"].clone();
            }
            let mut obj = json!({
                "apiVersion": format!("{FLEET_GROUP}/{FLEET_VERSION}"),
                "kind": "Cluster",
                "metadata": {"name": name},
            });
            // Created when subscribed, at seconds precision as Kubernetes writes times.
            if let Some(at) = item["subscribedAt"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            {
                let at = jiff::Timestamp::from_second(at.as_second()).unwrap_or(at);
                obj["metadata"]["creationTimestamp"] = json!(at.to_string());
            }
            // The spec it was created with; subscriptions of the operator's file have none.
            if item["clusterSpec"].is_object() {
                obj["spec"] = item["clusterSpec"].clone();
            }
            obj["status"] = status;
            Some((name, obj))
        })
        .collect()
}

/// The phase of each cluster, by name.
pub fn phases(clusters: &BTreeMap<String, Value>) -> BTreeMap<String, String> {
    clusters
        .iter()
        .map(|(n, o)| {
            let phase = o["status"]["phase"].as_str().unwrap_or("").to_owned();
            (n.clone(), phase)
        })
        .collect()
}

/// What a `Cluster` asks for.
#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSpec {
    /// `kubeconfig` (default) or `gpustack-api`.
    #[serde(default)]
    pub mode: Option<String>,
    /// The Secret holding the credential.
    #[serde(default)]
    pub secret_ref: Option<SecretRef>,
    /// The kubeconfig context to use; its current context when absent.
    #[serde(default)]
    pub context: Option<String>,
    /// Kinds mirrored besides the default ones.
    #[serde(default)]
    pub extra_kinds: Vec<String>,
}

/// Where a `Cluster`'s credential is kept.
#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretRef {
    /// The Secret's namespace; the system namespace when absent.
    #[serde(default)]
    pub namespace: Option<String>,
    /// The Secret's name.
    #[serde(default)]
    pub name: String,
    /// The key holding the credential; the mode's default when absent.
    #[serde(default)]
    pub key: Option<String>,
}

/// How the gateway is to reach the new cluster.
#[derive(Debug, PartialEq, Eq)]
pub enum Mode {
    /// A kubeconfig.
    Kubeconfig,
    /// A GPUStack server's API token.
    GpustackApi,
}

/// A checked create request: the name, the mode and where the credential is.
#[derive(Debug)]
pub struct Checked {
    /// The cluster's name.
    pub name: String,
    /// How the gateway reaches it.
    pub mode: Mode,
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub secret: String,
    /// The Secret's key.
    pub key: String,
    /// The kubeconfig context, if one is named.
    pub context: Option<String>,
    /// Kinds mirrored besides the default ones.
    pub extra_kinds: Vec<String>,
}

impl Checked {
    /// The spec as it reads with its defaults filled in (mode, the Secret's namespace and
    /// key): what the `Cluster` shows once created. Names where the credential is, never it.
    pub fn spec(&self) -> Value {
        let mut spec = json!({
            "mode": match self.mode {
                Mode::Kubeconfig => KUBECONFIG_KEY,
                Mode::GpustackApi => "gpustack-api",
            },
            "secretRef": {"namespace": self.namespace, "name": self.secret, "key": self.key},
        });
        if let Some(ctx) = &self.context {
            spec["context"] = json!(ctx);
        }
        if !self.extra_kinds.is_empty() {
            spec["extraKinds"] = json!(self.extra_kinds);
        }
        spec
    }
}

fn invalid(name: &str, message: impl std::fmt::Display) -> ApiError {
    ApiError::invalid("Cluster", name, message)
}

fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Checks a create body; `default_namespace` is where an unqualified Secret is looked up.
pub fn check(body: &Value, default_namespace: &str) -> Result<Checked, ApiError> {
    let name = body["metadata"]["name"].as_str().unwrap_or("").to_owned();
    if body["metadata"].get("generateName").is_some() && name.is_empty() {
        return Err(invalid(
            "",
            "metadata.generateName: Forbidden: a cluster is named by its subscription; give metadata.name",
        ));
    }
    if !dns_label(&name) {
        return Err(invalid(
            &name,
            format!(
                "metadata.name: Invalid value: {name:?}: a DNS label (lowercase letters, digits and '-', at most {MAX_NAME})"
            ),
        ));
    }
    let spec: ClusterSpec = crate::typed::from_json(&body["spec"])
        .map_err(|e| invalid(&name, format!("spec: Invalid value: {e}")))?;
    let mode = match spec.mode.as_deref() {
        None | Some("kubeconfig") => Mode::Kubeconfig,
        Some("gpustack-api") => Mode::GpustackApi,
        Some(other) => {
            return Err(invalid(
                &name,
                format!(
                    "spec.mode: Unsupported value: {other:?}: supported values: \"kubeconfig\", \"gpustack-api\""
                ),
            ));
        }
    };
    let secret = spec.secret_ref.unwrap_or_default();
    if secret.name.is_empty() {
        return Err(invalid(
            &name,
            "spec.secretRef.name: Required value: the Secret holding the cluster's kubeconfig or token",
        ));
    }
    if mode == Mode::GpustackApi && spec.context.is_some() {
        return Err(invalid(
            &name,
            "spec.context: Forbidden: only a kubeconfig has contexts",
        ));
    }
    let key = secret.key.unwrap_or_else(|| {
        match mode {
            Mode::Kubeconfig => KUBECONFIG_KEY,
            Mode::GpustackApi => TOKEN_KEY,
        }
        .to_owned()
    });
    Ok(Checked {
        name,
        mode,
        namespace: secret
            .namespace
            .unwrap_or_else(|| default_namespace.to_owned()),
        secret: secret.name,
        key,
        context: spec.context,
        extra_kinds: spec.extra_kinds,
    })
}

/// The gateway's subscription request for a checked create, with the credential read from the
/// Secret. The credential goes to the gateway only; it is never logged or echoed.
pub async fn subscription(client: &kube::Client, c: &Checked) -> Result<Value, ApiError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &c.namespace);
    let secret = api.get_opt(&c.secret).await.map_err(|e| {
        ApiError::new(
            503,
            "ServiceUnavailable",
            format!("reading secret {}/{}: {e}", c.namespace, c.secret),
        )
    })?;
    let Some(secret) = secret else {
        return Err(invalid(
            &c.name,
            format!(
                "spec.secretRef: Not found: secret {}/{} does not exist",
                c.namespace, c.secret
            ),
        ));
    };
    let value = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&c.key))
        .map(|b| b.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(&c.key))
                .map(|s| s.clone().into_bytes())
        })
        .ok_or_else(|| {
            invalid(
                &c.name,
                format!(
                    "spec.secretRef.key: Not found: secret {}/{} has no key {:?}",
                    c.namespace, c.secret, c.key
                ),
            )
        })?;
    let text = String::from_utf8(value).map_err(|_| {
        invalid(
            &c.name,
            format!(
                "spec.secretRef.key: Invalid value: {:?} of secret {}/{} is not text",
                c.key, c.namespace, c.secret
            ),
        )
    })?;
    let mut body = json!({"clusters": [c.name], "gvks": c.extra_kinds, "clusterSpec": c.spec()});
    match c.mode {
        Mode::Kubeconfig => {
            body["kubeconfigData"] = json!(text);
            if let Some(ctx) = &c.context {
                body["context"] = json!(ctx);
            }
        }
        Mode::GpustackApi => body["token"] = json!(text.trim()),
    }
    Ok(body)
}

/// The error for a gateway's refusal of a subscription (its message, with credentials never
/// part of it).
pub fn refused(name: &str, code: u16, gateway_status: &Value) -> ApiError {
    let message = gateway_status["message"]
        .as_str()
        .unwrap_or("the gateway refused the subscription")
        .to_owned();
    match code {
        400 => invalid(name, format!("spec: Invalid value: {message}")),
        409 => ApiError::new(409, "Conflict", message),
        _ => ApiError::new(
            503,
            "ServiceUnavailable",
            format!("the gateway answered {code}: {message}"),
        ),
    }
}

/// The refusal of a create whose caller may not read the Secret it names.
pub fn secret_forbidden(c: &Checked, user: &str) -> ApiError {
    ApiError::new(
        403,
        "Forbidden",
        format!(
            "clusters.{FLEET_GROUP} \"{}\" is forbidden: User \"{user}\" cannot get resource \"secrets\" in API group \"\" in the namespace \"{}\": spec.secretRef names secret {}/{}",
            c.name, c.namespace, c.namespace, c.secret
        ),
    )
}

/// The 404 for a `Cluster` that does not exist.
pub fn not_found(name: &str) -> ApiError {
    ApiError::not_found(FLEET_GROUP, PLURAL, name)
}

/// The 409 for a `Cluster` that exists already.
pub fn already_exists(name: &str) -> ApiError {
    ApiError::already_exists(FLEET_GROUP, PLURAL, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_entries_become_cluster_objects() {
        let doc = json!({"items": [
            {"cluster": "east", "phase": "Ready", "lastSyncTime": "2026-12-03T10:00:00Z",
             "subscribedAt": "2026-12-01T08:00:00.123456Z",
             "clusterSpec": {"mode": "kubeconfig", "secretRef": {"namespace": "ns", "name": "east", "key": "kubeconfig"}},
             "lastError": null, "notServed": [], "counts": {"Devices.worker.gpustack.ai": 3}},
            {"cluster": "west", "phase": "Degraded", "lastSyncTime": "2026-12-03T09:00:00Z",
             "lastError": "connection refused", "notServed": ["InstanceType.worker.gpustack.ai"], "counts": {}},
        ]});
        let cs = from_status(&doc);
        assert_eq!(
            cs["east"]["status"]["counts"]["Devices.worker.gpustack.ai"],
            3
        );
        assert!(cs["east"]["status"].get("lastError").is_none());
        assert_eq!(cs["west"]["status"]["lastError"], "connection refused");
        assert_eq!(
            cs["west"]["status"]["notServed"][0],
            "InstanceType.worker.gpustack.ai"
        );
        assert_eq!(phases(&cs)["west"], "Degraded");
        assert_eq!(
            cs["east"]["metadata"]["creationTimestamp"],
            "2026-12-01T08:00:00Z"
        );
        assert_eq!(cs["east"]["spec"]["secretRef"]["name"], "east");
        assert!(cs["west"].get("spec").is_none());
        assert!(cs["west"]["metadata"].get("creationTimestamp").is_none());
    }

    #[test]
    fn the_echoed_spec_has_its_defaults_and_reads_back() {
        let body = json!({"metadata": {"name": "east"}, "spec": {"secretRef": {"name": "s"}}});
        let c = check(&body, "gpustack-system").unwrap();
        let spec = c.spec();
        assert_eq!(
            spec,
            json!({"mode": "kubeconfig", "secretRef": {"namespace": "gpustack-system", "name": "s", "key": "kubeconfig"}})
        );
        let again = check(
            &json!({"metadata": {"name": "east"}, "spec": spec}),
            "other",
        )
        .unwrap();
        assert_eq!(
            again.spec(),
            c.spec(),
            "applying what is shown changes nothing"
        );
    }

    #[test]
    fn bad_specs_are_refused_with_one_message_naming_the_field() {
        let msg = |body: Value| check(&body, "gpustack-system").unwrap_err().message;
        assert!(
            msg(json!({"metadata": {"name": "East"}, "spec": {}}))
                .starts_with("Cluster \"East\" is invalid: metadata.name")
        );
        assert!(
            msg(json!({"metadata": {"name": "east"}, "spec": {}}))
                .contains("spec.secretRef.name: Required value")
        );
        assert!(msg(json!({"metadata": {"name": "east"}, "spec": {"mode": "ssh", "secretRef": {"name": "s"}}})).contains("spec.mode: Unsupported value"));
        assert!(
            msg(json!({"metadata": {"name": "east"}, "spec": {"bogus": 1}}))
                .contains("unknown field `bogus`")
        );
        let ok = check(
            &json!({"metadata": {"name": "east"}, "spec": {"mode": "gpustack-api", "secretRef": {"name": "s"}}}),
            "gpustack-system",
        )
        .unwrap();
        assert_eq!(
            (ok.namespace.as_str(), ok.key.as_str()),
            ("gpustack-system", "token")
        );
    }
}
