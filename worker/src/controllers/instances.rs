//! The Instance controller's IO: a kube-runtime controller over Instances, woken by their Pods
//! (owned), the Pods' Services, and their pools' InstanceTypes and ClusterQueues. Each pass
//! takes what one Instance stands on from the caches ([`InstanceCache`], shared with the API,
//! and the controller's own stores), asks [`instance_steps::next`] what to do, does it, takes the
//! answer of the write as the new view, and asks again, until the answer is to wait. A pass
//! makes no read of the cluster but the rare one a missing pool needs.

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use gpustack_api::{
    Manufacturer,
    instance::{Instance, InstanceStatus},
    instance_type::InstanceType,
    kueue::ClusterQueue,
    labels::{CONTROLLED, RESOURCE_TYPE},
};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::{
        Controller, WatchStreamExt,
        controller::{Action, Config as ControllerConfig},
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::{
    instance_cache::{self, InstanceCache},
    instance_pod::{self, Accelerated, INSTANCES, PodInputs},
    instance_settings::InstanceSettings,
    instance_steps::{self, Observed, Step},
    manufacturers::Resolve,
    reconcile_metrics::{Loop, ReconcileMetrics},
};

/// Steps one pass takes at most before it yields to other Instances (and comes back).
const STEPS_PER_PASS: usize = 12;
/// Instances reconciled at once. A pass spends nearly all its time waiting on writes, so this
/// bounds the writes in flight rather than work: at 16, a burst of a few hundred creates kept
/// every slot busy with passes of three writes each, and a new Instance waited up to 12 s
/// for a slot before its Pod was made (docs/benchmarks.md, Instances).
const CONCURRENCY: u16 = 64;
/// The longest a pass waits for the cache to show a Pod this controller made.
const CACHE_LAG: Duration = Duration::from_secs(10);
/// How soon a write refused for an older version than the cluster's is decided again.
const CONFLICT_AGAIN: Duration = Duration::from_millis(200);

/// Why a write for an Instance failed.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    /// The cluster refused or did not answer.
    #[error("instance {namespace}/{name}: {source}")]
    Kube {
        /// The Instance's namespace.
        namespace: String,
        /// The Instance's name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

struct Ctx {
    client: kube::Client,
    settings: watch::Receiver<InstanceSettings>,
    resolve: Arc<Resolve>,
    cache: Arc<InstanceCache>,
    services: Store<Service>,
    types: Store<InstanceType>,
    queues: Store<ClusterQueue>,
    nodes: Store<Node>,
    ahead: Ahead,
}

/// What this controller wrote that the caches may not show yet, by Instance UID: the
/// Instance versions its writes replaced, and whether it made the Pod. A pass woken by one of
/// its own earlier writes would otherwise judge the older copy and write again (a second
/// status, a Pod create refused as a conflict after the webhooks ran).
#[derive(Default)]
struct Ahead(std::sync::Mutex<std::collections::HashMap<String, Wrote>>);

#[derive(Default)]
struct Wrote {
    replaced: Vec<String>,
    /// When it made the Pod; waited for [`CACHE_LAG`] at most.
    pod: Option<std::time::Instant>,
}

impl Ahead {
    fn with<T>(&self, f: impl FnOnce(&mut std::collections::HashMap<String, Wrote>) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether the caches are behind this controller's writes for `inst` (the change that
    /// catches them up wakes it again); forgets what they have caught up with.
    fn behind(&self, inst: &Instance, pod_cached: bool) -> bool {
        let uid = inst.uid().unwrap_or_default();
        let rv = inst.resource_version().unwrap_or_default();
        self.with(|m| {
            let Some(w) = m.get_mut(&uid) else {
                return false;
            };
            let stale = w.replaced.contains(&rv);
            if !stale {
                w.replaced.clear();
            }
            if pod_cached || w.pod.is_some_and(|at| at.elapsed() > CACHE_LAG) {
                w.pod = None;
            }
            let behind = stale || w.pod.is_some();
            if !behind {
                m.remove(&uid);
            }
            behind
        })
    }

    fn replaced(&self, inst: &Instance) {
        let uid = inst.uid().unwrap_or_default();
        let rv = inst.resource_version().unwrap_or_default();
        self.with(|m| m.entry(uid).or_default().replaced.push(rv));
    }

    fn made_pod(&self, inst: &Instance) {
        let at = Some(std::time::Instant::now());
        self.with(|m| m.entry(inst.uid().unwrap_or_default()).or_default().pod = at);
    }

    /// An Instance that is going: nothing of it is awaited.
    fn forget(&self, inst: &Instance) {
        self.with(|m| m.remove(&inst.uid().unwrap_or_default()));
    }
}

fn not_found<T>(r: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

/// Everything one Instance stands on, as the caches hold it; a write this pass makes replaces
/// what it wrote with the answer, so the next step is decided on what the cluster now holds.
struct Reads {
    instance: Arc<Instance>,
    pod: Option<Arc<Pod>>,
    service: Option<Arc<Service>>,
    instance_type: Option<Arc<InstanceType>>,
    queue: Option<Arc<ClusterQueue>>,
    node: Option<Arc<Node>>,
}

impl Reads {
    /// The Pod's node, once the Pod is bound to one.
    fn node_of(ctx: &Ctx, pod: Option<&Arc<Pod>>) -> Option<Arc<Node>> {
        let name = pod?.spec.as_ref()?.node_name.as_deref()?;
        ctx.nodes.get(&ObjectRef::new(name))
    }
}

/// What `instance` stands on, from the caches. Only a pool missing from the cache is asked of
/// the cluster: that answer stops the Instance, so it is never one the cache has not seen yet.
async fn read(ctx: &Ctx, instance: Arc<Instance>) -> Result<Reads, kube::Error> {
    let ns = instance.namespace().unwrap_or_default();
    let name = instance.name_any();
    let pod = ctx.cache.pod(&ns, &name);
    let service = pod
        .as_ref()
        .and_then(|_| ctx.services.get(&ObjectRef::new(&name).within(&ns)));
    let pool = instance.spec.instance_type.clone();
    let (instance_type, queue) = if instance.spec.stopped() || pool.is_empty() {
        (None, None)
    } else {
        let it = match ctx.types.get(&ObjectRef::new(&pool)) {
            Some(it) => Some(it),
            None => Api::<InstanceType>::all(ctx.client.clone())
                .get_opt(&pool)
                .await?
                .map(Arc::new),
        };
        (it, ctx.queues.get(&ObjectRef::new(&pool)))
    };
    let node = Reads::node_of(ctx, pod.as_ref());
    Ok(Reads {
        instance,
        pod,
        service,
        instance_type,
        queue,
        node,
    })
}

/// The status as a merge patch that replaces it: every field it leaves out is cleared.
fn status_patch(status: &InstanceStatus) -> Value {
    let mut v = serde_json::to_value(status).unwrap_or_default();
    for key in [
        "phase",
        "phaseMessage",
        "nodeName",
        "accessAddresses",
        "hostIPs",
        "podIPs",
        "ports",
    ] {
        if v.get(key).is_none() {
            v[key] = Value::Null;
        }
    }
    json!({"status": v})
}

/// The manufacturer of an accelerated pool.
fn manufacturer(it: &InstanceType) -> Option<Manufacturer> {
    let named = it
        .status
        .as_ref()
        .and_then(|s| s.detail.as_ref())
        .and_then(|d| d.manufacturer.clone())
        .or_else(|| {
            let group = it.spec.accelerator_group.as_deref()?;
            Some(group.split('-').next()?.to_owned())
        })?;
    named.parse().ok()
}

/// Creates the Instance's Pod; the Pod the cluster then holds (the one already there when
/// another pass made it first).
async fn create_pod(ctx: &Ctx, r: &Reads) -> Result<Option<Pod>, kube::Error> {
    let Some(it) = &r.instance_type else {
        return Ok(None);
    };
    let entrance = it
        .status
        .as_ref()
        .and_then(|s| s.entrance.clone())
        .unwrap_or_default();
    let resolved = it
        .spec
        .acceleratable
        .unwrap_or(false)
        .then(|| manufacturer(it))
        .flatten()
        .map(|m| (ctx.resolve)(m));
    let sliceable = it
        .status
        .as_ref()
        .and_then(|s| s.accelerator_sliced.as_ref())
        .is_some_and(|v| v.capacity > 0);
    let pinned = match r.instance.spec.node_name.as_deref() {
        Some(n) if !n.is_empty() => {
            let node = match ctx.nodes.get(&ObjectRef::new(n)) {
                Some(node) => Some(node),
                None => Api::<Node>::all(ctx.client.clone())
                    .get_opt(n)
                    .await?
                    .map(Arc::new),
            };
            node.and_then(|node| node.labels().get(gpustack_api::labels::HOSTNAME).cloned())
        }
        _ => None,
    };
    let settings = ctx.settings.borrow().clone();
    let pod = instance_pod::pod(&PodInputs {
        instance: &r.instance,
        instance_type: it,
        entrance: &entrance,
        accelerated: resolved.as_ref().map(|m| Accelerated {
            manufacturer: m,
            sliceable,
        }),
        settings: &settings,
        pinned_hostname: pinned.as_deref(),
    });
    let ns = r.instance.namespace().unwrap_or_default();
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), &ns);
    match pods.create(&PostParams::default(), &pod).await {
        Err(kube::Error::Api(s)) if s.code == 409 => pods.get_opt(&r.instance.name_any()).await,
        r => r.map(Some),
    }
}

/// Does `step` for `r`, taking what it wrote into `r`; what the controller does after.
async fn take(ctx: &Ctx, r: &mut Reads, step: &Step) -> Result<Option<Action>, kube::Error> {
    let inst = r.instance.clone();
    let ns = inst.namespace().unwrap_or_default();
    let name = inst.name_any();
    let instances = Api::<Instance>::namespaced(ctx.client.clone(), &ns);
    let written = match step {
        Step::Idle => return Ok(Some(Action::await_change())),
        Step::Wait(d) => return Ok(Some(Action::requeue(*d))),
        Step::AddFinalizer | Step::RemoveFinalizer => {
            let mut finalizers: Vec<String> = inst
                .finalizers()
                .iter()
                .filter(|f| *f != CONTROLLED)
                .cloned()
                .collect();
            if *step == Step::AddFinalizer {
                finalizers.push(CONTROLLED.to_owned());
            }
            // The read version guards the list against a concurrent writer.
            let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": inst.resource_version()}});
            not_found(
                instances
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await,
            )?
        }
        Step::Status(status) => {
            let was = inst.status.as_ref().map(|s| s.phase()).unwrap_or("");
            let written = not_found(
                instances
                    .patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(status_patch(status)),
                    )
                    .await,
            )?;
            if status.phase() == "Ready" && was != "Ready" {
                tracing::info!(instance = format!("{ns}/{name}"), "instance started");
            }
            written
        }
        Step::DeletePod => {
            not_found(
                Api::<Pod>::namespaced(ctx.client.clone(), &ns)
                    .delete(&name, &DeleteParams::default())
                    .await,
            )?;
            // The next step is judged once the cache has seen the Pod go: the API answers
            // from the same cache, so no `Stopped` Instance shows a Pod there.
            return Ok(Some(Action::requeue(instance_steps::AGAIN)));
        }
        Step::Stop(why) => {
            tracing::info!(instance = format!("{ns}/{name}"), "stop instance as {why}");
            let patch = json!({"spec": {"stop": true}});
            not_found(
                instances
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await,
            )?
        }
        Step::CreatePod => {
            let pod = create_pod(ctx, r).await?;
            if pod.is_none() {
                return Ok(None);
            }
            ctx.ahead.made_pod(&r.instance);
            // The pass ends with the Pod made: its slot goes to the next Instance waiting for
            // its Pod, and the Pod's arrival in the cache wakes this one for its finalizer and
            // status (the wait is the fallback). In a burst of creates, each new Instance's
            // Pod otherwise waited behind two more writes of every pass ahead of it.
            return Ok(Some(Action::requeue(instance_steps::AGAIN)));
        }
        Step::CreateService => {
            if let Some(svc) = r.pod.as_ref().and_then(|p| instance_pod::service(p)) {
                let services = Api::<Service>::namespaced(ctx.client.clone(), &ns);
                r.service = match services.create(&PostParams::default(), &svc).await {
                    Err(kube::Error::Api(s)) if s.code == 409 => services.get_opt(&name).await?,
                    r => Some(r?),
                }
                .map(Arc::new);
            }
            return Ok(None);
        }
    };
    match written {
        Some(_) if *step == Step::RemoveFinalizer => {
            ctx.ahead.forget(&r.instance);
            return Ok(Some(Action::await_change()));
        }
        Some(i) => {
            ctx.ahead.replaced(&r.instance);
            r.instance = Arc::new(i);
        }
        // Gone meanwhile: its deletion is the next change.
        None => return Ok(Some(Action::await_change())),
    }
    Ok(None)
}

#[tracing::instrument(level = "debug", name = "reconcile", parent = None, skip_all, fields(controller = "instances", object = %ObjectRef::from_obj(inst.as_ref())))]
async fn reconcile(inst: Arc<Instance>, ctx: Arc<Ctx>) -> Result<Action, InstanceError> {
    let ns = inst.namespace().unwrap_or_default();
    let name = inst.name_any();
    let fail = |source| InstanceError::Kube {
        namespace: ns.clone(),
        name: name.clone(),
        source,
    };
    // Nothing is judged against a cache still listing: a pool or Pod not listed yet would
    // read as gone.
    let _ = tokio::join!(
        ctx.cache.pods().wait_until_ready(),
        ctx.services.wait_until_ready(),
        ctx.types.wait_until_ready(),
        ctx.nodes.wait_until_ready(),
    );
    let pod_cached = ctx.cache.pod(&ns, &name).is_some();
    if ctx.ahead.behind(&inst, pod_cached) {
        return Ok(Action::requeue(instance_steps::AGAIN));
    }
    let mut r = read(&ctx, inst).await.map_err(fail)?;
    for _ in 0..STEPS_PER_PASS {
        // The Pod may have moved on while a write was out (Running, say): its newest copy
        // saves a pass; one this pass made and the cache has not shown yet is kept.
        if let Some(newer) = ctx.cache.pod(&ns, &name) {
            r.pod = Some(newer);
            r.node = Reads::node_of(&ctx, r.pod.as_ref());
        }
        let settings = ctx.settings.borrow().clone();
        let step = instance_steps::next(&Observed {
            instance: &r.instance,
            pod: r.pod.as_deref(),
            service: r.service.as_deref(),
            instance_type: r.instance_type.as_deref(),
            queue: r.queue.as_deref(),
            node: r.node.as_deref(),
            access: (
                &settings.access_static_address,
                &settings.access_wildcard_dns,
            ),
        });
        tracing::debug!(instance = format!("{ns}/{name}"), "{step:?}");
        if let Some(action) = take(&ctx, &mut r, &step).await.map_err(fail)? {
            return Ok(action);
        }
    }
    Ok(Action::requeue(Duration::ZERO))
}

fn error_policy(_: Arc<Instance>, e: &InstanceError, _: Arc<Ctx>) -> Action {
    let InstanceError::Kube { source, .. } = e;
    match source {
        // A write raced a newer version than the cache had: that version's change is on its
        // way, and the next pass reads it.
        kube::Error::Api(s) if s.code == 409 => {
            tracing::debug!("{e}");
            Action::requeue(CONFLICT_AGAIN)
        }
        _ => {
            tracing::warn!("{e}");
            Action::requeue(instance_steps::AGAIN)
        }
    }
}

/// The Instances of pool `pool`.
fn of_pool(store: &Store<Instance>, pool: &str) -> Vec<ObjectRef<Instance>> {
    store
        .state()
        .iter()
        .filter(|i| i.spec.instance_type == pool)
        .map(|i| ObjectRef::from_obj(i.as_ref()))
        .collect()
}

/// A Node as the controller reads it: its addresses and labels, not its image list.
fn trim_node(n: &mut Node) {
    instance_cache::trim(n);
    if let Some(s) = n.status.as_mut() {
        s.images = None;
    }
}

/// What of a pool the Instances read: its spec (by generation), whether it is going, its
/// entrance and what a Pod is made from. Its capacity and usage counts, which change with
/// every admission, are left out: each such change woke every Instance of the pool.
fn pool_reads(it: &InstanceType) -> u64 {
    let s = it.status.as_ref();
    hash_of(&(
        it.metadata.generation,
        it.metadata.deletion_timestamp.is_some(),
        s.and_then(|s| s.entrance.as_deref()),
        s.and_then(|s| s.accelerator_sliced.as_ref())
            .is_some_and(|v| v.capacity > 0),
        s.and_then(|s| s.detail.as_ref())
            .and_then(|d| d.manufacturer.as_deref()),
    ))
}

/// What of a pool's queue the Instances read: its stop policy.
fn queue_reads(q: &ClusterQueue) -> u64 {
    hash_of(&(
        q.metadata.deletion_timestamp.is_some(),
        q.spec.stop_policy.as_deref(),
    ))
}

fn hash_of(v: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(v)
}

/// A cached view of every `K` that `config` selects, and the stream of the changes of what
/// `reads` reads of each (a deletion always; the objects it yields are already in the view).
fn follow<K>(
    client: &kube::Client,
    config: watcher::Config,
    trim: fn(&mut K),
    reads: fn(&K) -> u64,
) -> (
    Store<K>,
    impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let mut last = std::collections::HashMap::<ObjectRef<K>, u64>::new();
    let stream = gpustack_watch::objects::<K>(client.clone(), None, config)
        .default_backoff()
        .modify(trim)
        .reflect(writer)
        .filter_map(move |ev| {
            let changed = match ev {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                    let now = reads(&o);
                    (last.insert(ObjectRef::from_obj(&o), now) != Some(now)).then_some(Ok(o))
                }
                Ok(watcher::Event::Delete(o)) => {
                    last.remove(&ObjectRef::from_obj(&o));
                    Some(Ok(o))
                }
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            };
            std::future::ready(changed)
        });
    (store, stream)
}

