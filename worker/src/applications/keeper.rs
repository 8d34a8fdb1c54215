//! The loop that keeps the node agents installed: every replica looks for the upstream
//! applications (for its `/readyz`); the holder of Lease [`super::LEASE`] also applies the
//! agents' objects with server-side apply, prunes the ones no longer wanted and writes an Event
//! when an upstream application goes missing. One pass per resync period, so a deleted or
//! edited object is back within one, and one at once when the set of vendors on the nodes
//! changes (a watch on the nodes' labels).

use std::{collections::BTreeSet, sync::Arc};

use k8s_openapi::{
    api::{
        core::v1::{Node, ObjectReference, Pod},
        storage::v1::CSIDriver,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::Time,
};
use kube::{
    api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams},
    core::ApiResource,
    runtime::events::{Event, EventType, Recorder, Reporter},
};
use prometheus::Registry;
use serde_json::Value;
use tokio::sync::watch;

use super::{
    Config, Health, LEASE,
    objects::{self, Input},
    plan::{self, Application, Found},
    upstream::{self, Missing, Observed},
};
use crate::{controllers::leader, install::Desired};

/// Why one object of a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// Creating or repairing an object failed.
    #[error("applying {object}: {source}")]
    Apply {
        /// The object (`kind/name`).
        object: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Reading an object failed.
    #[error("reading {object}: {source}")]
    Read {
        /// The object (`kind/name`).
        object: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Listing objects failed.
    #[error("listing {what}: {source}")]
    List {
        /// What was listed.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Deleting an object failed.
    #[error("deleting {object}: {source}")]
    Delete {
        /// The object (`kind/name`).
        object: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

/// What one pass did, for logs and tests.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Objects written: created, or their drift repaired.
    pub applied: Vec<String>,
    /// Objects a Helm release owns, left alone.
    pub left_to_helm: Vec<String>,
    /// Objects deleted because no application wants them any more.
    pub pruned: Vec<String>,
    /// What failed.
    pub errors: Vec<PassError>,
}

fn api_for(client: &kube::Client, resource: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// The image the agents run: the worker's own Pod's container `main`, else the default.
pub async fn own_image(client: &kube::Client, namespace: &str, pod: Option<&str>) -> String {
    let Some(pod) = pod else {
        return objects::default_image();
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    match api.get_opt(pod).await {
        Ok(Some(p)) => p
            .spec
            .and_then(|s| s.containers.into_iter().find(|c| c.name == "main"))
            .and_then(|c| c.image)
            .unwrap_or_else(objects::default_image),
        Ok(None) => objects::default_image(),
        Err(e) => {
            tracing::warn!(pod, "reading the worker's own Pod for its image: {e}");
            objects::default_image()
        }
    }
}

/// What the cluster holds of the upstream applications.
pub async fn observe(client: &kube::Client) -> Result<Observed, PassError> {
    let list = |what: &str| {
        let what = what.to_owned();
        move |source| PassError::List { what, source }
    };
    let mut webhooks: Vec<Value> = Vec::new();
    for (kind, plural) in [
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
    ] {
        let r = ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
            plural,
        );
        let items = Api::<DynamicObject>::all_with(client.clone(), &r)
            .list(&ListParams::default())
            .await
            .map_err(list(plural))?;
        webhooks.extend(items.items.into_iter().map(|o| o.data));
    }
    // Only whether it exists: its metadata, not its schema, is decoded.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let nfd_crd = crds
        .get_metadata_opt(upstream::NFD_CRD)
        .await
        .map_err(|source| PassError::Read {
            object: format!("CustomResourceDefinition {}", upstream::NFD_CRD),
            source,
        })?
        .is_some();
    let drivers: Api<CSIDriver> = Api::all(client.clone());
    let csi_drivers = drivers
        .list_metadata(&ListParams::default())
        .await
        .map_err(list("csidrivers"))?
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    Ok(Observed {
        kueue_webhook: upstream::serves_kueue(&webhooks),
        nfd_crd,
        csi_drivers,
    })
}

/// Writes [`upstream::POD_CONDITION`] on the worker's own Pod when what it says changes.
async fn sync_pod_condition(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    missing: &[Missing],
) -> Result<(), PassError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let object = format!("Pod {namespace}/{pod}");
    let Some(current) = api.get_opt(pod).await.map_err(|source| PassError::Read {
        object: object.clone(),
        source,
    })?
    else {
        return Ok(());
    };
    let (status, reason, message) = upstream::pod_condition(missing);
    let have = current
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == upstream::POD_CONDITION);
    if have.as_ref().is_some_and(|c| {
        c.status == status
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message.as_str())
    }) {
        return Ok(());
    }
    let since = have
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time)
        .unwrap_or_else(|| Time(jiff::Timestamp::now()));
    // Strategic merge: conditions merge by type, the kubelet's stay as they are.
    let patch = serde_json::json!({"status": {"conditions": [{
        "type": upstream::POD_CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }]}});
    api.patch_status(pod, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .map_err(|source| PassError::Apply { object, source })?;
    Ok(())
}

/// What [`apply`] did with one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Applied {
    /// Written (created, or drift repaired).
    Written,
    /// Already as wanted: nothing written, so a steady cluster sees no writes.
    Unchanged,
    /// A Helm release owns it: left alone.
    LeftToHelm,
}

