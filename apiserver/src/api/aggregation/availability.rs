//! The availability check of APIServices, as kube-aggregator's: every interval (and as soon as
//! an APIService or Service changes), each APIService with a backend is asked for its
//! `/apis/GROUP/VERSION` (as `system:kube-aggregator` in `system:masters`, with the front-proxy
//! certificate); the `APIResourceList` it answers is kept for discovery, and the APIService's
//! `Available` condition is written only when it changes. Checks run concurrently and each is
//! bounded, so one slow backend delays no other.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, Method, header};
use http_body_util::{BodyExt, Limited};
use serde_json::{Value, json};
use tokio::sync::{broadcast::error::RecvError, watch};

use super::{
    Aggregator, Unreachable,
    registry::{self, ApiService},
};
use crate::{
    api::{
        auth::{MASTERS, UserInfo},
        services::ResolveError,
        stored_kinds::replace_as_read,
    },
    store::{ObjectKey, Store, StoreError},
};

/// The largest discovery document read from a backend.
const MAX_DISCOVERY_BYTES: usize = 3 << 20;
/// How long one check may take, connecting included.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

const GROUP: &str = "apiregistration.k8s.io";
const RESOURCE: &str = "apiservices";

/// What one check found.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Served by the cluster itself.
    Local,
    /// The backend answered its discovery document.
    Passed(Value),
    /// The backend's Service does not exist (the condition's reason and message).
    ServiceNotFound(String),
    /// The backend did not answer its discovery document (the condition's message).
    FailedDiscoveryCheck(String),
}

impl Verdict {
    /// The `Available` condition's status, reason and message.
    pub fn condition(&self) -> (&'static str, &'static str, String) {
        match self {
            Verdict::Local => (
                "True",
                "Local",
                "Local APIServices are always available".into(),
            ),
            Verdict::Passed(_) => ("True", "Passed", "all checks passed".into()),
            Verdict::ServiceNotFound(m) => ("False", "ServiceNotFound", m.clone()),
            Verdict::FailedDiscoveryCheck(m) => ("False", "FailedDiscoveryCheck", m.clone()),
        }
    }
}

