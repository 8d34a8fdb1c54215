//! Who is asking and what they ask to do, in the terms of the cluster's reviews. Plain types.

use std::collections::BTreeMap;

/// An authenticated user.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct User {
    /// The user name (`system:serviceaccount:<ns>:<name>` for a ServiceAccount).
    pub name: String,
    /// The user's uid, empty when unknown.
    pub uid: String,
    /// The groups the user belongs to.
    pub groups: Vec<String>,
    /// The authenticator's extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// Whether the user is in `system:masters` (allowed everything without asking).
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// What a request does, in SubjectAccessReview terms.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Attributes {
    /// A request on an API resource.
    Resource {
        /// `get`, `list`, `watch`, `create`, ...
        verb: String,
        /// The API group, empty for the core group.
        group: String,
        /// The API version.
        version: String,
        /// The resource (plural).
        resource: String,
        /// The subresource, empty when none.
        subresource: String,
        /// The namespace, empty when cluster-scoped or across namespaces.
        namespace: String,
        /// The object's name, empty for collections.
        name: String,
    },
    /// A request on a path outside the API (`/metrics`, `/healthz`).
    NonResource {
        /// The lower-case HTTP verb.
        verb: String,
        /// The request path.
        path: String,
    },
}

impl Attributes {
    /// `get` on the non-resource URL `/metrics`: what a scrape asks.
    pub fn scrape() -> Attributes {
        Attributes::NonResource {
            verb: "get".into(),
            path: "/metrics".into(),
        }
    }
}

/// The bearer token of an `Authorization` header, when there is a non-empty one.
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_non_empty_bearer_token_is_taken() {
        let mut h = http::HeaderMap::new();
        assert_eq!(bearer_token(&h), None);
        h.insert(http::header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
        h.insert(http::header::AUTHORIZATION, "Bearer   ".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
        h.insert(http::header::AUTHORIZATION, "Bearer abc ".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("abc"));
    }
}
