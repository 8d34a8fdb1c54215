//! `model-manager` end to end: the real binary against an embedded cluster holding the
//! ModelArtifact and the node's NodeModelStore, Python grpcio as the kubelet on the CSI socket,
//! and a hub: olah (from PyPI, the real local Hugging Face server) for the mount test, the fault
//! hub of the plugin's tests (ranges, request accounting) for the kill -9 resume test.
//!
//! The cache lives on a tmpfs of fixed size, so the watermarks judge a filesystem the test owns
//! (the host's may be above 80% full). Mounting needs CAP_SYS_ADMIN: without it the tests fail
//! and say why (they cannot show what they name without mounting), never pass.

#[path = "../../agents/model-manager/tests/support/fault_hub.rs"]
mod fault_hub;
#[path = "../../agents/model-manager/tests/support/grpcio.rs"]
mod grpcio;
#[path = "../../agents/model-manager/tests/support/olah.rs"]
mod olah;

use std::{
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::Duration,
};

use gpustack_tests::{embedded::GatewayProcess, hub::upstream, operator, wait::wait_until};
use olah::RepoFile;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

const DEADLINE: Duration = Duration::from_secs(90);
const NODE: &str = "node-1";

/// A scratch directory; on drop every mount under it (the cache tmpfs, bind mounts a failed
/// test left) is detached, deepest first, before the directory is removed.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new() -> Self {
        Self(tempfile::tempdir().expect("a scratch directory"))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

/// Mount points under `root`, from this process's mount table (octal escapes undone).
fn mounts_under(root: &Path) -> Vec<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let unescape = |s: &str| {
        let mut out = Vec::new();
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'\\'
                && i + 3 < b.len()
                && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8)
            {
                out.push(v);
                i += 4;
                continue;
            }
            out.push(b[i]);
            i += 1;
        }
        PathBuf::from(String::from_utf8_lossy(&out).into_owned())
    };
    table
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(unescape))
        .filter(|p| p.starts_with(root))
        .collect()
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let mut mounts = mounts_under(self.path());
        mounts.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for m in mounts {
            let _ = std::process::Command::new("umount")
                .arg("--lazy")
                .arg(&m)
                .status();
        }
    }
}

/// Mounts a tmpfs of `mib` MiB at `dir`, failing the test with the reason where that cannot be
/// done here: without its own filesystem the cache, and so what the tests name, cannot be shown.
fn tmpfs(dir: &Path, mib: u64) {
    if let Err(reason) = try_tmpfs(dir, mib) {
        panic!(
            "this test needs a tmpfs of its own for the cache (run it as root or with \
             CAP_SYS_ADMIN) and {reason}"
        );
    }
}

