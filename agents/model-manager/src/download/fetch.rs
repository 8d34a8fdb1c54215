//! Fetching one file into an attempt's tree: resume from the last checkpoint, probe Range
//! support with the first segment, fetch the rest in a window of parallel segments, hash every
//! byte in file order, and verify size and digest before the file counts as done.
//!
//! A stalled, cut or failed request is retried from its last byte (5 tries, reset on progress).
//! A `200` where a range was asked means the hub ignores ranges: at offset 0 the whole body is
//! taken, at a later offset the file restarts from 0.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use reqwest::{StatusCode, Url, header};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use tokio::{
    fs::{File, OpenOptions},
    io::AsyncWriteExt,
};

use super::limits::DownloadLimits;
use crate::{
    durable,
    failure::{Failure, Reason},
    hashing::ContentHasher,
    hex,
    hub::{HubClient, HubToken},
    manifest::ManifestEntry,
};

/// Sizes and timings of the downloader; tests shrink them.
#[derive(Debug, Clone)]
pub struct Tuning {
    /// Bytes per ranged request.
    pub segment_bytes: u64,
    /// Segments fetched at once after the probe (so at most `window × segment` not yet hashed).
    pub window: usize,
    /// A segment that receives nothing for this long is abandoned and retried.
    pub stall_timeout: Duration,
    /// Failed requests retried before the attempt fails.
    pub retries: u32,
    /// The first retry's delay; each later one adds another step.
    pub retry_step: Duration,
    /// The longest delay between retries.
    pub retry_cap: Duration,
    /// How many verified bytes a file's checkpoint is rewritten after.
    pub checkpoint_bytes: u64,
    /// Files of one attempt fetched at once.
    pub files_in_parallel: usize,
    /// An attempt that no mount has asked for in this long is cancelled (its partial is kept
    /// for a resume); checked every `idle_check`.
    pub idle_cancel: Duration,
    /// How often idle attempts are looked for.
    pub idle_check: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            segment_bytes: 64 << 20,
            window: 4,
            stall_timeout: Duration::from_secs(30),
            retries: 5,
            retry_step: Duration::from_secs(1),
            retry_cap: Duration::from_secs(10),
            checkpoint_bytes: 256 << 20,
            files_in_parallel: 16,
            idle_cancel: Duration::from_secs(5 * 60),
            idle_check: Duration::from_secs(30),
        }
    }
}

/// Byte counters shared by a job (progress) and the node (metrics).
#[derive(Debug, Default)]
pub struct ByteCounters {
    /// Bytes of the tree present and hashed so far (goes back when a file restarts).
    pub progress: AtomicU64,
    /// Bytes received from the hub, ever.
    pub received: AtomicU64,
    /// Bytes received a second time (a restart from 0, a hub that ignores ranges).
    pub refetched: AtomicU64,
}

/// `state/<sha256(path)>`: how far a file is known good.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub offset: u64,
    #[serde(default)]
    pub verified: bool,
}

pub fn checkpoint_path(state_dir: &Path, file_path: &str) -> PathBuf {
    state_dir.join(hex::encode(&Sha256::digest(file_path.as_bytes())))
}

pub struct FileFetch<'a> {
    pub client: &'a HubClient,
    pub token: Option<&'a HubToken>,
    pub limits: &'a Arc<DownloadLimits>,
    pub tuning: &'a Tuning,
    pub counters: &'a ByteCounters,
    pub node_counters: &'a ByteCounters,
}

fn io_failure(what: &str, e: &std::io::Error) -> Failure {
    if e.raw_os_error() == Some(nix::libc::ENOSPC) {
        Failure::new(Reason::InsufficientCapacity, "the cache filesystem is full")
    } else {
        Failure::new(Reason::SourceUnavailable, format!("{what}: {e}"))
    }
}

/// What a request answered.
enum Answer {
    /// The range as asked.
    Partial,
    /// The whole file from byte 0.
    Whole,
}

