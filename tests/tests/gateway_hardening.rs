//! Hostile clients against the real worker-gateway: each test reproduces an attack on the
//! release-shaped binary (loopback, real kubectl) and checks that the gateway stays up, keeps
//! answering others within a bound, and loses nothing it acknowledged.

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::Path,
    process::Command,
    sync::Arc,
    time::{Duration, Instant},
};

use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess, free_port},
    hub::http_over_unix,
    wait::wait_until,
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
    // Twice the cap: half are accepted and held, half wait in the backlog. A newcomer is served
    // once both rounds have been dropped at their setup deadline: two deadlines, plus slack.
    let setup = Duration::from_secs(2);
    let served_within = 2 * setup + Duration::from_secs(2);
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
    eprintln!("HTTPS answered {waited:?} after 40 silent clients connected");
    assert!(
        waited < served_within,
        "HTTPS waited {waited:?}, past two setup deadlines ({setup:?}) of silent clients"
    );
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
    eprintln!("the unix socket answered {waited:?} after 40 quiet clients connected");
    assert!(
        waited < served_within,
        "the unix socket waited {waited:?}, past two setup deadlines ({setup:?}) of quiet clients"
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

/// A TLS connection to the gateway trusting its generated CA (`<data>/tls/ca.crt`).
fn tls_connect(gw: &GatewayProcess) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    use rustls::pki_types::ServerName;
    let config = gpustack_tests::embedded::trusting_gateway_ca(&gw.data_dir);
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    rustls::StreamOwned::new(conn, tcp)
}

/// Sends `head` (request line and headers, no body) over HTTPS and returns the status line
/// of the answer, read within the stream's timeout.
fn https_status_line(gw: &GatewayProcess, head: &str) -> String {
    let mut s = tls_connect(gw);
    s.write_all(head.as_bytes()).unwrap();
    s.flush().unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !got.windows(2).any(|w| w == b"\r\n") {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("no answer to {head:?}: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    text.lines().next().unwrap_or_default().to_owned()
}

fn cluster_token(gw: &GatewayProcess) -> String {
    let kubeconfig = std::fs::read_to_string(gw.kubeconfig()).unwrap();
    kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("a token in the kubeconfig")
        .trim()
        .to_owned()
}

#[test]
fn who_asks_is_settled_before_a_body_is_read_or_a_cluster_named() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &[]);
    // A 16 MB body announced and never sent: refused at once, not awaited.
    for auth in [
        "",
        &format!("Authorization: Bearer {}\r\n", cluster_token(&gw)),
    ] {
        let started = Instant::now();
        let line = https_status_line(
            &gw,
            &format!(
                "POST /apis/workers HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: 16000000\r\n\r\n"
            ),
        );
        let want = if auth.is_empty() { "401" } else { "403" };
        assert!(line.contains(want), "{auth:?}: {line}");
        // At once: the answer does not wait for any of the body (a loaded machine's slack).
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(1),
            "{auth:?}: answered after {took:?}"
        );
    }
    // Cluster paths, health included, answer only a token holder: names cannot be probed.
    for path in [
        "/clusters/demo/readyz",
        "/clusters/nope/readyz",
        "/clusters/nope/api",
    ] {
        let line = https_status_line(&gw, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(line.contains("401"), "{path}: {line}");
    }
    let token = cluster_token(&gw);
    let line = https_status_line(
        &gw,
        &format!(
            "GET /clusters/demo/readyz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
        ),
    );
    assert!(line.contains("200"), "{line}");
    let line = https_status_line(
        &gw,
        &format!(
            "GET /clusters/nope/api HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
        ),
    );
    assert!(line.contains("404"), "{line}");
    // The gateway's own health stays open, and checks the store.
    let line = https_status_line(&gw, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(line.contains("200"), "{line}");
}

#[test]
fn invented_methods_share_one_metric_label() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &[]);
    for i in 0..50 {
        let (code, _) = http_over_unix(&gw.socket(), &format!("INVENTED{i}"), "/api", None)
            .expect("an invented method is answered");
        assert_eq!(code, 405);
    }
    let (code, metrics) = http_over_unix(&gw.socket(), "GET", "/metrics", None).unwrap();
    assert_eq!(code, 200);
    let methods: std::collections::BTreeSet<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("gpustack_gateway_http_requests_total{"))
        .filter_map(|l| l.split("method=\"").nth(1)?.split('"').next())
        .collect();
    assert!(methods.contains("other"), "{metrics}");
    assert!(
        methods.iter().all(|m| !m.starts_with("INVENTED")),
        "{methods:?}"
    );
}

