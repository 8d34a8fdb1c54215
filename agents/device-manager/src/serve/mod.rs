//! `device-manager serve`: the node agent.
//!
//! Loops, each owning its state and talking through watch channels:
//! - detection + monitor, every `--monitor-period`: the Node's accelerator labels, the
//!   `Devices` spec, the in-memory sample behind `/monitor/snapshot` (with the per-slice view
//!   of [`slices`] where a card is sliced) and the gauges;
//! - the ledger: Pods on this node (a watch) → the state every device plugin reads and the
//!   `Devices.status` ([`crate::ledger`]), written by [`status`] once allocations pause, and
//!   reclaiming work directories of Pods that are gone;
//! - the device plugins ([`plugins`]): served, registered, re-registered on kubelet restart;
//! - HTTPS ([`http`]).
//!
//! Dependencies (kube client, metrics registry, filesystem root, environment) are passed in.

pub(crate) mod http;
pub(crate) mod labels;
pub(crate) mod metrics;
pub mod objects;
pub mod plugins;
pub(crate) mod reclaim;
pub(crate) mod slices;
pub(crate) mod status;

use futures::future::BoxFuture;
use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex, RwLock},
    time::Duration,
};

use futures::StreamExt;
use gpustack_api::{Manufacturer, devices::DevicesGroup, time::Timestamp};
use gpustack_delegated_auth::{
    metrics_access::MetricsAccess,
    reviews::{Delegated, Ttls},
};
use kube::{
    Client,
    api::Api,
    runtime::{WatchStreamExt, watcher},
};
use prometheus::Registry;
use tokio::sync::watch;

use crate::{
    detect::{self, Options},
    injection::NodeFacts,
    ledger::{PodCharges, rebuild},
    node_pod::NodePod,
    plugin::{
        register,
        server::{self, NodeState, Shared, annotation},
    },
    system_root::SystemRoot,
};

pub use crate::host_env::Env;

/// Everything `serve` is configured with.
#[derive(Clone, Debug)]
pub struct Config {
    /// This node's name (`NODE_NAME`): the Devices object and plugin names derive from it.
    pub node_name: String,
    /// The manufacturers to detect and serve plugins for.
    pub manufacturers: Vec<Manufacturer>,
    /// Skip the PCI scan.
    pub no_pci_check: bool,
    /// Publish an empty first pass instead of withholding it until an accelerator is found.
    pub no_fast_failed: bool,
    /// Which allocation modes get a plugin.
    pub modes: plugins::ModeFlags,
    /// How often the monitor samples the accelerators.
    pub monitor_period: Duration,
    /// The kubelet's registration socket (`kubelet.sock`); plugin sockets go beside it.
    pub kube_socket: PathBuf,
    /// The HTTPS listener (`/metrics`, `/monitor/snapshot`).
    pub bind: SocketAddr,
    /// Serving certificate directory (`tls.crt`, `tls.key`); `None` generates a pair at start.
    pub cert_dir: Option<PathBuf>,
    /// `/metrics` only to callers the cluster allows `get` on it (`--metrics-auth=delegated`),
    /// else to anyone who reaches the port.
    pub metrics_auth_delegated: bool,
    /// The node's injection facts (staged libraries, NVIDIA strategy).
    pub node: NodeFacts,
    /// Host directory of per-container work directories.
    pub pods_dir: String,
    /// `GPUSTACK_LEDGER_RELEASE_TERMINATED_PODS`.
    pub release_finished: bool,
    /// The system namespace (`KUBERNETES_POD_NAMESPACE`, `gpustack-system`): where the
    /// node's NFD `NodeFeature` is written.
    pub system_namespace: String,
}

/// Why `serve` could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The serving certificate could not be loaded or made.
    #[error(transparent)]
    Tls(#[from] gpustack_serving::certs::ServingConfigError),
    /// The HTTPS listener could not bind.
    #[error("listening on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// The agent's metrics could not be registered.
    #[error("registering metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// Runs the agent until `shutdown` completes; our sockets are removed at exit.
///
/// Boxed here so that its state machine is compiled with this crate: rustc compiles an async
/// body in the crate that polls it, which would otherwise be the binary, again after every
/// change here.
pub fn run(
    config: Config,
    client: Client,
    registry: Registry,
    root: SystemRoot,
    env: Env,
    shutdown: BoxFuture<'static, ()>,
) -> BoxFuture<'static, Result<(), ServeError>> {
    Box::pin(run_until(config, client, registry, root, env, shutdown))
}

