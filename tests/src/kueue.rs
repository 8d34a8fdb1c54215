//! A stand-in for Kueue (its pod integration and its scheduler) and for kube-scheduler, neither
//! of which can run here. It works through the real Kueue API objects as Kueue does:
//! - a Pod labelled `kueue.x-k8s.io/queue-name` gets a `Workload` owned by the Pod, naming the
//!   LocalQueue, its one PodSet the Pod's spec;
//! - the Workload's quota is reserved on its ClusterQueue's first flavor, on the node the
//!   flavor selects that holds the fewest Workloads (a topology assignment at
//!   `kubernetes.io/hostname`), unless the queue is stopped (`Hold`, `HoldAndDrain`) — then it
//!   stays pending, as Kueue leaves it;
//! - once every admission check of the queue is `Ready`, it is `Admitted`, and the Pod is bound
//!   to the assigned node through `pods/binding`, as kube-scheduler binds it.
//!
//! Quota amounts are not counted: the tests that use this create far fewer Pods than a queue
//! holds, and the worker's node-devices check is what they exercise.
//!
//! It reads through watches ([`crate::watched`]) and writes each pass's steps concurrently, so
//! that with a thousand Pods queued it is not what a benchmark measures; each step is taken once
//! (what the watch has not caught up with yet is not done again).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt;
use kube::runtime::watcher;

