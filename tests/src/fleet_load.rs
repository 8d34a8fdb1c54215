//! What runs against the container fleet while faults are made: writers changing Devices and
//! InstanceTypes in every cluster (never the nodes' Devices, which their `device-manager serve`
//! owns: the writers keep Devices of their own), a client listing the fleet (each read timed, bounded to
//! 1 s) and one watching it (kube-runtime's watcher, whose `Init` is the relist marker). Each
//! records what it did with the time, so a fault's window can be judged afterwards. A second
//! reader lists the same Devices at the mirror's fleet view directly, so that a slow fleet read
//! can be told apart: the gateway's own time, or the hops in front of it (the hub cluster's
//! aggregation and the hub worker).

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use kube::{
    Api, ResourceExt,
    api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;

use crate::{fleet::client_of, inventory::devices_resource};

/// The annotation the mirror keeps the upstream's resourceVersion in.
pub const UPSTREAM_VERSION: &str = "gpustack.ai/upstream-resource-version";
/// The annotation the writers bump.
const WRITE_MARK: &str = "fleet.test/write";

/// The worker's InstanceTypes.
pub fn instancetypes_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("worker.gpustack.ai", "v1alpha1", "InstanceType"),
        "instancetypes",
    )
}

/// The fleet's Devices at the hub (`CLUSTER.NODE`).
pub fn fleet_devices_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("fleet.gpustack.ai", "v1", "Devices"),
        "devices",
    )
}

/// One write that the cluster acknowledged: what changed, and the version it got.
#[derive(Clone, Debug)]
pub struct Write {
    pub at: Instant,
    pub cluster: String,
    pub name: String,
    pub uid: String,
    pub rv: u64,
    pub deleted: bool,
}

/// One fleet read: when it started, how long it took, and what answered within
/// [`READ_BOUND`].
#[derive(Clone, Debug)]
pub struct Read {
    pub at: Instant,
    pub took: Duration,
    /// Answered with success within the bound.
    pub ok: bool,
    /// The answer's status code, when one came within the bound (`None`: no answer in time,
    /// or no connection).
    pub code: Option<u16>,
    /// A failure's reason: the `Status` message answered, or what the client saw.
    pub reason: String,
}

impl Read {
    /// Answered within the bound: with success, or 503 and a reason (what a fleet read may
    /// answer while the hub's own gateway or worker is down).
    pub fn answered(&self) -> bool {
        self.ok || (self.code == Some(503) && !self.reason.is_empty())
    }
}

/// What the fleet watcher saw.
#[derive(Default)]
pub struct WatchLog {
    /// Current view: fleet name → (uid, upstream version).
    pub view: BTreeMap<String, (String, u64)>,
    /// Every (fleet name, upstream version) seen, with when.
    pub seen: Vec<(Instant, String, u64)>,
    /// When a (re)list started: the relist markers.
    pub relists: Vec<Instant>,
    /// While a list is in progress, what it has delivered.
    listing: Option<BTreeMap<String, (String, u64)>>,
}

/// A write's Devices object of the fleet: `CLUSTER.NAME`.
pub fn fleet_name(cluster: &str, name: &str) -> String {
    format!("{cluster}.{name}")
}

fn upstream_version(o: &DynamicObject) -> u64 {
    o.annotations()
        .get(UPSTREAM_VERSION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl WatchLog {
    fn apply(&mut self, event: watcher::Event<DynamicObject>) {
        let now = Instant::now();
        match event {
            watcher::Event::Init => {
                self.relists.push(now);
                self.listing = Some(BTreeMap::new());
            }
            watcher::Event::InitApply(o) => {
                let (name, uid, rv) = (
                    o.name_any(),
                    o.uid().unwrap_or_default(),
                    upstream_version(&o),
                );
                self.seen.push((now, name.clone(), rv));
                if let Some(l) = &mut self.listing {
                    l.insert(name, (uid, rv));
                }
            }
            watcher::Event::InitDone => {
                if let Some(l) = self.listing.take() {
                    self.view = l;
                }
            }
            watcher::Event::Apply(o) => {
                let (name, uid, rv) = (
                    o.name_any(),
                    o.uid().unwrap_or_default(),
                    upstream_version(&o),
                );
                self.seen.push((now, name.clone(), rv));
                self.view.insert(name, (uid, rv));
            }
            watcher::Event::Delete(o) => {
                let name = o.name_any();
                self.seen.push((now, name.clone(), upstream_version(&o)));
                self.view.remove(&name);
            }
        }
    }

    /// The writes of `writes` the watcher neither saw (that version or a later one of the same
    /// object, or its deletion) nor covered by a relist marker after them.
    pub fn missed<'a>(&self, writes: &'a [Write]) -> Vec<&'a Write> {
        writes
            .iter()
            .filter(|w| {
                let name = fleet_name(&w.cluster, &w.name);
                let relisted = self.relists.iter().any(|r| *r >= w.at);
                let seen = self
                    .seen
                    .iter()
                    .any(|(_, n, rv)| *n == name && (*rv >= w.rv || w.deleted));
                !relisted && !seen
            })
            .collect()
    }
}

