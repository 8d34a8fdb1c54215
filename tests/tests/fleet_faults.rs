//! The fleet as a whole, in containers, through real faults (issue 35): three GPU clusters (8x
//! H100, MI210, a mixed one) and a hub, each cluster on its own `--internal` Docker network
//! ([`gpustack_tests::fleet`]), each node's `Devices` written by its own `device-manager serve`
//! on the node's fixture tree ([`gpustack_tests::fleet_hosts`]). While writers change Devices
//! (their own, never the agents') and InstanceTypes in every cluster
//! and a client lists and watches the fleet at the hub, one fault at a time: a partition
//! (`docker network disconnect`), a freeze (`docker pause`), a cluster killed and restarted with
//! its data and without it, the hub's gateway killed (SIGKILL) during a burst, the hub worker
//! killed, a cluster's serving certificate replaced by one of a new CA. After each:
//! - fleet reads never failed: for a cluster's fault every read answered with success within
//!   1 s, the lost cluster shown `Degraded` with the age of its last sync in `kubectl get
//!   clusters` (the cluster of a new CA too: the hub's probe makes a new handshake, which no
//!   longer verifies); while the hub's own gateway or worker is down a read cannot succeed,
//!   and every read still answered within 1 s, with success or a 503 that says why (the
//!   figures count those), and once the hub served a read again every later one succeeded;
//! - after healing the hub converges within 10 s: every mirror equals its cluster object for
//!   object (uid and the upstream's resourceVersion; nothing missing, extra or duplicated);
//! - the fleet watcher saw every acknowledged change, or a relist marker after it;
//! - the hub resumed its watches from stored versions instead of relisting where the cluster
//!   still had them (`relists` of `GET /apis/workers`, also
//!   `gpustack_gateway_upstream_relists_total`).
//!
//! First a window as long as a fault with no fault at all (`Control`): the same reads' p99
//! with nothing lost, beside which each fault's p99 tells what the fault itself costs a read.
//!
//! Each fault lasts `GPUSTACK_FLEET_FAULT_SECS` seconds (default 15, so the suite's run stays
//! about 3 minutes; the 30 s for the figures in docs/benchmarks.md). The figures are
//! printed. `GPUSTACK_FLEET_FAULTS=Partition,Freeze` runs only the faults named (`Control`, `RestartKept`,
//! `RestartWiped`, `HubGatewayKilled`, `HubWorkerKilled`, `NewCa`); `GPUSTACK_FLEET_KEEP=1`
//! leaves the fleet's containers, networks and volumes for a look (the drop prints how to remove
//! them).

use std::time::{Duration, Instant};

use gpustack_tests::wait::poll_until;

use gpustack_tests::{
    fleet::{ClusterSpec, Fleet, docker_output},
    fleet_compare::{compare, list_mirror, list_upstream},
    fleet_hosts::{FleetNode, Host},
    fleet_load::{Load, READ_BOUND, fleet_name, instancetypes_resource},
    inventory::devices_resource,
};
use kube::api::ApiResource;
use serde_json::Value;

/// How long the hub has to converge after a fault is healed.
const CONVERGE: Duration = Duration::from_secs(10);

