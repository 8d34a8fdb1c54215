//! The on-disk cache (one per node) and its durability rules.
//!
//! ```text
//! layout                          "gpustack-model-store v1"; any other layout is refused
//! published/<hex>/marker          written before the rename that publishes the tree
//! published/<hex>/manifest.json   the file listing, for peers
//! published/<hex>/tree/...        files 0444, dirs 0555: the bind-mount source
//! partial/<hex>/<attempt>/{tree,state}/
//! trash/<hex>-<unixnano>          renamed here under the claim lock, deleted outside it
//! ledger/refs/<volumeID>.json     which target mounts which tree
//! ledger/digests/<hex>.json       attempts, failures, backoff, last use
//! ```
//!
//! A tree is served only from `published/<hex>/tree` and only while its marker names the same
//! digest; a directory there without a marker (a crash between rename and marker can't happen,
//! since the marker is written first, but a hand-made one can) is never mounted.

use std::{
    fs,
    io::{self, Write},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::{
    durable::{self, read_json, sync_dir, write_json},
    manifest::{Manifest, ManifestDigest},
};

/// The `layout` file's contents; a root with any other layout is refused.
pub const LAYOUT: &str = "gpustack-model-store v1";
/// The format of a published tree's `manifest.json`, recorded in its marker.
pub const MANIFEST_FORMAT: &str = "gpustack-manifest v1";

/// Why a cache operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The cache root holds another layout than [`LAYOUT`].
    #[error("cache root {root} has layout {found:?}; this build only reads {LAYOUT:?}")]
    ForeignLayout {
        /// The cache root.
        root: PathBuf,
        /// The layout its `layout` file names.
        found: String,
    },
    /// A filesystem operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done (`creating`, `writing`, …).
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A volume id that cannot name a ref file.
    #[error("volume id {0:?} is not allowed: use 1 to 128 of A-Z a-z 0-9 . _ -")]
    BadVolumeId(String),
}

impl StoreError {
    /// True when the filesystem ran out of space, which the materializer reports as
    /// `InsufficientCapacity` rather than a generic failure.
    pub fn is_no_space(&self) -> bool {
        matches!(self, StoreError::Io { source, .. } if source.raw_os_error() == Some(nix::libc::ENOSPC))
    }
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { op, path, source }
}

/// Written into `published/<hex>/marker` before the tree becomes visible.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Marker {
    /// The manifest digest (`sha256:<hex>`).
    pub digest: String,
    /// The attempt that published the tree.
    pub attempt: u64,
    /// [`MANIFEST_FORMAT`] at publish time.
    pub manifest_format: String,
    /// Bytes of the tree's files.
    pub size_bytes: u64,
    /// Number of files.
    pub file_count: u64,
    /// When the tree was published.
    pub published_time: Timestamp,
    /// Where the files came from (`Hub`).
    pub source: String,
}

/// `ledger/refs/<volumeID>.json`: a target that has the tree mounted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeRef {
    /// The CSI volume id.
    #[serde(rename = "volumeID")]
    pub volume_id: String,
    /// Where the tree is bind-mounted.
    pub target_path: PathBuf,
    /// The mounted tree's digest hex.
    pub hex: String,
    /// The mounting Pod's namespace (empty in refs written before it was recorded).
    #[serde(default)]
    pub pod_namespace: String,
    /// The mounting Pod's name.
    #[serde(default)]
    pub pod_name: String,
    /// The mounting Pod's UID.
    #[serde(default, rename = "podUID")]
    pub pod_uid: String,
}

/// `ledger/digests/<hex>.json`: what survives a restart about one digest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DigestRecord {
    /// The last attempt number used (the next one is higher).
    #[serde(default)]
    pub last_attempt: u64,
    /// When a mount last used the tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_time: Option<Timestamp>,
    /// Consecutive failed attempts (drives the backoff).
    #[serde(default)]
    pub failures: u32,
    /// The last failure's reason (a `Reason` name); empty when there is none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The last failure's message; empty when there is none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// No attempt before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_time: Option<Timestamp>,
}

/// `manifest.json` beside a published tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PublishedManifest {
    pub digest: String,
    pub entries: Vec<PublishedEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PublishedEntry {
    pub path: String,
    pub size: u64,
    pub digest: String,
}

impl PublishedManifest {
    pub fn of(manifest: &Manifest) -> Self {
        Self {
            digest: manifest.digest().to_string(),
            entries: manifest
                .entries()
                .iter()
                .map(|e| PublishedEntry {
                    path: e.path.clone(),
                    size: e.size,
                    digest: e.digest.to_string(),
                })
                .collect(),
        }
    }
}

