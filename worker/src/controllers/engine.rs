//! The controllers' IO: reflectors keep an in-memory view of what the chain reads, every change
//! marks what it affects dirty, and three loops write: one per changed node (labels, capacity),
//! one for the chain (coalesced: a burst of node changes is one plan), and, on its own, one for
//! the Workloads awaiting the admission checks ([`workload_checks`]). All writes are server-side applies with the worker's field
//! manager, made only when the plan says something differs.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::{Duration, Instant},
};

use futures::StreamExt;
use gpustack_api::{
    devices::Devices,
    instance_type::InstanceType,
    kueue::{AdmissionCheck, ClusterQueue, LocalQueue, ResourceFlavor, Topology, Workload},
    labels::{CONTROLLED, MANAGED, TOPOLOGY_PROFILE},
    nfd,
    topology_source::TopologySource,
};
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::{
    Resource, ResourceExt,
    api::{Api, DeleteParams, Patch, PatchParams, PostParams},
    runtime::{
        WatchStreamExt, reflector,
        reflector::{ObjectRef, Store},
        watcher,
    },
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;
use tokio::sync::{Notify, mpsc, watch};

use super::{
    capacity,
    chain::{self, Write},
    chain_settings::ChainSettings,
    manufacturers::Resolve,
    node_facts, node_labels,
    ownership::{MANAGER, owned_keys},
    queues::{self, JOINT_CHECK, JOINT_CONTROLLER, NODE_DEVICES_CHECK, NODE_DEVICES_CONTROLLER},
    reconcile_metrics::{Counters, Loop, ReconcileMetrics},
    unit_presets::UnitPresets,
    workload_checks::{self, devices_of, now_rfc3339},
};

/// How long the loop sleeps when nothing is pending (a change wakes it at once).
const IDLE: Duration = Duration::from_secs(3600);

/// Nodes whose writes may be in flight at once.
const NODE_WRITES_IN_FLIGHT: usize = 16;

/// What a change makes stale.
#[derive(Debug)]
enum Dirty {
    Node(String),
    /// Every node (a TopologySource changed which hierarchy nodes have).
    AllNodes,
    Chain,
    Workloads,
}

/// Where changes go: the Workloads' verdicts to their own loop ([`workload_checks`]), the rest
/// to the node and chain loop.
#[derive(Clone)]
struct Wakes {
    tx: mpsc::UnboundedSender<Dirty>,
    workloads: Arc<Notify>,
}

impl Wakes {
    fn send(&self, d: Dirty) {
        match d {
            Dirty::Workloads => self.workloads.notify_one(),
            d => {
                let _ = self.tx.send(d);
            }
        }
    }
}

/// Tuning of the loops.
#[derive(Clone, Debug)]
pub struct Tuning {
    /// A plan waits this long after the last change before it runs (bursts coalesce)...
    pub quiet: Duration,
    /// ...but never longer than this after the first.
    pub max_delay: Duration,
    /// Workloads in `Retry` are checked again this often.
    pub retry_every: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            quiet: Duration::from_millis(200),
            max_delay: Duration::from_secs(2),
            retry_every: Duration::from_secs(30),
        }
    }
}

struct Stores {
    nodes: Store<Node>,
    devices: Store<Devices>,
    flavors: Store<ResourceFlavor>,
    instance_types: Store<InstanceType>,
    queues: Store<ClusterQueue>,
    local_queues: Store<LocalQueue>,
    namespaces: Store<Namespace>,
    topologies: Store<Topology>,
    checks: Store<AdmissionCheck>,
    workloads: Store<Workload>,
    topology_sources: Store<TopologySource>,
}

impl Stores {
    fn sources(&self) -> Vec<TopologySource> {
        self.topology_sources
            .state()
            .iter()
            .map(|t| TopologySource::clone(t))
            .collect()
    }
}

/// Changes that only the chain reads.
fn chain_dirty<K>(_: &K) -> Vec<Dirty> {
    vec![Dirty::Chain]
}

