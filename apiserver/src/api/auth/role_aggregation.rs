//! The ClusterRole aggregation controller, as kube-controller-manager's: a ClusterRole with
//! `aggregationRule.clusterRoleSelectors` gets as its `rules` those of every ClusterRole its
//! selectors match ([`super::rbac::aggregated_rules`]), at start and after every ClusterRole
//! change in an embedded cluster. It writes only what changed.

use serde_json::Value;
use tokio::sync::{broadcast::error::RecvError, watch};

use super::rbac::aggregated_rules;
use crate::{
    api::stored_kinds::replace_as_read,
    store::{Store, StoreError},
};

const GROUP: &str = "rbac.authorization.k8s.io";
const RESOURCE: &str = "clusterroles";

/// Runs until `stop` for the embedded `clusters`.
pub async fn run(store: Store, clusters: Vec<String>, mut stop: watch::Receiver<bool>) {
    let mut events = store.subscribe();
    for c in &clusters {
        settle(&store, c).await;
    }
    loop {
        let cluster = tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) if ev.key.group == GROUP && ev.key.resource == RESOURCE => Some(ev.key.cluster),
                Ok(_) => continue,
                Err(RecvError::Lagged(_)) => None,
                Err(RecvError::Closed) => return,
            },
            _ = stop.changed() => return,
        };
        for c in clusters
            .iter()
            .filter(|c| cluster.as_ref().is_none_or(|x| x == *c))
        {
            settle(&store, c).await;
        }
    }
}

/// Writes the rules of every aggregated ClusterRole of `cluster` that lacks them.
async fn settle(store: &Store, cluster: &str) {
    if let Err(e) = settle_once(store, cluster).await {
        tracing::warn!(cluster, error = %e, "aggregating ClusterRoles failed");
    }
}

async fn settle_once(store: &Store, cluster: &str) -> Result<(), StoreError> {
    let roles = store
        .list(cluster, GROUP, RESOURCE, None, None, 0)
        .await?
        .items;
    for role in &roles {
        let Some(rules) = aggregated_rules(role, &roles) else {
            continue;
        };
        let rules = Value::Array(rules);
        if role.get("rules") == Some(&rules) {
            continue;
        }
        let mut updated = role.clone();
        updated["rules"] = rules;
        replace_as_read(store, cluster, (GROUP, RESOURCE), role, updated).await?;
    }
    Ok(())
}
