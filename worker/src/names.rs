//! Names the worker's objects carry, shared with the reference system so manifests carry over.

/// The namespace the worker's objects live in (`KUBERNETES_POD_NAMESPACE` overrides it).
pub const SYSTEM_NAMESPACE: &str = "gpustack-system";
/// The Service the APIServices point at.
pub const SERVICE: &str = "gpustack-operator-worker";
/// The Secret holding the serving CA and certificate, shared by replicas and restarts.
pub const SERVING_SECRET: &str = "gpustack-operator-worker-serving";
/// The group of the worker's custom resources and views.
pub const WORKER_GROUP: &str = "worker.gpustack.ai";
/// The group of the settings.
pub const SETTINGS_GROUP: &str = "gpustack.ai";

/// Prefix of every object the worker derives from the cluster's hardware.
pub const DERIVED_PREFIX: &str = "gpustack--";

/// FNV-1a (64-bit) of `bytes` as 16 lowercase hex digits: the hash the reference system names
/// objects with, so names carry over byte for byte.
pub fn fnv64a_hex(bytes: &[u8]) -> String {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(bytes);
    format!("{:016x}", h.finish())
}

/// How the name of every LocalQueue the worker creates begins.
pub const LOCAL_QUEUE_PREFIX: &str = "gpustack-fnv64-";

/// The LocalQueue in every namespace that fronts ClusterQueue `cluster_queue`
/// (`gpustack-fnv64-<hash of the queue's name>`, 31 characters).
pub fn local_queue_name(cluster_queue: &str) -> String {
    format!(
        "{LOCAL_QUEUE_PREFIX}{}",
        fnv64a_hex(cluster_queue.as_bytes())
    )
}

/// The topology profile of a label hierarchy: `fnv64-<hash of the keys joined by NUL>`.
pub fn topology_profile<S: AsRef<str>>(levels: &[S]) -> String {
    let joined: Vec<&str> = levels.iter().map(|l| l.as_ref()).collect();
    format!("fnv64-{}", fnv64a_hex(joined.join("\0").as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        // From the FNV reference test suite: "" and "a" and "foobar".
        assert_eq!(fnv64a_hex(b""), "cbf29ce484222325");
        assert_eq!(fnv64a_hex(b"a"), "af63dc4c8601ec8c");
        assert_eq!(fnv64a_hex(b"foobar"), "85944171f73967e8");
    }

    #[test]
    fn local_queue_names_are_31_characters() {
        assert_eq!(
            local_queue_name("gpustack--nvidia-h100-linux-amd64").len(),
            31
        );
    }
}
