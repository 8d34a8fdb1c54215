//! What a fresh cluster holds besides its RBAC objects ([`super::auth::defaults`]): the
//! `default/kubernetes` Service naming the API with its Endpoints and EndpointSlice (the
//! address served), and in every namespace the `default`
//! ServiceAccount and the `kube-root-ca.crt` ConfigMap with the CA certificate clients trust.
//! A namespace gets its two objects as it is created (the create request writes them), and
//! every namespace is checked again at start, so that a CA changed since (`--cert-dir`) is
//! published. The objects are built by pure functions; the writes create what is missing and
//! leave the rest alone, as a restart must.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use serde_json::{Value, json};

use crate::{
    api::objects,
    registry::builtins,
    store::{ObjectKey, Precondition, Store, StoreError, WriteOp},
};

/// The `clusterIP` of `default/kubernetes`: the first address of kube-apiserver's default
/// service range, where in-cluster clients expect the API.
pub const KUBERNETES_CLUSTER_IP: &str = "10.96.0.1";

/// The ConfigMap every namespace holds with the cluster's CA certificate.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

/// The ServiceAccount every namespace holds.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// `default/kubernetes`: the API, reached on `port` (the gateway's HTTPS port).
pub fn kubernetes_service(port: u16) -> Value {
    json!({
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": KUBERNETES_CLUSTER_IP,
            "clusterIPs": [KUBERNETES_CLUSTER_IP],
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
            "sessionAffinity": "None",
            "ports": [kubernetes_port(port)],
        },
    })
}

fn kubernetes_port(port: u16) -> Value {
    json!({"name": "https", "port": 443, "protocol": "TCP", "targetPort": port})
}

/// Where clients reach the API: the served address, loopback when every interface is served.
fn api_ip(addr: SocketAddr) -> IpAddr {
    match addr.ip() {
        ip if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        ip => ip,
    }
}

/// `default/kubernetes`'s Endpoints subsets: the API's address and port.
fn kubernetes_subsets(addr: SocketAddr) -> Value {
    json!([{
        "addresses": [{"ip": api_ip(addr).to_string()}],
        "ports": [{"name": "https", "port": addr.port(), "protocol": "TCP"}],
    }])
}

/// `default/kubernetes`'s Endpoints, as kube-apiserver keeps them for itself.
pub fn kubernetes_endpoints(addr: SocketAddr) -> Value {
    json!({
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
        },
        "subsets": kubernetes_subsets(addr),
    })
}

/// `default/kubernetes`'s EndpointSlice endpoints and ports.
fn kubernetes_slice_parts(addr: SocketAddr) -> (Value, Value) {
    let endpoints =
        json!([{"addresses": [api_ip(addr).to_string()], "conditions": {"ready": true}}]);
    let ports = json!([{"name": "https", "port": addr.port(), "protocol": "TCP"}]);
    (endpoints, ports)
}

/// `default/kubernetes`'s EndpointSlice, as kube-apiserver keeps it for itself.
pub fn kubernetes_endpoint_slice(addr: SocketAddr) -> Value {
    let (endpoints, ports) = kubernetes_slice_parts(addr);
    let family = if api_ip(addr).is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    };
    json!({
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "kubernetes"},
        },
        "addressType": family,
        "endpoints": endpoints,
        "ports": ports,
    })
}

/// What namespace `ns` holds from its creation: (resource, object).
pub fn namespace_objects(ns: &str, ca_pem: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "serviceaccounts",
            json!({"metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": ns}}),
        ),
        ("configmaps", root_ca_configmap(ns, ca_pem)),
    ]
}

fn root_ca_configmap(ns: &str, ca_pem: &str) -> Value {
    json!({
        "metadata": {
            "name": ROOT_CA_CONFIGMAP,
            "namespace": ns,
            "annotations": {"kubernetes.io/description":
                "The CA bundle that verifies this cluster's API server; kept current by the server."},
        },
        "data": {"ca.crt": ca_pem},
    })
}