/// Drops what the controllers never read from an object before it is cached.
type Trim<K> = fn(&mut K);

/// Keeps the whole object (a Node's managedFields tell whose labels are whose).
fn keep<K>(_: &mut K) {}

/// Drops the field-ownership records: only the Node's are read.
fn without_managed_fields<K: Resource>(o: &mut K) {
    o.meta_mut().managed_fields = None;
}

/// A `Devices` as the controllers read it: spec, status, labels. Its annotations and
/// ownership records can outweigh the rest, and a cluster has one per node.
fn trim_devices(d: &mut Devices) {
    d.metadata.managed_fields = None;
    d.metadata.annotations = None;
}

/// Starts a reflector of `K`, caching each object as `trim` leaves it, whose every event
/// sends `dirty(&object)`.
fn reflect<K>(
    client: &kube::Client,
    tx: Wakes,
    trim: Trim<K>,
    dirty: impl Fn(&K) -> Vec<Dirty> + Send + 'static,
) -> (Store<K>, tokio::task::JoinHandle<()>)
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = gpustack_watch::objects::<K>(client.clone(), None, watcher::Config::default())
        .default_backoff()
        .modify(trim)
        .reflect(writer);
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(
                    watcher::Event::Apply(o)
                    | watcher::Event::InitApply(o)
                    | watcher::Event::Delete(o),
                ) => {
                    for d in dirty(&o) {
                        tx.send(d);
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    tx.send(Dirty::Chain);
                    tx.send(Dirty::Workloads);
                }
                Ok(_) => {}
                Err(e) => tracing::debug!("watch {}: {e}", K::plural(&Default::default())),
            }
        }
    });
    (reader, task)
}

fn map_of<K: Resource<DynamicType = ()> + Clone>(store: &Store<K>) -> BTreeMap<String, K> {
    store
        .state()
        .iter()
        .map(|o| (o.name_any(), K::clone(o)))
        .collect()
}

fn apply_params() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

/// Body of an apply: the typed object as JSON with its apiVersion and kind.
fn body<K: Resource<DynamicType = ()> + Serialize>(obj: &K) -> serde_json::Value {
    let mut v = serde_json::to_value(obj).unwrap_or_default();
    v["apiVersion"] = json!(K::api_version(&()));
    v["kind"] = json!(K::kind(&()));
    v
}

