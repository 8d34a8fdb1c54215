//! `device-manager serve` on the HGX H100 fixture against an embedded cluster and the kubelet
//! stand-in: `Allocate` latency (pending-Pod lookup, ledger check, annotation write), time from
//! a health change in the library to the kubelet stand-in seeing it, resident memory, and CPU
//! per monitor period.
//!
//! Run: `cargo build --release -p gpustack-operator -p gpustack-fake-nvml && cargo bench -p
//! gpustack-tests --bench device_manager_serve` (the bench profile finds both in `target/release`)
//! (`GPUSTACK_OPERATOR_BIN` chooses the binary; `DM_BENCH_PODS` the number of allocations;
//! `DM_BENCH_VMODULE=gpustack_device_manager::plugin::server=1 DM_BENCH_LOG_FILE=<file>` logs
//! each Allocate's phases).

use std::{
    path::Path,
    process::Stdio,
    time::{Duration, Instant},
};

use gpustack_tests::{
    bench::{env_usize, percentile, proc_status_mb},
    embedded::{DEADLINE, GatewayProcess, free_port, wait_until},
    kubelet::{Kubelet, next_list_where},
    machines::nvidia::{self, H100_GPUS},
    operator,
};

const NODE: &str = "bench-node";
const PERIOD_S: u64 = 1;

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15; after the command name they sit at 11 and 12.
    fields
        .get(11)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        + fields
            .get(12)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
}

fn set_ecc(fixture: &Path, card: usize, errors: u64) {
    let mut f: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    f["devices"][card]["eccUncorrectedVolatile"] = errors.into();
    let tmp = fixture.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(&f).unwrap()).unwrap();
    std::fs::rename(tmp, fixture).unwrap();
}

/// `gpustack_device_manager_monitor_passes_total` from the agent's `/metrics` (one HTTPS GET).
fn monitor_passes(port: u16) -> Option<u64> {
    let out = std::process::Command::new("curl")
        .args(["-sk", "--fail", "--max-time", "5"])
        .arg(format!("https://127.0.0.1:{port}/metrics"))
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("gpustack_device_manager_monitor_passes_total "))
        .and_then(|v| v.trim().parse().ok())
}

/// Polls the pass counter every quarter period (each poll is a TLS handshake the agent pays
/// for, so not more often) until `done` holds; answers the count.
fn poll_passes(port: u16, done: impl Fn(u64) -> bool) -> u64 {
    let start = Instant::now();
    loop {
        if let Some(c) = monitor_passes(port).filter(|c| done(*c)) {
            return c;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30 * PERIOD_S),
            "the monitor passes stalled"
        );
        std::thread::sleep(Duration::from_millis(250 * PERIOD_S));
    }
}

