//! In-stream content hashing: SHA-256 for LFS files (the oid), the git blob SHA-1 (seeded with
//! `"blob <n>\0"`) for the others.

use sha1::Sha1;
use sha2::{Digest as _, Sha256};

use crate::{hex, manifest::FileDigest};

/// A running hash of one file's content, of the kind its [`FileDigest`] names.
#[derive(Clone)]
pub enum ContentHasher {
    /// An LFS file's oid.
    Sha256(Sha256),
    /// A git blob id, seeded with the blob header.
    GitSha1(Sha1),
}

impl ContentHasher {
    /// A hasher for content expected to match `digest` and to be `size` bytes long.
    pub fn new(digest: &FileDigest, size: u64) -> Self {
        match digest {
            FileDigest::Sha256(_) => Self::Sha256(Sha256::new()),
            FileDigest::GitSha1(_) => {
                let mut h = Sha1::new();
                h.update(format!("blob {size}\0").as_bytes());
                Self::GitSha1(h)
            }
        }
    }

    /// Feeds the next bytes of the file.
    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha256(h) => h.update(bytes),
            Self::GitSha1(h) => h.update(bytes),
        }
    }

    /// The digest as lowercase hex, to compare with the manifest's.
    pub fn finish_hex(self) -> String {
        match self {
            Self::Sha256(h) => hex::encode(&h.finalize()),
            Self::GitSha1(h) => hex::encode(&h.finalize()),
        }
    }
}

/// The digest of `bytes` in the form the manifest uses for its kind of file.
pub fn digest_of(bytes: &[u8], lfs: bool) -> FileDigest {
    let probe = if lfs {
        FileDigest::Sha256(String::new())
    } else {
        FileDigest::GitSha1(String::new())
    };
    let mut h = ContentHasher::new(&probe, bytes.len() as u64);
    h.update(bytes);
    let hex = h.finish_hex();
    if lfs {
        FileDigest::Sha256(hex)
    } else {
        FileDigest::GitSha1(hex)
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::manifest::{Manifest, ManifestEntry};

    fn tool(cmd: &str, args: &[&str], dir: &std::path::Path) -> String {
        let out = Command::new(cmd)
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap_or_else(|e| panic!("{cmd} is needed by this test: {e}"));
        assert!(out.status.success(), "{cmd} {args:?} failed");
        String::from_utf8(out.stdout).unwrap()
    }

    /// The manifest digest of a fixed example, checked against values produced by other
    /// programs: `git hash-object` for blob ids, `sha256sum` for LFS oids and for the text.
    #[test]
    fn manifest_digest_matches_independent_tools() {
        let dir = tempfile::tempdir().unwrap();
        let config = br#"{"model_type":"test"}"#.to_vec();
        let weights: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let note = b"hello\n".to_vec();
        std::fs::write(dir.path().join("config.json"), &config).unwrap();
        std::fs::write(dir.path().join("weights"), &weights).unwrap();
        std::fs::write(dir.path().join("a.txt"), &note).unwrap();
        let git = |f: &str| {
            tool("git", &["hash-object", f], dir.path())
                .trim()
                .to_owned()
        };
        let sha = |f: &str| {
            tool("sha256sum", &[f], dir.path())
                .split_whitespace()
                .next()
                .unwrap()
                .to_owned()
        };
        let (cfg_id, note_id, oid) = (git("config.json"), git("a.txt"), sha("weights"));
        assert_eq!(
            digest_of(&config, false),
            FileDigest::GitSha1(cfg_id.clone())
        );
        assert_eq!(digest_of(&weights, true), FileDigest::Sha256(oid.clone()));

        // The manifest text spelled out by hand, hashed by sha256sum.
        let text = format!(
            "gpustack-manifest v1\ngitsha1:{cfg_id} 21 config.json\nsha256:{oid} 300000 model.safetensors\ngitsha1:{note_id} 6 sub/a.txt\n"
        );
        std::fs::write(dir.path().join("manifest"), &text).unwrap();
        let want = format!("sha256:{}", sha("manifest"));

        let m = Manifest::new(vec![
            ManifestEntry {
                path: "sub/a.txt".into(),
                size: 6,
                digest: digest_of(&note, false),
            },
            ManifestEntry {
                path: "model.safetensors".into(),
                size: 300_000,
                digest: digest_of(&weights, true),
            },
            ManifestEntry {
                path: "config.json".into(),
                size: 21,
                digest: digest_of(&config, false),
            },
        ])
        .unwrap();
        assert_eq!(m.text(), text);
        assert_eq!(m.digest().to_string(), want);
    }
}