/// A namespaced `Widget` kind keeping any fields; its one version named `version` (or unnamed).
fn widget_crd(version: Option<&str>) -> String {
    let name = version.map_or(String::new(), |v| format!("name: {v}\n    "));
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: widgets.example.com}}
spec:
  group: example.com
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}}
  versions:
  - {name}served: true
    storage: true
    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}
"
    )
}

#[test]
fn a_crd_version_without_a_name_is_refused_and_namespaces_still_delete() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &[]);
    let crd = dir.path().join("crd.yaml");
    std::fs::write(&crd, widget_crd(None)).unwrap();
    let out = gw.kubectl(&["create", "-f", crd.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spec.versions[0].name: Required value"),
        "{err}"
    );
    gw.kubectl_ok(&["create", "namespace", "doomed"]);
    gw.kubectl_ok(&["delete", "namespace", "doomed", "--timeout=30s"]);
    let out = gw.kubectl(&["get", "namespace", "doomed"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not found"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_stored_subscription_named_like_an_embedded_cluster_is_skipped_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = free_port();
    let gw = GatewayProcess::start_with(
        &data,
        "up",
        port,
        &["--embedded-cluster=up", "--worker-conn-mode=loopback"],
    );
    let body = format!(
        r#"{{"clusters":["east"],"kubeconfig":"{}"}}"#,
        gw.kubeconfig().display()
    );
    let (code, answer) =
        http_over_unix(&gw.socket(), "POST", "/apis/workers", Some(&body)).unwrap();
    assert_eq!(code, 202, "{answer}");
    drop(gw);
    // The name now goes to an embedded cluster: the gateway starts, says why east is not
    // mirrored, and serves the embedded east.
    let gw = GatewayProcess::start_with(
        &data,
        "east",
        port,
        &[
            "--embedded-cluster=up",
            "--embedded-cluster=east",
            "--worker-conn-mode=loopback",
        ],
    );
    assert!(
        log_lines_with(&gw.log_path(), "has the name of an embedded cluster") >= 1,
        "{}",
        std::fs::read_to_string(gw.log_path()).unwrap_or_default()
    );
    gw.kubectl_ok(&["create", "configmap", "mine", "--from-literal=k=v"]);
    // Unsubscribing removes the stored subscription only: the embedded cluster keeps its data.
    let (code, answer) =
        http_over_unix(&gw.socket(), "DELETE", "/apis/workers?cluster=east", None).unwrap();
    assert_eq!(code, 200, "{answer}");
    gw.kubectl_ok(&["get", "configmap", "mine"]);
    let (code, _) =
        http_over_unix(&gw.socket(), "DELETE", "/apis/workers?cluster=east", None).unwrap();
    assert_eq!(code, 404);
}

/// A memory figure of the process from `/proc/PID/status` (`field` as `VmHWM:`), in MiB.
fn status_mib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib / 1024
}

/// Peak resident memory of the process, in MiB.
fn peak_rss_mib(pid: u32) -> u64 {
    status_mib(pid, "VmHWM:")
}

#[test]
fn a_yaml_alias_bomb_is_refused_by_its_expanded_size() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &[]);
    // About 22 KB standing for about 20 MB: a 10 KB string, then 2,000 aliases of it.
    let big = "x".repeat(10_000);
    let aliases = vec!["*big"; 2_000].join(", ");
    let bomb = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: bomb}}\ndata: {{k: &big {big}}}\nbinaryData: {{}}\nlist: [{aliases}]\n"
    );
    assert!(bomb.len() < 24_000);
    let before = peak_rss_mib(gw.pid().unwrap());
    let (code, answer) = http_over_unix(
        &gw.socket(),
        "POST",
        "/clusters/demo/api/v1/namespaces/default/configmaps",
        Some(&bomb),
    )
    .unwrap();
    let head = &answer[..answer.len().min(300)];
    assert_eq!(code, 400, "{head}");
    assert!(answer.contains("expands beyond"), "{head}");
    let grew = peak_rss_mib(gw.pid().unwrap()).saturating_sub(before);
    assert!(grew < 64, "the gateway's peak memory grew by {grew} MiB");
    // Nothing was stored, and the gateway answers others.
    let out = gw.kubectl(&["get", "configmap", "bomb"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
    gw.kubectl_ok(&["create", "configmap", "after", "--from-literal=k=v"]);
}

#[test]
fn a_patch_cannot_nest_an_object_beyond_what_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &[]);
    let crd = dir.path().join("crd.yaml");
    std::fs::write(&crd, widget_crd(Some("v1"))).unwrap();
    gw.kubectl_ok(&["create", "-f", crd.to_str().unwrap()]);
    let widget = dir.path().join("widget.yaml");
    std::fs::write(
        &widget,
        "apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: default}
spec: {a: {b: {c: {d: {e: {f: {g: {h: {}}}}}}}}}
",
    )
    .unwrap();
    // kubectl looks the new kind up in discovery; it is served once the CRD is registered.
    wait_until("the widget to be created", DEADLINE, || {
        gw.kubectl(&["create", "-f", widget.to_str().unwrap()])
            .status
            .success()
            .then_some(())
    });
    // A value 120 levels deep under 9 levels of the object: 131 in all, past serde_json's 128.
    let deep = "[".repeat(120) + &"]".repeat(120);
    let patch = format!(r#"[{{"op":"add","path":"/spec/a/b/c/d/e/f/g/h/x","value":{deep}}}]"#);
    let out = gw.kubectl(&["patch", "widget", "w", "--type=json", "-p", &patch]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("levels deep; at most 100"), "{err}");
    // The object, lists and namespace deletion all keep working.
    gw.kubectl_ok(&["get", "widgets", "-o", "name"]);
    gw.kubectl_ok(&["delete", "widget", "w", "--timeout=30s"]);
}

