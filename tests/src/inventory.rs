//! GPU nodes as the worker's controllers see them: a Node with the labels the device manager
//! and NFD write (and the capacity its device plugin offers), plus the node's `Devices` ledger,
//! shaped like what `device-manager detect` reports on the machines of the detect fixtures.
//! The kubelet and the device manager cannot run here; these objects are what they would write.

use serde_json::{Value, json};

/// One accelerator product.
#[derive(Clone, Debug)]
pub struct Product {
    pub manufacturer: &'static str,
    pub id: &'static str,
    pub name: &'static str,
    pub memory_mib: u64,
    pub cores: u32,
    /// Logical slices per card (software slicing), 0 when not sliceable.
    pub slices: i32,
    /// Resource base of the device plugin.
    pub resource: &'static str,
    /// MIG profiles `(name, count, memoryMib)` when partitioning is on.
    pub partitions: &'static [(&'static str, i32, u64)],
}

pub const H100: Product = Product {
    manufacturer: "nvidia",
    id: "h100-80gb-hbm3",
    name: "NVIDIA H100 80GB HBM3",
    memory_mib: 81920,
    cores: 132,
    slices: 10,
    resource: "nvidia.com/gpu",
    partitions: &[],
};

pub const A100_MIG: Product = Product {
    manufacturer: "nvidia",
    id: "a100-sxm4-40gb",
    name: "NVIDIA A100-SXM4-40GB",
    memory_mib: 40960,
    cores: 108,
    slices: 0,
    resource: "nvidia.com/gpu",
    partitions: &[("1g.5gb", 7, 4864), ("3g.20gb", 2, 19968)],
};

pub const RX7800XT: Product = Product {
    manufacturer: "amd",
    id: "radeon-rx-7800-xt",
    name: "AMD Radeon RX 7800 XT",
    memory_mib: 16384,
    cores: 60,
    slices: 4,
    resource: "amd.com/gpu",
    partitions: &[],
};

pub const MI210: Product = Product {
    manufacturer: "amd",
    id: "instinct-mi210",
    name: "AMD Instinct MI210",
    memory_mib: 65536,
    cores: 104,
    slices: 4,
    resource: "amd.com/gpu",
    partitions: &[],
};

pub const ASCEND_910B: Product = Product {
    manufacturer: "ascend",
    id: "ascend910b3",
    name: "Ascend910B3",
    memory_mib: 65536,
    cores: 20,
    slices: 0,
    resource: "huawei.com/npu",
    partitions: &[],
};

/// A node of `cards` cards of `product` (none: a CPU-only node); `unhealthy` lists the
/// indexes of broken cards.
#[derive(Clone, Debug)]
pub struct Machine {
    pub name: String,
    pub product: Option<Product>,
    pub cards: u32,
    pub unhealthy: Vec<u32>,
    pub cpus: u32,
}

impl Machine {
    pub fn gpu(name: &str, product: Product, cards: u32) -> Self {
        Machine {
            name: name.to_owned(),
            product: Some(product),
            cards,
            unhealthy: Vec::new(),
            cpus: 96,
        }
    }

    pub fn cpu_only(name: &str, cpus: u32) -> Self {
        Machine {
            name: name.to_owned(),
            product: None,
            cards: 0,
            unhealthy: Vec::new(),
            cpus,
        }
    }

    fn healthy(&self) -> u32 {
        self.cards - self.unhealthy.len() as u32
    }

