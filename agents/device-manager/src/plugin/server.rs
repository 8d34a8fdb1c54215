//! The `DevicePlugin` gRPC service of one (manufacturer, mode).
//!
//! `Allocate` holds the node-wide allocation lock around identify → check → reserve, as the
//! reference does: the container is identified through the kubelet's pod-resources API, else
//! as the oldest pending Pod on the node whose container asks for this many of the resource;
//! the grant is checked against the ledger plus the reservations not yet seen in annotations,
//! written to the Pod's `device.gpustack.ai/accelerator.allocated` annotation, and answered
//! with the injection of [`crate::injection`].

use std::{
    collections::{BTreeMap, BTreeSet},
    pin::Pin,
    sync::{Arc, Mutex},
};

use futures::Stream;
use gpustack_api::{
    Manufacturer,
    devices::{AllocationMode, DevicesGroup},
    labels::ACCELERATOR_ALLOCATED,
};
use gpustack_proto::deviceplugin::v1beta1::{
    self as dp, AllocateRequest, AllocateResponse, ContainerAllocateResponse,
    ContainerPreferredAllocationResponse, DevicePluginOptions, Empty, ListAndWatchResponse,
    NumaNode, PreStartContainerRequest, PreStartContainerResponse, PreferredAllocationRequest,
    PreferredAllocationResponse, TopologyInfo, device_plugin_server::DevicePlugin,
};
use kube::api::{Api, ListParams, Patch, PatchParams};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use super::{
    decide::{self, Refusal, SliceAsk},
    partition, register,
    tokens::{self, Token},
};
use crate::{
    injection::{self, Grant, Injection, NodeFacts},
    ledger::{ContainerAllocation, Ledger, PodCharges, parse_annotation, rebuild},
    node_pod::NodePod,
    system_root::SystemRoot,
    vendors::partitions,
};

/// What every plugin reads: the detected spec and the Pods charging it.
#[derive(Clone, Debug, Default)]
pub struct NodeState {
    pub groups: Vec<DevicesGroup>,
    pub pods: Vec<PodCharges>,
    /// The Pods on this node as last watched: the pending-Pod match looks here before it asks
    /// the API server.
    pub objects: Vec<Arc<NodePod>>,
    pub ledger: Ledger,
    pub release_finished: bool,
}

/// State shared by every plugin of the process.
pub struct Shared {
    pub node_name: String,
    pub pods: Api<NodePod>,
    pub state: watch::Receiver<Arc<NodeState>>,
    /// (pod UID, container) → the charge written but not yet seen back in the Pod list.
    pub reservations: Mutex<BTreeMap<(String, String), PodCharges>>,
    pub allocate_lock: tokio::sync::Mutex<()>,
    /// Allocations in flight and the last one's end (the status writer waits for a lull).
    pub activity: Arc<super::activity::Activity>,
    pub pod_resources: register::PodResourcesClient,
    pub node: NodeFacts,
    /// Host directory of per-container work directories.
    pub pods_dir: String,
    pub root: SystemRoot,
    /// The environment the vendor libraries are located with (partitions).
    pub env: crate::host_env::Env,
    pub gates: Gates,
}

/// The device plugin's switches from the environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gates {
    /// `GPUSTACK_DEVICE_PLUGIN_SLICED_ALLOCATE_GATE`: refuse a slice its card has no units or
    /// slot left for (on by default).
    pub sliced_allocate: bool,
    /// `GPUSTACK_DEVICE_PLUGIN_IDENTIFY_BY_KUBELET`: ask the kubelet's pod-resources API which
    /// container a request is for before matching pending Pods (on by default).
    pub identify_by_kubelet: bool,
}

impl Default for Gates {
    fn default() -> Self {
        Self {
            sliced_allocate: true,
            identify_by_kubelet: true,
        }
    }
}

impl Gates {
    /// Reads the switches; anything but `false`/`0` leaves one on.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Self {
        let on = |name: &str| {
            !env(name)
                .map(|v| v.trim().to_ascii_lowercase())
                .is_some_and(|v| v == "false" || v == "0")
        };
        Self {
            sliced_allocate: on("GPUSTACK_DEVICE_PLUGIN_SLICED_ALLOCATE_GATE"),
            identify_by_kubelet: on("GPUSTACK_DEVICE_PLUGIN_IDENTIFY_BY_KUBELET"),
        }
    }
}

