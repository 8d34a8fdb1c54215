//! Who may read a service's `/metrics`: anyone who reaches the port (`--metrics-auth=none`), or
//! a caller the cluster authenticates (TokenReview) and allows `get` on the non-resource URL
//! `/metrics` (SubjectAccessReview), as kube-rbac-proxy does (`--metrics-auth=delegated`).
//! A refused scrape gets 401 or 403 and never the series.

use futures::future::BoxFuture;

use crate::{
    identity::{Attributes, bearer_token},
    reviews::{Delegated, ReviewError},
};

/// The `/metrics` guard of a service.
pub enum MetricsAccess {
    /// Served to anyone who reaches the port.
    Open,
    /// Served to callers the cluster allows `get` on `/metrics`.
    Delegated(Box<Delegated>),
}

/// Why a scrape was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeRefused {
    /// No bearer token, or one the cluster does not know.
    #[error("Unauthorized")]
    Unauthenticated,
    /// The token's user may not `get` `/metrics`.
    #[error("forbidden: User \"{user}\" cannot get path \"/metrics\"{reason}")]
    Forbidden {
        /// The user the token belongs to.
        user: String,
        /// The authorizer's reason, with its `: ` prefix, or empty.
        reason: String,
    },
    /// The cluster did not answer a review.
    #[error("authorizing the scrape: {0}")]
    Review(#[from] ReviewError),
}

impl ScrapeRefused {
    /// The HTTP status of the refusal: 401, 403, or 500 when the cluster did not answer.
    pub fn status(&self) -> http::StatusCode {
        match self {
            ScrapeRefused::Unauthenticated => http::StatusCode::UNAUTHORIZED,
            ScrapeRefused::Forbidden { .. } => http::StatusCode::FORBIDDEN,
            ScrapeRefused::Review(_) => http::StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl MetricsAccess {
    /// Whether the request with `headers` may read the series. Boxed here, as the reviews are,
    /// so that each agent does not compile this check again.
    pub fn check<'a>(
        &'a self,
        headers: &'a http::HeaderMap,
    ) -> BoxFuture<'a, Result<(), ScrapeRefused>> {
        Box::pin(self.checked(headers))
    }

    async fn checked(&self, headers: &http::HeaderMap) -> Result<(), ScrapeRefused> {
        let MetricsAccess::Delegated(reviews) = self else {
            return Ok(());
        };
        let token = bearer_token(headers).ok_or(ScrapeRefused::Unauthenticated)?;
        let user = reviews
            .authenticate(token)
            .await?
            .ok_or(ScrapeRefused::Unauthenticated)?;
        let (allowed, reason) = reviews.authorize(&user, &Attributes::scrape()).await?;
        if allowed {
            Ok(())
        } else {
            Err(ScrapeRefused::Forbidden {
                user: user.name,
                reason: if reason.is_empty() {
                    reason
                } else {
                    format!(": {reason}")
                },
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn open_access_asks_nothing() {
        let headers = http::HeaderMap::new();
        assert!(MetricsAccess::Open.check(&headers).await.is_ok());
    }

    #[test]
    fn refusals_map_to_401_and_403() {
        assert_eq!(ScrapeRefused::Unauthenticated.status(), 401);
        let forbidden = ScrapeRefused::Forbidden {
            user: "system:serviceaccount:default:nobody".into(),
            reason: String::new(),
        };
        assert_eq!(forbidden.status(), 403);
        assert_eq!(
            forbidden.to_string(),
            "forbidden: User \"system:serviceaccount:default:nobody\" cannot get path \"/metrics\""
        );
    }
}