async fn run_until(
    config: Config,
    client: Client,
    registry: Registry,
    root: SystemRoot,
    env: Env,
    shutdown: BoxFuture<'static, ()>,
) -> Result<(), ServeError> {
    let socket_dir = config
        .kube_socket
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default();
    for name in plugins::all_socket_names() {
        let stale = socket_dir.join(name);
        if std::fs::remove_file(&stale).is_ok() {
            tracing::info!(socket = %stale.display(), "removed a stale socket of ours");
        }
    }
    let metrics = Arc::new(metrics::Metrics::register(&registry)?);
    let plugin_metrics = plugins::PluginMetrics::register(&registry)?;
    let tls = http::tls_config(config.cert_dir.as_deref())?;
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .map_err(|source| ServeError::Bind {
            addr: config.bind,
            source,
        })?;
    tracing::info!(addr = %config.bind, node = %config.node_name, "serving /metrics and /monitor/snapshot over HTTPS");

    let (stop_tx, stop_rx) = watch::channel(false);
    let (ready_tx, ready_rx) = watch::channel(false);
    let (spec_tx, spec_rx) = watch::channel::<Option<Vec<DevicesGroup>>>(None);
    let (state_tx, state_rx) = watch::channel(Arc::new(NodeState {
        release_finished: config.release_finished,
        ..NodeState::default()
    }));
    let snapshot = Arc::new(RwLock::new(None));

    let activity = Arc::new(crate::plugin::activity::Activity::default());
    let shared = Arc::new(Shared {
        node_name: config.node_name.clone(),
        pods: Api::all(client.clone()),
        state: state_rx.clone(),
        reservations: Mutex::new(BTreeMap::new()),
        allocate_lock: tokio::sync::Mutex::new(()),
        activity: activity.clone(),
        pod_resources: register::PodResourcesClient::new(register::pod_resources_socket(
            &config.kube_socket,
        )),
        node: config.node.clone(),
        pods_dir: config.pods_dir.clone(),
        root: root.clone(),
        env: env.clone(),
        gates: server::Gates::from_env(|k| env(k)),
    });
    let (status_tx, status_rx) = watch::channel(None);
    let mut tasks = vec![tokio::spawn(status::run(
        status::Target {
            client: client.clone(),
            node: config.node_name.clone(),
            ours: config.manufacturers.clone(),
        },
        activity,
        status_rx,
        stop_rx.clone(),
    ))];
    let metrics_access = if config.metrics_auth_delegated {
        MetricsAccess::Delegated(Box::new(Delegated::new(client.clone(), Ttls::default())))
    } else {
        MetricsAccess::Open
    };
    let router = http::router(http::HttpState {
        registry,
        metrics_access: Arc::new(metrics_access),
        snapshot: snapshot.clone(),
        ready: ready_rx,
    });
    // The toolkit's serving: a connection cap, handshake and header deadlines, and an accept
    // loop that backs off when descriptors run out.
    let https = gpustack_serving::serve::serve_tls(listener, tls, router, stop_rx.clone());
    tasks.push(tokio::spawn(async move {
        https.await;
    }));
    tasks.push(tokio::spawn(detect_loop(
        config.clone(),
        client.clone(),
        root.clone(),
        env.clone(),
        DetectOutputs {
            spec: spec_tx,
            ready: ready_tx,
            snapshot,
            metrics,
            state: state_rx.clone(),
        },
        stop_rx.clone(),
    )));
    tasks.push(tokio::spawn(ledger_loop(
        config.clone(),
        client.clone(),
        reclaim::Reclaimer::new(root.clone(), env.clone(), config.pods_dir.clone()),
        LedgerOutputs {
            state: state_tx,
            status: status_tx,
            shared: shared.clone(),
        },
        spec_rx.clone(),
        stop_rx.clone(),
    )));
    let plan = config
        .manufacturers
        .iter()
        .map(|m| {
            let resolved = m.resolve(|k| env(k));
            plugins::Planned {
                manufacturer: *m,
                base: resolved.resource_name.clone(),
                modes: plugins::modes(config.modes, resolved.partition_kind.is_some()),
                partition_kind: resolved.partition_kind,
            }
        })
        .collect();
    let supervisor = plugins::Supervisor {
        shared,
        kube_socket: config.kube_socket.clone(),
        plan,
        metrics: plugin_metrics,
    };
    tasks.push(tokio::spawn(supervisor.run(spec_rx, stop_rx)));

    shutdown.await;
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
    Ok(())
}