impl Shared {
    /// Drops the reservations of a Pod that is gone (its deletion was watched): a Pod deleted
    /// before the next `Allocate` cleaned its reservation up would otherwise charge its card
    /// for the life of the process.
    pub fn forget_pod(&self, uid: &str) {
        self.reservations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(r_uid, _), _| r_uid != uid);
    }

    /// The ledger with the reservations the Pod list does not show yet.
    fn effective(&self, state: &NodeState) -> (Vec<PodCharges>, Ledger) {
        let mut pods = state.pods.clone();
        let mut reservations = self.reservations.lock().unwrap_or_else(|e| e.into_inner());
        reservations.retain(|(uid, ctr), _| {
            // Seen in the annotation now: the reservation has done its job.
            !pods
                .iter()
                .any(|p| &p.uid == uid && p.allocations.contains_key(ctr))
        });
        pods.extend(reservations.values().cloned());
        let ledger = rebuild(
            &gpustack_api::devices::DevicesSpec {
                groups: state.groups.clone(),
            },
            &pods,
            state.release_finished,
        );
        (pods, ledger)
    }
}

/// One plugin: a manufacturer's resource in one mode.
#[derive(Clone)]
pub struct Plugin {
    pub shared: Arc<Shared>,
    pub manufacturer: Manufacturer,
    pub mode: AllocationMode,
    /// The manufacturer's resource base (`nvidia.com/gpu`).
    pub base: String,
    /// The manufacturer's partition kind (`mig`), naming the profile limits of partitioned
    /// containers.
    pub partition_kind: Option<String>,
}

/// The kubelet resource name of `mode` on `base`.
pub fn resource_name(manufacturer: Manufacturer, base: &str, mode: AllocationMode) -> String {
    match mode {
        AllocationMode::Exclusive => base.to_owned(),
        AllocationMode::Visibility => format!("device.gpustack.ai/{manufacturer}.visibility"),
        other => format!("{base}.{}", other.as_str()),
    }
}

impl Plugin {
    pub fn resource_name(&self) -> String {
        resource_name(self.manufacturer, &self.base, self.mode)
    }

    /// The socket file name in the kubelet's directory: `<mfr>.<mode>.sock`.
    pub fn socket_name(&self) -> String {
        format!("{}.{}.sock", self.manufacturer, self.mode.as_str())
    }

    fn tokens(&self, state: &NodeState) -> Vec<Token> {
        tokens::tokens(&state.groups, self.manufacturer, self.mode, &state.ledger)
    }

    /// Finds the Pod and container this request is for; answers too how long the kubelet's
    /// pod-resources call took (a phase of the `allocated` debug line).
    async fn identify(
        &self,
        device_ids: &[String],
    ) -> Result<(NodePod, String, std::time::Duration), Status> {
        let resource = self.resource_name();
        let wanted: BTreeSet<&str> = device_ids.iter().map(String::as_str).collect();
        let asked = std::time::Instant::now();
        let lookup = if self.shared.gates.identify_by_kubelet {
            self.shared.pod_resources.list().await
        } else {
            Ok(Vec::new())
        };
        let kubelet = asked.elapsed();
        match lookup {
            Ok(list) => {
                for pod in list {
                    for ctr in &pod.containers {
                        let holds = ctr.devices.iter().any(|d| {
                            d.resource_name == resource
                                && d.device_ids
                                    .iter()
                                    .map(String::as_str)
                                    .collect::<BTreeSet<_>>()
                                    == wanted
                        });
                        if holds {
                            let found = self.pod(&pod.namespace, &pod.name).await?;
                            return Ok((found, ctr.name.clone(), kubelet));
                        }
                    }
                }
            }
            Err(e) => tracing::debug!("pod-resources lookup failed, matching pending Pods: {e}"),
        }
        let (pod, container) = self.pending_match(&resource, device_ids.len()).await?;
        Ok((pod, container, kubelet))
    }

