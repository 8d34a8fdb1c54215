//! The `gpustack-manifest v1` text and its digest, which names a tree of files by content.
//!
//! The text is the header line and one `<algo>:<hex> <size> <path>` line per file, sorted by the
//! path's UTF-8 bytes; the digest is `sha256:` and the SHA-256 of that text. The worker computes
//! the same value when it resolves an artifact, so every byte of the format matters.

use std::fmt;

use sha2::{Digest as _, Sha256};

use crate::hex;

pub(crate) const HEADER: &str = "gpustack-manifest v1";

/// How a file's content is identified: the LFS oid (SHA-256 of the bytes) or the git blob id
/// (SHA-1 of `"blob <n>\0"` and the bytes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FileDigest {
    /// An LFS file: the SHA-256 of its bytes, as hex.
    Sha256(String),
    /// A regular git file: its blob id (SHA-1), as hex.
    GitSha1(String),
}

impl FileDigest {
    /// Checks the hex length for the algorithm and lowercases it.
    pub fn sha256(hex: &str) -> Result<Self, ManifestError> {
        hex::check(hex, 64)
            .map(Self::Sha256)
            .ok_or_else(|| ManifestError::BadDigest(hex.to_owned()))
    }

    pub(crate) fn git_sha1(hex: &str) -> Result<Self, ManifestError> {
        hex::check(hex, 40)
            .map(Self::GitSha1)
            .ok_or_else(|| ManifestError::BadDigest(hex.to_owned()))
    }

    pub(crate) fn algo(&self) -> &'static str {
        match self {
            Self::Sha256(_) => "sha256",
            Self::GitSha1(_) => "gitsha1",
        }
    }

    /// The digest's hex.
    pub fn hex(&self) -> &str {
        match self {
            Self::Sha256(h) | Self::GitSha1(h) => h,
        }
    }
}

impl fmt::Display for FileDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.algo(), self.hex())
    }
}

/// One file of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    /// Path relative to the tree's root (see [`check_path`]).
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// The content's digest.
    pub digest: FileDigest,
}

/// Why a manifest, an entry or a digest was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error(
        "file path {0:?} is not allowed: it must be relative, without control characters and without empty, '.' or '..' segments"
    )]
    /// A path that [`check_path`] refuses.
    BadPath(String),
    /// The same path listed twice.
    #[error("file path {0:?} is listed twice")]
    Duplicate(String),
    /// A file digest that is not lowercase hex of the algorithm's length.
    #[error("file digest {0:?} is not lowercase hex of the algorithm's length")]
    BadDigest(String),
    /// A manifest digest that is not `sha256:<64 hex>`.
    #[error("manifest digest {0:?} is not 'sha256:' followed by 64 hex digits")]
    BadManifestDigest(String),
}

/// A validated, sorted set of files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    entries: Vec<ManifestEntry>,
}

impl Manifest {
    /// Validates every path, sorts by path bytes and refuses duplicates.
    pub fn new(mut entries: Vec<ManifestEntry>) -> Result<Self, ManifestError> {
        for e in &entries {
            check_path(&e.path)?;
        }
        entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        if let Some(w) = entries.windows(2).find(|w| w[0].path == w[1].path) {
            return Err(ManifestError::Duplicate(w[0].path.clone()));
        }
        Ok(Self { entries })
    }

    /// The files, sorted by path.
    pub fn entries(&self) -> &[ManifestEntry] {
        &self.entries
    }

    pub(crate) fn total_size(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }

    /// The exact text whose hash is the digest.
    pub fn text(&self) -> String {
        let mut text = format!("{HEADER}\n");
        for e in &self.entries {
            text.push_str(&format!("{} {} {}\n", e.digest, e.size, e.path));
        }
        text
    }

    /// The SHA-256 of [`Manifest::text`]: the identity of the tree.
    pub fn digest(&self) -> ManifestDigest {
        ManifestDigest(hex::encode(&Sha256::digest(self.text().as_bytes())))
    }
}

/// A path inside a tree: relative, UTF-8, no control characters, no empty/`.`/`..` segments.
pub fn check_path(path: &str) -> Result<(), ManifestError> {
    let bad = path.is_empty()
        || path.chars().any(char::is_control)
        || path
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..");
    if bad {
        Err(ManifestError::BadPath(path.to_owned()))
    } else {
        Ok(())
    }
}

/// `sha256:<hex>`, held as the hex (which names directories in the cache).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ManifestDigest(String);

impl ManifestDigest {
    /// Parses `sha256:<64 hex>`.
    pub fn parse(text: &str) -> Result<Self, ManifestError> {
        text.strip_prefix("sha256:")
            .and_then(|h| hex::check(h, 64))
            .map(Self)
            .ok_or_else(|| ManifestError::BadManifestDigest(text.to_owned()))
    }

    /// From a cache directory name.
    pub fn from_hex(h: &str) -> Option<Self> {
        hex::check(h, 64).map(Self)
    }

    /// The 64 hex digits (the cache directory's name).
    pub fn hex(&self) -> &str {
        &self.0
    }

    /// The first 12 hex digits, as progress messages show them.
    pub fn short(&self) -> String {
        format!("sha256:{}", &self.0[..12])
    }
}

impl fmt::Display for ManifestDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, size: u64, digest: FileDigest) -> ManifestEntry {
        ManifestEntry {
            path: path.into(),
            size,
            digest,
        }
    }

    #[test]
    fn text_is_sorted_by_path_bytes() {
        let m = Manifest::new(vec![
            entry("b", 1, FileDigest::git_sha1(&"b".repeat(40)).unwrap()),
            entry("B", 2, FileDigest::sha256(&"a".repeat(64)).unwrap()),
            entry("a/z", 3, FileDigest::git_sha1(&"c".repeat(40)).unwrap()),
        ])
        .unwrap();
        let want = format!(
            "gpustack-manifest v1\nsha256:{} 2 B\ngitsha1:{} 3 a/z\ngitsha1:{} 1 b\n",
            "a".repeat(64),
            "c".repeat(40),
            "b".repeat(40)
        );
        assert_eq!(m.text(), want);
    }

    #[test]
    fn bad_paths_and_duplicates_are_refused() {
        let d = || FileDigest::git_sha1(&"0".repeat(40)).unwrap();
        for bad in [
            "",
            "/abs",
            "a//b",
            "a/./b",
            "../x",
            "a/..",
            "tab\there",
            "dir/",
        ] {
            assert_eq!(
                Manifest::new(vec![entry(bad, 0, d())]),
                Err(ManifestError::BadPath(bad.into())),
                "{bad:?}"
            );
        }
        assert_eq!(
            Manifest::new(vec![entry("x", 0, d()), entry("x", 1, d())]),
            Err(ManifestError::Duplicate("x".into()))
        );
    }

    #[test]
    fn digests_are_checked() {
        assert!(FileDigest::sha256(&"a".repeat(63)).is_err());
        assert!(FileDigest::git_sha1(&"g".repeat(40)).is_err());
        assert_eq!(
            FileDigest::git_sha1(&"AB".repeat(20)).unwrap().hex(),
            "ab".repeat(20)
        );
        assert!(ManifestDigest::parse(&format!("sha256:{}", "0".repeat(64))).is_ok());
        assert!(ManifestDigest::parse(&format!("sha1:{}", "0".repeat(64))).is_err());
        assert_eq!(
            ManifestDigest::parse(&format!("sha256:{}", "f".repeat(64)))
                .unwrap()
                .short(),
            "sha256:ffffffffffff"
        );
    }
}
