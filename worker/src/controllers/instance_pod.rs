//! What an Instance becomes (instances.md §4.2–4.4), as pure functions: one Pod of the same
//! name owned by the Instance, with a `main` container and, when an SSH key is given, an `sshd`
//! sidecar that sees main's devices through the visibility resource without holding any of its
//! own; and a NodePort Service owned by the Pod, only when ports are declared.
//!
//! The Pod is rendered once, at creation, and never diffed: spec changes take effect across a
//! stop and start.

use std::collections::BTreeMap;

use gpustack_api::{
    instance::{Instance, InstancePort},
    instance_type::InstanceType,
    labels::{HOSTNAME, RESOURCE_TYPE},
    manufacturer::ResolvedManufacturer,
};
use k8s_openapi::{
    api::core::v1::{Pod, Service},
    apimachinery::pkg::api::resource::Quantity as K8sQuantity,
};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::instance_settings::InstanceSettings;
use crate::admission::{instance::cpu_text, quantity::Quantity};

/// The label Kueue's Pod integration queues a Pod by.
pub const QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";
/// The label tying the Pod to its Instance's UID.
pub const PART_OF: &str = "app.kubernetes.io/part-of";
/// The `resource.gpustack.ai/type` of an Instance's Pods and Services.
pub const INSTANCES: &str = "instances";
/// The name of the container that runs the Instance's image.
pub const MAIN: &str = "main";
/// The name of the SSH sidecar.
pub const SSHD: &str = "sshd";
/// Where the sidecar finds the authorized keys.
const AUTHORIZED_KEYS: &str = "/var/run/sshd-authorized-keys";
const DEFAULT_MOUNT: &str = "/workspace";

/// The accelerator side of a pool: its manufacturer's resolved facts.
pub struct Accelerated<'a> {
    /// The manufacturer's resolved facts (resource names, runtime).
    pub manufacturer: &'a ResolvedManufacturer,
    /// The pool offers logical slices.
    pub sliceable: bool,
}

/// Everything a Pod is rendered from.
pub struct PodInputs<'a> {
    /// The Instance.
    pub instance: &'a Instance,
    /// Its InstanceType.
    pub instance_type: &'a InstanceType,
    /// The pool's Kueue entrance (its LocalQueue's name).
    pub entrance: &'a str,
    /// The accelerator side, for an accelerated pool.
    pub accelerated: Option<Accelerated<'a>>,
    /// The settings the Pod depends on.
    pub settings: &'a InstanceSettings,
    /// The pinned node's hostname label, when `spec.nodeName` is set and the Node is known.
    pub pinned_hostname: Option<&'a str>,
}

/// `lower("<PROTO>-<port>")`, as container and Service ports are named.
pub fn port_name(p: &InstancePort) -> String {
    format!("{}-{}", p.protocol(), p.port).to_ascii_lowercase()
}

/// `image` moved to `registry` and `namespace` (the organisation) when they are set.
pub fn rewrite_image(image: &str, registry: &str, namespace: &str) -> String {
    let mut parts: Vec<&str> = image.split('/').collect();
    // A first component with a dot, a colon or `localhost` is a registry host.
    let has_host = parts.len() > 1
        && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost");
    let host = has_host.then(|| parts.remove(0));
    let repo = parts.pop().unwrap_or_default();
    let org = if namespace.is_empty() {
        parts.join("/")
    } else {
        namespace.to_owned()
    };
    let host = if registry.is_empty() {
        host.unwrap_or_default()
    } else {
        registry
    };
    [host, org.as_str(), repo]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("/")
}

/// The amount of one unit of `what` (`cpu`, `ram`) of the pool.
fn unit(it: &InstanceType, what: &str) -> Option<Quantity> {
    let u = it.spec.unit_resources.as_ref()?;
    let text = match what {
        "cpu" => u.cpu.as_deref()?,
        _ => u.ram.as_deref()?,
    };
    Quantity::parse(text).ok()
}

/// How many units the Instance takes: cards, or CPU units on a pool without accelerators (a
/// slice or a partition counts as one).
fn units(inst: &Instance, accelerated: bool) -> i64 {
    let r = &inst.spec.resources;
    if accelerated {
        if r.accelerator_sliced_memory_percentage.is_some()
            || r.accelerator_partitioned_profile.is_some()
        {
            1
        } else {
            r.accelerator.unwrap_or(1).max(1)
        }
    } else {
        r.cpu
            .as_ref()
            .and_then(|c| Quantity::parse(&cpu_text(c)).ok()?.whole())
            .unwrap_or(1)
            .max(1)
    }
}