fn fault_duration() -> Duration {
    let secs = std::env::var("GPUSTACK_FLEET_FAULT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    Duration::from_secs(secs)
}

fn specs() -> Vec<ClusterSpec> {
    vec![
        ClusterSpec {
            name: "h100",
            nodes: vec![FleetNode::new("hgx-h100", Host::HgxH100)],
        },
        ClusterSpec {
            name: "mi210",
            nodes: vec![FleetNode::new("mi210-node", Host::Mi210)],
        },
        ClusterSpec {
            name: "mixed",
            nodes: vec![FleetNode::new("mixed-node", Host::Mixed)],
        },
    ]
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Control,
    Partition,
    Freeze,
    RestartKept,
    RestartWiped,
    HubGatewayKilled,
    HubWorkerKilled,
    NewCa,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::Control => "no fault (control)",
            Fault::Partition => "partition (network disconnect)",
            Fault::Freeze => "freeze (docker pause)",
            Fault::RestartKept => "kill + restart, data kept",
            Fault::RestartWiped => "kill + restart, data wiped",
            Fault::HubGatewayKilled => "hub gateway kill -9 in a burst",
            Fault::HubWorkerKilled => "hub worker killed",
            Fault::NewCa => "serving cert of a new CA",
        }
    }

    /// Whether the hub itself is hit (fleet reads then fail while it is down).
    fn at_hub(self) -> bool {
        matches!(self, Fault::HubGatewayKilled | Fault::HubWorkerKilled)
    }

    /// Whether a cluster is lost to the hub (it must be shown `Degraded`).
    fn loses_a_cluster(self) -> bool {
        !self.at_hub() && self != Fault::Control
    }

    /// Whether the hub must relist the cluster (its versions are gone).
    fn relists(self) -> bool {
        self == Fault::RestartWiped
    }
}

/// What one fault measured.
struct Figure {
    fault: Fault,
    cluster: String,
    degraded_after: Option<Duration>,
    degraded_row: String,
    converged_after: Duration,
    reads: usize,
    failed_reads: usize,
    /// Reads answered 503 with a reason within the bound (the hub's own faults).
    answered_503: usize,
    /// The reads that neither succeeded nor answered 503 with a reason within the bound:
    /// (start after the fault began, time taken, status code, reason).
    unanswered: Vec<(Duration, Duration, Option<u16>, String)>,
    /// The failed reads' distinct reasons.
    reasons: Vec<String>,
    /// For the hub's own faults: when its first fleet read after its restart succeeded (after
    /// the fault began), and the reads that failed after it.
    back_after: Option<Duration>,
    failed_once_back: Vec<(Duration, Duration, Option<u16>, String)>,
    p99: Duration,
    max: Duration,
    /// The same list's p99 at the mirror's fleet view directly (the gateway alone).
    mirror_p99: Duration,
    /// The slowest fleet reads that answered: when each started after the fault began, and
    /// how long it took (where a slow read sits tells what it waited on).
    slowest: Vec<(Duration, Duration)>,
    /// The machine's load average (1, 5, 15 min) when the fault's checks were done.
    load: String,
    compared: usize,
    writes: usize,
    lists: (u64, u64),
}

/// `GET /apis/workers` at the mirror.
async fn workers(fleet: &Fleet) -> Option<Value> {
    let client = fleet.hub.mirror_client().await;
    let request = http::Request::get("/apis/workers").body(Vec::new()).ok()?;
    let text = client.request_text(request).await.ok()?;
    serde_json::from_str(&text).ok()
}

fn upstream_field(doc: &Value, cluster: &str, field: &str) -> Value {
    doc["items"]
        .as_array()
        .and_then(|i| i.iter().find(|w| w["cluster"] == cluster))
        .map(|w| w[field].clone())
        .unwrap_or(Value::Null)
}