/// Applies `d` unless a Helm release owns it or it already holds every field `d` sets.
async fn apply(client: &kube::Client, d: &Desired) -> Result<Applied, PassError> {
    let api = api_for(client, &d.resource, d.namespace.as_deref());
    let current = api
        .get_opt(d.name())
        .await
        .map_err(|source| PassError::Read {
            object: d.describe(),
            source,
        })?;
    if let Some(c) = &current {
        if plan::owned_by_helm(&c.metadata) {
            return Ok(Applied::LeftToHelm);
        }
        let have = serde_json::to_value(c).unwrap_or(Value::Null);
        if c.metadata.deletion_timestamp.is_none() && crate::install::contains(&have, &d.object) {
            return Ok(Applied::Unchanged);
        }
    }
    api.patch(
        d.name(),
        &PatchParams::apply(objects::MANAGED_BY).force(),
        &Patch::Apply(&d.object),
    )
    .await
    .map_err(|source| PassError::Apply {
        object: d.describe(),
        source,
    })?;
    Ok(Applied::Written)
}

/// Everything the worker applied earlier (its `managed-by` label), of every kind it applies.
async fn found(
    client: &kube::Client,
    namespace: &str,
) -> Result<Vec<(ApiResource, Found)>, PassError> {
    let selector = format!("app.kubernetes.io/managed-by={}", objects::MANAGED_BY);
    let mut out = Vec::new();
    for (resource, namespaced) in objects::kinds() {
        let api = api_for(client, &resource, namespaced.then_some(namespace));
        let list = api
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(|source| PassError::List {
                what: resource.plural.clone(),
                source,
            })?;
        out.extend(list.items.into_iter().map(|o| {
            (
                resource.clone(),
                Found {
                    kind: resource.kind.clone(),
                    meta: o.metadata,
                },
            )
        }));
    }
    Ok(out)
}

