//! Hostile clients against the real worker-gateway: each test reproduces an attack on the
//! release-shaped binary (loopback, real kubectl) and checks that the gateway stays up, keeps
//! answering others within a bound, and loses nothing it acknowledged.

use std::{
    io::Read,
    net::TcpStream,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess, free_port, wait_until},
    hub::http_over_unix,
};

/// CPU seconds (user + system) the process has used, from `/proc/PID/stat`.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start past the last ')'.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // Linux reports USER_HZ ticks, 100 per second on every architecture it supports.
    ticks / 100.0
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

fn log_lines_with(log: &Path, needle: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(needle))
        .count()
}

/// Clients that connect and never speak (`n` of them), kept open until dropped.
fn silent_clients(port: u16, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect"))
        .collect()
}

fn start(dir: &Path, extra: &[&str]) -> GatewayProcess {
    let mut args = vec!["--embedded-cluster=demo"];
    args.extend_from_slice(extra);
    GatewayProcess::start_with(&dir.join("data"), "demo", free_port(), &args)
}

fn unix_readyz(gw: &GatewayProcess) -> (u16, String) {
    http_over_unix(&gw.socket(), "GET", "/readyz", None).expect("unix request")
}

#[test]
fn silent_clients_are_dropped_and_never_lock_others_out() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(
        dir.path(),
        &["--max-connections=20", "--connection-setup-timeout=2s"],
    );
    let pid = gw.pid().unwrap();
    let cpu_before = cpu_seconds(pid);
    // Twice the cap: half are accepted and held, half wait in the backlog.
    let mut silent = silent_clients(gw.port, 40);
    let started = Instant::now();
    // The unix socket is its own listener: served at once.
    let (code, body) = unix_readyz(&gw);
    assert_eq!((code, body.as_str()), (200, "ok"));
    assert!(started.elapsed() < Duration::from_secs(1));
    // HTTPS is served as soon as the silent ones are dropped, within a few setup deadlines.
    let out = gw.kubectl(&["get", "--raw", "/readyz", "--request-timeout=20s"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(15), "HTTPS waited {waited:?}");
    // The server closed the first silent clients itself (EOF or reset, not our timeout).
    silent[0]
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 16];
    match silent[0].read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("a silent client got {n} bytes"),
        Err(e) => assert_eq!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset,
            "the server did not close a silent client: {e}"
        ),
    }
    silent.clear();
    // The same on the unix socket, where no handshake comes first: clients that connect and
    // send no request are dropped at the deadline, and a real request gets through.
    let quiet: Vec<std::os::unix::net::UnixStream> = (0..40)
        .map(|_| std::os::unix::net::UnixStream::connect(gw.socket()).expect("connect"))
        .collect();
    let started = Instant::now();
    let (code, _) = unix_readyz(&gw);
    assert_eq!(code, 200);
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(15),
        "the unix socket waited {waited:?}"
    );
    drop(quiet);
    let cpu = cpu_seconds(pid) - cpu_before;
    assert!(
        cpu < 2.0,
        "the gateway used {cpu:.2}s of CPU while clients idled"
    );
}

#[test]
fn running_out_of_descriptors_neither_spins_nor_floods_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &["--connection-setup-timeout=3s"]);
    let pid = gw.pid().unwrap();
    // Leave the gateway a handful of descriptors (util-linux prlimit, on the running process).
    let limit = open_fds(pid) + 8;
    let set = Command::new("prlimit")
        .args([format!("--pid={pid}"), format!("--nofile={limit}:{limit}")])
        .output()
        .expect("prlimit (util-linux)");
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    let cpu_before = cpu_seconds(pid);
    let wall = Instant::now();
    let silent = silent_clients(gw.port, 60);
    wait_until("the gateway to hit its descriptor limit", DEADLINE, || {
        (log_lines_with(&gw.log_path(), "accepting connections failed") > 0).then_some(())
    });
    // Let the failing accepts go on for a while before measuring.
    wait_until("two seconds of failing accepts", DEADLINE, || {
        (wall.elapsed() >= Duration::from_secs(2)).then_some(())
    });
    let cpu = cpu_seconds(pid) - cpu_before;
    let elapsed = wall.elapsed().as_secs_f64();
    assert!(
        cpu < 0.5 * elapsed,
        "{cpu:.2}s of CPU in {elapsed:.2}s while accepts failed: the loop spins"
    );
    assert_eq!(
        log_lines_with(&gw.log_path(), "accepting connections failed"),
        1,
        "one log line per run of failures"
    );
    // The unix socket listener shares the table, but the process stays up; once the silent
    // clients go, HTTPS answers again and the recovery is logged.
    drop(silent);
    let out = gw.kubectl(&["get", "--raw", "/readyz", "--request-timeout=20s"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until("the recovery to be logged", DEADLINE, || {
        (log_lines_with(&gw.log_path(), "accepting connections again") > 0).then_some(())
    });
    let (code, _) = unix_readyz(&gw);
    assert_eq!(code, 200);
}