impl FileFetch<'_> {
    fn add_progress(&self, n: u64) {
        self.counters.progress.fetch_add(n, Ordering::Relaxed);
    }

    fn add_received(&self, n: u64) {
        self.counters.received.fetch_add(n, Ordering::Relaxed);
        self.node_counters.received.fetch_add(n, Ordering::Relaxed);
    }

    fn restart_from_zero(&self, pos: u64) {
        self.counters.progress.fetch_sub(pos, Ordering::Relaxed);
        self.counters.refetched.fetch_add(pos, Ordering::Relaxed);
        self.node_counters
            .refetched
            .fetch_add(pos, Ordering::Relaxed);
    }

    /// Downloads `entry` from `url` into `dest`, checkpointing under `state_dir`.
    pub async fn fetch(
        &self,
        url: Url,
        entry: &ManifestEntry,
        dest: &Path,
        state_dir: &Path,
    ) -> Result<(), Failure> {
        let ckpt_path = checkpoint_path(state_dir, &entry.path);
        let ckpt: Checkpoint = durable::read_json(&ckpt_path)
            .ok()
            .flatten()
            .unwrap_or_default();
        if let Some(parent) = dest.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| io_failure("creating the file's directory", &e))?;
        }
        let existing = tokio::fs::metadata(dest).await.map(|m| m.len()).ok();
        if ckpt.verified && ckpt.offset == entry.size && existing == Some(entry.size) {
            self.add_progress(entry.size);
            return Ok(());
        }
        // Only the checkpoint is trusted: anything written after it is dropped.
        let start = match existing {
            Some(len) if len >= ckpt.offset && ckpt.offset <= entry.size => ckpt.offset,
            _ => 0,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dest)
            .await
            .map_err(|e| io_failure("opening the file", &e))?;
        file.set_len(start)
            .await
            .map_err(|e| io_failure("truncating to the checkpoint", &e))?;
        let mut hasher = ContentHasher::new(&entry.digest, entry.size);
        hash_from_disk(&file, 0, start, &mut hasher).await?;
        self.add_progress(start);

        let mut run = Run {
            fetch: self,
            url,
            entry,
            dest: dest.to_path_buf(),
            ckpt_path,
            hashed: start,
            checkpointed: start,
            written_back: start,
        };
        if start < entry.size {
            let probe_end = (start + self.tuning.segment_bytes).min(entry.size);
            match run
                .stream(&mut file, start, probe_end, Some(&mut hasher), true)
                .await?
            {
                Answer::Whole => {}
                Answer::Partial => run.rest_in_segments(&mut file, &mut hasher).await?,
            }
        }
        self.verify(&mut file, entry, hasher, dest, &run.ckpt_path)
            .await
    }

    async fn verify(
        &self,
        file: &mut File,
        entry: &ManifestEntry,
        hasher: ContentHasher,
        dest: &Path,
        ckpt_path: &Path,
    ) -> Result<(), Failure> {
        let len = file
            .metadata()
            .await
            .map_err(|e| io_failure("inspecting the file", &e))?
            .len();
        let got = hasher.finish_hex();
        let problem = if len != entry.size {
            Some(format!(
                "{}: {len} bytes, expected {}",
                entry.path, entry.size
            ))
        } else if got != entry.digest.hex() {
            Some(format!(
                "{}: content hash does not match {}",
                entry.path, entry.digest
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            let _ = tokio::fs::remove_file(dest).await;
            let _ = tokio::fs::remove_file(ckpt_path).await;
            self.counters
                .progress
                .fetch_sub(len.min(entry.size), Ordering::Relaxed);
            return Err(Failure::new(Reason::IntegrityMismatch, problem));
        }
        file.sync_all()
            .await
            .map_err(|e| io_failure("syncing the file", &e))?;
        write_checkpoint(
            ckpt_path,
            Checkpoint {
                offset: entry.size,
                verified: true,
            },
        )
    }
}

fn write_checkpoint(path: &Path, ckpt: Checkpoint) -> Result<(), Failure> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_failure("creating state/", &e))?;
    }
    durable::write_json(path, &ckpt).map_err(|e| io_failure("writing a checkpoint", &e))
}

/// A second handle on `file`'s open file description, for positioned reads and writes on the
/// blocking pool (no copy through tokio's buffer).
fn std_handle(file: &File) -> Result<Arc<std::fs::File>, Failure> {
    use std::os::fd::AsFd;
    let fd = file
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| io_failure("opening the file", &e))?;
    Ok(Arc::new(std::fs::File::from(fd)))
}

