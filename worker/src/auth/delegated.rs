//! Authentication and authorization delegated to the cluster, as an extension API server does:
//! the reviews and their caches are the shared ones every service's `/metrics` guard uses.

pub use gpustack_delegated_auth::reviews::{Delegated, ReviewError, Ttls};