/// The load: writers, reader and watcher, until stopped.
pub struct Load {
    stop: Arc<AtomicBool>,
    /// Writers pause while set (the checks after a fault compare a settled fleet).
    pub paused: Arc<AtomicBool>,
    pub writes: Arc<Mutex<Vec<Write>>>,
    pub failed_writes: Arc<AtomicU64>,
    pub reads: Arc<Mutex<Vec<Read>>>,
    /// The same list at the mirror's fleet view, straight from the gateway.
    pub mirror_reads: Arc<Mutex<Vec<Read>>>,
    pub watch: Arc<Mutex<WatchLog>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Starts a writer per cluster (its name and admin kubeconfig), a reader of the hub's
    /// fleet with `reader` (a client that does not retry: a 503 is what the hub answered) and
    /// a watcher with `hub`, and a reader of `mirror` (a client of the mirror's
    /// `/clusters/_fleet`).
    pub fn start(
        clusters: Vec<(String, PathBuf)>,
        hub: kube::Client,
        reader: kube::Client,
        mirror: kube::Client,
    ) -> Load {
        let mut load = Load {
            stop: Arc::new(AtomicBool::new(false)),
            paused: Arc::new(AtomicBool::new(false)),
            writes: Default::default(),
            failed_writes: Default::default(),
            reads: Default::default(),
            mirror_reads: Default::default(),
            watch: Default::default(),
            tasks: Vec::new(),
        };
        for (name, kubeconfig) in clusters {
            load.tasks.push(tokio::spawn(write(
                name,
                kubeconfig,
                load.stop.clone(),
                load.paused.clone(),
                load.writes.clone(),
                load.failed_writes.clone(),
            )));
        }
        load.tasks.push(tokio::spawn(read(
            reader,
            "/apis/fleet.gpustack.ai/v1/devices",
            load.stop.clone(),
            load.reads.clone(),
        )));
        load.tasks.push(tokio::spawn(read(
            mirror,
            "/apis/worker.gpustack.ai/v1alpha1/devices",
            load.stop.clone(),
            load.mirror_reads.clone(),
        )));
        load.tasks
            .push(tokio::spawn(watch(hub, load.watch.clone())));
        load
    }

    /// The reads at the hub that started in `[from, to)`.
    pub fn reads_between(&self, from: Instant, to: Instant) -> Vec<Read> {
        between(&self.reads, from, to)
    }

    /// The reads at the mirror that started in `[from, to)`.
    pub fn mirror_reads_between(&self, from: Instant, to: Instant) -> Vec<Read> {
        between(&self.mirror_reads, from, to)
    }

    /// The writes acknowledged in `[from, to)`.
    pub fn writes_between(&self, from: Instant, to: Instant) -> Vec<Write> {
        let writes = self.writes.lock().unwrap();
        writes
            .iter()
            .filter(|w| w.at >= from && w.at < to)
            .cloned()
            .collect()
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop();
    }
}

fn between(reads: &Mutex<Vec<Read>>, from: Instant, to: Instant) -> Vec<Read> {
    let reads = reads.lock().unwrap();
    reads
        .iter()
        .filter(|r| r.at >= from && r.at < to)
        .cloned()
        .collect()
}

/// How often each writer writes.
const WRITE_EVERY: Duration = Duration::from_millis(150);
/// How often the reader lists the fleet.
const READ_EVERY: Duration = Duration::from_millis(100);
/// A fleet read must answer within this.
pub const READ_BOUND: Duration = Duration::from_secs(1);

/// How many Devices objects each writer keeps annotating (`load-N`, created when missing).
const KEPT: u64 = 2;