/// Every change of an object counts.
fn whole<K: kube::Resource>(o: &K) -> u64 {
    hash_of(&o.meta().resource_version)
}

/// Runs the controller until the task is dropped (the controllers' leadership ends).
pub async fn run(
    client: kube::Client,
    settings: watch::Receiver<InstanceSettings>,
    resolve: Arc<Resolve>,
    cache: Arc<InstanceCache>,
    metrics: ReconcileMetrics,
) {
    let ours = watcher::Config::default().labels(&format!("{RESOURCE_TYPE}={INSTANCES}"));
    let all = watcher::Config::default;
    let (services, service_changes) = follow::<Service>(&client, ours, instance_cache::trim, whole);
    let (types, type_changes) =
        follow::<InstanceType>(&client, all(), instance_cache::trim, pool_reads);
    let (queues, queue_changes) =
        follow::<ClusterQueue>(&client, all(), instance_cache::trim, queue_reads);
    // Kept for the addresses a running Instance shows; a Node's own change wakes none.
    let (nodes, node_changes) = follow::<Node>(&client, all(), trim_node, |_| 0);
    let (by_type, by_queue) = (cache.instances().clone(), cache.instances().clone());
    // A change of the settings (the access addresses, say) is a look at every Instance.
    let resettle = tokio_stream::wrappers::WatchStream::from_changes(settings.clone()).map(|_| ());
    let ctx = Arc::new(Ctx {
        client,
        settings,
        resolve,
        cache: cache.clone(),
        services,
        types,
        queues,
        nodes,
        ahead: Ahead::default(),
    });
    Controller::for_shared_stream(cache.instance_changes(), cache.instances().clone())
        .with_config(ControllerConfig::default().concurrency(CONCURRENCY))
        .reconcile_all_on(resettle)
        .owns_shared_stream(cache.pod_changes())
        .watches_stream(service_changes, |s: Service| {
            // A Service is owned by its Pod, which shares the Instance's name.
            s.namespace()
                .map(|ns| ObjectRef::new(&s.name_any()).within(&ns))
        })
        .watches_stream(type_changes, move |it: InstanceType| {
            of_pool(&by_type, &it.name_any())
        })
        .watches_stream(queue_changes, move |q: ClusterQueue| {
            of_pool(&by_queue, &q.name_any())
        })
        .watches_stream(node_changes, |_: Node| None::<ObjectRef<Instance>>)
        .run(
            move |inst, ctx| {
                let metrics = metrics.clone();
                async move {
                    let started = std::time::Instant::now();
                    let done = reconcile(inst, ctx).await;
                    metrics.observe(Loop::Instances, done.is_ok(), started.elapsed());
                    done
                }
            },
            error_policy,
            ctx,
        )
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!("instance controller: {e}");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(generation: i64, entrance: &str, remaining: i64) -> InstanceType {
        serde_json::from_value(json!({
            "metadata": {"name": "h100", "generation": generation},
            "spec": {"acceleratable": true},
            "status": {"entrance": entrance,
                "acceleratorSliced": {"capacity": 800, "remaining": remaining}},
        }))
        .unwrap()
    }

    #[test]
    fn a_pools_usage_wakes_no_instance_but_its_entrance_and_spec_do() {
        let base = pool_reads(&pool(1, "h100", 800));
        assert_eq!(pool_reads(&pool(1, "h100", 790)), base, "usage counts");
        assert_ne!(pool_reads(&pool(1, "", 800)), base, "the entrance");
        assert_ne!(pool_reads(&pool(2, "h100", 800)), base, "the spec");
        let mut going = pool(1, "h100", 800);
        going.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
        );
        assert_ne!(pool_reads(&going), base, "its deletion");
    }

    #[test]
    fn a_queues_stop_policy_wakes_its_instances() {
        let queue = |policy: Option<&str>| -> ClusterQueue {
            serde_json::from_value(json!({
                "metadata": {"name": "h100"},
                "spec": {"stopPolicy": policy},
            }))
            .unwrap()
        };
        assert_ne!(
            queue_reads(&queue(None)),
            queue_reads(&queue(Some("HoldAndDrain")))
        );
    }
}
