//! Process plumbing the long-running commands share: cluster access and the stop signal.

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
    Ok(kube::Client::try_from(config)?)
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
