//! Who may call the worker's API. Requests from the cluster's aggregator carry the user in
//! headers, believed only with the front-proxy client certificate; other callers present a
//! bearer token (TokenReview). Every request is then authorized with SubjectAccessReview,
//! except the paths anyone may reach and `system:masters`.

pub mod delegated;
pub mod front_proxy;
pub mod identity;

use std::sync::{Arc, RwLock};

use axum::http::{HeaderMap, Method};
use gpustack_kube_rest::status::ApiError;
pub use gpustack_serving::serve::PeerCertificates;

use delegated::Delegated;
use front_proxy::Trust;
use identity::{Attributes, User};

/// The authenticator and authorizer, or nothing (`--disable-auths`).
pub enum Auth {
    /// Everything is allowed (`--disable-auths`).
    Disabled,
    /// The cluster decides: TokenReview and SubjectAccessReview, and the front proxy's headers.
    Delegated {
        /// The review client.
        reviews: Box<Delegated>,
        /// The front proxy's trust, once read from the cluster.
        trust: Arc<RwLock<Option<Trust>>>,
    },
}

/// The user `--disable-auths` lets everything through as (for audit lines).
fn anonymous_admin() -> User {
    User {
        name: "system:anonymous".into(),
        groups: vec!["system:masters".into()],
        ..Default::default()
    }
}

/// A refused request: the error to answer, and who asked when that is known (for the audit).
#[derive(Debug)]
pub struct Denied {
    /// Who asked, when authentication got that far.
    pub user: Option<User>,
    /// The answer to send.
    pub error: ApiError,
}

impl From<ApiError> for Denied {
    fn from(error: ApiError) -> Self {
        Denied { user: None, error }
    }
}

impl Auth {
    /// The caller, if allowed to do what the request asks.
    pub async fn check(
        &self,
        peer: Option<&PeerCertificates>,
        headers: &HeaderMap,
        method: &Method,
        path: &str,
        watch: bool,
    ) -> Result<User, Denied> {
        let Auth::Delegated { reviews, trust } = self else {
            return Ok(anonymous_admin());
        };
        if identity::always_allowed(path) {
            return Ok(User::default());
        }
        self.check_delegated(reviews, trust, peer, headers, method, path, watch)
            .await
    }

    /// Whether the caller may scrape `/metrics`: authenticated, then allowed `get` on the
    /// non-resource URL (always, with `--disable-auths`). Both answers are cached for their TTLs.
    pub async fn check_metrics(
        &self,
        peer: Option<&PeerCertificates>,
        headers: &HeaderMap,
    ) -> Result<User, Denied> {
        let Auth::Delegated { reviews, trust } = self else {
            return Ok(anonymous_admin());
        };
        self.check_delegated(
            reviews,
            trust,
            peer,
            headers,
            &Method::GET,
            "/metrics",
            false,
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn check_delegated(
        &self,
        reviews: &Delegated,
        trust: &RwLock<Option<Trust>>,
        peer: Option<&PeerCertificates>,
        headers: &HeaderMap,
        method: &Method,
        path: &str,
        watch: bool,
    ) -> Result<User, Denied> {
        let user = self.authenticate(reviews, trust, peer, headers).await?;
        // Impersonation is the cluster API server's to check and apply (the aggregator sends
        // the identity it settled on); asked of this server directly it is refused, never
        // ignored.
        if headers
            .keys()
            .any(|k| k.as_str().starts_with("impersonate-"))
        {
            return Err(Denied {
                user: Some(user),
                error: ApiError::new(
                    403,
                    "Forbidden",
                    "impersonation is not served here: send the request through the cluster's API server",
                ),
            });
        }
        let attrs = identity::attributes(method, path, watch);
        let (allowed, reason) = reviews
            .authorize(&user, &attrs)
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
        if allowed {
            Ok(user)
        } else {
            let error = forbidden(&user, &attrs, &reason);
            Err(Denied {
                user: Some(user),
                error,
            })
        }
    }

    /// Whether a webhook review may be answered: it must come from the cluster's API server
    /// (the front-proxy client certificate the cluster publishes the CA of, as an embedded
    /// cluster presents it) or from a caller the cluster authenticates and allows to POST the
    /// webhook's path. Anyone else could make the worker read the cluster on their behalf.
    pub async fn check_review(
        &self,
        peer: Option<&PeerCertificates>,
        headers: &HeaderMap,
        path: &str,
    ) -> Result<(), Denied> {
        let Auth::Delegated { reviews, trust } = self else {
            return Ok(());
        };
        let trusted = trust.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let (Some(peer), Some(trusted)) = (peer, trusted.as_ref())
            && front_proxy::allowed(trusted, &peer.0)
        {
            return Ok(());
        }
        let user = self.authenticate(reviews, trust, peer, headers).await?;
        let attrs = identity::attributes(&Method::POST, path, false);
        let (allowed, reason) = reviews
            .authorize(&user, &attrs)
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
        if allowed {
            Ok(())
        } else {
            let error = forbidden(&user, &attrs, &reason);
            Err(Denied {
                user: Some(user),
                error,
            })
        }
    }

    /// Whether `user` may do `attrs` (always, with `--disable-auths`): for what a request
    /// reaches besides its own path, such as the Secret a fleet `Cluster` names.
    pub async fn may(&self, user: &User, attrs: &Attributes) -> Result<bool, ApiError> {
        let Auth::Delegated { reviews, .. } = self else {
            return Ok(true);
        };
        reviews
            .authorize(user, attrs)
            .await
            .map(|(allowed, _)| allowed)
            .map_err(|e| ApiError::internal(e.to_string()))
    }

    async fn authenticate(
        &self,
        reviews: &Delegated,
        trust: &RwLock<Option<Trust>>,
        peer: Option<&PeerCertificates>,
        headers: &HeaderMap,
    ) -> Result<User, ApiError> {
        let trust = trust.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let (Some(peer), Some(trust)) = (peer, trust.as_ref())
            && front_proxy::allowed(trust, &peer.0)
            && let Some(user) = identity::from_request_headers(headers, &trust.headers)
        {
            return Ok(user);
        }
        let token = gpustack_delegated_auth::identity::bearer_token(headers)
            .ok_or_else(ApiError::unauthorized)?;
        match reviews.authenticate(token).await {
            Ok(Some(user)) => Ok(user),
            Ok(None) => Err(ApiError::unauthorized()),
            Err(e) => Err(ApiError::internal(e.to_string())),
        }
    }
}

/// kube-apiserver's wording of a denial, with the authorizer's reason.
fn forbidden(user: &User, attrs: &Attributes, reason: &str) -> ApiError {
    let mut message = match attrs {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
            ..
        } => gpustack_kube_rest::status::ResourceRequest {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
        }
        .forbidden_message(&user.name),
        Attributes::NonResource { verb, path } => {
            gpustack_kube_rest::status::forbidden_path_message(&user.name, verb, path)
        }
    };
    if !reason.is_empty() {
        message.push_str(": ");
        message.push_str(reason);
    }
    ApiError::new(403, "Forbidden", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_read_like_kube_apiserver() {
        let user = User {
            name: "system:serviceaccount:a:b".into(),
            ..Default::default()
        };
        let attrs =
            identity::attributes(&Method::GET, "/apis/worker.gpustack.ai/v1/devices", false);
        let e = forbidden(&user, &attrs, "");
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "devices.worker.gpustack.ai is forbidden: User \"system:serviceaccount:a:b\" cannot list resource \"devices\" in API group \"worker.gpustack.ai\" at the cluster scope"
        );
    }
}