    /// The Pod the kubelet named: the watched copy (no round trip on the allocation path),
    /// else a read (a Pod created a moment ago may not have reached the watch).
    async fn pod(&self, namespace: &str, name: &str) -> Result<NodePod, Status> {
        let watched = self.shared.state.borrow().objects.iter().find_map(|p| {
            (p.metadata.namespace.as_deref() == Some(namespace)
                && p.metadata.name.as_deref() == Some(name))
            .then(|| NodePod::clone(p))
        });
        if let Some(pod) = watched {
            return Ok(pod);
        }
        let api: Api<NodePod> = Api::namespaced(self.shared.pods.clone().into_client(), namespace);
        api.get(name)
            .await
            .map_err(|e| Status::unavailable(format!("reading Pod {namespace}/{name}: {e}")))
    }

    /// The oldest pending Pod on this node with a container asking for `count` of `resource`
    /// that holds no grant yet: from the watched Pods, else from a fresh list (a Pod created a
    /// moment ago may not have reached the watch).
    async fn pending_match(
        &self,
        resource: &str,
        count: usize,
    ) -> Result<(NodePod, String), Status> {
        let reserved: BTreeSet<(String, String)> = self
            .shared
            .reservations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        let cached = self.shared.state.borrow().objects.clone();
        if let Some(found) =
            pick_pending(cached.iter().map(Arc::as_ref), resource, count, &reserved)
        {
            return Ok(found);
        }
        let list = self
            .shared
            .pods
            .list(
                &ListParams::default().fields(&format!("spec.nodeName={}", self.shared.node_name)),
            )
            .await
            .map_err(|e| {
                Status::unavailable(format!(
                    "listing Pods on node {}: {e}",
                    self.shared.node_name
                ))
            })?;
        pick_pending(list.items.iter(), resource, count, &reserved).ok_or_else(|| {
            Status::failed_precondition(format!(
                "no pending Pod on node {} has a container asking for {count} {resource}",
                self.shared.node_name
            ))
        })
    }

    /// One container's grant: decide, reserve, annotate, inject.
    async fn allocate_one(
        &self,
        device_ids: &[String],
    ) -> Result<ContainerAllocateResponse, Status> {
        let started = std::time::Instant::now();
        let (pod, container, kubelet) = self.identify(device_ids).await?;
        let identified = started.elapsed();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let state = self.shared.state.borrow().clone();
        let (pods, ledger) = self.shared.effective(&state);
        let asking = pod.container(&container);
        let own_env: BTreeSet<String> = asking
            .map(|c| c.env.iter().cloned().collect())
            .unwrap_or_default();
        let work_dir = injection::pod_work_dir(&self.shared.pods_dir, &uid, &container);

        if self.mode == AllocationMode::Visibility {
            let owner = pods
                .iter()
                .find(|p| p.uid == uid)
                .and_then(|p| {
                    p.allocations.values().find(|a| {
                        a.devices.groups.iter().any(|g| g.manufacturer == self.manufacturer)
                    })
                })
                .cloned()
                .ok_or_else(|| {
                    Status::failed_precondition(format!(
                        "Pod {namespace}/{name} holds no {} accelerator for container {container} to see",
                        self.manufacturer
                    ))
                })?;
            let grants = owner_grants(&state.groups, self.manufacturer, &owner);
            return self.render(&grants, None, &work_dir, &own_env);
        }

        let no_limits = BTreeMap::new();
        let limits = asking.map_or(&no_limits, |c| &c.limits);
        if self.mode == AllocationMode::Partitioned {
            let target = Target {
                pod: &pod,
                container: &container,
                work_dir: &work_dir,
                own_env: &own_env,
            };
            return self
                .allocate_partition(target, limits, device_ids, &state, &ledger)
                .await;
        }
        let ask = SliceAsk::from_limits(&self.base, limits);
        let decision = decide::decide_gated(
            &state.groups,
            self.manufacturer,
            &self.base,
            self.mode,
            device_ids,
            &ledger,
            &ask,
            self.shared.gates.sliced_allocate,
        )
        .map_err(|refusal| {
            tracing::info!(pod = %format!("{namespace}/{name}"), container, "refused: {refusal}");
            Status::failed_precondition(refusal.to_string())
        })?;

        // Reserve before writing, so that a concurrent request cannot take the same units.
        let decided = started.elapsed();
        let grants: Vec<Grant<'_>> = decision
            .cards
            .iter()
            .map(|&(gi, ai)| Grant::card(&state.groups[gi], &state.groups[gi].accelerators[ai]))
            .collect();
        // The injection is rendered (work directories, files) while the annotation write is
        // on the wire; the reply goes out only once the grant is written.
        let mut rendered = std::time::Duration::ZERO;
        let (written, reply) = tokio::join!(
            self.reserve_and_annotate(&pod, &container, &decision.allocation),
            async {
                let t = std::time::Instant::now();
                let reply = self.render(&grants, decision.slice, &work_dir, &own_env);
                rendered = t.elapsed();
                reply
            }
        );
        written?;
        tracing::debug!(
            pod = %format!("{namespace}/{name}"),
            container,
            resource = %self.resource_name(),
            kubelet_us = kubelet.as_micros() as u64,
            identify_us = identified.as_micros() as u64,
            decide_us = (decided - identified).as_micros() as u64,
            annotate_us = (started.elapsed() - decided).as_micros() as u64,
            render_us = rendered.as_micros() as u64,
            "allocated"
        );
        reply
    }

