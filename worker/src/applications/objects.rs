//! The node agents' objects, as the Helm chart renders them with `fullnameOverride:
//! gpustack-operator` (`deploy/chart/gpustack-operator/templates/{device-manager,model-manager}/`):
//! the device-manager DaemonSet of a manufacturer with its ServiceAccount, ClusterRole and
//! binding; the model-manager DaemonSet, its CSIDriver and RBAC. Pure functions of an
//! [`Input`]; `tests/tests/chart.rs` renders the chart with the matching values and checks
//! that every object here agrees with the chart's field by field (Helm's own labels aside).
//!
//! The objects carry [`MANAGED_BY`] in `app.kubernetes.io/managed-by` where Helm puts `Helm`:
//! that is how the worker finds what it applied when it prunes.

use gpustack_api::Manufacturer;
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::install::Desired;

/// The chart's `fullnameOverride` in image mode: every agent object is named after it.
pub const FULLNAME: &str = "gpustack-operator";
/// The model manager's CSI driver.
pub const MODEL_CSI_DRIVER: &str = "model.csi.gpustack.ai";
/// `app.kubernetes.io/managed-by` on what the worker applies (also its field manager).
pub const MANAGED_BY: &str = "gpustack-worker-applications";
/// The label naming a device-manager DaemonSet's manufacturer.
pub const MANUFACTURER_LABEL: &str = "gpustack.ai/manufacturer";

/// The device manager's settings (the chart's `deviceManager` values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceManagerInput {
    /// The device manager's HTTPS port (metrics and monitor).
    pub secure_port: u16,
    /// How often the device manager samples utilization (`15s`).
    pub monitor_period: String,
    /// The kubelet's directory on the nodes.
    pub kubelet_dir: String,
    /// Whether logical slices are advertised.
    pub sliced: bool,
    /// Whether hardware partitions are advertised.
    pub partitioned: bool,
    /// Whether shared cards are advertised.
    pub shared: bool,
}

impl Default for DeviceManagerInput {
    fn default() -> Self {
        Self {
            secure_port: 32443,
            monitor_period: "15s".into(),
            kubelet_dir: "/var/lib/kubelet".into(),
            sliced: true,
            partitioned: true,
            shared: true,
        }
    }
}

/// The model manager's settings (the chart's `modelManager` values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelManagerInput {
    /// The model manager's HTTPS port (metrics).
    pub secure_port: u16,
    /// The kubelet's directory on the nodes.
    pub kubelet_dir: String,
    /// Where the model files are kept on each node.
    pub root_path: String,
    /// The `node-driver-registrar` sidecar's image.
    pub registrar_image: String,
}

impl Default for ModelManagerInput {
    fn default() -> Self {
        Self {
            secure_port: 32444,
            kubelet_dir: "/var/lib/kubelet".into(),
            root_path: "/var/lib/gpustack/models".into(),
            registrar_image: "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0".into(),
        }
    }
}

/// What the objects are built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// The namespace the agents run in.
    pub namespace: String,
    /// The operator image every agent runs (the worker's own).
    pub image: String,
    /// The image pull policy.
    pub pull_policy: String,
    /// The device manager's settings.
    pub device_manager: DeviceManagerInput,
    /// The model manager's settings.
    pub model_manager: ModelManagerInput,
}

impl Input {
    /// The chart's defaults in `namespace` with `image`.
    pub fn new(namespace: &str, image: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            image: image.to_owned(),
            pull_policy: "IfNotPresent".into(),
            device_manager: DeviceManagerInput::default(),
            model_manager: ModelManagerInput::default(),
        }
    }
}

/// The image when the worker's own cannot be read: the crate version's.
pub fn default_image() -> String {
    format!("gpustack/gpustack-operator:{}", env!("CARGO_PKG_VERSION"))
}