use kube::{
    Api, ResourceExt,
    api::{DynamicObject, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

use crate::watched::Watched;
use gpustack_api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use k8s_openapi::api::core::v1::{Node, Pod};

const QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";
/// The field manager of the stand-in's writes.
const MANAGER: &str = "kueue-stand-in";
/// How often the stand-in looks at the cluster.
const PERIOD: Duration = Duration::from_millis(100);

/// The stand-in, running until dropped.
pub struct Kueue {
    task: tokio::task::JoinHandle<()>,
}

/// Writes in flight at once.
const PARALLEL: usize = 32;

/// What the stand-in watches.
struct Views {
    pods: Watched<Pod>,
    workloads: Watched<Workload>,
    local_queues: Watched<LocalQueue>,
    queues: Watched<ClusterQueue>,
    flavors: Watched<ResourceFlavor>,
    nodes: Watched<Node>,
}

impl Views {
    fn start(c: &kube::Client) -> Self {
        let all = watcher::Config::default;
        Views {
            pods: Watched::start(Api::all(c.clone()), all().labels(QUEUE_NAME)),
            workloads: Watched::start(Api::all(c.clone()), all()),
            local_queues: Watched::start(Api::all(c.clone()), all()),
            queues: Watched::start(Api::all(c.clone()), all()),
            flavors: Watched::start(Api::all(c.clone()), all()),
            nodes: Watched::start(Api::all(c.clone()), all()),
        }
    }
}

/// A step taken for one queued Pod (the kind of step, the Pod's uid): taken once.
type Step = (&'static str, String);

impl Kueue {
    /// Starts it on the current tokio runtime.
    pub fn start(client: kube::Client) -> Self {
        let task = tokio::spawn(async move {
            let views = Views::start(&client);
            let taken: Mutex<HashMap<Step, Option<String>>> = Mutex::default();
            let mut tick = tokio::time::interval(PERIOD);
            loop {
                tick.tick().await;
                pass(&client, &views, &taken).await;
            }
        });
        Kueue { task }
    }
}

impl Drop for Kueue {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The Workload name Kueue's pod integration gives a Pod.
fn workload_name(pod: &Pod) -> String {
    let uid = pod.uid().unwrap_or_default();
    format!("pod-{}-{}", pod.name_any(), &uid[..uid.len().min(5)])
}

fn condition_true(wl: &Workload, type_: &str) -> bool {
    wl.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    })
}

/// The node a Workload's quota was reserved on.
fn assigned_node(wl: &Workload) -> Option<String> {
    let v = serde_json::to_value(wl).ok()?;
    v.pointer("/status/admission/podSetAssignments/0/topologyAssignment/domains/0/values/0")?
        .as_str()
        .map(str::to_owned)
}

/// What a reservation reads.
struct Catalog {
    local_queues: Vec<Arc<LocalQueue>>,
    queues: Vec<Arc<ClusterQueue>>,
    flavors: Vec<Arc<ResourceFlavor>>,
    nodes: Vec<Arc<Node>>,
}

/// One look at every queued Pod; the steps it finds are written concurrently.
async fn pass(c: &kube::Client, views: &Views, taken: &Mutex<HashMap<Step, Option<String>>>) {
    let catalog = Catalog {
        local_queues: views.local_queues.state(),
        queues: views.queues.state(),
        flavors: views.flavors.state(),
        nodes: views.nodes.state(),
    };
    // Workloads per node, so that each is placed on the least loaded node (as Kueue's
    // topology-aware scheduling spreads them by free capacity, which this does not count);
    // reservations the watch has not shown yet count where they were made.
    let mut load: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_name = BTreeMap::new();
    for wl in views.workloads.state() {
        let key = (wl.namespace().unwrap_or_default(), wl.name_any());
        match assigned_node(&wl) {
            Some(node) => *load.entry(node).or_default() += 1,
            None => {
                let pod_uid = wl.owner_references().first().map(|o| o.uid.clone());
                let step = ("reserve", pod_uid.unwrap_or_default());
                if let Some(Some(node)) = taken.lock().unwrap().get(&step) {
                    *load.entry(node.clone()).or_default() += 1;
                }
            }
        }
        by_name.insert(key, wl);
    }
    let mut queued = BTreeSet::new();
    let mut writes: Vec<futures::future::BoxFuture<'_, (Step, Result<(), kube::Error>)>> =
        Vec::new();
    for pod in views.pods.state() {
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        if bound || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let ns = pod.namespace().unwrap_or_default();
        let workloads: Api<Workload> = Api::namespaced(c.clone(), &ns);
        let name = workload_name(&pod);
        let pod_uid = pod.uid().unwrap_or_default();
        queued.insert(pod_uid.clone());
        let first = |step: Step, node: Option<String>| {
            let mut t = taken.lock().unwrap();
            if t.contains_key(&step) {
                return false;
            }
            t.insert(step, node);
            true
        };
        let Some(wl) = by_name.get(&(ns.clone(), name.clone())).cloned() else {
            let step = ("create", pod_uid);
            if first(step.clone(), None) {
                let pod = pod.clone();
                writes.push(Box::pin(async move {
                    (step, create_workload(&workloads, &pod, &name).await)
                }));
            }
            continue;
        };
        if !condition_true(&wl, "QuotaReserved") {
            let Some((node, status)) = reservation(&catalog, &wl, &load) else {
                continue;
            };
            let step = ("reserve", pod_uid);
            if first(step.clone(), Some(node.clone())) {
                *load.entry(node).or_default() += 1;
                writes.push(Box::pin(async move {
                    let r = workloads
                        .patch_status(
                            &wl.name_any(),
                            &PatchParams::apply(MANAGER).force(),
                            &Patch::Apply(status),
                        )
                        .await
                        .map(drop);
                    (step, r)
                }));
            }
        } else if !condition_true(&wl, "Admitted") {
            // Taken only once the checks are Ready (the step is not noted before).
            let ready = wl
                .status
                .as_ref()
                .is_some_and(|s| s.admission_checks.iter().all(|c| c.state == "Ready"));
            let step = ("admit", pod_uid);
            if ready && first(step.clone(), None) {
                writes.push(Box::pin(async move {
                    (step, admit_when_checked(&workloads, &wl).await)
                }));
            }
        } else {
            let step = ("bind", pod_uid);
            if first(step.clone(), None) {
                let c = c.clone();
                writes.push(Box::pin(async move { (step, bind(&c, &pod, &wl).await) }));
            }
        }
    }
    let mut done = futures::stream::iter(writes).buffer_unordered(PARALLEL);
    while let Some((step, result)) = done.next().await {
        if let Err(e) = result {
            // Not taken after all: the next pass tries again.
            eprintln!("kueue stand-in: {} of Pod {}: {e}", step.0, step.1);
            taken.lock().unwrap().remove(&step);
        }
    }
    // The steps of Pods bound or gone are forgotten, so that the notes follow the queue.
    taken
        .lock()
        .unwrap()
        .retain(|(_, uid), _| queued.contains(uid));
}

async fn create_workload(api: &Api<Workload>, pod: &Pod, name: &str) -> Result<(), kube::Error> {
    let queue = pod.labels().get(QUEUE_NAME).cloned().unwrap_or_default();
    let wl: Workload = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": "v1", "kind": "Pod", "name": pod.name_any(), "uid": pod.uid(),
            "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1,
            "template": {"spec": pod.spec}}]},
    }))
    .expect("a Workload");
    match api.create(&PostParams::default(), &wl).await {
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        r => r.map(drop),
    }
}