#[test]
fn subscriptions_read_no_host_file_run_no_plugin_and_each_token_sees_its_own_status() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let gw = GatewayProcess::start_with(
        &data,
        "up",
        free_port(),
        &["--embedded-cluster=up", "--worker-conn-mode=loopback"],
    );
    let subscribe = |clusters: &str, kubeconfig: &Path| {
        let body = format!(
            r#"{{"clusters":[{clusters}],"kubeconfig":"{}"}}"#,
            kubeconfig.display()
        );
        http_over_unix(&gw.socket(), "POST", "/apis/workers", Some(&body)).unwrap()
    };
    // A host file outside the allowed directories: refused without reading it.
    let (code, answer) = subscribe(r#""leak""#, Path::new("/etc/passwd"));
    assert_eq!(code, 400, "{answer}");
    assert!(answer.contains("outside the directories"), "{answer}");
    assert!(!answer.contains("root:"), "{answer}");
    // A file inside that is no kubeconfig (the CA's private key): named, never quoted.
    let (code, answer) = subscribe(r#""leak""#, &data.join("tls/ca.key"));
    assert_eq!(code, 400, "{answer}");
    assert!(answer.contains("not a valid kubeconfig"), "{answer}");
    assert!(!answer.contains("PRIVATE KEY"), "{answer}");
    // An exec plugin is refused, and never run.
    let marker = dir.path().join("ran");
    let up = std::fs::read_to_string(gw.kubeconfig()).unwrap();
    let token_line = up
        .lines()
        .find(|l| l.trim_start().starts_with("token:"))
        .unwrap()
        .to_owned();
    let exec = up.replace(
        &token_line,
        &format!(
            "    exec: {{apiVersion: client.authentication.k8s.io/v1, command: /usr/bin/touch, args: [{}]}}",
            marker.display()
        ),
    );
    std::fs::write(data.join("exec.kubeconfig"), exec).unwrap();
    let (code, answer) = subscribe(r#""plugin""#, &data.join("exec.kubeconfig"));
    assert_eq!(code, 400, "{answer}");
    assert!(answer.contains("exec credential plugin"), "{answer}");
    assert!(!marker.exists(), "the plugin ran");
    let (_, workers) = http_over_unix(&gw.socket(), "GET", "/apis/workers", None).unwrap();
    let workers: serde_json::Value = serde_json::from_str(&workers).unwrap();
    assert_eq!(
        workers["items"],
        serde_json::json!([]),
        "nothing was subscribed"
    );

    // Two mirrors: each one's token reads its own status only.
    let (code, answer) = subscribe(r#""east","west""#, &gw.kubeconfig());
    assert_eq!(code, 202, "{answer}");
    // `kubectl get --raw PATH` with a kubeconfig's token.
    let raw_as = |kubeconfig: &Path, path: &str| -> String {
        let out = gpustack_tests::embedded::kubectl_with(
            &[format!("--kubeconfig={}", kubeconfig.display())],
            &["get", "--raw", path],
        )
        .output()
        .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let names_seen_by = |cluster: &str| -> Vec<String> {
        wait_until(&format!("{cluster}'s kubeconfig"), DEADLINE, || {
            data.join(format!("{cluster}.kubeconfig"))
                .exists()
                .then_some(())
        });
        let out = raw_as(&data.join(format!("{cluster}.kubeconfig")), "/apis/workers");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["cluster"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(names_seen_by("east"), ["east"]);
    assert_eq!(names_seen_by("west"), ["west"]);

    // And in /metrics: a cluster's token sees its own cluster's series, not the others' names
    // and counts nor the gateway-wide ones; the admin (the socket's owner) sees every series.
    let clusters_in = |metrics: &str| -> std::collections::BTreeSet<String> {
        metrics
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| Some(l.split("cluster=\"").nth(1)?.split('"').next()?.to_owned()))
            .collect()
    };
    let gateway_wide = |metrics: &str| {
        metrics.lines().any(|l| {
            l.starts_with("gpustack_gateway_store_") || l.starts_with("gpustack_gateway_http_")
        })
    };
    let (code, admin) = http_over_unix(&gw.socket(), "GET", "/metrics", None).unwrap();
    assert_eq!(code, 200);
    assert_eq!(
        clusters_in(&admin),
        ["east", "west"].map(String::from).into()
    );
    assert!(gateway_wide(&admin), "{admin}");
    for (cluster, other) in [("east", "west"), ("west", "east")] {
        let seen = raw_as(&data.join(format!("{cluster}.kubeconfig")), "/metrics");
        assert_eq!(clusters_in(&seen), [cluster.to_owned()].into(), "{seen}");
        assert!(
            !seen.contains(&format!("\"{other}\"")),
            "{cluster} sees {other}: {seen}"
        );
        assert!(
            !gateway_wide(&seen),
            "{cluster} sees gateway-wide series: {seen}"
        );
    }
    // The embedded cluster's token: no upstream is its own.
    let seen = raw_as(&gw.kubeconfig(), "/metrics");
    assert!(clusters_in(&seen).is_empty(), "{seen}");
}

#[test]
fn clients_that_never_read_their_lists_do_not_starve_others() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &[]);
    // A collection several megabytes large, far past what socket buffers hold.
    let value = "v".repeat(5_000);
    for i in 0..1_200 {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm-{i}"}},"data":{{"k":"{value}"}}}}"#
        );
        let (code, answer) = http_over_unix(
            &gw.socket(),
            "POST",
            "/clusters/demo/api/v1/namespaces/default/configmaps",
            Some(&body),
        )
        .unwrap();
        assert_eq!(code, 201, "{answer}");
    }
    // What a write through kubectl costs with nobody stalled: its own start, mostly.
    let at_once = Duration::from_secs(1);
    let timed = |f: &dyn Fn()| {
        let t = Instant::now();
        f();
        t.elapsed()
    };
    let create = |name: &str| {
        timed(&|| {
            gw.kubectl_ok(&["create", "configmap", name, "--from-literal=k=v"]);
        })
    };
    let kubectl_alone = (0..3)
        .map(|i| create(&format!("before-{i}")))
        .max()
        .unwrap();
    // More listing clients than the store has pooled connections, none of them reading.
    let stalled: Vec<std::os::unix::net::UnixStream> = (0..12)
        .map(|_| {
            let mut s = std::os::unix::net::UnixStream::connect(gw.socket()).unwrap();
            s.write_all(
                b"GET /clusters/demo/api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n\r\n",
            )
            .unwrap();
            s
        })
        .collect();
    // Everyone else is answered at once, reads and writes alike, and the store is ready: each
    // request is timed on its own. A request on the socket takes milliseconds; a write through
    // kubectl is allowed what kubectl's own start costs, measured here beforehand.
    let mut slowest = [Duration::ZERO; 3];
    for i in 0..10 {
        let read = timed(&|| {
            let (code, _) = http_over_unix(
                &gw.socket(),
                "GET",
                &format!("/clusters/demo/api/v1/namespaces/default/configmaps/cm-{i}"),
                None,
            )
            .unwrap();
            assert_eq!(code, 200);
        });
        assert!(
            read < at_once,
            "a read waited {read:?} beside stalled lists"
        );
        let write = create(&format!("after-{i}"));
        assert!(
            write < kubectl_alone + at_once,
            "a write through kubectl took {write:?} beside stalled lists ({kubectl_alone:?} alone)"
        );
        let ready = timed(&|| {
            let (code, body) = unix_readyz(&gw);
            assert_eq!((code, body.as_str()), (200, "ok"));
        });
        assert!(
            ready < at_once,
            "readyz waited {ready:?} beside stalled lists"
        );
        for (s, t) in slowest.iter_mut().zip([read, write, ready]) {
            *s = (*s).max(t);
        }
    }
    eprintln!(
        "beside stalled lists, the slowest read {:?}, write {:?} (kubectl alone {kubectl_alone:?}), readyz {:?}",
        slowest[0], slowest[1], slowest[2]
    );
    drop(stalled);
}

#[test]
fn a_long_owner_chain_is_collected_without_exhausting_the_stack() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &[]);
    const BASE: &str = "/clusters/demo/api/v1/namespaces/default/configmaps";
    // cm-0 owns cm-1, which owns cm-2, ...: a chain far deeper than recursion survives.
    const CHAIN: usize = 400;
    let mut owner: Option<String> = None;
    for i in 0..CHAIN {
        let owners = owner.as_ref().map_or(String::new(), |uid| {
            format!(
                r#","ownerReferences":[{{"apiVersion":"v1","kind":"ConfigMap","name":"cm-{}","uid":"{uid}"}}]"#,
                i - 1
            )
        });
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm-{i}"{owners}}}}}"#
        );
        let (code, answer) = http_over_unix(&gw.socket(), "POST", BASE, Some(&body)).unwrap();
        assert_eq!(code, 201, "{answer}");
        let created: serde_json::Value = serde_json::from_str(&answer).unwrap();
        owner = created["metadata"]["uid"].as_str().map(str::to_owned);
    }
    gw.kubectl_ok(&["delete", "configmap", "cm-0", "--cascade=background"]);
    // Every link goes, and the gateway stays up and answers.
    wait_until("the whole chain to be collected", DEADLINE, || {
        let (code, body) = http_over_unix(&gw.socket(), "GET", BASE, None).unwrap();
        assert_eq!(code, 200, "{body}");
        let list: serde_json::Value = serde_json::from_str(&body).unwrap();
        let left = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("cm-"))
            })
            .count();
        (left == 0).then_some(())
    });
    gw.kubectl_ok(&["create", "configmap", "after", "--from-literal=k=v"]);
}

