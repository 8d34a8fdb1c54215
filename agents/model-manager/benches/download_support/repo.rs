//! The benchmark's repository: files of random bytes written under the work directory, each
//! with its SHA-256 (the LFS oid the hub lists), and the manifest digest the worker would
//! resolve for them.

use std::{
    io::{Read, Write},
    path::Path,
    time::{Duration, Instant},
};

use gpustack_model_manager::{
    hashing::ContentHasher,
    manifest::{FileDigest, Manifest, ManifestDigest, ManifestEntry},
};
use sha2::{Digest as _, Sha256};

use super::hub::HubFile;

const CHUNK: usize = 4 << 20;

/// xorshift64*: fast, and its output does not compress, which is all a payload needs here.
struct Noise(u64);

impl Noise {
    fn fill(&mut self, buf: &mut [u8]) {
        for word in buf.chunks_exact_mut(8) {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            word.copy_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
        }
    }
}

/// Writes `count` files of `size` bytes (a multiple of 8) into `dir`.
pub fn generate(dir: &Path, count: usize, size: u64) -> Vec<HubFile> {
    std::fs::create_dir_all(dir).unwrap();
    let mut buf = vec![0u8; CHUNK];
    (0..count)
        .map(|i| {
            let name = format!("model-{:05}-of-{count:05}.safetensors", i + 1);
            let path = dir.join(&name);
            let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
            let mut noise = Noise(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1));
            let mut h = Sha256::new();
            let mut left = size;
            while left > 0 {
                let n = (CHUNK as u64).min(left) as usize;
                noise.fill(&mut buf[..n]);
                h.update(&buf[..n]);
                out.write_all(&buf[..n]).unwrap();
                left -= n as u64;
            }
            out.flush().unwrap();
            HubFile {
                name,
                path,
                size,
                oid: h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
            }
        })
        .collect()
}

/// The `gpustack-manifest v1` digest of the repository.
pub fn digest(files: &[HubFile]) -> ManifestDigest {
    Manifest::new(
        files
            .iter()
            .map(|f| ManifestEntry {
                path: f.name.clone(),
                size: f.size,
                digest: FileDigest::Sha256(f.oid.clone()),
            })
            .collect(),
    )
    .expect("a valid manifest")
    .digest()
}

/// The downloader's hasher over the files, one after another on one thread, read in 1 MiB
/// blocks as the downloader reads back a segment; every result is checked against the oid.
pub fn hash_with_ours(files: &[HubFile]) -> Duration {
    let mut buf = vec![0u8; 1 << 20];
    let started = Instant::now();
    for f in files {
        let mut h = ContentHasher::new(&FileDigest::Sha256(f.oid.clone()), f.size);
        let mut file = std::fs::File::open(&f.path).unwrap();
        loop {
            let n = file.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        assert_eq!(h.finish_hex(), f.oid, "our hash of {}", f.name);
    }
    started.elapsed()
}
