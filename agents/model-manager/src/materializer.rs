//! One download per digest, node-wide. The first authorized mount starts an attempt in the
//! background and later mounts join it; mounts are answered at once with the attempt's state.
//!
//! An attempt: pick the attempt number (resuming the newest partial), list the tree at the
//! resolved commit, refuse a digest that differs from the volume's, reserve space under the high
//! watermark (collecting first), fetch every file verified, then publish. A failure is recorded
//! in the ledger with a backoff that survives restarts.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use futures::StreamExt;
use jiff::Timestamp;
use tokio::sync::watch;

use crate::{
    download::{ByteCounters, DownloadLimits, FileFetch, Tuning},
    failure::{Failure, Reason},
    filter::FileFilter,
    gc::{self, Candidate, Usage, Watermarks},
    hub::{HubClient, HubSettings, HubToken, listing},
    manifest::{Manifest, ManifestDigest},
    store::{self, Store},
};

/// The cache filesystem could not be measured (statfs failed).
#[derive(Debug, thiserror::Error)]
#[error("statfs of the cache filesystem {}: {source}", root.display())]
pub struct UsageError {
    /// The cache root that was measured.
    pub root: PathBuf,
    /// The statfs error.
    #[source]
    pub source: nix::Error,
}

/// Where an artifact's files come from, as one artifact UID describes it.
#[derive(Debug, Clone)]
pub struct Source {
    /// The hub repository (`org/name`).
    pub repository: String,
    /// The commit the files are listed at.
    pub commit: String,
    /// Which of the repository's files belong to the tree.
    pub filter: FileFilter,
    /// The artifact's hub token, when it names one.
    pub token: Option<HubToken>,
}

/// The node configuration the materializer acts on (from `NodeModelStore.spec`).
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// How to reach the hub.
    pub hub: HubSettings,
    /// Collection's thresholds.
    pub watermarks: Watermarks,
    /// Digests (`sha256:<hex>` or the hex) collection never removes.
    pub pinned: Vec<String>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            hub: HubSettings::default(),
            watermarks: Watermarks {
                high_percent: 80,
                low_percent: 70,
            },
            pinned: Vec::new(),
        }
    }
}

/// Told how each attempt ended (the metrics): `result` is `published` or the failure's reason,
/// `took` the attempt's wall time.
pub trait OutcomeSink: Send + Sync {
    /// Called once per attempt, when it ends.
    fn outcome(&self, result: &str, took: std::time::Duration);
}

/// How a mount's request for a digest stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ensure {
    /// The tree is published at this path.
    Published(PathBuf),
    /// An attempt runs; the text is the mount's `Aborted` message.
    InProgress(String),
    /// The last attempt failed; no new one starts before `retry_time`.
    BackingOff {
        /// Why the last attempt failed.
        reason: Reason,
        /// Its message, for the mount's error.
        message: String,
        /// When the next attempt may start, when that is known.
        retry_time: Option<Timestamp>,
    },
}

/// A running attempt, as status and `/model/downloads` see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobView {
    /// The tree being downloaded.
    pub digest: ManifestDigest,
    /// The tree's size in bytes, once its files are listed.
    pub size_bytes: Option<u64>,
    /// Bytes present and hashed so far.
    pub downloaded_bytes: u64,
}

struct Job {
    digest: ManifestDigest,
    /// When a mount last asked for this digest (started or joined the attempt).
    asked: Mutex<std::time::Instant>,
    sources: Mutex<Vec<Source>>,
    counters: ByteCounters,
    size: AtomicU64,
    listed: AtomicBool,
    done: watch::Sender<Option<Result<(), Failure>>>,
}

impl Job {
    fn progress_message(&self) -> String {
        if !self.listed.load(Ordering::Relaxed) {
            return format!("materializing {}: listing the files", self.digest.short());
        }
        let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
        format!(
            "materializing {}: {:.2} GiB of {:.2} GiB received",
            self.digest.short(),
            gib(self.counters.progress.load(Ordering::Relaxed)),
            gib(self.size.load(Ordering::Relaxed))
        )
    }
}

