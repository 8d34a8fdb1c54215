//! The worker's controllers (worker.md §0–§2): node onboarding, labels and capacity, the Kueue
//! chain (ResourceFlavors, InstanceTypes, ClusterQueues, LocalQueues, Topologies, the admission
//! checks), the node-devices check on Workloads, and Instances (each one Pod queued at its
//! pool's entrance).
//!
//! Domain logic is pure ([`node_facts`], [`node_labels`], [`capacity`], [`flavors`],
//! [`queues`], [`plan_check`], [`topology`], [`unit_presets`], [`it_status`], [`chain`],
//! [`node_devices`], [`instance_pod`], [`instance_status`], [`instance_steps`]); [`engine`] and
//! [`instances`] are the IO around it and [`leader`] decides which replica runs
//! it.

pub mod capacity;
pub mod chain;
pub mod chain_settings;
pub mod conditions;
pub mod engine;
pub mod flavors;
pub mod instance_cache;
pub mod instance_pod;
pub mod instance_settings;
pub mod instance_status;
pub mod instance_steps;
pub mod instances;
pub mod it_status;
pub mod joint_check;
pub mod label_match;
pub mod leader;
pub mod ledger;
pub mod manufacturers;
pub mod model_manager_nodes;
pub mod node_devices;
pub mod node_facts;
pub mod node_labels;
pub mod ownership;
pub mod plan_check;
pub mod queues;
pub mod reconcile_metrics;
pub mod topology;
pub mod unit_presets;
pub mod workload_checks;

use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::watch;

use self::{
    chain_settings::ChainSettings, engine::Tuning, instance_settings::InstanceSettings,
    leader::LeaseConfig,
};

pub use manufacturers::Resolve;

/// What the controllers are started with.
#[derive(Clone)]
pub struct Config {
    /// The worker's namespace.
    pub system_namespace: String,
    /// `None` runs the controllers without election (`--kube-leader-election=false`).
    pub election: Option<LeaseConfig>,
    /// The manufacturers' facts.
    pub resolve: Arc<Resolve>,
    /// Pacing and batch sizes.
    pub tuning: Tuning,
    /// What the loops wrote.
    pub counters: Arc<reconcile_metrics::Counters>,
    /// The shipped unit resources table, parsed once at startup.
    pub presets: Arc<unit_presets::UnitPresets>,
    /// The reconcile, work queue and leader series.
    pub metrics: reconcile_metrics::ReconcileMetrics,
    /// Instances and their Pods, cached once for the controller and the API.
    pub instances: Arc<instance_cache::InstanceCache>,
}

/// Follows the Settings Secret into `tx` until `stop`.
async fn follow_settings(
    client: kube::Client,
    namespace: String,
    tx: watch::Sender<ChainSettings>,
    instance_tx: watch::Sender<InstanceSettings>,
    mut stop: watch::Receiver<bool>,
) {
    let stream = crate::settings::store::watch(&client, &namespace);
    let mut stream = std::pin::pin!(stream);
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            next = stream.next() => match next {
                Some(Ok((values, _))) => {
                    let s = ChainSettings::from_values(&values);
                    tx.send_if_modified(|cur| std::mem::replace(cur, s.clone()) != s);
                    let s = InstanceSettings::from_values(&values);
                    instance_tx.send_if_modified(|cur| std::mem::replace(cur, s.clone()) != s);
                }
                Some(Err(e)) => tracing::debug!("settings watch: {e}"),
                None => return,
            },
        }
    }
}

/// Runs the controllers while this replica leads, until `stop`.
pub async fn run(client: kube::Client, config: Config, mut stop: watch::Receiver<bool>) {
    let (settings_tx, settings_rx) = watch::channel(ChainSettings::default());
    let (instance_tx, instance_rx) = watch::channel(InstanceSettings::default());
    tokio::spawn(follow_settings(
        client.clone(),
        config.system_namespace.clone(),
        settings_tx,
        instance_tx,
        stop.clone(),
    ));
    let (leading_tx, mut leading) = watch::channel(config.election.is_none());
    // Without an election this replica always leads: the sender then stays here, so that
    // `leading` never reads as closed.
    let (elector, _always_leading) = match config.election.clone() {
        Some(lease) => {
            let elector = leader::run(client.clone(), lease, leading_tx, stop.clone());
            (Some(tokio::spawn(elector)), None)
        }
        None => (None, Some(leading_tx)),
    };
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            r = leading.wait_for(|l| *l) => if r.is_err() { break },
        }
        config.metrics.set_leader(true);
        let ctx = engine::Context {
            client: client.clone(),
            system_namespace: config.system_namespace.clone(),
            settings: settings_rx.clone(),
            instance_settings: instance_rx.clone(),
            resolve: config.resolve.clone(),
            tuning: config.tuning.clone(),
            counters: config.counters.clone(),
            presets: config.presets.clone(),
            metrics: config.metrics.clone(),
            instances: config.instances.clone(),
        };
        let task = tokio::spawn(engine::run(ctx));
        tokio::select! {
            _ = stop.wait_for(|s| *s) => { task.abort(); break }
            _ = leading.wait_for(|l| !*l) => {
                // Leadership lost: stop writing at once.
                task.abort();
            }
        }
        config.metrics.set_leader(false);
    }
    // On a clean stop the elector hands the Lease over: returning before it has would let the
    // process exit first, and the next leader wait the lease out.
    if let Some(elector) = elector {
        let _ = elector.await;
    }
}