/// A file task that did not finish: cancelled when the runtime shuts down (no backoff is
/// recorded for that), or panicked.
fn pool_failure(e: &tokio::task::JoinError) -> Failure {
    if e.is_cancelled() {
        Failure::new(Reason::Canceled, "the plugin is shutting down")
    } else {
        Failure::new(
            Reason::SourceUnavailable,
            format!("a file task failed: {e}"),
        )
    }
}

/// Feeds `[from, to)` of `file` to `hasher` (the page cache makes this cheap right after a
/// write), reading and hashing on the blocking pool.
async fn hash_from_disk(
    file: &File,
    from: u64,
    to: u64,
    hasher: &mut ContentHasher,
) -> Result<(), Failure> {
    if from >= to {
        return Ok(());
    }
    let handle = std_handle(file)?;
    let mut h = hasher.clone();
    let h = tokio::task::spawn_blocking(move || {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; 1 << 20];
        let mut at = from;
        while at < to {
            let want = buf.len().min((to - at) as usize);
            let n = handle
                .read_at(&mut buf[..want], at)
                .map_err(|e| io_failure("reading back", &e))?;
            if n == 0 {
                return Err(Failure::new(
                    Reason::IntegrityMismatch,
                    "the file is shorter than written",
                ));
            }
            h.update(&buf[..n]);
            at += n as u64;
        }
        Ok(h)
    })
    .await
    .map_err(|e| pool_failure(&e))??;
    *hasher = h;
    Ok(())
}

/// One file's fetch in progress.
struct Run<'a, 'b> {
    fetch: &'a FileFetch<'b>,
    url: Url,
    entry: &'a ManifestEntry,
    dest: PathBuf,
    ckpt_path: PathBuf,
    /// Bytes `[0, hashed)` are written and hashed.
    hashed: u64,
    checkpointed: u64,
    /// Write-back has been started for `[0, written_back)`.
    written_back: u64,
}

/// Received bytes are written in batches of this size: one write (one trip to the blocking
/// pool) per batch rather than per network chunk.
const WRITE_BATCH: usize = 256 << 10;

/// How many hashed bytes may wait before their write-back is started.
const WRITE_BACK_STEP: u64 = 8 << 20;

/// Starts write-back of `[from, to)` of `file` now. Left to itself the kernel writes dirty pages
/// only when the page cache fills past its background ratio or at the fsync before publishing,
/// so the whole tree would hit the disk after the last byte arrived; started here, the disk
/// writes while the network still delivers. Linux starts write-back of dirty pages on
/// `POSIX_FADV_DONTNEED` (without waiting for it) and drops only pages already clean, so only
/// bytes already hashed are passed. Advisory: an error changes nothing, and the fsyncs before
/// the checkpoint and the publish still decide durability.
fn start_write_back(file: &File, from: u64, to: u64) {
    let (Ok(offset), Ok(len)) = (i64::try_from(from), i64::try_from(to.saturating_sub(from)))
    else {
        return;
    };
    if len > 0 {
        let _ = nix::fcntl::posix_fadvise(
            file,
            offset,
            len,
            nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
        );
    }
}

impl Run<'_, '_> {
    /// Writes the batch that ends at `pos`; when the bytes were hashed in stream they now
    /// extend the hashed prefix (checkpointed and written back as due).
    async fn write_pending(
        &mut self,
        file: &mut File,
        handle: &Arc<std::fs::File>,
        pending: &mut Vec<u8>,
        pos: u64,
        hashed: bool,
    ) -> Result<(), Failure> {
        if !pending.is_empty() {
            let offset = pos - pending.len() as u64;
            let batch = std::mem::take(pending);
            let handle = Arc::clone(handle);
            let mut batch = tokio::task::spawn_blocking(move || {
                use std::os::unix::fs::FileExt;
                handle.write_all_at(&batch, offset).map(|()| batch)
            })
            .await
            .map_err(|e| pool_failure(&e))?
            .map_err(|e| io_failure("writing", &e))?;
            batch.clear();
            *pending = batch;
        }
        if hashed {
            self.hashed = pos;
            self.maybe_checkpoint(file).await?;
            self.maybe_write_back(file);
        }
        Ok(())
    }