    /// A partitioned grant: pick the card and slot, make the partition through the vendor
    /// library, mark it as this container's, reserve, annotate, and name it to the container.
    async fn allocate_partition(
        &self,
        target: Target<'_>,
        limits: &BTreeMap<String, String>,
        device_ids: &[String],
        state: &NodeState,
        ledger: &Ledger,
    ) -> Result<ContainerAllocateResponse, Status> {
        let namespace = target.pod.metadata.namespace.clone().unwrap_or_default();
        let name = target.pod.metadata.name.clone().unwrap_or_default();
        let refuse = |refusal: Refusal| {
            tracing::info!(pod = %format!("{namespace}/{name}"), container = target.container, "refused: {refusal}");
            Status::failed_precondition(refusal.to_string())
        };
        let kind = self.partition_kind.as_deref().unwrap_or_default();
        let profile = partition::asked_profile(&self.base, kind, limits).map_err(refuse)?;
        let pick =
            partition::pick(&state.groups, self.manufacturer, &profile, ledger).map_err(refuse)?;
        let (gi, ai) = pick.card;
        let card = &state.groups[gi].accelerators[ai];
        let (root, env) = (self.shared.root.clone(), self.shared.env.clone());
        let (manufacturer, accelerator) = (self.manufacturer, card.id.clone());
        let (profile_name, slot) = (pick.profile.name.clone(), pick.slot);
        let made = tokio::task::spawn_blocking(move || {
            let lookup = |k: &str| env(k);
            partitions::create(
                &root,
                &lookup,
                &partitions::Request {
                    manufacturer,
                    accelerator: &accelerator,
                    profile: &profile_name,
                    start: slot.start,
                    size: slot.length,
                },
            )
        })
        .await
        .map_err(|e| Status::internal(format!("making the partition: {e}")))?
        .map_err(|e| refuse(Refusal::PartitionFailed(e.to_string())))?;
        tracing::info!(pod = %format!("{namespace}/{name}"), container = target.container, partition = %made.id, card = %card.id, profile = %pick.profile.name, "made a partition");
        let marker = partition::Marker {
            manufacturer: self.manufacturer,
            accelerator: card.id.clone(),
            profile: pick.profile.name.clone(),
            gpu_instance: made.gpu_instance,
            compute_instance: made.compute_instance,
            id: made.id.clone(),
        };
        let undo = |why: Status| {
            let destroyed = partitions::destroy_blocking(
                self.shared.root.clone(),
                self.shared.env.clone(),
                marker.manufacturer,
                marker.accelerator.clone(),
                (marker.gpu_instance, marker.compute_instance),
            );
            let dir = self.shared.root.path(target.work_dir);
            async move {
                let _ = destroyed.await;
                let _ = std::fs::remove_file(dir.join(partition::MARKER_FILE));
                why
            }
        };
        if let Err(e) = write_marker(&self.shared.root, target.work_dir, &marker) {
            return Err(undo(e).await);
        }
        let allocation = partition::allocation(
            &state.groups,
            self.manufacturer,
            &pick,
            &made.id,
            ledger,
            device_ids,
        );
        if let Err(e) = self
            .reserve_and_annotate(target.pod, target.container, &allocation)
            .await
        {
            return Err(undo(e).await);
        }
        let grant = Grant {
            partition_id: Some(&made.id),
            ..Grant::card(&state.groups[gi], card)
        };
        self.render(&[grant], None, target.work_dir, target.own_env)
    }