/// The container limits and requests of `main` (§4.3): CPU, memory and storage as the spec
/// says (the webhook defaults them), requests scaled down under overcommit, and the
/// accelerator family the request names.
fn main_resources(p: &PodInputs) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let inst = p.instance;
    let r = &inst.spec.resources;
    let accelerated = p.accelerated.is_some();
    let mut limits = BTreeMap::new();
    if let Some(cpu) = &r.cpu {
        limits.insert("cpu".to_owned(), cpu_text(cpu));
    } else if let Some(u) = r
        .cpu
        .is_none()
        .then(|| unit(p.instance_type, "cpu"))
        .flatten()
    {
        limits.insert(
            "cpu".to_owned(),
            quantity_text(u.times(units(inst, accelerated))),
        );
    }
    if let Some(ram) = &r.ram {
        limits.insert("memory".to_owned(), ram.clone());
    } else if let Some(u) = unit(p.instance_type, "ram") {
        limits.insert(
            "memory".to_owned(),
            quantity_text(u.times(units(inst, accelerated))),
        );
    }
    if let Some(s) = &r.local_storage {
        limits.insert("ephemeral-storage".to_owned(), s.clone());
    }
    let mut requests = limits.clone();
    if p.settings.overcommit {
        let n = units(inst, accelerated);
        let cpu_unit = if accelerated { "100m" } else { "800m" };
        let scaled = [
            (
                "cpu",
                Quantity::parse(cpu_unit).ok().and_then(|q| q.times(n)),
            ),
            (
                "memory",
                Quantity::parse("128Mi").ok().and_then(|q| q.times(n)),
            ),
        ];
        for (key, floor) in scaled {
            if let (Some(limit), Some(floor)) =
                (limits.get(key).and_then(|l| Quantity::parse(l).ok()), floor)
            {
                requests.insert(key.to_owned(), quantity_text(Some(floor.min(limit))));
            }
        }
        if let Some(q) = limits
            .get("ephemeral-storage")
            .and_then(|s| Quantity::parse(s).ok())
        {
            requests.insert("ephemeral-storage".to_owned(), q.eighth().to_string());
        }
    }
    if let Some(a) = &p.accelerated {
        let base = &a.manufacturer.resource_name;
        let mut put = |k: String, v: String| {
            limits.insert(k.clone(), v.clone());
            requests.insert(k, v);
        };
        if let Some(profile) = &r.accelerator_partitioned_profile {
            let kind = a.manufacturer.partition_kind.as_deref().unwrap_or("mig");
            put(format!("{base}.partitioned"), "1".into());
            put(format!("{base}.partitioned.{kind}-{profile}"), "1".into());
        } else if let Some(memory) = r
            .accelerator_sliced_memory_percentage
            .filter(|m| *m > 0 && a.sliceable)
        {
            let cores = r.accelerator_sliced_cores_percentage.unwrap_or(100);
            put(format!("{base}.sliced"), "1".into());
            put(
                format!("{base}.sliced.memory-percentage"),
                memory.to_string(),
            );
            put(format!("{base}.sliced.cores-percentage"), cores.to_string());
        } else {
            put(base.clone(), r.accelerator.unwrap_or(1).max(1).to_string());
        }
    }
    (limits, requests)
}

fn quantity_text(q: Option<Quantity>) -> String {
    q.map(|q| q.to_string()).unwrap_or_default()
}

/// The owner reference of a dependent of `owner` (controller, not blocking deletion).
fn owner_of<K: Resource<DynamicType = ()>>(owner: &K) -> Value {
    json!({
        "apiVersion": K::api_version(&()), "kind": K::kind(&()),
        "name": owner.meta().name, "uid": owner.meta().uid,
        "controller": true, "blockOwnerDeletion": false,
    })
}

