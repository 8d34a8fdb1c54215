//! `model-manager`: builds the CSI plugin's dependencies from flags (kube client, paths) and runs
//! it until SIGTERM or SIGINT.

use super::process::{kube_client, shutdown_signal};
use std::process::ExitCode;

use gpustack_model_manager::serve::{self, Options};

use crate::cli::args::ModelManagerArgs;

pub fn run(args: ModelManagerArgs) -> ExitCode {
    let options = Options {
        node_name: args.node_name.clone(),
        kubelet_dir: args.kubelet_dir.clone(),
        cache_root: args.cache_root.clone(),
        csi_socket: args.csi_socket(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        bind: std::net::SocketAddr::new(args.serving.bind_address, args.secure_port),
        cert_dir: (!args.serving.cert_dir.is_empty())
            .then(|| std::path::PathBuf::from(&args.serving.cert_dir)),
        metrics_auth_delegated: args.metrics_auth == "delegated",
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
    match runtime.block_on(serve_until_signal(options, &args.kube.kubeconfig)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("model-manager: {e:#}");
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve_until_signal(options: Options, kubeconfig: &str) -> anyhow::Result<()> {
    let client = kube_client(kubeconfig).await?;
    serve::run(
        options,
        client,
        Box::pin(async {
            if let Err(e) = shutdown_signal().await {
                tracing::error!("waiting for a signal: {e}");
            }
        }),
    )
    .await?;
    Ok(())
}
