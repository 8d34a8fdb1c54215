//! `device-manager serve`: builds the node agent's dependencies from flags and the environment
//! (kube client, metrics registry, system root) and runs it until SIGTERM or SIGINT.

use super::process::{kube_client, shutdown_signal};
use std::{net::SocketAddr, path::PathBuf, process::ExitCode, sync::Arc};

use gpustack_device_manager::{
    injection::{DEFAULT_LIB_DIR, DEFAULT_PODS_DIR, NodeFacts, nvidia},
    serve::{self, Config, plugins::ModeFlags},
    system_root::SystemRoot,
};

use crate::cli::{EXIT_USAGE, args::DeviceManagerServeArgs};

/// The environment variable naming the node this agent serves.
const NODE_NAME_ENV: &str = "KUBERNETES_NODE_NAME";

pub fn run(args: DeviceManagerServeArgs) -> ExitCode {
    let node_name = match std::env::var(NODE_NAME_ENV) {
        Ok(name) if !name.trim().is_empty() => name.trim().to_owned(),
        _ => {
            eprintln!(
                "error: {NODE_NAME_ENV} must name the node this agent serves (set it from spec.nodeName)"
            );
            return ExitCode::from(EXIT_USAGE as u8);
        }
    };
    let env_var = |name: &str| std::env::var(name).ok();
    // `auto` reads the node's containerd configuration (through the system root, as detection
    // reads the host), the same rule preflight applies.
    let host = SystemRoot::from_env(|name| std::env::var(name).ok());
    let setting = env_var("GPUSTACK_NVIDIA_DEVICE_INJECTION_STRATEGY");
    let nvidia_strategy = match nvidia::strategy(setting.as_deref(), || {
        let dir = env_var("GPUSTACK_CONTAINERD_CONFIG_DIR")
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| nvidia::DEFAULT_CONTAINERD_CONFIG_DIR.into());
        std::fs::read_to_string(host.path(format!("{dir}/config.toml"))).ok()
    }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE as u8);
        }
    };
    let release_finished = !matches!(
        env_var("GPUSTACK_LEDGER_RELEASE_TERMINATED_PODS").as_deref(),
        Some("false" | "0")
    );
    let config = Config {
        node_name,
        manufacturers: args.detect.manufacturer.clone(),
        no_pci_check: args.detect.no_pci_check,
        no_fast_failed: args.detect.no_fast_failed,
        modes: ModeFlags {
            no_shared: args.no_shared,
            no_sliced: args.no_sliced,
            no_partitioned: args.no_partitioned,
        },
        monitor_period: args.monitor_period.0,
        kube_socket: args.kube_socket.clone(),
        bind: SocketAddr::new(args.serving.bind_address, args.secure_port),
        cert_dir: (!args.serving.cert_dir.is_empty())
            .then(|| PathBuf::from(&args.serving.cert_dir)),
        metrics_auth_delegated: args.metrics_auth == "delegated",
        node: NodeFacts {
            lib_dir: env_var("GPUSTACK_OPERATOR_LIB_DIR")
                .unwrap_or_else(|| DEFAULT_LIB_DIR.to_owned()),
            nvidia_strategy,
        },
        pods_dir: DEFAULT_PODS_DIR.to_owned(),
        release_finished,
        system_namespace: env_var("KUBERNETES_POD_NAMESPACE")
            .filter(|ns| !ns.trim().is_empty())
            .unwrap_or_else(|| "gpustack-system".to_owned()),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve_until_signal(config, &args.kube.kubeconfig)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("device-manager serve: {e:#}");
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve_until_signal(config: Config, kubeconfig: &str) -> anyhow::Result<()> {
    let client = kube_client(kubeconfig).await?;
    let env: serve::Env = Arc::new(|name: &str| std::env::var(name).ok());
    let root = SystemRoot::from_env(|name| std::env::var(name).ok());
    let registry = prometheus::Registry::new();
    serve::run(
        config,
        client,
        registry,
        root,
        env,
        Box::pin(async {
            if let Err(e) = shutdown_signal().await {
                tracing::error!("waiting for a signal: {e}");
            }
        }),
    )
    .await?;
    Ok(())
}