async fn execute(client: &kube::Client, w: &Write) -> Result<(), kube::Error> {
    let pp = apply_params();
    let name_of = |m: &kube::api::ObjectMeta| m.name.clone().unwrap_or_default();
    match w {
        Write::ApplyFlavor(f) => {
            Api::<ResourceFlavor>::all(client.clone())
                .patch(&name_of(&f.metadata), &pp, &Patch::Apply(body(f)))
                .await?;
        }
        Write::CreateInstanceType(it) => {
            let api = Api::<InstanceType>::all(client.clone());
            match api.create(&PostParams::default(), it.as_ref()).await {
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                r => {
                    r?;
                }
            }
        }
        Write::AddFinalizer(name) | Write::RemoveFinalizer(name) => {
            let api = Api::<InstanceType>::all(client.clone());
            let it = api.get(name).await?;
            let mut finalizers: Vec<String> = it
                .finalizers()
                .iter()
                .filter(|f| *f != CONTROLLED)
                .cloned()
                .collect();
            if matches!(w, Write::AddFinalizer(_)) {
                finalizers.push(CONTROLLED.to_owned());
            }
            // The read version guards the list against a concurrent writer.
            let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": it.resource_version()}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await?;
        }
        Write::ApplyQueue(q) => {
            Api::<ClusterQueue>::all(client.clone())
                .patch(&name_of(&q.metadata), &pp, &Patch::Apply(body(q.as_ref())))
                .await?;
        }
        Write::ApplyQueueCondition(name, condition) => {
            // Only this condition: Kueue's own conditions and counts are its fields.
            let patch = json!({
                "apiVersion": ClusterQueue::api_version(&()), "kind": "ClusterQueue",
                "status": {"conditions": [condition]},
            });
            Api::<ClusterQueue>::all(client.clone())
                .patch_status(name, &pp, &Patch::Apply(patch))
                .await?;
        }
        Write::ApplySourceStatus(name, status) => {
            let patch = json!({
                "apiVersion": TopologySource::api_version(&()), "kind": "TopologySource",
                "status": status,
            });
            Api::<TopologySource>::all(client.clone())
                .patch_status(name, &pp, &Patch::Apply(patch))
                .await?;
        }
        Write::DeleteQueue(name) => {
            Api::<ClusterQueue>::all(client.clone())
                .delete(name, &DeleteParams::default())
                .await
                .map(drop)
                .or_else(not_found)?;
        }
        Write::ApplyStatus(name, status) => {
            let patch = json!({
                "apiVersion": InstanceType::api_version(&()),
                "kind": InstanceType::kind(&()),
                "status": status,
            });
            Api::<InstanceType>::all(client.clone())
                .patch_status(name, &pp, &Patch::Apply(patch))
                .await?;
        }
        Write::CreateLocalQueue(lq) => {
            let ns = lq.metadata.namespace.clone().unwrap_or_default();
            match Api::<LocalQueue>::namespaced(client.clone(), &ns)
                .create(&PostParams::default(), lq)
                .await
            {
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                r => {
                    r?;
                }
            }
        }
        Write::ApplyTopology(t) => {
            Api::<Topology>::all(client.clone())
                .patch(&name_of(&t.metadata), &pp, &Patch::Apply(body(t)))
                .await?;
        }
        Write::DeleteTopology(name) => {
            Api::<Topology>::all(client.clone())
                .delete(name, &DeleteParams::default())
                .await
                .map(drop)
                .or_else(not_found)?;
        }
        Write::DeleteFlavor(name) => {
            Api::<ResourceFlavor>::all(client.clone())
                .delete(name, &DeleteParams::default())
                .await
                .map(drop)
                .or_else(not_found)?;
        }
    }
    Ok(())
}

fn not_found<T: Default>(e: kube::Error) -> Result<T, kube::Error> {
    match e {
        kube::Error::Api(s) if s.code == 404 => Ok(T::default()),
        e => Err(e),
    }
}

/// The two admission checks, Active: the worker is their controller.
async fn ensure_checks(client: &kube::Client) -> Result<(), kube::Error> {
    let api = Api::<AdmissionCheck>::all(client.clone());
    for (name, controller) in [
        (NODE_DEVICES_CHECK, NODE_DEVICES_CONTROLLER),
        (JOINT_CHECK, JOINT_CONTROLLER),
    ] {
        let check = json!({
            "apiVersion": AdmissionCheck::api_version(&()), "kind": "AdmissionCheck",
            "metadata": {"name": name}, "spec": {"controllerName": controller},
        });
        api.patch(name, &apply_params(), &Patch::Apply(check))
            .await?;
        let status = json!({
            "apiVersion": AdmissionCheck::api_version(&()), "kind": "AdmissionCheck",
            "status": {"conditions": [{
                "type": "Active", "status": "True", "reason": "Active",
                "message": "the gpustack worker answers this check",
                "lastTransitionTime": now_rfc3339(),
            }]},
        });
        api.patch_status(name, &apply_params(), &Patch::Apply(status))
            .await?;
    }
    Ok(())
}

fn check_active(store: &Store<AdmissionCheck>) -> bool {
    store.state().iter().any(|c| {
        c.name_any() == NODE_DEVICES_CHECK
            && c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Active" && c.status == "True")
            })
    })
}

/// Whether the cluster serves NFD's `NodeFeature` kind.
async fn nfd_served(client: &kube::Client) -> bool {
    let gv = format!("{}/{}", nfd::GROUP, nfd::VERSION);
    match client.list_api_group_resources(&gv).await {
        Ok(list) => list.resources.iter().any(|r| r.kind == nfd::KIND),
        Err(_) => false,
    }
}