#[test]
fn one_token_cannot_hold_every_watch() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let gw = GatewayProcess::start_with(
        &data,
        "a",
        free_port(),
        &[
            "--embedded-cluster=a",
            "--embedded-cluster=b",
            "--max-watches-per-token=3",
        ],
    );
    let watch_head = |cluster: &str| {
        let token = std::fs::read_to_string(data.join(format!("{cluster}.kubeconfig")))
            .unwrap()
            .lines()
            .find_map(|l| l.trim().strip_prefix("token: ").map(str::to_owned))
            .unwrap();
        format!(
            "GET /clusters/{cluster}/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=600 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
        )
    };
    // Three watches of cluster a are held open (their answers' headers read, bodies not).
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut s = tls_connect(&gw);
        s.write_all(watch_head("a").as_bytes()).unwrap();
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).contains("200"));
        held.push(s);
    }
    // A fourth from the same token is refused; another cluster's token still watches.
    let line = https_status_line(&gw, &watch_head("a"));
    assert!(line.contains("429"), "{line}");
    let line = https_status_line(&gw, &watch_head("b"));
    assert!(line.contains("200"), "{line}");
    // Closing one frees its slot.
    drop(held.pop());
    wait_until("a watch slot to be freed", DEADLINE, || {
        https_status_line(&gw, &watch_head("a"))
            .contains("200")
            .then_some(())
    });
}