    /// Starts write-back of what was hashed since the last call, in steps of
    /// `WRITE_BACK_STEP` and at the end of the file.
    fn maybe_write_back(&mut self, file: &File) {
        // A restart from byte 0 moves `hashed` back.
        self.written_back = self.written_back.min(self.hashed);
        if self.hashed - self.written_back >= WRITE_BACK_STEP || self.hashed == self.entry.size {
            start_write_back(file, self.written_back, self.hashed);
            self.written_back = self.hashed;
        }
    }

    /// fsync, then record the hashed prefix, once every `checkpoint_bytes`.
    async fn maybe_checkpoint(&mut self, file: &mut File) -> Result<(), Failure> {
        if self.hashed - self.checkpointed < self.fetch.tuning.checkpoint_bytes {
            return Ok(());
        }
        file.sync_data()
            .await
            .map_err(|e| io_failure("syncing the file", &e))?;
        write_checkpoint(
            &self.ckpt_path,
            Checkpoint {
                offset: self.hashed,
                verified: false,
            },
        )?;
        self.checkpointed = self.hashed;
        Ok(())
    }

    /// The segments after the probe, fetched `window` at a time and hashed in order.
    async fn rest_in_segments(
        &mut self,
        file: &mut File,
        hasher: &mut ContentHasher,
    ) -> Result<(), Failure> {
        let seg = self.fetch.tuning.segment_bytes;
        let size = self.entry.size;
        let starts: Vec<u64> = (self.hashed..size).step_by(seg as usize).collect();
        let dest = Arc::new(self.dest.clone());
        let fetch = self.fetch;
        let url = self.url.clone();
        let entry = self.entry;
        let mut done = futures::stream::iter(starts)
            .map(|s| {
                let url = url.clone();
                let dest = dest.clone();
                async move {
                    let mut handle = OpenOptions::new()
                        .write(true)
                        .open(&*dest)
                        .await
                        .map_err(|e| io_failure("opening the file", &e))?;
                    let end = (s + seg).min(size);
                    let mut part = Run {
                        fetch,
                        url,
                        entry,
                        dest: PathBuf::new(),
                        ckpt_path: PathBuf::new(),
                        hashed: 0,
                        checkpointed: 0,
                        written_back: 0,
                    };
                    part.stream(&mut handle, s, end, None, false).await?;
                    Ok::<_, Failure>((s, end))
                }
            })
            .buffered(self.fetch.tuning.window.max(1));
        while let Some(next) = done.next().await {
            let (s, end) = next?;
            hash_from_disk(file, s, end, hasher).await?;
            self.hashed = end;
            self.maybe_checkpoint(file).await?;
            self.maybe_write_back(file);
        }
        Ok(())
    }

