//! The worker's controllers end to end: the real `worker` binary against an embedded cluster,
//! fed Nodes and `Devices` shaped like real GPU machines (tests/src/inventory.rs), building the
//! Kueue chain and keeping it true as nodes, cards, settings and namespaces change.

use std::{collections::BTreeSet, time::Duration};

use gpustack_api::{
    instance_type::InstanceType,
    kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Topology, Workload},
};
use gpustack_tests::{
    embedded::GatewayProcess,
    inventory::{A100_MIG, H100, Machine, RX7800XT, devices_resource, publish},
    worker::{WorkerProcess, eventually},
};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Namespace, Node, Secret},
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);
const M: u64 = 1_600_000;

/// FNV-1a 64, written here independently of the code under test.
fn fnv1a(text: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

fn local_queue(cq: &str) -> String {
    format!("gpustack-fnv64-{}", fnv1a(cq))
}

fn hostname_profile() -> String {
    format!("fnv64-{}", fnv1a("kubernetes.io/hostname"))
}

async fn client(gw: &GatewayProcess) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(gw.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// Writes the machine as the kubelet and the device manager would.
async fn put(c: &kube::Client, m: &Machine) {
    publish(c, m).await.unwrap();
}

async fn set_ledger(c: &kube::Client, m: &Machine, taken: u32) {
    let devices: Api<kube::api::DynamicObject> = Api::all_with(c.clone(), &devices_resource());
    devices
        .patch_status(
            &m.name,
            &PatchParams::default(),
            &Patch::Merge(m.ledger(taken)),
        )
        .await
        .unwrap();
}

async fn remove(c: &kube::Client, name: &str) {
    Api::<Node>::all(c.clone())
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    let devices: Api<kube::api::DynamicObject> = Api::all_with(c.clone(), &devices_resource());
    devices
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

async fn names<K>(api: &Api<K>) -> BTreeSet<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .map(|l| l.items.iter().map(|o| o.name_any()).collect())
        .unwrap_or_default()
}

fn quota(cq: &ClusterQueue) -> Vec<(String, String)> {
    cq.spec
        .resource_groups
        .iter()
        .flat_map(|g| g.flavors.iter())
        .flat_map(|f| {
            f.resources
                .iter()
                .map(move |r| (f.name.clone(), r.nominal_quota.0.clone()))
        })
        .collect()
}

const NVIDIA_IT: &str = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64";
const CPU_IT: &str = "gpustack--generic-linux-amd64";

fn h100_flavor(per_node: u32) -> String {
    format!(
        "gpustack--amd-epyc-7r32--nvidia-h100-80gb-hbm3-linux-amd64-{per_node}d-{}",
        hostname_profile()
    )
}

fn cpu_flavor(cores: u32) -> String {
    format!(
        "gpustack--amd-epyc-7r32-linux-amd64-{cores}c-{}",
        hostname_profile()
    )
}

/// The queue's flavors and quotas, once they equal `want`.
async fn queue_is(
    w: &WorkerProcess,
    cqs: &Api<ClusterQueue>,
    name: &str,
    want: &[(String, u64)],
) -> ClusterQueue {
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(f, q)| (f.clone(), q.to_string()))
        .collect();
    eventually(
        &format!("clusterqueue {name} quota {want:?}"),
        w,
        || async {
            let cq = cqs.get(name).await.map_err(|e| e.to_string())?;
            (quota(&cq) == want)
                .then_some(cq.clone())
                .ok_or_else(|| format!("{:?} ({:?})", quota(&cq), cq.spec.stop_policy))
        },
    )
    .await
}

async fn status_of(
    w: &WorkerProcess,
    its: &Api<InstanceType>,
    name: &str,
    check: impl Fn(&InstanceType) -> bool,
) -> InstanceType {
    eventually(&format!("instancetype {name} status"), w, || async {
        let it = its.get(name).await.map_err(|e| e.to_string())?;
        check(&it)
            .then_some(it.clone())
            .ok_or_else(|| format!("{:?}", it.status))
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_chain_follows_nodes_cards_settings_and_namespaces() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    let w = WorkerProcess::start(&gw, &tmp.path().join("worker"), &["--disable-auths"], &[]);
    let c = client(&gw).await;
    let flavors: Api<ResourceFlavor> = Api::all(c.clone());
    let its: Api<InstanceType> = Api::all(c.clone());
    let cqs: Api<ClusterQueue> = Api::all(c.clone());
    let nodes: Api<Node> = Api::all(c.clone());

    // First node joins: onboarded, labelled, its capacity profiled, one pool each for the
    // cards and the CPUs.
    let mut a = Machine::gpu("gpu-a", H100, 8);
    put(&c, &a).await;
    let node = eventually("gpu-a onboarded", &w, || async {
        let n = nodes.get("gpu-a").await.map_err(|e| e.to_string())?;
        let cap = n
            .status
            .as_ref()
            .and_then(|s| s.capacity.clone())
            .unwrap_or_default();
        let ok = n.labels().get("gpustack.ai/managed").map(String::as_str) == Some("true")
            && cap.contains_key("nvidia.com/gpu.sliced.units");
        ok.then_some(n.clone())
            .ok_or_else(|| format!("{:?} {:?}", n.labels(), cap.keys()))
    })
    .await;
    let labels = node.labels();
    assert_eq!(labels["general.feature.gpustack.ai/amd"], "true");
    assert_eq!(labels["general.feature.gpustack.ai/amd-epyc-7r32"], "true");
    assert_eq!(
        labels["general.feature.gpustack.ai/amd-epyc-7r32.count"],
        "96"
    );
    assert_eq!(labels["topology.gpustack.ai/profile"], hostname_profile());
    assert_eq!(
        labels["sliced-max-free-units.fit.gpustack.ai/nvidia-h100-80gb-hbm3"],
        M.to_string()
    );
    assert_eq!(
        labels["shared-free-cards.fit.gpustack.ai/nvidia-h100-80gb-hbm3"],
        "8"
    );
    let cap = node.status.unwrap().capacity.unwrap();
    assert_eq!(cap["nvidia.com/gpu.sliced.units"].0, (8 * M).to_string());
    assert_eq!(cap["nvidia.com/gpu.sliced.memory-percentage"].0, "800");
    assert_eq!(
        cap["nvidia.com/gpu.sliced.memory-mib"].0,
        (8 * 81920).to_string()
    );
    assert_eq!(cap["nvidia.com/gpu.sliced.cores-percentage"].0, "800");

    queue_is(&w, &cqs, NVIDIA_IT, &[(h100_flavor(8), 8 * M)]).await;
    queue_is(&w, &cqs, CPU_IT, &[(cpu_flavor(96), 96)]).await;
    assert_eq!(
        names(&flavors).await,
        BTreeSet::from([h100_flavor(8), cpu_flavor(96)])
    );
    let rf = flavors.get(&h100_flavor(8)).await.unwrap();
    assert_eq!(
        rf.labels()["acceleratable.feature.gpustack.ai/nvidia-h100-80gb-hbm3.capacity"],
        "8"
    );
    assert_eq!(
        rf.spec.node_labels["acceleratable.feature.gpustack.ai/nvidia-h100-80gb-hbm3.count"],
        "8"
    );
    assert_eq!(
        rf.spec.topology_name.as_deref(),
        Some(format!("gpustack-{}", hostname_profile()).as_str())
    );
    assert_eq!(
        rf.annotations()["note.gpustack.ai/product"],
        "NVIDIA-H100-80GB-HBM3"
    );
    let topologies: Api<Topology> = Api::all(c.clone());
    assert!(
        names(&topologies)
            .await
            .contains(&format!("gpustack-{}", hostname_profile()))
    );
    let it = status_of(&w, &its, NVIDIA_IT, |it| {
        it.status
            .as_ref()
            .and_then(|s| s.accelerator.as_ref())
            .is_some_and(|v| v.capacity == 8)
    })
    .await;
    let st = it.status.unwrap();
    assert_eq!(
        st.entrance.as_deref(),
        Some(local_queue(NVIDIA_IT).as_str())
    );
    assert_eq!(st.phase.as_deref(), Some("Active"));
    let ex = st.accelerator.unwrap();
    assert_eq!((ex.once_max_request, ex.remaining, ex.capacity), (8, 8, 8));
    let sl = st.accelerator_sliced.unwrap();
    assert_eq!(
        (sl.once_max_request, sl.remaining, sl.capacity),
        (100, 800, 800)
    );
    assert_eq!(st.accelerator_shared.unwrap().capacity, 80);
    assert_eq!(st.detail.unwrap().memory.as_deref(), Some("80Gi"));
    assert_eq!(
        it.metadata.labels.unwrap()["schedule.gpustack.ai/queue-entrance"],
        local_queue(NVIDIA_IT)
    );
    assert!(
        it.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"gpustack.ai/controlled".to_owned())
    );
    let cq = cqs.get(NVIDIA_IT).await.unwrap();
    let checks: Vec<String> = cq
        .spec
        .admission_checks_strategy
        .unwrap()
        .admission_checks
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(
        checks,
        ["gpustack-node-devices", "gpustack-model-deployment-joint"]
    );
    assert_eq!(cq.spec.stop_policy.as_deref(), Some("None"));
    assert_eq!(
        cq.spec.resource_groups[0].covered_resources,
        ["credits.gpustack.ai/nvidia"]
    );
    let lqs: Api<LocalQueue> = Api::namespaced(c.clone(), "default");
    let lq = eventually("the default namespace's local queues", &w, || async {
        lqs.get(&local_queue(NVIDIA_IT))
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(lq.spec.cluster_queue, NVIDIA_IT);
    assert_eq!(lq.metadata.owner_references.unwrap()[0].name, NVIDIA_IT);

    // A second identical node: one flavor, twice the quota.
    let b = Machine::gpu("gpu-b", H100, 8);
    put(&c, &b).await;
    queue_is(&w, &cqs, NVIDIA_IT, &[(h100_flavor(8), 16 * M)]).await;

    // A card breaks: the node counts 7 (in its own flavor), the pool says why.
    let mut broken = b.clone();
    broken.unhealthy = vec![7];
    put(&c, &broken).await;
    queue_is(
        &w,
        &cqs,
        NVIDIA_IT,
        &[(h100_flavor(7), 7 * M), (h100_flavor(8), 8 * M)],
    )
    .await;
    let it = status_of(&w, &its, NVIDIA_IT, |it| {
        it.status
            .as_ref()
            .and_then(|s| s.accelerator.as_ref())
            .is_some_and(|v| v.capacity == 15)
    })
    .await;
    let msg = it.status.unwrap().phase_message.unwrap_or_default();
    assert!(msg.contains("unhealthy") && msg.contains("gpu-b"), "{msg}");
    // ...and recovers.
    put(&c, &b).await;
    queue_is(&w, &cqs, NVIDIA_IT, &[(h100_flavor(8), 16 * M)]).await;
    eventually("the 7-card flavor retired", &w, || async {
        let n = names(&flavors).await;
        (!n.contains(&h100_flavor(7)))
            .then_some(())
            .ok_or_else(|| format!("{n:?}"))
    })
    .await;

    // Cordoned: its quota leaves, the reason shows; uncordoned: it returns.
    cordon(&nodes, "gpu-b", true).await;
    queue_is(&w, &cqs, NVIDIA_IT, &[(h100_flavor(8), 8 * M)]).await;
    let it = status_of(&w, &its, NVIDIA_IT, |it| {
        it.status
            .as_ref()
            .and_then(|s| s.phase_message.as_ref())
            .is_some_and(|m| m.contains("cordoned"))
    })
    .await;
    assert_eq!(it.status.unwrap().accelerator.unwrap().capacity, 8);
    cordon(&nodes, "gpu-b", false).await;
    queue_is(&w, &cqs, NVIDIA_IT, &[(h100_flavor(8), 16 * M)]).await;

    // The hardware kinds, computed from the flavors and served through the worker's API.
    let kinds = w.kubectl_ok(&["get", "instancetypeflavors", "-o", "name"]);
    assert_eq!(
        kinds.lines().collect::<Vec<_>>(),
        [
            "instancetypeflavor.worker.gpustack.ai/gpustack--generic",
            "instancetypeflavor.worker.gpustack.ai/gpustack--nvidia-h100-80gb-hbm3"
        ]
    );
    let h100 = w.kubectl_ok(&[
        "get",
        "instypeflavor",
        "gpustack--nvidia-h100-80gb-hbm3",
        "-o",
        "json",
    ]);
    let h100: serde_json::Value = serde_json::from_str(&h100).unwrap();
    assert_eq!(h100["status"]["capacity"], 16);
    assert_eq!(h100["spec"]["product"], "NVIDIA-H100-80GB-HBM3");
    let (mut watching, lines) = watch_lines(&w, "instancetypeflavors");
    expect_line(&lines, "ADDED", "gpustack--generic");

    // A different product joins: its own pool and queue, metered in AMD credits.
    let amd = Machine::gpu("amd-a", RX7800XT, 2);
    put(&c, &amd).await;
    let amd_it = "gpustack--amd-radeon-rx-7800-xt-linux-amd64";
    let amd_flavor = format!(
        "gpustack--amd-epyc-7r32--amd-radeon-rx-7800-xt-linux-amd64-2d-{}",
        hostname_profile()
    );
    let cq = queue_is(&w, &cqs, amd_it, &[(amd_flavor, 2 * M)]).await;
    assert_eq!(
        cq.spec.resource_groups[0].covered_resources,
        ["credits.gpustack.ai/amd"]
    );
    expect_line(&lines, "ADDED", "gpustack--amd-radeon-rx-7800-xt");

    // MIG on: partitioned capacity keys and profiles.
    let mig = Machine::gpu("mig-a", A100_MIG, 2);
    put(&c, &mig).await;
    let node = eventually("mig-a partition capacity", &w, || async {
        let n = nodes.get("mig-a").await.map_err(|e| e.to_string())?;
        let cap = n
            .status
            .as_ref()
            .and_then(|s| s.capacity.clone())
            .unwrap_or_default();
        cap.contains_key("nvidia.com/gpu.partitioned.units")
            .then_some(cap)
            .ok_or_else(|| "no keys yet".to_owned())
    })
    .await;
    assert_eq!(
        node["nvidia.com/gpu.partitioned.units"].0,
        (2 * M).to_string()
    );
    assert_eq!(node["nvidia.com/gpu.partitioned.mig-1g.5gb"].0, "14");
    assert_eq!(node["nvidia.com/gpu.partitioned.mig-3g.20gb"].0, "4");
    let mig_it = "gpustack--nvidia-a100-sxm4-40gb-linux-amd64";
    let it = status_of(&w, &its, mig_it, |it| {
        it.status
            .as_ref()
            .and_then(|s| s.accelerator_partitioned.as_ref())
            .is_some()
    })
    .await;
    let st = it.status.unwrap();
    assert_eq!(st.accelerator_partitioned.unwrap().capacity, 14);
    assert_eq!(st.remaining_profiles["1g.5gb"], 14);
    assert!(
        st.accelerator.is_none(),
        "a partitioned card counts in one view only"
    );

    // A deleted derived InstanceType is authored again; an admin's own is kept and queued.
    let uid = its.get(amd_it).await.unwrap().uid();
    its.delete(amd_it, &DeleteParams::default()).await.unwrap();
    eventually("the amd instance type re-authored", &w, || async {
        let it = its.get(amd_it).await.map_err(|e| e.to_string())?;
        (it.uid() != uid && it.metadata.deletion_timestamp.is_none())
            .then_some(())
            .ok_or_else(|| "same object".to_owned())
    })
    .await;
    let admin: InstanceType = serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType",
        "metadata": {"name": "team-h100"},
        "spec": {"displayName": "Team H100", "acceleratable": true, "acceleratorGroup": "nvidia-h100-80gb-hbm3",
                 "generalGroup": "generic", "os": "linux", "arch": "amd64",
                 "unitResources": {"cpu": "8", "ram": "64Gi"}, "localStorage": "200Gi"},
    }))
    .unwrap();
    its.create(&PostParams::default(), &admin).await.unwrap();
    queue_is(&w, &cqs, "team-h100", &[(h100_flavor(8), 16 * M)]).await;
    assert_eq!(
        its.get("team-h100")
            .await
            .unwrap()
            .spec
            .display_name
            .as_deref(),
        Some("Team H100")
    );

    // A namespace gets a LocalQueue per queue, and loses them with it.
    let namespaces: Api<Namespace> = Api::all(c.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let team_lqs: Api<LocalQueue> = Api::namespaced(c.clone(), "team-a");
    let want: BTreeSet<String> = names(&cqs).await.iter().map(|q| local_queue(q)).collect();
    eventually("team-a's local queues", &w, || async {
        let have = names(&team_lqs).await;
        (have == want)
            .then_some(())
            .ok_or_else(|| format!("{have:?} want {want:?}"))
    })
    .await;
    let system_lqs: Api<LocalQueue> = Api::namespaced(c.clone(), "gpustack-system");
    assert!(
        names(&system_lqs).await.is_empty(),
        "the system namespace gets no LocalQueue"
    );
    namespaces
        .delete("team-a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("team-a's local queues gone", &w, || async {
        let have = names(&team_lqs).await;
        have.is_empty()
            .then_some(())
            .ok_or_else(|| format!("{have:?}"))
    })
    .await;

    // Settings take effect without a restart: pools stop mixing, so GPU nodes leave the CPU
    // pool and only CPU-only nodes feed it.
    let cpu = Machine::cpu_only("cpu-a", 32);
    put(&c, &cpu).await;
    queue_is(
        &w,
        &cqs,
        CPU_IT,
        &[(cpu_flavor(32), 32), (cpu_flavor(96), 4 * 96)],
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(c.clone(), "gpustack-system");
    // Written as people write Secrets: `stringData`, which the cluster folds into `data`.
    let flip = |v: &str| json!({"stringData": {"instance-type-mixed-on-node": v}});
    secrets
        .patch(
            "gpustack-settings",
            &PatchParams::default(),
            &Patch::Merge(flip("false")),
        )
        .await
        .unwrap();
    queue_is(&w, &cqs, CPU_IT, &[(cpu_flavor(32), 32)]).await;
    let rf = flavors.get(&cpu_flavor(32)).await.unwrap();
    assert_eq!(rf.spec.node_labels["feature.gpustack.ai/cpu-only"], "true");
    eventually("cpu-a labelled cpu-only", &w, || async {
        let n = nodes.get("cpu-a").await.map_err(|e| e.to_string())?;
        (n.labels()
            .get("feature.gpustack.ai/cpu-only")
            .map(String::as_str)
            == Some("true"))
        .then_some(())
        .ok_or_else(|| format!("{:?}", n.labels()))
    })
    .await;
    secrets
        .patch(
            "gpustack-settings",
            &PatchParams::default(),
            &Patch::Merge(flip("true")),
        )
        .await
        .unwrap();
    queue_is(
        &w,
        &cqs,
        CPU_IT,
        &[(cpu_flavor(32), 32), (cpu_flavor(96), 4 * 96)],
    )
    .await;

    // The node-devices check: Ready when the assigned node has the cards, Retry naming the
    // podset when they are taken, Ready again once they free.
    let workloads = admit_train(&c, &h100_flavor(8), Some("gpu-a")).await;
    let verdict = |want: &'static str| {
        let workloads = workloads.clone();
        async move {
            let wl = workloads.get("train").await.map_err(|e| e.to_string())?;
            let check = wl.status.as_ref().and_then(|s| {
                s.admission_checks
                    .iter()
                    .find(|c| c.name == "gpustack-node-devices")
                    .cloned()
            });
            match check {
                Some(c) if c.state == want => Ok(c.message),
                other => Err(format!("{other:?}")),
            }
        }
    };
    eventually("the check Ready", &w, || verdict("Ready")).await;
    set_ledger(&c, &a, 6).await;
    let msg = eventually("the check Retry", &w, || verdict("Retry")).await;
    assert!(
        msg.contains("trainer") && msg.contains("gpu-a") && msg.contains("2 free"),
        "{msg}"
    );
    set_ledger(&c, &a, 0).await;
    eventually("the check Ready again", &w, || verdict("Ready")).await;

    // Nodes removed: the flavor goes, the queue is held and drained with no quota, the pool
    // says so; the queue itself stays.
    a.unhealthy.clear();
    remove(&c, "gpu-a").await;
    remove(&c, "gpu-b").await;
    let cq = queue_is(&w, &cqs, NVIDIA_IT, &[]).await;
    assert_eq!(cq.spec.stop_policy.as_deref(), Some("HoldAndDrain"));
    status_of(&w, &its, NVIDIA_IT, |it| {
        it.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Inactive")
    })
    .await;
    eventually("the H100 flavor retired", &w, || async {
        let n = names(&flavors).await;
        (!n.contains(&h100_flavor(8)))
            .then_some(())
            .ok_or_else(|| format!("{n:?}"))
    })
    .await;
    expect_line(&lines, "DELETED", "gpustack--nvidia-h100-80gb-hbm3");
    let _ = watching.kill();
    let team = queue_is(&w, &cqs, "team-h100", &[]).await;
    assert_eq!(team.spec.stop_policy.as_deref(), Some("HoldAndDrain"));
}

/// Creates Workload `default/train` (one podset asking for 4 H100s) and reserves quota for it on
/// `flavor` as Kueue would; with `node`, placed there by topology-aware scheduling and awaiting
/// the node-devices check.
async fn admit_train(c: &kube::Client, flavor: &str, node: Option<&str>) -> Api<Workload> {
    let workloads: Api<Workload> = Api::namespaced(c.clone(), "default");
    let wl: Workload = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "train"},
        "spec": {"queueName": local_queue(NVIDIA_IT), "podSets": [{"name": "trainer", "count": 1, "template": {"spec": {
            "containers": [{"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}]},
    }))
    .unwrap();
    workloads.create(&PostParams::default(), &wl).await.unwrap();
    let since = "2026-12-03T00:00:00Z";
    let mut reserve = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": since}],
            "admission": {"clusterQueue": NVIDIA_IT, "podSetAssignments": [{"name": "trainer", "count": 1,
                "flavors": {"credits.gpustack.ai/nvidia": flavor}}]},
        },
    });
    if let Some(node) = node {
        let status = &mut reserve["status"];
        status["admission"]["podSetAssignments"][0]["topologyAssignment"] = json!({
            "levels": ["kubernetes.io/hostname"], "domains": [{"values": [node], "count": 1}],
        });
        status["admissionChecks"] = json!([{"name": "gpustack-node-devices", "state": "Pending",
            "message": "", "lastTransitionTime": since}]);
    }
    workloads
        .patch_status(
            "train",
            &PatchParams::apply("kueue-stand-in").force(),
            &Patch::Apply(reserve),
        )
        .await
        .unwrap();
    workloads
}

async fn cordon(nodes: &Api<Node>, name: &str, on: bool) {
    let patch = json!({"spec": {"unschedulable": on}});
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

/// `kubectl get -w --output-watch-events` of `resource` through the worker's API: its
/// lines as they come, and the child to stop.
fn watch_lines(
    w: &WorkerProcess,
    resource: &str,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    gpustack_tests::embedded::stream_lines(w.kubectl_command(&[
        "get",
        resource,
        "-w",
        "--output-watch-events",
    ]))
}

/// Waits for a line of the watch's table starting with `event` and `name`.
fn expect_line(rx: &std::sync::mpsc::Receiver<String>, event: &str, name: &str) {
    let deadline = std::time::Instant::now() + WAIT;
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) if l.split_whitespace().take(2).eq([event, name]) => return,
            Ok(l) => seen.push(l),
            Err(_) => break,
        }
    }
    panic!("no {event} {name} on the watch; saw {seen:?}");
}

