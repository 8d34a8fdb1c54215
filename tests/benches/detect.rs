//! `device-manager detect` and `monitor` as whole processes, against the process baseline
//! (`true`) and against reading the same sysfs files with `cat`, on fixture machines.
//!
//! Run: `cargo build --release && cargo bench -p gpustack-tests --bench detect`
//! (uses `target/release/gpustack-operator` when present, else the debug build; set
//! `GPUSTACK_OPERATOR_BIN` to choose). Peak memory comes from GNU time (`/usr/bin/time -f %M`).

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use gpustack_tests::{machines, sysfs::HostTree};

const RUNS: usize = 60;

fn operator_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("GPUSTACK_OPERATOR_BIN") {
        return p.into();
    }
    let debug = gpustack_tests::binary();
    let release = debug
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("release/gpustack-operator");
    if release.exists() { release } else { debug }
}

/// Median and 90th percentile wall time of `make()` run to completion `RUNS` times.
fn wall(make: &dyn Fn() -> Command) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let mut cmd = make();
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
            let start = Instant::now();
            let status = cmd.status().expect("run");
            let took = start.elapsed();
            assert!(status.success(), "{cmd:?} failed");
            took
        })
        .collect();
    times.sort();
    (times[RUNS / 2], times[RUNS * 9 / 10])
}

/// Peak resident memory (KiB) of one run, as GNU time reports it.
fn peak_kib(make: &dyn Fn() -> Command) -> u64 {
    let cmd = make();
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdout(Stdio::null())
        .output()
        .expect("GNU time (/usr/bin/time) is needed for peak memory");
    let text = String::from_utf8_lossy(&out.stderr);
    // GNU time exits with the measured command's status: a failed run measured nothing.
    if !out.status.success() {
        fail(&format!(
            "{:?} failed under GNU time ({}): {}",
            cmd.get_program(),
            out.status,
            text.trim()
        ));
    }
    match text.lines().last().and_then(|l| l.trim().parse().ok()) {
        Some(kib) => kib,
        None => fail(&format!(
            "GNU time printed no peak memory (%M) for {:?}: {:?}",
            cmd.get_program(),
            text.trim()
        )),
    }
}

/// Stops the bench with `why` and exit status 1: a figure that was not measured is not printed.
fn fail(why: &str) -> ! {
    eprintln!("error: {why}");
    std::process::exit(1)
}

/// Every regular file of the tree's sysfs and library directories: what `cat` reads.
fn sysfs_files(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                walk(&e.path(), out);
            } else if ft.is_file() {
                out.push(e.path());
            }
        }
    }
    let mut files = Vec::new();
    walk(&root.join("sys/devices"), &mut files);
    walk(&root.join("sys/class/kfd"), &mut files);
    files.sort();
    files
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn bench_machine(name: &str, tree: &HostTree, manufacturer: &str, env: &[(String, String)]) {
    let bin = operator_binary();
    let root = tree.root().to_path_buf();
    let files = sysfs_files(&root);
    let op = |sub: &'static str| {
        let (bin, root, env) = (bin.clone(), root.clone(), env.to_vec());
        let m = manufacturer.to_owned();
        move || {
            let mut c = Command::new(&bin);
            c.args(["device-manager", sub, &format!("--manufacturer={m}")])
                .env("GPUSTACK_SYSTEM_ROOT", &root);
            for (k, v) in &env {
                c.env(k, v);
            }
            c
        }
    };
    let baseline = || Command::new("true");
    let cat = {
        let files = files.clone();
        move || {
            let mut c = Command::new("cat");
            c.args(&files);
            c
        }
    };
    let (true_med, true_p90) = wall(&baseline);
    let (cat_med, cat_p90) = wall(&cat);
    println!(
        "\n{name}: {} sysfs files, {RUNS} runs each, binary {}",
        files.len(),
        bin.display()
    );
    println!(
        "{:<10} {:>10} {:>10} {:>12} {:>14} {:>10}",
        "command", "median ms", "p90 ms", "own work ms", "vs cat (own)", "peak KiB"
    );
    println!(
        "{:<10} {:>10.2} {:>10.2} {:>12} {:>14} {:>10}",
        "true",
        ms(true_med),
        ms(true_p90),
        "-",
        "-",
        peak_kib(&baseline)
    );
    let cat_own = cat_med.saturating_sub(true_med);
    println!(
        "{:<10} {:>10.2} {:>10.2} {:>12.2} {:>14} {:>10}",
        "cat",
        ms(cat_med),
        ms(cat_p90),
        ms(cat_own),
        "1.00x",
        peak_kib(&cat)
    );
    for sub in ["detect", "monitor"] {
        let make = op(sub);
        let (med, p90) = wall(&make);
        let own = med.saturating_sub(true_med);
        let ratio = own.as_secs_f64() / cat_own.as_secs_f64().max(1e-6);
        println!(
            "{:<10} {:>10.2} {:>10.2} {:>12.2} {:>13.2}x {:>10}",
            sub,
            ms(med),
            ms(p90),
            ms(own),
            ratio,
            peak_kib(&make)
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let amd_dir = tempfile::tempdir().unwrap();
    let amd = HostTree::new(amd_dir.path());
    machines::amd::seed_node(&amd);
    bench_machine("2x RX 7800 XT (seed node)", &amd, "amd", &[]);

    // NVML is the stand-in driver library here: its own cost is a JSON read, not a driver call.
    let nv_dir = tempfile::tempdir().unwrap();
    let node = machines::nvidia::hgx_h100_node(nv_dir.path());
    let env = [(
        machines::nvidia::FIXTURE_ENV.to_owned(),
        node.nvml_fixture.display().to_string(),
    )];
    let tree = HostTree::new(&node.root);
    bench_machine("8x H100 SXM (HGX, two NUMA nodes)", &tree, "nvidia", &env);
}