    /// The Node's metadata and spec, with the device manager's and NFD's labels.
    pub fn node(&self) -> Value {
        let mut labels = json!({
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "feature.node.kubernetes.io/cpu-model.vendor_id": "AMD",
            "feature.node.kubernetes.io/cpu-model.family": "25",
        });
        if let Some(p) = &self.product {
            let pre = "acceleratable.feature.gpustack.ai/";
            let key = format!("{}-{}", p.manufacturer, p.id);
            let l = labels.as_object_mut().expect("an object");
            l.insert("feature.gpustack.ai/acceleratable".into(), json!("true"));
            l.insert(format!("{pre}{}", p.manufacturer), json!("true"));
            l.insert(format!("{pre}{key}"), json!("true"));
            l.insert(
                format!("{pre}{key}.count"),
                json!(self.healthy().to_string()),
            );
            l.insert(
                format!("{pre}{key}.memory"),
                json!(format!("{}Gi", p.memory_mib / 1024)),
            );
            l.insert(
                format!("{pre}{key}.product"),
                json!(p.name.replace(' ', "-")),
            );
            l.insert(format!("{pre}{key}.cores"), json!(p.cores.to_string()));
        }
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": labels,
                "annotations": {"feature.gpustack.ai/cpu-name": "AMD EPYC 7R32"},
            },
            "spec": {},
        })
    }

    /// What the kubelet reports: cores, and the device plugin's pools.
    pub fn node_status(&self) -> Value {
        let mut capacity = json!({"cpu": self.cpus.to_string(), "memory": "512Gi", "pods": "110"});
        if let Some(p) = &self.product {
            let c = capacity.as_object_mut().expect("an object");
            let n = self.healthy();
            if p.partitions.is_empty() {
                c.insert(p.resource.into(), json!(n.to_string()));
                if p.slices > 0 {
                    c.insert(
                        format!("{}.sliced", p.resource),
                        json!((n as i32 * p.slices).to_string()),
                    );
                }
            } else {
                let most = p.partitions.iter().map(|x| x.1).max().unwrap_or(0);
                c.insert(
                    format!("{}.partitioned", p.resource),
                    json!((n as i32 * most).to_string()),
                );
            }
        }
        json!({"status": {"capacity": capacity, "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    /// The node's `Devices`: spec as detected.
    pub fn devices(&self) -> Value {
        let groups = match &self.product {
            None => json!([]),
            Some(p) => {
                let accelerators: Vec<Value> = (0..self.cards)
                    .map(|i| {
                        let mut status = json!({"unhealthy": self.unhealthy.contains(&i)});
                        if !p.partitions.is_empty() {
                            let profiles: Vec<Value> = p
                                .partitions
                                .iter()
                                .map(|(name, count, mib)| json!({"name": name, "count": count, "memoryMib": mib}))
                                .collect();
                            let most = p.partitions.iter().map(|x| x.1).max().unwrap_or(0);
                            status["physicalSliced"] = json!({"profiles": profiles, "count": most});
                        } else if p.slices > 0 {
                            status["logicalSliced"] = json!({"count": p.slices, "coresPercentageOvercommit": false});
                        }
                        json!({
                            "id": format!("{}-{}-{i}", p.manufacturer.to_uppercase(), self.name),
                            "index": i,
                            "status": status,
                        })
                    })
                    .collect();
                json!([{
                    "id": p.id, "manufacturer": p.manufacturer, "name": p.name,
                    "memory": p.memory_mib, "cores": p.cores,
                    "accelerators": accelerators,
                }])
            }
        };
        json!({
            "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices",
            "metadata": {"name": self.name},
            "spec": {"groups": groups},
        })
    }

    /// A `Devices.status` ledger where the first `taken` cards are held whole.
    pub fn ledger(&self, taken: u32) -> Value {
        let Some(p) = &self.product else {
            return json!({"status": {"groups": []}});
        };
        let cards: Vec<Value> = (0..self.cards)
            .map(|i| {
                let held = i < taken;
                json!({
                    "id": format!("{}-{}-{i}", p.manufacturer.to_uppercase(), self.name),
                    "index": i,
                    "mode": if held { 1 } else { 0 },
                    "allocated": if held { 1_600_000 } else { 0 },
                    "remaining": if held { 0 } else { 1_600_000 },
                })
            })
            .collect();
        json!({"status": {"groups": [{"id": p.id, "manufacturer": p.manufacturer, "accelerators": cards}]}})
    }
}

/// NFD's `NodeFeature` kind, as its chart installs it (the fields the agent writes), standing in
/// for NFD itself, which cannot run here: with the kind served the agents write their labels there
/// for NFD's master to put on the Node.
pub const NODE_FEATURE_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: nodefeatures.nfd.k8s-sigs.io
spec:
  group: nfd.k8s-sigs.io
  names:
    kind: NodeFeature
    listKind: NodeFeatureList
    plural: nodefeatures
    singular: nodefeature
  scope: Namespaced
  versions:
    - name: v1alpha1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                features:
                  type: object
                  x-kubernetes-preserve-unknown-fields: true
                labels:
                  type: object
                  additionalProperties:
                    type: string
"#;

/// The `Devices` custom resource (`v1alpha1`), for dynamic clients.
pub fn devices_resource() -> kube::core::ApiResource {
    kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("worker.gpustack.ai", "v1alpha1", "Devices"),
        "devices",
    )
}

/// Writes `m` as the kubelet (its Node and status) and the device manager (its `Devices`)
/// would, each with its own field manager.
pub async fn publish(c: &kube::Client, m: &Machine) -> Result<(), kube::Error> {
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(c.clone());
    let pp = PatchParams::apply("kubelet-stand-in").force();
    nodes.patch(&m.name, &pp, &Patch::Apply(m.node())).await?;
    let mut status = m.node_status();
    status["apiVersion"] = json!("v1");
    status["kind"] = json!("Node");
    nodes
        .patch_status(&m.name, &pp, &Patch::Apply(status))
        .await?;
    let devices: Api<DynamicObject> = Api::all_with(c.clone(), &devices_resource());
    let pp = PatchParams::apply("device-manager-stand-in").force();
    devices
        .patch(&m.name, &pp, &Patch::Apply(m.devices()))
        .await?;
    Ok(())
}
