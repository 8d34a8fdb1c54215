//! Serving gRPC services on a unix socket: a node agent's kubelet-facing plugins (the device
//! plugin, CSI), each call traced ([`ServerSpans::grpc`]) and counted ([`GrpcMetrics`]).

use futures::future::BoxFuture;
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{service::Routes, transport::Server};

use crate::{grpc_metrics::GrpcMetrics, trace_context::ServerSpans};

/// A gRPC server's whole run. Boxed here: each agent that awaited tonic's server future would
/// compile tonic's, hyper's and h2's server code again for itself (async bodies are compiled
/// where they are polled; issue 41's build time).
pub type Serving = BoxFuture<'static, Result<(), tonic::transport::Error>>;

/// Serves `routes` on `listener` until `shutdown` resolves, each call counted in `metrics`.
pub fn serve_unix(
    routes: Routes,
    listener: UnixListener,
    metrics: GrpcMetrics,
    shutdown: BoxFuture<'static, ()>,
) -> Serving {
    Box::pin(
        Server::builder()
            .layer(ServerSpans::grpc())
            .layer(metrics)
            .add_routes(routes)
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown),
    )
}