#[test]
fn a_crd_update_that_is_not_stored_changes_nothing_served() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &[]);
    let crd = dir.path().join("crd.yaml");
    std::fs::write(&crd, widget_crd(Some("v1"))).unwrap();
    gw.kubectl_ok(&["create", "-f", crd.to_str().unwrap()]);
    // An update adding a version v2 whose schema nests past what the store keeps: refused.
    let mut doc: serde_json::Value =
        serde_json::from_str(&gw.kubectl_ok(&["get", "crd", "widgets.example.com", "-o", "json"]))
            .unwrap();
    let mut deep = serde_json::json!({"type": "object"});
    for _ in 0..60 {
        deep = serde_json::json!({"type": "object", "properties": {"x": deep}});
    }
    let v2 = serde_json::json!({"name": "v2", "served": true, "storage": false,
        "schema": {"openAPIV3Schema": deep}});
    doc["spec"]["versions"].as_array_mut().unwrap().push(v2);
    let updated = dir.path().join("updated.json");
    std::fs::write(&updated, doc.to_string()).unwrap();
    let out = gw.kubectl(&["replace", "-f", updated.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("levels deep"), "{err}");
    // v2 is not served: the kind changed only if the definition was stored.
    let out = gw.kubectl(&["get", "--raw", "/apis/example.com/v2"]);
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    gw.kubectl_ok(&["get", "--raw", "/apis/example.com/v1"]);
}