/// Downloads and publishes trees on demand, one attempt per digest, and collects old ones.
pub struct Materializer {
    store: Store,
    limits: Arc<DownloadLimits>,
    tuning: Tuning,
    config: Mutex<StoreConfig>,
    jobs: Mutex<HashMap<ManifestDigest, Arc<Job>>>,
    /// Node-wide byte counters (metrics).
    pub counters: ByteCounters,
    /// Serializes a mount's claim against collection removing an unreferenced tree.
    pub claim_lock: tokio::sync::Mutex<()>,
    /// Bytes of trees removed by collection, ever (metrics).
    pub removed_bytes: AtomicU64,
    /// Signalled when something status shows changed (a download started or ended, a mount).
    pub changed: tokio::sync::Notify,
    outcomes: Mutex<Option<Arc<dyn OutcomeSink>>>,
    /// False while the node's spec is invalid (or not read yet): no download starts and
    /// collection removes nothing.
    valid: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Materializer {
    /// A materializer over `store`, configured by `config`, downloading within `limits`.
    pub fn new(
        store: Store,
        limits: Arc<DownloadLimits>,
        tuning: Tuning,
        config: StoreConfig,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            limits,
            tuning,
            config: Mutex::new(config),
            jobs: Mutex::new(HashMap::new()),
            counters: ByteCounters::default(),
            claim_lock: tokio::sync::Mutex::new(()),
            changed: tokio::sync::Notify::new(),
            removed_bytes: AtomicU64::new(0),
            outcomes: Mutex::new(None),
            valid: AtomicBool::new(true),
        })
    }

    /// Whether the configuration is valid; see the field.
    pub fn set_valid(&self, valid: bool) {
        self.valid.store(valid, Ordering::Relaxed);
    }

    /// Where attempt outcomes are reported from now on.
    pub fn set_outcome_sink(&self, sink: Arc<dyn OutcomeSink>) {
        *lock(&self.outcomes) = Some(sink);
    }

    /// The on-disk cache.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Applies a new node configuration (from `NodeModelStore.spec`).
    pub fn set_config(&self, config: StoreConfig) {
        *lock(&self.config) = config;
    }

    /// The node configuration in effect.
    pub fn config(&self) -> StoreConfig {
        lock(&self.config).clone()
    }

    /// The attempts running now, sorted by digest.
    pub fn jobs(&self) -> Vec<JobView> {
        let mut v: Vec<JobView> = lock(&self.jobs)
            .values()
            .map(|j| JobView {
                digest: j.digest.clone(),
                size_bytes: j
                    .listed
                    .load(Ordering::Relaxed)
                    .then(|| j.size.load(Ordering::Relaxed)),
                downloaded_bytes: j.counters.progress.load(Ordering::Relaxed),
            })
            .collect();
        v.sort_by(|a, b| a.digest.cmp(&b.digest));
        v
    }

    /// Starts or joins the download of `digest`, or says why it may not run now.
    pub fn ensure(
        self: &Arc<Self>,
        digest: &ManifestDigest,
        source: Source,
        now: Timestamp,
    ) -> Ensure {
        if let Some(tree) = self.store.published_tree(digest) {
            return Ensure::Published(tree);
        }
        let mut jobs = lock(&self.jobs);
        if let Some(job) = jobs.get(digest) {
            *lock(&job.asked) = std::time::Instant::now();
            let mut sources = lock(&job.sources);
            match sources
                .iter_mut()
                .find(|s| s.repository == source.repository && s.commit == source.commit)
            {
                Some(s) => s.token = source.token,
                None => sources.push(source),
            }
            return Ensure::InProgress(job.progress_message());
        }
        if !self.valid.load(Ordering::Relaxed) {
            return Ensure::BackingOff {
                reason: Reason::InvalidRequest,
                message: "downloads are stopped: the node's NodeModelStore spec is invalid or not read yet".into(),
                retry_time: None,
            };
        }
        match self.store.digest_record(digest) {
            Ok(rec) => {
                if let Some(retry) = rec.retry_time.filter(|t| *t > now) {
                    let reason = reason_named(&rec.reason).unwrap_or(Reason::SourceUnavailable);
                    return Ensure::BackingOff {
                        reason,
                        message: rec.message,
                        retry_time: Some(retry),
                    };
                }
            }
            Err(e) => {
                return Ensure::BackingOff {
                    reason: Reason::SourceUnavailable,
                    message: format!("reading the ledger: {e}"),
                    retry_time: None,
                };
            }
        }
        let (done, _) = watch::channel(None);
        let job = Arc::new(Job {
            digest: digest.clone(),
            asked: Mutex::new(std::time::Instant::now()),
            sources: Mutex::new(vec![source]),
            counters: ByteCounters::default(),
            size: AtomicU64::new(0),
            listed: AtomicBool::new(false),
            done,
        });
        jobs.insert(digest.clone(), Arc::clone(&job));
        drop(jobs);
        let message = job.progress_message();
        let this = Arc::clone(self);
        tokio::spawn(async move { this.run(job).await });
        self.changed.notify_one();
        Ensure::InProgress(message)
    }

    /// Waits for the attempt of `digest` to end. When none runs (it may have just ended), the
    /// outcome comes from disk: published, or the ledger's last failure; `None` when neither.
    pub async fn wait(&self, digest: &ManifestDigest) -> Option<Result<(), Failure>> {
        let rx = lock(&self.jobs).get(digest).map(|j| j.done.subscribe());
        if let Some(mut rx) = rx {
            return rx.wait_for(Option::is_some).await.ok()?.clone();
        }
        if self.store.published_tree(digest).is_some() {
            return Some(Ok(()));
        }
        let rec = self.store.digest_record(digest).ok()?;
        let reason = reason_named(&rec.reason)?;
        Some(Err(Failure::new(reason, rec.message)))
    }

    async fn run(self: Arc<Self>, job: Arc<Job>) {
        let started = std::time::Instant::now();
        // Dropping the attempt's future cancels its requests; its partial stays for a resume.
        let result = tokio::select! {
            r = self.attempt(&job) => r,
            idle = self.idle(&job) => Err(Failure::new(
                Reason::Canceled,
                format!("no mount asked for it in {}s", idle.as_secs()),
            )),
        };
        let took = started.elapsed();
        if result.is_err() && runtime_shutting_down().await {
            // The process is going away and its file tasks were cancelled under the attempt:
            // record nothing, as a killed process would not; the partial stays for a resume.
            lock(&self.jobs).remove(&job.digest);
            job.done.send_replace(Some(result));
            return;
        }
        let sink = lock(&self.outcomes).clone();
        if let Some(sink) = sink {
            match &result {
                Ok(()) => sink.outcome("published", took),
                Err(f) => sink.outcome(f.reason.as_str(), took),
            }
        }
        let now = Timestamp::now();
        let digest = &job.digest;
        let mut rec = self.store.digest_record(digest).unwrap_or_default();
        match &result {
            Ok(()) => {
                tracing::info!(digest = %digest, "published");
                rec.failures = 0;
                rec.reason.clear();
                rec.message.clear();
                rec.retry_time = None;
                rec.last_used_time = Some(now);
            }
            Err(f) => {
                tracing::warn!(digest = %digest, reason = %f.reason, "materialization failed: {}", f.message);
                rec.reason = f.reason.to_string();
                rec.message = f.message.clone();
                if f.reason.backs_off() {
                    rec.failures += 1;
                    let wait = gc::retry_after(rec.failures);
                    rec.retry_time = now.checked_add(wait).ok();
                } else {
                    rec.retry_time = None;
                }
            }
        }
        if let Err(e) = self.store.write_digest_record(digest, &rec) {
            tracing::error!(digest = %digest, "writing the ledger: {e}");
        }
        lock(&self.jobs).remove(digest);
        job.done.send_replace(Some(result));
        self.changed.notify_one();
    }

    /// Resolves once no mount has asked for the job in `tuning.idle_cancel`, checking every
    /// `tuning.idle_check`; returns how long it was idle.
    async fn idle(&self, job: &Job) -> std::time::Duration {
        loop {
            tokio::time::sleep(self.tuning.idle_check).await;
            let idle = lock(&job.asked).elapsed();
            if idle >= self.tuning.idle_cancel {
                return idle;
            }
        }
    }

    async fn attempt(&self, job: &Job) -> Result<(), Failure> {
        let digest = &job.digest;
        let attempt = self.prepare_attempt_dir(digest)?;
        let config = self.config();
        let client = HubClient::new(&config.hub)?;

        let sources = lock(&job.sources).clone();
        let mut last = Failure::new(Reason::AccessDenied, "no source");
        let mut chosen = None;
        for source in sources {
            match self.list(&client, &source, digest).await {
                Ok(m) => {
                    chosen = Some((source, m));
                    break;
                }
                Err(f) if f.reason == Reason::AccessDenied => last = f,
                Err(f) => return Err(f),
            }
        }
        let (source, manifest) = chosen.ok_or(last)?;
        job.size.store(manifest.total_size(), Ordering::Relaxed);
        job.listed.store(true, Ordering::Relaxed);

        let dir = self.store.attempt_dir(digest, attempt);
        let (tree, state) = (dir.join("tree"), dir.join("state"));
        let written = written_bytes(&tree);
        self.reserve(
            digest,
            manifest.total_size().saturating_sub(written),
            &config,
        )
        .await?;

        // The freshest token any joined mount brought.
        let token = lock(&job.sources)
            .iter()
            .find(|s| s.repository == source.repository && s.commit == source.commit)
            .and_then(|s| s.token.clone());
        let fetch = FileFetch {
            client: &client,
            token: token.as_ref(),
            limits: &self.limits,
            tuning: &self.tuning,
            counters: &job.counters,
            node_counters: &self.counters,
        };
        let (fetch, state, tree) = (&fetch, &state, &tree);
        let (client, repo, commit) = (&client, &source.repository, &source.commit);
        let results = futures::stream::iter(manifest.entries().to_vec())
            .map(move |e| async move {
                let url = client.resolve_url(repo, commit, &e.path);
                fetch.fetch(url, &e, &tree.join(&e.path), state).await
            })
            .buffer_unordered(self.tuning.files_in_parallel.max(1));
        futures::pin_mut!(results);
        while let Some(r) = results.next().await {
            r?;
        }

        let _claim = self.claim_lock.lock().await;
        self.store
            .publish(digest, attempt, &manifest, "Hub", Timestamp::now())
            .map_err(|e| store_failure(&e))?;
        Ok(())
    }

    async fn list(
        &self,
        client: &HubClient,
        source: &Source,
        digest: &ManifestDigest,
    ) -> Result<Manifest, Failure> {
        let files = client
            .list_tree(&source.repository, &source.commit, source.token.as_ref())
            .await
            .map_err(listing::ListingError::into_failure)?;
        let manifest = listing::manifest_of(files, &source.filter)
            .map_err(listing::ListingError::into_failure)?;
        let got = manifest.digest();
        if &got != digest {
            return Err(Failure::new(
                Reason::IntegrityMismatch,
                format!(
                    "the hub's files at {} hash to {}, not {}",
                    source.commit,
                    got.short(),
                    digest.short()
                ),
            ));
        }
        Ok(manifest)
    }

    /// The next attempt number; the newest partial (if any) is renamed into it, so its
    /// checkpoints carry over.
    fn prepare_attempt_dir(&self, digest: &ManifestDigest) -> Result<u64, Failure> {
        let rec = self
            .store
            .digest_record(digest)
            .map_err(|e| store_failure(&e))?;
        let partials = self.store.partial_attempts(digest);
        let newest = partials.last().copied();
        let attempt = rec.last_attempt.max(newest.unwrap_or(0)) + 1;
        let dir = self.store.attempt_dir(digest, attempt);
        let io = |e: std::io::Error| {
            Failure::new(
                Reason::SourceUnavailable,
                format!("preparing the attempt: {e}"),
            )
        };
        match newest {
            Some(n) => {
                let old = self.store.attempt_dir(digest, n);
                store::unseal_dirs(&old);
                let _ = std::fs::remove_file(old.join("marker"));
                std::fs::rename(&old, &dir).map_err(io)?;
            }
            None => std::fs::create_dir_all(&dir).map_err(io)?,
        }
        std::fs::create_dir_all(dir.join("tree")).map_err(io)?;
        std::fs::create_dir_all(dir.join("state")).map_err(io)?;
        let mut rec = rec;
        rec.last_attempt = attempt;
        self.store
            .write_digest_record(digest, &rec)
            .map_err(|e| store_failure(&e))?;
        Ok(attempt)
    }

    /// Makes room for `remaining` bytes under the high watermark, collecting if needed.
    async fn reserve(
        &self,
        digest: &ManifestDigest,
        remaining: u64,
        config: &StoreConfig,
    ) -> Result<(), Failure> {
        let others: u64 = self
            .jobs()
            .iter()
            .filter(|j| &j.digest != digest)
            .map(|j| j.size_bytes.unwrap_or(0).saturating_sub(j.downloaded_bytes))
            .sum();
        let usage = self
            .usage()
            .map_err(|e| Failure::new(Reason::InsufficientCapacity, e.to_string()))?;
        if gc::reservation_fits(&usage, remaining, others, &config.watermarks) {
            return Ok(());
        }
        self.collect(remaining + others, config).await;
        let usage = self
            .usage()
            .map_err(|e| Failure::new(Reason::InsufficientCapacity, e.to_string()))?;
        if gc::reservation_fits(&usage, remaining, others, &config.watermarks) {
            Ok(())
        } else {
            Err(Failure::new(
                Reason::InsufficientCapacity,
                format!(
                    "{remaining} more bytes do not fit under the high watermark ({}%)",
                    config.watermarks.high_percent
                ),
            ))
        }
    }

    /// statfs of the cache filesystem; root-reserved blocks count as used.
    pub fn usage(&self) -> Result<Usage, UsageError> {
        let st = nix::sys::statvfs::statvfs(self.store.root()).map_err(|source| UsageError {
            root: self.store.root().to_path_buf(),
            source,
        })?;
        let frsize = st.fragment_size() as u64;
        let total = st.blocks() as u64 * frsize;
        let avail = st.blocks_available() as u64 * frsize;
        Ok(Usage {
            total_bytes: total,
            used_bytes: total.saturating_sub(avail),
        })
    }

    /// Removes unreferenced, idle, unpinned trees (oldest first) until `incoming` fits under
    /// the low watermark. Returns whether capacity is still low and the bytes freed.
    pub async fn collect(&self, incoming: u64, config: &StoreConfig) -> gc::Plan {
        let _claim = self.claim_lock.lock().await;
        let empty = gc::Plan {
            remove: Vec::new(),
            freed_bytes: 0,
            over_high: false,
            capacity_low: false,
        };
        let (true, Ok(usage), Ok(refs), Ok(published)) = (
            self.valid.load(Ordering::Relaxed),
            self.usage(),
            self.store.refs(),
            self.store.list_published(),
        ) else {
            // An invalid spec or unreadable refs: nothing may be removed.
            return empty;
        };
        let downloading: Vec<ManifestDigest> = self.jobs().into_iter().map(|j| j.digest).collect();
        let candidates: Vec<Candidate> = published
            .iter()
            .map(|(d, marker)| {
                let rec = self.store.digest_record(d).unwrap_or_default();
                Candidate {
                    hex: d.hex().to_owned(),
                    size_bytes: marker.size_bytes,
                    last_used: rec.last_used_time.unwrap_or(marker.published_time),
                    referenced: refs.iter().any(|r| r.hex == d.hex()),
                    downloading: downloading.contains(d),
                    pinned: config
                        .pinned
                        .iter()
                        .any(|p| p == &d.to_string() || p == d.hex()),
                }
            })
            .collect();
        let plan = gc::plan(
            &usage,
            incoming,
            &config.watermarks,
            &candidates,
            Timestamp::now(),
        );
        self.prune(&published, &downloading, Timestamp::now());
        for hex in &plan.remove {
            let Some(d) = ManifestDigest::from_hex(hex) else {
                continue;
            };
            let size = published
                .iter()
                .find(|(p, _)| p == &d)
                .map_or(0, |(_, m)| m.size_bytes);
            match self.store.trash_published(&d) {
                Ok(()) => {
                    self.removed_bytes.fetch_add(size, Ordering::Relaxed);
                }
                Err(e) => tracing::error!(digest = %d, "removing a tree: {e}"),
            }
        }
        drop(_claim);
        if let Err(e) = self.store.empty_trash() {
            tracing::error!("emptying the trash: {e}");
        }
        plan
    }
}

