//! The set of mirrored upstreams, which changes at run time: `POST /apis/workers` subscribes
//! (asynchronously: the mirror task starts, and its progress shows in status), `DELETE`
//! unsubscribes and removes the upstream's mirrored objects. Subscriptions made through the API
//! are stored and come back after a restart; those of the `--upstreams` file come from the file
//! each time (and win over a stored one of the same name).
//!
//! Replicas sharing a PostgreSQL database share the stored subscriptions: each looks at them
//! every [`FOLLOW_EVERY`] and starts what another replica subscribed, restarts what it
//! subscribed again with other settings, and stops serving what it unsubscribed (whose lease
//! the unsubscribing replica retired first, so that no replica writes its mirror while its
//! objects are removed). A replica serves the kinds of an upstream another replica mirrors from
//! the CRDs stored for it, read when it starts following and again when the store's changes
//! show that upstream's CRDs changed.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use tokio::{
    sync::{Mutex, broadcast},
    task::JoinHandle,
};

use super::{
    config::{ConnMode, Upstream},
    run::{Mirror, MirrorOptions},
    status::StatusBoard,
};
use crate::hub_store::HubStore;
use gpustack_apiserver::{
    hosting::{Hosting, HostingError},
    registry::Registry,
    store::{ObjectKey, StoreError, StoredEvent, fleet::FLEET},
};

/// How often each upstream's last sync time is written to the store.
const SYNC_TIME_FLUSH: Duration = Duration::from_secs(5);

/// How often a replica on PostgreSQL looks at the stored subscriptions for what other replicas
/// subscribed or unsubscribed.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// Where an upstream's CRDs are stored: the kinds a following replica serves for it.
const CRD_GROUP: &str = "apiextensions.k8s.io";
const CRD_RESOURCE: &str = "customresourcedefinitions";

/// Where a subscription comes from.
#[derive(Clone, Debug, PartialEq)]
enum Source {
    /// The `--upstreams` file: never stored.
    File,
    /// The API here: stored (as this spec) by this subscribe.
    Api(serde_json::Value),
    /// The store (stored before this start, or by another replica), as this spec.
    Stored(serde_json::Value),
}

impl Source {
    /// The spec as stored, if it is.
    fn spec(&self) -> Option<&serde_json::Value> {
        match self {
            Source::File => None,
            Source::Api(spec) | Source::Stored(spec) => Some(spec),
        }
    }
}

/// What a subscribe did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not subscribed before: the mirror started.
    Started,
    /// Already subscribed, and not forced: nothing changed.
    Unchanged,
    /// Already subscribed and forced: the mirror restarted with the new settings.
    Replaced,
}

impl Outcome {
    /// The outcome's name, as the subscription API answers it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Started => "Started",
            Outcome::Unchanged => "Unchanged",
            Outcome::Replaced => "Replaced",
        }
    }
}