/// A vendor's user-space directories the device manager reads from the host (the chart's
/// `global.manufacturers.<m>.hostPaths`).
pub fn host_paths(m: Manufacturer) -> &'static [&'static str] {
    match m {
        Manufacturer::Amd => &["/opt/rocm"],
        Manufacturer::Ascend => &["/usr/local/dcmi", "/usr/local/Ascend"],
        Manufacturer::Cambricon => &["/usr/local/neuware"],
        Manufacturer::Hygon => &["/opt/hyhal", "/opt/dtk"],
        Manufacturer::Iluvatar => &["/usr/local/corex"],
        Manufacturer::Metax => &["/opt/mxdriver", "/opt/maca"],
        Manufacturer::Mthreads | Manufacturer::Nvidia => &[],
        Manufacturer::Thead => &["/usr/local/PPU_SDK"],
    }
}

/// NFD's label on nodes with a PCI device of `m`'s vendor; the DaemonSet's node selector.
pub fn nfd_pci_label(m: Manufacturer) -> String {
    format!(
        "feature.node.kubernetes.io/pci-{}.present",
        m.spec().pci_vendor_id
    )
}

/// The device manager's ServiceAccount and RBAC name.
pub fn device_manager_name() -> String {
    format!("{FULLNAME}-device-manager")
}

/// The device manager DaemonSet of one manufacturer.
pub fn device_manager_daemonset_name(m: Manufacturer) -> String {
    format!("{FULLNAME}-device-manager-{m}")
}

/// The model manager's DaemonSet, ServiceAccount and RBAC name.
pub fn model_manager_name() -> String {
    format!("{FULLNAME}-model-manager")
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// `apps/v1` DaemonSets.
pub fn daemonset_resource() -> ApiResource {
    resource("apps", "v1", "DaemonSet", "daemonsets")
}
/// `v1` ServiceAccounts.
pub fn service_account_resource() -> ApiResource {
    resource("", "v1", "ServiceAccount", "serviceaccounts")
}
/// `rbac.authorization.k8s.io/v1` ClusterRoles.
pub fn cluster_role_resource() -> ApiResource {
    resource(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
    )
}
/// `rbac.authorization.k8s.io/v1` ClusterRoleBindings.
pub fn cluster_role_binding_resource() -> ApiResource {
    resource(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
    )
}
/// `rbac.authorization.k8s.io/v1` Roles.
pub fn role_resource() -> ApiResource {
    resource("rbac.authorization.k8s.io", "v1", "Role", "roles")
}
/// `rbac.authorization.k8s.io/v1` RoleBindings.
pub fn role_binding_resource() -> ApiResource {
    resource(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
    )
}
/// `storage.k8s.io/v1` CSIDrivers.
pub fn csi_driver_resource() -> ApiResource {
    resource("storage.k8s.io", "v1", "CSIDriver", "csidrivers")
}

/// Every kind the worker applies, namespaced or not: what a prune lists.
pub fn kinds() -> Vec<(ApiResource, bool)> {
    vec![
        (daemonset_resource(), true),
        (service_account_resource(), true),
        (role_resource(), true),
        (role_binding_resource(), true),
        (cluster_role_resource(), false),
        (cluster_role_binding_resource(), false),
        (csi_driver_resource(), false),
    ]
}

/// Labels on every object (the chart's common labels less Helm's own).
fn common_labels() -> Value {
    json!({
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/part-of": "gpustack-operator",
    })
}

/// A component's selector labels.
fn selector(component: &str) -> Value {
    json!({
        "app.kubernetes.io/part-of": "gpustack-operator",
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/name": format!("{FULLNAME}-{component}"),
    })
}

fn merged(a: &Value, b: &Value) -> Value {
    let mut out = a.clone();
    if let (Some(o), Some(extra)) = (out.as_object_mut(), b.as_object()) {
        for (k, v) in extra {
            o.insert(k.clone(), v.clone());
        }
    }
    out
}

fn namespaced(resource: ApiResource, namespace: &str, object: Value) -> Desired {
    Desired {
        resource,
        namespace: Some(namespace.to_owned()),
        object,
    }
}

fn cluster_scoped(resource: ApiResource, object: Value) -> Desired {
    Desired {
        resource,
        namespace: None,
        object,
    }
}

/// The downward-API environment every agent reads (`gpustack-operator.podEnv`).
fn pod_env() -> Vec<Value> {
    [
        ("KUBERNETES_POD_NAMESPACE", "metadata.namespace"),
        ("KUBERNETES_POD_NAME", "metadata.name"),
        ("KUBERNETES_NODE_NAME", "spec.nodeName"),
    ]
    .into_iter()
    .map(|(name, path)| json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}))
    .collect()
}

