//! `device-manager preflight` wall time on the seed node (two RX 7800 XT cards, six probe
//! containers) against the real Docker engine: a measured run and a dry run, beside the floor
//! one container start costs (the engine's own `docker run --rm` of the probe image). Figures
//! for the issue notes, not a pass/fail check; a run that fails measured nothing and stops the
//! benchmark with its output.
//!
//! Run: `cargo build && cargo bench -p gpustack-tests --bench preflight` (needs a Docker engine).

use std::{
    process::Output,
    time::{Duration, Instant},
};

use gpustack_tests::{
    docker,
    preflight::{Node, Shim, shim_library},
    stderr, stdout,
};

const RUNS: usize = 5;

fn fail(why: &str) -> ! {
    eprintln!("error: {why}");
    std::process::exit(1)
}

/// Median wall time of `RUNS` runs of `run`, each of which must succeed.
fn median(what: &str, run: &dyn Fn() -> Output) -> Duration {
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            let out = run();
            let took = t.elapsed();
            if !out.status.success() {
                fail(&format!(
                    "{what} failed ({}):\n{}\n{}",
                    out.status,
                    stdout(&out),
                    stderr(&out)
                ));
            }
            took
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    docker::require_engine();
    let node = Node::new(Shim::Loads);
    let image = docker::probe_image(&[shim_library()]);
    let floor = median("docker run --rm of the probe image", &|| {
        std::process::Command::new("docker")
            .args([
                "run",
                "--rm",
                image,
                "/bin/sh",
                "-c",
                "cat /proc/self/maps >/dev/null",
            ])
            .output()
            .expect("running docker")
    });
    let measured = median("preflight", &|| node.preflight(&[]));
    let dry = median("preflight --dry-run", &|| node.preflight(&["--dry-run"]));
    println!(
        "preflight on the seed node (2 cards, 6 probe containers), median of {RUNS}: measured \
         {measured:.2?}, dry run {dry:.2?}, docker run --rm floor {floor:.2?} (measured/floor \
         {:.1}x)",
        measured.as_secs_f64() / floor.as_secs_f64()
    );
}