/// The agent's log (`DM_BENCH_VMODULE=gpustack_device_manager::plugin::server=1` adds each
/// Allocate's phases).
fn log_file(dir: &Path) -> Stdio {
    let path = std::env::var_os("DM_BENCH_LOG_FILE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.join("dm.log"));
    Stdio::from(std::fs::File::create(path).unwrap())
}

fn main() {
    let pods = env_usize("DM_BENCH_PODS", 60);
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("gw"), "bench");
    let crd = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/crds/devices.worker.gpustack.ai.yaml");
    gw.kubectl_ok(&["apply", "-f", &crd.display().to_string()]);
    let node_yaml = dir.path().join("node.yaml");
    std::fs::write(
        &node_yaml,
        format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {NODE}\n"),
    )
    .unwrap();
    gw.kubectl_ok(&["apply", "-f", &node_yaml.display().to_string()]);
    let node = nvidia::hgx_h100_node(&dir.path().join("host"));
    let kubelet = Kubelet::start(&dir.path().join("kubelet"));
    let port = free_port();
    let mut child = operator()
        .args([
            "device-manager",
            "serve",
            "--manufacturer=nvidia",
            &format!("--monitor-period={PERIOD_S}s"),
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
            &format!("--kube-socket={}", kubelet.kube_socket().display()),
            &format!("--kubeconfig={}", gw.kubeconfig().display()),
        ])
        .args(
            std::env::var("DM_BENCH_VMODULE")
                .ok()
                .map(|v| format!("--vmodule={v}")),
        )
        .env("GPUSTACK_SYSTEM_ROOT", &node.root)
        .env(nvidia::FIXTURE_ENV, &node.nvml_fixture)
        .env("KUBERNETES_NODE_NAME", NODE)
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(log_file(dir.path()))
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_until("registration", DEADLINE, || {
        kubelet
            .registered_resources()
            .iter()
            .any(|r| r == "nvidia.com/gpu.sliced")
            .then_some(())
    });
    let watch = kubelet.list_and_watch("nvidia.exclusive.sock");
    next_list_where(&watch, DEADLINE, "eight cards", |l| l.len() == 8);

    // Allocate latency: each a fresh pending Pod with a small slice on card 0.
    let manifest: String = (0..pods)
        .map(|i| format!("---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  namespace: default\nspec:\n  nodeName: {NODE}\n  containers:\n    - name: main\n      image: x\n      resources:\n        limits:\n          nvidia.com/gpu.sliced: \"1\"\n          nvidia.com/gpu.sliced.units: \"10000\"\n          nvidia.com/gpu.sliced.memory-mib: \"100\"\n"))
        .collect();
    let path = dir.path().join("pods.yaml");
    std::fs::write(&path, manifest).unwrap();
    gw.kubectl_ok(&["apply", "-f", &path.display().to_string()]);
    let mut lat = Vec::new();
    for i in 0..pods {
        let id = format!("h100-80gb-hbm3:{}:{:04}", H100_GPUS[0].uuid, i);
        let t = Instant::now();
        kubelet
            .allocate("nvidia.sliced.sock", &[id])
            .expect("Allocate");
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    lat.sort_by(f64::total_cmp);

    // Health change → the kubelet stand-in's ListAndWatch.
    let mut health = Vec::new();
    for round in 0..5 {
        let errors = if round % 2 == 0 { 3 } else { 0 };
        let want = if errors > 0 { "Unhealthy" } else { "Healthy" };
        let t = Instant::now();
        set_ecc(&node.nvml_fixture, 7, errors);
        next_list_where(&watch, Duration::from_secs(10), "card 7 flipped", |l| {
            l[7].health == want
        });
        health.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    health.sort_by(f64::total_cmp);

    // Idle cost: CPU over ten monitor passes counted on /metrics (from the end of one pass to
    // the end of the tenth after it), resident memory after.
    let first = monitor_passes(port).expect("the pass counter on /metrics");
    let from = poll_passes(port, |c| c > first);
    let before = cpu_ticks(pid);
    let to = poll_passes(port, |c| c >= from + 10);
    let ticks = cpu_ticks(pid) - before;
    let clk = 100.0; // USER_HZ on Linux
    let cpu_ms_per_period = ticks as f64 / clk * 1000.0 / (to - from) as f64;
    let rss = proc_status_mb(pid, "VmRSS");
    let hwm = proc_status_mb(pid, "VmHWM");
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = child.wait();

    println!(
        "device-manager serve, HGX H100 fixture (8 cards), embedded cluster, {pods} allocations"
    );
    println!(
        "  Allocate (pending-Pod match + ledger + annotation): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target p99 <= 20 ms)",
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat[lat.len() - 1]
    );
    println!(
        "  health change -> ListAndWatch: median {:.0} ms, max {:.0} ms (target <= one period {} ms + 100 ms)",
        percentile(&health, 0.5),
        health[health.len() - 1],
        PERIOD_S * 1000
    );
    println!("  resident memory: {rss:.1} MB now, {hwm:.1} MB peak (target <= 40 MB)");
    println!(
        "  CPU per {PERIOD_S}s monitor period (detect + monitor + publish): {cpu_ms_per_period:.1} ms"
    );
}
