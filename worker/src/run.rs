//! The worker process: install, then serve the aggregated API until told to stop, re-ensuring
//! the install every 30 seconds.

use futures::future::BoxFuture;
use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use gpustack_serving::{
    serve::{self, Endpoint, Limits, Listener},
    trace_context::ServerSpans,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::{
    api::{self, ApiServer, cors::Cors, metrics::Metrics, resources, settings::Settings},
    audit::Audit,
    auth::{
        Auth,
        delegated::{Delegated, Ttls},
        front_proxy::{self, Trust, Verifier},
    },
    install::{self, Reach},
    serving_cert, settings,
};

/// How often the install is checked again.
const REINSTALL_EVERY: Duration = Duration::from_secs(30);

/// What the binary decides from flags and environment.
#[derive(Clone, Debug)]
pub struct Config {
    /// The address the API listens on.
    pub bind: SocketAddr,
    /// Where the serving certificate is read from; `None` generates one.
    pub cert_dir: Option<PathBuf>,
    /// The worker's namespace.
    pub system_namespace: String,
    /// `--disable-auths`: every request allowed.
    pub disable_auths: bool,
    /// Answer webhook reviews from unauthenticated callers (API servers that present no
    /// credentials to their webhooks).
    pub allow_anonymous_reviews: bool,
    /// `/metrics` authorized by the cluster (`--metrics-auth=delegated`), else open.
    pub metrics_auth_delegated: bool,
    /// How long review answers are cached.
    pub ttls: Ttls,
    /// `--audit-log-path`; empty writes none.
    pub audit_log_path: String,
    /// `--cors-allowed-origins`: regular expressions.
    pub cors_allowed_origins: Vec<String>,
    /// How the aggregator reaches this process; `None` decides from the cluster (an embedded
    /// cluster reaches it on loopback, a real one through its Pods).
    pub reach: Option<Reach>,
    /// Connection, size and time bounds of the API.
    pub limits: Limits,
    /// How the controllers run: election, tuning.
    pub controllers: ControllersConfig,
    /// The only service account that may write NodeModelStore status.
    pub model_manager_service_account: String,
    /// The hub's gateway, whose mirror is served as `fleet.gpustack.ai/v1`; `None` serves no
    /// fleet.
    pub gateway: Option<crate::fleet::gateway::Address>,
    /// Image mode: the applications the worker keeps installed (the Lease's namespace is set
    /// to the system namespace here).
    pub applications: crate::applications::Config,
    /// The environment the settings' seeds and the manufacturers' facts are read from.
    pub environment: crate::environment::Environment,
}

/// The controllers' part of the configuration.
#[derive(Clone, Debug)]
pub struct ControllersConfig {
    /// `None` runs them without leader election.
    pub election: Option<crate::controllers::leader::LeaseConfig>,
    /// Pacing and batch sizes.
    pub tuning: crate::controllers::engine::Tuning,
}

/// Why the worker stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// A setting from the environment is invalid.
    #[error("settings from the environment: {0}")]
    Settings(#[from] settings::store::StoreError),
    /// The serving certificate.
    #[error(transparent)]
    Cert(#[from] serving_cert::CertError),
    /// Installing into the cluster failed.
    #[error("{0}")]
    Install(String),
    /// The TLS configuration.
    #[error("serving certificate: {0}")]
    Tls(#[from] gpustack_serving::certs::ConfigError),
    /// The API's address could not be bound.
    #[error("listening on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The audit log.
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    /// The webhooks.
    #[error(transparent)]
    Admission(#[from] crate::admission::server::StartError),
    /// The cluster did not answer its version.
    #[error("asking the cluster its version: {0}")]
    Version(#[source] kube::Error),
    /// The hub's gateway.
    #[error("the gateway: {0}")]
    Gateway(#[from] crate::fleet::gateway::ConnectError),
    /// The unit resources table.
    #[error("the shipped unit resources table: {0}")]
    Presets(#[from] crate::controllers::unit_presets::PresetError),
    /// The metrics could not be registered.
    #[error("registering the metrics: {0}")]
    Metrics(#[source] prometheus::Error),
}

/// Whether the cluster is an embedded one (it names itself so in `/version`).
async fn reach_of(client: &kube::Client, secure_port: u16) -> Result<Reach, WorkerError> {
    let v = client
        .apiserver_version()
        .await
        .map_err(WorkerError::Version)?;
    Ok(if v.git_version.contains("gpustack-embedded") {
        Reach::Loopback { secure_port }
    } else {
        Reach::Pods { secure_port }
    })
}

/// Reads the front proxy's trust from the cluster into `verifier` and `trust`.
async fn refresh_trust(client: &kube::Client, verifier: &Verifier, trust: &RwLock<Option<Trust>>) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), front_proxy::CONFIGMAP_NAMESPACE);
    let read = match api.get_opt(front_proxy::CONFIGMAP_NAME).await {
        Ok(Some(cm)) => {
            let data = serde_json::to_value(cm.data.unwrap_or_default()).unwrap_or_default();
            front_proxy::parse(&data).map_err(|e| e.to_string())
        }
        Ok(None) => Err(format!(
            "{}/{} does not exist: requests through the aggregator are not trusted yet",
            front_proxy::CONFIGMAP_NAMESPACE,
            front_proxy::CONFIGMAP_NAME
        )),
        Err(e) => Err(format!("reading the front-proxy trust: {e}")),
    };
    let parsed = read.and_then(|t| {
        verifier
            .set_ca(&t.ca_pem)
            .map(|_| t)
            .map_err(|e| e.to_string())
    });
    match parsed {
        Ok(t) => {
            let mut cur = trust.write().unwrap_or_else(|p| p.into_inner());
            if cur.as_ref() != Some(&t) {
                tracing::info!(allowed_names = ?t.allowed_names, "front-proxy trust loaded");
                *cur = Some(t);
            }
        }
        Err(e) => tracing::warn!("{e}"),
    }
}

/// Runs until `stop` turns true.
///
/// Boxed here so that its state machine is compiled with this crate: rustc compiles an async
/// body in the crate that polls it, which would otherwise be the binary, again after every
/// change here.
pub fn run(
    client: kube::Client,
    config: Config,
    stop: watch::Receiver<bool>,
) -> BoxFuture<'static, Result<(), WorkerError>> {
    Box::pin(run_until(client, config, stop))
}

async fn run_until(
    client: kube::Client,
    config: Config,
    stop: watch::Receiver<bool>,
) -> Result<(), WorkerError> {
    let env = config.environment.clone();
    let seed = settings::store::seed_values(|var| env.get(var))?;
    let presets = std::sync::Arc::new(crate::controllers::unit_presets::UnitPresets::builtin()?);
    let reach = match config.reach.clone() {
        Some(r) => r,
        None => reach_of(&client, config.bind.port()).await?,
    };
    let ns = config.system_namespace.clone();

    // The namespace first: the serving certificate is kept in it.
    let base = install::desired(&ns, &reach, "");
    install::ensure(&client, &base[0])
        .await
        .map_err(|e| WorkerError::Install(e.to_string()))?;
    let material = match &config.cert_dir {
        Some(dir) => serving_cert::from_dir(dir)?,
        None => serving_cert::shared(&client, &ns).await?,
    };

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(Verifier::new(provider));
    let trust = Arc::new(RwLock::new(None));
    let auth = Arc::new(if config.disable_auths {
        tracing::warn!("--disable-auths: every request is allowed, as anyone");
        Auth::Disabled
    } else {
        refresh_trust(&client, &verifier, &trust).await;
        Auth::Delegated {
            reviews: Box::new(Delegated::new(client.clone(), config.ttls)),
            trust: trust.clone(),
        }
    });
    if config.allow_anonymous_reviews {
        tracing::warn!("--allow-anonymous-reviews: the webhooks answer reviews from anyone");
    }
    let client_verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>> =
        (!config.disable_auths).then(|| verifier.clone() as _);
    let tls = gpustack_serving::certs::server_config(
        &material.cert_pem,
        &material.key_pem,
        client_verifier,
    )?;
    let audit = match config.audit_log_path.as_str() {
        "" => None,
        path => Some(Audit::open(path)?),
    };
    let ready = Arc::new(AtomicBool::new(false));
    let fleet = match &config.gateway {
        Some(address) => {
            let clients = crate::fleet::gateway::connect(address).await?;
            Some(Arc::new(crate::fleet::Fleet::new(
                address.clone(),
                clients,
                client.clone(),
                ns.clone(),
            )))
        }
        None => None,
    };
    let applications_health = Arc::new(crate::applications::Health::default());
    let defs = resources::all();
    let mut plurals: Vec<String> = defs.iter().map(|d| d.plural.clone()).collect();
    if let Some(f) = &fleet {
        plurals.extend(f.defs.iter().map(|d| d.plural.clone()));
    }
    // Instances and their Pods, cached once: the API answers from it, the controller (while
    // leading) reconciles from it.
    let instances = crate::controllers::instance_cache::InstanceCache::start(&client);
    let server = Arc::new(ApiServer {
        client: client.clone(),
        views: resources::views(),
        settings: Settings {
            client: client.clone(),
            namespace: ns.clone(),
            def: resources::settings(),
        },
        flavors: api::flavors::Flavors {
            client: client.clone(),
            namespace: ns.clone(),
            def: resources::instance_type_flavors(),
        },
        auth: auth.clone(),
        audit,
        cors: Cors::new(&config.cors_allowed_origins),
        metrics: Metrics::new(plurals),
        metrics_auth_delegated: config.metrics_auth_delegated,
        defs,
        ready: ready.clone(),
        fleet: fleet.clone(),
        applications: applications_health.clone(),
        node_stats: Default::default(),
        device_snapshots: crate::api::instance_device_snapshots::DeviceSnapshots::new(&ns),
        instances: instances.clone(),
    });
    let follower = fleet
        .clone()
        .map(|f| tokio::spawn(crate::fleet::follow(f, stop.clone())));

    let webhooks = crate::admission::Admission::start(
        client.clone(),
        &crate::admission::Options {
            system_namespace: ns.clone(),
            model_manager_service_account: config.model_manager_service_account.clone(),
        },
        server.metrics.registry(),
        |var| env.get(var),
        stop.clone(),
    )?;

    // Listening before the install creates the APIServices: the cluster checks them at once,
    // and a first check that finds nobody would leave the API unavailable until the next one.
    let tcp =
        gpustack_serving::listen::bind(config.bind).map_err(|source| WorkerError::Listen {
            addr: config.bind,
            source,
        })?;
    tracing::info!(address = %config.bind, "serving the worker API");
    let objects = install::desired(&ns, &reach, &material.ca_pem);
    let fleet_apiservice = install::fleet_apiservice(&ns, &reach, &material.ca_pem);
    let installer = {
        let (client, ns, mut stop) = (client.clone(), ns.clone(), stop.clone());
        let disable_auths = config.disable_auths;
        let fleet = fleet.clone();
        tokio::spawn(async move {
            loop {
                // The fleet's APIService is registered once the gateway has answered: a hub
                // without one then announces no group that cannot be served.
                let mut objects = objects.clone();
                if fleet.as_ref().is_some_and(|f| f.has_answered()) {
                    objects.push(fleet_apiservice.clone());
                }
                let errors = install::ensure_all(&client, &objects, &ns, &seed).await;
                if errors.is_empty() {
                    if !ready.swap(true, Ordering::Relaxed) {
                        tracing::info!("install complete; ready");
                    }
                } else {
                    for e in &errors {
                        tracing::warn!("install: {e}");
                    }
                }
                if !disable_auths {
                    refresh_trust(&client, &verifier, &trust).await;
                }
                let first_answer = async {
                    match &fleet {
                        Some(f) if !f.has_answered() => f.answered.notified().await,
                        _ => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(REINSTALL_EVERY) => {}
                    _ = first_answer => {}
                }
            }
        })
    };

    let controllers = {
        let mut election = config.controllers.election.clone();
        if let Some(e) = election.as_mut() {
            e.namespace = ns.clone();
        }
        let cfg = crate::controllers::Config {
            system_namespace: ns.clone(),
            election,
            resolve: {
                let env = env.clone();
                std::sync::Arc::new(move |m: gpustack_api::Manufacturer| m.resolve(|v| env.get(v)))
            },
            tuning: config.controllers.tuning.clone(),
            counters: Default::default(),
            presets,
            metrics: crate::controllers::reconcile_metrics::ReconcileMetrics::register(
                server.metrics.registry(),
            )
            .map_err(WorkerError::Metrics)?,
            instances,
        };
        tokio::spawn(crate::controllers::run(client.clone(), cfg, stop.clone()))
    };

    let applications = {
        let mut cfg = config.applications.clone();
        cfg.lease.namespace = ns.clone();
        let (client, health, stop) = (client.clone(), applications_health.clone(), stop.clone());
        let registry = server.metrics.registry().clone();
        tokio::spawn(async move {
            crate::applications::keeper::run(client, cfg, health, &registry, stop).await
        })
    };

    let endpoint = Endpoint {
        listener: Listener::Tls {
            tcp,
            tls: TlsAcceptor::from(tls),
        },
        router: api::router(server)
            .merge(crate::admission::router(
                webhooks,
                crate::admission::Callers {
                    auth,
                    anonymous: config.allow_anonymous_reviews,
                },
            ))
            .layer(ServerSpans::http(api::route_template)),
    };
    serve::serve(vec![endpoint], config.limits, stop, || {}).await;
    installer.abort();
    if let Some(f) = follower {
        f.abort();
    }
    // The controllers hand the Lease over on stop; give them the moment it takes.
    let _ = tokio::time::timeout(Duration::from_secs(5), controllers).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), applications).await;
    Ok(())
}
