//! `worker`: builds the control plane's configuration from flags and the environment and runs
//! it against the cluster until SIGTERM or SIGINT.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, time::Duration};

use gpustack_serving::serve::Limits;
use gpustack_worker::{
    applications,
    auth::delegated::Ttls,
    controllers::{engine::Tuning, leader::LeaseConfig},
    install, names, run,
};
use tokio::sync::watch;

use super::{
    one_machine,
    process::{block_on, kube_client, shutdown_signal},
};
use crate::cli::args::WorkerArgs;

fn config(args: &WorkerArgs) -> run::Config {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    run::Config {
        bind: SocketAddr::new(args.serving.bind_address, args.secure_port),
        cert_dir: (!args.serving.cert_dir.is_empty())
            .then(|| PathBuf::from(&args.serving.cert_dir)),
        system_namespace: env("KUBERNETES_POD_NAMESPACE")
            .unwrap_or_else(|| names::SYSTEM_NAMESPACE.to_owned()),
        disable_auths: args.disable_auths,
        allow_anonymous_reviews: args.allow_anonymous_reviews,
        metrics_auth_delegated: args.metrics_auth == "delegated",
        ttls: Ttls {
            authenticated: args.authentication_token_webhook_cache_ttl.0,
            allowed: args.authorization_webhook_cache_authorized_ttl.0,
            denied: args.authorization_webhook_cache_unauthorized_ttl.0,
            timeout: args.authentication_token_request_timeout.0,
        },
        audit_log_path: args.audit_log_path.clone(),
        cors_allowed_origins: args.cors_allowed_origins.clone(),
        reach: None,
        limits: Limits {
            drain_timeout: Duration::from_secs(10),
            ..Limits::default()
        },
        model_manager_service_account: args.model_manager_service_account.clone(),
        gateway: args.gateway(&one_machine::gateway_socket(&args.gateway_socket, env)),
        applications: applications::Config {
            disabled: args.disable_applications.clone(),
            manufacturers: args.manufacturer.clone(),
            own_pod: env("KUBERNETES_POD_NAME"),
            resync: args.applications_resync_period.0,
            lease: LeaseConfig {
                namespace: String::new(),
                name: applications::LEASE.to_owned(),
                identity: identity(),
                lease_duration: args.leader.kube_leader_lease.0,
                renew_deadline: args.leader.kube_leader_renew_timeout.0,
                retry_period: Duration::from_secs(2),
            },
        },
        environment: std::env::vars().collect(),
        controllers: run::ControllersConfig {
            election: args.leader.kube_leader_election.then(|| LeaseConfig {
                namespace: String::new(),
                name: args.leader.kube_leader_election_id.clone(),
                identity: identity(),
                lease_duration: args.leader.kube_leader_lease.0,
                renew_deadline: args.leader.kube_leader_renew_timeout.0,
                retry_period: Duration::from_secs(2),
            }),
            tuning: Tuning::default(),
        },
    }
}

/// This replica's name in the Lease: the Pod's name where there is one, else the host, with
/// the process id so two processes on one host differ.
fn identity() -> String {
    let host = std::env::var("KUBERNETES_POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "worker".to_owned());
    format!("{host}_{}", std::process::id())
}

pub fn run(args: WorkerArgs) -> ExitCode {
    block_on("worker", run_until_signal(&args))
}

async fn run_until_signal(args: &WorkerArgs) -> anyhow::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        if let Err(e) = shutdown_signal().await {
            tracing::error!("waiting for a signal: {e}");
        }
        let _ = stop_tx.send(true);
    });
    let env = |name: &str| std::env::var(name).ok();
    if one_machine::cluster_given(&args.kube.kubeconfig, env) {
        let client = kube_client(&args.kube.kubeconfig).await?;
        run::run(client, config(args), stop_rx).await?;
        return Ok(());
    }
    // No cluster at hand: this machine becomes one.
    let dir = one_machine::data_dir(env);
    let local = one_machine::start_cluster(&dir, args.embedded_api_port).await?;
    eprintln!(
        "one-machine control plane: data in {}; try\n  kubectl --kubeconfig {} get devices.v1.worker.gpustack.ai",
        dir.display(),
        local.kubeconfig.display()
    );
    let client = kube_client(&local.kubeconfig.to_string_lossy()).await?;
    let mut cfg = config(args);
    // This machine's own cluster runs no Pods: no node agent to keep installed, no upstream
    // application to ask for.
    cfg.applications.disabled = vec!["*".to_owned()];
    let reach = install::Reach::Loopback {
        secure_port: args.secure_port,
    };
    cfg.reach = Some(reach.clone());
    // The Devices kind must exist before this machine's Devices is written: the CRDs go in
    // first (the worker's install pass keeps them, as on any cluster).
    for crd in install::desired(&cfg.system_namespace, &reach, "")
        .iter()
        .filter(|d| d.resource.kind == "CustomResourceDefinition")
    {
        install::ensure(&client, crd).await?;
    }
    let root = gpustack_device_manager::system_root::SystemRoot::from_env(env);
    one_machine::publish_machine(&client, root).await?;
    // The embedded cluster reaches the worker on loopback only.
    cfg.bind = SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), args.secure_port);
    let result = run::run(client, cfg, stop_rx).await;
    local.gateway.shutdown().await;
    result?;
    Ok(())
}