struct DetectOutputs {
    spec: watch::Sender<Option<Vec<DevicesGroup>>>,
    ready: watch::Sender<bool>,
    snapshot: Arc<RwLock<Option<http::MonitorSnapshot>>>,
    metrics: Arc<metrics::Metrics>,
    state: watch::Receiver<Arc<NodeState>>,
}

/// Detects and samples every period; a manufacturer that could not be measured keeps its
/// last state; an empty first pass is withheld unless `--no-fast-failed`.
async fn detect_loop(
    config: Config,
    client: Client,
    root: SystemRoot,
    env: Env,
    out: DetectOutputs,
    mut stop: watch::Receiver<bool>,
) {
    let opts = Options {
        manufacturers: config.manufacturers.clone(),
        no_pci_check: config.no_pci_check,
    };
    let mut last: BTreeMap<Manufacturer, Vec<DevicesGroup>> = BTreeMap::new();
    let mut published = false;
    let mut labels_out = LabelsOut::default();
    let mut sick: Option<BTreeSet<(Manufacturer, String)>> = None;
    let mut tick = tokio::time::interval(config.monitor_period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let pass_started = std::time::Instant::now();
        let (root2, env2, opts2) = (root.clone(), env.clone(), opts.clone());
        let carved = carved_cards(&out.state.borrow(), &config.manufacturers);
        let Ok((report, sample, slices)) = tokio::task::spawn_blocking(move || {
            let env = |k: &str| env2(k);
            (
                detect::detect(&root2, &env, &opts2),
                detect::monitor(&root2, &env, &opts2),
                sample_slices(&root2, &env, carved),
            )
        })
        .await
        else {
            tracing::error!("the detection pass panicked; keeping the last state");
            continue;
        };
        let failed: BTreeSet<Manufacturer> = report.failures.iter().map(|(m, _)| *m).collect();
        for (m, e) in &report.failures {
            tracing::warn!(manufacturer = %m, "could not measure, keeping the last state: {e}");
        }
        for m in &config.manufacturers {
            if !failed.contains(m) {
                last.insert(
                    *m,
                    report
                        .items
                        .iter()
                        .filter(|g| g.manufacturer == *m)
                        .cloned()
                        .collect(),
                );
            }
        }
        let groups: Vec<DevicesGroup> = last.values().flatten().cloned().collect();
        log_health_changes(&mut sick, &groups);
        if groups.is_empty() && !published && !config.no_fast_failed {
            tracing::info!(
                "no accelerator found yet; the empty first pass is withheld (pass --no-fast-failed to publish it)"
            );
            continue;
        }
        out.spec.send_if_modified(|cur| {
            let changed = cur.as_ref() != Some(&groups);
            *cur = Some(groups.clone());
            changed
        });
        let mut ok = true;
        if let Err(e) = labels_out.publish(&client, &config, &groups).await {
            tracing::warn!("publishing the accelerator labels: {e}");
            ok = false;
        }
        if let Err(e) =
            objects::publish_spec(&client, &config.node_name, &config.manufacturers, &groups).await
        {
            tracing::warn!("publishing the Devices spec: {e}");
            ok = false;
        }
        if ok && !published {
            published = true;
            let _ = out.ready.send(true);
        }
        let ledger = out.state.borrow().ledger.clone();
        out.metrics
            .update(&config.node_name, &sample.items, &groups, &ledger);
        *out.snapshot.write().unwrap_or_else(|e| e.into_inner()) = Some(http::MonitorSnapshot {
            timestamp: Timestamp::now_local(),
            period_seconds: config.monitor_period.as_secs_f64().ceil() as u64,
            groups: sample.items,
            slices,
        });
        out.metrics.pass_done();
        tracing::debug!(
            pass_us = pass_started.elapsed().as_micros() as u64,
            "monitor pass done"
        );
    }
}

/// What the per-slice view reads: the NVIDIA cards the ledger holds sliced, each with the
/// containers holding its slices, and the MIG partitions live containers hold.
#[derive(Default)]
struct Carved {
    sliced: Vec<(String, Vec<(String, String)>)>,
    partitions: Vec<slices::PartitionHold>,
}

fn carved_cards(state: &NodeState, ours: &[Manufacturer]) -> Carved {
    if !ours.contains(&Manufacturer::Nvidia) {
        return Carved::default();
    }
    let sliced = state
        .ledger
        .status
        .groups
        .iter()
        .filter(|g| g.manufacturer == Manufacturer::Nvidia)
        .flat_map(|g| &g.accelerators)
        .filter(|a| a.mode == gpustack_api::devices::AllocationMode::Sliced)
        .map(|a| {
            let held = slices::holders(&state.pods, Manufacturer::Nvidia, &a.id);
            (a.id.clone(), held)
        })
        .collect();
    Carved {
        sliced,
        partitions: slices::partition_holds(&state.pods, Manufacturer::Nvidia),
    }
}