/// The objects in `default` whose names start with `prefix`, counted over the socket.
fn count_configmaps(gw: &GatewayProcess, prefix: &str) -> usize {
    let (code, body) = http_over_unix(
        &gw.socket(),
        "GET",
        "/clusters/demo/api/v1/namespaces/default/configmaps",
        None,
    )
    .unwrap();
    assert_eq!(code, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| {
            o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .count()
}

/// Creates a ConfigMap over the socket; its created state.
fn create_configmap(gw: &GatewayProcess, body: &str) -> serde_json::Value {
    let (code, answer) = http_over_unix(
        &gw.socket(),
        "POST",
        "/clusters/demo/api/v1/namespaces/default/configmaps",
        Some(body),
    )
    .unwrap();
    assert_eq!(code, 201, "{answer}");
    serde_json::from_str(&answer).unwrap()
}

#[test]
fn collection_cut_short_by_a_crash_resumes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &[]);
    let owner = create_configmap(
        &gw,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"owner"}}"#,
    );
    let uid = owner["metadata"]["uid"].as_str().unwrap().to_owned();
    const DEPENDENTS: usize = 3_000;
    for i in 0..DEPENDENTS {
        create_configmap(
            &gw,
            &format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"dep-{i}","ownerReferences":[{{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"{uid}"}}]}}}}"#
            ),
        );
    }
    // The delete answers once the owner is gone; its dependents are the collector's work, not
    // the request's, so the gateway can die right after with most of them still there.
    let (code, answer) = http_over_unix(
        &gw.socket(),
        "DELETE",
        "/clusters/demo/api/v1/namespaces/default/configmaps/owner?propagationPolicy=Background",
        None,
    )
    .unwrap();
    assert_eq!(code, 200, "{answer}");
    gw.crash();
    let gw = start(dir.path(), &[]);
    let left = count_configmaps(&gw, "dep-");
    assert!(
        left > 0,
        "3,000 durable deletes cannot all have happened between the answer and the kill"
    );
    // After the restart the queued owner is worked off: no dependent is left dangling. Up to
    // 3,000 durable deletes by the debug binary, while the suite runs this file's other tests
    // beside it on two cores: more than the usual deadline (it ran past 30 s once in CI).
    wait_until(
        "the dependents to be collected after the restart",
        DEADLINE * 4,
        || (count_configmaps(&gw, "dep-") == 0).then_some(()),
    );
    assert_eq!(count_configmaps(&gw, "owner"), 0);
    gw.kubectl_ok(&["create", "configmap", "after", "--from-literal=k=v"]);
}

