//! The Instance controller's IO: a kube-runtime controller over Instances, woken by their Pods
//! (owned), the Pods' Services, and their pools' InstanceTypes and ClusterQueues. Each pass
//! reads what one Instance stands on, asks [`instance_steps::next`] what to do, does it, and asks
//! again, until the answer is to wait.

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
        Controller,
        controller::{Action, Config as ControllerConfig},
        reflector::ObjectRef,
        watcher,
    },
};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::{
    instance_pod::{self, Accelerated, INSTANCES, PodInputs},
    instance_settings::InstanceSettings,
    instance_steps::{self, Observed, Step},
    manufacturers::Resolve,
};

/// Steps one pass takes at most before it yields to other Instances (and comes back).
const STEPS_PER_PASS: usize = 12;
/// Instances reconciled at once.
const CONCURRENCY: u16 = 16;

#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error("instance {namespace}/{name}: {source}")]
    Kube {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

struct Ctx {
    client: kube::Client,
    settings: watch::Receiver<InstanceSettings>,
    resolve: Arc<Resolve>,
}

fn not_found<T>(r: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

/// Everything one Instance stands on, read fresh.
struct Reads {
    instance: Instance,
    pod: Option<Pod>,
    service: Option<Service>,
    instance_type: Option<InstanceType>,
    queue: Option<ClusterQueue>,
    node: Option<Node>,
}

async fn read(c: &kube::Client, ns: &str, name: &str) -> Result<Option<Reads>, kube::Error> {
    let Some(instance) = Api::<Instance>::namespaced(c.clone(), ns)
        .get_opt(name)
        .await?
    else {
        return Ok(None);
    };
    let pod = Api::<Pod>::namespaced(c.clone(), ns).get_opt(name).await?;
    let service = match &pod {
        Some(_) => {
            Api::<Service>::namespaced(c.clone(), ns)
                .get_opt(name)
                .await?
        }
        None => None,
    };
    let pool = &instance.spec.instance_type;
    let (instance_type, queue) = if instance.spec.stopped() || pool.is_empty() {
        (None, None)
    } else {
        (
            Api::<InstanceType>::all(c.clone()).get_opt(pool).await?,
            Api::<ClusterQueue>::all(c.clone())
                .get_opt(pool)
                .await
                .or_else(|e| match e {
                    // Kueue's kinds not served (yet): no queue to drain.
                    kube::Error::Api(s) if s.code == 404 => Ok(None),
                    e => Err(e),
                })?,
        )
    };
    let node_name = pod
        .as_ref()
        .and_then(|p| p.spec.as_ref())
        .and_then(|s| s.node_name.clone());
    let node = match node_name {
        Some(n) => Api::<Node>::all(c.clone()).get_opt(&n).await?,
        None => None,
    };
    Ok(Some(Reads {
        instance,
        pod,
        service,
        instance_type,
        queue,
        node,
    }))
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

async fn create_pod(ctx: &Ctx, r: &Reads) -> Result<(), kube::Error> {
    let Some(it) = &r.instance_type else {
        return Ok(());
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
        Some(n) if !n.is_empty() => Api::<Node>::all(ctx.client.clone())
            .get_opt(n)
            .await?
            .and_then(|node| node.labels().get(gpustack_api::labels::HOSTNAME).cloned()),
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
    match Api::<Pod>::namespaced(ctx.client.clone(), &ns)
        .create(&PostParams::default(), &pod)
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        r => r.map(drop),
    }
}

/// Does `step` for `r`; what the controller does after.
async fn take(ctx: &Ctx, r: &Reads, step: &Step) -> Result<Option<Action>, kube::Error> {
    let inst = &r.instance;
    let ns = inst.namespace().unwrap_or_default();
    let name = inst.name_any();
    let instances = Api::<Instance>::namespaced(ctx.client.clone(), &ns);
    match step {
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
            )?;
        }
        Step::Status(status) => {
            let was = inst.status.as_ref().map(|s| s.phase()).unwrap_or("");
            not_found(
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
        }
        Step::DeletePod => {
            not_found(
                Api::<Pod>::namespaced(ctx.client.clone(), &ns)
                    .delete(&name, &DeleteParams::default())
                    .await,
            )?;
        }
        Step::Stop(why) => {
            tracing::info!(instance = format!("{ns}/{name}"), "stop instance as {why}");
            let patch = json!({"spec": {"stop": true}});
            not_found(
                instances
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await,
            )?;
        }
        Step::CreatePod => create_pod(ctx, r).await?,
        Step::CreateService => {
            if let Some(svc) = r.pod.as_ref().and_then(instance_pod::service) {
                match Api::<Service>::namespaced(ctx.client.clone(), &ns)
                    .create(&PostParams::default(), &svc)
                    .await
                {
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    r => {
                        r?;
                    }
                }
            }
        }
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
    for _ in 0..STEPS_PER_PASS {
        let Some(r) = read(&ctx.client, &ns, &name).await.map_err(fail)? else {
            return Ok(Action::await_change());
        };
        let settings = ctx.settings.borrow().clone();
        let step = instance_steps::next(&Observed {
            instance: &r.instance,
            pod: r.pod.as_ref(),
            service: r.service.as_ref(),
            instance_type: r.instance_type.as_ref(),
            queue: r.queue.as_ref(),
            node: r.node.as_ref(),
            access: (
                &settings.access_static_address,
                &settings.access_wildcard_dns,
            ),
        });
        tracing::debug!(instance = format!("{ns}/{name}"), "{step:?}");
        if let Some(action) = take(&ctx, &r, &step).await.map_err(fail)? {
            return Ok(action);
        }
    }
    Ok(Action::requeue(Duration::ZERO))
}

fn error_policy(_: Arc<Instance>, e: &InstanceError, _: Arc<Ctx>) -> Action {
    tracing::warn!("{e}");
    Action::requeue(instance_steps::AGAIN)
}

/// The Instances of pool `pool`.
fn of_pool(
    store: &kube::runtime::reflector::Store<Instance>,
    pool: &str,
) -> Vec<ObjectRef<Instance>> {
    store
        .state()
        .iter()
        .filter(|i| i.spec.instance_type == pool)
        .map(|i| ObjectRef::from_obj(i.as_ref()))
        .collect()
}

/// Runs the controller until the task is dropped (the controllers' leadership ends).
pub async fn run(
    client: kube::Client,
    settings: watch::Receiver<InstanceSettings>,
    resolve: Arc<Resolve>,
) {
    let ours = watcher::Config::default().labels(&format!("{RESOURCE_TYPE}={INSTANCES}"));
    let controller = Controller::new(
        Api::<Instance>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(ControllerConfig::default().concurrency(CONCURRENCY));
    let store = controller.store();
    let (by_type, by_queue) = (store.clone(), store);
    // A change of the settings (the access addresses, say) is a look at every Instance.
    let resettle = tokio_stream::wrappers::WatchStream::from_changes(settings.clone()).map(|_| ());
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        settings,
        resolve,
    });
    controller
        .reconcile_all_on(resettle)
        .owns(Api::<Pod>::all(client.clone()), ours.clone())
        .watches(Api::<Service>::all(client.clone()), ours, |s: Service| {
            // A Service is owned by its Pod, which shares the Instance's name.
            s.namespace()
                .map(|ns| ObjectRef::new(&s.name_any()).within(&ns))
        })
        .watches(
            Api::<InstanceType>::all(client.clone()),
            watcher::Config::default(),
            move |it: InstanceType| of_pool(&by_type, &it.name_any()),
        )
        .watches(
            Api::<ClusterQueue>::all(client),
            watcher::Config::default(),
            move |q: ClusterQueue| of_pool(&by_queue, &q.name_any()),
        )
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!("instance controller: {e}");
            }
        })
        .await;
}