/// The row of `cluster` in `kubectl get clusters` at the hub, if it shows `phase`.
fn cluster_row(fleet: &Fleet, cluster: &str, phase: &str) -> Option<String> {
    let out = fleet.hub.kubectl(&["get", "clusters.fleet.gpustack.ai"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let header = text.lines().next()?.to_owned();
    let row = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(cluster))?
        .to_owned();
    row.split_whitespace()
        .any(|w| w == phase)
        .then(|| format!("{header}\n{row}"))
}

/// Compares every mirror with its cluster (Devices and InstanceTypes); the objects compared,
/// or what differed.
async fn mirrors_equal(fleet: &Fleet) -> Result<usize, String> {
    let kinds: [ApiResource; 2] = [devices_resource(), instancetypes_resource()];
    let mut compared = 0;
    for c in &fleet.clusters {
        let up_client = c.client().await;
        let mirror = fleet.hub.mirror_of(&c.name).await;
        for kind in &kinds {
            let up = list_upstream(&up_client, kind)
                .await
                .map_err(|e| format!("{} {}: {e}", c.name, kind.plural))?;
            let got = list_mirror(&mirror, kind)
                .await
                .map_err(|e| format!("mirror of {} {}: {e}", c.name, kind.plural))?;
            let d = compare(&up, &got);
            if !d.is_empty() {
                return Err(format!("{} {}: {d:?}", c.name, kind.plural));
            }
            compared += up.len();
        }
    }
    Ok(compared)
}

/// Whether the fleet watcher's view equals every cluster's Devices.
async fn watcher_caught_up(fleet: &Fleet, load: &Load) -> Result<(), String> {
    let mut want = std::collections::BTreeMap::new();
    for c in &fleet.clusters {
        let up = list_upstream(&c.client().await, &devices_resource())
            .await
            .map_err(|e| e.to_string())?;
        for (n, u, v) in up {
            want.insert(fleet_name(&c.name, &n), (u, v));
        }
    }
    let view = load.watch.lock().unwrap().view.clone();
    if view == want {
        Ok(())
    } else {
        let missing: Vec<_> = want.keys().filter(|k| !view.contains_key(*k)).collect();
        let stale: Vec<_> = want
            .iter()
            .filter(|(k, v)| view.get(*k).is_some_and(|g| g != *v))
            .map(|(k, v)| (k, v, view.get(k)))
            .collect();
        let extra: Vec<_> = view.keys().filter(|k| !want.contains_key(*k)).collect();
        Err(format!(
            "missing {missing:?}, stale {stale:?}, extra {extra:?}"
        ))
    }
}

/// How long a restarted hub gateway or worker may take to serve fleet reads again.
const HUB_BACK: Duration = Duration::from_secs(60);

/// Polls `check` (async, with [`gpustack_tests::wait::poll`]) until it is `Ok` or `deadline` passes; the
/// time it took, or the last error.
async fn until_ok<T, F: std::future::Future<Output = Result<T, String>>>(
    deadline: Duration,
    mut check: impl FnMut() -> F,
) -> Result<(T, Duration), String> {
    let start = Instant::now();
    let last = std::cell::RefCell::new(String::new());
    let got = gpustack_tests::wait::poll(deadline, || {
        let attempt = check();
        let last = &last;
        async move { attempt.await.map_err(|e| *last.borrow_mut() = e).ok() }
    })
    .await;
    got.map(|v| (v, start.elapsed())).ok_or_else(|| last.take())
}

/// The `n` slowest of `reads` that answered: (start after `from`, time taken), slowest first.
fn slowest(
    reads: &[gpustack_tests::fleet_load::Read],
    from: Instant,
    n: usize,
) -> Vec<(Duration, Duration)> {
    let mut ok: Vec<_> = reads
        .iter()
        .filter(|r| r.ok)
        .map(|r| (r.at.saturating_duration_since(from), r.took))
        .collect();
    ok.sort_by_key(|r| std::cmp::Reverse(r.1));
    ok.truncate(n);
    ok
}

fn percentile(mut v: Vec<Duration>, p: f64) -> Duration {
    v.sort();
    if v.is_empty() {
        return Duration::ZERO;
    }
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// The phase the hub's `clusters.fleet.gpustack.ai` shows for `cluster`, through the hub's
/// client (a kubectl process four times a second would take a good part of a core from the
/// fleet it measures).
async fn phase_at_hub(
    clusters: &kube::Api<kube::core::DynamicObject>,
    cluster: &str,
) -> Option<String> {
    let c = clusters.get(cluster).await.ok()?;
    c.data["status"]["phase"].as_str().map(str::to_owned)
}

/// Holds a fault for its duration, watching the hub's clusters meanwhile for the cluster to be
/// shown `Degraded`: when it first was, and its row in `kubectl get clusters` then.
async fn hold_and_watch(
    fleet: &Fleet,
    cluster: &str,
    hold: Duration,
) -> (Option<Duration>, String) {
    let resource = ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("fleet.gpustack.ai", "v1", "Cluster"),
        "clusters",
    );
    let clusters = kube::Api::all_with(fleet.hub.client().await, &resource);
    let start = Instant::now();
    let mut degraded = None;
    let mut row = String::new();
    // The fault lasts `hold` whatever happens: this is its length, not a wait for a condition.
    while start.elapsed() < hold {
        if degraded.is_none()
            && phase_at_hub(&clusters, cluster).await.as_deref() == Some("Degraded")
        {
            degraded = Some(start.elapsed());
            row = cluster_row(fleet, cluster, "Degraded").unwrap_or_default();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    (degraded, row)
}

/// One fault on cluster `i` (or the hub), held for `hold`, then healed and checked.
async fn fault(fleet: &mut Fleet, load: &Load, f: Fault, i: usize, hold: Duration) -> Figure {
    let cluster = fleet.clusters[i].name.clone();
    let before = workers(fleet).await.expect("the mirror's status");
    // The counts are the gateway process's: a killed gateway starts from none.
    let lists_before = if f == Fault::HubGatewayKilled {
        0
    } else {
        upstream_field(&before, &cluster, "relists")
            .as_u64()
            .unwrap_or(0)
    };
    load.paused
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let start = Instant::now();
    // When the hub's killed container was started again.
    let mut hub_started = None;
    let (degraded_after, degraded_row) = match f {
        Fault::Control => hold_and_watch(fleet, &cluster, hold).await,
        Fault::Partition => {
            fleet.partition(&fleet.clusters[i]);
            let seen = hold_and_watch(fleet, &cluster, hold).await;
            fleet.connect_mirror(&fleet.clusters[i]);
            seen
        }
        Fault::Freeze => {
            docker_output(&["pause", &fleet.clusters[i].api]);
            let seen = hold_and_watch(fleet, &cluster, hold).await;
            docker_output(&["unpause", &fleet.clusters[i].api]);
            seen
        }
        Fault::RestartKept | Fault::RestartWiped => {
            let c = &fleet.clusters[i];
            docker_output(&["kill", &c.api]);
            let seen = hold_and_watch(fleet, &cluster, hold).await;
            fleet.kill_cluster(i, f == Fault::RestartWiped).await;
            seen
        }
        Fault::HubGatewayKilled => {
            // A burst of new Devices in the cluster, the gateway killed while it is mirrored.
            let client = fleet.clusters[i].client().await;
            let names: Vec<String> = (0..60).map(|n| format!("burst-{n}")).collect();
            let writer = client.clone();
            let burst = tokio::spawn(async move {
                gpustack_tests::bench::create_devices(&writer, names, 4).await;
            });
            // Killed once the burst is under way: a few of its Devices are acknowledged.
            let devices = kube::Api::<kube::core::DynamicObject>::all_with(
                client,
                &gpustack_tests::inventory::devices_resource(),
            );
            let under_way = gpustack_tests::wait::poll(Duration::from_secs(30), || {
                let devices = devices.clone();
                async move {
                    let listed = devices.list(&Default::default()).await.ok()?;
                    let made = listed
                        .items
                        .iter()
                        .filter(|d| {
                            d.metadata
                                .name
                                .as_deref()
                                .is_some_and(|n| n.starts_with("burst-"))
                        })
                        .count();
                    (made >= 5).then_some(())
                }
            })
            .await;
            assert!(
                under_way.is_some(),
                "the burst's first Devices were never created"
            );
            docker_output(&["kill", "-s", "KILL", &fleet.hub.mirror]);
            burst.await.expect("the burst");
            docker_output(&["start", &fleet.hub.mirror]);
            hub_started = Some(Instant::now());
            (None, String::new())
        }
        Fault::HubWorkerKilled => {
            docker_output(&["kill", &fleet.hub.worker]);
            docker_output(&["start", &fleet.hub.worker]);
            hub_started = Some(Instant::now());
            (None, String::new())
        }
        Fault::NewCa => {
            let ca = format!("{cluster}-ca-2");
            fleet.replace_ca(i, &ca);
            let seen = hold_and_watch(fleet, &cluster, hold).await;
            // Its probe's new handshake no longer verifies: that is the reason shown.
            let status = workers(fleet).await.expect("the mirror's status");
            let reason = upstream_field(&status, &cluster, "lastError");
            assert!(
                reason.as_str().is_some_and(|r| r.contains("certificate")),
                "{cluster} with a new CA: {reason}"
            );
            // The operator gives the hub the cluster's new CA.
            fleet.subscribe(i).await;
            seen
        }
    };
    let healed = Instant::now();
    load.paused.store(true, std::sync::atomic::Ordering::SeqCst);
    let converged = until_ok(CONVERGE * 3, || mirrors_equal(fleet)).await;
    let (compared, converged_after) = match converged {
        Ok(v) => v,
        Err(e) => panic!(
            "{}: the hub did not converge: {e}\nmirror log:\n{}",
            f.name(),
            gpustack_tests::fleet::logs(&fleet.hub.mirror)
        ),
    };
    if f == Fault::HubGatewayKilled {
        // How long the restarted gateway took from opening its store to serving: what a
        // fleet read would wait through if it could connect before then.
        let started = docker_output(&["logs", "-t", "--tail", "200", &fleet.hub.mirror]);
        let start_up: Vec<String> = String::from_utf8_lossy(&started.stderr)
            .lines()
            .chain(String::from_utf8_lossy(&started.stdout).lines())
            .filter(|l| l.contains("admin token") || l.contains("serving "))
            .map(str::to_owned)
            .collect();
        eprintln!("the hub gateway's start-ups:\n{}", start_up.join("\n"));
    }
    let names = [cluster.clone()];
    fleet.wait_phases(&names, "Ready", CONVERGE * 3);
    if let Err(e) = until_ok(CONVERGE, || watcher_caught_up(fleet, load)).await {
        panic!("{}: the fleet watcher's view differs: {e}", f.name());
    }
    if let Some(started) = hub_started {
        // The hub's restarted process serves again: its reads are part of this fault's window
        // (a debug binary on a busy machine takes seconds to start; the assertions below say
        // whether and when it did).
        gpustack_tests::wait::poll(HUB_BACK, || async {
            let reads = load.reads_between(started, Instant::now());
            reads.iter().any(|r| r.ok).then_some(())
        })
        .await;
    }
    let writes = load.writes_between(start, healed);
    let missed: Vec<_> = load
        .watch
        .lock()
        .unwrap()
        .missed(&writes)
        .into_iter()
        .cloned()
        .collect();
    assert!(
        missed.is_empty(),
        "{}: the fleet watcher missed {} of {} changes, with no relist marker after them: {missed:?}",
        f.name(),
        missed.len(),
        writes.len()
    );
    let after = workers(fleet).await.expect("the mirror's status");
    let lists_after = upstream_field(&after, &cluster, "relists")
        .as_u64()
        .unwrap_or(0);
    let reads = load.reads_between(start, Instant::now());
    let failed_reads = reads.iter().filter(|r| !r.ok).count();
    let answered_503 = reads.iter().filter(|r| !r.ok && r.answered()).count();
    // Once the hub served a fleet read again, every later one must succeed.
    let back = hub_started.and_then(|s| reads.iter().find(|r| r.at >= s && r.ok).map(|r| r.at));
    let failed_once_back = reads
        .iter()
        .filter(|r| !r.ok && back.is_some_and(|b| r.at > b))
        .map(|r| {
            let at = r.at.saturating_duration_since(start);
            (at, r.took, r.code, r.reason.clone())
        })
        .collect();
    let unanswered = reads
        .iter()
        .filter(|r| !r.answered())
        .map(|r| {
            let at = r.at.saturating_duration_since(start);
            (at, r.took, r.code, r.reason.clone())
        })
        .collect();
    let mut reasons: Vec<String> = reads
        .iter()
        .filter(|r| !r.ok)
        .map(|r| format!("{:?} {}", r.code, r.reason))
        .collect();
    reasons.sort();
    reasons.dedup();
    let took: Vec<Duration> = reads.iter().filter(|r| r.ok).map(|r| r.took).collect();
    let at_mirror: Vec<Duration> = load
        .mirror_reads_between(start, Instant::now())
        .iter()
        .filter(|r| r.ok)
        .map(|r| r.took)
        .collect();
    Figure {
        fault: f,
        cluster,
        degraded_after,
        degraded_row,
        converged_after,
        reads: reads.len(),
        failed_reads,
        answered_503,
        unanswered,
        reasons,
        back_after: back.map(|b| b.saturating_duration_since(start)),
        failed_once_back,
        p99: percentile(took.clone(), 0.99),
        max: took.iter().max().copied().unwrap_or_default(),
        mirror_p99: percentile(at_mirror, 0.99),
        slowest: slowest(&reads, start, 3),
        load: std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default(),
        compared,
        writes: writes.len(),
        lists: (lists_before, lists_after),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_fleet_in_containers_rides_out_partitions_freezes_kills_and_new_cas() {
    let hold = fault_duration();
    let started = Instant::now();
    let mut fleet = Fleet::start(specs()).await;
    eprintln!("the fleet is up in {:?}", started.elapsed());

    // What an operator asks first, at the hub: each answers, naming every cluster.
    for resource in [
        "clusters",
        "devices.fleet.gpustack.ai",
        "instancetypes.fleet.gpustack.ai",
    ] {
        let mut last = String::new();
        let shown = poll_until(Duration::from_secs(60), || {
            let out = fleet.hub.kubectl(&["get", resource]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            last = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
            let names_all = resource == "instancetypes.fleet.gpustack.ai"
                || fleet.clusters.iter().all(|c| text.contains(&c.name));
            (out.status.success() && names_all && !text.is_empty()).then_some(text)
        });
        let Some(text) = shown else {
            let api = fleet
                .hub
                .kubectl(&["get", "clusters", "-v=8", "-o", "wide"]);
            eprintln!("{}", String::from_utf8_lossy(&api.stderr));
            panic!(
                "kubectl get {resource} at the hub:\n{last}\napi-resources:\n{}",
                String::from_utf8_lossy(&api.stdout)
            );
        };
        eprintln!("$ kubectl get {resource}\n{text}");
    }
    let (compared, _) = until_ok(CONVERGE * 3, || mirrors_equal(&fleet))
        .await
        .unwrap_or_else(|e| panic!("the mirrors never equalled their clusters: {e}"));
    assert!(compared > 0);

    let writers = fleet
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.kubeconfig.clone()))
        .collect();
    let load = Load::start(
        writers,
        fleet.hub.client().await,
        fleet.hub.client_without_retries().await,
        fleet.hub.mirror_of("_fleet").await,
    );

    let plan = [
        (Fault::Control, 0),
        (Fault::Partition, 0),
        (Fault::Freeze, 1),
        (Fault::RestartKept, 2),
        (Fault::RestartWiped, 0),
        (Fault::HubGatewayKilled, 1),
        (Fault::HubWorkerKilled, 2),
        (Fault::NewCa, 2),
    ];
    let only = std::env::var("GPUSTACK_FLEET_FAULTS").unwrap_or_default();
    let mut figures = Vec::new();
    for (f, i) in plan {
        if !only.is_empty() && !only.split(',').any(|o| format!("{f:?}") == o) {
            continue;
        }
        let figure = fault(&mut fleet, &load, f, i, hold).await;
        let slowest: Vec<String> = figure
            .slowest
            .iter()
            .map(|(at, took)| format!("{} ms at +{:.1} s", took.as_millis(), at.as_secs_f64()))
            .collect();
        eprintln!(
            "{}: converged in {:?}; degraded after {:?}; slowest reads {}; failed reads' reasons {:?}\n{}",
            f.name(),
            figure.converged_after,
            figure.degraded_after,
            slowest.join(", "),
            figure.reasons,
            figure.degraded_row
        );
        figures.push(figure);
    }

    eprintln!(
        "\nfault ({}s each) | cluster | Degraded after | converged after healing | fleet reads (failed; of them 503 with a reason) | read p99 | read max | read p99 at the mirror | objects compared | writes | relists before → after | load average",
        hold.as_secs()
    );
    for g in &figures {
        eprintln!(
            "{} | {} | {} | {:.1} s | {} ({}; {}) | {} ms | {} ms | {} ms | {} | {} | {} → {} | {}",
            g.fault.name(),
            g.cluster,
            g.degraded_after.map_or("not shown".to_owned(), |d| format!(
                "{:.1} s",
                d.as_secs_f64()
            )),
            g.converged_after.as_secs_f64(),
            g.reads,
            g.failed_reads,
            g.answered_503,
            g.p99.as_millis(),
            g.max.as_millis(),
            g.mirror_p99.as_millis(),
            g.compared,
            g.writes,
            g.lists.0,
            g.lists.1,
            g.load
        );
    }
    for g in &figures {
        let name = g.fault.name();
        assert!(
            g.converged_after <= CONVERGE,
            "{name}: converged only after {:?}",
            g.converged_after
        );
        if g.fault.at_hub() {
            // While the hub's own gateway or worker is down no read can succeed; each still
            // answers within the bound, with a 503 that says why (the aggregator's "APIService
            // is not available: ... connection refused" while the worker is down, the worker's
            // "could not be read from the cluster" while the gateway is), and once the hub
            // served a read again, none fails.
            eprintln!(
                "{name}: back serving {:?} after the fault began; failed reads' reasons {:?}",
                g.back_after, g.reasons
            );
            assert!(
                g.unanswered.is_empty(),
                "{name}: {} of {} fleet reads got neither success nor a 503 with a reason within {READ_BOUND:?} (start after the fault, took, code, reason): {:?}",
                g.unanswered.len(),
                g.reads,
                g.unanswered
            );
            assert!(g.back_after.is_some(), "{name}: the hub never served again");
            assert!(
                g.failed_once_back.is_empty(),
                "{name}: fleet reads failed after the hub served again (start, took, code, reason): {:?}",
                g.failed_once_back
            );
        } else {
            // Fleet reads never fail for one lost cluster: nothing on their path waits on it.
            assert_eq!(
                g.failed_reads, 0,
                "{name}: fleet reads failed or took past {READ_BOUND:?}: {:?}; of them unanswered (start after the fault, took, code, reason): {:?}",
                g.reasons, g.unanswered
            );
        }
        if g.fault.loses_a_cluster() {
            assert!(
                g.degraded_after.is_some(),
                "{name}: {} was never shown Degraded",
                g.cluster
            );
        } else if g.fault == Fault::Control {
            assert!(
                g.degraded_after.is_none(),
                "{name}: {} was shown Degraded with no fault:\n{}",
                g.cluster,
                g.degraded_row
            );
        }
        if g.fault.relists() {
            assert!(g.lists.1 > g.lists.0, "{name}: the hub did not relist");
        } else {
            assert_eq!(
                g.lists.1, g.lists.0,
                "{name}: the hub relisted instead of resuming"
            );
        }
    }
}