/// A cluster's writer: in turn annotates one of its own Devices objects (creating it where it
/// is missing, as after a wiped restart), annotates an InstanceType, and creates or deletes a
/// scratch Devices object. The nodes' Devices are their agents': never written here. Each
/// acknowledged write is recorded. After a failure its client is made again from
/// `kubeconfig` (a wiped cluster has a new token).
async fn write(
    cluster: String,
    kubeconfig: PathBuf,
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Write>>>,
    failed: Arc<AtomicU64>,
) {
    let mut client = None;
    let mut n: u64 = 0;
    while !stop.load(Ordering::SeqCst) {
        let c = match &client {
            Some(c) => c,
            None => client.insert(client_of(&kubeconfig).await),
        };
        let devs: Api<DynamicObject> = Api::all_with(c.clone(), &devices_resource());
        let types: Api<DynamicObject> = Api::all_with(c.clone(), &instancetypes_resource());
        tokio::time::sleep(WRITE_EVERY).await;
        if paused.load(Ordering::SeqCst) {
            continue;
        }
        n += 1;
        let mark = json!({"metadata": {"annotations": {WRITE_MARK: n.to_string()}}});
        let patch = Patch::Merge(&mark);
        // What was written: the object as acknowledged, whether it was a Devices deletion,
        // and whether it is a Devices object (the fleet watcher sees those).
        let step = async {
            match n % 4 {
                0 | 1 => {
                    let name = format!("load-{}", (n / 4) % KEPT);
                    match devs.patch(&name, &PatchParams::default(), &patch).await {
                        Ok(o) => Ok(Some((o, false, true))),
                        Err(kube::Error::Api(s)) if s.code == 404 => {
                            let mut obj = DynamicObject::new(&name, &devices_resource());
                            obj.data = json!({"spec": {}});
                            obj.metadata.annotations =
                                Some([(WRITE_MARK.to_owned(), n.to_string())].into());
                            let o = devs.create(&PostParams::default(), &obj).await?;
                            Ok(Some((o, false, true)))
                        }
                        Err(e) => Err(e),
                    }
                }
                2 => {
                    let list = types.list(&ListParams::default()).await?;
                    let Some(first) = list.items.into_iter().next() else {
                        return Ok(None);
                    };
                    let o = types
                        .patch(&first.name_any(), &PatchParams::default(), &patch)
                        .await?;
                    Ok(Some((o, false, false)))
                }
                _ => {
                    let name = format!("scratch-{}", (n / 4) % 5);
                    match devs.delete(&name, &Default::default()).await {
                        Ok(gone) => Ok(gone.left().map(|o| (o, true, true))),
                        Err(kube::Error::Api(s)) if s.code == 404 => {
                            let mut obj = DynamicObject::new(&name, &devices_resource());
                            obj.data = json!({"spec": {}});
                            let o = devs.create(&PostParams::default(), &obj).await?;
                            Ok(Some((o, false, true)))
                        }
                        Err(e) => Err(e),
                    }
                }
            }
        };
        let done: Result<Result<Option<_>, kube::Error>, _> =
            tokio::time::timeout(Duration::from_secs(3), step).await;
        match done {
            Ok(Ok(Some((o, deleted, true)))) => {
                let rv = o
                    .resource_version()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                log.lock().unwrap().push(Write {
                    at: Instant::now(),
                    cluster: cluster.clone(),
                    name: o.name_any(),
                    uid: o.uid().unwrap_or_default(),
                    rv,
                    deleted,
                });
            }
            Ok(Ok(_)) => {}
            _ => {
                failed.fetch_add(1, Ordering::Relaxed);
                client = None;
            }
        }
    }
}

/// Lists `path` of `client` every [`READ_EVERY`], each within [`READ_BOUND`]: a read is the
/// whole answer, read to its end; not decoded into objects here, so that the time is the
/// fleet's and not this (debug) test client's JSON decoding. A failure's status code and
/// `Status` message are kept.
async fn read(
    client: kube::Client,
    path: &'static str,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Read>>>,
) {
    while !stop.load(Ordering::SeqCst) {
        let at = Instant::now();
        let request = http::Request::get(path)
            .body(Vec::new())
            .expect("a request");
        let answer = tokio::time::timeout(READ_BOUND, answer(&client, request)).await;
        let took = at.elapsed();
        let (code, reason) = match answer {
            Ok(Ok((code, reason))) => (Some(code), reason),
            Ok(Err(e)) => (None, e),
            Err(_) => (None, format!("no answer within {READ_BOUND:?}")),
        };
        log.lock().unwrap().push(Read {
            at,
            took,
            ok: code.is_some_and(|c| (200..300).contains(&c)),
            code,
            reason,
        });
        tokio::time::sleep(READ_EVERY.saturating_sub(took)).await;
    }
}

/// Sends `request` and reads its answer to the end: the status code and, for a failure, the
/// `Status` message (or the body's start).
async fn answer(
    client: &kube::Client,
    request: http::Request<Vec<u8>>,
) -> Result<(u16, String), String> {
    use http_body_util::BodyExt;
    let request = request.map(kube::client::Body::from);
    let response = client.send(request).await.map_err(|e| e.to_string())?;
    let code = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if (200..300).contains(&code) {
        return Ok((code, String::new()));
    }
    let reason = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
    Ok((code, reason))
}

/// Watches the fleet's Devices with kube-runtime's watcher (which relists on its own when it
/// must), recording every event.
async fn watch(hub: kube::Client, log: Arc<Mutex<WatchLog>>) {
    let api: Api<DynamicObject> = Api::all_with(hub, &fleet_devices_resource());
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(e) = events.next().await {
        if let Ok(e) = e {
            log.lock().unwrap().apply(e);
        }
    }
}