#[test]
fn a_dependent_with_another_owner_left_only_loses_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &[]);
    let reference = |o: &serde_json::Value| {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","name":"{}","uid":"{}"}}"#,
            o["metadata"]["name"].as_str().unwrap(),
            o["metadata"]["uid"].as_str().unwrap()
        )
    };
    let a = create_configmap(
        &gw,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#,
    );
    let b = create_configmap(
        &gw,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}"#,
    );
    create_configmap(
        &gw,
        &format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"shared","ownerReferences":[{},{}]}}}}"#,
            reference(&a),
            reference(&b)
        ),
    );
    gw.kubectl_ok(&["delete", "configmap", "a"]);
    // As kube's collector does: b still owns it, so it stays, naming b alone.
    wait_until("the reference to a to be dropped", DEADLINE, || {
        let owners = gw.kubectl_ok(&[
            "get",
            "configmap",
            "shared",
            "-o",
            "jsonpath={.metadata.ownerReferences[*].name}",
        ]);
        (owners.trim() == "b").then_some(())
    });
    gw.kubectl_ok(&["delete", "configmap", "b"]);
    wait_until("shared to go with its last owner", DEADLINE, || {
        (count_configmaps(&gw, "shared") == 0).then_some(())
    });
}

/// Resident memory now, in MiB.
fn rss_mib(pid: u32) -> u64 {
    status_mib(pid, "VmRSS:")
}

#[test]
fn watches_that_are_never_read_hold_a_bounded_amount_each() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &[]);
    // A collection of about 30 MB.
    let value = "w".repeat(20_000);
    let mut first_rv = String::new();
    for i in 0..1_500 {
        let created = create_configmap(
            &gw,
            &format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"big-{i}"}},"data":{{"k":"{value}"}}}}"#
            ),
        );
        if i == 0 {
            first_rv = created["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_owned();
        }
    }
    let pid = gw.pid().unwrap();
    let before = rss_mib(pid);
    // Twelve watches start with the whole collection (and twelve replay its whole log), and
    // none of them reads: each holds what its socket and a page hold, not the collection.
    let watch = |query: &str| {
        let mut s = std::os::unix::net::UnixStream::connect(gw.socket()).unwrap();
        write!(
            s,
            "GET /clusters/demo/api/v1/namespaces/default/configmaps?watch=1&{query} HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        .unwrap();
        let mut head = [0u8; 64];
        let n = s.read(&mut head).unwrap();
        assert!(String::from_utf8_lossy(&head[..n]).contains("200"));
        s
    };
    let mut stalled: Vec<_> = (0..12).map(|_| watch("resourceVersion=0")).collect();
    stalled.extend((0..12).map(|_| watch(&format!("resourceVersion={first_rv}"))));
    // Others are still answered while they sit there.
    gw.kubectl_ok(&["create", "configmap", "after", "--from-literal=k=v"]);
    let grew = rss_mib(pid).saturating_sub(before);
    // Whole collections read into memory per watch would be 24 x 30 MB.
    assert!(
        grew < 200,
        "24 unread watches grew the gateway by {grew} MiB"
    );
    drop(stalled);
    // A watch that reads replays the log past its first page: every event after the first
    // create arrives.
    let (code, body) = http_over_unix(
        &gw.socket(),
        "GET",
        &format!(
            "/clusters/demo/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={first_rv}&timeoutSeconds=3"
        ),
        None,
    )
    .unwrap();
    assert_eq!(code, 200);
    let added = body
        .lines()
        .filter(|l| l.contains(r#""type":"ADDED""#) && l.contains("big-"))
        .count();
    assert_eq!(added, 1_499);
}

#[test]
fn a_strategic_merge_of_a_long_list_patches_every_item_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &[]);
    // A Pod with 60,000 containers, each patched by name. How its cost grows with the list is
    // measured by the gateway_mixed_load benchmark; here, that every item is found by its key.
    const N: usize = 60_000;
    let containers = |image: &str| {
        (0..N)
            .map(|i| format!(r#"{{"name":"c{i}","image":"{image}"}}"#))
            .collect::<Vec<_>>()
            .join(",")
    };
    let (code, answer) = http_over_unix(
        &gw.socket(),
        "POST",
        "/clusters/demo/api/v1/namespaces/default/pods",
        Some(&format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"wide"}},"spec":{{"containers":[{}]}}}}"#,
            containers("a")
        )),
    )
    .unwrap();
    assert_eq!(code, 201, "{}", &answer[..answer.len().min(300)]);
    let patch = format!(r#"{{"spec":{{"containers":[{}]}}}}"#, containers("b"));
    let patch_file = dir.path().join("patch.json");
    std::fs::write(&patch_file, &patch).unwrap();
    gw.kubectl_ok(&[
        "patch",
        "pod",
        "wide",
        "--type=strategic",
        "--patch-file",
        patch_file.to_str().unwrap(),
    ]);
    let images = gw.kubectl_ok(&[
        "get",
        "pod",
        "wide",
        "-o",
        "jsonpath={.spec.containers[*].image}",
    ]);
    assert_eq!(images.split_whitespace().filter(|i| *i == "b").count(), N);
}

