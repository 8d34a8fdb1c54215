//! Authentication and authorization delegated to the cluster, as an extension API server does:
//! bearer tokens checked with TokenReview, every request with SubjectAccessReview; both answers
//! cached for their TTLs so a busy client costs the cluster one review per TTL.

use std::{
    collections::HashMap,
    hash::Hash,
    sync::Mutex,
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec},
    authorization::v1::{
        NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    },
};
use kube::api::{Api, PostParams};

use super::identity::{Attributes, User};

/// Entries kept per cache; past it, expired entries go, then everything (a flood of distinct
/// tokens must not grow memory without bound).
const MAX_ENTRIES: usize = 10_000;

/// A small TTL cache.
pub struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash, V: Clone> Default for TtlCache<K, V> {
    fn default() -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(key)
            .filter(|(_, until)| *until > now)
            .map(|(v, _)| v.clone())
    }

    pub fn put(&self, key: K, value: V, ttl: Duration, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, (_, until)| *until > now);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (value, now + ttl));
    }
}

/// How long answers are kept, and how long a review may take.
#[derive(Clone, Copy, Debug)]
pub struct Ttls {
    pub authenticated: Duration,
    pub allowed: Duration,
    pub denied: Duration,
    pub timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("the cluster did not answer the {0} in time")]
    Timeout(&'static str),
    #[error("the {kind} failed: {source}")]
    Kube {
        kind: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// The reviews and their caches.
pub struct Delegated {
    client: kube::Client,
    ttls: Ttls,
    tokens: TtlCache<String, Option<User>>,
    decisions: TtlCache<(User, Attributes), (bool, String)>,
}

impl Delegated {
    pub fn new(client: kube::Client, ttls: Ttls) -> Self {
        Delegated {
            client,
            ttls,
            tokens: TtlCache::default(),
            decisions: TtlCache::default(),
        }
    }

    /// The user a bearer token belongs to; `None` when the cluster does not know it.
    pub async fn authenticate(&self, token: &str) -> Result<Option<User>, ReviewError> {
        let now = Instant::now();
        if let Some(hit) = self.tokens.get(&token.to_owned(), now) {
            return Ok(hit);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer = tokio::time::timeout(
            self.ttls.timeout,
            api.create(&PostParams::default(), &review),
        )
        .await
        .map_err(|_| ReviewError::Timeout("TokenReview"))?
        .map_err(|source| ReviewError::Kube {
            kind: "TokenReview",
            source,
        })?;
        let status = answer.status.unwrap_or_default();
        let user = status
            .authenticated
            .unwrap_or(false)
            .then(|| status.user.unwrap_or_default())
            .map(|u| User {
                name: u.username.unwrap_or_default(),
                uid: u.uid.unwrap_or_default(),
                groups: u.groups.unwrap_or_default(),
                extra: u.extra.unwrap_or_default().into_iter().collect(),
            })
            .filter(|u| !u.name.is_empty());
        // A refused token is cached too (for the denied TTL), so guessing costs the cluster
        // one review per token per TTL.
        let ttl = if user.is_some() {
            self.ttls.authenticated
        } else {
            self.ttls.denied
        };
        self.tokens.put(token.to_owned(), user.clone(), ttl, now);
        Ok(user)
    }

    /// Whether `user` may do `attrs`, and the reason the cluster gave.
    pub async fn authorize(
        &self,
        user: &User,
        attrs: &Attributes,
    ) -> Result<(bool, String), ReviewError> {
        if user.is_master() {
            return Ok((true, String::new()));
        }
        let now = Instant::now();
        let key = (user.clone(), attrs.clone());
        if let Some(hit) = self.decisions.get(&key, now) {
            return Ok(hit);
        }
        let mut spec = SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone().into_iter().collect()),
            ..Default::default()
        };
        match attrs {
            Attributes::Resource {
                verb,
                group,
                version,
                resource,
                subresource,
                namespace,
                name,
            } => {
                spec.resource_attributes = Some(ResourceAttributes {
                    verb: Some(verb.clone()),
                    group: Some(group.clone()),
                    version: Some(version.clone()),
                    resource: Some(resource.clone()),
                    subresource: Some(subresource.clone()),
                    namespace: Some(namespace.clone()),
                    name: Some(name.clone()),
                    ..Default::default()
                })
            }
            Attributes::NonResource { verb, path } => {
                spec.non_resource_attributes = Some(NonResourceAttributes {
                    verb: Some(verb.clone()),
                    path: Some(path.clone()),
                })
            }
        }
        let review = SubjectAccessReview {
            spec,
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = tokio::time::timeout(
            self.ttls.timeout,
            api.create(&PostParams::default(), &review),
        )
        .await
        .map_err(|_| ReviewError::Timeout("SubjectAccessReview"))?
        .map_err(|source| ReviewError::Kube {
            kind: "SubjectAccessReview",
            source,
        })?;
        let status = answer.status.unwrap_or_default();
        let decision = (
            status.allowed && !status.denied.unwrap_or(false),
            status.reason.unwrap_or_default(),
        );
        let ttl = if decision.0 {
            self.ttls.allowed
        } else {
            self.ttls.denied
        };
        self.decisions.put(key, decision.clone(), ttl, now);
        Ok(decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_the_cache_stays_bounded() {
        let c: TtlCache<u32, u32> = TtlCache::default();
        let t0 = Instant::now();
        c.put(1, 10, Duration::from_secs(5), t0);
        assert_eq!(c.get(&1, t0), Some(10));
        assert_eq!(c.get(&1, t0 + Duration::from_secs(6)), None);
        for k in 0..(MAX_ENTRIES as u32 + 10) {
            c.put(k, k, Duration::from_secs(60), t0);
        }
        assert!(c.entries.lock().unwrap().len() <= MAX_ENTRIES);
    }
}