/// The agents' probes on their `https` port (`startupProbe`, `livenessProbe`, `readinessProbe`).
fn probes(container: &mut Value) {
    let get = |path: &str| json!({"path": path, "port": "https", "scheme": "HTTPS"});
    container["startupProbe"] =
        json!({"httpGet": get("/readyz"), "periodSeconds": 5, "failureThreshold": 24});
    container["livenessProbe"] = json!({
        "httpGet": get("/livez"), "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 10,
    });
    container["readinessProbe"] = json!({
        "httpGet": get("/readyz"), "periodSeconds": 5, "timeoutSeconds": 5, "failureThreshold": 3,
    });
}

/// The agents' requests and limits (the chart's default `resources`).
fn agent_resources() -> Value {
    json!({
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "2", "memory": "1Gi"},
    })
}

fn rolling_update() -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
}

/// An agent's DaemonSet: rolling one node at a time, its Pods labelled as itself.
fn daemonset(input: &Input, name: &str, selector: &Value, labels: &Value, pod: Value) -> Desired {
    namespaced(
        daemonset_resource(),
        &input.namespace,
        json!({
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": input.namespace, "labels": labels},
            "spec": {
                "revisionHistoryLimit": 5,
                "updateStrategy": rolling_update(),
                "selector": {"matchLabels": selector},
                "template": {"metadata": {"labels": labels}, "spec": pod},
            },
        }),
    )
}

/// The device-manager DaemonSet of manufacturer `m`.
pub fn device_manager_daemonset(input: &Input, m: Manufacturer) -> Desired {
    let d = &input.device_manager;
    let mut sel = selector("device-manager");
    sel[MANUFACTURER_LABEL] = json!(m.as_str());
    let labels = merged(&common_labels(), &sel);
    let mut args = vec![
        "device-manager".to_owned(),
        "serve".into(),
        "-v=2".into(),
        format!("--secure-port={}", d.secure_port),
        format!("--manufacturer={m}"),
        format!("--monitor-period={}", d.monitor_period),
        format!(
            "--kube-socket={}/device-plugins/kubelet.sock",
            d.kubelet_dir
        ),
    ];
    for (on, mode) in [
        (d.sliced, "sliced"),
        (d.partitioned, "partitioned"),
        (d.shared, "shared"),
    ] {
        if !on {
            args.push(format!("--no-{mode}"));
        }
    }
    let upper = m.as_str().to_ascii_uppercase();
    let mut env = pod_env();
    env.push(
        json!({"name": format!("GPUSTACK_{upper}_PCI_VENDOR_ID"), "value": m.spec().pci_vendor_id}),
    );
    env.push(json!({
        "name": format!("GPUSTACK_{upper}_ACCELERATABLE_RESOURCE_NAME"),
        "value": m.spec().resource_name,
    }));
    let mut mounts = vec![
        json!({"name": "dev", "mountPath": "/dev"}),
        json!({"name": "sys", "mountPath": "/sys"}),
        json!({"name": "device-plugins", "mountPath": format!("{}/device-plugins", d.kubelet_dir)}),
        json!({"name": "pod-resources", "mountPath": format!("{}/pod-resources", d.kubelet_dir)}),
        json!({"name": "data", "mountPath": "/var/lib/gpustack"}),
    ];
    let host = |name: &str, path: &str, type_: &str| json!({"name": name, "hostPath": {"path": path, "type": type_}});
    let mut volumes = vec![
        host("dev", "/dev", "Directory"),
        host("sys", "/sys", "Directory"),
        host(
            "device-plugins",
            &format!("{}/device-plugins", d.kubelet_dir),
            "DirectoryOrCreate",
        ),
        host(
            "pod-resources",
            &format!("{}/pod-resources", d.kubelet_dir),
            "DirectoryOrCreate",
        ),
        host("data", "/var/lib/gpustack", "DirectoryOrCreate"),
    ];
    for (i, p) in host_paths(m).iter().enumerate() {
        let name = format!("vendor-{i}");
        mounts.push(json!({"name": name, "mountPath": p, "readOnly": true}));
        volumes.push(host(&name, p, "DirectoryOrCreate"));
    }
    let mut main = json!({
        "name": "main",
        "image": input.image,
        "imagePullPolicy": input.pull_policy,
        "args": args,
        "env": env,
        "ports": [{"name": "https", "containerPort": d.secure_port, "protocol": "TCP"}],
        "resources": agent_resources(),
        "securityContext": {"privileged": true, "runAsUser": 0},
        "volumeMounts": mounts,
    });
    probes(&mut main);
    daemonset(
        input,
        &device_manager_daemonset_name(m),
        &sel,
        &labels,
        json!({
            "serviceAccountName": device_manager_name(),
            "priorityClassName": "system-node-critical",
            "nodeSelector": {nfd_pci_label(m): "true"},
            "tolerations": [{"operator": "Exists"}],
            "containers": [main],
            "volumes": volumes,
        }),
    )
}

