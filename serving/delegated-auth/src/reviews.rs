//! The cluster's two reviews through a `kube::Client` passed in: TokenReview for a bearer
//! token, SubjectAccessReview for a request; both answers cached for their TTLs so a busy client
//! costs the cluster one review per TTL.

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec},
    authorization::v1::{
        NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    },
};
use kube::api::{Api, PostParams};

use crate::{
    identity::{Attributes, User},
    ttl_cache::TtlCache,
};

/// How long answers are kept, and how long a review may take.
#[derive(Clone, Copy, Debug)]
pub struct Ttls {
    /// How long a token's user is kept.
    pub authenticated: Duration,
    /// How long an allowed decision is kept.
    pub allowed: Duration,
    /// How long a refused token or a denied decision is kept.
    pub denied: Duration,
    /// How long one review may take.
    pub timeout: Duration,
}

impl Default for Ttls {
    /// kube-apiserver's webhook defaults: ten seconds each.
    fn default() -> Self {
        let ten = Duration::from_secs(10);
        Ttls {
            authenticated: ten,
            allowed: ten,
            denied: ten,
            timeout: ten,
        }
    }
}

/// Why the cluster gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The review took longer than [`Ttls::timeout`].
    #[error("the cluster did not answer the {0} in time")]
    Timeout(&'static str),
    /// The review request failed.
    #[error("the {kind} failed: {source}")]
    Kube {
        /// `TokenReview` or `SubjectAccessReview`.
        kind: &'static str,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

/// A review's answer to come. Boxed here, so that the crates awaiting it call this crate's
/// compiled review instead of compiling kube's create of both review kinds again each (async
/// bodies are compiled where they are polled; issue 41's build time).
pub type Pending<'a, T> = BoxFuture<'a, Result<T, ReviewError>>;

/// The reviews and their caches.
pub struct Delegated {
    client: kube::Client,
    ttls: Ttls,
    tokens: TtlCache<String, Option<User>>,
    decisions: TtlCache<(User, Attributes), (bool, String)>,
}

impl Delegated {
    /// Reviews through `client` (whose identity needs `create` on both review kinds).
    pub fn new(client: kube::Client, ttls: Ttls) -> Self {
        Delegated {
            client,
            ttls,
            tokens: TtlCache::default(),
            decisions: TtlCache::default(),
        }
    }

    /// The user a bearer token belongs to; `None` when the cluster does not know it.
    pub fn authenticate<'a>(&'a self, token: &'a str) -> Pending<'a, Option<User>> {
        Box::pin(self.reviewed_token(token))
    }

    async fn reviewed_token(&self, token: &str) -> Result<Option<User>, ReviewError> {
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
    pub fn authorize<'a>(
        &'a self,
        user: &'a User,
        attrs: &'a Attributes,
    ) -> Pending<'a, (bool, String)> {
        Box::pin(self.reviewed_access(user, attrs))
    }

    async fn reviewed_access(
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
