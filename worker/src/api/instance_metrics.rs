//! `instances/<name>/metrics` (instances.md §5): one current `InstanceMetrics` sample, nothing
//! stored. Totals are the Pod's container limits (the Instance's declared resources when it
//! has no Pod); CPU, memory and storage in use come from its node's kubelet stats summary,
//! read through the cluster's node proxy and kept per node for [`NODE_STATS_MAX_AGE`]; its
//! accelerators' from the node's device managers ([`super::instance_accelerators`]). A figure
//! that was not measured is absent, never 0: a stopped Instance answers with its totals alone.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{http::StatusCode, response::Response};
use gpustack_kube_rest::{response::json_response, status::ApiError};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Map, Value, json};

use super::instance_accelerators::{Snapshot, entries, fresh};
use super::instance_device_snapshots::DeviceSnapshots;
use super::instance_lookup::instance_and_pod;
use super::resources::{SERVED_VERSION, WORKER_GROUP};
use crate::admission::quantity::Quantity;
use crate::controllers::{
    instance_cache::InstanceCache, instance_pod::MAIN, instance_status::allocations,
};

/// How long a node's stats summary is reused (kube's metrics default max age).
pub const NODE_STATS_MAX_AGE: Duration = Duration::from_secs(15);
/// The longest a whole metrics request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest stats summary read (a node of 110 Pods writes well under a MiB).
const MAX_SUMMARY_BYTES: usize = 16 << 20;

/// Totals and usage of one sample, in the units the sample states them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    /// CPU in millicores.
    pub cpu_milli_cores: Option<i64>,
    /// Memory in MiB.
    pub memory_mib: Option<i64>,
    /// Local storage in MiB.
    pub storage_mib: Option<i64>,
}

fn unit(q: &str) -> Quantity {
    Quantity::parse(q).expect("a constant quantity")
}