/// Paths and durable operations under one cache root.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// Opens (creating when empty) a cache root; refuses one written in another layout.
    pub fn open(root: &Path) -> Result<Self, StoreError> {
        let store = Self {
            root: root.to_path_buf(),
        };
        for dir in [
            store.root.clone(),
            store.published_root(),
            store.partial_root(),
            store.trash_root(),
            store.refs_root(),
            store.digests_root(),
        ] {
            fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
        }
        let layout = store.root.join("layout");
        match fs::read_to_string(&layout) {
            Ok(found) if found.trim_end() == LAYOUT => {}
            Ok(found) => {
                return Err(StoreError::ForeignLayout {
                    root: store.root.clone(),
                    found: found.trim_end().to_owned(),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                durable::write_atomic(&layout, format!("{LAYOUT}\n").as_bytes())
                    .map_err(io_err("writing", &layout))?;
            }
            Err(e) => return Err(io_err("reading", &layout)(e)),
        }
        Ok(store)
    }

    /// The cache root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the root still holds this layout (readiness: the cache is reachable and ours).
    pub fn check_layout(&self) -> Result<(), StoreError> {
        let layout = self.root.join("layout");
        let found = fs::read_to_string(&layout).map_err(io_err("reading", &layout))?;
        if found.trim_end() == LAYOUT {
            Ok(())
        } else {
            Err(StoreError::ForeignLayout {
                root: self.root.clone(),
                found: found.trim_end().to_owned(),
            })
        }
    }

    fn published_root(&self) -> PathBuf {
        self.root.join("published")
    }
    fn partial_root(&self) -> PathBuf {
        self.root.join("partial")
    }
    fn trash_root(&self) -> PathBuf {
        self.root.join("trash")
    }
    fn refs_root(&self) -> PathBuf {
        self.root.join("ledger/refs")
    }
    fn digests_root(&self) -> PathBuf {
        self.root.join("ledger/digests")
    }

    pub(crate) fn published_dir(&self, digest: &ManifestDigest) -> PathBuf {
        self.published_root().join(digest.hex())
    }

    /// Where a digest's unpublished attempts live.
    pub fn partial_dir(&self, digest: &ManifestDigest) -> PathBuf {
        self.partial_root().join(digest.hex())
    }

    /// Where one attempt's files are downloaded.
    pub fn attempt_dir(&self, digest: &ManifestDigest, attempt: u64) -> PathBuf {
        self.partial_dir(digest).join(attempt.to_string())
    }

    /// The marker of a published tree, when there is one naming this digest.
    pub fn marker(&self, digest: &ManifestDigest) -> Option<Marker> {
        let path = self.published_dir(digest).join("marker");
        match read_json::<Marker>(&path) {
            Ok(Some(m)) if m.digest == digest.to_string() => Some(m),
            _ => None,
        }
    }

    /// The tree to bind-mount, only when a valid marker stands beside it.
    pub fn published_tree(&self, digest: &ManifestDigest) -> Option<PathBuf> {
        self.marker(digest)
            .map(|_| self.published_dir(digest).join("tree"))
    }

    /// Every published digest with its marker; directories without a valid marker are skipped.
    pub fn list_published(&self) -> Result<Vec<(ManifestDigest, Marker)>, StoreError> {
        let root = self.published_root();
        let mut out = Vec::new();
        for entry in fs::read_dir(&root).map_err(io_err("listing", &root))? {
            let entry = entry.map_err(io_err("listing", &root))?;
            let Some(digest) = entry
                .file_name()
                .to_str()
                .and_then(ManifestDigest::from_hex)
            else {
                continue;
            };
            if let Some(marker) = self.marker(&digest) {
                out.push((digest, marker));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Attempt numbers present under `partial/<hex>/`, ascending.
    pub fn partial_attempts(&self, digest: &ManifestDigest) -> Vec<u64> {
        let mut attempts: Vec<u64> = fs::read_dir(self.partial_dir(digest))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        attempts.sort_unstable();
        attempts
    }

    /// Digests that have partial attempts on disk.
    pub fn partial_digests(&self) -> Vec<ManifestDigest> {
        fs::read_dir(self.partial_root())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| ManifestDigest::from_hex(e.file_name().to_str()?))
            .collect()
    }

    /// Makes `attempt` (a finished attempt dir holding `tree/`) the published tree of `digest`:
    /// files 0444 and dirs 0555 made durable deepest-first, `state/` removed, `manifest.json` and
    /// the marker written, then one rename publishes it all.
    pub fn publish(
        &self,
        digest: &ManifestDigest,
        attempt: u64,
        manifest: &Manifest,
        source: &str,
        now: Timestamp,
    ) -> Result<Marker, StoreError> {
        let dir = self.attempt_dir(digest, attempt);
        let state = dir.join("state");
        if state.exists() {
            fs::remove_dir_all(&state).map_err(io_err("removing", &state))?;
        }
        seal_tree(&dir.join("tree"))?;
        let listing = dir.join("manifest.json");
        write_json(&listing, &PublishedManifest::of(manifest))
            .map_err(io_err("writing", &listing))?;
        let marker = Marker {
            digest: digest.to_string(),
            attempt,
            manifest_format: MANIFEST_FORMAT.to_owned(),
            size_bytes: manifest.total_size(),
            file_count: manifest.entries().len() as u64,
            published_time: now,
            source: source.to_owned(),
        };
        let marker_path = dir.join("marker");
        write_json(&marker_path, &marker).map_err(io_err("writing", &marker_path))?;
        sync_dir(&dir).map_err(io_err("syncing", &dir))?;
        let target = self.published_dir(digest);
        if target.exists() {
            // A tree without a marker (never served) is in the way: move it aside first.
            self.trash_path(&target, digest)?;
        }
        fs::rename(&dir, &target).map_err(io_err("publishing", &target))?;
        sync_dir(&self.published_root()).map_err(io_err("syncing", &self.published_root()))?;
        // Older attempts of the same digest are of no further use.
        let partial = self.partial_dir(digest);
        if partial.exists() {
            self.trash_path(&partial, digest)?;
        }
        Ok(marker)
    }

    /// Moves a published tree into `trash/` (call under the claim lock); `empty_trash` deletes it.
    pub fn trash_published(&self, digest: &ManifestDigest) -> Result<(), StoreError> {
        let dir = self.published_dir(digest);
        if dir.exists() {
            self.trash_path(&dir, digest)?;
        }
        Ok(())
    }

    /// Moves a digest's partial attempts into `trash/`.
    pub fn trash_partials(&self, digest: &ManifestDigest) -> Result<(), StoreError> {
        let dir = self.partial_dir(digest);
        if dir.exists() {
            self.trash_path(&dir, digest)?;
        }
        Ok(())
    }

    fn trash_path(&self, path: &Path, digest: &ManifestDigest) -> Result<(), StoreError> {
        let nanos = Timestamp::now().as_nanosecond();
        let dest = self.trash_root().join(format!("{}-{nanos}", digest.hex()));
        fs::rename(path, &dest).map_err(io_err("trashing", path))?;
        sync_dir(&self.trash_root()).map_err(io_err("syncing", &self.trash_root()))
    }

    /// Deletes everything in `trash/` (sealed trees have 0555 dirs, so they are opened first).
    pub fn empty_trash(&self) -> Result<(), StoreError> {
        let root = self.trash_root();
        for entry in fs::read_dir(&root).map_err(io_err("listing", &root))? {
            let path = entry.map_err(io_err("listing", &root))?.path();
            unseal_dirs(&path);
            fs::remove_dir_all(&path).map_err(io_err("removing", &path))?;
        }
        Ok(())
    }

    /// The digest's record; the default when there is none.
    pub fn digest_record(&self, digest: &ManifestDigest) -> Result<DigestRecord, StoreError> {
        let path = self.digests_root().join(format!("{}.json", digest.hex()));
        read_json(&path)
            .map(Option::unwrap_or_default)
            .map_err(io_err("reading", &path))
    }

    /// Writes the digest's record durably.
    pub fn write_digest_record(
        &self,
        digest: &ManifestDigest,
        record: &DigestRecord,
    ) -> Result<(), StoreError> {
        let path = self.digests_root().join(format!("{}.json", digest.hex()));
        write_json(&path, record).map_err(io_err("writing", &path))
    }

    /// Every digest record, with its digest.
    pub fn digest_records(&self) -> Result<Vec<(ManifestDigest, DigestRecord)>, StoreError> {
        let root = self.digests_root();
        let mut out = Vec::new();
        for entry in fs::read_dir(&root).map_err(io_err("listing", &root))? {
            let path = entry.map_err(io_err("listing", &root))?.path();
            let Some(digest) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(ManifestDigest::from_hex)
            else {
                continue;
            };
            if let Some(r) = read_json(&path).map_err(io_err("reading", &path))? {
                out.push((digest, r));
            }
        }
        Ok(out)
    }

    pub(crate) fn remove_digest_record(&self, digest: &ManifestDigest) -> Result<(), StoreError> {
        remove_if_present(&self.digest_record_path(digest))
    }

    /// `ledger/digests/<hex>.json`.
    pub fn digest_record_path(&self, digest: &ManifestDigest) -> PathBuf {
        self.digests_root().join(format!("{}.json", digest.hex()))
    }

    fn ref_path(&self, volume_id: &str) -> Result<PathBuf, StoreError> {
        check_volume_id(volume_id)?;
        Ok(self.refs_root().join(format!("{volume_id}.json")))
    }

    /// Writes the ref durably (the mount is recorded).
    pub fn write_ref(&self, r: &VolumeRef) -> Result<(), StoreError> {
        let path = self.ref_path(&r.volume_id)?;
        write_json(&path, r).map_err(io_err("writing", &path))
    }

    pub(crate) fn remove_ref(&self, volume_id: &str) -> Result<(), StoreError> {
        let path = self.ref_path(volume_id)?;
        remove_if_present(&path)?;
        sync_dir(&self.refs_root()).map_err(io_err("syncing", &self.refs_root()))
    }

    pub(crate) fn refs(&self) -> Result<Vec<VolumeRef>, StoreError> {
        let root = self.refs_root();
        let mut out = Vec::new();
        for entry in fs::read_dir(&root).map_err(io_err("listing", &root))? {
            let path = entry.map_err(io_err("listing", &root))?.path();
            if path.extension().is_some_and(|e| e == "json")
                && let Some(r) = read_json(&path).map_err(io_err("reading", &path))?
            {
                out.push(r);
            }
        }
        out.sort_by(|a: &VolumeRef, b| a.volume_id.cmp(&b.volume_id));
        Ok(out)
    }
}

/// The newest modification time of `path` or anything under it; `None` when nothing is there.
pub fn newest_mtime(path: &Path) -> Option<Timestamp> {
    let mut newest: Option<std::time::SystemTime> = None;
    let mut pending = vec![path.to_path_buf()];
    while let Some(p) = pending.pop() {
        let Ok(meta) = fs::symlink_metadata(&p) else {
            continue;
        };
        if let Ok(m) = meta.modified() {
            newest = newest.max(Some(m));
        }
        if meta.is_dir() {
            pending.extend(
                fs::read_dir(&p)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path()),
            );
        }
    }
    newest.and_then(|t| Timestamp::try_from(t).ok())
}

fn remove_if_present(path: &Path) -> Result<(), StoreError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err("removing", path)(e)),
        _ => Ok(()),
    }
}