    /// Reserves `allocation` for (pod, container) and writes it to the Pod's annotation; the
    /// reservation is dropped again when the write fails.
    async fn reserve_and_annotate(
        &self,
        pod: &NodePod,
        container: &str,
        allocation: &ContainerAllocation,
    ) -> Result<(), Status> {
        let key = (
            pod.metadata.uid.clone().unwrap_or_default(),
            container.to_owned(),
        );
        let mut charge = PodCharges {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: key.0.clone(),
            finished: false,
            allocations: BTreeMap::new(),
        };
        charge
            .allocations
            .insert(container.to_owned(), allocation.clone());
        self.shared
            .reservations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), charge);
        if let Err(e) = self.annotate(pod, container, allocation).await {
            self.shared
                .reservations
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
            return Err(e);
        }
        Ok(())
    }

    async fn annotate(
        &self,
        pod: &NodePod,
        container: &str,
        grant: &ContainerAllocation,
    ) -> Result<(), Status> {
        let mut all = annotation(pod);
        // The Pod may be a cached copy: grants this process wrote for its other containers
        // are kept from the reservations.
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        for ((r_uid, _), charge) in self
            .shared
            .reservations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            if *r_uid == uid {
                for (ctr, a) in &charge.allocations {
                    all.entry(ctr.clone()).or_insert_with(|| a.clone());
                }
            }
        }
        all.insert(container.to_owned(), grant.clone());
        let text = serde_json::to_string(&all).map_err(|e| Status::internal(e.to_string()))?;
        let patch = serde_json::json!({"metadata": {"annotations": {ACCELERATOR_ALLOCATED: text}}});
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let api: Api<NodePod> = Api::namespaced(self.shared.pods.clone().into_client(), ns);
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Status::unavailable(format!("annotating Pod {ns}/{name}: {e}")))?;
        Ok(())
    }

    fn render(
        &self,
        grants: &[Grant<'_>],
        slice: Option<injection::SliceLimits>,
        work_dir: &str,
        own_env: &BTreeSet<String>,
    ) -> Result<ContainerAllocateResponse, Status> {
        let request = injection::Request {
            manufacturer: self.manufacturer,
            mode: self.mode,
            grants: grants.to_vec(),
            slice,
            pod_work_dir: work_dir,
            own_env,
        };
        let out = injection::inject(&request, &self.shared.node)
            .map_err(|e| Status::failed_precondition(e.to_string()))?;
        write_files(&self.shared.root, &out)?;
        Ok(to_response(out))
    }
}

/// The container an allocation is for.
struct Target<'a> {
    pod: &'a NodePod,
    container: &'a str,
    work_dir: &'a str,
    own_env: &'a BTreeSet<String>,
}

/// Writes the partition's ownership marker into the container's work directory.
fn write_marker(
    root: &SystemRoot,
    work_dir: &str,
    marker: &partition::Marker,
) -> Result<(), Status> {
    let dir = root.path(work_dir);
    let fail =
        |e: String| Status::internal(format!("writing the partition marker in {work_dir}: {e}"));
    std::fs::create_dir_all(&dir).map_err(|e| fail(e.to_string()))?;
    let text = serde_json::to_vec_pretty(marker).map_err(|e| fail(e.to_string()))?;
    std::fs::write(dir.join(partition::MARKER_FILE), text).map_err(|e| fail(e.to_string()))
}

/// The oldest pending Pod among `pods` with a container asking for `count` of `resource`,
/// holding no grant and no reservation.
fn pick_pending<'a>(
    pods: impl Iterator<Item = &'a NodePod>,
    resource: &str,
    count: usize,
    reserved: &BTreeSet<(String, String)>,
) -> Option<(NodePod, String)> {
    let mut candidates: Vec<(&NodePod, String)> = Vec::new();
    for pod in pods {
        let phase = pod.phase().unwrap_or("Pending");
        if phase != "Pending" || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        // Parsed only for a Pod that asks for the resource at all.
        let mut granted = None;
        for ctr in pod.containers() {
            let asks = ctr
                .limits
                .get(resource)
                .and_then(|q| q.parse::<usize>().ok());
            if asks == Some(count)
                && !granted
                    .get_or_insert_with(|| annotation(pod))
                    .contains_key(&ctr.name)
                && !reserved.contains(&(uid.clone(), ctr.name.clone()))
            {
                candidates.push((pod, ctr.name.clone()));
            }
        }
    }
    candidates.sort_by(|a, b| {
        let key = |p: &NodePod| {
            (
                p.metadata.creation_timestamp.clone().map(|t| t.0),
                p.metadata.name.clone(),
            )
        };
        key(a.0).cmp(&key(b.0))
    });
    candidates.into_iter().next().map(|(p, c)| (p.clone(), c))
}