/// Applies the node's `NodeFeature` `<node>-gpustack-worker` with `labels` when it differs;
/// whether it wrote.
async fn publish_features(
    client: &kube::Client,
    namespace: &str,
    node: &Node,
    labels: &BTreeMap<String, String>,
) -> Result<bool, kube::Error> {
    let node_name = node.name_any();
    let name = format!("{node_name}-gpustack-worker");
    let resource = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(nfd::GROUP, nfd::VERSION, nfd::KIND),
        nfd::PLURAL,
    );
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource);
    let current = api.get_opt(&name).await?;
    let have = current.as_ref().map(|o| o.data["spec"]["labels"].clone());
    if have.as_ref() == Some(&json!(labels)) {
        return Ok(false);
    }
    let body = nfd::node_feature(
        &name,
        &node_name,
        namespace,
        node.metadata.uid.as_deref(),
        labels,
    );
    api.patch(&name, &apply_params(), &Patch::Apply(body))
        .await?;
    Ok(true)
}

/// Brings one node's labels, its Devices' profile label and its capacity to what they should be.
#[tracing::instrument(level = "debug", name = "reconcile", parent = None, skip_all, fields(controller = "nodes", object = name))]
async fn reconcile_node(
    client: &kube::Client,
    stores: &Stores,
    name: &str,
    settings: &ChainSettings,
    resolve: &Resolve,
    (nfd, system_namespace): (bool, &str),
) -> Result<u32, kube::Error> {
    let Some(node) = stores.nodes.get(&ObjectRef::new(name)) else {
        return Ok(0);
    };
    let devices = stores.devices.get(&ObjectRef::new(name));
    let sources = stores.sources();
    let facts = node_facts::facts(&node, &sources);
    let labels = node.labels();
    let others = owned_keys(&node.metadata, None, &["metadata", "labels"], |m| {
        m != MANAGER
    });
    // Where NFD runs, its master owns the Node's feature labels: only a value other than
    // `true` there is an admin's choice.
    let managed_by_others = if nfd {
        labels
            .get(MANAGED)
            .map(String::as_str)
            .filter(|v| *v != "true")
    } else {
        others
            .contains(MANAGED)
            .then(|| labels.get(MANAGED).map(String::as_str).unwrap_or(""))
    };
    let mut want = node_labels::desired(&facts, devices.as_deref(), managed_by_others, settings);
    let mut writes = 0;
    if nfd {
        let features: BTreeMap<String, String> = want
            .extract_if(.., |k, _| node_labels::feature_label(k))
            .collect();
        if publish_features(client, system_namespace, &node, &features).await? {
            writes += 1;
        }
    }
    let ours = owned_keys(&node.metadata, None, &["metadata", "labels"], |m| {
        m == MANAGER
    });
    let nodes: Api<Node> = Api::all(client.clone());
    let stale = ours.iter().any(|k| !want.contains_key(k));
    if stale || want.iter().any(|(k, v)| labels.get(k) != Some(v)) {
        let patch =
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": want}});
        nodes
            .patch(name, &apply_params(), &Patch::Apply(patch))
            .await?;
        writes += 1;
    }
    let current = node
        .status
        .as_ref()
        .and_then(|s| s.capacity.clone())
        .unwrap_or_default();
    let want_cap = capacity::desired(&facts, &current, devices.as_deref(), resolve);
    let ours_cap = owned_keys(
        &node.metadata,
        Some("status"),
        &["status", "capacity"],
        |m| m == MANAGER,
    );
    let stale = ours_cap.iter().any(|k| !want_cap.contains_key(k));
    if stale
        || want_cap
            .iter()
            .any(|(k, v)| current.get(k).map(|q| q.0.as_str()) != Some(v.as_str()))
    {
        let patch = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"capacity": want_cap}});
        nodes
            .patch_status(name, &apply_params(), &Patch::Apply(patch))
            .await?;
        writes += 1;
    }
    if let Some(d) = devices {
        let profile = want
            .get(TOPOLOGY_PROFILE)
            .cloned()
            .unwrap_or(facts.topology_profile);
        if d.labels().get(TOPOLOGY_PROFILE) != Some(&profile) {
            let patch = json!({
                "apiVersion": Devices::api_version(&()), "kind": "Devices",
                "metadata": {"name": name, "labels": {TOPOLOGY_PROFILE: profile}},
            });
            Api::<Devices>::all(client.clone())
                .patch(name, &apply_params(), &Patch::Apply(patch))
                .await?;
            writes += 1;
        }
    }
    Ok(writes)
}