/// The Pod of `p.instance`.
pub fn pod(p: &PodInputs) -> Pod {
    let inst = p.instance;
    let spec = &inst.spec;
    let (limits, requests) = main_resources(p);
    let mount = spec.volume_mount.as_deref().unwrap_or(DEFAULT_MOUNT);
    let ports: Vec<Value> = spec
        .ports
        .iter()
        .map(|port| json!({"name": port_name(port), "containerPort": port.port, "protocol": port.protocol()}))
        .collect();
    let env: Vec<Value> = spec
        .env
        .iter()
        .map(|e| json!({"name": e.name, "value": e.value}))
        .collect();
    let mut mounts = vec![json!({"name": "workspace", "mountPath": mount})];
    let mut volumes = vec![workspace_volume(inst)];
    for (i, h) in spec.host_path_volumes.iter().enumerate() {
        let name = format!("additional-{i}");
        mounts.push(json!({"name": name, "mountPath": h.mount_path}));
        volumes.push(json!({"name": name, "hostPath": {"path": h.path}}));
    }
    let mut main = json!({
        "name": MAIN,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy.as_deref().unwrap_or("IfNotPresent"),
        "resources": {"limits": limits, "requests": requests},
        "securityContext": {"runAsUser": 0},
        "volumeMounts": mounts,
    });
    if !spec.command.is_empty() {
        main["command"] = json!(spec.command);
    }
    if !env.is_empty() {
        main["env"] = json!(env);
    }
    if !ports.is_empty() {
        main["ports"] = json!(ports);
    }
    if spec.privileged == Some(true) {
        main["securityContext"]["privileged"] = json!(true);
    }
    let mut containers = vec![main];
    if let Some(key) = spec.ssh_public_key.as_ref().filter(|k| !k.name.is_empty()) {
        let s = p.settings;
        let image = rewrite_image(
            &s.ssh_server_image,
            &s.container_registry,
            &s.container_namespace,
        );
        let mut sshd = json!({
            "name": SSHD, "image": image, "stdin": true, "tty": true,
            "env": [{"name": "VOLUME_MOUNT_PATH", "value": mount}],
            "securityContext": {"capabilities": {"add": ["SYS_ADMIN", "SYS_PTRACE"]}},
            "volumeMounts": [{"name": "sshd-authorized-keys", "mountPath": AUTHORIZED_KEYS, "readOnly": true}],
        });
        if let Some(a) = &p.accelerated {
            // Sees main's devices; holds no CPU, memory or slice of its own.
            let cards = units(inst, true).to_string();
            let key = format!(
                "device.gpustack.ai/{}.visibility",
                a.manufacturer.manufacturer
            );
            sshd["resources"] = json!({"limits": {&key: cards}, "requests": {&key: cards}});
        }
        containers.push(sshd);
        volumes.push(json!({"name": "sshd-authorized-keys", "secret": {"secretName": key.name, "defaultMode": 0o600}}));
    }
    let mut labels = BTreeMap::from([
        (QUEUE_NAME.to_owned(), p.entrance.to_owned()),
        (PART_OF.to_owned(), inst.uid().unwrap_or_default()),
        (RESOURCE_TYPE.to_owned(), INSTANCES.to_owned()),
    ]);
    labels.retain(|_, v| !v.is_empty());
    let mut pod_spec = json!({
        "hostIPC": true,
        "shareProcessNamespace": true,
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "containers": containers,
        "volumes": volumes,
    });
    if let Some(secret) = spec
        .image_pull_secret
        .as_ref()
        .filter(|s| !s.name.is_empty())
    {
        pod_spec["imagePullSecrets"] = json!([{"name": secret.name}]);
    }
    if let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        pod_spec["nodeSelector"] = json!({HOSTNAME: p.pinned_hostname.unwrap_or(node)});
    }
    crate::typed::from_json(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": inst.name_any(), "namespace": inst.namespace(),
            "labels": labels, "ownerReferences": [owner_of(inst)],
        },
        "spec": pod_spec,
    }))
    .expect("a rendered Pod is a Pod")
}

fn workspace_volume(inst: &Instance) -> Value {
    let volume = inst.spec.volume.clone().unwrap_or_default();
    match (volume.persistent, volume.ephemeral) {
        (Some(claim), _) if !claim.name.is_empty() => {
            json!({"name": "workspace", "persistentVolumeClaim": {"claimName": claim.name}})
        }
        (_, Some(e)) if !e.capacity.is_empty() => {
            json!({"name": "workspace", "emptyDir": {"sizeLimit": e.capacity}})
        }
        _ => json!({"name": "workspace", "emptyDir": {}}),
    }
}