/// Kubelet's inline volume ids are `csi-<sha256>`; anything else that is a safe file name is fine.
pub fn check_volume_id(id: &str) -> Result<(), StoreError> {
    let ok = (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && id != "."
        && id != "..";
    if ok {
        Ok(())
    } else {
        Err(StoreError::BadVolumeId(id.to_owned()))
    }
}

/// Files 0444 + fsync, then directories 0555 + fsync, deepest first.
fn seal_tree(tree: &Path) -> Result<(), StoreError> {
    fs::create_dir_all(tree).map_err(io_err("creating", tree))?;
    let mut dirs = vec![tree.to_path_buf()];
    let mut i = 0;
    while i < dirs.len() {
        let dir = dirs[i].clone();
        for entry in fs::read_dir(&dir).map_err(io_err("listing", &dir))? {
            let entry = entry.map_err(io_err("listing", &dir))?;
            let path = entry.path();
            let kind = entry.file_type().map_err(io_err("inspecting", &path))?;
            if kind.is_dir() {
                dirs.push(path);
            } else if kind.is_file() {
                fs::set_permissions(&path, fs::Permissions::from_mode(0o444))
                    .map_err(io_err("sealing", &path))?;
                fs::File::open(&path)
                    .and_then(|f| f.sync_all())
                    .map_err(io_err("syncing", &path))?;
            }
        }
        i += 1;
    }
    for dir in dirs.iter().rev() {
        sync_dir(dir).map_err(io_err("syncing", dir))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o555))
            .map_err(io_err("sealing", dir))?;
    }
    Ok(())
}