/// The chain's plan from the stores, then its writes; returns how many writes it made.
#[tracing::instrument(level = "debug", name = "reconcile", parent = None, skip_all, fields(controller = "chain"))]
async fn reconcile_chain(
    client: &kube::Client,
    stores: &Stores,
    system_namespace: &str,
    settings: &ChainSettings,
    presets: &UnitPresets,
) -> (usize, usize) {
    let sources = stores.sources();
    let nodes: Vec<node_facts::NodeFacts> = stores
        .nodes
        .state()
        .iter()
        .map(|n| node_facts::facts(n, &sources))
        .collect();
    let held = queues::held_flavors(stores.workloads.state().iter().map(|w| w.as_ref()));
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now());
    let devices = devices_of(&stores.devices);
    let flavors = map_of(&stores.flavors);
    let instance_types = map_of(&stores.instance_types);
    let queues = map_of(&stores.queues);
    let local_queues: BTreeSet<(String, String)> = stores
        .local_queues
        .state()
        .iter()
        .map(|q| (q.namespace().unwrap_or_default(), q.name_any()))
        .collect();
    let namespaces: Vec<Namespace> = stores
        .namespaces
        .state()
        .iter()
        .map(|n| Namespace::clone(n))
        .collect();
    let topologies = map_of(&stores.topologies);
    let writes = chain::plan(&chain::Snapshot {
        nodes: &nodes,
        devices: &devices,
        flavors: &flavors,
        instance_types: &instance_types,
        queues: &queues,
        local_queues: &local_queues,
        namespaces: &namespaces,
        topologies: &topologies,
        topology_sources: &sources,
        held: &held,
        node_devices_active: check_active(&stores.checks),
        system_namespace,
        settings,
        presets,
        now: &now,
    });
    let (mut done, mut failed) = (0, 0);
    for w in &writes {
        match execute(client, w).await {
            Ok(()) => {
                tracing::debug!("{}", w.describe());
                done += 1;
            }
            Err(e) => {
                failed += 1;
                tracing::warn!("{}: {e}", w.describe())
            }
        }
    }
    (done, failed)
}

/// Everything the loops need that does not change while leading.
pub struct Context {
    /// The cluster client.
    pub client: kube::Client,
    /// The worker's namespace.
    pub system_namespace: String,
    /// The chain's settings, as they change.
    pub settings: watch::Receiver<ChainSettings>,
    /// The Instance controller's settings, as they change.
    pub instance_settings: watch::Receiver<super::instance_settings::InstanceSettings>,
    /// The manufacturers' facts.
    pub resolve: Arc<Resolve>,
    /// Pacing and batch sizes.
    pub tuning: Tuning,
    /// What the loops wrote.
    pub counters: Arc<Counters>,
    /// The unit resources table.
    pub presets: Arc<UnitPresets>,
    /// Reconcile metrics.
    pub metrics: ReconcileMetrics,
    /// Instances and their Pods, shared with the API.
    pub instances: Arc<super::instance_cache::InstanceCache>,
}