fn key_of(cluster: &str, group: &str, plural: &str, namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        cluster: cluster.into(),
        group: group.into(),
        resource: plural.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// Creates `body` (of the built-in kind `plural`, in `namespace` if it is namespaced) unless it
/// exists; `status` set as given.
pub async fn ensure_object(
    store: &Store,
    cluster: &str,
    plural: &str,
    namespace: Option<&str>,
    body: Value,
    status: Option<Value>,
) -> Result<(), StoreError> {
    let def = builtins()
        .into_iter()
        .find(|d| d.plural == plural && d.group == d.storage_group)
        .expect("initial objects are of built-in kinds");
    let key = key_of(
        cluster,
        &def.group,
        &def.plural,
        namespace.unwrap_or_default(),
        body["metadata"]["name"].as_str().unwrap_or_default(),
    );
    if store.get(&key).await?.is_some() {
        return Ok(());
    }
    let mut obj = objects::prepare_create(
        &def,
        // The server's own objects, valid by their kinds' rules: only that each name is a path
        // segment is checked (the RBAC objects' names are not DNS names), and none is written
        // in a form to fold.
        &objects::Names::PathSegment,
        &def.versions[0],
        namespace,
        body,
        &objects::new_uid(),
        "",
        jiff::Timestamp::now(),
    )
    .expect("initial objects are valid");
    if let Some(status) = status {
        obj["status"] = status;
    }
    match store
        .commit(&key, Precondition::Absent, WriteOp::Put(obj))
        .await
    {
        Ok(_) | Err(StoreError::AlreadyExists) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Sets the field at `pointer` of the stored object `key` to `wanted` unless it says so.
async fn ensure_field(
    store: &Store,
    key: &ObjectKey,
    pointer: &str,
    wanted: Value,
) -> Result<(), StoreError> {
    let Some((rv, mut current)) = store.get(key).await? else {
        return Ok(());
    };
    match current.pointer_mut(pointer) {
        Some(v) if *v == wanted => return Ok(()),
        Some(v) => *v = wanted,
        None => return Ok(()),
    }
    match store
        .commit(key, Precondition::At(rv), WriteOp::Put(current))
        .await
    {
        // Another writer got there first; the next start settles it.
        Ok(_) | Err(StoreError::Conflict { .. }) | Err(StoreError::NotFound) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether the core object `plural`/`name` in a namespace is one of those every namespace
/// holds, which a real cluster's controllers put back when deleted (or, for the CA, changed).
pub fn kept_in_every_namespace(plural: &str, name: &str) -> bool {
    matches!(
        (plural, name),
        ("serviceaccounts", "default") | ("configmaps", ROOT_CA_CONFIGMAP)
    )
}

/// Writes what namespace `ns` holds from its creation, where missing; a `kube-root-ca.crt`
/// holding another CA gets this one.
pub async fn seed_namespace(
    store: &Store,
    cluster: &str,
    ns: &str,
    ca_pem: &str,
) -> Result<(), StoreError> {
    for (plural, body) in namespace_objects(ns, ca_pem) {
        ensure_object(store, cluster, plural, Some(ns), body, None).await?;
    }
    let key = key_of(cluster, "", "configmaps", ns, ROOT_CA_CONFIGMAP);
    ensure_field(store, &key, "/data/ca.crt", json!(ca_pem)).await
}

/// `default/kubernetes` with its Endpoints and EndpointSlice, and every namespace's objects;
/// the Service's target port and the endpoints follow the address served now.
pub async fn seed_cluster(
    store: &Store,
    cluster: &str,
    addr: SocketAddr,
    ca_pem: &str,
) -> Result<(), StoreError> {
    let port = addr.port();
    let service = kubernetes_service(port);
    ensure_object(store, cluster, "services", Some("default"), service, None).await?;
    let key = key_of(cluster, "", "services", "default", "kubernetes");
    ensure_field(store, &key, "/spec/ports", json!([kubernetes_port(port)])).await?;
    let endpoints = kubernetes_endpoints(addr);
    ensure_object(
        store,
        cluster,
        "endpoints",
        Some("default"),
        endpoints,
        None,
    )
    .await?;
    let key = key_of(cluster, "", "endpoints", "default", "kubernetes");
    ensure_field(store, &key, "/subsets", kubernetes_subsets(addr)).await?;
    let slice = kubernetes_endpoint_slice(addr);
    let group = "discovery.k8s.io";
    ensure_object(
        store,
        cluster,
        "endpointslices",
        Some("default"),
        slice,
        None,
    )
    .await?;
    let key = key_of(cluster, group, "endpointslices", "default", "kubernetes");
    let (endpoints, ports) = kubernetes_slice_parts(addr);
    ensure_field(store, &key, "/endpoints", endpoints).await?;
    ensure_field(store, &key, "/ports", ports).await?;
    let namespaces = store.list(cluster, "", "namespaces", None, None, 0).await?;
    for ns in &namespaces.items {
        if objects::is_deleting(ns) {
            continue;
        }
        seed_namespace(store, cluster, objects::name_of(ns), ca_pem).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubernetes_service_points_at_the_served_port() {
        let svc = kubernetes_service(6443);
        assert_eq!(svc["metadata"]["labels"]["component"], "apiserver");
        assert_eq!(svc["spec"]["clusterIP"], KUBERNETES_CLUSTER_IP);
        assert_eq!(
            svc["spec"]["ports"],
            json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}])
        );
    }

    #[test]
    fn the_kubernetes_endpoints_name_the_served_address() {
        let served: SocketAddr = "127.0.0.1:16443".parse().unwrap();
        let ep = kubernetes_endpoints(served);
        assert_eq!(
            ep["subsets"],
            json!([{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": 16443, "protocol": "TCP"}]}])
        );
        let everywhere: SocketAddr = "0.0.0.0:6443".parse().unwrap();
        let slice = kubernetes_endpoint_slice(everywhere);
        assert_eq!(slice["addressType"], "IPv4");
        assert_eq!(slice["endpoints"][0]["addresses"], json!(["127.0.0.1"]));
        assert_eq!(
            slice["metadata"]["labels"]["kubernetes.io/service-name"],
            "kubernetes"
        );
        let v6 = kubernetes_endpoint_slice("[::1]:6443".parse().unwrap());
        assert_eq!(v6["addressType"], "IPv6");
    }

    #[test]
    fn every_namespace_holds_its_account_and_the_ca() {
        let objects = namespace_objects("team", "PEM");
        let named = |plural: &str| {
            objects
                .iter()
                .find(|(p, _)| *p == plural)
                .map(|(_, o)| o.clone())
                .unwrap()
        };
        assert_eq!(named("serviceaccounts")["metadata"]["name"], "default");
        let cm = named("configmaps");
        assert_eq!(cm["metadata"]["namespace"], "team");
        assert_eq!(cm["metadata"]["name"], ROOT_CA_CONFIGMAP);
        assert_eq!(cm["data"]["ca.crt"], "PEM");
    }
}
