//! `worker-gateway`: hosts the embedded clusters named by `--embedded-cluster` and mirrors the
//! upstream clusters listed in `--upstreams` or subscribed at run time (`POST /apis/workers`),
//! serving both over HTTPS on `--bind-address`/`--secure-port` (and plain HTTP on
//! `--bind-unix-path`), until SIGTERM or SIGINT.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use gpustack_apiserver::server::{Compaction, ServingLimits};
use gpustack_gateway::{
    mirror::{MirrorOptions, config::resolve_all},
    server::{Gateway, GatewayOptions},
};

use crate::cli::args::WorkerGatewayArgs;

/// The reference's meaning of `--secure-port=0`.
const DEFAULT_SECURE_PORT: u16 = 9443;

/// `--bind-unix-path`'s default; unlike an explicit path, it is skipped (with a warning) when
/// its directory does not exist, so a one-machine demo needs no /var/lib/gpustack.
const DEFAULT_UNIX_PATH: &str = super::one_machine::DEFAULT_SOCKET;

pub fn run(args: WorkerGatewayArgs) -> ExitCode {
    super::process::block_on("worker-gateway", serve(args))
}

async fn serve(mut args: WorkerGatewayArgs) -> anyhow::Result<()> {
    let env = |name: &str| std::env::var(name).ok();
    args.bind_unix_path = super::one_machine::gateway_socket(&args.bind_unix_path, env);
    let port = if args.secure_port == 0 {
        DEFAULT_SECURE_PORT
    } else {
        args.secure_port
    };
    let bind = SocketAddr::new(args.serving.bind_address, port);
    let mut options =
        GatewayOptions::new(args.embedded_cluster.clone(), args.data_dir.clone(), bind);
    options.server.unix_socket = unix_socket(&args);
    options.server.compaction = Compaction {
        interval: args.event_log_compaction_interval.0,
        keep: args.event_log_retention,
        max_bytes: args.event_log_max_bytes,
        event_ttl: args.event_ttl.0,
    };
    options.conn_mode = args.conn_mode();
    options.store = args.store.clone();
    options.mirror_lease = args.mirror_lease_duration.0;
    options.subscription_kubeconfig_dirs = args.subscription_kubeconfig_dir.clone();
    options.server.api.max_watches_per_token =
        usize::try_from(args.max_watches_per_token).unwrap_or(usize::MAX);
    options.server.api.aggregation.check_interval = args.apiservice_check_interval.0;
    options.server.serving = ServingLimits {
        max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
        max_connections_per_source: usize::try_from(args.max_connections_per_address)
            .unwrap_or(usize::MAX),
        max_handshakes_per_source: usize::try_from(args.max_handshakes_per_address)
            .unwrap_or(usize::MAX),
        setup_timeout: args.connection_setup_timeout.0,
        idle_timeout: args.connection_idle_timeout.0,
        ..Default::default()
    };
    options.server.cert_dir =
        (!args.serving.cert_dir.is_empty()).then(|| args.serving.cert_dir.clone().into());
    options.server.serving_cert_lifetime = args.serving_cert_lifetime.0;
    options.mirror = MirrorOptions {
        readiness_timeout: args.worker_readiness_check_timeout.0,
        ..MirrorOptions::default()
    };
    if let Some(upstreams) = &args.upstreams {
        // Checked when the command line was read.
        options.upstreams = resolve_all(&upstreams.entries, &options.conn_mode)?;
    }
    options.server.token_file = args.token_file.clone().or_else(|| {
        // Without the socket, HTTPS is the only way in: the admin needs a token.
        args.bind_unix_path
            .is_empty()
            .then(|| args.data_dir.join("admin.token"))
    });
    let upstream_names: Vec<&str> = options.upstreams.iter().map(|u| u.name.as_str()).collect();
    let gateway = Gateway::start(options.clone(), &prometheus::Registry::new()).await?;
    tracing::info!(addr = %gateway.addr(), clusters = ?args.embedded_cluster, upstreams = ?upstream_names, "worker-gateway serving");
    shutdown_signal().await?;
    tracing::info!("shutting down");
    gateway.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}

/// The unix socket to serve plain HTTP on, if any. Embedded clusters are always served over
/// HTTPS too: kubectl and kube clients need it.
fn unix_socket(args: &WorkerGatewayArgs) -> Option<PathBuf> {
    if args.bind_unix_path.is_empty() {
        return None;
    }
    let path = PathBuf::from(&args.bind_unix_path);
    // Creating the data directory may create the default socket's directory too.
    let parent_exists = path
        .parent()
        .is_some_and(|p| p.is_dir() || p == args.data_dir);
    if args.bind_unix_path == DEFAULT_UNIX_PATH && !parent_exists {
        tracing::warn!(path = %path.display(), "not serving the default unix socket: its directory does not exist");
        return None;
    }
    Some(path)
}

async fn shutdown_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}