/// Makes sealed directories writable again, so that a resumed attempt or a delete can proceed.
pub fn unseal_dirs(path: &Path) {
    if path.is_dir() && !path.is_symlink() {
        let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o755));
        for entry in fs::read_dir(path).into_iter().flatten().flatten() {
            unseal_dirs(&entry.path());
        }
    }
}

/// Writes `bytes` to a new file, creating parent directories (used by tests and fixtures).
pub fn write_new_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let mut f = fs::File::create(path)?;
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{FileDigest, ManifestEntry};

    fn manifest() -> Manifest {
        Manifest::new(vec![ManifestEntry {
            path: "sub/a.txt".into(),
            size: 6,
            digest: FileDigest::git_sha1(&"1".repeat(40)).unwrap(),
        }])
        .unwrap()
    }

    #[test]
    fn refuses_a_foreign_layout() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("layout"), "something else v9\n").unwrap();
        let err = Store::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("something else v9"), "{err}");
        let fresh = tempfile::tempdir().unwrap();
        Store::open(fresh.path()).unwrap();
        Store::open(fresh.path()).expect("reopening our own layout");
    }

    #[test]
    fn publish_seals_marks_and_moves_the_attempt() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let m = manifest();
        let d = m.digest();
        let attempt = store.attempt_dir(&d, 3);
        write_new_file(&attempt.join("tree/sub/a.txt"), b"hello\n").unwrap();
        write_new_file(&attempt.join("state/x"), b"{}").unwrap();
        assert_eq!(store.published_tree(&d), None);

        let marker = store
            .publish(&d, 3, &m, "Hub", Timestamp::UNIX_EPOCH)
            .unwrap();
        assert_eq!(marker.attempt, 3);
        assert_eq!(marker.file_count, 1);
        let tree = store.published_tree(&d).expect("published");
        let file = tree.join("sub/a.txt");
        assert_eq!(fs::read(&file).unwrap(), b"hello\n");
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o444);
        assert_eq!(mode(&tree.join("sub")), 0o555);
        assert_eq!(mode(&tree), 0o555);
        assert!(!store.published_dir(&d).join("state").exists());
        assert!(store.published_dir(&d).join("manifest.json").exists());
        assert!(!store.partial_dir(&d).exists());
        assert_eq!(store.list_published().unwrap().len(), 1);

        store.trash_published(&d).unwrap();
        assert_eq!(store.published_tree(&d), None);
        store.empty_trash().unwrap();
        assert_eq!(fs::read_dir(dir.path().join("trash")).unwrap().count(), 0);
    }

    #[test]
    fn a_tree_without_a_matching_marker_is_never_served() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let d = manifest().digest();
        write_new_file(&store.published_dir(&d).join("tree/f"), b"x").unwrap();
        assert_eq!(store.published_tree(&d), None);
        let mut wrong = Marker {
            digest: format!("sha256:{}", "0".repeat(64)),
            attempt: 1,
            manifest_format: MANIFEST_FORMAT.into(),
            size_bytes: 1,
            file_count: 1,
            published_time: Timestamp::UNIX_EPOCH,
            source: "Hub".into(),
        };
        let marker = store.published_dir(&d).join("marker");
        write_json(&marker, &wrong).unwrap();
        assert_eq!(store.published_tree(&d), None, "marker for another digest");
        assert!(store.list_published().unwrap().is_empty());
        wrong.digest = d.to_string();
        write_json(&marker, &wrong).unwrap();
        assert!(store.published_tree(&d).is_some());
    }

    #[test]
    fn ledger_round_trips_and_checks_volume_ids() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let r = VolumeRef {
            volume_id: "csi-abc".into(),
            target_path: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/m/mount".into(),
            hex: "0".repeat(64),
            pod_namespace: "team-a".into(),
            pod_name: "p".into(),
            pod_uid: "u".into(),
        };
        store.write_ref(&r).unwrap();
        assert_eq!(store.refs().unwrap(), vec![r]);
        store.remove_ref("csi-abc").unwrap();
        store.remove_ref("csi-abc").expect("idempotent");
        assert!(store.refs().unwrap().is_empty());
        for bad in ["", "a/b", "..", &"x".repeat(129)] {
            assert!(check_volume_id(bad).is_err(), "{bad:?}");
        }
        let d = manifest().digest();
        assert_eq!(store.digest_record(&d).unwrap(), DigestRecord::default());
        let rec = DigestRecord {
            last_attempt: 2,
            failures: 1,
            reason: "SourceUnavailable".into(),
            ..Default::default()
        };
        store.write_digest_record(&d, &rec).unwrap();
        assert_eq!(store.digest_record(&d).unwrap(), rec);
        assert_eq!(store.digest_records().unwrap().len(), 1);
    }
}