/// The worker's Lease as it stands.
async fn lease(c: &kube::Client) -> Option<k8s_openapi::api::coordination::v1::LeaseSpec> {
    let leases: Api<Lease> = Api::namespaced(c.clone(), "gpustack-system");
    leases
        .get_opt("worker.gpustack.ai")
        .await
        .ok()
        .flatten()?
        .spec
}

/// Who holds the worker's Lease.
async fn holder(c: &kube::Client) -> Option<String> {
    lease(c).await?.holder_identity
}

/// Waits until the worker with process id `pid` holds the Lease; the Lease then.
async fn leading(
    c: &kube::Client,
    w: &WorkerProcess,
) -> k8s_openapi::api::coordination::v1::LeaseSpec {
    let pid = w.pid().unwrap();
    eventually(&format!("worker {pid} leading"), w, || async {
        let spec = lease(c).await.unwrap_or_default();
        let h = spec.holder_identity.clone().unwrap_or_default();
        h.ends_with(&format!("_{pid}")).then_some(spec).ok_or(h)
    })
    .await
}

/// How often candidates try and the leader renews (the worker's fixed retry period).
const RETRY: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread")]
async fn a_second_worker_takes_over_when_the_leader_dies() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    let args = [
        "--disable-auths",
        "--kube-leader-lease=6s",
        "--kube-leader-renew-timeout=5s",
    ];
    let first = WorkerProcess::start(&gw, &tmp.path().join("w1"), &args, &[]);
    let c = client(&gw).await;
    let leader = eventually("a leader", &first, || async {
        holder(&c).await.ok_or_else(|| "none".to_owned())
    })
    .await;
    let pid = first.pid().unwrap();
    assert!(leader.ends_with(&format!("_{pid}")), "{leader}");
    let second = WorkerProcess::start(&gw, &tmp.path().join("w2"), &args, &[]);
    let cqs: Api<ClusterQueue> = Api::all(c.clone());
    put(&c, &Machine::gpu("gpu-a", H100, 8)).await;
    queue_is(&first, &cqs, NVIDIA_IT, &[(h100_flavor(8), 8 * M)]).await;
    assert_eq!(
        holder(&c).await.as_deref(),
        Some(leader.as_str()),
        "the follower did not take the lease"
    );

    // The leader dies without handing over; the follower waits out the lease and converges.
    let killed = std::time::Instant::now();
    drop(first);
    // What the dead leader last wrote: its final renewal.
    let last_renewal = lease(&c).await.unwrap().renew_time.unwrap().0;
    let taken = leading(&c, &second).await;
    let took = killed.elapsed();
    assert!(
        took < Duration::from_secs(6) + RETRY + Duration::from_secs(5),
        "took over in {took:?}"
    );
    // Not before the lease ran out: the follower acquired it at least the lease's 6 s after
    // the dead leader's last renewal (both times as the Lease records them).
    let acquired = taken.acquire_time.clone().unwrap().0;
    let waited = acquired.duration_since(last_renewal);
    eprintln!("took over {took:?} after the kill, {waited:#} after the last renewal");
    assert!(
        waited >= jiff::SignedDuration::from_secs(6),
        "the follower took the lease {waited:#} after the leader's last renewal, before the \
         6 s lease ran out"
    );
    assert_eq!(taken.lease_transitions, Some(1), "{taken:?}");
    put(&c, &Machine::gpu("gpu-b", H100, 8)).await;
    queue_is(&second, &cqs, NVIDIA_IT, &[(h100_flavor(8), 16 * M)]).await;
    let lqs: Api<LocalQueue> = Api::namespaced(c.clone(), "default");
    let flavors: Api<ResourceFlavor> = Api::all(c.clone());
    eventually(
        "one LocalQueue per queue and one flavor per identity",
        &second,
        || async {
            let all = lqs
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?
                .items;
            let unique: BTreeSet<String> = all.iter().map(|q| q.name_any()).collect();
            let want: BTreeSet<String> = names(&cqs).await.iter().map(|q| local_queue(q)).collect();
            let rfs = names(&flavors).await;
            let ok = all.len() == unique.len()
                && unique == want
                && rfs == BTreeSet::from([h100_flavor(8), cpu_flavor(96)]);
            ok.then_some(())
                .ok_or_else(|| format!("{unique:?} want {want:?}; flavors {rfs:?}"))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_stopped_cleanly_hands_over_without_the_follower_waiting_out_the_lease() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    // A lease far longer than the retry period: a follower that had to wait it out would take
    // more than 13 s.
    let args = [
        "--disable-auths",
        "--kube-leader-lease=15s",
        "--kube-leader-renew-timeout=10s",
    ];
    let first = WorkerProcess::start(&gw, &tmp.path().join("w1"), &args, &[]);
    let c = client(&gw).await;
    leading(&c, &first).await;
    let second = WorkerProcess::start(&gw, &tmp.path().join("w2"), &args, &[]);
    let stopped = std::time::Instant::now();
    assert!(first.stop().success(), "SIGTERM stops the leader cleanly");
    let taken = leading(&c, &second).await;
    let took = stopped.elapsed();
    eprintln!("took over {took:?} after the leader's SIGTERM");
    // The follower's next try (one retry period) plus slack for a loaded machine.
    assert!(
        took <= RETRY + Duration::from_secs(2),
        "the follower took over {took:?} after the leader stopped: the lease was not handed over"
    );
    assert_eq!(taken.lease_transitions, Some(1), "{taken:?}");
    // And it works as the leader: the chain is built.
    put(&c, &Machine::gpu("gpu-a", H100, 8)).await;
    let cqs: Api<ClusterQueue> = Api::all(c.clone());
    queue_is(&second, &cqs, NVIDIA_IT, &[(h100_flavor(8), 8 * M)]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_that_loses_the_api_server_steps_down_at_its_renew_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let port = gpustack_tests::embedded::free_port();
    let gw_dir = tmp.path().join("gw");
    let gw = GatewayProcess::start_with(&gw_dir, "one", port, &["--embedded-cluster=one"]);
    let args = [
        "--disable-auths",
        "--kube-leader-lease=10s",
        "--kube-leader-renew-timeout=5s",
    ];
    let renew_deadline = Duration::from_secs(5);
    let w = WorkerProcess::start(&gw, &tmp.path().join("w"), &args, &[]);
    let c = client(&gw).await;
    leading(&c, &w).await;
    let steps_down = |log: &str| {
        log.lines()
            // The controllers' Lease (image mode's applications Lease has its own lines).
            .filter(|l| {
                l.contains("not leading: controllers stop")
                    && l.contains("lease=worker.gpustack.ai")
            })
            .count()
    };
    assert_eq!(steps_down(&w.log()), 0, "{}", w.log());

    // The API server goes away (its port refuses connections): renewals fail, and the leader
    // stops its controllers once it has gone its renew deadline without a renewal.
    let lost = std::time::Instant::now();
    gw.crash();
    let took = gpustack_tests::wait::poll_until(Duration::from_secs(30), || {
        (steps_down(&w.log()) == 1).then(|| lost.elapsed())
    })
    .unwrap_or_else(|| {
        panic!(
            "the leader did not step down within 30 s of losing the API server; its log:\n{}",
            w.log()
        )
    });
    eprintln!("stepped down {took:?} after the API server went away");
    // Its last renewal was at most one retry period before the loss; it steps down at the
    // first failed try past the deadline.
    assert!(
        took >= renew_deadline - RETRY,
        "stepped down {took:?} after the loss, before its renew deadline ({renew_deadline:?})"
    );
    assert!(
        took <= renew_deadline + RETRY + Duration::from_secs(2),
        "stepped down only {took:?} after the loss (renew deadline {renew_deadline:?})"
    );

    // The API server is back: the worker takes the lease again and leads.
    let gw = GatewayProcess::start_with(&gw_dir, "one", port, &["--embedded-cluster=one"]);
    let c = client(&gw).await;
    leading(&c, &w).await;
    gpustack_tests::wait::wait_until("leading again in the log", Duration::from_secs(30), || {
        (w.log()
            .lines()
            .filter(|l| {
                l.contains("leading: controllers start") && l.contains("lease=worker.gpustack.ai")
            })
            .count()
            == 2)
            .then_some(())
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn where_nfd_runs_the_feature_labels_go_to_a_node_feature() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    let crd = tmp.path().join("nodefeature-crd.yaml");
    std::fs::write(&crd, gpustack_tests::inventory::NODE_FEATURE_CRD).unwrap();
    gw.kubectl_ok(&["apply", "-f", crd.to_str().unwrap()]);
    let w = WorkerProcess::start(&gw, &tmp.path().join("worker"), &["--disable-auths"], &[]);
    let c = client(&gw).await;
    put(&c, &Machine::gpu("gpu-a", H100, 8)).await;
    let resource = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("nfd.k8s-sigs.io", "v1alpha1", "NodeFeature"),
        "nodefeatures",
    );
    let features: Api<kube::api::DynamicObject> =
        Api::namespaced_with(c.clone(), "gpustack-system", &resource);
    let labels = eventually("the worker's NodeFeature", &w, || async {
        let nf = features
            .get("gpu-a-gpustack-worker")
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(nf.data["spec"]["labels"].clone())
    })
    .await;
    assert_eq!(labels["gpustack.ai/managed"], "true");
    assert_eq!(labels["general.feature.gpustack.ai/amd-epyc-7r32"], "true");
    assert_eq!(
        labels["general.feature.gpustack.ai/amd-epyc-7r32.count"],
        "96"
    );
    let nodes: Api<Node> = Api::all(c.clone());
    let node = eventually("the fit labels on the Node", &w, || async {
        let n = nodes.get("gpu-a").await.map_err(|e| e.to_string())?;
        n.labels()
            .contains_key("shared-free-cards.fit.gpustack.ai/nvidia-h100-80gb-hbm3")
            .then_some(n.clone())
            .ok_or_else(|| format!("{:?}", n.labels()))
    })
    .await;
    assert!(
        !node.labels().contains_key("gpustack.ai/managed"),
        "feature labels reach the Node through NFD, not from the worker"
    );
    // NFD's master (which cannot run here) puts them on the Node; the chain follows.
    let as_nfd = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a", "labels": labels}});
    nodes
        .patch(
            "gpu-a",
            &PatchParams::apply("nfd-master").force(),
            &Patch::Apply(as_nfd),
        )
        .await
        .unwrap();
    let cqs: Api<ClusterQueue> = Api::all(c.clone());
    queue_is(&w, &cqs, NVIDIA_IT, &[(h100_flavor(8), 8 * M)]).await;
    let after = features.get("gpu-a-gpustack-worker").await.unwrap();
    assert_eq!(
        after.data["spec"]["labels"], labels,
        "the worker does not fight NFD's copy"
    );
}

const ZONE: &str = "topology.kubernetes.io/zone";
const RACK: &str = "example.com/rack";

/// The profile of the zone → rack → hostname hierarchy, computed here independently.
fn racks_profile() -> String {
    format!(
        "fnv64-{}",
        fnv1a(&format!("{ZONE}\0{RACK}\0kubernetes.io/hostname"))
    )
}

fn h100_flavor_in(profile: &str) -> String {
    format!("gpustack--amd-epyc-7r32--nvidia-h100-80gb-hbm3-linux-amd64-8d-{profile}")
}

fn topology_levels(t: &Topology) -> Vec<String> {
    t.spec.levels.iter().map(|l| l.node_label.clone()).collect()
}

fn annotation(cq: &ClusterQueue, key: &str) -> Option<String> {
    cq.metadata.annotations.as_ref()?.get(key).cloned()
}

/// The queue's `TopologyReady` condition as `(status, reason, message)`.
fn topology_ready(cq: &ClusterQueue) -> Option<(String, String, String)> {
    let c = cq
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "TopologyReady")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[tokio::test(flavor = "multi_thread")]
async fn topology_sources_set_the_hierarchy_and_a_profile_change_drains_busy_flavors() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    // Alone (no lease to wait out), so that it can be restarted mid-migration.
    let args = ["--disable-auths", "--kube-leader-election=false"];
    let w = WorkerProcess::start(&gw, &tmp.path().join("worker"), &args, &[]);
    let c = client(&gw).await;
    let its: Api<InstanceType> = Api::all(c.clone());
    let cqs: Api<ClusterQueue> = Api::all(c.clone());
    let nodes: Api<Node> = Api::all(c.clone());
    let flavors: Api<ResourceFlavor> = Api::all(c.clone());
    let topologies: Api<Topology> = Api::all(c.clone());

    // Two racked H100 nodes; with no TopologySource their hierarchy is the hostname alone.
    for (name, rack) in [("gpu-a", "r1"), ("gpu-b", "r2")] {
        put(&c, &Machine::gpu(name, H100, 8)).await;
        let labels = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {ZONE: "z1", RACK: rack, "pool": "h100"}}});
        nodes
            .patch(
                name,
                &PatchParams::apply("admin").force(),
                &Patch::Apply(labels),
            )
            .await
            .unwrap();
    }
    let hostname = h100_flavor(8);
    queue_is(&w, &cqs, NVIDIA_IT, &[(hostname.clone(), 16 * M)]).await;
    // The derived InstanceType is sized from the shipped table.
    let it = its.get(NVIDIA_IT).await.unwrap();
    let units = it.spec.unit_resources.unwrap();
    assert_eq!(
        (units.cpu.as_deref(), units.ram.as_deref()),
        (Some("16"), Some("192Gi"))
    );

    // A Workload holds quota on the hostname-profile flavor (Kueue admitted it).
    let workloads = admit_train(&c, &hostname, None).await;

    // A TopologySource names the zone → rack hierarchy for the pool's nodes.
    let source = tmp.path().join("racks.yaml");
    std::fs::write(
        &source,
        format!(
            "apiVersion: worker.gpustack.ai/v1alpha1\nkind: TopologySource\nmetadata:\n  name: racks\n\
             spec:\n  nodeSelector:\n    pool: h100\n  levels: [\"{ZONE}\", \"{RACK}\"]\n"
        ),
    )
    .unwrap();
    gw.kubectl_ok(&["apply", "-f", source.to_str().unwrap()]);
    let table = eventually("the source Ready", &w, || async {
        let out = gw.kubectl_ok(&["get", "toposrc", "racks", "--no-headers"]);
        let cols: Vec<&str> = out.split_whitespace().collect();
        (cols.get(1..4) == Some(&["Labels", "1", "True"][..]))
            .then_some(out.clone())
            .ok_or(out)
    })
    .await;
    assert!(table.starts_with("racks"), "{table}");
    let racked = racks_profile();
    for name in ["gpu-a", "gpu-b"] {
        eventually(&format!("{name}'s profile"), &w, || async {
            let n = nodes.get(name).await.map_err(|e| e.to_string())?;
            let p = n.labels().get("topology.gpustack.ai/profile").cloned();
            (p.as_deref() == Some(racked.as_str()))
                .then_some(())
                .ok_or_else(|| format!("{p:?}"))
        })
        .await;
    }
    let topology = eventually("the racked Topology", &w, || async {
        topologies
            .get(&format!("gpustack-{racked}"))
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(
        topology_levels(&topology),
        [ZONE, RACK, "kubernetes.io/hostname"]
    );
    let new = h100_flavor_in(&racked);
    let rf = eventually("the racked flavor", &w, || async {
        flavors.get(&new).await.map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(
        rf.spec.topology_name.as_deref(),
        Some(format!("gpustack-{racked}").as_str())
    );
    assert_eq!(rf.spec.node_labels["topology.gpustack.ai/profile"], racked);

    // The pool's flavor changes profile while the Workload holds the old one: the queue is held
    // and drained on its old plan, the policy it had saved.
    let cq = eventually("the queue held for the migration", &w, || async {
        let cq = cqs.get(NVIDIA_IT).await.map_err(|e| e.to_string())?;
        (cq.spec.stop_policy.as_deref() == Some("HoldAndDrain"))
            .then_some(cq.clone())
            .ok_or_else(|| format!("{:?} {:?}", cq.spec.stop_policy, quota(&cq)))
    })
    .await;
    assert_eq!(quota(&cq), [(hostname.clone(), (16 * M).to_string())]);
    assert_eq!(
        annotation(&cq, "topology.gpustack.ai/migration-hold").as_deref(),
        Some("None")
    );
    status_of(&w, &its, NVIDIA_IT, |it| {
        it.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Draining")
    })
    .await;
    assert!(
        names(&flavors).await.contains(&hostname),
        "the old flavor stays while the queue names it"
    );

    // A restarted worker keeps holding: the saved policy survives on the queue.
    w.stop();
    let w = WorkerProcess::start(&gw, &tmp.path().join("worker-2"), &args, &[]);
    let namespaces: Api<Namespace> = Api::all(c.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-b"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let team_lqs: Api<LocalQueue> = Api::namespaced(c.clone(), "team-b");
    // The same pass writes the queue before the LocalQueues: once they are there, it planned.
    eventually("the restarted worker planning", &w, || async {
        team_lqs
            .get(&local_queue(NVIDIA_IT))
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    let cq = cqs.get(NVIDIA_IT).await.unwrap();
    assert_eq!(cq.spec.stop_policy.as_deref(), Some("HoldAndDrain"));
    assert_eq!(quota(&cq), [(hostname.clone(), (16 * M).to_string())]);
    assert_eq!(
        annotation(&cq, "topology.gpustack.ai/migration-hold").as_deref(),
        Some("None")
    );

    // Kueue evicts it (here: it leaves); the plan switches and the policy is restored.
    workloads
        .delete("train", &DeleteParams::default())
        .await
        .unwrap();
    let cq = queue_is(&w, &cqs, NVIDIA_IT, &[(new.clone(), 16 * M)]).await;
    assert_eq!(cq.spec.stop_policy.as_deref(), Some("None"));
    assert_eq!(annotation(&cq, "topology.gpustack.ai/migration-hold"), None);
    eventually("the hostname flavor and Topology retired", &w, || async {
        let rfs = names(&flavors).await;
        let ts = names(&topologies).await;
        let ok =
            !rfs.contains(&hostname) && !ts.contains(&format!("gpustack-{}", hostname_profile()));
        ok.then_some(()).ok_or_else(|| format!("{rfs:?} {ts:?}"))
    })
    .await;
    let devices: Api<kube::api::DynamicObject> = Api::all_with(c.clone(), &devices_resource());
    let d = devices.get("gpu-a").await.unwrap();
    assert_eq!(d.labels()["topology.gpustack.ai/profile"], racked);

    // The source goes: back to the hostname alone (nothing holds quota, so no hold).
    gw.kubectl_ok(&["delete", "toposrc", "racks"]);
    let cq = queue_is(&w, &cqs, NVIDIA_IT, &[(hostname.clone(), 16 * M)]).await;
    assert_eq!(cq.spec.stop_policy.as_deref(), Some("None"));
    eventually("gpu-a's profile back to the hostname's", &w, || async {
        let n = nodes.get("gpu-a").await.map_err(|e| e.to_string())?;
        let p = n.labels().get("topology.gpustack.ai/profile").cloned();
        (p == Some(hostname_profile()))
            .then_some(())
            .ok_or_else(|| format!("{p:?}"))
    })
    .await;
    eventually("the racked Topology retired", &w, || async {
        let ts = names(&topologies).await;
        (!ts.contains(&format!("gpustack-{racked}")))
            .then_some(())
            .ok_or_else(|| format!("{ts:?}"))
    })
    .await;

    // An admin's unit resources table applies to InstanceTypes derived after it (they are
    // create-only: deleting one derives it again).
    put(&c, &Machine::gpu("amd-a", RX7800XT, 2)).await;
    let amd_it = "gpustack--amd-radeon-rx-7800-xt-linux-amd64";
    let it = eventually("the amd instance type", &w, || async {
        its.get(amd_it).await.map_err(|e| e.to_string())
    })
    .await;
    let units = it.spec.unit_resources.unwrap();
    assert_eq!(
        (units.cpu.as_deref(), units.ram.as_deref()),
        (Some("4"), Some("32Gi"))
    );
    let secrets: Api<Secret> = Api::namespaced(c.clone(), "gpustack-system");
    let table = "amd:\n  RX 7800 XT: {cpu: \"3\", ram: 24Gi}\n";
    // Written in one change with a setting whose effect shows: once the CPU pool loses the
    // accelerated nodes (no mixing; every node here has cards), the worker has read this
    // version of the Secret, the table included.
    secrets
        .patch(
            "gpustack-settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {
                "instance-type-unit-resources-preset": table,
                "instance-type-mixed-on-node": "false",
            }})),
        )
        .await
        .unwrap();
    eventually("the CPU pool's flavors retired", &w, || async {
        // CPU flavors are `gpustack--<cpu>-<os>-...`; accelerator ones `gpustack--<cpu>--<group>-...`.
        let rfs = names(&flavors).await;
        (!rfs.is_empty() && rfs.iter().all(|f| f.matches("--").count() == 2))
            .then_some(())
            .ok_or_else(|| format!("{rfs:?}"))
    })
    .await;
    // Deleted once: the InstanceType derived again is sized by the admin's table at once.
    let old_uid = it.metadata.uid.clone();
    its.delete(amd_it, &DeleteParams::default()).await.unwrap();
    let again = eventually("the amd instance type derived again", &w, || async {
        let it = its.get(amd_it).await.map_err(|e| e.to_string())?;
        (it.metadata.uid != old_uid && it.metadata.deletion_timestamp.is_none())
            .then_some(it.clone())
            .ok_or_else(|| format!("{:?}", it.metadata.uid))
    })
    .await;
    let u = again.spec.unit_resources.unwrap_or_default();
    assert_eq!(
        (u.cpu.as_deref(), u.ram.as_deref()),
        (Some("3"), Some("24Gi")),
        "the InstanceType derived after the table is sized by it"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_naming_a_drifted_topology_is_refused_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    let w = WorkerProcess::start(&gw, &tmp.path().join("worker"), &["--disable-auths"], &[]);
    let c = client(&gw).await;
    let cqs: Api<ClusterQueue> = Api::all(c.clone());
    let topologies: Api<Topology> = Api::all(c.clone());

    // Someone else's Topology under the hostname profile's name, with other levels.
    let name = format!("gpustack-{}", hostname_profile());
    let wrong: Topology = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": ZONE}, {"nodeLabel": "kubernetes.io/hostname"}]},
    }))
    .unwrap();
    topologies
        .create(&PostParams::default(), &wrong)
        .await
        .unwrap();
    put(&c, &Machine::gpu("gpu-a", H100, 8)).await;

    // The queue exists, held with no plan; the condition names the flavor and the Topology.
    let (status, reason, message) = eventually("the plan refused", &w, || async {
        let cq = cqs.get(NVIDIA_IT).await.map_err(|e| e.to_string())?;
        topology_ready(&cq).ok_or_else(|| format!("{:?}", cq.status))
    })
    .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "TopologyDrift")
    );
    assert!(
        message.contains(&h100_flavor(8)) && message.contains(&name),
        "{message}"
    );
    let cq = cqs.get(NVIDIA_IT).await.unwrap();
    assert!(quota(&cq).is_empty(), "a refused plan is not written");
    assert_eq!(cq.spec.stop_policy.as_deref(), Some("Hold"));
    let shown = gw.kubectl_ok(&[
        "get",
        "clusterqueue",
        NVIDIA_IT,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"TopologyReady\")].reason}",
    ]);
    assert_eq!(shown, "TopologyDrift");
    // Never patched by the worker.
    let t = topologies.get(&name).await.unwrap();
    assert_eq!(topology_levels(&t), [ZONE, "kubernetes.io/hostname"]);

    // Removed, it is created as the profile says, and the plan goes through.
    topologies
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    let cq = queue_is(&w, &cqs, NVIDIA_IT, &[(h100_flavor(8), 8 * M)]).await;
    assert_eq!(cq.spec.stop_policy.as_deref(), Some("None"));
    eventually("TopologyReady", &w, || async {
        let cq = cqs.get(NVIDIA_IT).await.map_err(|e| e.to_string())?;
        match topology_ready(&cq) {
            Some((s, r, _)) if s == "True" && r == "PlanAccepted" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let t = topologies.get(&name).await.unwrap();
    assert_eq!(topology_levels(&t), ["kubernetes.io/hostname"]);
}

/// An object the API server stores but the worker's types cannot read (here a LocalQueue
/// written under a newer Kueue whose schema lets `spec` hold anything) is skipped and named in
/// the log; every other object of its kind is still followed, so new namespaces still get their
/// LocalQueues.
#[tokio::test(flavor = "multi_thread")]
async fn an_object_the_worker_cannot_read_stops_nothing() {
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    let w = WorkerProcess::start(&gw, &tmp.path().join("worker"), &["--disable-auths"], &[]);
    let c = client(&gw).await;
    let cqs: Api<ClusterQueue> = Api::all(c.clone());
    put(&c, &Machine::gpu("gpu-a", H100, 8)).await;
    queue_is(&w, &cqs, NVIDIA_IT, &[(h100_flavor(8), 8 * M)]).await;

    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(c.clone());
    let crd = crds.get("localqueues.kueue.x-k8s.io").await.unwrap();
    let loose: Vec<_> = (0..crd.spec.versions.len())
        .map(|i| {
            json!({"op": "replace",
                   "path": format!("/spec/versions/{i}/schema/openAPIV3Schema/properties/spec"),
                   "value": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})
        })
        .collect();
    crds.patch(
        "localqueues.kueue.x-k8s.io",
        &PatchParams::default(),
        &Patch::<()>::Json(serde_json::from_value(json!(loose)).unwrap()),
    )
    .await
    .unwrap();
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "LocalQueue");
    let odd: Api<DynamicObject> =
        Api::namespaced_with(c.clone(), "default", &ApiResource::from_gvk(&gvk));
    let unreadable: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "odd", "namespace": "default"},
        "spec": {"clusterQueue": {"not": "a name"}},
    }))
    .unwrap();
    eventually("the unreadable LocalQueue stored", &w, || async {
        odd.create(&PostParams::default(), &unreadable)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;

    let namespaces: Api<Namespace> = Api::all(c.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-c"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let team_lqs: Api<LocalQueue> = Api::namespaced(c.clone(), "team-c");
    let want: BTreeSet<String> = names(&cqs).await.iter().map(|q| local_queue(q)).collect();
    eventually(
        "team-c's local queues beside the unreadable one",
        &w,
        || async {
            let have = names(&team_lqs).await;
            (have == want)
                .then_some(())
                .ok_or_else(|| format!("{have:?} want {want:?}"))
        },
    )
    .await;
    eventually("the skipped object named in the log", &w, || async {
        let log = w.log();
        log.lines()
            .find(|l| l.contains("skipping an object that cannot be read") && l.contains("odd"))
            .map(|_| ())
            .ok_or_else(|| "no line yet".to_owned())
    })
    .await;
}