    /// Fetches `[start, end)` into `file`, retrying from the last byte received. With a hasher
    /// the bytes are hashed as they arrive (they extend the hashed prefix); `probe` allows a
    /// `200` answer, which turns the request into a whole-file download.
    async fn stream(
        &mut self,
        file: &mut File,
        start: u64,
        end: u64,
        mut hasher: Option<&mut ContentHasher>,
        probe: bool,
    ) -> Result<Answer, Failure> {
        let tuning = self.fetch.tuning;
        let size = self.entry.size;
        let mut pos = start;
        let mut end = end;
        let mut failures = 0u32;
        let mut answer = Answer::Partial;
        let mut last_problem = String::new();
        while pos < end {
            if failures > 0 {
                if failures > tuning.retries {
                    return Err(Failure::new(
                        Reason::SourceUnavailable,
                        format!("{}: {last_problem}", self.entry.path),
                    ));
                }
                tokio::time::sleep((tuning.retry_step * failures).min(tuning.retry_cap)).await;
            }
            let _permit = self.fetch.limits.request_permit().await;
            let resp = match self
                .fetch
                .client
                .get(
                    self.url.clone(),
                    self.fetch.token,
                    Some((pos, Some(end - 1))),
                )
                .await
            {
                Ok(r) => r,
                Err(f) => {
                    failures += 1;
                    last_problem = f.message;
                    continue;
                }
            };
            match resp.status() {
                StatusCode::PARTIAL_CONTENT => {
                    let (first, total) = content_range(resp.headers()).ok_or_else(|| {
                        Failure::new(Reason::SourceUnavailable, "a 206 without a Content-Range")
                    })?;
                    if first != pos {
                        return Err(Failure::new(
                            Reason::SourceUnavailable,
                            format!("{}: asked for byte {pos}, got {first}", self.entry.path),
                        ));
                    }
                    if total.is_some_and(|t| t != size) {
                        return Err(Failure::new(
                            Reason::IntegrityMismatch,
                            format!(
                                "{}: the hub's size differs from the listing",
                                self.entry.path
                            ),
                        ));
                    }
                }
                StatusCode::OK if probe || matches!(answer, Answer::Whole) => {
                    if resp.content_length().is_some_and(|l| l != size) {
                        return Err(Failure::new(
                            Reason::IntegrityMismatch,
                            format!(
                                "{}: the hub's size differs from the listing",
                                self.entry.path
                            ),
                        ));
                    }
                    if pos > 0 {
                        // The hub ignores ranges: start the file over.
                        self.fetch.restart_from_zero(pos);
                        file.set_len(0)
                            .await
                            .map_err(|e| io_failure("truncating", &e))?;
                        if let Some(h) = hasher.as_deref_mut() {
                            *h = ContentHasher::new(&self.entry.digest, size);
                        }
                        self.hashed = 0;
                        self.checkpointed = 0;
                        pos = 0;
                    }
                    end = size;
                    answer = Answer::Whole;
                }
                StatusCode::OK => {
                    return Err(Failure::new(
                        Reason::SourceUnavailable,
                        format!("{}: the hub stopped honouring ranges", self.entry.path),
                    ));
                }
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::NOT_FOUND => {
                    return Err(Failure::new(
                        Reason::AccessDenied,
                        format!("{}: HTTP {}", self.entry.path, resp.status().as_u16()),
                    ));
                }
                other => {
                    failures += 1;
                    last_problem = format!("HTTP {}", other.as_u16());
                    continue;
                }
            }
            let mut resp = resp;
            let mut pending = Vec::with_capacity(WRITE_BATCH);
            let handle = std_handle(file)?;
            loop {
                let chunk = match tokio::time::timeout(tuning.stall_timeout, resp.chunk()).await {
                    Err(_) => {
                        last_problem = "the transfer stalled".into();
                        failures += 1;
                        break;
                    }
                    Ok(Err(_)) => {
                        last_problem = "connection failure".into();
                        failures += 1;
                        break;
                    }
                    Ok(Ok(None)) => {
                        if pos < end {
                            last_problem = "the body ended early".into();
                            failures += 1;
                        }
                        break;
                    }
                    Ok(Ok(Some(chunk))) => chunk,
                };
                if chunk.len() as u64 > end - pos {
                    return Err(Failure::new(
                        Reason::IntegrityMismatch,
                        format!(
                            "{}: the hub sent more bytes than the file has",
                            self.entry.path
                        ),
                    ));
                }
                self.fetch.limits.take_bytes(chunk.len()).await;
                if let Some(h) = hasher.as_deref_mut() {
                    h.update(&chunk);
                }
                pending.extend_from_slice(&chunk);
                let n = chunk.len() as u64;
                self.fetch.add_received(n);
                self.fetch.add_progress(n);
                pos += n;
                failures = 0;
                if pending.len() >= WRITE_BATCH {
                    self.write_pending(file, &handle, &mut pending, pos, hasher.is_some())
                        .await?;
                }
            }
            // Whatever ended the body, the bytes received so far are kept: a retry resumes
            // after them.
            self.write_pending(file, &handle, &mut pending, pos, hasher.is_some())
                .await?;
        }
        file.flush().await.map_err(|e| io_failure("writing", &e))?;
        Ok(answer)
    }
}

/// `Content-Range: bytes a-b/total` → (a, total); `*` totals are `None`.
fn content_range(headers: &header::HeaderMap) -> Option<(u64, Option<u64>)> {
    let v = headers.get(header::CONTENT_RANGE)?.to_str().ok()?;
    let rest = v.strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (first, _) = range.split_once('-')?;
    Some((first.trim().parse().ok()?, total.trim().parse().ok()))
}
