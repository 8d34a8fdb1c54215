//! The model-manager download benchmark, one run on loopback:
//!
//! - a repository of 8 files of random bytes (2 GiB) written under the target directory and
//!   served by a local Hugging Face-compatible hub (see `download_support/hub.rs`);
//! - our download of it through the real mount path: the kubelet's NodePublishVolume over the
//!   CSI socket of a plugin process, answered `Aborted` until the tree is fetched, verified and
//!   published, then bind-mounted; its wall time from the first call to the mount, and the
//!   plugin process's peak RSS;
//! - a second mount of the same digest (another Pod), timed;
//! - `curl --parallel` fetching the same 8 files, and `huggingface_hub.snapshot_download` with
//!   and without `hf_transfer`;
//! - the downloader's hashing against `sha256sum` over the same files.
//!
//! Every figure is printed with its ratio against its peer and its target. A measurement that
//! cannot be made panics (non-zero exit); a missed target is reported, not hidden.
//!
//! Run: `cargo bench -p gpustack-model-manager --bench download` (root: it bind-mounts).

mod download_support;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use download_support::{hub::FileHub, kubelet::Kubelet, peers, plugin, repo};

const CHILD: &str = "--plugin-child";
const FILES: usize = 8;
const FILE_SIZE: u64 = 256 << 20;
const REPO: &str = "bench-org/bench-model";
const COMMIT: &str = "5eb1c0a5eb1c0a5eb1c0a5eb1c0a5eb1c0a5eb1c";
/// The kubelet's first retry comes after 0.5 s; polling faster keeps the figure about the
/// download rather than the poll.
const POLL: Duration = Duration::from_millis(20);
const DOWNLOAD_DEADLINE: Duration = Duration::from_secs(600);

const MIB: f64 = (1u64 << 20) as f64;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(CHILD) {
        plugin::child_main(&args[1..]);
        return;
    }
    let target = target_dir();
    let work = Work::create(&target.join("model-manager-bench"));
    let total = FILES as u64 * FILE_SIZE;
    println!(
        "model-manager download benchmark: {FILES} files x {} MiB = {:.0} MiB, loopback",
        FILE_SIZE >> 20,
        total as f64 / MIB
    );
    println!("machine: {} CPUs, load average at start {}", cpus(), load());

    let files = repo::generate(&work.0.join("repo"), FILES, FILE_SIZE);
    let digest = repo::digest(&files);

    // Hashing, both on one thread over the same (page-cached) files.
    let sha256sum = peers::sha256sum(&files);
    let ours_hash = repo::hash_with_ours(&files);

    let hub = FileHub::start(REPO, COMMIT, files.clone());
    let python = peers::hf_python(&target);

    // Ours, through the plugin process's CSI socket.
    peers::sync();
    let (before_requests, before_ranged, _) = hub.snapshot();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut child = PluginProcess::spawn(&plugin::ChildArgs {
        work: &work.0,
        hub: &hub.url,
        repo: REPO,
        commit: COMMIT,
        digest: &digest,
    });
    let (ours, rss_kib, cpu, second, later) = runtime.block_on(async {
        let mut kubelet = Kubelet::new(&work.0, &plugin::socket(&work.0));
        wait_for_socket(&mut kubelet, &mut child).await;
        let started = Instant::now();
        loop {
            match kubelet.publish("pod-a", &digest).await {
                Ok(()) => break,
                Err(s) if s.code() == tonic::Code::Aborted => {}
                Err(s) => panic!("the first mount failed: {:?}: {}", s.code(), s.message()),
            }
            assert!(
                started.elapsed() < DOWNLOAD_DEADLINE,
                "not published within {DOWNLOAD_DEADLINE:?}"
            );
            tokio::time::sleep(POLL).await;
        }
        let ours = started.elapsed();
        let rss_kib = child.peak_rss_kib();
        let cpu = child.cpu_time();
        check_mounted(&kubelet.target("pod-a"), &files);

        let mut mounts = Vec::new();
        for pod in ["pod-b", "pod-c", "pod-d", "pod-e", "pod-f"] {
            let t = Instant::now();
            kubelet
                .publish(pod, &digest)
                .await
                .unwrap_or_else(|s| panic!("mounting {pod}: {:?}: {}", s.code(), s.message()));
            mounts.push(t.elapsed());
            check_mounted(&kubelet.target(pod), &files);
        }
        for pod in ["pod-a", "pod-b", "pod-c", "pod-d", "pod-e", "pod-f"] {
            kubelet.unpublish(pod).await.expect("unpublishing");
        }
        let later = mounts[1..].iter().max().copied().unwrap();
        (ours, rss_kib, cpu, mounts[0], later)
    });
    let (after_requests, after_ranged, _) = hub.snapshot();
    drop(child);
    std::fs::remove_dir_all(work.0.join("cache")).unwrap();

    peers::sync();
    let (curl, curl_durable) =
        peers::curl_parallel(&hub.url, REPO, COMMIT, &files, &work.0.join("curl"));
    std::fs::remove_dir_all(work.0.join("curl")).unwrap();

    peers::sync();
    let hf_plain =
        peers::snapshot_download(&python, &hub.url, REPO, COMMIT, &files, &work.0, false);
    peers::sync();
    let (_, ranged_before_transfer, _) = hub.snapshot();
    let hf_transfer =
        peers::snapshot_download(&python, &hub.url, REPO, COMMIT, &files, &work.0, true);
    let (_, ranged_after_transfer, _) = hub.snapshot();
    assert!(
        ranged_after_transfer - ranged_before_transfer > FILES as u64,
        "hf_transfer was not used: it fetches in many ranged chunks"
    );

    let rate = |d: Duration| total as f64 / MIB / d.as_secs_f64();
    let verdict = |ok: bool| if ok { "target met" } else { "TARGET MISSED" };
    println!();
    println!(
        "ours (NodePublishVolume until mounted; {} requests, {} ranged): {:.2} s, {:.0} MiB/s; plugin CPU time {:.2} s",
        after_requests - before_requests,
        after_ranged - before_ranged,
        ours.as_secs_f64(),
        rate(ours),
        cpu.as_secs_f64()
    );
    let vs_curl = curl.as_secs_f64() / ours.as_secs_f64();
    println!(
        "curl --parallel ({FILES} transfers): {:.2} s, {:.0} MiB/s; ours/curl = {vs_curl:.2}x (target >= 0.9x): {}",
        curl.as_secs_f64(),
        rate(curl),
        verdict(vs_curl >= 0.9)
    );
    println!(
        "curl --parallel then sync (written durably, as ours is): {:.2} s, {:.0} MiB/s; ours/that = {:.2}x",
        curl_durable.as_secs_f64(),
        rate(curl_durable),
        curl_durable.as_secs_f64() / ours.as_secs_f64()
    );
    println!(
        "snapshot_download ({}): {:.2} s, {:.0} MiB/s; ours/it = {:.2}x",
        peers::HUGGINGFACE_HUB,
        hf_plain.as_secs_f64(),
        rate(hf_plain),
        hf_plain.as_secs_f64() / ours.as_secs_f64()
    );
    println!(
        "snapshot_download + {}: {:.2} s, {:.0} MiB/s; ours/it = {:.2}x",
        peers::HF_TRANSFER,
        hf_transfer.as_secs_f64(),
        rate(hf_transfer),
        hf_transfer.as_secs_f64() / ours.as_secs_f64()
    );
    let faster = hf_plain.min(hf_transfer);
    let vs_hf = faster.as_secs_f64() / ours.as_secs_f64();
    println!(
        "ours against the faster snapshot_download: {vs_hf:.2}x (target >= 2x): {}",
        verdict(vs_hf >= 2.0)
    );
    let vs_sum = sha256sum.as_secs_f64() / ours_hash.as_secs_f64();
    println!(
        "hashing, one thread: ours {:.0} MiB/s, sha256sum {:.0} MiB/s; ours/sha256sum = {vs_sum:.2}x",
        rate(ours_hash),
        rate(sha256sum)
    );
    let rss_mb = rss_kib as f64 * 1024.0 / 1e6;
    println!(
        "plugin process peak RSS (VmHWM) through the download: {:.1} MiB = {rss_mb:.1} MB (target <= 64 MB): {}",
        rss_kib as f64 / 1024.0,
        verdict(rss_mb <= 64.0)
    );
    println!(
        "second mount of the same digest: {:.1} ms (target <= 50 ms): {}; slowest of the next four: {:.1} ms",
        second.as_secs_f64() * 1e3,
        verdict(second <= Duration::from_millis(50)),
        later.as_secs_f64() * 1e3
    );
    println!("load average at the end {}", load());
}

