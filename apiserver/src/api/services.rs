//! Where a Service of an embedded cluster is reached (for webhooks and APIService backends):
//! its `externalName`, else its `clusterIP`, at the port the caller names; its certificate must
//! name `NAME.NAMESPACE.svc`, as in Kubernetes. There is no kube-proxy: a Service standing for
//! a process on this machine has `spec.clusterIP: 127.0.0.1` and the process's port.

use serde_json::Value;

use crate::store::{ObjectKey, Store, StoreError};

/// A resolved Service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceAddress {
    /// The host to connect to (the Service's cluster IP or external name).
    pub host: String,
    /// The port to connect to.
    pub port: u16,
    /// The name the server's certificate is checked against.
    pub server_name: String,
}

/// Why a Service could not be resolved to an address.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Reading the Service failed.
    #[error("reading service {namespace}/{name}: {source}")]
    Store {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// Why the read failed.
        #[source]
        source: StoreError,
    },
    /// There is no such Service.
    #[error("service \"{name}\" not found in namespace \"{namespace}\"")]
    NotFound {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
    },
    /// The Service has no address to connect to.
    #[error("service {namespace}/{name} has neither an externalName nor a clusterIP")]
    NoAddress {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
    },
}

/// The address of Service `namespace/name` of `cluster` at `port`.
pub async fn resolve(
    store: &Store,
    cluster: &str,
    namespace: &str,
    name: &str,
    port: u16,
) -> Result<ServiceAddress, ResolveError> {
    let key = ObjectKey {
        cluster: cluster.to_owned(),
        group: String::new(),
        resource: "services".into(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    };
    let names = || (namespace.to_owned(), name.to_owned());
    let (_, svc) = store
        .get(&key)
        .await
        .map_err(|source| {
            let (namespace, name) = names();
            ResolveError::Store {
                namespace,
                name,
                source,
            }
        })?
        .ok_or_else(|| {
            let (namespace, name) = names();
            ResolveError::NotFound { namespace, name }
        })?;
    let host = host_of(&svc).ok_or_else(|| {
        let (namespace, name) = names();
        ResolveError::NoAddress { namespace, name }
    })?;
    Ok(ServiceAddress {
        host: host.to_owned(),
        port,
        server_name: format!("{name}.{namespace}.svc"),
    })
}

fn host_of(svc: &Value) -> Option<&str> {
    let spec = &svc["spec"];
    spec.get("externalName")
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty())
        .or_else(|| {
            spec.get("clusterIP")
                .and_then(Value::as_str)
                .filter(|ip| !ip.is_empty() && *ip != "None")
        })
}