/// Mounts a tmpfs of `mib` MiB at `dir`; `Err` says why it cannot be done here.
fn try_tmpfs(dir: &Path, mib: u64) -> Result<(), String> {
    std::fs::create_dir_all(dir).unwrap();
    let out = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
        .arg(dir)
        .output()
        .map_err(|e| format!("mount is not available ({e})"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "mounting is not permitted here: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The plugin process; killed (SIGKILL) on drop.
struct Plugin(Child);

impl Plugin {
    /// Starts `model-manager` for [`NODE`] with its cache at `work/cache`.
    fn start(work: &Path, gw: &GatewayProcess, port: u16) -> Self {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(work.join("plugin.log"))
            .unwrap();
        let child = operator()
            .arg("model-manager")
            .arg(format!("--node-name={NODE}"))
            .arg(format!("--kubeconfig={}", gw.kubeconfig().display()))
            .arg(format!("--kubelet-dir={}", work.join("kubelet").display()))
            .arg(format!("--cache-root={}", work.join("cache").display()))
            .arg(format!("--csi-socket={}", socket(work).display()))
            .arg(format!("--secure-port={port}"))
            // Read without a token here; prometheus_scrape.rs scrapes with one.
            .arg("--metrics-auth=none")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting model-manager");
        Self(child)
    }

    /// kill -9, then reap.
    fn kill(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn socket(work: &Path) -> PathBuf {
    work.join("kubelet/plugins/model.csi.gpustack.ai/csi.sock")
}

fn target(work: &Path, pod: &str) -> PathBuf {
    work.join(format!(
        "kubelet/pods/{pod}/volumes/kubernetes.io~csi/model/mount"
    ))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn git_blob(bytes: &[u8]) -> String {
    let out = std::process::Command::new("git")
        .args(["hash-object", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(bytes)?;
            c.wait_with_output()
        })
        .expect("git hash-object");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The `gpustack-manifest v1` digest of `(algo:hex, size, path)` lines, spelled out here from
/// git's and sha256's answers (what the worker resolves).
fn manifest_digest(mut lines: Vec<(String, usize, String)>) -> String {
    lines.sort_by(|a, b| a.2.as_bytes().cmp(b.2.as_bytes()));
    let mut text = String::from("gpustack-manifest v1\n");
    for (digest, size, path) in lines {
        text.push_str(&format!("{digest} {size} {path}\n"));
    }
    format!("sha256:{}", hex(&Sha256::digest(text.as_bytes())))
}

/// An embedded cluster with the CRDs, namespaces `team-a` and `team-b`, the node's
/// NodeModelStore (`spec` as YAML flow), and the resolved ModelArtifact `team-a/llm` of
/// `org/model` at `commit`. Returns the gateway and the artifact's UID.
fn cluster(
    work: &Path,
    spec: &str,
    commit: &str,
    digest: &str,
    files: usize,
    size: usize,
) -> (GatewayProcess, String) {
    let gw = upstream(work, "c1", &[]);
    for crd in ["modelartifacts", "nodemodelstores"] {
        gw.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd}.worker.gpustack.ai"),
            "--timeout=20s",
        ]);
    }
    gw.kubectl_ok(&["create", "namespace", "team-a"]);
    gw.kubectl_ok(&["create", "namespace", "team-b"]);
    let manifests = work.join("objects.yaml");
    std::fs::write(
        &manifests,
        format!(
            "apiVersion: worker.gpustack.ai/v1alpha1\nkind: NodeModelStore\nmetadata: {{name: {NODE}}}\nspec: {spec}\n---\napiVersion: worker.gpustack.ai/v1alpha1\nkind: ModelArtifact\nmetadata: {{name: llm, namespace: team-a}}\nspec:\n  source: {{huggingFace: {{repository: org/model}}}}\n",
        ),
    )
    .unwrap();
    gw.kubectl_ok(&["apply", "-f", manifests.to_str().unwrap()]);
    let status = json!({"status": {
        "resolved": {"revision": commit, "manifestDigest": digest, "fileCount": files, "sizeBytes": size},
        "conditions": [{"type": "Resolved", "status": "True", "reason": "Resolved", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }});
    gw.kubectl_ok(&[
        "-n",
        "team-a",
        "patch",
        "modelartifact",
        "llm",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    let uid = gw.kubectl_ok(&[
        "-n",
        "team-a",
        "get",
        "modelartifact",
        "llm",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    (gw, uid)
}

/// The kubelet's NodePublishVolume for `pod` in namespace `ns`.
fn publish(work: &Path, pod: &str, ns: &str, uid: &str, digest: &str) -> Value {
    json!({
        "volumeId": format!("csi-{pod}"),
        "targetPath": target(work, pod),
        "volumeCapability": {"mount": {}, "accessMode": {"mode": "SINGLE_NODE_READER_ONLY"}},
        "volumeContext": {
            "artifact": "llm", "artifactUID": uid, "manifestDigest": digest,
            "csi.storage.k8s.io/ephemeral": "true",
            "csi.storage.k8s.io/pod.namespace": ns,
            "csi.storage.k8s.io/pod.name": pod, "csi.storage.k8s.io/pod.uid": pod,
        },
    })
}

/// GET on the plugin's HTTPS port, by curl.
fn https_get(port: u16, path: &str) -> Result<String, String> {
    let out = std::process::Command::new("curl")
        .args(["-sSk", "--max-time", "10"])
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl");
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The value of the metric line `name` (labels included), if present.
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Waits until the plugin's first status pass has applied the node's spec (its status carries
/// the spec's generation).
fn wait_for_spec_applied(gw: &GatewayProcess) {
    wait_until("the plugin to apply the node's spec", DEADLINE, || {
        let out = gw.kubectl(&["get", "nms", NODE, "-o", "json"]);
        let nms: Value = serde_json::from_slice(&out.stdout).ok()?;
        let generation = nms["metadata"]["generation"].as_i64()?;
        (nms["status"]["observedGeneration"].as_i64() == Some(generation)).then_some(())
    });
}

#[test]
fn a_pod_mounts_its_namespaces_artifact_and_status_shows_it() {
    let scratch = Scratch::new();
    let work = scratch.path();
    let weights: Vec<u8> = (0..200_000u32).map(|i| (i % 239) as u8).collect();
    let config = br#"{"model_type":"test"}"#;
    let files = [
        RepoFile {
            path: "config.json",
            bytes: config,
            lfs: false,
        },
        RepoFile {
            path: "model.safetensors",
            bytes: &weights,
            lfs: true,
        },
    ];
    let commit = olah::make_repo(&work.join("hub/mirrors"), "org/model", &files);
    let hub = olah::start(&work.join("hub"), "org/model");
    let digest = manifest_digest(vec![
        (
            format!("gitsha1:{}", git_blob(config)),
            config.len(),
            "config.json".into(),
        ),
        (
            format!("sha256:{}", hex(&Sha256::digest(&weights))),
            weights.len(),
            "model.safetensors".into(),
        ),
    ]);
    let size = config.len() + weights.len();
    let (gw, uid) = cluster(
        work,
        &format!("{{hub: {{huggingFaceEndpoint: \"{}\"}}}}", hub.url),
        &commit,
        &digest,
        2,
        size,
    );

    tmpfs(&work.join("cache"), 64);
    let port = gpustack_tests::embedded::free_port();
    let _plugin = Plugin::start(work, &gw, port);
    let client = grpcio::CsiClient::new(work, &socket(work));
    let info = wait_until("the CSI socket to answer", DEADLINE, || {
        let o = client.call("Identity.GetPluginInfo", json!({}));
        (o.code == "OK").then_some(o)
    });
    assert_eq!(info.response["name"], "model.csi.gpustack.ai", "{info:?}");
    // The node calls the kubelet makes, as the plugin serves them: its node ID, no optional
    // capabilities (so no staging and no volume stats), and volume stats refused as such.
    let node = client.call("Node.NodeGetInfo", json!({}));
    assert_eq!(
        (node.code.as_str(), &node.response),
        ("OK", &json!({"nodeId": NODE})),
        "{node:?}"
    );
    let caps = client.call("Node.NodeGetCapabilities", json!({}));
    assert_eq!(
        (caps.code.as_str(), &caps.response),
        ("OK", &json!({})),
        "{caps:?}"
    );
    let stats = client.call(
        "Node.NodeGetVolumeStats",
        json!({"volumeId": "csi-pod-a", "volumePath": target(work, "pod-a")}),
    );
    assert_eq!(stats.code, "UNIMPLEMENTED", "{stats:?}");

    let denied = client.call(
        "Node.NodePublishVolume",
        publish(work, "pod-b", "team-b", &uid, &digest),
    );
    assert_eq!(denied.code, "PERMISSION_DENIED", "{denied:?}");

    wait_until("the mount to be published", DEADLINE, || {
        let o = client.call(
            "Node.NodePublishVolume",
            publish(work, "pod-a", "team-a", &uid, &digest),
        );
        assert!(o.code == "OK" || o.code == "ABORTED", "{o:?}");
        (o.code == "OK").then_some(())
    });
    let mounted = target(work, "pod-a");
    assert_eq!(
        std::fs::read(mounted.join("model.safetensors")).unwrap(),
        weights
    );
    assert!(
        std::fs::write(mounted.join("x"), b"x").is_err(),
        "read-only"
    );

    let shown = wait_until("NodeModelStore status to show the model", DEADLINE, || {
        let out = gw.kubectl(&["get", "nms", NODE, "-o", "json"]);
        let nms: Value = serde_json::from_slice(&out.stdout).ok()?;
        let m = nms["status"]["models"].as_array()?.first()?.clone();
        (m["state"] == "Ready" && m["referenced"] == true).then_some(nms)
    });
    assert_eq!(shown["status"]["models"][0]["digest"], digest);
    assert_eq!(shown["status"]["conditions"][0]["reason"], "Serving");
    assert_eq!(
        shown["status"]["capacity"]["totalBytes"],
        64 << 20,
        "capacity is the tmpfs"
    );
    assert!(
        !shown["status"].to_string().contains("team-a"),
        "no tenant names in status"
    );

    // The HTTPS port, read by curl as Prometheus and the worker's progress view would.
    let get = |path: &str| https_get(port, path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(get("/livez"), "ok");
    assert_eq!(get("/readyz"), "ok");
    assert_eq!(get("/model/downloads"), r#"{"downloads":[]}"#);
    let metrics = get("/metrics");
    for line in [
        "gpustack_model_manager_mounts_total{result=\"materialized\"} 1",
        "gpustack_model_manager_mounts_total{result=\"denied\"} 1",
        "gpustack_model_manager_materializations_total{result=\"published\"} 1",
        "gpustack_model_manager_publish_duration_seconds_count 1",
        &format!("gpustack_model_manager_download_bytes_total{{source=\"hub\"}} {size}"),
        &format!("gpustack_model_manager_stored_bytes {size}"),
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} missing from:\n{metrics}"
        );
    }
    assert!(!metrics.contains("team-a"), "no tenant labels");
    gpustack_tests::prometheus::check_metrics("model-manager", &metrics);

    let unpublish = json!({"volumeId": "csi-pod-a", "targetPath": mounted});
    assert_eq!(
        client.call("Node.NodeUnpublishVolume", unpublish).code,
        "OK"
    );
    assert!(!mounted.exists(), "the target is removed");
}

/// Bytes of the files whose checkpoint says verified, in the newest partial attempt of `hex`.
fn verified_bytes(cache: &Path, hex: &str) -> u64 {
    let attempts = cache.join("partial").join(hex);
    let newest = std::fs::read_dir(&attempts)
        .unwrap_or_else(|e| panic!("{}: {e}", attempts.display()))
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .expect("a partial attempt");
    let state = attempts.join(newest.to_string()).join("state");
    std::fs::read_dir(&state)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| serde_json::from_slice::<Value>(&std::fs::read(e.path()).ok()?).ok())
        .filter(|c| c["verified"] == true)
        .filter_map(|c| c["offset"].as_u64())
        .sum()
}

#[test]
fn a_download_killed_mid_way_resumes_after_a_restart_and_publishes_the_same_digest() {
    const FILES: usize = 12;
    const FILE_BYTES: usize = 1 << 20;
    const TOTAL: usize = FILES * FILE_BYTES;
    let scratch = Scratch::new();
    let work = scratch.path();
    tmpfs(&work.join("cache"), 64);
    let files: Vec<fault_hub::HubFile> = (0..FILES)
        .map(|i| {
            let bytes = (0..FILE_BYTES)
                .map(|b| ((b * 31 + i * 7) % 251) as u8)
                .collect();
            fault_hub::HubFile::new(&format!("shard-{i:02}.safetensors"), bytes, true)
        })
        .collect();
    let digest = manifest_digest(
        files
            .iter()
            .map(|f| {
                (
                    format!("sha256:{}", hex(&Sha256::digest(&f.bytes))),
                    f.bytes.len(),
                    f.path.clone(),
                )
            })
            .collect(),
    );
    let hex_digest = digest.trim_start_matches("sha256:").to_owned();
    // The fault hub answers ranges and records every byte it sends. One request at a time at
    // 1 MiB/s: files finish one after another, each leaving a verified checkpoint.
    let hub = fault_hub::FaultHub::start("127.0.0.1", files.clone());
    let (gw, uid) = cluster(
        work,
        &format!(
            "{{hub: {{huggingFaceEndpoint: \"{}\"}}, download: {{concurrency: 1, bytesPerSecond: {}}}}}",
            hub.url,
            1 << 20
        ),
        fault_hub::COMMIT,
        &digest,
        FILES,
        TOTAL,
    );

    let port = gpustack_tests::embedded::free_port();
    let plugin = Plugin::start(work, &gw, port);
    let client = grpcio::CsiClient::new(work, &socket(work));
    wait_until("the CSI socket to answer", DEADLINE, || {
        (client.call("Identity.GetPluginInfo", json!({})).code == "OK").then_some(())
    });
    wait_for_spec_applied(&gw);
    let first = client.call(
        "Node.NodePublishVolume",
        publish(work, "pod-a", "team-a", &uid, &digest),
    );
    assert_eq!(first.code, "ABORTED", "{first:?}");
    assert!(
        first
            .details
            .starts_with(&format!("materializing sha256:{}", &hex_digest[..12])),
        "{first:?}"
    );

    // Kill -9 once some files are verified on disk and the download is still running.
    wait_until("a third of the files to be verified", DEADLINE, || {
        let body = https_get(port, "/model/downloads").ok()?;
        let d: Value = serde_json::from_str(&body).ok()?;
        let received = d["downloads"][0]["downloadedBytes"].as_u64()?;
        (received >= (TOTAL / 3) as u64
            && verified_bytes(&work.join("cache"), &hex_digest) >= (3 * FILE_BYTES) as u64)
            .then_some(())
    });
    plugin.kill();
    let kept = verified_bytes(&work.join("cache"), &hex_digest);
    let served_before = hub.requests().len();
    assert!(
        kept < TOTAL as u64,
        "killed while still downloading ({kept} of {TOTAL} verified)"
    );
    assert!(
        !work.join("cache/published").join(&hex_digest).exists(),
        "nothing published before the kill"
    );

    let _plugin = Plugin::start(work, &gw, port);
    wait_until("the restarted plugin's socket to answer", DEADLINE, || {
        (client.call("Identity.GetPluginInfo", json!({})).code == "OK").then_some(())
    });
    wait_until("the resumed mount to be published", DEADLINE, || {
        let o = client.call(
            "Node.NodePublishVolume",
            publish(work, "pod-a", "team-a", &uid, &digest),
        );
        assert!(o.code == "OK" || o.code == "ABORTED", "{o:?}");
        (o.code == "OK").then_some(())
    });

    // Bytes fetched after the restart: only what the checkpoints did not cover. The hub
    // records a request's bytes when it has written them all, so wait for its count to
    // settle on the plugin's own.
    let fetched_after = || -> usize {
        hub.requests()[served_before..]
            .iter()
            .filter(|r| r.path.contains("/resolve/"))
            .map(|r| r.sent)
            .sum()
    };
    let after = wait_until(
        "the hub's count to match the plugin's received bytes",
        DEADLINE,
        || {
            let metrics = https_get(port, "/metrics").ok()?;
            let received = metric(
                &metrics,
                "gpustack_model_manager_download_bytes_total{source=\"hub\"}",
            )?;
            let after = fetched_after();
            (received == after as f64).then_some(after)
        },
    );
    eprintln!(
        "resume: {kept} bytes kept by checkpoints, {after} bytes fetched after the restart, \
         {TOTAL} in all"
    );
    assert!(after > 0, "the restart fetched the rest");
    assert!(
        after as u64 <= TOTAL as u64 - kept,
        "the restart fetched {after} bytes; checkpoints covered {kept} of {TOTAL}"
    );

    // The same digest is published and mounted, byte for byte.
    let marker: Value = serde_json::from_slice(
        &std::fs::read(
            work.join("cache/published")
                .join(&hex_digest)
                .join("marker"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(marker["digest"], digest);
    for f in &files {
        assert_eq!(
            std::fs::read(target(work, "pod-a").join(&f.path)).unwrap(),
            f.bytes,
            "{}",
            f.path
        );
    }
    let unpublish = json!({"volumeId": "csi-pod-a", "targetPath": target(work, "pod-a")});
    assert_eq!(
        client.call("Node.NodeUnpublishVolume", unpublish).code,
        "OK"
    );
}