/// The leaf certificate the gateway presents on a fresh TLS connection, as DER.
fn presented_leaf(gw: &GatewayProcess) -> Vec<u8> {
    let mut s = tls_connect(gw);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock).expect("TLS handshake");
    }
    s.conn.peer_certificates().expect("a server certificate")[0].to_vec()
}

fn pem_leaf(path: &Path) -> Vec<u8> {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    CertificateDer::from_pem_file(path).unwrap().to_vec()
}

#[test]
fn a_generated_serving_certificate_is_renewed_under_the_same_ca_while_serving() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &["--serving-cert-lifetime=6s"]);
    let first = presented_leaf(&gw);
    assert_eq!(first, pem_leaf(&gw.data_dir.join("tls/serving.crt")));
    let ca_before = std::fs::read(gw.data_dir.join("tls/ca.crt")).unwrap();
    // Due at two thirds of the six seconds; renewed twice to show it keeps going.
    let mut seen = vec![first];
    for _ in 0..2 {
        let next = wait_until("a renewed serving certificate", DEADLINE, || {
            let now = presented_leaf(&gw);
            (!seen.contains(&now)).then_some(now)
        });
        seen.push(next);
    }
    assert_eq!(
        std::fs::read(gw.data_dir.join("tls/ca.crt")).unwrap(),
        ca_before
    );
    // The CA clients were given is unchanged, so their configuration still works.
    let out = gw.kubectl(&["get", "namespaces", "-o", "name"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("namespace/default"));
    // A restart serves the renewed pair from disk.
    let data = gw.data_dir.clone();
    drop(gw);
    let gw = GatewayProcess::start_with(&data, "demo", free_port(), &["--embedded-cluster=demo"]);
    assert_eq!(presented_leaf(&gw), pem_leaf(&data.join("tls/serving.crt")));
}

#[test]
fn a_cert_dir_pair_replaced_on_disk_is_served_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let write_pair = || {
        let g = gpustack_serving::certs::generate(&gpustack_serving::certs::Names {
            ca_common_name: "test-ca",
            common_name: "gateway",
            subject_alt_names: &["127.0.0.1"],
        })
        .unwrap();
        std::fs::write(certs.join("ca.crt"), g.ca_pem).unwrap();
        std::fs::write(certs.join("tls.key"), g.key_pem).unwrap();
        std::fs::write(certs.join("tls.crt"), g.cert_pem).unwrap();
    };
    write_pair();
    let flag = format!("--cert-dir={}", certs.display());
    let gw = start(dir.path(), &[&flag]);
    let client = |gw: &GatewayProcess| {
        use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(certs.join("ca.crt")).unwrap())
            .unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let mut conn = rustls::ClientConnection::new(
            Arc::new(config),
            ServerName::try_from("127.0.0.1").unwrap(),
        )
        .unwrap();
        let mut tcp = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        while conn.is_handshaking() {
            if conn.complete_io(&mut tcp).is_err() {
                return None;
            }
        }
        Some(conn.peer_certificates()?[0].to_vec())
    };
    assert_eq!(client(&gw), Some(pem_leaf(&certs.join("tls.crt"))));
    // A replacement (under a new CA, as a cert-manager reissue may be) is served within the
    // reload check.
    write_pair();
    let wanted = pem_leaf(&certs.join("tls.crt"));
    wait_until("the replaced pair served", DEADLINE, || {
        (client(&gw) == Some(wanted.clone())).then_some(())
    });
    let (code, _) = unix_readyz(&gw);
    assert_eq!(code, 200);
}