fn service_account(namespace: &str, name: &str) -> Desired {
    namespaced(
        service_account_resource(),
        namespace,
        json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace, "labels": common_labels()},
        }),
    )
}

fn cluster_role(name: &str, rules: Value) -> Desired {
    cluster_scoped(
        cluster_role_resource(),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": common_labels()},
            "rules": rules,
        }),
    )
}

fn cluster_role_binding(namespace: &str, name: &str) -> Desired {
    cluster_scoped(
        cluster_role_binding_resource(),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": common_labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        }),
    )
}

/// The device manager's ServiceAccount, ClusterRole and ClusterRoleBinding, and its Role and
/// RoleBinding in the system namespace (one set for every manufacturer's DaemonSet).
pub fn device_manager_rbac(input: &Input) -> Vec<Desired> {
    let name = device_manager_name();
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| json!({"apiGroups": groups, "resources": resources, "verbs": verbs});
    let rules = json!([
        rule(
            &["worker.gpustack.ai"],
            &["devices"],
            &["get", "list", "watch", "create", "patch", "update"]
        ),
        rule(
            &["worker.gpustack.ai"],
            &["devices/status"],
            &["get", "patch", "update"]
        ),
        rule(&[""], &["nodes"], &["get", "list", "watch", "patch"]),
        rule(&[""], &["pods"], &["get", "list", "watch", "patch"]),
        rule(&[""], &["events"], &["create", "patch"]),
        // Its /metrics is delegated to the cluster.
        rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
        rule(
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
            &["create"]
        ),
    ]);
    let mut out = vec![
        service_account(&input.namespace, &name),
        cluster_role(&name, rules),
        cluster_role_binding(&input.namespace, &name),
    ];
    // Its node's NodeFeature, where NFD runs, in the system namespace only.
    out.extend(role_and_binding(
        &input.namespace,
        &name,
        json!([rule(
            &["nfd.k8s-sigs.io"],
            &["nodefeatures"],
            &["get", "create", "patch"]
        )]),
    ));
    out
}

/// A Role `name` in `ns` with `rules`, bound to the ServiceAccount of the same name.
fn role_and_binding(ns: &str, name: &str, rules: Value) -> [Desired; 2] {
    [
        namespaced(
            role_resource(),
            ns,
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": name, "namespace": ns, "labels": common_labels()},
                "rules": rules,
            }),
        ),
        namespaced(
            role_binding_resource(),
            ns,
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": name, "namespace": ns, "labels": common_labels()},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
            }),
        ),
    ]
}

