//! One upstream's mirror: connect with its kubeconfig, wait (with backoff) until it serves the
//! mirrored kinds, then run one watcher per kind that writes straight into the store, and a
//! health probe. Each upstream runs in its own task, so one broken upstream never delays another.

use std::{collections::HashMap, sync::Arc, time::Duration};

use futures::{
    FutureExt, Stream, StreamExt,
    future::join_all,
    stream::{BoxStream, Peekable},
};
use kube::{
    Api, Client, Config,
    api::{DynamicObject, WatchEvent, WatchParams},
    config::KubeConfigOptions,
    core::{GroupVersionKind, discovery::Scope},
    discovery::{ApiCapabilities, ApiResource, pinned_kind},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::Value;
use tokio::{sync::Notify, task::JoinSet};
use tracing::Instrument;

use super::{
    backoff::{Backoff, READINESS, STORE, WatchRetry},
    clock,
    config::{Access, Upstream},
    failure::{MirrorError, MirrorFailure, WatchFailure},
    identity,
    kinds::MirroredKind,
    kubeconfig_policy,
    probe::ask_version,
    progress::{AbortOnDrop, NewestListed, Progress},
    read_ahead::ReadAhead,
    redact::strip_credentials,
    status::{Happening, StatusBoard},
};
use crate::hub_store::HubStore;
use gpustack_apiserver::{
    registry::{self as resources, Registry, ResourceDef},
    store::{ObjectKey, Queued, Store, fleet, mirror::SeenNames},
};

/// How a mirror behaves; [`MirrorOptions::default`] is the reference's behaviour.
#[derive(Clone, Debug)]
pub struct MirrorOptions {
    /// The kinds to mirror.
    pub kinds: Vec<MirroredKind>,
    /// How long one readiness check (connect and discovery of every kind) may take.
    pub readiness_timeout: Duration,
    /// Retry schedule of the readiness check, and of looking again for kinds the upstream did
    /// not serve yet.
    pub backoff: Backoff,
    /// How often a reached upstream is probed (`/version`); also how long it must stay without
    /// failures before `Degraded` turns back into `Ready`.
    pub probe_interval: Duration,
    /// How long a probe may take (at most the readiness timeout): an upstream that does not
    /// answer `/version` within it is `Degraded`.
    pub probe_timeout: Duration,
}

impl Default for MirrorOptions {
    fn default() -> Self {
        MirrorOptions {
            kinds: super::kinds::default_kinds(),
            readiness_timeout: Duration::from_secs(30),
            backoff: READINESS,
            // A partitioned or frozen upstream was shown Degraded only 10 s + 30 s (the
            // readiness timeout) after it was lost, so a 30 s partition could pass unseen
            // (issue 35's container fleet); now within 5 s + 3 s.
            probe_interval: Duration::from_secs(5),
            probe_timeout: Duration::from_secs(3),
        }
    }
}

/// A list in progress: the objects seen (kept by the sweep that ends it), those not yet
/// written, and their resourceVersions (the checkpoint).
#[derive(Default)]
struct Relist {
    seen: SeenNames,
    pending: Vec<(ObjectKey, Value)>,
    newest: NewestListed,
}

/// A change the watch delivered could not be stored: the watch stops, and starts again from
/// the stored progress (which never moves past an unstored change) once the store answers, so
/// that a database away for a while (a hub's PostgreSQL restarting) loses no change.
struct StoreFailed;

/// How long the store may take to answer whether it is back.
const STORE_PING: Duration = Duration::from_secs(5);

/// A watch's changes queued with the store and not yet known to be committed, with the newest
/// upstream version among them.
struct InFlight {
    writes: Vec<(String, Queued)>,
    newest: Option<String>,
}

/// A watch's events as it writes them: read ahead ([`READ_AHEAD`]), and what has arrived
/// together taken as one chunk of at most [`BATCH`], which the store commits in one batch.
fn chunked<S>(events: S) -> Peekable<BoxStream<'static, Vec<S::Item>>>
where
    S: Stream + Send + 'static,
    S::Item: Send + 'static,
{
    ReadAhead::new(events, READ_AHEAD)
        .ready_chunks(BATCH)
        .boxed()
        .peekable()
}

/// Whether `stream`'s next item has already arrived (it is kept for the next read).
fn next_ready<S: Stream + Unpin>(stream: &mut Peekable<S>) -> bool {
    matches!(
        std::pin::Pin::new(stream).peek().now_or_never(),
        Some(Some(_))
    )
}

/// The most listed objects, or changes that arrived together, written together (the store
/// commits them in one batch). Also bounds what a mirror's watch holds in memory at once:
/// twice this while it has one chunk committing and holds the next, and what it reads ahead.
/// A live chunk is what was read ahead when the last one was queued, so it is mostly about
/// [`READ_AHEAD`] long; the writer's batches still hold many, one chunk from each watch.
const BATCH: usize = 32;

/// How many decoded events a watch holds ready beyond the chunk it is writing (see
/// [`ReadAhead`]; its reader holds one more). Events that arrive beyond it wait in the
/// connection, undecoded: a decoded object takes several times its JSON's size, and every
/// upstream's every kind has a watch. With 32, a burst mirrored 12,175 objects/s against
/// 9,051 with 8, and the hub's peak memory through a sync of 50,000 was 68 MB against 63
/// (issue 17's mirror bench).
const READ_AHEAD: usize = 8;

/// How many objects one list request asks for: a mirror holds a page in memory while it is
/// written, and many upstreams may list at once. A page is held several times over while it
/// arrives (hyper's buffers, the body's text, the decoded objects): with 25 rather than 50 the
/// hub's peak heap through a sync of 10 upstreams x 5,000 Devices held 2.5 MB less for pages
/// (heaptrack; issue 17's mirror bench). With this and the smaller reader cache of the store
/// together, interleaved runs synced about 5% slower.
const LIST_PAGE: u32 = 25;

/// What the probe tells the watches when the upstream is back: how many times it came back,
/// and whether it came back as another cluster (then they list instead of resuming).
#[derive(Clone, Copy, Debug, Default)]
struct Reconnect {
    count: u64,
    another_cluster: bool,
}

/// The annotation holding a mirrored object's resourceVersion in its upstream (the mirror
/// serves the gateway's own): what a reader compares a mirror against its upstream with.
pub const UPSTREAM_VERSION: &str = "gpustack.ai/upstream-resource-version";

/// How often each kind's watch progress is written to the store.
const PROGRESS_FLUSH: Duration = Duration::from_secs(1);

/// The least time between two recounts of a mirrored kind for status.
const RECOUNT_INTERVAL: Duration = Duration::from_secs(1);

/// How long one resumed watch request lasts before it is renewed (from its newest version).
const RESUME_WATCH_SECS: u32 = 290;

/// Everything a mirror task needs.
#[derive(Clone)]
pub struct Mirror {
    /// The upstream and how it is reached.
    pub upstream: Upstream,
    /// The hub's bookkeeping and the object store beside it.
    pub hub: HubStore,
    /// The kinds the mirror serves.
    pub registry: Registry,
    /// Where the mirror reports its status.
    pub board: StatusBoard,
    /// Timeouts and retry schedules.
    pub options: MirrorOptions,
}

impl Mirror {
    /// The object store the mirrored objects are written to.
    fn store(&self) -> &Store {
        self.hub.objects()
    }

    /// Runs until aborted.
    pub async fn run(self) {
        let name = self.upstream.name.clone();
        let mut attempt = 0u32;
        let (client, mut served) = loop {
            let check = tokio::time::timeout(self.options.readiness_timeout, self.ready());
            match check.await {
                Ok(Ok(found)) => break found,
                Ok(Err(e)) => self.failed(e),
                Err(_) => self.failed(MirrorError::Timeout(self.options.readiness_timeout)),
            }
            let wait = self.options.backoff.delay(attempt);
            attempt = attempt.saturating_add(1);
            tracing::info!(upstream = %name, retry_in = ?wait, "upstream not ready");
            tokio::time::sleep(wait).await;
        };
        // A new cluster under this name: what was stored of the old one's watches goes.
        if identity::changed(&self.hub, &name, &client).await {
            tracing::warn!(upstream = %name, "the upstream is another cluster than before (its default namespace's uid changed): listing it again");
            for (_, resource, _) in &served {
                self.progress_of(resource).forget().await;
                self.board.count_relist(&name);
            }
        }
        let mut tasks = JoinSet::new();
        let (reconnect, _) = tokio::sync::watch::channel(Reconnect::default());
        let reconnect = Arc::new(reconnect);
        tasks.spawn(self.clone().probe(reconnect.clone()));
        let mut missing = self.kinds();
        let mut watched = Vec::new();
        let mut attempt = 0u32;
        loop {
            missing.retain(|k| !served.iter().any(|(m, _, _)| m == k));
            let newly = !served.is_empty() || watched.is_empty();
            for (kind, resource, caps) in &served {
                self.register(&client, resource, caps).await;
                watched.push(kind.label());
            }
            let not_served: Vec<String> = missing.iter().map(MirroredKind::label).collect();
            // The kinds to sync are recorded before their watches start: a list that completes
            // first would otherwise count against an empty set and report Ready too early.
            if newly {
                if !not_served.is_empty() {
                    tracing::warn!(upstream = %name, kinds = ?not_served, "the upstream does not serve these kinds (yet); checking again later");
                }
                self.board.record(
                    &name,
                    Happening::Reached {
                        served: watched.clone(),
                        not_served,
                    },
                );
            }
            for (kind, resource, _) in served {
                let told = reconnect.subscribe();
                tasks.spawn(
                    self.clone()
                        .watch_reconnecting(client.clone(), kind, resource, told),
                );
            }
            if missing.is_empty() {
                break;
            }
            // A kind may appear later (its CRD installed after the gateway started): look
            // again on the readiness schedule, while the served kinds are mirrored.
            tokio::time::sleep(self.options.backoff.delay(attempt)).await;
            attempt = attempt.saturating_add(1);
            let check = discover(&client, &missing);
            served = match tokio::time::timeout(self.options.readiness_timeout, check).await {
                Ok(Ok(found)) => found,
                // Reaching the upstream is the probe's and the watchers' concern.
                Ok(Err(_)) | Err(_) => Vec::new(),
            };
        }
        while tasks.join_next().await.is_some() {}
    }

    /// The kinds mirrored: the configured ones and those the subscription added.
    fn kinds(&self) -> Vec<MirroredKind> {
        let mut kinds = self.options.kinds.clone();
        for k in &self.upstream.extra_kinds {
            if !kinds.contains(k) {
                kinds.push(k.clone());
            }
        }
        kinds
    }

    /// `message` without the upstream's credentials.
    fn redact(&self, message: &str) -> String {
        let secrets: Vec<&str> = self.upstream.access.secret().into_iter().collect();
        strip_credentials(message, &secrets)
    }

    /// Reports a failure to reach the upstream or find what it serves.
    fn failed(&self, e: MirrorError) {
        self.report_failure(None, &MirrorFailure::Discovery(e));
    }

    /// Connects and checks which kinds are served (see [`discover`]).
    async fn ready(
        &self,
    ) -> Result<(Client, Vec<(MirroredKind, ApiResource, ApiCapabilities)>), MirrorError> {
        let client = connect(&self.upstream).await?;
        let served = discover(&client, &self.kinds()).await?;
        Ok((client, served))
    }

    /// Makes the mirrored cluster serve `resource`: from the upstream's CRD when it can be read
    /// (printer columns, schema), else from discovery alone. Built-in kinds need nothing.
    async fn register(&self, client: &Client, resource: &ApiResource, caps: &ApiCapabilities) {
        let cluster = &self.upstream.name;
        if self
            .registry
            .find(
                cluster,
                &resource.group,
                &resource.version,
                &resource.plural,
            )
            .is_some_and(|d| !d.custom)
        {
            return;
        }
        let crd_name = format!("{}.{}", resource.plural, resource.group);
        let crds = ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            plural: "customresourcedefinitions".into(),
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &crds);
        let from_crd = match api.get(&crd_name).await {
            Ok(crd) => {
                let (_, body) = self.entry(&crds, crd);
                resources::from_crd(&body).ok().map(|def| (def, body))
            }
            Err(_) => None,
        };
        let def = match from_crd {
            Some((def, body)) => {
                // Stored, so that after a restart the kind is served (from the stored CRD, as
                // for embedded clusters) before the upstream is reached again.
                for cluster in [cluster.as_str(), fleet::FLEET] {
                    let key = ObjectKey {
                        cluster: cluster.to_owned(),
                        group: crds.group.clone(),
                        resource: crds.plural.clone(),
                        namespace: String::new(),
                        name: crd_name.clone(),
                    };
                    if let Err(e) = self.store().mirror_put(&key, body.clone()).await {
                        tracing::warn!(upstream = %self.upstream.name, crd = %crd_name, error = %e, "storing the mirrored CRD failed");
                    }
                }
                def
            }
            None => def_from_discovery(resource, caps),
        };
        self.registry.register(fleet::FLEET, &crd_name, def.clone());
        self.registry.register(cluster, &crd_name, def);
    }

    /// [`Mirror::watch`], started again on a new connection each time the probe tells that the
    /// upstream is back after it was lost: a connection that lived through a partition can sit
    /// in TCP's retransmission backoff for many seconds after the network heals (the container
    /// fleet's partitions took 12 s to converge), while a new one answers at once. The watch
    /// resumes from the version it had stored, so nothing is listed again.
    async fn watch_reconnecting(
        self,
        mut client: Client,
        kind: MirroredKind,
        resource: ApiResource,
        mut reconnect: tokio::sync::watch::Receiver<Reconnect>,
    ) {
        loop {
            tokio::select! {
                StoreFailed = self.clone().watch(client.clone(), kind.clone(), resource.clone()) => {
                    self.wait_for_store(&kind.label()).await;
                }
                told = reconnect.changed() => {
                    if told.is_err() {
                        return;
                    }
                    // The old watch is gone (and its progress flusher with it).
                    if reconnect.borrow_and_update().another_cluster {
                        self.progress_of(&resource).forget().await;
                        self.board.count_relist(&self.upstream.name);
                    }
                    match connect(&self.upstream).await {
                        Ok(fresh) => client = fresh,
                        Err(e) => self.failed(e),
                    }
                    tracing::info!(upstream = %self.upstream.name, kind = %kind.label(), "the upstream is back: watching on a new connection");
                }
            }
        }
    }

    /// Waits until the store answers again after a write failed.
    async fn wait_for_store(&self, label: &str) {
        tracing::warn!(upstream = %self.upstream.name, kind = %label, "a change could not be stored: watching again from the stored progress once the store answers");
        let mut attempt = 0u32;
        loop {
            tokio::time::sleep(STORE.delay(attempt)).await;
            attempt = attempt.saturating_add(1);
            if self.store().ping(STORE_PING).await.is_ok() {
                return;
            }
        }
    }

    /// The stored watch progress of `resource`.
    fn progress_of(&self, resource: &ApiResource) -> Progress {
        Progress::new(
            self.hub.clone(),
            &self.upstream.name,
            &resource.group,
            &resource.plural,
        )
    }

    /// Mirrors one kind until aborted or a change cannot be stored: resumes the previous run's
    /// watch if the upstream still has its version, else (or once that fails) lists and
    /// watches with kube-runtime's watcher, which retries with backoff on its own.
    async fn watch(self, client: Client, kind: MirroredKind, resource: ApiResource) -> StoreFailed {
        let cluster = self.upstream.name.clone();
        let label = kind.label();
        let api: Api<DynamicObject> = Api::all_with(client, &resource);
        let progress = Progress::new(
            self.hub.clone(),
            &cluster,
            &resource.group,
            &resource.plural,
        );
        let _flusher = AbortOnDrop(tokio::spawn(progress.clone().flush_every(PROGRESS_FLUSH)));
        let recount = Arc::new(Notify::new());
        let _counter = AbortOnDrop(tokio::spawn(self.clone().count_on_notice(
            resource.clone(),
            label.clone(),
            recount.clone(),
        )));
        // A list is a relist when this kind was synced before: a stored version that could not
        // be resumed, or an earlier list of this watch (kube-runtime lists again after a 410).
        let stored = progress.stored().await;
        let mut synced_before = stored.is_some();
        if let Some(rv) = stored {
            let why = match self
                .resume(&api, &resource, &label, rv, &progress, &recount)
                .await
            {
                Ok(why) => why,
                Err(failed) => return failed,
            };
            tracing::info!(upstream = %cluster, kind = %label, reason = %self.redact(&why.to_string()), "relisting");
        }
        let config = watcher::Config::default().page_size(LIST_PAGE);
        let mut events =
            chunked(gpustack_watch::dynamic(api, config).backoff(WatchRetry::default()));
        let mut list = Relist::default();
        let mut live = Vec::new();
        let mut in_flight = None;
        while let Some(chunk) = events.next().await {
            // A root span per chunk of the upstream's events written here (a list page, a
            // burst of changes).
            let span = tracing::debug_span!(
                parent: None,
                "mirror sync",
                upstream = %cluster,
                kind = %label,
                events = chunk.len(),
            );
            let chunk_written = async {
                for event in chunk {
                    let event = match event {
                        Ok(watcher::Event::Apply(obj)) => {
                            live.push((obj, false));
                            continue;
                        }
                        Ok(watcher::Event::Delete(obj)) => {
                            live.push((obj, true));
                            continue;
                        }
                        other => other,
                    };
                    // Changes before a (re)list are written before it.
                    self.write_live(
                        &resource,
                        &label,
                        &mut live,
                        &mut in_flight,
                        false,
                        &progress,
                    )
                    .await?;
                    let outcome = match event {
                        Ok(e) => {
                            let step = (&mut list, &mut synced_before);
                            self.relist_step(e, step, &resource, &label, &progress)
                                .await
                        }
                        Err(e) => Err(MirrorFailure::watcher(&label, e)),
                    };
                    self.report(&label, outcome)?;
                }
                let more = next_ready(&mut events);
                let written = self
                    .write_live(
                        &resource,
                        &label,
                        &mut live,
                        &mut in_flight,
                        more,
                        &progress,
                    )
                    .await;
                recount.notify_one();
                written
            }
            .instrument(span)
            .await;
            if let Err(failed) = chunk_written {
                return failed;
            }
        }
        // kube-runtime's watcher never ends; were it to, the kind is watched again.
        StoreFailed
    }

    /// One step of a (re)list: `Init` starts it, each `InitApply` object is written (in
    /// batches), `InitDone` deletes what the upstream no longer has and records the list as a
    /// checkpoint.
    async fn relist_step(
        &self,
        event: watcher::Event<DynamicObject>,
        (list, synced_before): (&mut Relist, &mut bool),
        resource: &ApiResource,
        label: &str,
        progress: &Progress,
    ) -> Result<(), MirrorFailure> {
        match event {
            watcher::Event::Init => {
                *list = Relist::default();
                Ok(())
            }
            watcher::Event::InitApply(obj) => {
                if let Some(rv) = &obj.metadata.resource_version {
                    list.newest.see(rv);
                }
                let (key, body) = self.entry(resource, obj);
                list.seen.insert(&key.namespace, &key.name);
                list.pending.push((key, body));
                if list.pending.len() >= BATCH {
                    self.put_all(std::mem::take(&mut list.pending)).await
                } else {
                    Ok(())
                }
            }
            watcher::Event::InitDone => {
                let done = std::mem::take(list);
                self.put_all(done.pending).await?;
                self.sweep(resource, &done.seen).await?;
                // A completed list is a checkpoint worth keeping at once, and a listed kind is
                // reported with its count.
                progress.note(done.newest.get().as_deref());
                progress.flush().await;
                self.update_count(resource, label).await;
                self.board
                    .record(&self.upstream.name, Happening::Listed(label.to_owned()));
                if std::mem::replace(synced_before, true) {
                    self.board.count_relist(&self.upstream.name);
                }
                Ok(())
            }
            // Not list events: the caller writes these as changes.
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => Ok(()),
        }
    }

    /// Refreshes the kind's count in status when told to, at most once per
    /// [`RECOUNT_INTERVAL`]: a count reads every stored object of the kind, too much to do
    /// after each batch of a burst. A notice during the pause is kept, so the last change is
    /// always counted.
    async fn count_on_notice(self, resource: ApiResource, label: String, notice: Arc<Notify>) {
        loop {
            notice.notified().await;
            self.update_count(&resource, &label).await;
            tokio::time::sleep(RECOUNT_INTERVAL).await;
        }
    }

    /// Watches from `rv`, the version a previous run got to, applying every change, for as
    /// long as that works; returns why it stopped (the upstream no longer has the version, or
    /// a failure), after which the caller relists; or that a change could not be stored.
    async fn resume(
        &self,
        api: &Api<DynamicObject>,
        resource: &ApiResource,
        label: &str,
        mut rv: String,
        progress: &Progress,
        recount: &Notify,
    ) -> Result<MirrorFailure, StoreFailed> {
        let stopped = |source: WatchFailure| MirrorFailure::Watch {
            kind: label.to_owned(),
            source,
        };
        let params = WatchParams {
            bookmarks: true,
            ..WatchParams::default().timeout(RESUME_WATCH_SECS)
        };
        let mut announced = false;
        let mut live = Vec::new();
        let mut in_flight = None;
        loop {
            let mut stream = match api.watch(&params, &rv).await {
                Ok(s) => chunked(s),
                Err(e) => return Ok(stopped(WatchFailure::Request(e))),
            };
            if !announced {
                // The upstream took the version: the stored mirror plus what follows is its
                // current state.
                announced = true;
                tracing::info!(upstream = %self.upstream.name, kind = %label, %rv, "resumed the watch");
                self.board
                    .record(&self.upstream.name, Happening::Listed(label.to_owned()));
                self.board.count_resume(&self.upstream.name);
                recount.notify_one();
            }
            while let Some(chunk) = stream.next().await {
                let mut stop = None;
                for event in chunk {
                    match event {
                        Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj)) => {
                            rv = obj.metadata.resource_version.clone().unwrap_or(rv);
                            live.push((obj, false));
                        }
                        Ok(WatchEvent::Deleted(obj)) => {
                            rv = obj.metadata.resource_version.clone().unwrap_or(rv);
                            live.push((obj, true));
                        }
                        Ok(WatchEvent::Bookmark(b)) => {
                            rv = b.metadata.resource_version;
                            progress.note(Some(&rv));
                        }
                        Ok(WatchEvent::Error(e)) if e.code == 410 => {
                            stop = Some(stopped(WatchFailure::Expired(rv.clone())));
                            break;
                        }
                        Ok(WatchEvent::Error(e)) => {
                            stop = Some(stopped(WatchFailure::Upstream(e.message)));
                            break;
                        }
                        Err(e) => {
                            stop = Some(stopped(WatchFailure::Request(e)));
                            break;
                        }
                    }
                }
                if let Some(why) = stop {
                    let written = self
                        .write_live(resource, label, &mut live, &mut in_flight, false, progress)
                        .await;
                    recount.notify_one();
                    written?;
                    return Ok(why);
                }
                let more = next_ready(&mut stream);
                let written = self
                    .write_live(resource, label, &mut live, &mut in_flight, more, progress)
                    .await;
                recount.notify_one();
                written?;
            }
        }
    }

    /// Queues the changes collected in `live` behind those `in_flight`, then waits for
    /// `in_flight`'s to commit. Where `more_ready` (the next chunk of the watch has arrived),
    /// the new ones stay in flight while it is decoded: the writer commits one chunk while the
    /// next is read, and the store applies changes in the order they were queued, so a change
    /// is never overtaken by an older one to the same object. Otherwise they are waited for
    /// too: what comes next (a quiet watch, a relist, a stop) finds them committed, counted
    /// and in the watch's progress. Any change the store did not take stops the watch.
    async fn write_live(
        &self,
        resource: &ApiResource,
        label: &str,
        live: &mut Vec<(DynamicObject, bool)>,
        in_flight: &mut Option<InFlight>,
        more_ready: bool,
        progress: &Progress,
    ) -> Result<(), StoreFailed> {
        let queued = self.queue_live(resource, live).await;
        if let Some(earlier) = in_flight.take() {
            let settled = self.settle(earlier, progress).await;
            self.report(label, settled)?;
        }
        match queued {
            Ok(Some(now)) if !more_ready => {
                let settled = self.settle(now, progress).await;
                self.report(label, settled)
            }
            Ok(now) => {
                *in_flight = now;
                Ok(())
            }
            Err(e) => self.report(label, Err(e)),
        }
    }

    /// Queues the changes collected in `live` (of several changes to one object only the last
    /// is written) and empties it; `None` when there were none.
    async fn queue_live(
        &self,
        resource: &ApiResource,
        live: &mut Vec<(DynamicObject, bool)>,
    ) -> Result<Option<InFlight>, MirrorFailure> {
        if live.is_empty() {
            return Ok(None);
        }
        let newest = live
            .iter()
            .rev()
            .find_map(|(o, _)| o.metadata.resource_version.clone());
        let mut last: HashMap<(String, String), (ObjectKey, Value, bool)> = HashMap::new();
        for (obj, gone) in live.drain(..) {
            let (key, body) = self.entry(resource, obj);
            last.insert((key.namespace.clone(), key.name.clone()), (key, body, gone));
        }
        let mut writes = Vec::with_capacity(last.len());
        for (key, body, gone) in last.into_values() {
            let queued = if gone {
                self.store().queue_mirror_delete(&key).await
            } else {
                self.store().queue_mirror_put(&key, body).await
            };
            let queued = queued.map_err(|source| MirrorFailure::Write {
                name: key.name.clone(),
                source,
            })?;
            writes.push((key.name, queued));
        }
        Ok(Some(InFlight { writes, newest }))
    }

    /// Waits for `queued`'s changes to commit; then its newest version is the watch's progress.
    async fn settle(&self, queued: InFlight, progress: &Progress) -> Result<(), MirrorFailure> {
        // All are queued already, so waiting for each in turn takes no longer than together.
        for (name, q) in queued.writes {
            q.outcome()
                .await
                .map_err(|source| MirrorFailure::Write { name, source })?;
        }
        progress.note(queued.newest.as_deref());
        self.board.record(&self.upstream.name, Happening::Changed);
        Ok(())
    }

    /// Reports a failure of `label`'s mirroring, if any, in status and the log; one of the
    /// store's stops the watch.
    fn report(&self, label: &str, outcome: Result<(), MirrorFailure>) -> Result<(), StoreFailed> {
        match outcome {
            Ok(()) => Ok(()),
            Err(e) => {
                self.report_failure(Some(label), &e);
                if e.in_store() {
                    Err(StoreFailed)
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Records `e` in status (with its phase) and the log, credentials stripped.
    fn report_failure(&self, label: Option<&str>, e: &MirrorFailure) {
        let message = self.redact(&super::failure::reason(e));
        let phase = e.phase();
        tracing::warn!(upstream = %self.upstream.name, kind = label, phase = phase.as_str(), error = %message, "mirror failure");
        self.board
            .record(&self.upstream.name, Happening::Failed { phase, message });
    }

    /// Refreshes the kind's object count in status.
    async fn update_count(&self, resource: &ApiResource, label: &str) {
        let cluster = &self.upstream.name;
        if let Ok(n) = self
            .store()
            .count(cluster, &resource.group, &resource.plural)
            .await
        {
            self.board.set_count(cluster, label, n);
        }
    }

    /// The store key and body of a mirrored object: `managedFields` stripped (they can be half
    /// of an object) and the type set (list items come without it). The body is assembled from
    /// the decoded parts, which are moved, not copied: only the metadata is serialized again.
    fn entry(&self, resource: &ApiResource, obj: DynamicObject) -> (ObjectKey, Value) {
        let DynamicObject {
            mut metadata, data, ..
        } = obj;
        metadata.managed_fields = None;
        // The gateway serves its own versions; the upstream's stays readable beside them.
        if let Some(rv) = &metadata.resource_version {
            metadata
                .annotations
                .get_or_insert_default()
                .insert(UPSTREAM_VERSION.to_owned(), rv.clone());
        }
        let key = ObjectKey {
            cluster: self.upstream.name.clone(),
            group: resource.group.clone(),
            resource: resource.plural.clone(),
            namespace: metadata.namespace.clone().unwrap_or_default(),
            name: metadata.name.clone().unwrap_or_default(),
        };
        let mut body = serde_json::Map::new();
        body.insert("apiVersion".into(), resource.api_version.clone().into());
        body.insert("kind".into(), resource.kind.clone().into());
        body.insert(
            "metadata".into(),
            serde_json::to_value(&metadata).unwrap_or_default(),
        );
        if let Value::Object(fields) = data {
            for (k, v) in fields {
                if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    body.insert(k, v);
                }
            }
        }
        (key, Value::Object(body))
    }

    /// Writes one mirrored object (the fleet view is derived from it).
    async fn put(&self, key: ObjectKey, body: Value) -> Result<(), MirrorFailure> {
        self.store()
            .mirror_put(&key, body)
            .await
            .map(|_| ())
            .map_err(|source| MirrorFailure::Write {
                name: key.name.clone(),
                source,
            })
    }

    /// Ends a relist: deletes what the upstream no longer has.
    async fn sweep(&self, resource: &ApiResource, seen: &SeenNames) -> Result<(), MirrorFailure> {
        self.store()
            .mirror_sweep(&self.upstream.name, &resource.group, &resource.plural, seen)
            .await
            .map(|_| ())
            .map_err(MirrorFailure::Sweep)
    }

    /// Writes listed objects concurrently, so the store's writer commits them together.
    async fn put_all(&self, batch: Vec<(ObjectKey, Value)>) -> Result<(), MirrorFailure> {
        let results = join_all(batch.into_iter().map(|(key, body)| self.put(key, body))).await;
        results.into_iter().collect()
    }

    /// Asks the upstream for its version every probe interval: detects an upstream that is
    /// down or frozen even while its watches have nothing to say. Each probe is a new
    /// connection (a new TLS handshake): the watches' connections stay trusted after the
    /// upstream's serving certificate changed, and only a handshake tells that it no longer
    /// verifies against the CA the hub was given. When the upstream answers again after a
    /// failure it tells the watches to reconnect (`reconnect` counts the recoveries).
    async fn probe(self, reconnect: Arc<tokio::sync::watch::Sender<Reconnect>>) {
        let mut tick = tokio::time::interval(self.options.probe_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut lost = false;
        loop {
            tick.tick().await;
            let timeout = self
                .options
                .probe_timeout
                .min(self.options.readiness_timeout);
            let asked = match connect(&self.upstream).await {
                Ok(client) => ask_version(&client, timeout).await.map(|()| client),
                Err(e) => Err(e),
            };
            // An upstream that answers with its clock far off is shown Degraded, and stays
            // so while it is (it is never quiet long enough to be Ready again).
            let asked = match asked {
                Ok(client) => clock::check(&client, timeout).await.map(|()| client),
                Err(e) => Err(e),
            };
            match asked {
                Ok(client) => {
                    if std::mem::take(&mut lost) {
                        let another =
                            identity::changed(&self.hub, &self.upstream.name, &client).await;
                        if another {
                            tracing::warn!(upstream = %self.upstream.name, "the upstream came back as another cluster (its default namespace's uid changed): listing it again");
                        }
                        reconnect.send_modify(|r| {
                            r.count += 1;
                            r.another_cluster = another;
                        });
                    }
                    self.board.record(&self.upstream.name, Happening::ProbeOk);
                }
                Err(e) => {
                    lost = true;
                    self.failed(e);
                }
            }
        }
    }
}

/// Which of `kinds` the upstream serves. A kind that is not served is left out; any other
/// failure fails the check.
async fn discover(
    client: &Client,
    kinds: &[MirroredKind],
) -> Result<Vec<(MirroredKind, ApiResource, ApiCapabilities)>, MirrorError> {
    let mut served = Vec::new();
    for k in kinds {
        let gvk = GroupVersionKind::gvk(&k.group, &k.version, &k.kind);
        match pinned_kind(client, &gvk).await {
            Ok((resource, caps)) => served.push((k.clone(), resource, caps)),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(kube::Error::Discovery(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(served)
}

/// A client for the upstream: from its kubeconfig and context, or for the GPUStack server's
/// proxy with the subscription's token.
pub async fn connect(u: &Upstream) -> Result<Client, MirrorError> {
    let config = match &u.access {
        Access::Kubeconfig {
            path: Some(path),
            context,
        } => {
            let origin = if u.from_operator_file {
                kubeconfig_policy::Origin::OperatorFile
            } else {
                kubeconfig_policy::Origin::Subscription
            };
            let kubeconfig = kubeconfig_policy::load(path, origin)?;
            from_kubeconfig(kubeconfig, context).await?
        }
        // Checked again: a stored subscription may predate a rule.
        Access::KubeconfigData { data, context } => {
            let kubeconfig = kubeconfig_policy::parse(
                &data.0,
                kubeconfig_policy::INLINE_SOURCE,
                kubeconfig_policy::Origin::Subscription,
            )?;
            from_kubeconfig(kubeconfig, context).await?
        }
        Access::Kubeconfig {
            path: None,
            context: None,
        } => Config::infer()
            .await
            .map_err(|e| MirrorError::Config(e.to_string()))?,
        Access::Kubeconfig {
            path: None,
            context,
        } => {
            let options = KubeConfigOptions {
                context: context.clone(),
                ..Default::default()
            };
            Config::from_kubeconfig(&options).await?
        }
        Access::GpustackApi { url, token } => {
            let uri = url
                .parse()
                .map_err(|e| MirrorError::Config(format!("the proxy URL {url}: {e}")))?;
            let mut config = Config::new(uri);
            config.accept_invalid_certs = true;
            config.auth_info.token = token.clone().map(secrecy::SecretString::from);
            config
        }
    };
    // Every response is bounded: a peer's answer costs the hub a known amount of memory; every
    // request carries the trace context of the span it is sent from (the mirror sync's), so an
    // upstream that traces joins the hub's trace.
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(builder
        .with_layer(&super::bounded::BoundLayer)
        .with_layer(&gpustack_serving::trace_context::InjectLayer)
        .build())
}

/// The client configuration of a checked kubeconfig, in `context` (else its current one).
async fn from_kubeconfig(
    kubeconfig: kube::config::Kubeconfig,
    context: &Option<String>,
) -> Result<Config, MirrorError> {
    let options = KubeConfigOptions {
        context: context.clone(),
        ..Default::default()
    };
    Ok(Config::from_custom_kubeconfig(kubeconfig, &options).await?)
}

/// A served kind known only from discovery: no printer columns, no schema.
pub fn def_from_discovery(r: &ApiResource, caps: &ApiCapabilities) -> ResourceDef {
    ResourceDef {
        group: r.group.clone(),
        storage_group: r.group.clone(),
        versions: vec![r.version.clone()],
        kind: r.kind.clone(),
        list_kind: format!("{}List", r.kind),
        plural: r.plural.clone(),
        singular: r.kind.to_ascii_lowercase(),
        namespaced: caps.scope == Scope::Namespaced,
        short_names: Vec::new(),
        categories: Vec::new(),
        verbs: resources::READ_VERBS
            .iter()
            .map(|v| v.to_string())
            .collect(),
        subresources: caps
            .subresources
            .iter()
            .filter(|(s, _)| s.plural == "status")
            .map(|_| resources::Subresource {
                name: "status".into(),
                verbs: vec!["get".into()],
                kind: None,
            })
            .collect(),
        columns: Vec::new(),
        selectable_fields: Vec::new(),
        custom: true,
        schema: None,
        defaults_on_read: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mirror of upstream `east` writing into `store` (never connected: these tests hand it
    /// watch events themselves).
    fn mirror_into(store: Store) -> Mirror {
        Mirror {
            upstream: Upstream {
                name: "east".into(),
                access: Access::Kubeconfig {
                    path: None,
                    context: None,
                },
                extra_kinds: Vec::new(),
                from_operator_file: true,
                cluster_spec: None,
            },
            hub: HubStore::on_sqlite(store),
            registry: Registry::new(),
            board: StatusBoard::new(Duration::from_secs(10)),
            options: MirrorOptions::default(),
        }
    }

    fn devices() -> ApiResource {
        ApiResource {
            group: "worker.gpustack.ai".into(),
            version: "v1alpha1".into(),
            api_version: "worker.gpustack.ai/v1alpha1".into(),
            kind: "Devices".into(),
            plural: "devices".into(),
        }
    }

    /// Watch events adding `names`, the upstream's versions counting up from `from`.
    fn added(names: std::ops::Range<usize>, from: usize) -> Vec<(DynamicObject, bool)> {
        names
            .map(|i| {
                let mut obj = DynamicObject::new(&format!("d-{i}"), &devices());
                obj.metadata.resource_version = Some((from + i).to_string());
                obj.data = serde_json::json!({"spec": {"n": i}});
                (obj, false)
            })
            .collect()
    }

    /// A Devices watch's writing side: a mirror into a store of its own, the watch's progress
    /// and what it has in flight.
    struct WatchWriting {
        _dir: tempfile::TempDir,
        mirror: Mirror,
        progress: Progress,
        in_flight: Option<InFlight>,
    }

    impl WatchWriting {
        async fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(&dir.path().join("db")).await.unwrap();
            let progress = Progress::new(
                HubStore::on_sqlite(store.clone()),
                "east",
                "worker.gpustack.ai",
                "devices",
            );
            WatchWriting {
                _dir: dir,
                mirror: mirror_into(store),
                progress,
                in_flight: None,
            }
        }

        /// Writes the events adding `names` (versions `100 + i`), as [`Mirror::watch`] does
        /// with a chunk, `more_ready` telling whether the next chunk has arrived.
        async fn write(&mut self, names: std::ops::Range<usize>, more_ready: bool) {
            let mut live = added(names, 100);
            let (mirror, progress) = (&self.mirror, &self.progress);
            let written = mirror
                .write_live(
                    &devices(),
                    "Devices",
                    &mut live,
                    &mut self.in_flight,
                    more_ready,
                    progress,
                )
                .await;
            assert!(written.is_ok(), "the store took the changes");
            assert!(live.is_empty());
        }

        /// How many Devices are stored, and the resume point the watch has recorded.
        async fn committed(&self) -> (u64, Option<String>) {
            let stored = self
                .mirror
                .store()
                .count("east", "worker.gpustack.ai", "devices");
            let stored = stored.await.unwrap();
            self.progress.flush().await;
            (stored, self.progress.stored().await)
        }
    }

    #[tokio::test]
    async fn a_chunk_with_nothing_after_it_is_committed_and_recorded_before_the_watch_reads_on() {
        let mut watch = WatchWriting::new().await;
        watch.write(0..5, false).await;
        assert!(watch.in_flight.is_none(), "nothing is left in flight");
        assert_eq!(watch.committed().await, (5, Some("104".into())));
    }

    #[tokio::test]
    async fn a_chunk_stays_in_flight_while_the_next_is_read_and_settles_behind_it() {
        let mut watch = WatchWriting::new().await;
        watch.write(0..5, true).await;
        assert!(
            watch.in_flight.is_some(),
            "kept in flight: more has arrived"
        );
        watch.write(5..8, false).await;
        assert!(watch.in_flight.is_none());
        assert_eq!(watch.committed().await, (8, Some("107".into())));
    }
}