/// The per-slice view of the carved cards: their processes through NVML, each process's Pod
/// through its cgroup under the system root; and the held partitions' memory. `None` when no
/// card is carved.
fn sample_slices(
    root: &SystemRoot,
    env: &dyn Fn(&str) -> Option<String>,
    carved: Carved,
) -> Option<slices::Slices> {
    use crate::vendors::nvidia::processes;
    let Carved { sliced, partitions } = carved;
    if sliced.is_empty() && partitions.is_empty() {
        return None;
    }
    let ids: Vec<String> = sliced.iter().map(|(id, _)| id.clone()).collect();
    let nvml = crate::vendors::partitions::load_nvml(root, env).ok();
    let cards = nvml
        .as_ref()
        .map(|(nvml, _)| processes::cards_by_uuid(nvml));
    let (rows, memory) = match &cards {
        Some(cards) => (
            processes::list(cards, &ids),
            processes::partition_memory(cards, &partitions),
        ),
        None => (
            ids.iter()
                .map(|id| slices::CardRows {
                    accelerator: id.clone(),
                    rows: Err(slices::Reason::TransientDriverError),
                })
                .collect(),
            vec![Err(slices::Reason::TransientDriverError); partitions.len()],
        ),
    };
    let cards: Vec<(slices::CardRows, Vec<(String, String)>)> = rows
        .into_iter()
        .zip(sliced.into_iter().map(|(_, held)| held))
        .collect();
    let mut view =
        slices::attribute(
            Manufacturer::Nvidia,
            &cards,
            |pid| match std::fs::read_to_string(root.path(format!("/proc/{pid}/cgroup"))) {
                Ok(text) => {
                    slices::pod_of_cgroup(&text).map_or(slices::Owner::NotAPod, slices::Owner::Pod)
                }
                Err(_) => slices::Owner::Unreadable,
            },
        );
    let read: Vec<_> = partitions.into_iter().zip(memory).collect();
    view.partitions = slices::partitions(Manufacturer::Nvidia, &read);
    Some(view)
}

/// Logs each card that turned unhealthy (with the reason its detector checks, which the
/// `Devices` status keeps too) or recovered since the last pass; the first pass logs the cards
/// that start unhealthy.
fn log_health_changes(
    last: &mut Option<BTreeSet<(Manufacturer, String)>>,
    groups: &[DevicesGroup],
) {
    let now: BTreeSet<(Manufacturer, String)> = groups
        .iter()
        .flat_map(|g| {
            g.accelerators
                .iter()
                .filter(|a| a.status.unhealthy)
                .map(move |a| (g.manufacturer, a.id.clone()))
        })
        .collect();
    let before = last.clone().unwrap_or_default();
    for (m, id) in now.difference(&before) {
        tracing::warn!(manufacturer = %m, accelerator = %id, reason = crate::ledger::unhealthy_reason(*m), "accelerator unhealthy");
    }
    for (m, id) in before.difference(&now) {
        tracing::info!(manufacturer = %m, accelerator = %id, "accelerator healthy again");
    }
    *last = Some(now);
}

/// Where the accelerator labels go: NFD's `NodeFeature` once the kind is served (checked each
/// pass until it is), else the Node itself. Once they go to the `NodeFeature`, the labels this
/// agent wrote on the Node itself are removed (NFD's master puts its own there).
#[derive(Default)]
struct LabelsOut {
    node_feature: bool,
    /// The labels written on the Node before NFD was served have been removed.
    direct_removed: bool,
    /// What the last `NodeFeature` apply sent (an unchanged set is not applied again).
    applied: Option<BTreeMap<String, String>>,
}