impl Materializer {
    /// Collection's first steps: partials untouched for a day that no attempt uses go to the
    /// trash, and failure records older than a day for digests no longer on disk are dropped.
    /// Called under the claim lock.
    fn prune(
        &self,
        published: &[(ManifestDigest, store::Marker)],
        downloading: &[ManifestDigest],
        now: Timestamp,
    ) {
        let store = &self.store;
        let partials = store.partial_digests();
        for d in &partials {
            let Some(newest) = store::newest_mtime(&store.partial_dir(d)) else {
                continue;
            };
            if gc::partial_is_stale(newest, downloading.contains(d), now) {
                tracing::info!(digest = %d, "removing a stale partial download");
                if let Err(e) = store.trash_partials(d) {
                    tracing::error!(digest = %d, "removing a stale partial: {e}");
                }
            }
        }
        for (d, rec) in store.digest_records().unwrap_or_default() {
            let on_disk = published.iter().any(|(p, _)| p == &d)
                || downloading.contains(&d)
                || store.partial_dir(&d).exists();
            let written = store::newest_mtime(&store.digest_record_path(&d));
            let last = [written, rec.retry_time, rec.last_used_time]
                .into_iter()
                .flatten()
                .max();
            if !on_disk
                && last.is_some_and(|t| gc::record_is_stale(t, now))
                && let Err(e) = store.remove_digest_record(&d)
            {
                tracing::error!(digest = %d, "dropping an old failure record: {e}");
            }
        }
    }
}

/// Whether the runtime is shutting down: its blocking pool no longer runs new tasks.
async fn runtime_shutting_down() -> bool {
    tokio::task::spawn_blocking(|| ()).await.is_err()
}

fn reason_named(name: &str) -> Option<Reason> {
    [
        Reason::InvalidRequest,
        Reason::AccessDenied,
        Reason::SourceUnavailable,
        Reason::IntegrityMismatch,
        Reason::InsufficientCapacity,
        Reason::Canceled,
    ]
    .into_iter()
    .find(|r| r.as_str() == name)
}

fn store_failure(e: &store::StoreError) -> Failure {
    if e.is_no_space() {
        Failure::new(Reason::InsufficientCapacity, "the cache filesystem is full")
    } else {
        Failure::new(Reason::SourceUnavailable, e.to_string())
    }
}

/// Bytes already on disk in a resumed tree.
fn written_bytes(tree: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut dirs = vec![tree.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => dirs.push(e.path()),
                Ok(_) => total += e.metadata().map(|m| m.len()).unwrap_or(0),
                Err(_) => {}
            }
        }
    }
    total
}