/// The cards an owner container's grant names, as grants for a sidecar to see: whole cards,
/// or the partition itself where the owner holds one.
fn owner_grants<'a>(
    groups: &'a [DevicesGroup],
    m: Manufacturer,
    owner: &'a ContainerAllocation,
) -> Vec<Grant<'a>> {
    let held: BTreeMap<&str, &str> = owner
        .devices
        .groups
        .iter()
        .filter(|g| g.manufacturer == m)
        .flat_map(|g| {
            g.accelerators
                .iter()
                .map(|a| (a.id.as_str(), a.allocated_physical_id.as_str()))
        })
        .collect();
    groups
        .iter()
        .filter(|g| g.manufacturer == m)
        .flat_map(|g| g.accelerators.iter().map(move |a| (g, a)))
        .filter_map(|(g, a)| {
            let partition = held.get(a.id.as_str())?;
            Some(Grant {
                partition_id: (!partition.is_empty()).then_some(*partition),
                ..Grant::card(g, a)
            })
        })
        .collect()
}

/// The Pod's current allocation annotation (empty when absent or unreadable).
pub fn annotation(pod: &NodePod) -> BTreeMap<String, ContainerAllocation> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ACCELERATOR_ALLOCATED))
        .and_then(|t| parse_annotation(t).ok())
        .unwrap_or_default()
}

/// Creates the work directories and writes the rendered files on the host.
fn write_files(root: &SystemRoot, out: &Injection) -> Result<(), Status> {
    let fail = |what: &str, e: std::io::Error| Status::internal(format!("{what}: {e}"));
    for dir in &out.work_dirs {
        std::fs::create_dir_all(root.path(dir)).map_err(|e| fail(dir, e))?;
    }
    for file in &out.files {
        let path = root.path(&file.host_path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| fail(&file.host_path, e))?;
        }
        std::fs::write(&path, &file.contents).map_err(|e| fail(&file.host_path, e))?;
    }
    Ok(())
}

fn to_response(out: Injection) -> ContainerAllocateResponse {
    ContainerAllocateResponse {
        envs: out.envs.into_iter().collect(),
        mounts: out
            .mounts
            .into_iter()
            .map(|m| dp::Mount {
                container_path: m.container_path,
                host_path: m.host_path,
                read_only: m.read_only,
            })
            .collect(),
        devices: out
            .devices
            .into_iter()
            .map(|d| dp::DeviceSpec {
                container_path: d.container_path,
                host_path: d.host_path,
                permissions: d.permissions,
            })
            .collect(),
        annotations: out.annotations.into_iter().collect(),
        cdi_devices: Vec::new(),
    }
}

fn to_devices(tokens: &[Token]) -> Vec<dp::Device> {
    tokens
        .iter()
        .map(|t| dp::Device {
            id: t.id.clone(),
            health: if t.healthy {
                dp::HEALTHY
            } else {
                dp::UNHEALTHY
            }
            .to_owned(),
            topology: t.numa.map(|n| TopologyInfo {
                nodes: vec![NumaNode { id: n }],
            }),
        })
        .collect()
}