fn ceil(q: &Value, per: &str) -> Option<i64> {
    let text = match q {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    Quantity::parse(&text).ok()?.ceil_units(unit(per))
}

fn add(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

/// The sum of the Pod's container limits (init containers are not counted).
pub fn pod_totals(pod: &Value) -> Figures {
    let mut f = Figures::default();
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        let limits = &c["resources"]["limits"];
        f.cpu_milli_cores = add(f.cpu_milli_cores, ceil(&limits["cpu"], "1m"));
        f.memory_mib = add(f.memory_mib, ceil(&limits["memory"], "1Mi"));
        f.storage_mib = add(f.storage_mib, ceil(&limits["ephemeral-storage"], "1Mi"));
    }
    f
}

/// What an Instance without a Pod has: the resources it declares.
pub fn declared_totals(instance: &Value) -> Figures {
    let r = &instance["spec"]["resources"];
    Figures {
        cpu_milli_cores: ceil(&r["cpu"], "1m"),
        memory_mib: ceil(&r["ram"], "1Mi"),
        storage_mib: ceil(&r["localStorage"], "1Mi"),
    }
}

fn bytes_to_mib(b: u64) -> i64 {
    (b.div_ceil(1 << 20)) as i64
}

/// The Pod `uid`'s usage in a kubelet stats summary: its own `cpu`, `memory` and
/// `ephemeral-storage` figures, else its containers' summed; absent where none was reported.
pub fn summary_usage(summary: &Value, uid: &str) -> Figures {
    let Some(pod) = summary["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["podRef"]["uid"] == uid)
    else {
        return Figures::default();
    };
    let containers: Vec<&Value> = pod["containers"].as_array().into_iter().flatten().collect();
    let summed = |path: &str| -> Option<u64> {
        containers
            .iter()
            .filter_map(|c| c.pointer(path).and_then(Value::as_u64))
            .reduce(|a, b| a + b)
    };
    let cpu = pod["cpu"]["usageNanoCores"]
        .as_u64()
        .or_else(|| summed("/cpu/usageNanoCores"));
    let memory = pod["memory"]["workingSetBytes"]
        .as_u64()
        .or_else(|| summed("/memory/workingSetBytes"));
    let storage = pod["ephemeral-storage"]["usedBytes"].as_u64().or_else(|| {
        match (summed("/rootfs/usedBytes"), summed("/logs/usedBytes")) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        }
    });
    Figures {
        cpu_milli_cores: cpu.map(|n| n.div_ceil(1_000_000) as i64),
        memory_mib: memory.map(bytes_to_mib),
        storage_mib: storage.map(bytes_to_mib),
    }
}

/// The `InstanceMetrics` document.
pub fn sample(
    namespace: &str,
    name: &str,
    now: jiff::Timestamp,
    totals: &Figures,
    used: &Figures,
    accelerators: Vec<Value>,
) -> Value {
    let mut doc = Map::new();
    doc.insert(
        "apiVersion".into(),
        json!(format!("{WORKER_GROUP}/{SERVED_VERSION}")),
    );
    doc.insert("kind".into(), json!("InstanceMetrics"));
    doc.insert(
        "metadata".into(),
        json!({"name": name, "namespace": namespace}),
    );
    doc.insert(
        "timestamp".into(),
        json!(now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
    );
    for (key, figure) in [
        ("cpuTotalMilliCores", totals.cpu_milli_cores),
        ("cpuUsedMilliCores", used.cpu_milli_cores),
        ("memoryTotalMiB", totals.memory_mib),
        ("memoryUsedMiB", used.memory_mib),
        ("storageTotalMiB", totals.storage_mib),
        ("storageUsedMiB", used.storage_mib),
    ] {
        if let Some(v) = figure {
            doc.insert(key.into(), json!(v));
        }
    }
    if !accelerators.is_empty() {
        doc.insert("accelerators".into(), Value::Array(accelerators));
    }
    Value::Object(doc)
}

/// One node's last summary and when it was read; locked while it is read again.
type NodeSlot = Arc<tokio::sync::Mutex<Option<(Instant, Arc<Value>)>>>;

/// The stats summaries of nodes, each reused for [`NODE_STATS_MAX_AGE`]; one read per node at
/// a time (the callers of a cold node wait for the one read).
#[derive(Default)]
pub struct NodeStats {
    nodes: Mutex<HashMap<String, NodeSlot>>,
}

/// Why a node's stats summary could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    /// The node proxy request failed.
    #[error("reading the node proxy: {0}")]
    Request(#[from] kube::Error),
    /// The request could not be built.
    #[error("building the request: {0}")]
    Build(#[from] http::Error),
    /// The kubelet answered this status.
    #[error("the node's kubelet answered {0}")]
    Refused(u16),
    /// The summary was too large or cut off.
    #[error("the stats summary is larger than {MAX_SUMMARY_BYTES} bytes or was cut off")]
    Body,
    /// The summary is not JSON.
    #[error("the stats summary is not JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl NodeStats {
    /// Node `node`'s summary, read through the node proxy unless a recent one is kept.
    pub async fn summary(
        &self,
        client: &kube::Client,
        node: &str,
    ) -> Result<Arc<Value>, StatsError> {
        let slot = {
            let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
            // Nodes whose summaries are stale are forgotten, so the map follows the fleet.
            nodes.retain(|n, s| {
                n == node
                    || s.try_lock().map_or(true, |g| {
                        g.as_ref()
                            .is_some_and(|(at, _)| at.elapsed() < NODE_STATS_MAX_AGE)
                    })
            });
            nodes.entry(node.to_owned()).or_default().clone()
        };
        let mut kept = slot.lock().await;
        if let Some((at, v)) = kept.as_ref()
            && at.elapsed() < NODE_STATS_MAX_AGE
        {
            return Ok(v.clone());
        }
        let request = http::Request::get(format!("/api/v1/nodes/{node}/proxy/stats/summary"))
            .body(kube::client::Body::empty())?;
        let response = client.send(request).await?;
        if !response.status().is_success() {
            return Err(StatsError::Refused(response.status().as_u16()));
        }
        let body = http_body_util::Limited::new(response.into_body(), MAX_SUMMARY_BYTES)
            .collect()
            .await
            .map_err(|_| StatsError::Body)?
            .to_bytes();
        let value = Arc::new(serde_json::from_slice::<Value>(&body)?);
        *kept = Some((Instant::now(), value.clone()));
        Ok(value)
    }
}

/// Where a sample's figures are read: the kubelets' stats and the device managers' snapshots.
pub struct Sources<'a> {
    /// The cluster, for the node proxy and the lookups.
    pub client: &'a kube::Client,
    /// The nodes' stats summaries.
    pub stats: &'a NodeStats,
    /// The nodes' device manager snapshots.
    pub devices: &'a DeviceSnapshots,
    /// The Instances and their Pods.
    pub cache: &'a InstanceCache,
}

/// Serves `GET .../namespaces/<namespace>/instances/<name>/metrics`.
pub async fn serve(
    sources: Sources<'_>,
    namespace: &str,
    name: &str,
) -> Result<Response, ApiError> {
    let Sources {
        client,
        stats,
        devices,
        cache,
    } = sources;
    let work = async {
        let (instance, pod) = instance_and_pod(client, cache, namespace, name).await?;
        let now = jiff::Timestamp::now();
        let Some(pod) = pod else {
            let declared = serde_json::to_value(instance.as_ref()).unwrap_or_default();
            return Ok(sample(
                namespace,
                name,
                now,
                &declared_totals(&declared),
                &Figures::default(),
                Vec::new(),
            ));
        };
        let pod_json = serde_json::to_value(pod.as_ref()).unwrap_or_default();
        let totals = pod_totals(&pod_json);
        let Some(node) = scheduled_node(&pod) else {
            return Ok(sample(
                namespace,
                name,
                now,
                &totals,
                &Figures::default(),
                Vec::new(),
            ));
        };
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let granted = allocations(&pod);
        let mut manufacturers: Vec<_> = granted.iter().map(|g| g.manufacturer).collect();
        manufacturers.sort();
        manufacturers.dedup();
        // The two reads are independent: asked together.
        let (summary, snapshots) = tokio::join!(
            stats.summary(client, &node),
            devices.of_node(client, &node, &manufacturers)
        );
        let used = match summary {
            Ok(summary) => summary_usage(&summary, uid),
            Err(e) => {
                return Err(ApiError::new(
                    503,
                    "ServiceUnavailable",
                    format!("the stats of node {node:?}: {e}"),
                ));
            }
        };
        let current: Vec<&Snapshot> = snapshots
            .iter()
            .map(|s| s.as_ref())
            .filter(|s| fresh(s, now))
            .collect();
        let accelerators = entries(&granted, &current, uid, MAIN);
        Ok(sample(namespace, name, now, &totals, &used, accelerators))
    };
    let doc = tokio::time::timeout(REQUEST_TIMEOUT, work)
        .await
        .map_err(|_| {
            ApiError::new(
                504,
                "Timeout",
                format!("the metrics of instance {name:?} took longer than {REQUEST_TIMEOUT:?}"),
            )
        })??;
    Ok(json_response(StatusCode::OK, &doc))
}

/// The node a Pod runs on, once its containers started there.
fn scheduled_node(pod: &Pod) -> Option<String> {
    let started = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        });
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|_| started)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_are_the_containers_limits_rounded_up() {
        let pod = json!({"spec": {"initContainers": [{"resources": {"limits": {"cpu": "8"}}}],
            "containers": [
                {"resources": {"limits": {"cpu": "1500m", "memory": "1Gi",
                    "ephemeral-storage": "1000000"}}},
                {"resources": {}}]}});
        assert_eq!(
            pod_totals(&pod),
            Figures {
                cpu_milli_cores: Some(1500),
                memory_mib: Some(1024),
                storage_mib: Some(1)
            }
        );
        let instance = json!({"spec": {"resources": {"cpu": 2, "ram": "512Mi"}}});
        assert_eq!(
            declared_totals(&instance),
            Figures {
                cpu_milli_cores: Some(2000),
                memory_mib: Some(512),
                storage_mib: None
            }
        );
    }

    #[test]
    fn usage_comes_from_the_pods_summary_and_is_absent_when_unreported() {
        let summary = json!({"pods": [
            {"podRef": {"uid": "other"}, "cpu": {"usageNanoCores": 9}},
            {"podRef": {"uid": "u-1"}, "containers": [
                {"cpu": {"usageNanoCores": 1_500_001}, "memory": {"workingSetBytes": 1_048_577},
                 "logs": {"usedBytes": 10}},
                {"cpu": {"usageNanoCores": 1}}]},
        ]});
        assert_eq!(
            summary_usage(&summary, "u-1"),
            Figures {
                cpu_milli_cores: Some(2),
                memory_mib: Some(2),
                storage_mib: Some(1)
            }
        );
        assert_eq!(summary_usage(&summary, "gone"), Figures::default());
        let doc = sample(
            "team",
            "box",
            jiff::Timestamp::UNIX_EPOCH,
            &Figures {
                cpu_milli_cores: Some(1000),
                ..Figures::default()
            },
            &Figures::default(),
            Vec::new(),
        );
        assert_eq!(doc["kind"], "InstanceMetrics");
        assert_eq!(doc["cpuTotalMilliCores"], 1000);
        for absent in [
            "cpuUsedMilliCores",
            "memoryUsedMiB",
            "memoryTotalMiB",
            "accelerators",
        ] {
            assert!(doc.get(absent).is_none(), "{absent}: {doc}");
        }
    }
}