/// Runs the controllers until the task is dropped (leadership lost) .
pub async fn run(ctx: Context) {
    let client = &ctx.client;
    let (tx, mut rx) = mpsc::unbounded_channel::<Dirty>();
    let tx = Wakes {
        tx,
        workloads: Arc::new(Notify::new()),
    };
    let node_dirty = |n: &Node| vec![Dirty::Node(n.name_any()), Dirty::Chain];
    let devices_dirty =
        |d: &Devices| vec![Dirty::Node(d.name_any()), Dirty::Chain, Dirty::Workloads];
    let mut tasks = Vec::new();
    let (nodes, t) = reflect::<Node>(client, tx.clone(), keep, node_dirty);
    tasks.push(t);
    let (devices, t) = reflect::<Devices>(client, tx.clone(), trim_devices, devices_dirty);
    tasks.push(t);
    let (flavors, t) =
        reflect::<ResourceFlavor>(client, tx.clone(), without_managed_fields, chain_dirty);
    tasks.push(t);
    let (instance_types, t) =
        reflect::<InstanceType>(client, tx.clone(), without_managed_fields, chain_dirty);
    tasks.push(t);
    let (queues, t) =
        reflect::<ClusterQueue>(client, tx.clone(), without_managed_fields, chain_dirty);
    tasks.push(t);
    let (local_queues, t) =
        reflect::<LocalQueue>(client, tx.clone(), without_managed_fields, chain_dirty);
    tasks.push(t);
    let (namespaces, t) =
        reflect::<Namespace>(client, tx.clone(), without_managed_fields, chain_dirty);
    tasks.push(t);
    let (topologies, t) =
        reflect::<Topology>(client, tx.clone(), without_managed_fields, chain_dirty);
    tasks.push(t);
    let (checks, t) =
        reflect::<AdmissionCheck>(client, tx.clone(), without_managed_fields, chain_dirty);
    tasks.push(t);
    // A Workload holding quota may be what a queue's migration waits for.
    let (workloads, t) = reflect::<Workload>(
        client,
        tx.clone(),
        without_managed_fields,
        |w: &Workload| match w.status.as_ref().and_then(|s| s.admission.as_ref()) {
            Some(_) => vec![Dirty::Workloads, Dirty::Chain],
            None => vec![Dirty::Workloads],
        },
    );
    tasks.push(t);
    let (topology_sources, t) = reflect::<TopologySource>(
        client,
        tx.clone(),
        without_managed_fields,
        |_: &TopologySource| vec![Dirty::AllNodes, Dirty::Chain],
    );
    tasks.push(t);
    // Its own watches and field manager: see the module.
    tasks.push(tokio::spawn(super::model_manager_nodes::run(
        client.clone(),
        ctx.metrics.clone(),
    )));
    tasks.push(tokio::spawn(super::instances::run(
        client.clone(),
        ctx.instance_settings.clone(),
        ctx.resolve.clone(),
        ctx.instances.clone(),
        ctx.metrics.clone(),
    )));
    tasks.push(tokio::spawn(workload_checks::run(
        workload_checks::Checks {
            client: client.clone(),
            workloads: workloads.clone(),
            devices: devices.clone(),
            resolve: ctx.resolve.clone(),
            metrics: ctx.metrics.clone(),
            counters: ctx.counters.clone(),
            wake: tx.workloads.clone(),
            retry_every: ctx.tuning.retry_every,
        },
    )));
    let _abort = AbortOnDrop(tasks);
    let stores = Stores {
        nodes,
        devices,
        flavors,
        instance_types,
        queues,
        local_queues,
        namespaces,
        topologies,
        checks,
        workloads,
        topology_sources,
    };

    // Kueue's kinds may not be served yet; keep trying until they are.
    while let Err(e) = ensure_checks(client).await {
        tracing::warn!("admission checks: {e}");
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    // Plan only from a complete view: a store still listing reads as objects missing (the
    // Workloads a migrating queue waits for, the queues themselves).
    let _ = tokio::join!(
        stores.nodes.wait_until_ready(),
        stores.devices.wait_until_ready(),
        stores.flavors.wait_until_ready(),
        stores.instance_types.wait_until_ready(),
        stores.queues.wait_until_ready(),
        stores.local_queues.wait_until_ready(),
        stores.namespaces.wait_until_ready(),
        stores.topologies.wait_until_ready(),
        stores.checks.wait_until_ready(),
        stores.workloads.wait_until_ready(),
        stores.topology_sources.wait_until_ready(),
    );
    // NFD may be installed later: asked again with every retry tick.
    let mut nfd = nfd_served(client).await;
    let mut settings_rx = ctx.settings.clone();
    let mut dirty_nodes: BTreeSet<String> = BTreeSet::new();
    let mut chain_due = false;
    let mut first_change: Option<tokio::time::Instant> = None;
    let mut retry = tokio::time::interval(ctx.tuning.retry_every);
    loop {
        // Gather what changed until the cluster is quiet for a moment (or the delay is used up).
        let deadline = first_change.map(|f| f + ctx.tuning.max_delay);
        let pending = !dirty_nodes.is_empty() || chain_due;
        ctx.metrics.set_depth(dirty_nodes.len(), chain_due);
        let quiet = tokio::time::sleep(if pending { ctx.tuning.quiet } else { IDLE });
        tokio::select! {
            Some(d) = rx.recv() => {
                first_change.get_or_insert_with(tokio::time::Instant::now);
                match d {
                    Dirty::Node(n) => { dirty_nodes.insert(n); }
                    Dirty::AllNodes => {
                        dirty_nodes.extend(stores.nodes.state().iter().map(|n| n.name_any()));
                    }
                    Dirty::Chain => chain_due = true,
                    Dirty::Workloads => tx.workloads.notify_one(),
                }
                if deadline.is_none_or(|d| tokio::time::Instant::now() < d) {
                    continue;
                }
            }
            Ok(()) = settings_rx.changed() => {
                // Every node's labels and the whole chain may read a setting.
                dirty_nodes.extend(stores.nodes.state().iter().map(|n| n.name_any()));
                chain_due = true;
                first_change.get_or_insert_with(tokio::time::Instant::now);
                continue;
            }
            _ = retry.tick() => {
                nfd = nfd_served(client).await;
            }
            _ = quiet => {}
        }
        if dirty_nodes.is_empty() && !chain_due {
            continue;
        }
        first_change = None;
        let settings = settings_rx.borrow().clone();
        let mut writes = 0usize;
        // Nodes are independent: their writes overlap rather than wait on each other's round
        // trips (a thousand joining nodes took most of the time to converge one by one).
        let mut nodes = futures::stream::iter(std::mem::take(&mut dirty_nodes))
            .map(|name| {
                let (stores, settings) = (&stores, &settings);
                let (resolve, system_namespace) = (ctx.resolve.as_ref(), &ctx.system_namespace);
                let metrics = &ctx.metrics;
                async move {
                    let started = Instant::now();
                    let done = reconcile_node(
                        client,
                        stores,
                        &name,
                        settings,
                        resolve,
                        (nfd, system_namespace),
                    )
                    .await;
                    metrics.observe(Loop::Node, done.is_ok(), started.elapsed());
                    (name, done)
                }
            })
            .buffer_unordered(NODE_WRITES_IN_FLIGHT);
        while let Some((name, done)) = nodes.next().await {
            match done {
                Ok(n) => writes += n as usize,
                Err(e) => tracing::warn!("node {name}: {e}"),
            }
        }
        drop(nodes);
        if std::mem::take(&mut chain_due) {
            ctx.counters
                .plans
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let started = Instant::now();
            let (done, failed) = reconcile_chain(
                client,
                &stores,
                &ctx.system_namespace,
                &settings,
                &ctx.presets,
            )
            .await;
            ctx.metrics
                .observe(Loop::Chain, failed == 0, started.elapsed());
            writes += done;
        }
        ctx.counters
            .writes
            .fetch_add(writes as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Stops the reflectors with the loop.
struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}