/// One pass of the holder: apply what is wanted, prune what is not.
pub async fn pass(
    client: &kube::Client,
    input: &Input,
    enabled: &BTreeSet<Application>,
    cfg: &Config,
) -> Outcome {
    let mut out = Outcome::default();
    let nodes: Api<Node> = Api::all(client.clone());
    let present = match nodes.list_metadata(&ListParams::default()).await {
        Ok(list) => {
            let labels: Vec<_> = list
                .items
                .into_iter()
                .map(|n| n.metadata.labels.unwrap_or_default())
                .collect();
            plan::manufacturers_present(&cfg.manufacturers, &labels)
        }
        Err(source) => {
            // Without the nodes nothing can be decided about the device managers: keep them.
            out.errors.push(PassError::List {
                what: "nodes".into(),
                source,
            });
            return out;
        }
    };
    let desired = plan::desired(input, enabled, &present);
    for d in &desired {
        match apply(client, d).await {
            Ok(Applied::Written) => out.applied.push(d.describe()),
            Ok(Applied::Unchanged) => {}
            Ok(Applied::LeftToHelm) => out.left_to_helm.push(d.describe()),
            Err(e) => out.errors.push(e),
        }
    }
    match found(client, &input.namespace).await {
        Ok(found) => {
            let metas: Vec<Found> = found.iter().map(|(_, f)| f.clone()).collect();
            for f in plan::to_prune(&metas, &desired) {
                let Some((resource, _)) = found
                    .iter()
                    .find(|(r, g)| r.kind == f.kind && g.meta.uid == f.meta.uid)
                else {
                    continue;
                };
                let name = f.meta.name.clone().unwrap_or_default();
                let object = match &f.meta.namespace {
                    Some(ns) => format!("{} {ns}/{name}", f.kind),
                    None => format!("{} {name}", f.kind),
                };
                let api = api_for(client, resource, f.meta.namespace.as_deref());
                match api.delete(&name, &DeleteParams::background()).await {
                    Ok(_) => out.pruned.push(object),
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(source) => out.errors.push(PassError::Delete { object, source }),
                }
            }
        }
        Err(e) => out.errors.push(e),
    }
    out
}

/// Where the Events about the applications go: the worker's own Pod where there is one, else
/// the Lease.
fn regarding(namespace: &str, pod: Option<&str>) -> ObjectReference {
    match pod {
        Some(pod) => ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectReference::default()
        },
        None => ObjectReference {
            api_version: Some("coordination.k8s.io/v1".into()),
            kind: Some("Lease".into()),
            name: Some(LEASE.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectReference::default()
        },
    }
}

/// Follows the nodes' labels into `tx`: the manufacturers of `configured` that their NFD PCI
/// labels show, changed only when that set changes (a heartbeat changes nothing), until `stop`.
async fn follow_nodes(
    client: kube::Client,
    configured: Vec<gpustack_api::Manufacturer>,
    tx: watch::Sender<Vec<gpustack_api::Manufacturer>>,
    mut stop: watch::Receiver<bool>,
) {
    use futures::StreamExt;
    use kube::{
        core::PartialObjectMeta,
        runtime::{WatchStreamExt, reflector, watcher},
    };
    let (reader, writer) = reflector::store();
    let api = Api::<PartialObjectMeta<Node>>::all(client);
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    let mut stream = std::pin::pin!(stream);
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            next = stream.next() => match next {
                None => return,
                Some(Err(e)) => tracing::debug!("applications: watching nodes: {e}"),
                Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => {}
                Some(Ok(_)) => {
                    let labels: Vec<_> = reader
                        .state()
                        .iter()
                        .map(|n| n.metadata.labels.clone().unwrap_or_default())
                        .collect();
                    let present = plan::manufacturers_present(&configured, &labels);
                    tx.send_if_modified(|cur| std::mem::replace(cur, present.clone()) != present);
                }
            },
        }
    }
}

/// The counter of passes on `/metrics` (`gpustack_worker_applications_passes_total`, by
/// role: `holder` applied, `observer` only looked).
fn pass_counter(registry: &Registry) -> Option<prometheus::IntCounterVec> {
    let c = prometheus::IntCounterVec::new(
        prometheus::Opts::new(
            "gpustack_worker_applications_passes_total",
            "Passes over the applications: the Lease holder's (applying) and the others' (looking).",
        ),
        &["role"],
    )
    .ok()?;
    registry.register(Box::new(c.clone())).ok()?;
    Some(c)
}

