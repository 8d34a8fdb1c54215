#![warn(missing_docs)]
//! Who may call a service, asked of the cluster as an extension API server or kube-rbac-proxy
//! asks: a bearer token checked with TokenReview, the request with SubjectAccessReview, both
//! answers cached for their TTLs.
//!
//! - [`identity`]: the user and the request's attributes, as the cluster's authorizer sees them.
//! - [`ttl_cache`]: the bounded cache of answers.
//! - [`reviews`]: the two reviews through a `kube::Client` passed in.
//! - [`metrics_access`]: the `/metrics` guard (`--metrics-auth=delegated|none`) of every service.
//!
//! Shared by the worker and the node agents; it holds nothing of the API servers.

pub mod identity;
pub mod metrics_access;
pub mod reviews;
pub mod ttl_cache;