/// The NodePort Service of `pod`, when it declares ports (a Service without ports is refused).
pub fn service(pod: &Pod) -> Option<Service> {
    let ports: Vec<Value> = pod
        .spec
        .as_ref()?
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .map(|p| {
            json!({"name": p.name, "port": p.container_port, "targetPort": p.container_port,
                   "protocol": p.protocol.as_deref().unwrap_or("TCP")})
        })
        .collect();
    if ports.is_empty() {
        return None;
    }
    let labels = pod.labels().clone();
    let selector: BTreeMap<&String, &String> =
        labels.iter().filter(|(k, _)| *k != QUEUE_NAME).collect();
    crate::typed::from_json(&json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": pod.name_any(), "namespace": pod.namespace(),
            "labels": labels, "ownerReferences": [owner_of(pod)],
        },
        "spec": {"type": "NodePort", "selector": selector, "ports": ports},
    }))
    .ok()
}

/// The Pod's resource amount `key` of container `name` (limits), for reading back.
pub fn limit_of(pod: &Pod, container: &str, key: &str) -> Option<K8sQuantity> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == container)?
        .resources
        .as_ref()?
        .limits
        .as_ref()?
        .get(key)
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpustack_api::Manufacturer;

    fn it(accelerated: bool) -> InstanceType {
        serde_json::from_value(json!({
            "metadata": {"name": "h100"},
            "spec": {"acceleratable": accelerated, "acceleratorGroup": "nvidia-h100",
                     "unitResources": {"cpu": "8", "ram": "64Gi"}, "localStorage": "100Gi"},
            "status": {"entrance": "gpustack-fnv64-0123456789abcdef"},
        }))
        .unwrap()
    }

    fn inst(spec: Value) -> Instance {
        serde_json::from_value(json!({
            "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Instance",
            "metadata": {"name": "box", "namespace": "team", "uid": "u-1"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn render(i: &Instance, accelerated: bool, settings: &InstanceSettings) -> Value {
        let nvidia = Manufacturer::Nvidia.resolve(|_| None);
        let t = it(accelerated);
        let p = PodInputs {
            instance: i,
            instance_type: &t,
            entrance: "gpustack-fnv64-0123456789abcdef",
            accelerated: accelerated.then_some(Accelerated {
                manufacturer: &nvidia,
                sliceable: true,
            }),
            settings,
            pinned_hostname: Some("gpu-a.example"),
        };
        serde_json::to_value(pod(&p)).unwrap()
    }

    #[test]
    fn a_slice_with_ssh_and_ports() {
        let i = inst(json!({
            "type": "h100", "image": "ubuntu:24.04", "command": ["tail", "-f", "/dev/null"],
            "env": [{"name": "A", "value": "1"}], "ports": [{"port": 22}, {"port": 53, "protocol": "UDP"}],
            "resources": {"accelerator": 1, "acceleratorSlicedMemoryPercentage": 20,
                          "acceleratorSlicedCoresPercentage": 100, "cpu": "1600m", "ram": "12Gi", "localStorage": "16Gi"},
            "volume": {"ephemeral": {"capacity": "1Gi"}}, "sshPublicKey": {"name": "me"}, "nodeName": "gpu-a",
        }));
        let settings = InstanceSettings {
            container_registry: "registry.local".into(),
            ..InstanceSettings::default()
        };
        let p = render(&i, true, &settings);
        assert_eq!(
            p["metadata"]["labels"],
            json!({
            "kueue.x-k8s.io/queue-name": "gpustack-fnv64-0123456789abcdef",
            "app.kubernetes.io/part-of": "u-1", "resource.gpustack.ai/type": "instances"})
        );
        let owner = &p["metadata"]["ownerReferences"][0];
        assert_eq!(
            (owner["kind"].as_str(), owner["controller"].as_bool()),
            (Some("Instance"), Some(true))
        );
        let spec = &p["spec"];
        assert_eq!(spec["hostIPC"], true);
        assert_eq!(spec["shareProcessNamespace"], true);
        assert_eq!(spec["automountServiceAccountToken"], false);
        assert_eq!(
            spec["nodeSelector"],
            json!({"kubernetes.io/hostname": "gpu-a.example"})
        );
        let main = &spec["containers"][0];
        assert_eq!(main["name"], "main");
        assert_eq!(main["command"], json!(["tail", "-f", "/dev/null"]));
        assert_eq!(main["ports"][0]["name"], "tcp-22");
        assert_eq!(main["ports"][1]["name"], "udp-53");
        assert_eq!(
            main["resources"]["limits"],
            json!({
            "cpu": "1600m", "memory": "12Gi", "ephemeral-storage": "16Gi",
            "nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "20",
            "nvidia.com/gpu.sliced.cores-percentage": "100"})
        );
        // Overcommit (the default): one accelerated unit requests 100m and 128Mi, storage an eighth.
        assert_eq!(main["resources"]["requests"]["cpu"], "100m");
        assert_eq!(main["resources"]["requests"]["memory"], "128Mi");
        assert_eq!(main["resources"]["requests"]["ephemeral-storage"], "2Gi");
        let sshd = &spec["containers"][1];
        assert_eq!(sshd["image"], "registry.local/gpustack/ssh-server:v1.3.0");
        assert_eq!(
            sshd["resources"]["limits"],
            json!({"device.gpustack.ai/nvidia.visibility": "1"})
        );
        assert_eq!(
            spec["volumes"][0],
            json!({"name": "workspace", "emptyDir": {"sizeLimit": "1Gi"}})
        );
        assert_eq!(spec["volumes"][1]["secret"]["secretName"], "me");

        let pod: Pod = serde_json::from_value(p).unwrap();
        let svc = serde_json::to_value(service(&pod).unwrap()).unwrap();
        assert_eq!(svc["spec"]["type"], "NodePort");
        assert_eq!(
            svc["spec"]["ports"][1],
            json!({"name": "udp-53", "port": 53, "targetPort": 53, "protocol": "UDP"})
        );
        assert_eq!(svc["metadata"]["ownerReferences"][0]["kind"], "Pod");
        assert!(svc["spec"]["selector"].get(QUEUE_NAME).is_none());
    }

    #[test]
    fn whole_cards_partitions_and_cpu_pools() {
        let off = InstanceSettings {
            overcommit: false,
            ..InstanceSettings::default()
        };
        let cards = render(
            &inst(json!({"type": "h100", "image": "x", "resources": {"accelerator": 2}})),
            true,
            &off,
        );
        let main = &cards["spec"]["containers"][0];
        assert_eq!(
            main["resources"]["limits"],
            json!({"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "2"})
        );
        assert_eq!(main["resources"]["requests"], main["resources"]["limits"]);
        assert!(
            cards["spec"]["containers"].get(1).is_none(),
            "no key, no sidecar"
        );
        assert!(cards["spec"].get("nodeSelector").is_none());
        assert!(
            service(&serde_json::from_value(cards).unwrap()).is_none(),
            "no ports, no Service"
        );

        let mig = render(
            &inst(json!({"type": "h100", "image": "x",
            "resources": {"accelerator": 1, "acceleratorPartitionedProfile": "1g.10gb"}})),
            true,
            &off,
        );
        let limits = &mig["spec"]["containers"][0]["resources"]["limits"];
        assert_eq!(limits["nvidia.com/gpu.partitioned"], "1");
        assert_eq!(limits["nvidia.com/gpu.partitioned.mig-1g.10gb"], "1");

        let cpu = render(
            &inst(json!({"type": "generic", "image": "x", "resources": {"cpu": 3}})),
            false,
            &InstanceSettings::default(),
        );
        let r = &cpu["spec"]["containers"][0]["resources"];
        assert_eq!(r["limits"], json!({"cpu": "3", "memory": "192Gi"}));
        assert_eq!(r["requests"], json!({"cpu": "2400m", "memory": "384Mi"}));
    }

    #[test]
    fn images_move_to_the_configured_registry() {
        let img = "gpustack/ssh-server:v1.3.0";
        assert_eq!(rewrite_image(img, "", ""), img);
        assert_eq!(
            rewrite_image(img, "r.io", ""),
            "r.io/gpustack/ssh-server:v1.3.0"
        );
        assert_eq!(rewrite_image(img, "", "mirror"), "mirror/ssh-server:v1.3.0");
        assert_eq!(
            rewrite_image("docker.io/a/b:1", "r.io:5000", "c"),
            "r.io:5000/c/b:1"
        );
        assert_eq!(rewrite_image("busybox", "r.io", ""), "r.io/busybox");
    }
}