impl LabelsOut {
    async fn publish(
        &mut self,
        client: &Client,
        config: &Config,
        groups: &[DevicesGroup],
    ) -> Result<(), kube::Error> {
        if !self.node_feature {
            self.node_feature = objects::node_feature_served(client).await?;
            if self.node_feature {
                tracing::info!(
                    namespace = %config.system_namespace,
                    "NFD's NodeFeature kind is served: publishing the accelerator labels there"
                );
            }
        }
        if !self.node_feature {
            return objects::publish_labels(
                client,
                &config.node_name,
                &config.manufacturers,
                groups,
            )
            .await;
        }
        if !self.direct_removed {
            let removed =
                objects::remove_direct_labels(client, &config.node_name, &config.manufacturers)
                    .await?;
            if removed > 0 {
                tracing::info!(
                    removed,
                    "removed the accelerator labels this agent wrote on the Node (NFD's NodeFeature carries them now)"
                );
            }
            self.direct_removed = true;
        }
        let want = labels::node_labels(groups);
        if self.applied.as_ref() == Some(&want) {
            return Ok(());
        }
        objects::publish_node_feature(
            client,
            &config.node_name,
            &config.system_namespace,
            &config.manufacturers,
            &want,
        )
        .await?;
        self.applied = Some(want);
        Ok(())
    }
}

fn charges(pod: &NodePod) -> PodCharges {
    let phase = pod.phase().unwrap_or("");
    PodCharges {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        finished: matches!(phase, "Succeeded" | "Failed"),
        allocations: annotation(pod),
    }
}

/// Where the ledger loop's results go.
struct LedgerOutputs {
    /// What every plugin reads.
    state: watch::Sender<Arc<NodeState>>,
    /// The status to write ([`status::run`] writes it once allocations pause).
    status: watch::Sender<Option<gpustack_api::devices::DevicesStatus>>,
    /// The plugins' reservations, dropped for Pods watched deleted.
    shared: Arc<Shared>,
}

/// Watches the Pods on this node and keeps the ledger, its status and the plugins' state.
async fn ledger_loop(
    config: Config,
    client: Client,
    mut reclaimer: reclaim::Reclaimer,
    out: LedgerOutputs,
    mut spec: watch::Receiver<Option<Vec<DevicesGroup>>>,
    mut stop: watch::Receiver<bool>,
) {
    let wc = watcher::Config::default().fields(&format!("spec.nodeName={}", config.node_name));
    let mut events = gpustack_watch::objects::<NodePod>(client.clone(), None, wc)
        .default_backoff()
        .boxed();
    let mut pods: BTreeMap<String, (PodCharges, Arc<NodePod>)> = BTreeMap::new();
    let mut listing: BTreeMap<String, (PodCharges, Arc<NodePod>)> = BTreeMap::new();
    let mut synced = false;
    let mut retry = tokio::time::interval(Duration::from_secs(1));
    loop {
        let mut reclaim_now: Option<BTreeSet<String>> = None;
        tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(watcher::Event::Apply(p))) => { let c = charges(&p); pods.insert(c.uid.clone(), (c, Arc::new(p))); }
                Some(Ok(watcher::Event::Delete(p))) => {
                    let uid = p.metadata.uid.as_deref().unwrap_or_default();
                    pods.remove(uid);
                    out.shared.forget_pod(uid);
                }
                Some(Ok(watcher::Event::Init)) => listing.clear(),
                Some(Ok(watcher::Event::InitApply(p))) => { let c = charges(&p); listing.insert(c.uid.clone(), (c, Arc::new(p))); }
                Some(Ok(watcher::Event::InitDone)) => { pods = std::mem::take(&mut listing); synced = true; }
                Some(Err(e)) => { tracing::warn!("watching Pods: {e}"); continue; }
                None => return,
            },
            _ = spec.changed() => {}
            _ = retry.tick() => {
                if synced {
                    let live: BTreeSet<String> = pods.keys().cloned().collect();
                    reclaim_now = Some(live);
                }
            }
            _ = stop.wait_for(|s| *s) => return,
        }
        if let Some(live) = reclaim_now {
            reclaimer.reclaim(&live).await;
        }
        let Some(groups) = spec.borrow().clone() else {
            continue;
        };
        if !synced {
            continue;
        }
        let list: Vec<PodCharges> = pods.values().map(|(c, _)| c.clone()).collect();
        let objects: Vec<Arc<NodePod>> = pods.values().map(|(_, p)| p.clone()).collect();
        let ledger = rebuild(
            &gpustack_api::devices::DevicesSpec {
                groups: groups.clone(),
            },
            &list,
            config.release_finished,
        );
        for c in &ledger.conflicts {
            tracing::warn!("ledger: {c}");
        }
        let status = ledger.status.clone();
        out.state.send_replace(Arc::new(NodeState {
            groups,
            pods: list,
            objects,
            ledger,
            release_finished: config.release_finished,
        }));
        out.status.send_if_modified(|cur| {
            let changed = cur.as_ref() != Some(&status);
            *cur = Some(status);
            changed
        });
    }
}
