//! Component tests: the gateway in-process on 127.0.0.1 (ephemeral port, tempdir data dir),
//! driven by real kube-rs clients built from the kubeconfig it writes.

mod admission;
mod apply;
mod controller;
mod crud;
mod gc;
mod harness;
mod http;
mod subresources;
mod validation;
mod watch;