/// Why a subscription could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SubscribeError {
    /// The name is one of the gateway's embedded clusters.
    #[error("{0} is an embedded cluster of this gateway; it cannot also be an upstream")]
    Embedded(String),
    /// Replicas share the upstream through their `--upstreams` file: unsubscribing it here
    /// would stop the others' mirror of it too, while their file still names it.
    #[error(
        "{0} is an upstream of the --upstreams file, which every replica on this database reads: remove it from the file instead"
    )]
    FromFile(String),
    /// The mirror's cluster could not be hosted.
    #[error("hosting the mirror: {0}")]
    Hosting(#[from] HostingError),
    /// The hub's store failed.
    #[error("the store: {0}")]
    Store(#[from] StoreError),
}

struct Running {
    task: JoinHandle<()>,
    /// The stored spec it runs with; `None` for the `--upstreams` file's.
    spec: Option<serde_json::Value>,
}

struct Inner {
    hosting: Hosting,
    hub: HubStore,
    registry: Registry,
    board: StatusBoard,
    options: MirrorOptions,
    mode: ConnMode,
    embedded: HashSet<String>,
    running: Mutex<BTreeMap<String, Running>>,
    sync_times: Mutex<Option<JoinHandle<()>>>,
    /// Replicas: the task following the other replicas' subscriptions.
    follower: Mutex<Option<JoinHandle<()>>>,
    /// The `--upstreams` file's names: never started or stopped by the stored subscriptions.
    from_file: Mutex<HashSet<String>>,
}

/// Cheap to clone; shared by the server and the API.
#[derive(Clone)]
pub struct Subscriptions {
    inner: Arc<Inner>,
}

impl Subscriptions {
    /// `hub` is the bookkeeping beside `hosting`'s object store.
    pub fn new(
        hosting: Hosting,
        hub: HubStore,
        registry: Registry,
        options: MirrorOptions,
        mode: ConnMode,
        embedded: HashSet<String>,
    ) -> Self {
        let board = StatusBoard::new(options.probe_interval);
        Subscriptions {
            inner: Arc::new(Inner {
                hub,
                hosting,
                registry,
                board,
                options,
                mode,
                embedded,
                running: Mutex::new(BTreeMap::new()),
                sync_times: Mutex::new(None),
                follower: Mutex::new(None),
                from_file: Mutex::new(HashSet::new()),
            }),
        }
    }

    /// The upstreams' status.
    pub fn board(&self) -> &StatusBoard {
        &self.inner.board
    }

    /// How upstreams without a kubeconfig are reached.
    pub fn mode(&self) -> &ConnMode {
        &self.inner.mode
    }

    /// The subscribed upstreams' names.
    pub async fn names(&self) -> Vec<String> {
        self.inner.running.lock().await.keys().cloned().collect()
    }

    /// Starts mirroring `upstream` unless it is already mirrored and `force` is not set (then
    /// it restarts with the new settings). `persist` keeps the subscription across restarts.
    pub async fn subscribe(
        &self,
        upstream: Upstream,
        force: bool,
        persist: bool,
    ) -> Result<Outcome, SubscribeError> {
        let source = if persist {
            Source::Api(serde_json::to_value(&upstream).unwrap_or_default())
        } else {
            Source::File
        };
        self.subscribe_from(upstream, force, source).await
    }

    async fn subscribe_from(
        &self,
        upstream: Upstream,
        force: bool,
        source: Source,
    ) -> Result<Outcome, SubscribeError> {
        let inner = &self.inner;
        if inner.embedded.contains(&upstream.name) {
            return Err(SubscribeError::Embedded(upstream.name));
        }
        let mut running = inner.running.lock().await;
        let outcome = match running.remove(&upstream.name) {
            Some(old) if !force => {
                running.insert(upstream.name.clone(), old);
                return Ok(Outcome::Unchanged);
            }
            Some(old) => {
                old.task.abort();
                let _ = old.task.await;
                Outcome::Replaced
            }
            None => Outcome::Started,
        };
        if inner.hosting.served.get(FLEET).is_none() {
            inner.hosting.host(FLEET, true).await?;
        }
        let kubeconfig = inner.hosting.host(&upstream.name, true).await?;
        inner.hosting.store.join_fleet(&upstream.name).await?;
        if let Source::Api(spec) = &source {
            // Unsubscribed before: its lease is free again, then the others are told.
            if let Some(leasing) = inner.hub.leasing() {
                leasing.reopen(&upstream.name).await?;
            }
            inner.hub.save_subscription(&upstream.name, spec).await?;
        }
        let last_sync = inner
            .hub
            .upstream_sync_times()
            .await?
            .into_iter()
            .find(|(c, _)| *c == upstream.name)
            .and_then(|(_, t)| t.parse().ok());
        let subscribed_at = inner
            .hub
            .subscribed_at(&upstream.name)
            .await?
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(jiff::Timestamp::now);
        inner.board.add(
            &upstream.name,
            last_sync,
            subscribed_at,
            upstream.cluster_spec.clone(),
        );
        tracing::info!(upstream = %upstream.name, access = ?upstream.access, kubeconfig = %kubeconfig.display(), outcome = outcome.as_str(), "mirroring an upstream");
        let mirror = Mirror {
            upstream: upstream.clone(),
            hub: inner.hub.clone(),
            registry: inner.registry.clone(),
            board: inner.board.clone(),
            options: inner.options.clone(),
        };
        // Replicas on PostgreSQL: mirrored here only while this replica holds its lease.
        let task = match inner.hub.leasing() {
            Some(leasing) => tokio::spawn(super::leased::run(mirror, leasing.clone())),
            None => tokio::spawn(mirror.run()),
        };
        let spec = source.spec().cloned();
        running.insert(upstream.name, Running { task, spec });
        Ok(outcome)
    }

    /// Stops mirroring `name` and removes its mirrored objects (watchers see them deleted), its
    /// kubeconfig and its stored subscription. `false` when it was not subscribed.
    pub async fn unsubscribe(&self, name: &str) -> Result<bool, SubscribeError> {
        self.may_unsubscribe(name).await?;
        let inner = &self.inner;
        let mut running = inner.running.lock().await;
        let Some(old) = running.remove(name) else {
            let stored = inner.hub.forget_subscription(name).await?;
            if stored && let Some(leasing) = inner.hub.leasing() {
                // Subscribed through another replica moments ago and not followed here yet:
                // its mirror runs there. Retired and removed as if it ran here; that replica
                // stops following it once it sees the subscription gone.
                leasing.retire(name).await?;
                self.remove_mirrored(name).await?;
            }
            // Otherwise, at most a stored subscription that was never started (its name is an
            // embedded cluster's): only that row goes; the cluster's objects and token stay.
            return Ok(stored);
        };
        old.task.abort();
        let _ = old.task.await;
        if let Some(leasing) = inner.hub.leasing() {
            let _ = leasing.held_gauge().remove_label_values(&[name]);
            // The other replicas stop following it, and whichever mirrors it writes no more
            // from here on.
            inner.hub.forget_subscription(name).await?;
            leasing.retire(name).await?;
        }
        let store = &inner.hosting.store;
        // What the stopped mirror queued lands before its objects are removed.
        store.barrier().await?;
        inner.board.remove(name);
        inner.hosting.unhost(name);
        inner.registry.forget(name);
        self.remove_mirrored(name).await?;
        Ok(true)
    }

    /// Removes what was mirrored of the unsubscribed upstream `name` and its progress.
    async fn remove_mirrored(&self, name: &str) -> Result<(), SubscribeError> {
        let gone = self.inner.hosting.store.drop_mirror(name).await?;
        self.inner.hub.forget_upstream(name).await?;
        tracing::info!(upstream = %name, objects_removed = gone, "unsubscribed");
        Ok(())
    }

    /// Whether `name` may be unsubscribed through the API: not an upstream of the
    /// `--upstreams` file where replicas share the database (each one's file still names it).
    pub async fn may_unsubscribe(&self, name: &str) -> Result<(), SubscribeError> {
        let shared = self.inner.hub.leasing().is_some();
        if shared && self.inner.from_file.lock().await.contains(name) {
            return Err(SubscribeError::FromFile(name.to_owned()));
        }
        Ok(())
    }

    /// Starts the stored subscriptions and those of the `--upstreams` file (`from_file`, which
    /// win over stored ones of the same name), and the task that keeps last sync times.
    pub async fn start(&self, from_file: Vec<Upstream>) -> Result<(), SubscribeError> {
        let file_names: HashSet<String> = from_file.iter().map(|u| u.name.clone()).collect();
        *self.inner.from_file.lock().await = file_names.clone();
        for (name, spec) in self.inner.hub.subscriptions().await? {
            if file_names.contains(&name) {
                continue;
            }
            match serde_json::from_value::<Upstream>(spec.clone()) {
                Ok(u) => match self.subscribe_from(u, false, Source::Stored(spec)).await {
                    Ok(_) => {}
                    // Stored before the name was given to an embedded cluster: the embedded
                    // cluster wins, the subscription stays stored (unsubscribing removes it).
                    Err(SubscribeError::Embedded(name)) => tracing::error!(
                        upstream = %name,
                        "a stored subscription has the name of an embedded cluster; not mirrored (unsubscribe it, or rename the embedded cluster)"
                    ),
                    Err(e) => return Err(e),
                },
                Err(e) => {
                    tracing::warn!(upstream = %name, error = %e, "a stored subscription could not be read; skipped")
                }
            }
        }
        for u in from_file {
            self.subscribe(u, true, false).await?;
        }
        let me = self.clone();
        let flusher = tokio::spawn(async move { me.keep_sync_times().await });
        *self.inner.sync_times.lock().await = Some(flusher);
        if self.inner.hub.leasing().is_some() {
            let me = self.clone();
            let follower = tokio::spawn(async move { me.follow_stored().await });
            *self.inner.follower.lock().await = Some(follower);
        }
        Ok(())
    }

    /// Follows the subscriptions other replicas store, every [`FOLLOW_EVERY`], until aborted.
    async fn follow_stored(self) {
        let mut tick = tokio::time::interval(FOLLOW_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The store's changes, for those of CRDs: an upstream's kinds are read again only
        // when its stored CRDs changed, not every second for every upstream.
        let mut changes = self.inner.hosting.store.subscribe();
        let mut crds = CrdChanges::All;
        // The mirror (by its task) whose upstream's kinds were read, per upstream: one
        // unsubscribed and subscribed again runs another, whose kinds are read anew.
        let mut kinds_read = HashMap::new();
        loop {
            tick.tick().await;
            crds.take_from(&mut changes);
            match self.follow_once(&crds, &mut kinds_read).await {
                Ok(()) => crds = CrdChanges::default(),
                Err(e) => {
                    tracing::debug!(error = %e, "following the stored subscriptions failed; trying again");
                }
            }
        }
    }

    /// Starts the stored subscriptions not running here, restarts those stored with another
    /// spec than this replica runs, and stops those that were stored and no longer are.
    /// Reads the kinds of the upstreams `crds` names and of those whose mirror here is not
    /// the one `kinds_read` read them for.
    async fn follow_once(
        &self,
        crds: &CrdChanges,
        kinds_read: &mut HashMap<String, tokio::task::Id>,
    ) -> Result<(), SubscribeError> {
        let inner = &self.inner;
        // What runs here first: a subscription made here meanwhile is then in what is read
        // from the store next, and never taken for one unsubscribed elsewhere.
        let running: BTreeMap<String, (Option<serde_json::Value>, tokio::task::Id)> = inner
            .running
            .lock()
            .await
            .iter()
            .map(|(name, r)| (name.clone(), (r.spec.clone(), r.task.id())))
            .collect();
        kinds_read.retain(|name, _| running.contains_key(name));
        let stored: BTreeMap<String, serde_json::Value> =
            inner.hub.subscriptions().await?.into_iter().collect();
        let from_file = inner.from_file.lock().await.clone();
        for (name, spec) in &stored {
            if from_file.contains(name) || inner.embedded.contains(name) {
                continue;
            }
            let here = running.get(name).map(|(spec, _)| spec);
            if here == Some(&Some(spec.clone())) {
                continue;
            }
            let Ok(upstream) = serde_json::from_value::<Upstream>(spec.clone()) else {
                continue;
            };
            tracing::info!(upstream = %name, "following a subscription another replica made");
            self.subscribe_from(upstream, here.is_some(), Source::Stored(spec.clone()))
                .await?;
        }
        for (name, (spec, mirror)) in running {
            let Some(spec) = spec else {
                continue;
            };
            if stored.contains_key(&name) {
                if crds.touches(&name) || kinds_read.get(&name) != Some(&mirror) {
                    self.register_stored_kinds(&name).await?;
                    kinds_read.insert(name, mirror);
                }
            } else {
                self.stop_following(&name, &spec).await;
            }
        }
        Ok(())
    }

    /// Serves the kinds whose CRDs the mirroring replica stored for `name`: a replica that
    /// does not mirror an upstream learns its kinds only from the store.
    async fn register_stored_kinds(&self, name: &str) -> Result<(), StoreError> {
        let inner = &self.inner;
        let page = inner
            .hosting
            .store
            .list(name, CRD_GROUP, CRD_RESOURCE, None, None, 0)
            .await?;
        for crd in page.items {
            let Ok(def) = gpustack_apiserver::registry::from_crd(&crd) else {
                continue;
            };
            if inner
                .registry
                .find_stored(name, &def.group, &def.plural)
                .is_some()
            {
                continue;
            }
            let crd_name = crd["metadata"]["name"].as_str().unwrap_or_default();
            inner.registry.register(FLEET, crd_name, def.clone());
            inner.registry.register(name, crd_name, def);
        }
        Ok(())
    }

    /// Stops serving `name`, which another replica unsubscribed (and whose objects it
    /// removes), unless it runs with another spec than `spec` now (subscribed again here).
    async fn stop_following(&self, name: &str, spec: &serde_json::Value) {
        let inner = &self.inner;
        let mut running = inner.running.lock().await;
        if running
            .get(name)
            .is_none_or(|r| r.spec.as_ref() != Some(spec))
        {
            return;
        }
        let Some(old) = running.remove(name) else {
            return;
        };
        old.task.abort();
        let _ = old.task.await;
        if let Some(leasing) = inner.hub.leasing() {
            let _ = leasing.held_gauge().remove_label_values(&[name]);
        }
        inner.board.remove(name);
        inner.hosting.unhost(name);
        inner.registry.forget(name);
        if let Err(e) = inner.hosting.store.forget_cluster_token(name).await {
            tracing::warn!(upstream = %name, error = %e, "forgetting the unsubscribed upstream's reader token failed");
        }
        tracing::info!(upstream = %name, "another replica unsubscribed the upstream: no longer served here");
    }

    /// Stops every mirror, keeping each upstream's last sync time.
    pub async fn stop(&self) {
        if let Some(t) = self.inner.follower.lock().await.take() {
            t.abort();
            let _ = t.await;
        }
        if let Some(t) = self.inner.sync_times.lock().await.take() {
            t.abort();
        }
        let mut running = self.inner.running.lock().await;
        for (_, r) in std::mem::take(&mut *running) {
            r.task.abort();
            let _ = r.task.await;
        }
        // The other replicas take this one's upstreams over at once, not a lease time later.
        if let Some(leasing) = self.inner.hub.leasing()
            && let Err(e) = leasing.give_back_all().await
        {
            tracing::warn!(error = %e, "giving the upstreams' leases back failed; they pass to other replicas when they expire");
        }
        self.write_sync_times(&mut BTreeMap::new()).await;
    }

    /// Writes each upstream's last sync time when it moves, so that a restarted gateway can say
    /// how old a mirror it cannot reach is.
    async fn keep_sync_times(self) {
        let mut written = BTreeMap::new();
        let mut tick = tokio::time::interval(SYNC_TIME_FLUSH);
        loop {
            tick.tick().await;
            self.write_sync_times(&mut written).await;
        }
    }

    /// Writes the last sync times that differ from `written`, and notes them there.
    async fn write_sync_times(&self, written: &mut BTreeMap<String, jiff::Timestamp>) {
        for (cluster, status) in self.inner.board.all() {
            let Some(t) = status.last_sync_time else {
                continue;
            };
            if written.get(&cluster) == Some(&t) {
                continue;
            }
            if self
                .inner
                .hub
                .set_upstream_sync_time(&cluster, &t.to_string())
                .await
                .is_ok()
            {
                written.insert(cluster, t);
            }
        }
    }
}

/// Whose stored CRDs changed since the follower last read them.
#[derive(Debug, PartialEq)]
enum CrdChanges {
    /// Every upstream's (at the start, and where changes were missed).
    All,
    /// These upstreams' (none at all: empty).
    Of(HashSet<String>),
}

impl Default for CrdChanges {
    fn default() -> Self {
        CrdChanges::Of(HashSet::new())
    }
}

impl CrdChanges {
    /// Adds the CRD changes `changes` holds now, without waiting.
    fn take_from(&mut self, changes: &mut broadcast::Receiver<StoredEvent>) {
        loop {
            match changes.try_recv() {
                Ok(ev) => self.saw(&ev.key),
                Err(broadcast::error::TryRecvError::Lagged(_)) => *self = CrdChanges::All,
                Err(_) => return,
            }
        }
    }

    /// Notes a change of `key`.
    fn saw(&mut self, key: &ObjectKey) {
        if let CrdChanges::Of(clusters) = self
            && key.group == CRD_GROUP
            && key.resource == CRD_RESOURCE
        {
            clusters.insert(key.cluster.clone());
        }
    }

    /// Whether `upstream`'s kinds are to be read again.
    fn touches(&self, upstream: &str) -> bool {
        match self {
            CrdChanges::All => true,
            CrdChanges::Of(clusters) => clusters.contains(upstream),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gpustack_apiserver::store::EventType;

    use super::*;

    fn event(cluster: &str, group: &str, resource: &str) -> StoredEvent {
        StoredEvent {
            rv: 1,
            key: ObjectKey {
                cluster: cluster.into(),
                group: group.into(),
                resource: resource.into(),
                namespace: String::new(),
                name: "x".into(),
            },
            kind: EventType::Added,
            body: Arc::new(serde_json::json!({})),
            prev: None,
        }
    }

    #[test]
    fn only_the_upstreams_whose_crds_changed_are_read_again() {
        let (tx, mut rx) = broadcast::channel(4);
        let mut crds = CrdChanges::default();
        assert!(!crds.touches("east"));
        tx.send(event("east", "worker.gpustack.ai", "devices"))
            .unwrap();
        tx.send(event("west", CRD_GROUP, CRD_RESOURCE)).unwrap();
        crds.take_from(&mut rx);
        assert!(!crds.touches("east"), "a Device is not a kind");
        assert!(crds.touches("west"));
    }

    #[test]
    fn changes_missed_read_every_upstream_again() {
        let (tx, mut rx) = broadcast::channel(2);
        for _ in 0..3 {
            tx.send(event("east", "worker.gpustack.ai", "devices"))
                .unwrap();
        }
        let mut crds = CrdChanges::default();
        crds.take_from(&mut rx);
        assert_eq!(crds, CrdChanges::All);
        assert!(crds.touches("anyone"));
    }
}
