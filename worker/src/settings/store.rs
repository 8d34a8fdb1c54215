//! The Settings Secret (`<system namespace>/gpustack-settings`): one key per setting. The first
//! start seeds it from `GPUSTACK_<SETTING>` or the defaults; later starts only add keys that
//! are missing, so what users changed stays.

use std::collections::BTreeMap;

use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use super::catalog::{self, CATALOG};
use super::validate::{self, Refused};
use super::view::SecretMeta;

/// The Secret's name.
pub const SECRET_NAME: &str = "gpustack-settings";

/// Why the settings could not be read or seeded.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An environment variable seeds an invalid value.
    #[error("{var}: {refused}")]
    BadEnvironment {
        /// The variable.
        var: String,
        /// Why its value was refused.
        refused: Refused,
    },
    /// The Secret could not be read or written.
    #[error("secret {namespace}/{SECRET_NAME}: {source}")]
    Kube {
        /// The Secret's namespace.
        namespace: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

impl StoreError {
    fn kube(namespace: &str) -> impl FnOnce(kube::Error) -> StoreError + '_ {
        move |source| StoreError::Kube {
            namespace: namespace.to_owned(),
            source,
        }
    }

    /// The cluster's answer code, when it gave one (409 on a stale resourceVersion).
    pub fn code(&self) -> Option<u16> {
        match self {
            StoreError::Kube {
                source: kube::Error::Api(s),
                ..
            } => Some(s.code),
            _ => None,
        }
    }
}

/// The values to seed: each setting from its environment variable when set, else its default.
pub fn seed_values(
    env: impl Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, String>, StoreError> {
    let mut out = BTreeMap::new();
    for def in CATALOG {
        let var = catalog::env_name(def.name);
        let value = env(&var).unwrap_or_else(|| def.default.to_owned());
        out.insert(def.name.to_owned(), value);
    }
    for def in CATALOG {
        let value = &out[def.name];
        validate::value(def, value, |other| out.get(other).cloned()).map_err(|refused| {
            StoreError::BadEnvironment {
                var: catalog::env_name(def.name),
                refused,
            }
        })?;
    }
    Ok(out)
}

fn decode(secret: &Secret) -> BTreeMap<String, String> {
    secret
        .data
        .iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), String::from_utf8(v.0.clone()).ok()?)))
        .collect()
}

fn meta(secret: &Secret) -> SecretMeta {
    SecretMeta {
        resource_version: secret.metadata.resource_version.clone().unwrap_or_default(),
        creation_timestamp: secret
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
    }
}

/// Creates the Secret, or adds the keys it lacks. Returns the keys it wrote.
pub async fn ensure(
    client: &kube::Client,
    namespace: &str,
    seed: &BTreeMap<String, String>,
) -> Result<Vec<String>, StoreError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let existing = api
        .get_opt(SECRET_NAME)
        .await
        .map_err(StoreError::kube(namespace))?;
    let Some(existing) = existing else {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(SECRET_NAME.into()),
                namespace: Some(namespace.into()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_owned(),
                    "gpustack-operator".to_owned(),
                )])),
                ..Default::default()
            },
            data: Some(
                seed.iter()
                    .map(|(k, v)| (k.clone(), ByteString(v.clone().into_bytes())))
                    .collect(),
            ),
            ..Default::default()
        };
        return match api.create(&PostParams::default(), &secret).await {
            Ok(_) => Ok(seed.keys().cloned().collect()),
            // Another replica seeded it first: theirs stands.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Vec::new()),
            Err(e) => Err(StoreError::kube(namespace)(e)),
        };
    };
    let have = decode(&existing);
    let missing: BTreeMap<&String, ByteString> = seed
        .iter()
        .filter(|(k, _)| !have.contains_key(*k))
        .map(|(k, v)| (k, ByteString(v.clone().into_bytes())))
        .collect();
    if missing.is_empty() {
        return Ok(Vec::new());
    }
    let patch = json!({"data": missing});
    api.patch(SECRET_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(StoreError::kube(namespace))?;
    Ok(missing.keys().map(|k| (*k).clone()).collect())
}

/// The stored values and the Secret's version; empty when the Secret is missing.
pub async fn read(
    client: &kube::Client,
    namespace: &str,
) -> Result<(BTreeMap<String, String>, SecretMeta), StoreError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    match api
        .get_opt(SECRET_NAME)
        .await
        .map_err(StoreError::kube(namespace))?
    {
        Some(s) => Ok((decode(&s), meta(&s))),
        None => Ok((BTreeMap::new(), SecretMeta::default())),
    }
}

/// Writes one value; with `resource_version`, only if the Secret is still at it (409
/// otherwise). Returns the Secret's new version.
pub async fn write(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    value: &str,
    resource_version: Option<&str>,
    dry_run: bool,
) -> Result<SecretMeta, StoreError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut patch = json!({"data": {name: ByteString(value.as_bytes().to_vec())}});
    if let Some(rv) = resource_version.filter(|rv| !rv.is_empty()) {
        patch["metadata"] = json!({"resourceVersion": rv});
    }
    let params = PatchParams {
        dry_run,
        ..Default::default()
    };
    let secret = api
        .patch(SECRET_NAME, &params, &Patch::Merge(&patch))
        .await
        .map_err(StoreError::kube(namespace))?;
    Ok(meta(&secret))
}

/// Follows the Secret: the parsed values and version after each change.
pub fn watch(
    client: &kube::Client,
    namespace: &str,
) -> impl futures::Stream<
    Item = Result<(BTreeMap<String, String>, SecretMeta), kube::runtime::watcher::Error>,
> + Send
+ 'static {
    use futures::StreamExt;
    let config =
        kube::runtime::watcher::Config::default().fields(&format!("metadata.name={SECRET_NAME}"));
    let watched = gpustack_watch::objects::<Secret>(client.clone(), Some(namespace), config);
    watched.filter_map(|ev| async move {
        use kube::runtime::watcher::Event;
        match ev {
            Ok(Event::Apply(s) | Event::InitApply(s)) => Some(Ok((decode(&s), meta(&s)))),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_from_the_environment_or_defaults_and_checks_them() {
        let seed = seed_values(|var| {
            (var == "GPUSTACK_WORKLOAD_FIT_AFFINITY").then(|| "false".to_owned())
        })
        .unwrap();
        assert_eq!(seed["workload-fit-affinity"], "false");
        assert_eq!(seed["image-pull-policy"], "IfNotPresent");
        assert_eq!(seed.len(), CATALOG.len());
        let err = seed_values(|var| {
            (var == "GPUSTACK_MODEL_STORE_DOWNLOAD_CONCURRENCY").then(|| "0".to_owned())
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "GPUSTACK_MODEL_STORE_DOWNLOAD_CONCURRENCY: setting \"model-store-download-concurrency\" must be a whole number from 1 to 64"
        );
    }
}