type DeviceStream = Pin<Box<dyn Stream<Item = Result<ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for Plugin {
    async fn get_device_plugin_options(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<DevicePluginOptions>, Status> {
        Ok(Response::new(DevicePluginOptions {
            pre_start_required: false,
            get_preferred_allocation_available: true,
        }))
    }

    type ListAndWatchStream = DeviceStream;

    async fn list_and_watch(&self, _: Request<Empty>) -> Result<Response<DeviceStream>, Status> {
        let plugin = self.clone();
        let rx = self.shared.state.clone();
        // Sends the list now and again whenever it changes (health, held elsewhere, cards).
        let stream = futures::stream::unfold(
            (rx, None::<Vec<Token>>, true),
            move |(mut rx, last, first)| {
                let plugin = plugin.clone();
                async move {
                    loop {
                        if !first || last.is_some() {
                            rx.changed().await.ok()?;
                        }
                        let state = rx.borrow_and_update().clone();
                        let now = plugin.tokens(&state);
                        if last.as_ref() != Some(&now) {
                            if let Some(prev) = &last {
                                for t in now.iter().filter(|t| !t.healthy) {
                                    if prev.iter().any(|p| p.id == t.id && p.healthy) {
                                        tracing::info!(resource = %plugin.resource_name(), device = %t.id, "device turned unhealthy");
                                    }
                                }
                            }
                            let reply = ListAndWatchResponse {
                                devices: to_devices(&now),
                            };
                            return Some((Ok(reply), (rx, Some(now), false)));
                        }
                    }
                }
            },
        );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_preferred_allocation(
        &self,
        request: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        let state = self.shared.state.borrow().clone();
        let tokens = self.tokens(&state);
        let replies = request
            .into_inner()
            .container_requests
            .into_iter()
            .map(|req| ContainerPreferredAllocationResponse {
                device_i_ds: preferred(
                    &tokens,
                    &state.ledger,
                    self.manufacturer,
                    self.mode,
                    &req.available_device_i_ds,
                    &req.must_include_device_i_ds,
                    usize::try_from(req.allocation_size).unwrap_or(0),
                ),
            })
            .collect();
        Ok(Response::new(PreferredAllocationResponse {
            container_responses: replies,
        }))
    }

    async fn allocate(
        &self,
        request: Request<AllocateRequest>,
    ) -> Result<Response<AllocateResponse>, Status> {
        let _busy = self.shared.activity.begin();
        let _held = self.shared.allocate_lock.lock().await;
        let mut replies = Vec::new();
        for req in request.into_inner().container_requests {
            replies.push(self.allocate_one(&req.devices_ids).await?);
        }
        Ok(Response::new(AllocateResponse {
            container_responses: replies,
        }))
    }

    async fn pre_start_container(
        &self,
        _: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        Ok(Response::new(PreStartContainerResponse {}))
    }
}

/// The advisory pick: must-include first, then healthy available tokens in spec order; shared
/// takes distinct cards; sliced prefers the most occupied card that still has units.
pub fn preferred(
    tokens: &[Token],
    ledger: &Ledger,
    manufacturer: Manufacturer,
    mode: AllocationMode,
    available: &[String],
    must: &[String],
    size: usize,
) -> Vec<String> {
    if mode == AllocationMode::Visibility {
        return Vec::new();
    }
    let available: BTreeSet<&str> = available.iter().map(String::as_str).collect();
    let mut picked: Vec<String> = must.to_vec();
    let mut cards: BTreeSet<String> = picked
        .iter()
        .filter_map(|id| tokens::parse(id).map(|t| t.accelerator.to_owned()))
        .collect();
    let mut order: Vec<&Token> = tokens
        .iter()
        .filter(|t| t.healthy && available.contains(t.id.as_str()))
        .collect();
    if mode == AllocationMode::Sliced {
        let remaining = |t: &Token| {
            t.accelerator
                .as_deref()
                .and_then(|a| ledger.accelerator(manufacturer, a))
                .map_or(gpustack_api::devices::UNITS_PER_ACCELERATOR, |e| {
                    e.remaining
                })
        };
        order.sort_by_key(|t| remaining(t));
        order.retain(|t| remaining(t) > 0);
    }
    for t in order {
        if picked.len() >= size {
            break;
        }
        if picked.contains(&t.id) {
            continue;
        }
        let card = t.accelerator.clone().unwrap_or_default();
        if mode != AllocationMode::Partitioned && cards.contains(&card) {
            continue;
        }
        cards.insert(card);
        picked.push(t.id.clone());
    }
    picked
}

#[cfg(test)]
mod tests {
    use gpustack_api::devices::{AcceleratorAllocation, DevicesStatus, DevicesStatusGroup};

    #[test]
    fn a_sidecar_of_a_partition_owner_sees_the_partition() {
        use gpustack_api::devices::Accelerator;
        let groups = vec![DevicesGroup {
            accelerators: vec![Accelerator {
                id: "GPU-a".into(),
                ..Accelerator::default()
            }],
            ..DevicesGroup::new(Manufacturer::Nvidia, "a100", "A100", 81920)
        }];
        let owner = ContainerAllocation {
            devices: DevicesStatus {
                groups: vec![DevicesStatusGroup {
                    id: "a100".into(),
                    manufacturer: Manufacturer::Nvidia,
                    accelerators: vec![AcceleratorAllocation {
                        id: "GPU-a".into(),
                        mode: AllocationMode::Partitioned,
                        allocated_physical_id: "MIG-1".into(),
                        ..AcceleratorAllocation::default()
                    }],
                }],
            },
            device_ids: vec![],
        };
        let grants = owner_grants(&groups, Manufacturer::Nvidia, &owner);
        let own = BTreeSet::new();
        let out = injection::inject(
            &injection::Request {
                manufacturer: Manufacturer::Nvidia,
                mode: AllocationMode::Visibility,
                grants,
                slice: None,
                pod_work_dir: "/w",
                own_env: &own,
            },
            &NodeFacts::default(),
        )
        .unwrap();
        assert_eq!(out.envs["NVIDIA_VISIBLE_DEVICES"], "MIG-1");
    }

    #[test]
    fn gates_default_on_and_turn_off_only_on_false() {
        assert_eq!(Gates::from_env(|_| None), Gates::default());
        let off = Gates::from_env(|k| {
            (k == "GPUSTACK_DEVICE_PLUGIN_IDENTIFY_BY_KUBELET").then(|| "False".to_owned())
        });
        assert!(!off.identify_by_kubelet && off.sliced_allocate);
        let kept = Gates::from_env(|_| Some("yes".to_owned()));
        assert_eq!(kept, Gates::default());
    }

    use super::*;

    fn tok(card: &str, n: u32, healthy: bool) -> Token {
        Token {
            id: tokens::device_id("g", card, u64::from(n)),
            accelerator: Some(card.to_owned()),
            healthy,
            numa: Some(0),
        }
    }

    #[test]
    fn preferred_picks() {
        let all = vec![
            tok("a", 0, true),
            tok("a", 1, true),
            tok("b", 0, true),
            tok("b", 1, true),
            tok("c", 0, false),
        ];
        let ids: Vec<String> = all.iter().map(|t| t.id.clone()).collect();
        // Shared: distinct cards, unhealthy skipped, must-include kept.
        let got = preferred(
            &all,
            &Ledger::default(),
            Manufacturer::Nvidia,
            AllocationMode::Shared,
            &ids,
            &[],
            3,
        );
        assert_eq!(got, ["g:a:0000", "g:b:0000"]);
        let got = preferred(
            &all,
            &Ledger::default(),
            Manufacturer::Nvidia,
            AllocationMode::Shared,
            &ids,
            &["g:b:0001".into()],
            2,
        );
        assert_eq!(got, ["g:b:0001", "g:a:0000"]);
        // Sliced: the most occupied card that still has units.
        let ledger = Ledger {
            status: DevicesStatus {
                groups: vec![DevicesStatusGroup {
                    id: "g".into(),
                    manufacturer: Manufacturer::Nvidia,
                    accelerators: vec![
                        AcceleratorAllocation {
                            id: "a".into(),
                            mode: AllocationMode::Sliced,
                            remaining: 1_000_000,
                            ..AcceleratorAllocation::default()
                        },
                        AcceleratorAllocation {
                            id: "b".into(),
                            mode: AllocationMode::Sliced,
                            remaining: 200_000,
                            ..AcceleratorAllocation::default()
                        },
                    ],
                }],
            },
            ..Ledger::default()
        };
        let got = preferred(
            &all,
            &ledger,
            Manufacturer::Nvidia,
            AllocationMode::Sliced,
            &ids,
            &[],
            1,
        );
        assert_eq!(got, ["g:b:0000"]);
        assert!(
            preferred(
                &all,
                &ledger,
                Manufacturer::Nvidia,
                AllocationMode::Visibility,
                &ids,
                &[],
                1
            )
            .is_empty()
        );
    }
}