/// Runs until `stop`. With every application disabled it returns at once.
pub async fn run(
    client: kube::Client,
    cfg: Config,
    health: Arc<Health>,
    registry: &Registry,
    mut stop: watch::Receiver<bool>,
) {
    let enabled = plan::enabled(&cfg.disabled);
    if enabled.is_empty() {
        tracing::info!("--disable-applications=*: the worker installs no applications");
        return;
    }
    tracing::info!(
        enabled = ?enabled.iter().map(|a| a.name()).collect::<Vec<_>>(),
        resync = ?cfg.resync,
        "keeping the applications installed"
    );
    let counter = pass_counter(registry);
    let count = |role: &str| {
        if let Some(c) = &counter {
            c.with_label_values(&[role]).inc();
        }
    };
    let namespace = cfg.lease.namespace.clone();
    let (leading_tx, mut leading) = watch::channel(false);
    tokio::spawn(leader::run(
        client.clone(),
        cfg.lease.clone(),
        leading_tx,
        stop.clone(),
    ));
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "gpustack-worker-applications".into(),
            instance: Some(cfg.lease.identity.clone()),
        },
    );
    let about = regarding(&namespace, cfg.own_pod.as_deref());
    // A vendor's nodes appearing or going: a pass at once, not at the next resync.
    let (nodes_tx, mut nodes) = watch::channel(Vec::new());
    let mut following_nodes = enabled.contains(&Application::DeviceManager);
    if following_nodes {
        tokio::spawn(follow_nodes(
            client.clone(),
            cfg.manufacturers.clone(),
            nodes_tx,
            stop.clone(),
        ));
    }
    let mut input: Option<Input> = None;
    let mut reported: Vec<Missing> = Vec::new();
    // Nothing to look for when every upstream application is disabled (nor a condition to
    // write: the chart grants pods/status only when one is left to the worker).
    let looks = upstream::UPSTREAM.iter().any(|a| enabled.contains(a));
    loop {
        let observed = match looks {
            true => Some(observe(&client).await),
            false => None,
        };
        match observed {
            None => {}
            Some(Ok(observed)) => {
                let missing = upstream::missing(&enabled, &observed);
                health.set_missing(missing.clone());
                if let Some(pod) = cfg.own_pod.as_deref()
                    && let Err(e) = sync_pod_condition(&client, &namespace, pod, &missing).await
                {
                    tracing::warn!("applications: {e}");
                }
                if *leading.borrow() {
                    for m in missing.iter().filter(|m| !reported.contains(m)) {
                        tracing::warn!("{}", m.message());
                        let ev = Event {
                            type_: EventType::Warning,
                            // One reason per application: the recorder folds Events with
                            // the same reason into one series, keeping the last note only.
                            reason: format!("{}Missing", m.application.pascal()),
                            note: Some(m.message().chars().take(1024).collect()),
                            action: "Install".into(),
                            secondary: None,
                        };
                        if let Err(e) = recorder.publish(&ev, &about).await {
                            tracing::debug!("writing an applications event: {e}");
                        }
                    }
                    reported = missing;
                }
            }
            Some(Err(e)) => tracing::warn!("applications: {e}"),
        }
        if *leading.borrow() {
            let input = match &input {
                Some(i) => i.clone(),
                None => {
                    let image = own_image(&client, &namespace, cfg.own_pod.as_deref()).await;
                    tracing::info!(%image, "the node agents run the worker's image");
                    input.insert(Input::new(&namespace, &image)).clone()
                }
            };
            let out = pass(&client, &input, &enabled, &cfg).await;
            for a in &out.applied {
                tracing::info!(object = %a, "applications: applied");
            }
            for p in &out.pruned {
                tracing::info!(object = %p, "applications: removed");
            }
            for e in &out.errors {
                tracing::warn!("applications: {e}");
            }
            tracing::debug!(left_to_helm = ?out.left_to_helm, "applications: pass done");
            count("holder");
        } else {
            reported.clear();
            count("observer");
        }
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(cfg.resync) => {}
            // Leadership won: apply at once.
            r = leading.wait_for(|l| *l), if !*leading.borrow() => if r.is_err() { return },
            // The node watch ended (or never started): the resync alone from then on.
            r = nodes.changed(), if following_nodes => if r.is_err() { following_nodes = false },
        }
    }
}