/// The model-manager DaemonSet: the CSI plugin beside `node-driver-registrar`.
pub fn model_manager_daemonset(input: &Input) -> Desired {
    let mm = &input.model_manager;
    let sel = selector("model-manager");
    let labels = merged(&common_labels(), &sel);
    let plugin = format!("{}/plugins/{MODEL_CSI_DRIVER}", mm.kubelet_dir);
    let mut main = json!({
        "name": "main",
        "image": input.image,
        "imagePullPolicy": input.pull_policy,
        "args": [
            "model-manager",
            "-v=2",
            format!("--secure-port={}", mm.secure_port),
            "--node-name=$(KUBERNETES_NODE_NAME)",
            format!("--kubelet-dir={}", mm.kubelet_dir),
            format!("--cache-root={}", mm.root_path),
            format!("--csi-socket={plugin}/csi.sock"),
        ],
        "env": pod_env(),
        "ports": [{"name": "https", "containerPort": mm.secure_port, "protocol": "TCP"}],
        "resources": agent_resources(),
        "securityContext": {"privileged": true, "runAsUser": 0, "readOnlyRootFilesystem": true},
        "volumeMounts": [
            {"name": "kubelet-dir", "mountPath": mm.kubelet_dir, "mountPropagation": "Bidirectional"},
            {"name": "cache-root", "mountPath": mm.root_path},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    });
    probes(&mut main);
    let registrar = json!({
        "name": "registrar",
        "image": mm.registrar_image,
        "imagePullPolicy": input.pull_policy,
        "args": [
            "--v=2",
            "--csi-address=/csi/csi.sock",
            format!("--kubelet-registration-path={plugin}/csi.sock"),
        ],
        "resources": {
            "requests": {"cpu": "10m", "memory": "16Mi"},
            "limits": {"cpu": "100m", "memory": "64Mi"},
        },
        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true},
        "volumeMounts": [
            {"name": "plugin-dir", "mountPath": "/csi"},
            {"name": "registration-dir", "mountPath": "/registration"},
        ],
    });
    daemonset(
        input,
        &model_manager_name(),
        &sel,
        &labels,
        json!({
            "serviceAccountName": model_manager_name(),
            "priorityClassName": "system-node-critical",
            "tolerations": [{"operator": "Exists"}],
            "containers": [main, registrar],
            "volumes": [
                {"name": "kubelet-dir", "hostPath": {"path": mm.kubelet_dir, "type": "Directory"}},
                {"name": "plugin-dir", "hostPath": {"path": plugin, "type": "DirectoryOrCreate"}},
                {"name": "registration-dir", "hostPath": {"path": format!("{}/plugins_registry", mm.kubelet_dir), "type": "Directory"}},
                {"name": "cache-root", "hostPath": {"path": mm.root_path, "type": "DirectoryOrCreate"}},
                {"name": "tmp", "emptyDir": {}},
            ],
        }),
    )
}

/// CSIDriver `model.csi.gpustack.ai`: ephemeral volumes only, pod info on mount, no attach.
pub fn model_csi_driver() -> Desired {
    cluster_scoped(
        csi_driver_resource(),
        json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
            "metadata": {"name": MODEL_CSI_DRIVER, "labels": common_labels()},
            "spec": {
                "attachRequired": false,
                "podInfoOnMount": true,
                "volumeLifecycleModes": ["Ephemeral"],
                "fsGroupPolicy": "None",
            },
        }),
    )
}

/// The model manager's ServiceAccount, ClusterRole and binding, and its Role and RoleBinding in
/// the system namespace (the hub's CA bundle ConfigMap).
pub fn model_manager_rbac(input: &Input) -> Vec<Desired> {
    let name = model_manager_name();
    let ns = &input.namespace;
    let rules = json!([
        {"apiGroups": ["worker.gpustack.ai"], "resources": ["modelartifacts", "nodemodelstores"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["worker.gpustack.ai"], "resources": ["nodemodelstores/status"], "verbs": ["get", "patch", "update"]},
        // Its /metrics is delegated to the cluster.
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ]);
    let mut out = vec![
        service_account(ns, &name),
        cluster_role(&name, rules),
        cluster_role_binding(ns, &name),
    ];
    out.extend(role_and_binding(
        ns,
        &name,
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]),
    ));
    out
}

/// Everything of the device manager for `manufacturers` (none: nothing, not even its RBAC).
pub fn device_manager(input: &Input, manufacturers: &[Manufacturer]) -> Vec<Desired> {
    if manufacturers.is_empty() {
        return Vec::new();
    }
    let mut out = device_manager_rbac(input);
    out.extend(
        manufacturers
            .iter()
            .map(|m| device_manager_daemonset(input, *m)),
    );
    out
}

