//! Which cluster an upstream is: the uid of its `default` namespace (the usual way to tell one
//! cluster from another), kept in the store beside the watches' progress. A cluster wiped and
//! made again under the same name has another, with new uids and versions counted from the
//! start: the stored versions say nothing about it, and a watch resumed from one of them
//! would skip whatever the new cluster holds below it, or wait for a version it has not
//! reached. Its kinds are listed again instead (issue 35's container fleet resumed a wiped
//! cluster's Node watch and kept the old cluster's objects).

use std::time::Duration;

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject},
};

use super::progress::Progress;
use crate::hub_store::HubStore;

/// Where the identity is kept: a progress entry of a kind no upstream serves.
const GROUP: &str = "gateway.gpustack.ai";
const RESOURCE: &str = "upstream-identity";

/// How long reading the identity may take.
const TIMEOUT: Duration = Duration::from_secs(3);

/// Whether the upstream now (`now`) is another cluster than the one progress was stored for
/// (`stored`). Unknown on either side is not a change: resuming is what happened before.
pub fn is_another(stored: Option<&str>, now: Option<&str>) -> bool {
    matches!((stored, now), (Some(s), Some(n)) if s != n)
}

/// The upstream's identity, if it can be read in time.
pub async fn read(client: &Client) -> Option<String> {
    let namespaces = ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Namespace".into(),
        plural: "namespaces".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &namespaces);
    let found = tokio::time::timeout(TIMEOUT, api.get("default")).await;
    found.ok()?.ok()?.metadata.uid
}

/// Compares the upstream's identity with the stored one and stores it; true when the upstream
/// is another cluster than the stored progress came from.
pub async fn changed(hub: &HubStore, cluster: &str, client: &Client) -> bool {
    let Some(now) = read(client).await else {
        return false;
    };
    let kept = Progress::new(hub.clone(), cluster, GROUP, RESOURCE);
    let stored = kept.stored().await;
    if stored.as_deref() != Some(now.as_str()) {
        kept.note(Some(&now));
        kept.flush().await;
    }
    is_another(stored.as_deref(), Some(&now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_two_known_and_different_identities_are_another_cluster() {
        assert!(is_another(Some("a"), Some("b")));
        assert!(!is_another(Some("a"), Some("a")));
        assert!(!is_another(None, Some("a")), "first sight");
        assert!(!is_another(Some("a"), None), "unreadable now");
    }
}
