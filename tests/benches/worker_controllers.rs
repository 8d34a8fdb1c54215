//! Benchmark of the worker's controllers (issue 12), not a pass/fail test: the real
//! `worker-gateway` (an embedded cluster) and the real `worker`, fed a fleet of GPU nodes
//! (tests/src/inventory.rs). Reproduce with
//!
//! ```text
//! cargo build --release --bin gpustack-operator && cargo bench -p gpustack-tests --bench worker_controllers
//! ```
//!
//! (`GPUSTACK_BENCH_NODES`, default 1000, scales it; each node has 8 cards).
//!
//! 1. Convergence: every Node and `Devices` written (16 writes in flight), then the time from
//!    the last write until the chain is complete: the pool's ClusterQueue holds the quota of
//!    every card, the InstanceType's status counts them all, every Node is onboarded.
//! 2. Objects touched per changed node: one card of one node turns unhealthy; once the chain
//!    has followed (quota down by one card), every object of the kinds the worker writes is
//!    compared by resourceVersion with before, less the two writes the benchmark made.
//! 3. The worker's resident memory, peak and now, with the fleet in place.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt};
use gpustack_api::{
    instance_type::InstanceType,
    kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Topology},
};
use gpustack_tests::{
    bench::{Figure, client, env_usize, proc_status_mb},
    embedded::GatewayProcess,
    inventory::{H100, Machine, devices_resource, publish},
    wait::poll,
    worker::WorkerProcess,
};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, ResourceExt,
    api::{DynamicObject, ListParams},
};

const M: u64 = 1_600_000;
const IT: &str = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64";

fn total_quota(cq: &ClusterQueue) -> u64 {
    cq.spec
        .resource_groups
        .iter()
        .flat_map(|g| g.flavors.iter().flat_map(|f| f.resources.iter()))
        .map(|r| r.nominal_quota.0.parse::<u64>().unwrap_or(0))
        .sum()
}

/// `kind/name` → resourceVersion of every object of the kinds the worker writes.
async fn versions(c: &kube::Client) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    macro_rules! add {
        ($t:ty, $kind:literal) => {
            for o in Api::<$t>::all(c.clone())
                .list(&ListParams::default())
                .await
                .expect("list")
                .items
            {
                out.insert(
                    format!(
                        "{}/{}/{}",
                        $kind,
                        o.namespace().unwrap_or_default(),
                        o.name_any()
                    ),
                    o.resource_version().unwrap_or_default(),
                );
            }
        };
    }
    add!(Node, "node");
    add!(ResourceFlavor, "resourceflavor");
    add!(InstanceType, "instancetype");
    add!(ClusterQueue, "clusterqueue");
    add!(LocalQueue, "localqueue");
    add!(Topology, "topology");
    for o in Api::<DynamicObject>::all_with(c.clone(), &devices_resource())
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
    {
        out.insert(
            format!("devices//{}", o.name_any()),
            o.resource_version().unwrap_or_default(),
        );
    }
    out
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let n = env_usize("GPUSTACK_BENCH_NODES", 1000);
    let tmp = tempfile::tempdir().unwrap();
    let gw = tokio::task::block_in_place(|| GatewayProcess::start(&tmp.path().join("gw"), "one"));
    let worker = tokio::task::block_in_place(|| {
        WorkerProcess::start(&gw, &tmp.path().join("worker"), &["--disable-auths"], &[])
    });
    let c = client(&gw.kubeconfig()).await;
    let mut figures = Vec::new();

    let machines: Vec<Machine> = (0..n)
        .map(|i| Machine::gpu(&format!("gpu-{i:05}"), H100, 8))
        .collect();
    let start = Instant::now();
    futures::stream::iter(machines.iter())
        .map(|m| publish(&c, m))
        .buffer_unordered(16)
        .try_collect::<()>()
        .await
        .expect("writing the fleet");
    let last_write = Instant::now();
    println!("wrote {n} Nodes and Devices in {:.1?}", last_write - start);
    let cqs: Api<ClusterQueue> = Api::all(c.clone());
    let its: Api<InstanceType> = Api::all(c.clone());
    let nodes: Api<Node> = Api::all(c.clone());
    let want = n as u64 * 8 * M;
    let converged = poll(Duration::from_secs(600), || {
        let (cqs, its, nodes) = (cqs.clone(), its.clone(), nodes.clone());
        async move {
            let cq = cqs.get(IT).await.ok()?;
            let it = its.get(IT).await.ok()?;
            let cards = it.status?.accelerator?.capacity;
            let onboarded = nodes
                .list(&ListParams::default().labels("gpustack.ai/managed=true"))
                .await
                .ok()?
                .items
                .iter()
                .filter(|n| {
                    n.status
                        .as_ref()
                        .and_then(|s| s.capacity.as_ref())
                        .is_some_and(|c| c.contains_key("nvidia.com/gpu.sliced.units"))
                })
                .count();
            (total_quota(&cq) == want && cards == n as i64 * 8 && onboarded == n).then(Instant::now)
        }
    })
    .await;
    let took = converged.map(|t| t - last_write);
    figures.push(Figure::new(
        format!("last write to converged chain, {n} nodes x 8 cards"),
        took.map(|d| format!("{:.2} s", d.as_secs_f64()))
            .unwrap_or_else(|| "not converged in 600 s".into()),
        Some("<= 10 s"),
        Some(took.is_some_and(|d| d <= Duration::from_secs(10))),
    ));

    // One card of one node breaks.
    let before = versions(&c).await;
    let mut broken = machines[n / 2].clone();
    broken.unhealthy = vec![7];
    let changed = Instant::now();
    publish(&c, &broken).await.expect("breaking a card");
    let followed = poll(Duration::from_secs(120), || {
        let cqs = cqs.clone();
        async move { (total_quota(&cqs.get(IT).await.ok()?) == want - M).then(Instant::now) }
    })
    .await;
    // Let the pass that followed finish its writes (the status after the queue).
    let settled = poll(Duration::from_secs(30), || {
        let its = its.clone();
        async move {
            (its.get(IT).await.ok()?.status?.accelerator?.capacity == n as i64 * 8 - 1)
                .then_some(())
        }
    })
    .await;
    let after = versions(&c).await;
    let touched: Vec<&String> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .map(|(k, _)| k)
        .collect();
    // The benchmark itself wrote the node (metadata and status: one version) and its Devices.
    let by_worker = touched.len().saturating_sub(2);
    println!("objects whose version changed: {touched:?}");
    figures.push(Figure::new(
        "chain followed one unhealthy card",
        followed
            .map(|t| format!("{:.2} s", (t - changed).as_secs_f64()))
            .unwrap_or_else(|| "no".into()),
        None,
        Some(followed.is_some() && settled.is_some()),
    ));
    figures.push(Figure::new(
        format!(
            "objects the worker touched for one changed node (of {} watched)",
            after.len()
        ),
        format!("{by_worker}"),
        Some("O(1): <= 10, not a rebuild"),
        Some(by_worker <= 10),
    ));

    let pid = worker.pid().expect("worker running");
    let peak = proc_status_mb(pid, "VmHWM");
    let now = proc_status_mb(pid, "VmRSS");
    figures.push(Figure::new(
        format!("worker resident memory with {n} nodes (peak / now)"),
        format!("{peak:.0} MB / {now:.0} MB"),
        Some("<= 200 MB"),
        Some(peak <= 200.0),
    ));

    gpustack_tests::bench::print_summary("worker_controllers", &figures);
}