/// Everything of the model manager.
pub fn model_manager(input: &Input) -> Vec<Desired> {
    let mut out = model_manager_rbac(input);
    out.push(model_csi_driver());
    out.push(model_manager_daemonset(input));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> Input {
        Input::new("gpustack-system", "gpustack/gpustack-operator:1.2.3")
    }

    #[test]
    fn a_device_manager_daemonset_runs_on_its_vendors_nodes() {
        let ds = device_manager_daemonset(&input(), Manufacturer::Amd).object;
        assert_eq!(
            ds["metadata"]["name"],
            "gpustack-operator-device-manager-amd"
        );
        assert_eq!(ds["metadata"]["namespace"], "gpustack-system");
        let pod = &ds["spec"]["template"]["spec"];
        assert_eq!(
            pod["nodeSelector"],
            json!({"feature.node.kubernetes.io/pci-1002.present": "true"})
        );
        let main = &pod["containers"][0];
        assert_eq!(main["image"], "gpustack/gpustack-operator:1.2.3");
        assert!(
            main["args"]
                .as_array()
                .unwrap()
                .contains(&json!("--manufacturer=amd"))
        );
        // The vendor's libraries, read-only, after the common mounts.
        assert_eq!(
            main["volumeMounts"][5],
            json!({"name": "vendor-0", "mountPath": "/opt/rocm", "readOnly": true})
        );
        // The selector is the template's labels less the common ones.
        let sel = &ds["spec"]["selector"]["matchLabels"];
        assert_eq!(sel[MANUFACTURER_LABEL], "amd");
        for (k, v) in sel.as_object().unwrap() {
            assert_eq!(&ds["spec"]["template"]["metadata"]["labels"][k], v);
        }
        assert_eq!(
            ds["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            MANAGED_BY
        );
    }

    #[test]
    fn modes_turned_off_pass_no_flags() {
        let mut i = input();
        i.device_manager.sliced = false;
        i.device_manager.shared = false;
        let ds = device_manager_daemonset(&i, Manufacturer::Nvidia).object;
        let args: Vec<String> =
            serde_json::from_value(ds["spec"]["template"]["spec"]["containers"][0]["args"].clone())
                .unwrap();
        assert!(args.contains(&"--no-sliced".to_owned()));
        assert!(args.contains(&"--no-shared".to_owned()));
        assert!(!args.contains(&"--no-partitioned".to_owned()));
    }

    #[test]
    fn no_manufacturer_no_device_manager_objects() {
        assert!(device_manager(&input(), &[]).is_empty());
        let objs = device_manager(&input(), &[Manufacturer::Nvidia, Manufacturer::Amd]);
        let kinds: Vec<&str> = objs.iter().map(|d| d.resource.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "DaemonSet",
                "DaemonSet"
            ]
        );
    }

    #[test]
    fn the_model_manager_and_its_driver() {
        let objs = model_manager(&input());
        let names: Vec<String> = objs.iter().map(Desired::describe).collect();
        assert_eq!(
            names,
            [
                "ServiceAccount gpustack-system/gpustack-operator-model-manager",
                "ClusterRole gpustack-operator-model-manager",
                "ClusterRoleBinding gpustack-operator-model-manager",
                "Role gpustack-system/gpustack-operator-model-manager",
                "RoleBinding gpustack-system/gpustack-operator-model-manager",
                "CSIDriver model.csi.gpustack.ai",
                "DaemonSet gpustack-system/gpustack-operator-model-manager",
            ]
        );
        let ds = &objs[6].object;
        let main = &ds["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(main["volumeMounts"][0]["mountPropagation"], "Bidirectional");
        assert_eq!(
            ds["spec"]["template"]["spec"]["containers"][1]["args"][2],
            "--kubelet-registration-path=/var/lib/kubelet/plugins/model.csi.gpustack.ai/csi.sock"
        );
    }

    #[test]
    fn the_fallback_image_is_the_crate_version() {
        assert_eq!(
            default_image(),
            format!("gpustack/gpustack-operator:{}", env!("CARGO_PKG_VERSION"))
        );
    }
}