/// `status` with its `Available` condition set from `verdict` at `now`; `None` when it already
/// says so (nothing to write).
pub fn updated_status(status: &Value, verdict: &Verdict, now: &str) -> Option<Value> {
    let (state, reason, message) = verdict.condition();
    let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    let at = conditions.iter().position(|c| c["type"] == "Available");
    let old = at.map(|i| conditions[i].clone());
    if let Some(old) = &old
        && old["status"] == state
        && old["reason"] == reason
        && old["message"] == message.as_str()
    {
        return None;
    }
    let since = match &old {
        Some(o) if o["status"] == state => o["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    let condition = json!({"type": "Available", "status": state, "lastTransitionTime": since,
        "reason": reason, "message": message});
    match at {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    let mut status = if status.is_object() {
        status.clone()
    } else {
        json!({})
    };
    status["conditions"] = Value::Array(conditions);
    Some(status)
}

/// Why a discovery check failed once connected.
#[derive(Debug, thiserror::Error)]
enum CheckError {
    #[error(transparent)]
    Proxy(#[from] super::proxy::ProxyError),
    #[error("reading the response")]
    Read(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("bad status {0}")]
    Status(u16),
    #[error("decoding the response")]
    Decode(#[from] serde_json::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Checks the APIServices of the clusters named, until `stop`.
pub struct Checker {
    /// Where the APIServices are read and their conditions written.
    pub store: Store,
    /// What probes the backends and keeps their discovery.
    pub aggregator: Aggregator,
    /// The clusters whose APIServices are checked.
    pub clusters: Vec<String>,
    /// How often every APIService is checked again (changes are checked at once).
    pub interval: Duration,
}

impl Checker {
    /// Checks until `stop` turns true: every `interval`, and whenever a change that can
    /// affect an APIService's availability is committed.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut events = self.store.subscribe();
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                ev = events.recv() => match ev {
                    Ok(ev) if relevant(&ev.key) => {}
                    Ok(_) => continue,
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                },
                _ = stop.changed() => return,
            }
            let checks = self.clusters.iter().map(|c| self.check_cluster(c));
            futures::future::join_all(checks).await;
        }
    }

    async fn check_cluster(&self, cluster: &str) {
        let stored = match self
            .store
            .list(cluster, GROUP, RESOURCE, None, None, 0)
            .await
        {
            Ok(page) => page.items,
            Err(e) => {
                tracing::warn!(cluster, error = %e, "listing APIServices failed");
                return;
            }
        };
        let services: Vec<(ApiService, Value)> = stored
            .into_iter()
            .filter_map(|o| registry::parse(&o).map(|s| (s, o)))
            .collect();
        self.aggregator
            .retain_discovered(cluster, |name| services.iter().any(|(s, _)| s.name == name));
        let checks = services.iter().map(|(s, obj)| async move {
            let verdict = self.check(cluster, s).await;
            match &verdict {
                Verdict::Passed(list) => {
                    self.aggregator.set_discovered(cluster, &s.name, Some(list.clone()))
                }
                _ => self.aggregator.set_discovered(cluster, &s.name, None),
            }
            if let Err(e) = self.write(cluster, obj, &verdict).await {
                tracing::warn!(cluster, apiservice = %s.name, error = %e, "writing APIService status failed");
            }
        });
        futures::future::join_all(checks).await;
    }

    async fn check(&self, cluster: &str, s: &ApiService) -> Verdict {
        let Some(backend) = &s.backend else {
            return Verdict::Local;
        };
        let pool = match self
            .aggregator
            .connection(&self.store, cluster, backend)
            .await
        {
            Ok(c) => c,
            Err(Unreachable::Service(ResolveError::NotFound { namespace, name })) => {
                return Verdict::ServiceNotFound(format!(
                    "service/{name} in \"{namespace}\" is not present"
                ));
            }
            Err(e) => return Verdict::FailedDiscoveryCheck(e.to_string()),
        };
        let url = format!(
            "https://{}/apis/{}/{}",
            pool.endpoint().authority(),
            s.group,
            s.version
        );
        let fetched = tokio::time::timeout(CHECK_TIMEOUT, async {
            let checker = UserInfo {
                username: "system:kube-aggregator".into(),
                uid: String::new(),
                groups: vec![MASTERS.into()],
                extra: Default::default(),
            };
            let mut headers = super::proxy::forwarded_headers(&HeaderMap::new(), &checker);
            headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
            let path = format!("/apis/{}/{}", s.group, s.version);
            let response = super::proxy::send_on_new_connection(
                &pool,
                Method::GET,
                &path,
                headers,
                &self.aggregator.timeouts(),
            )
            .await?;
            let code = response.status();
            let body = Limited::new(response.into_body(), MAX_DISCOVERY_BYTES)
                .collect()
                .await
                .map_err(CheckError::Read)?
                .to_bytes();
            if !code.is_success() {
                return Err(CheckError::Status(code.as_u16()));
            }
            Ok(serde_json::from_slice::<Value>(&body)?)
        })
        .await
        .unwrap_or(Err(CheckError::Timeout(CHECK_TIMEOUT)));
        match fetched {
            Ok(list) => Verdict::Passed(list),
            Err(e) => Verdict::FailedDiscoveryCheck(format!(
                "failing or missing response from {url}: {}",
                super::chain(&e)
            )),
        }
    }

    async fn write(&self, cluster: &str, obj: &Value, verdict: &Verdict) -> Result<(), StoreError> {
        let now = jiff::Timestamp::now()
            .round(jiff::Unit::Second)
            .unwrap_or(jiff::Timestamp::now());
        let Some(status) = updated_status(&obj["status"], verdict, &now.to_string()) else {
            return Ok(());
        };
        let mut updated = obj.clone();
        updated["status"] = status;
        replace_as_read(&self.store, cluster, (GROUP, RESOURCE), obj, updated)
            .await
            .map(|_| ())
    }
}

/// Whether a change to `key` may change an APIService's availability.
fn relevant(key: &ObjectKey) -> bool {
    (key.group == GROUP && key.resource == RESOURCE)
        || (key.group.is_empty() && key.resource == "services")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_is_written_only_when_it_changes() {
        let passed = Verdict::Passed(json!({}));
        let first = updated_status(&Value::Null, &passed, "2026-01-01T00:00:00Z").unwrap();
        let c = &first["conditions"][0];
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("True"), Some("Passed"))
        );
        assert!(updated_status(&first, &passed, "2026-01-02T00:00:00Z").is_none());
        let down = Verdict::FailedDiscoveryCheck("dial tcp: refused".into());
        let second = updated_status(&first, &down, "2026-01-03T00:00:00Z").unwrap();
        let c = &second["conditions"][0];
        assert_eq!(c["reason"], "FailedDiscoveryCheck");
        assert_eq!(c["lastTransitionTime"], "2026-01-03T00:00:00Z");
        assert_eq!(second["conditions"].as_array().unwrap().len(), 1);
        // Another failure message: rewritten, the transition time kept.
        let other = Verdict::ServiceNotFound("service/x in \"y\" is not present".into());
        let third = updated_status(&second, &other, "2026-01-04T00:00:00Z").unwrap();
        assert_eq!(
            third["conditions"][0]["lastTransitionTime"],
            "2026-01-03T00:00:00Z"
        );
        assert_eq!(Verdict::Local.condition().1, "Local");
    }
}
