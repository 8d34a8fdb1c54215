//! Every component scraped by a real Prometheus (Debian's package) with the scrape settings the
//! chart's ServiceMonitors describe (HTTPS, the certificate not verified, a bearer token):
//! `worker-gateway` mirroring an upstream and hosting the cluster, `worker` on that cluster,
//! `device-manager serve` on the H100 fixture node with the kubelet stand-in, and
//! `model-manager` with grpcio as the kubelet. Every target comes up; every metric the services'
//! docs list (their `## Metrics` tables) is scraped from its service; every panel query of the
//! chart's dashboards returns data; and every component's `/metrics` (the worker's, the node
//! agents') answers no token or an unknown one 401 and a token without `get` on it 403, never
//! the series (Prometheus sees those targets down). The agents are scraped with a
//! ServiceAccount's token allowed `get` on `/metrics` (not an admin's), so their
//! SubjectAccessReview is asked and answered.
//!
//! Needs `cargo build --bin gpustack-operator && cargo build -p gpustack-fake-nvml`.

// The model-manager tests' grpcio client (and the directories it needs).
#[path = "../../agents/model-manager/tests/support/grpcio.rs"]
mod grpcio;
#[path = "../../agents/model-manager/tests/support/olah.rs"]
mod olah;

use std::{
    collections::BTreeMap,
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use gpustack_tests::{
    embedded::{GatewayProcess, free_port, kubectl_binary},
    helm::chart_dir,
    hub::{crds_dir, upstream, upstream_status, upstreams_file},
    kubelet::Kubelet,
    machines::nvidia::{self, H100_GPUS},
    monitoring::{SERVICE_DOCS, dashboard_queries, documented_metrics},
    operator,
    prometheus::Prometheus,
    wait::wait_until,
    worker::{WorkerProcess, admin_token},
};
use serde_json::{Value, json};

/// Each wait's bound: the whole test stays within a few of them.
const DEADLINE: Duration = Duration::from_secs(90);
const NODE: &str = "gpu-node-1";
const GROUP: &str = "h100-80gb-hbm3";

/// A process killed (and reaped) on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(mut cmd: Command, log: &Path) -> Running {
    let log = std::fs::File::create(log).unwrap();
    Running(
        cmd.stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawning a component"),
    )
}

/// One scrape setting of the chart's ServiceMonitor endpoints (`key: value` in the template).
fn monitor_setting(template: &str, key: &str) -> String {
    template
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("the ServiceMonitor template has no {key}"))
        .trim()
        .to_owned()
}

/// The scrape job of `name` for `target`, with the ServiceMonitors' settings and `token_file`.
fn job(name: &str, target: &str, token_file: &Path) -> String {
    let template =
        std::fs::read_to_string(chart_dir().join("templates/monitoring/servicemonitors.yaml"))
            .unwrap();
    let scheme = monitor_setting(&template, "scheme");
    let path = monitor_setting(&template, "path");
    assert_eq!(
        monitor_setting(&template, "tlsConfig"),
        "{insecureSkipVerify: true}"
    );
    assert!(
        template.contains("bearerTokenFile:"),
        "the monitors scrape with a token"
    );
    format!(
        "  - job_name: {name}\n    scheme: {scheme}\n    metrics_path: {path}\n    tls_config:\n      insecure_skip_verify: true\n    authorization:\n      credentials_file: {}\n    static_configs:\n      - targets: ['{target}']\n",
        token_file.display()
    )
}