/// The directory the benchmark writes in, removed (after detaching any mount left under it)
/// when the run ends, also on a panic.
struct Work(PathBuf);

impl Work {
    fn create(path: &Path) -> Self {
        let w = Self(path.to_path_buf());
        w.clean();
        std::fs::create_dir_all(path).unwrap();
        w
    }

    fn clean(&self) {
        if let Ok(table) = gpustack_model_manager::mount::mount_table() {
            let mut under: Vec<PathBuf> = table
                .into_iter()
                .map(|e| e.mount_point)
                .filter(|p| p.starts_with(&self.0))
                .collect();
            under.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
            for p in under {
                let _ = nix::mount::umount2(&p, nix::mount::MntFlags::MNT_DETACH);
            }
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        self.clean();
    }
}

/// The plugin process; closing its stdin stops it.
struct PluginProcess(Child);

impl PluginProcess {
    fn spawn(args: &plugin::ChildArgs<'_>) -> Self {
        let child = Command::new(std::env::current_exe().unwrap())
            .arg(CHILD)
            .args(args.to_args())
            .stdin(Stdio::piped())
            .spawn()
            .expect("starting the plugin process");
        Self(child)
    }

    /// `VmHWM` of the process: its peak resident set so far.
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0.id()))
            .expect("reading the plugin's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/<pid>/status")
    }
}

impl PluginProcess {
    /// User plus system CPU time of the process so far (`/proc/<pid>/stat`, in USER_HZ = 100
    /// ticks a second).
    fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.0.id()))
            .expect("reading the plugin's /proc stat");
        // Fields after the command name (which may hold spaces) start at `state`.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<u64> = after
            .split_whitespace()
            .skip(11)
            .take(2)
            .map(|f| f.parse().expect("utime and stime"))
            .collect();
        Duration::from_millis(fields.iter().sum::<u64>() * 10)
    }
}

impl Drop for PluginProcess {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until the plugin answers Probe on its socket (it exits or 30 s pass: a panic).
async fn wait_for_socket(kubelet: &mut Kubelet, child: &mut PluginProcess) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while kubelet.probe().await.is_err() {
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("the plugin process exited ({status}) before serving");
        }
        assert!(
            Instant::now() < deadline,
            "the plugin did not serve within 30 s"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// The mount shows every file at its size.
fn check_mounted(target: &Path, files: &[download_support::hub::HubFile]) {
    for f in files {
        let len = std::fs::metadata(target.join(&f.name))
            .unwrap_or_else(|e| panic!("{} in the mount: {e}", f.name))
            .len();
        assert_eq!(len, f.size, "{} in the mount", f.name);
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .ancestors()
                .find(|d| d.join("Cargo.lock").exists())
                .expect("a workspace root above the crate")
                .join("target")
        },
        PathBuf::from,
    )
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
