//! Process plumbing the long-running commands share: the async runtime, cluster access and
//! the stop signal.

use std::process::ExitCode;

/// Runs a long-running command's future on a multi-threaded runtime; an error is logged and
/// printed as one line, and the process fails.
pub fn block_on(
    command: &str,
    fut: impl std::future::Future<Output = anyhow::Result<()>>,
) -> ExitCode {
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
    match runtime.block_on(fut) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{command}: {e:#}");
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Cluster access as the worker has it: `--kubeconfig`, else `KUBECONFIG`, in-cluster,
/// `~/.kube/config`.
pub async fn kube_client(kubeconfig: &str) -> anyhow::Result<kube::Client> {
    let config = if kubeconfig.is_empty() {
        kube::Config::infer().await?
    } else {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig)
            .map_err(|e| anyhow::anyhow!("reading --kubeconfig {kubeconfig}: {e}"))?;
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?
    };
    // Requests carry the trace context of the span they are sent from (when spans export).
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&gpustack_serving::trace_context::InjectLayer)
        .build())
}

/// Resolves at the first SIGTERM or SIGINT.
pub async fn shutdown_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}