/// The quota reservation of `wl`: on the queue's first flavor, on the node that flavor selects
/// with the fewest Workloads (`load`); none while the queue is stopped or not known yet.
fn reservation(
    catalog: &Catalog,
    wl: &Workload,
    load: &BTreeMap<String, usize>,
) -> Option<(String, Value)> {
    let ns = wl.namespace().unwrap_or_default();
    let queue = wl.spec.queue_name.clone().unwrap_or_default();
    let lq = catalog
        .local_queues
        .iter()
        .find(|q| q.namespace().as_deref() == Some(ns.as_str()) && q.name_any() == queue)?;
    let cq = catalog
        .queues
        .iter()
        .find(|q| q.name_any() == lq.spec.cluster_queue)?;
    if cq.spec.stop_policy.as_deref().is_some_and(|p| p != "None") {
        return None;
    }
    let group = cq.spec.resource_groups.first()?;
    let flavor = group.flavors.first()?;
    let rf = catalog
        .flavors
        .iter()
        .find(|f| f.name_any() == flavor.name)?;
    let node = catalog
        .nodes
        .iter()
        .filter(|n| {
            rf.spec
                .node_labels
                .iter()
                .all(|(k, v)| n.labels().get(k) == Some(v))
        })
        .min_by_key(|n| load.get(&n.name_any()).copied().unwrap_or(0))?;
    let flavors: serde_json::Map<String, Value> = group
        .covered_resources
        .iter()
        .map(|r| (r.clone(), json!(flavor.name)))
        .collect();
    let checks: Vec<Value> = cq
        .spec
        .admission_checks_strategy
        .as_ref()
        .map(|s| s.admission_checks.iter().map(|c| c.name.clone()).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|name| json!({"name": name, "state": "Pending", "message": "", "lastTransitionTime": now()}))
        .collect();
    let status = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                "message": format!("Quota reserved in ClusterQueue {}", cq.name_any()), "lastTransitionTime": now()}],
            "admission": {"clusterQueue": cq.name_any(), "podSetAssignments": [{"name": "main", "count": 1,
                "flavors": flavors,
                "topologyAssignment": {"levels": ["kubernetes.io/hostname"],
                    "domains": [{"values": [node.name_any()], "count": 1}]}}]},
            "admissionChecks": checks,
        },
    });
    Some((node.name_any(), status))
}

async fn admit_when_checked(api: &Api<Workload>, wl: &Workload) -> Result<(), kube::Error> {
    let ready = wl
        .status
        .as_ref()
        .is_some_and(|s| s.admission_checks.iter().all(|c| c.state == "Ready"));
    if !ready {
        return Ok(());
    }
    // The conditions alone (a merge): the checks' entries are their controllers' fields.
    let mut conditions: Vec<Value> = wl
        .status
        .as_ref()
        .map(|s| {
            s.conditions
                .iter()
                .filter_map(|c| serde_json::to_value(c).ok())
                .collect()
        })
        .unwrap_or_default();
    conditions.push(
        json!({"type": "Admitted", "status": "True", "reason": "Admitted",
        "message": "The workload is admitted", "lastTransitionTime": now()}),
    );
    let patch = json!({"status": {"conditions": conditions}});
    api.patch_status(
        &wl.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await
    .map(drop)
}

/// Binds the Pod to the node its Workload was assigned.
async fn bind(c: &kube::Client, pod: &Pod, wl: &Workload) -> Result<(), kube::Error> {
    let raw = serde_json::to_value(wl).unwrap_or_default();
    let Some(node) = raw
        .pointer("/status/admission/podSetAssignments/0/topologyAssignment/domains/0/values/0")
        .and_then(Value::as_str)
    else {
        return Ok(());
    };
    let ns = pod.namespace().unwrap_or_default();
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": pod.name_any(), "namespace": ns},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    let url = format!("/api/v1/namespaces/{ns}/pods/{}/binding", pod.name_any());
    let req = http::Request::post(url)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&binding).unwrap_or_default())
        .expect("a binding request");
    match c.request::<DynamicObject>(req).await {
        // The Status answer does not read as an object; a 409 is a Pod bound meanwhile.
        Ok(_) | Err(kube::Error::SerdeError(_)) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
