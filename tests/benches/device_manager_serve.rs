//! `device-manager serve` on the HGX H100 fixture against an embedded cluster and the kubelet
//! stand-in: `Allocate` latency (pending-Pod lookup, ledger check, annotation write), time from
//! a health change in the library to the kubelet stand-in seeing it, resident memory, and CPU
//! per monitor period.
//!
//! Run: `cargo build --release -p gpustack-operator -p gpustack-fake-nvml && cargo bench -p
//! gpustack-tests --bench device_manager_serve` (the bench profile finds both in `target/release`)
//! (`GPUSTACK_OPERATOR_BIN` chooses the binary; `DM_BENCH_PODS` the number of allocations per
//! mode; `DM_BENCH_EXCLUSIVE_ROUNDS` the rounds of exclusive allocations, one per healthy card
//! each; `DM_BENCH_LOG_FILE=<file>` keeps the agent's log, whose debug lines give each
//! Allocate's phases and each Devices status write, reported at the end).

use std::{
    path::Path,
    process::Stdio,
    time::{Duration, Instant},
};

use gpustack_tests::{
    bench::{env_usize, percentile, proc_status_mb},
    embedded::{DEADLINE, GatewayProcess, free_port},
    kubelet::{Kubelet, next_list_where},
    machines::nvidia::{self, H100_GPUS, H100_UNHEALTHY_INDEX},
    operator,
    wait::wait_until,
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

/// Where the agent logs: `DM_BENCH_LOG_FILE`, else beside the cluster.
fn log_path(dir: &Path) -> std::path::PathBuf {
    std::env::var_os("DM_BENCH_LOG_FILE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.join("dm.log"))
}

/// The debug lines the phase report reads: each Allocate's phases, each Devices status write.
const PHASE_VMODULE: &str =
    "gpustack_device_manager::plugin::server=1,gpustack_device_manager::serve=1";

/// Applies one pending Pod on the node per name, each with one container limited to `limits`.
fn apply_pods(gw: &GatewayProcess, dir: &Path, names: &[String], limits: &[(&str, &str)]) {
    let limits: String = limits
        .iter()
        .map(|(k, v)| format!("          {k}: \"{v}\"\n"))
        .collect();
    let manifest: String = names
        .iter()
        .map(|n| format!("---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {n}\n  namespace: default\nspec:\n  nodeName: {NODE}\n  containers:\n    - name: main\n      image: x\n      resources:\n        limits:\n{limits}"))
        .collect();
    let path = dir.join("pods.yaml");
    std::fs::write(&path, manifest).unwrap();
    gw.kubectl_ok(&["apply", "-f", &path.display().to_string()]);
}

/// One Allocate of `id` on `socket`, in milliseconds as the kubelet stand-in sees it.
fn time_allocate(kubelet: &Kubelet, socket: &str, id: String) -> f64 {
    let t = Instant::now();
    kubelet.allocate(socket, &[id]).expect("Allocate");
    t.elapsed().as_secs_f64() * 1000.0
}

/// How many cards the node's `Devices` status shows charged (`None` before it lists all eight).
fn held_cards(gw: &GatewayProcess) -> Option<usize> {
    let out = gw.kubectl(&["get", "devices", NODE, "-o", "json"]);
    let d = serde_json::from_slice::<serde_json::Value>(&out.stdout).ok()?;
    let cards: Vec<&serde_json::Value> = d["status"]["groups"]
        .as_array()?
        .iter()
        .flat_map(|g| g["accelerators"].as_array().into_iter().flatten())
        .collect();
    (cards.len() == 8).then(|| cards.iter().filter(|a| a["mode"] != 0).count())
}

/// The per-phase figures of the agent's debug log, and what the slowest Allocates overlapped.
mod phases {
    use std::collections::BTreeMap;

    use gpustack_tests::bench::percentile;

    /// `key=value` of a tracing line (the value up to the next space, quotes trimmed).
    fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim_matches('"'))
    }

    fn micros(line: &str, key: &str) -> Option<f64> {
        field(line, key)?.parse::<f64>().ok()
    }

    /// The line's timestamp (`2026-12-03T11:50:00.123456Z`) in seconds of the day.
    fn at(line: &str) -> Option<f64> {
        let clock = line.split_whitespace().next()?.split_once('T')?.1;
        let mut parts = clock.trim_end_matches('Z').split(':');
        let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
        Some(
            h.parse::<f64>().ok()? * 3600.0
                + m.parse::<f64>().ok()? * 60.0
                + s.parse::<f64>().ok()?,
        )
    }

    fn p50_p99(v: &mut [f64]) -> String {
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return "none".into();
        }
        format!(
            "p50 {:.2} / p99 {:.2} / max {:.2} ms",
            percentile(v, 0.5),
            percentile(v, 0.99),
            v[v.len() - 1]
        )
    }

    /// An interval of the agent's work, in seconds of the day.
    type Span = (f64, f64);

    fn overlaps(a: Span, spans: &[Span]) -> bool {
        spans.iter().any(|b| a.0 < b.1 && b.0 < a.1)
    }

    /// One line per (resource, phase) of the `allocated` lines, one for the status writes and
    /// the monitor passes, and how many of the slowest tenth of Allocates overlapped either.
    pub fn report(log: &str) -> Vec<String> {
        const PHASES: [&str; 5] = [
            "kubelet_us",
            "identify_us",
            "decide_us",
            "annotate_us",
            "render_us",
        ];
        let mut by: BTreeMap<(String, &str), Vec<f64>> = BTreeMap::new();
        let (mut writes, mut passes) = (Vec::new(), Vec::new());
        let mut allocations: Vec<(f64, Span)> = Vec::new();
        for line in log.lines() {
            let end = at(line).unwrap_or_default();
            if line.contains(" allocated ") {
                let Some(resource) = field(line, "resource") else {
                    continue;
                };
                for phase in PHASES {
                    if let Some(us) = micros(line, phase) {
                        by.entry((resource.to_owned(), phase))
                            .or_default()
                            .push(us / 1000.0);
                    }
                }
                let total: f64 = ["identify_us", "decide_us", "annotate_us"]
                    .iter()
                    .filter_map(|k| micros(line, k))
                    .sum::<f64>()
                    / 1e6;
                allocations.push((total, (end - total, end)));
            } else if line.contains("wrote the Devices status")
                && let Some(us) = micros(line, "write_us")
            {
                writes.push((end - us / 1e6, end));
            } else if line.contains("monitor pass done")
                && let Some(us) = micros(line, "pass_us")
            {
                passes.push((end - us / 1e6, end));
            }
        }
        let mut out: Vec<String> = by
            .iter_mut()
            .map(|((resource, phase), v)| format!("{resource} {phase}: {}", p50_p99(v)))
            .collect();
        let ms = |spans: &[Span]| {
            spans
                .iter()
                .map(|s| (s.1 - s.0) * 1000.0)
                .collect::<Vec<_>>()
        };
        out.push(format!(
            "Devices status writes: {}, {}",
            writes.len(),
            p50_p99(&mut ms(&writes))
        ));
        out.push(format!(
            "monitor passes: {}, {}",
            passes.len(),
            p50_p99(&mut ms(&passes))
        ));
        allocations.sort_by(|a, b| b.0.total_cmp(&a.0));
        let slow = &allocations[..allocations.len().div_ceil(10)];
        let with = |spans: &[Span]| slow.iter().filter(|a| overlaps(a.1, spans)).count();
        let all_with = |spans: &[Span]| allocations.iter().filter(|a| overlaps(a.1, spans)).count();
        out.push(format!(
            "slowest tenth of Allocates ({}): {} overlapped a status write, {} a monitor pass (of all {}: {} and {})",
            slow.len(),
            with(&writes),
            with(&passes),
            allocations.len(),
            all_with(&writes),
            all_with(&passes)
        ));
        out
    }
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
    let log_path = log_path(dir.path());
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
            // The bench scrapes the pass counter with a bare curl.
            "--metrics-auth=none",
            &format!("--kube-socket={}", kubelet.kube_socket().display()),
            &format!("--kubeconfig={}", gw.kubeconfig().display()),
        ])
        .arg(format!(
            "--vmodule={}",
            std::env::var("DM_BENCH_VMODULE").unwrap_or_else(|_| PHASE_VMODULE.to_owned())
        ))
        .env("GPUSTACK_SYSTEM_ROOT", &node.root)
        .env(nvidia::FIXTURE_ENV, &node.nvml_fixture)
        .env("KUBERNETES_NODE_NAME", NODE)
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log_path).unwrap()))
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

    // Health change → the kubelet stand-in's ListAndWatch (card 7 free: a card held in
    // another mode is advertised unhealthy anyway).
    let mut health = Vec::new();
    // An even number of flips leaves the card healthy for the allocations after.
    for round in 0..6 {
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

    // Allocate latency in three modes, each Allocate for a fresh pending Pod: exclusive in
    // rounds of one Pod per healthy card (deleted, and the ledger seen free, between rounds),
    // then shared (ten tokens on each healthy card but 0) and sliced (a small slice on card 0)
    // alternating.
    let healthy: Vec<usize> = (0..8).filter(|&c| c != H100_UNHEALTHY_INDEX).collect();
    let shared_cards: Vec<usize> = healthy.iter().copied().filter(|&c| c != 0).collect();
    assert!(
        pods <= shared_cards.len() * 10,
        "DM_BENCH_PODS is at most {} (the shared tokens of the cards it uses)",
        shared_cards.len() * 10
    );
    let mut lat: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let rounds = env_usize("DM_BENCH_EXCLUSIVE_ROUNDS", pods.div_ceil(healthy.len()));
    for round in 0..rounds {
        let names: Vec<String> = healthy.iter().map(|c| format!("e{round}-{c}")).collect();
        apply_pods(&gw, dir.path(), &names, &[("nvidia.com/gpu", "1")]);
        for &card in &healthy {
            let id = format!("h100-80gb-hbm3:{}:0000", H100_GPUS[card].uuid);
            let ms = time_allocate(&kubelet, "nvidia.exclusive.sock", id);
            lat.entry("exclusive").or_default().push(ms);
        }
        // The ledger is seen charging the round, then releasing it, before the next.
        wait_until("the exclusive round to be charged", DEADLINE, || {
            (held_cards(&gw) == Some(healthy.len())).then_some(())
        });
        let mut args = vec!["delete", "pod", "--wait=false"];
        args.extend(names.iter().map(String::as_str));
        gw.kubectl_ok(&args);
        wait_until("the exclusive round to be released", DEADLINE, || {
            (held_cards(&gw) == Some(0)).then_some(())
        });
    }
    let shared: Vec<String> = (0..pods).map(|i| format!("s{i}")).collect();
    apply_pods(&gw, dir.path(), &shared, &[("nvidia.com/gpu.shared", "1")]);
    let sliced: Vec<String> = (0..pods).map(|i| format!("p{i}")).collect();
    apply_pods(
        &gw,
        dir.path(),
        &sliced,
        &[
            ("nvidia.com/gpu.sliced", "1"),
            ("nvidia.com/gpu.sliced.units", "10000"),
            ("nvidia.com/gpu.sliced.memory-mib", "100"),
        ],
    );
    for i in 0..pods {
        let card = shared_cards[i % shared_cards.len()];
        let id = format!(
            "h100-80gb-hbm3:{}:{:04}",
            H100_GPUS[card].uuid,
            // Shared tokens step by a tenth of the card's units.
            i / shared_cards.len() * 160_000
        );
        let ms = time_allocate(&kubelet, "nvidia.shared.sock", id);
        lat.entry("shared").or_default().push(ms);
        let id = format!("h100-80gb-hbm3:{}:{:04}", H100_GPUS[0].uuid, i);
        let ms = time_allocate(&kubelet, "nvidia.sliced.sock", id);
        lat.entry("sliced").or_default().push(ms);
    }
    for v in lat.values_mut() {
        v.sort_by(f64::total_cmp);
    }

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
    for (mode, v) in &lat {
        let p99 = percentile(v, 0.99);
        println!(
            "  Allocate {mode:<9} ({} calls, pod lookup + ledger + annotation): p50 {:.1} ms, p99 {p99:.1} ms ({:.2} of the 20 ms target), max {:.1} ms",
            v.len(),
            percentile(v, 0.5),
            p99 / 20.0,
            v[v.len() - 1]
        );
    }
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    for line in phases::report(&log) {
        println!("  {line}");
    }
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