/// `curl` of a component's `/metrics` on `port` with `token`: the status code and the body.
fn metrics_as(port: u16, token: Option<&str>) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sk", "--max-time", "10", "-w", "\n%{http_code}"]);
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    let out = cmd
        .arg(format!("https://127.0.0.1:{port}/metrics"))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn prometheus_scrapes_every_component_and_every_documented_metric_and_panel_has_data() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();

    // The hub: an upstream mirrored, an embedded cluster hosted, an admin token for the scrape.
    let east = upstream(root, "east", &["gpu-a"]);
    let upstreams = upstreams_file(root, &[&east]);
    let hub_token = write(root, "hub-token", "hub-scrape-token-0123456789\n");
    let gw = GatewayProcess::start_with(
        &root.join("hub"),
        "demo",
        free_port(),
        &[
            "--embedded-cluster=demo",
            &format!("--upstreams={}", upstreams.display()),
            &format!("--token-file={}", hub_token.display()),
        ],
    );
    wait_until("east to be mirrored", DEADLINE, || {
        (upstream_status(&gw, "east")["phase"] == "Ready").then_some(())
    });
    gw.kubectl_ok(&["apply", "-f", crds_dir().to_str().unwrap()]);
    for crd in ["devices", "nodemodelstores"] {
        gw.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd}.worker.gpustack.ai"),
            "--timeout=30s",
        ]);
    }
    let node = write(
        root,
        "node.yaml",
        &format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {NODE}\n---\napiVersion: worker.gpustack.ai/v1alpha1\nkind: NodeModelStore\nmetadata: {{name: {NODE}}}\nspec: {{hub: {{huggingFaceEndpoint: \"http://192.0.2.1\"}}}}\n"
        ),
    );
    gw.kubectl_ok(&["apply", "-f", node.to_str().unwrap()]);

    // The worker on the hosted cluster; the admin's token scrapes it.
    let worker = WorkerProcess::start(&gw, &root.join("worker"), &[], &[]);
    let admin = admin_token(&gw.kubeconfig());
    let worker_token = write(root, "worker-token", &admin);

    // device-manager serve on the H100 fixture, registered with the kubelet stand-in.
    let host = nvidia::hgx_h100_node(&root.join("host"));
    let kubelet = Kubelet::start(&root.join("kubelet"));
    let dm_port = free_port();
    let mut dm = operator();
    dm.args([
        "device-manager",
        "serve",
        "--manufacturer=nvidia",
        "--monitor-period=1s",
        "--bind-address=127.0.0.1",
        &format!("--secure-port={dm_port}"),
        &format!("--kube-socket={}", kubelet.kube_socket().display()),
        &format!("--kubeconfig={}", gw.kubeconfig().display()),
    ])
    .env("GPUSTACK_SYSTEM_ROOT", &host.root)
    .env(nvidia::FIXTURE_ENV, &host.nvml_fixture)
    .env("KUBERNETES_NODE_NAME", NODE)
    .env_remove("LD_LIBRARY_PATH")
    .env_remove("KUBECONFIG");
    let _dm = spawn(dm, &root.join("dm.log"));
    wait_until("the sliced plugin to register", DEADLINE, || {
        kubelet
            .registered_resources()
            .iter()
            .any(|r| r == "nvidia.com/gpu.sliced")
            .then_some(())
    });
    // A container holding a slice: the per-container series.
    let pod = write(
        root,
        "pod.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: sliced\n  namespace: default\nspec:\n  nodeName: {NODE}\n  containers:\n    - name: main\n      image: cuda\n      resources:\n        limits:\n          nvidia.com/gpu.sliced: \"1\"\n          nvidia.com/gpu.sliced.cores-percentage: \"50\"\n          nvidia.com/gpu.sliced.memory-percentage: \"25\"\n"
        ),
    );
    gw.kubectl_ok(&["apply", "-f", pod.to_str().unwrap()]);
    let slice = format!("{GROUP}:{}:0003", H100_GPUS[0].uuid);
    kubelet.assign(
        "default",
        "sliced",
        "main",
        "nvidia.com/gpu.sliced",
        std::slice::from_ref(&slice),
    );
    kubelet
        .allocate("nvidia.sliced.sock", &[slice])
        .expect("sliced Allocate");

    // model-manager, with grpcio calling its CSI socket as the kubelet would.
    let mm_port = free_port();
    let work = root.join("mm");
    let socket = work.join("kubelet/plugins/model.csi.gpustack.ai/csi.sock");
    let mut mm = operator();
    mm.args([
        "model-manager",
        &format!("--node-name={NODE}"),
        &format!("--kubeconfig={}", gw.kubeconfig().display()),
        &format!("--kubelet-dir={}", work.join("kubelet").display()),
        &format!("--cache-root={}", work.join("cache").display()),
        &format!("--csi-socket={}", socket.display()),
        &format!("--secure-port={mm_port}"),
    ]);
    std::fs::create_dir_all(&work).unwrap();
    let _mm = spawn(mm, &root.join("mm.log"));
    wait_until("the CSI socket", DEADLINE, || socket.exists().then_some(()));
    let csi = grpcio::CsiClient::new(&work, &socket);
    assert_eq!(csi.call("Identity.Probe", json!({})).code, "OK");

    // A watch open on the worker's API, and a review by its Pod webhook.
    let mut watch = Command::new(kubectl_binary());
    watch.args([
        &format!("--kubeconfig={}", worker.kubeconfig().display()),
        "get",
        "--raw",
        "/apis/worker.gpustack.ai/v1/devices?watch=true",
    ]);
    let _watch = spawn(watch, &root.join("watch.log"));
    let queued = write(
        root,
        "queued.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: queued\n  namespace: default\n  labels: {kueue.x-k8s.io/queue-name: nowhere}\nspec:\n  containers:\n    - name: main\n      image: cuda\n      resources:\n        limits: {nvidia.com/gpu.sliced: \"1\", nvidia.com/gpu.sliced.memory-percentage: \"25\"}\n",
    );
    // Admitted or refused, the review is counted.
    let _ = gw.kubectl(&["apply", "-f", queued.to_str().unwrap()]);

    // A token the cluster authenticates but allows nothing: 403 from every component, never
    // the series. And a scraper allowed `get` on /metrics, as the chart's metrics-reader role.
    gw.kubectl_ok(&["create", "serviceaccount", "nobody"]);
    let nobody = gw.kubectl_ok(&["create", "token", "nobody"]);
    let nobody_token = write(root, "nobody-token", &nobody);
    gw.kubectl_ok(&["create", "serviceaccount", "scraper"]);
    gw.kubectl_ok(&[
        "create",
        "clusterrole",
        "metrics-reader",
        "--verb=get",
        "--non-resource-url=/metrics",
    ]);
    gw.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "scraper",
        "--clusterrole=metrics-reader",
        "--serviceaccount=default:scraper",
    ]);
    let scraper = gw.kubectl_ok(&["create", "token", "scraper"]);
    let scraper_token = write(root, "scraper-token", &scraper);
    for (agent, port) in [("device-manager", dm_port), ("model-manager", mm_port)] {
        for token in [None, Some("not-a-token")] {
            let (code, body) = metrics_as(port, token);
            assert_eq!(code, 401, "{agent} with {token:?}: {body}");
            assert!(!body.contains("gpustack_"), "{agent}: {body}");
        }
        let (code, body) = metrics_as(port, Some(nobody.trim()));
        assert_eq!(code, 403, "{agent} with a token without access: {body}");
        assert!(!body.contains("gpustack_"), "{agent}: {body}");
    }

    let jobs = [
        job(
            "worker",
            &format!("127.0.0.1:{}", worker.port),
            &worker_token,
        ),
        job(
            "worker-gateway",
            &format!("127.0.0.1:{}", gw.port),
            &hub_token,
        ),
        job(
            "device-manager",
            &format!("127.0.0.1:{dm_port}"),
            &scraper_token,
        ),
        job(
            "model-manager",
            &format!("127.0.0.1:{mm_port}"),
            &scraper_token,
        ),
        job(
            "worker-forbidden",
            &format!("127.0.0.1:{}", worker.port),
            &nobody_token,
        ),
        job(
            "device-manager-forbidden",
            &format!("127.0.0.1:{dm_port}"),
            &nobody_token,
        ),
        job(
            "model-manager-forbidden",
            &format!("127.0.0.1:{mm_port}"),
            &nobody_token,
        ),
    ];
    let prom_dir = root.join("prometheus");
    std::fs::create_dir_all(&prom_dir).unwrap();
    let prom = Prometheus::start_with(&prom_dir, &jobs.concat());

    let health = wait_until("every target to be scraped once", DEADLINE, || {
        let targets = prom.targets()?;
        let by_job: BTreeMap<String, (String, String)> = targets
            .iter()
            .map(|t| {
                (
                    t["labels"]["job"].as_str().unwrap_or_default().to_owned(),
                    (
                        t["health"].as_str().unwrap_or_default().to_owned(),
                        t["lastError"].as_str().unwrap_or_default().to_owned(),
                    ),
                )
            })
            .collect();
        (by_job.len() == jobs.len() && by_job.values().all(|(h, _)| h != "unknown"))
            .then_some(by_job)
    });
    for job in [
        "worker",
        "worker-gateway",
        "device-manager",
        "model-manager",
    ] {
        let (h, error) = &health[job];
        assert_eq!(h, "up", "{job}: {error}");
    }
    for job in [
        "worker-forbidden",
        "device-manager-forbidden",
        "model-manager-forbidden",
    ] {
        let (h, error) = &health[job];
        assert_eq!(h, "down", "{job}");
        assert!(error.contains("403"), "{job}: {error}");
        assert!(
            prom.query(&format!(r#"{{job="{job}",__name__=~"gpustack_.+"}}"#))
                .unwrap_or_default()
                .is_empty(),
            "{job}: a forbidden scrape stored series"
        );
    }

    // Every documented metric, from its own service.
    let job_of: BTreeMap<&str, &str> = BTreeMap::from([
        ("worker", "worker"),
        ("worker-gateway", "worker-gateway"),
        ("device-manager", "device-manager"),
        ("model-manager", "model-manager"),
    ]);
    for (service, doc) in SERVICE_DOCS {
        let job = job_of[service];
        for name in documented_metrics(doc) {
            let query = format!(r#"count({{job="{job}",__name__=~"{name}|{name}_count"}})"#);
            wait_until(
                &format!("{name} (listed in {doc}) scraped from {job}"),
                DEADLINE,
                || prom.query(&query).filter(|r| !r.is_empty()).map(|_| ()),
            );
        }
    }
    // Every dashboard panel's query returns data.
    for q in dashboard_queries() {
        wait_until(
            &format!("data for {} / {}: {}", q.dashboard, q.panel, q.expr),
            DEADLINE,
            || prom.query(&q.expr).filter(|r| !r.is_empty()).map(|_| ()),
        );
    }
}

#[test]
fn the_workers_metrics_need_get_on_the_metrics_url() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("gw"), "m");
    let worker = WorkerProcess::start(&gw, &dir.path().join("worker"), &[], &[]);
    gw.kubectl_ok(&["create", "serviceaccount", "nobody"]);
    gw.kubectl_ok(&["create", "serviceaccount", "scraper"]);
    gw.kubectl_ok(&[
        "create",
        "clusterrole",
        "metrics-reader",
        "--verb=get",
        "--non-resource-url=/metrics",
    ]);
    gw.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "scraper",
        "--clusterrole=metrics-reader",
        "--serviceaccount=default:scraper",
    ]);
    let nobody = gw.kubectl_ok(&["create", "token", "nobody"]);
    let scraper = gw.kubectl_ok(&["create", "token", "scraper"]);

    let (code, body) = metrics_as(worker.port, None);
    assert_eq!(code, 401, "{body}");
    let (code, body) = metrics_as(worker.port, Some("not-a-token"));
    assert_eq!(code, 401, "{body}");
    let (code, body) = metrics_as(worker.port, Some(nobody.trim()));
    assert_eq!(code, 403, "{body}");
    assert!(!body.contains("gpustack_"), "{body}");
    let status: Value = serde_json::from_str(&body).expect("a Status body");
    assert_eq!(status["reason"], "Forbidden");
    let (code, body) = metrics_as(worker.port, Some(scraper.trim()));
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("gpustack_worker_leader"), "{body}");
    gpustack_tests::prometheus::check_metrics("worker", &body);
    drop(worker);

    // --metrics-auth=none: open to anyone who reaches the port.
    let open = WorkerProcess::start(&gw, &dir.path().join("open"), &["--metrics-auth=none"], &[]);
    let (code, body) = metrics_as(open.port, None);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("gpustack_worker_reconcile_total"), "{body}");
}
