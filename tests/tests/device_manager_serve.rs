//! `device-manager serve` end to end: the real binary on the HGX H100 fixture node (NVML
//! stand-in), against an embedded cluster started by the real `worker-gateway`, registered with
//! the kubelet stand-in (real gRPC over unix sockets), with kubectl reading what it wrote.

use std::{
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess, free_port},
    kubelet::{Kubelet, next_list_where},
    machines::nvidia::{self, H100_GPUS, H100_UNHEALTHY_INDEX, NvidiaNode},
    operator, prometheus, python_grpc,
    wait::wait_until,
};
use serde_json::Value;

const NODE: &str = "gpu-node-1";
const GROUP: &str = "h100-80gb-hbm3";
const D: u64 = 1_600_000;
/// How long `device-manager serve` may take to exit after SIGTERM before the test kills it and
/// fails (its plugin servers are cut after 200 ms each, stopped together).
const STOP_DEADLINE: Duration = Duration::from_secs(10);
/// The agents' `--monitor-period`.
const PERIOD: Duration = Duration::from_secs(1);

/// A running `device-manager serve`, stopped (SIGTERM) on drop.
struct Agent {
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl Agent {
    fn start(
        node: &NvidiaNode,
        kubelet: &Kubelet,
        gw: &GatewayProcess,
        dir: &Path,
        extra: &[&str],
    ) -> Agent {
        let fixture = [(nvidia::FIXTURE_ENV, node.nvml_fixture.as_path())];
        Self::start_on(&node.root, "nvidia", &fixture, kubelet, gw, dir, extra)
    }

    /// The agent on the host tree `root` for `manufacturer`, with `env` set.
    fn start_on(
        root: &Path,
        manufacturer: &str,
        env: &[(&str, &Path)],
        kubelet: &Kubelet,
        gw: &GatewayProcess,
        dir: &Path,
        extra: &[&str],
    ) -> Agent {
        let port = free_port();
        let log = dir.join("dm.log");
        let mut cmd = operator();
        cmd.args([
            "device-manager",
            "serve",
            &format!("--manufacturer={manufacturer}"),
            &format!("--monitor-period={}s", PERIOD.as_secs()),
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
            &format!("--kube-socket={}", kubelet.kube_socket().display()),
            &format!("--kubeconfig={}", gw.kubeconfig().display()),
            // These tests read /metrics without a token (prometheus_scrape.rs scrapes with one).
            "--metrics-auth=none",
        ])
        .args(extra)
        .env("GPUSTACK_SYSTEM_ROOT", root)
        .env("KUBERNETES_NODE_NAME", NODE)
        .env("RUST_LOG", "info")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        Agent {
            child: cmd.spawn().expect("starting device-manager serve"),
            port,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn get(&self, path: &str) -> Option<String> {
        let out = std::process::Command::new("curl")
            .args([
                "-sk",
                "--fail",
                "--max-time",
                "5",
                &format!("https://127.0.0.1:{}{path}", self.port),
            ])
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// SIGTERM, then waits for the exit up to [`STOP_DEADLINE`]: an agent still running then is
    /// killed and the test fails (unless it is already failing), so a hang cannot hang the suite.
    fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let child = &mut self.child;
        let exited = gpustack_tests::wait::poll_until(STOP_DEADLINE, || {
            (!matches!(child.try_wait(), Ok(None))).then_some(())
        });
        if exited.is_some() {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            panic!(
                "device-manager serve did not exit within {STOP_DEADLINE:?} of SIGTERM (killed)\n\
                 --- its log ---\n{}",
                self.log()
            );
        }
    }

    /// How many times the agent has logged that it registers its plugins with a (new) kubelet.
    fn registering_lines(&self) -> usize {
        self.log()
            .lines()
            .filter(|l| l.contains("kubelet socket (re)created: registering"))
            .count()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- device-manager serve log ---\n{}", self.log());
        }
        self.stop();
    }
}

fn cluster(dir: &Path) -> GatewayProcess {
    let gw = GatewayProcess::start(&dir.join("gw"), "dm");
    let crd = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/crds/devices.worker.gpustack.ai.yaml");
    gw.kubectl_ok(&["apply", "-f", &crd.display().to_string()]);
    wait_until("the Devices kind to be served", DEADLINE, || {
        gw.kubectl(&["get", "devices"])
            .status
            .success()
            .then_some(())
    });
    let node = dir.join("node.yaml");
    std::fs::write(
        &node,
        format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {NODE}\n"),
    )
    .unwrap();
    gw.kubectl_ok(&["apply", "-f", &node.display().to_string()]);
    gw
}

fn json(gw: &GatewayProcess, args: &[&str]) -> Option<Value> {
    let out = gw.kubectl(args);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

fn devices(gw: &GatewayProcess) -> Option<Value> {
    json(gw, &["get", "devices", NODE, "-o", "json"])
}

/// The status entry of accelerator `id` in the node's Devices.
fn ledger_entry(gw: &GatewayProcess, id: &str) -> Option<Value> {
    let d = devices(gw)?;
    d["status"]["groups"]
        .as_array()?
        .iter()
        .flat_map(|g| g["accelerators"].as_array().cloned().unwrap_or_default())
        .find(|a| a["id"] == id)
}

fn pod(gw: &GatewayProcess, dir: &Path, name: &str, limits: &[(&str, &str)]) -> String {
    let limits: String = limits
        .iter()
        .map(|(k, v)| format!("          {k}: \"{v}\"\n"))
        .collect();
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  nodeName: {NODE}\n  containers:\n    - name: main\n      image: cuda\n      resources:\n        limits:\n{limits}"
    );
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, manifest).unwrap();
    gw.kubectl_ok(&["apply", "-f", &path.display().to_string()]);
    gw.kubectl_ok(&["get", "pod", name, "-o", "jsonpath={.metadata.uid}"])
}

/// The labels of the one `gpustack_container_accelerator_memory_total_mib` series of `pod` in
/// the default namespace that a real Prometheus scraped (its own `job`, `instance` and
/// `__name__` left out), and the series' value.
fn pod_series(prom: &prometheus::Prometheus, pod: &str) -> (Value, String) {
    let series = wait_until(
        &format!("Prometheus to scrape the per-pod series of {pod}"),
        DEADLINE,
        || {
            prom.query(&format!(
                r#"gpustack_container_accelerator_memory_total_mib{{namespace="default",pod="{pod}"}}"#
            ))
            .filter(|r| !r.is_empty())
        },
    );
    assert_eq!(series.len(), 1, "one series for {pod}: {series:?}");
    let mut labels = series[0]["metric"].clone();
    for own in ["__name__", "job", "instance"] {
        labels.as_object_mut().unwrap().remove(own);
    }
    let value = series[0]["value"][1].as_str().unwrap().to_owned();
    (labels, value)
}

/// The labels a container's series must carry: container `main` of `pod` in `default` on
/// [`NODE`], holding NVIDIA card `id` (index `index`) in `mode`.
fn pod_labels(id: &str, index: &str, pod: &str, mode: &str) -> Value {
    serde_json::json!({
        "node": NODE,
        "manufacturer": "nvidia",
        "id": id,
        "index": index,
        "namespace": "default",
        "pod": pod,
        "container": "main",
        "mode": mode,
    })
}

fn token(card: usize, n: u32) -> String {
    format!("{GROUP}:{}:{n:04}", H100_GPUS[card].uuid)
}

fn set_ecc(fixture: &Path, card: usize, errors: u64) {
    let mut f: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    f["devices"][card]["eccUncorrectedVolatile"] = errors.into();
    // Written whole and renamed, so that a pass never reads half a file.
    let tmp = fixture.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(&f).unwrap()).unwrap();
    std::fs::rename(tmp, fixture).unwrap();
}

/// The compute processes NVML lists on `card`: (host PID, MiB).
fn set_processes(fixture: &Path, card: usize, list: &[(u32, u64)]) {
    let mut f: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    f["devices"][card]["processes"] = list
        .iter()
        .map(|(pid, mib)| serde_json::json!({"pid": pid, "usedMemoryMib": mib}))
        .collect();
    let tmp = fixture.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(&f).unwrap()).unwrap();
    std::fs::rename(tmp, fixture).unwrap();
}

#[test]
fn serve_registers_allocates_keeps_the_ledger_and_survives_the_kubelet() {
    let dir = tempfile::tempdir().unwrap();
    let gw = cluster(dir.path());
    let node = nvidia::hgx_h100_node(&dir.path().join("host"));
    let mut kubelet = Kubelet::start(&dir.path().join("kubelet"));
    let agent = Agent::start(&node, &kubelet, &gw, dir.path(), &[]);

    // Registration: one plugin per mode (NVIDIA has a partition kind).
    let want = [
        "device.gpustack.ai/nvidia.visibility",
        "nvidia.com/gpu",
        "nvidia.com/gpu.partitioned",
        "nvidia.com/gpu.shared",
        "nvidia.com/gpu.sliced",
    ];
    wait_until("every plugin to register", DEADLINE, || {
        (kubelet.registered_resources() == want).then_some(())
    });
    let reg = kubelet
        .registrations()
        .into_iter()
        .find(|r| r.resource_name == "nvidia.com/gpu.sliced")
        .unwrap();
    assert_eq!(reg.version, "v1beta1");
    assert_eq!(reg.endpoint, "nvidia.sliced.sock");
    assert!(reg.options.unwrap().get_preferred_allocation_available);

    // The Devices spec, owned by the Node, and the labels on the Node.
    let d = wait_until("the Devices spec", DEADLINE, || {
        devices(&gw).filter(|d| {
            d["spec"]["groups"][0]["accelerators"]
                .as_array()
                .is_some_and(|a| a.len() == 8)
        })
    });
    assert_eq!(d["metadata"]["ownerReferences"][0]["kind"], "Node");
    assert_eq!(d["spec"]["groups"][0]["id"], GROUP);
    let labels = wait_until("the Node labels", DEADLINE, || {
        json(&gw, &["get", "node", NODE, "-o", "json"])
            .map(|n| n["metadata"]["labels"].clone())
            .filter(|l| l.get("feature.gpustack.ai/acceleratable").is_some())
    });
    assert_eq!(
        labels[format!("acceleratable.feature.gpustack.ai/nvidia-{GROUP}.count")],
        "7",
        "one card is unhealthy: {labels}"
    );
    assert_eq!(
        labels["acceleratable.feature.gpustack.ai/nvidia.driver-version"],
        "550.54.15"
    );

    // ListAndWatch: eight exclusive tokens, GPU 5 unhealthy, NUMA topology from sysfs.
    let exclusive = kubelet.list_and_watch("nvidia.exclusive.sock");
    let list = next_list_where(&exclusive, DEADLINE, "eight cards", |l| l.len() == 8);
    for (i, dev) in list.iter().enumerate() {
        assert_eq!(dev.id, token(i, 0));
        let want = if i == H100_UNHEALTHY_INDEX {
            "Unhealthy"
        } else {
            "Healthy"
        };
        assert_eq!(dev.health, want, "card {i}");
        assert_eq!(
            dev.topology.as_ref().unwrap().nodes[0].id,
            i64::from(H100_GPUS[i].numa_node.max(0))
        );
    }

    // GetPreferredAllocation: shared requests get distinct cards, unhealthy ones skipped.
    let shared_ids: Vec<String> = (0..8)
        .flat_map(|c| [0, 160000].map(|n| format!("{GROUP}:{}:{n:04}", H100_GPUS[c].uuid)))
        .collect();
    let pick = kubelet.preferred("nvidia.shared.sock", &shared_ids, 2);
    assert_eq!(pick, [shared_ids[0].clone(), shared_ids[2].clone()]);
    // Python grpcio asks the same, and with a token that must be included: that one first, then
    // another card's.
    let py = python_grpc::device_plugin_client(
        &kubelet.plugin_socket("nvidia.shared.sock"),
        &serde_json::json!({"preferred": {"available": shared_ids, "size": 2}}),
    );
    assert_eq!(py["preferred"], serde_json::json!(pick), "{py}");
    let py = python_grpc::device_plugin_client(
        &kubelet.plugin_socket("nvidia.shared.sock"),
        &serde_json::json!({"preferred": {"available": shared_ids, "mustInclude": [shared_ids[3]], "size": 2}}),
    );
    assert_eq!(
        py["preferred"],
        serde_json::json!([shared_ids[3], shared_ids[0]]),
        "{py}"
    );

    // A sliced allocation, identified through the pod-resources API.
    let uid = pod(
        &gw,
        dir.path(),
        "sliced",
        &[
            ("nvidia.com/gpu.sliced", "1"),
            ("nvidia.com/gpu.sliced.cores-percentage", "50"),
            ("nvidia.com/gpu.sliced.memory-percentage", "25"),
        ],
    );
    kubelet.assign(
        "default",
        "sliced",
        "main",
        "nvidia.com/gpu.sliced",
        &[token(0, 3)],
    );
    let reply = kubelet
        .allocate("nvidia.sliced.sock", &[token(0, 3)])
        .expect("sliced Allocate");
    let c = &reply.container_responses[0];
    let work = format!("/var/lib/gpustack/operator/pods/{uid}/c-main");
    let lib = "/var/lib/gpustack/operator/lib/nvidia";
    let envs: Vec<(&str, &str)> = c
        .envs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect::<std::collections::BTreeMap<_, _>>()
        .into_iter()
        .collect();
    assert_eq!(
        envs,
        [
            ("CUDA_DEVICE_MEMORY_LIMIT_0", "20389m"),
            (
                "CUDA_DEVICE_MEMORY_SHARED_CACHE",
                "/tmp/vgpu/cudevshr.cache"
            ),
            ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
            ("CUDA_DEVICE_SM_LIMIT", "50"),
            ("LIBCUDA_LOG_LEVEL", "0"),
            ("NVIDIA_VISIBLE_DEVICES", H100_GPUS[0].uuid),
        ]
    );
    let mounts: Vec<(String, String, bool)> = c
        .mounts
        .iter()
        .map(|m| (m.host_path.clone(), m.container_path.clone(), m.read_only))
        .collect();
    assert_eq!(
        mounts,
        [
            (
                format!("{lib}/ld.so.preload"),
                "/etc/ld.so.preload".to_owned(),
                true
            ),
            (
                format!("{lib}/cuda-12/libvgpu.so"),
                "/usr/local/vgpu/libvgpu.so".to_owned(),
                true
            ),
            (
                "/tmp/vgpulock".to_owned(),
                "/tmp/vgpulock".to_owned(),
                false
            ),
            (format!("{work}/tmp/vgpu"), "/tmp/vgpu".to_owned(), false),
            ("/dev/shm".to_owned(), "/dev/shm".to_owned(), false),
        ]
    );
    assert!(
        node.root.join(&work[1..]).join("tmp/vgpu").is_dir(),
        "the pod work directory exists on the host"
    );
    let annotated = gw.kubectl_ok(&[
        "get",
        "pod",
        "sliced",
        "-o",
        "jsonpath={.metadata.annotations.device\\.gpustack\\.ai/accelerator\\.allocated}",
    ]);
    let annotated: Value = serde_json::from_str(&annotated).unwrap();
    assert_eq!(annotated["main"]["deviceIDs"][0], token(0, 3));
    assert_eq!(
        annotated["main"]["devices"]["groups"][0]["accelerators"][0]["mode"],
        3
    );
    let entry = wait_until("the ledger to charge the slice", DEADLINE, || {
        ledger_entry(&gw, H100_GPUS[0].uuid).filter(|e| e["mode"] == 3)
    });
    assert_eq!(entry["allocated"], D / 2);
    assert_eq!(entry["remaining"], D / 2);
    assert_eq!(entry["allocatedSlices"], 1);

    // While the slice is held, a real Prometheus scraping /metrics sees the card's figures
    // labelled with the slice's namespace, Pod, container and mode.
    let prom = prometheus::Prometheus::start(dir.path(), &format!("127.0.0.1:{}", agent.port));
    let (labels, value) = pod_series(&prom, "sliced");
    assert_eq!(
        labels,
        pod_labels(H100_GPUS[0].uuid, "0", "sliced", "sliced"),
        "the sliced pod's series"
    );
    assert_eq!(value, "81559", "the card's memory");

    // The snapshot's per-slice view of the sliced card: the slice's process (its Pod named by
    // its cgroup) and a host process that belongs to no Pod, as NVML lists them.
    set_processes(&node.nvml_fixture, 0, &[(4242, 2048), (4343, 100)]);
    let host = |pid: u32, cgroup: &str| {
        let dir = node.root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cgroup"), cgroup).unwrap();
    };
    host(
        4242,
        &format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-0123.scope\n",
            uid.replace('-', "_")
        ),
    );
    host(4343, "0::/system.slice/dcgm.service\n");
    let slices = wait_until("the per-slice view", DEADLINE, || {
        let snap: Value = serde_json::from_str(&agent.get("/monitor/snapshot")?).ok()?;
        snap.get("slices")
            .filter(|s| s["devices"][0]["rows"]["Returned"] == 2)
            .cloned()
    });
    assert_eq!(slices["schemaVersion"], 1);
    assert_eq!(
        slices["usages"],
        serde_json::json!([{
            "manufacturer": "nvidia",
            "podUID": uid,
            "container": "main",
            "deviceID": H100_GPUS[0].uuid,
            "memoryUsedMiB": 2048,
        }])
    );
    assert_eq!(
        slices["devices"],
        serde_json::json!([{
            "manufacturer": "nvidia",
            "deviceID": H100_GPUS[0].uuid,
            "coresReason": "unsupported",
            "rows": {"Returned": 2, "Attributed": 1, "NonInstance": 1, "Unreadable": 0, "Ambiguous": 0},
            "readsTruncated": false,
        }])
    );

    // The card held sliced turns unhealthy for the exclusive plugin.
    next_list_where(&exclusive, DEADLINE, "card 0 held sliced", |l| {
        l[0].health == "Unhealthy"
    });

    // Refusals: another mode on a sliced card; two shared tokens on one card; no free units.
    pod(&gw, dir.path(), "whole", &[("nvidia.com/gpu", "1")]);
    let refused = kubelet
        .allocate("nvidia.exclusive.sock", &[token(0, 0)])
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains("is held sliced, not exclusive"),
        "{}",
        refused.message()
    );
    pod(
        &gw,
        dir.path(),
        "shared2",
        &[("nvidia.com/gpu.shared", "2")],
    );
    let two = kubelet
        .allocate(
            "nvidia.shared.sock",
            &[
                format!("{GROUP}:{}:0000", H100_GPUS[1].uuid),
                format!("{GROUP}:{}:160000", H100_GPUS[1].uuid),
            ],
        )
        .unwrap_err();
    assert_eq!(two.code(), tonic::Code::FailedPrecondition);
    assert!(
        two.message().contains("two shared tokens"),
        "{}",
        two.message()
    );
    pod(
        &gw,
        dir.path(),
        "big",
        &[
            ("nvidia.com/gpu.sliced", "1"),
            ("nvidia.com/gpu.sliced.units", "1200000"),
            ("nvidia.com/gpu.sliced.memory-percentage", "80"),
        ],
    );
    let full = kubelet
        .allocate("nvidia.sliced.sock", &[token(0, 4)])
        .unwrap_err();
    assert_eq!(full.code(), tonic::Code::FailedPrecondition);
    assert!(full.message().contains("units free"), "{}", full.message());

    // Exclusive on another card, identified as the oldest pending Pod (no pod-resources entry).
    let ex = kubelet
        .allocate("nvidia.exclusive.sock", &[token(2, 0)])
        .expect("exclusive Allocate");
    assert_eq!(
        ex.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"],
        H100_GPUS[2].uuid
    );
    wait_until("the ledger to charge the exclusive card", DEADLINE, || {
        ledger_entry(&gw, H100_GPUS[2].uuid).filter(|e| e["mode"] == 1 && e["remaining"] == 0)
    });

    // Python grpcio, generated from the same api.proto, sees the same devices and gets the same
    // kind of answers over the same socket.
    let rust_view = next_list_where(
        &kubelet.list_and_watch("nvidia.exclusive.sock"),
        DEADLINE,
        "the current list",
        |_| true,
    );
    pod(&gw, dir.path(), "py", &[("nvidia.com/gpu", "1")]);
    let py = python_grpc::device_plugin_client(
        &kubelet.plugin_socket("nvidia.exclusive.sock"),
        &serde_json::json!({"preStart": [token(3, 0)], "allocate": [token(3, 0)]}),
    );
    let py_view: Vec<(String, String, Vec<i64>)> = py["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["id"].as_str().unwrap().to_owned(),
                d["health"].as_str().unwrap().to_owned(),
                serde_json::from_value(d["numa"].clone()).unwrap(),
            )
        })
        .collect();
    let rust_view: Vec<(String, String, Vec<i64>)> = rust_view
        .iter()
        .map(|d| {
            (
                d.id.clone(),
                d.health.clone(),
                d.topology
                    .as_ref()
                    .map(|t| t.nodes.iter().map(|n| n.id).collect())
                    .unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(py_view, rust_view);
    // The options the plugin registered with, asked over the socket; PreStartContainer (not
    // required, but served) answers OK.
    assert_eq!(
        py["options"],
        serde_json::json!({"preStartRequired": false, "getPreferredAllocationAvailable": true}),
        "{py}"
    );
    assert_eq!(py["preStart"], "OK", "{py}");
    assert_eq!(
        py["allocate"]["envs"],
        serde_json::json!({"NVIDIA_VISIBLE_DEVICES": H100_GPUS[3].uuid}),
        "{py}"
    );
    pod(&gw, dir.path(), "py2", &[("nvidia.com/gpu", "1")]);
    let py = python_grpc::device_plugin_client(
        &kubelet.plugin_socket("nvidia.exclusive.sock"),
        &serde_json::json!({"allocate": [token(2, 0)]}),
    );
    assert_eq!(py["allocateError"]["code"], "FAILED_PRECONDITION", "{py}");
    assert!(
        py["allocateError"]["message"]
            .as_str()
            .unwrap()
            .contains("already taken"),
        "{py}"
    );

    // A Pod deleted right after its grant, with no Allocate in between, frees its card: its
    // reservation goes with it.
    for name in ["again", "after"] {
        pod(&gw, dir.path(), name, &[("nvidia.com/gpu", "1")]);
        kubelet.assign("default", name, "main", "nvidia.com/gpu", &[token(4, 0)]);
        kubelet
            .allocate("nvidia.exclusive.sock", &[token(4, 0)])
            .unwrap_or_else(|e| panic!("exclusive Allocate for {name}: {e}"));
        wait_until("the ledger to charge card 4", DEADLINE, || {
            ledger_entry(&gw, H100_GPUS[4].uuid).filter(|e| e["mode"] == 1)
        });
        gw.kubectl_ok(&["delete", "pod", name, "--wait=false"]);
        kubelet.unassign("default", name);
        wait_until("card 4 to be released", DEADLINE, || {
            ledger_entry(&gw, H100_GPUS[4].uuid).filter(|e| e["mode"] == 0)
        });
    }

    // Deleting the sliced Pod releases its charge and reclaims its work directory.
    gw.kubectl_ok(&["delete", "pod", "sliced", "--wait=false"]);
    wait_until("the slice to be released", DEADLINE, || {
        ledger_entry(&gw, H100_GPUS[0].uuid).filter(|e| e["mode"] == 0 && e["remaining"] == D)
    });
    wait_until("the work directory to be reclaimed", DEADLINE, || {
        (!node.root.join(&work[1..]).exists()).then_some(())
    });

    // Metrics and the snapshot.
    let metrics = wait_until("per-pod metrics", DEADLINE, || {
        agent
            .get("/metrics")
            .filter(|m| m.contains("gpustack_container_accelerator_memory_used_mib{"))
    });
    assert!(metrics.contains(&format!(r#"gpustack_container_accelerator_memory_total_mib{{container="main",id="{}",index="2",manufacturer="nvidia",mode="exclusive",namespace="default",node="{NODE}",pod="whole"}} 81559"#, H100_GPUS[2].uuid)), "{metrics}");
    // Per-card and per-container series alike pass promtool's checks.
    prometheus::check_metrics("device-manager serve", &metrics);
    // The snapshot is taken by the monitor pass: the next one no longer finds a sliced card.
    let snap = wait_until("a snapshot with no card sliced", DEADLINE, || {
        let snap: Value = serde_json::from_str(&agent.get("/monitor/snapshot")?).ok()?;
        snap.get("slices").is_none().then_some(snap)
    });
    assert_eq!(snap["periodSeconds"], 1);
    assert_eq!(
        snap["groups"][0]["accelerators"].as_array().unwrap().len(),
        8
    );
    assert_eq!(agent.get("/readyz").as_deref(), Some("ok"));

    // The real Prometheus answers "which pod uses which card" for the exclusive one too.
    let (labels, value) = pod_series(&prom, "whole");
    assert_eq!(
        labels,
        pod_labels(H100_GPUS[2].uuid, "2", "whole", "exclusive")
    );
    assert_eq!(value, "81559");
    let cards = prom.query("count(gpustack_accelerator_unhealthy)").unwrap();
    assert_eq!(cards[0]["value"][1], "8");

    // A health flip in the library reaches the plugin, the labels, and recovers.
    // Each is timed from the fixture change: the next monitor pass reads it, so the plugin's
    // list follows within about one period (the slack covers a pass under way and a loaded
    // machine).
    let within = PERIOD + Duration::from_millis(1500);
    let healthy_card = 7;
    set_ecc(&node.nvml_fixture, healthy_card, 3);
    let changed = Instant::now();
    next_list_where(&exclusive, DEADLINE, "card 7 unhealthy", |l| {
        l[healthy_card].health == "Unhealthy"
    });
    let took = changed.elapsed();
    eprintln!("health flip reached ListAndWatch {took:?} after the fixture change");
    assert!(
        took <= within,
        "card 7 turned unhealthy {took:?} after the fixture change (monitor period {PERIOD:?})"
    );
    let sick = wait_until("the reason in the Devices status", DEADLINE, || {
        ledger_entry(&gw, H100_GPUS[healthy_card].uuid)
            .filter(|e| e.get("unhealthyReason").is_some())
    });
    assert_eq!(
        sick["unhealthyReason"],
        "NVML counts uncorrected ECC errors since the driver loaded"
    );
    let logged = agent.log();
    assert!(
        logged.lines().any(|l| l.contains("accelerator unhealthy")
            && l.contains(H100_GPUS[healthy_card].uuid)
            && l.contains("uncorrected ECC errors")),
        "{logged}"
    );
    wait_until("the Node label count to drop", DEADLINE, || {
        json(&gw, &["get", "node", NODE, "-o", "json"]).filter(|n| {
            n["metadata"]["labels"]
                [format!("acceleratable.feature.gpustack.ai/nvidia-{GROUP}.count")]
                == "6"
        })
    });
    set_ecc(&node.nvml_fixture, healthy_card, 0);
    let changed = Instant::now();
    next_list_where(&exclusive, DEADLINE, "card 7 healthy again", |l| {
        l[healthy_card].health == "Healthy"
    });
    let took = changed.elapsed();
    eprintln!("recovery reached ListAndWatch {took:?} after the fixture change");
    assert!(
        took <= within,
        "card 7 recovered {took:?} after the fixture change (monitor period {PERIOD:?})"
    );
    wait_until("the reason to leave the Devices status", DEADLINE, || {
        ledger_entry(&gw, H100_GPUS[healthy_card].uuid)
            .filter(|e| e.get("unhealthyReason").is_none())
    });

    // Kubelet restart: sockets cleared, kubelet.sock recreated → every plugin serves and registers again.
    let registered_before = agent.registering_lines();
    assert!(
        registered_before >= 1,
        "the first registration pass is logged:\n{}",
        agent.log()
    );
    kubelet.restart();
    let restarted = Instant::now();
    wait_until(
        "re-registration after a kubelet restart",
        Duration::from_secs(5),
        || (kubelet.registered_resources() == want).then_some(()),
    );
    // Within a second, as the issue asks (about a quarter of one here: the supervisor looks
    // every 100 ms and stops the servers whose sockets are gone together).
    let took = restarted.elapsed();
    assert!(
        took <= Duration::from_secs(1),
        "re-registered after {took:?}"
    );
    eprintln!("re-registered {took:?} after the kubelet restart");
    assert!(kubelet.plugin_socket("nvidia.sliced.sock").exists());
    let again = kubelet.list_and_watch("nvidia.exclusive.sock");
    next_list_where(
        &again,
        DEADLINE,
        "the plugin answers after the restart",
        |l| l.len() == 8,
    );
    // The registrations above are new ones (the stand-in forgot the old at its restart), and
    // the agent logged a registration pass for the new kubelet.
    let after = agent.registering_lines();
    assert!(
        after > registered_before,
        "registration passes logged: {registered_before} before the kubelet restart, {after} after\n{}",
        agent.log()
    );

    // Exit removes our sockets.
    let mut agent = agent;
    agent.stop();
    assert!(!kubelet.plugin_socket("nvidia.exclusive.sock").exists());
}

#[test]
fn no_flags_remove_their_plugins() {
    let dir = tempfile::tempdir().unwrap();
    let gw = cluster(dir.path());
    let node = nvidia::hgx_h100_node(&dir.path().join("host"));
    let kubelet = Kubelet::start(&dir.path().join("kubelet"));
    let _agent = Agent::start(
        &node,
        &kubelet,
        &gw,
        dir.path(),
        &["--no-shared", "--no-sliced", "--no-partitioned"],
    );
    let want = ["device.gpustack.ai/nvidia.visibility", "nvidia.com/gpu"];
    wait_until("the remaining plugins to register", DEADLINE, || {
        (kubelet.registered_resources() == want).then_some(())
    });
    assert!(!kubelet.plugin_socket("nvidia.sliced.sock").exists());
}

#[test]
fn missing_node_name_is_one_line_and_exit_2() {
    let out = operator()
        .args(["device-manager", "serve"])
        .env_remove("KUBERNETES_NODE_NAME")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("KUBERNETES_NODE_NAME"), "{err}");
}

fn wait_registered(kubelet: &Kubelet, resource: &str) {
    wait_until(&format!("{resource} to register"), DEADLINE, || {
        kubelet
            .registered_resources()
            .iter()
            .any(|r| r == resource)
            .then_some(())
    });
}

/// What a container was answered, as the sliced tests compare it.
struct Answer {
    uid: String,
    reply: gpustack_proto::deviceplugin::v1beta1::ContainerAllocateResponse,
}

impl Answer {
    fn envs(&self) -> std::collections::BTreeMap<&str, &str> {
        self.reply
            .envs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    fn mounts(&self) -> Vec<(String, String, bool)> {
        self.reply
            .mounts
            .iter()
            .map(|m| (m.host_path.clone(), m.container_path.clone(), m.read_only))
            .collect()
    }

    fn nodes(&self) -> Vec<&str> {
        self.reply
            .devices
            .iter()
            .map(|d| d.host_path.as_str())
            .collect()
    }
}

/// Creates Pod `name` with `limits` and allocates token `id` on `socket` for it (retried until
/// the plugin has the card).
fn sliced_allocate(
    (gw, kubelet, dir): (&GatewayProcess, &Kubelet, &Path),
    name: &str,
    limits: &[(&str, &str)],
    socket: &str,
    id: &str,
) -> Answer {
    let uid = pod(gw, dir, name, limits);
    let mut reply = wait_until(&format!("a sliced Allocate of {id}"), DEADLINE, || {
        kubelet.allocate(socket, &[id.to_owned()]).ok()
    });
    Answer {
        uid,
        reply: reply.container_responses.remove(0),
    }
}

/// Waits for the ledger to hold `card` sliced, deletes Pod `name`, waits for the card to be
/// free again; answers the entry as it was charged.
fn charged_then_released(gw: &GatewayProcess, name: &str, card: &str) -> Value {
    let entry = wait_until("the ledger entry", DEADLINE, || {
        ledger_entry(gw, card).filter(|e| e["mode"] == 3)
    });
    gw.kubectl_ok(&["delete", "pod", name, "--wait=false"]);
    wait_until("the slice to be released", DEADLINE, || {
        ledger_entry(gw, card).filter(|e| e["mode"] == 0)
    });
    entry
}

#[test]
fn amd_sliced_allocation_gets_every_variable_mount_and_node() {
    let dir = tempfile::tempdir().unwrap();
    let gw = cluster(dir.path());
    let tree = gpustack_tests::sysfs::HostTree::new(dir.path().join("host"));
    gpustack_tests::machines::amd::seed_node(&tree);
    let kubelet = Kubelet::start(&dir.path().join("kubelet"));
    let _agent = Agent::start_on(tree.root(), "amd", &[], &kubelet, &gw, dir.path(), &[]);
    wait_registered(&kubelet, "amd.com/gpu.sliced");
    let card = "GPU-5c88007d760374f3";
    let got = sliced_allocate(
        (&gw, &kubelet, dir.path()),
        "vrocm",
        &[
            ("amd.com/gpu.sliced", "1"),
            ("amd.com/gpu.sliced.cores-percentage", "50"),
            ("amd.com/gpu.sliced.memory-mib", "4096"),
        ],
        "amd.sliced.sock",
        &format!("radeon-rx-7800-xt:{card}:0000"),
    );
    let want: std::collections::BTreeMap<&str, &str> = [
        ("AMD_VISIBLE_DEVICES", "none"),
        ("HSA_CU_MASK", "0:0-29"),
        ("LIBVROCM_LOG_LEVEL", "1"),
        ("ROCR_VISIBLE_DEVICES", card),
        ("VROCM_DEVICE_MEMORY_LIMIT_0", "4096"),
        ("VROCM_LEDGER_PATH", "/var/run/vrocm/ledger"),
    ]
    .into();
    assert_eq!(got.envs(), want);
    let uid = &got.uid;
    let lib = "/var/lib/gpustack/operator/lib/amd";
    let ro = |file: &str, at: &str| (format!("{lib}/{file}"), at.to_owned(), true);
    assert_eq!(
        got.mounts(),
        [
            ro("ld.so.preload", "/etc/ld.so.preload"),
            ro("libvrocm.so", "/usr/local/vrocm/libvrocm.so"),
            ro("rocm-monitor", "/usr/local/vrocm/rocm-monitor"),
            ro("rocm-cumask-check", "/usr/local/vrocm/rocm-cumask-check"),
            (
                format!("/var/lib/gpustack/operator/pods/{uid}/c-main/run/vrocm"),
                "/var/run/vrocm".to_owned(),
                false
            ),
        ]
    );
    assert_eq!(
        got.nodes(),
        ["/dev/kfd", "/dev/dri/card1", "/dev/dri/renderD128"]
    );
    assert_eq!(
        charged_then_released(&gw, "vrocm", card)["allocated"],
        D / 2
    );
}

#[test]
fn thead_sliced_allocation_gets_every_variable_mount_and_node() {
    use gpustack_tests::machines::thead;
    let dir = tempfile::tempdir().unwrap();
    let gw = cluster(dir.path());
    let node = thead::zw810e_node(&dir.path().join("host"));
    let kubelet = Kubelet::start(&dir.path().join("kubelet"));
    let fixture = [(thead::FIXTURE_ENV, node.hgml_fixture.as_path())];
    let _agent = Agent::start_on(
        &node.root,
        "thead",
        &fixture,
        &kubelet,
        &gw,
        dir.path(),
        &[],
    );
    wait_registered(&kubelet, "alibabacloud.com/ppu.sliced");
    // Card 0 has minor number 1 (the driver's probe order differs from HGML's).
    let card = thead::PPUS[0].uuid;
    let got = sliced_allocate(
        (&gw, &kubelet, dir.path()),
        "vppu",
        &[
            ("alibabacloud.com/ppu.sliced", "1"),
            ("alibabacloud.com/ppu.sliced.cores-percentage", "10"),
            ("alibabacloud.com/ppu.sliced.memory-percentage", "25"),
        ],
        "thead.sliced.sock",
        &format!("ppu-zw810e:{card}:0000"),
    );
    let want: std::collections::BTreeMap<&str, &str> = [
        ("HGGC_DEVICE_MEMORY_LIMIT_0", "24576"),
        ("HGGC_DEVICE_SM_LIMIT", "10"),
        ("HGGC_LEDGER_PATH", "/var/run/vppu/ledger"),
        ("LIBHGGC_LOG_LEVEL", "1"),
    ]
    .into();
    assert_eq!(got.envs(), want);
    let lib = "/var/lib/gpustack/operator/lib/thead";
    let work = format!("/var/lib/gpustack/operator/pods/{}/c-main", got.uid);
    let ro = |file: &str, at: &str| (format!("{lib}/{file}"), at.to_owned(), true);
    assert_eq!(
        got.mounts(),
        [
            ro("ld.so.preload", "/etc/ld.so.preload"),
            ro("hgml_dlsym_hook.so", "/usr/local/vppu/hgml_dlsym_hook.so"),
            ro("hggc_quota.so", "/usr/local/vppu/hggc_quota.so"),
            ro("ppu-monitor", "/usr/local/vppu/ppu-monitor"),
            (
                format!("{work}/run/vppu"),
                "/var/run/vppu".to_owned(),
                false
            ),
        ]
    );
    assert!(node.root.join(&work[1..]).join("run/vppu").is_dir());
    assert_eq!(
        got.nodes(),
        ["/dev/alixpu_ppu1", "/dev/alixpu", "/dev/alixpu_ctl"]
    );
    assert_eq!(charged_then_released(&gw, "vppu", card)["allocated"], D / 4);
}

/// The driver's MIG instances as the NVML stand-in keeps them (beside its fixture).
fn mig_instances(fixture: &Path) -> Vec<Value> {
    let mut name = fixture.as_os_str().to_owned();
    name.push(".instances.json");
    std::fs::read(PathBuf::from(name))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v["gpuInstances"].as_array().cloned())
        .unwrap_or_default()
}

#[test]
fn partitioned_allocation_makes_a_mig_instance_until_the_pod_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let gw = cluster(dir.path());
    let node = nvidia::a100_mig_node(&dir.path().join("host"));
    let kubelet = Kubelet::start(&dir.path().join("kubelet"));
    let agent = Agent::start(&node, &kubelet, &gw, dir.path(), &[]);
    wait_until("the partitioned plugin to register", DEADLINE, || {
        kubelet
            .registered_resources()
            .contains(&"nvidia.com/gpu.partitioned".to_owned())
            .then_some(())
    });
    let card = nvidia::A100_UUID;
    let d = wait_until("the Devices spec", DEADLINE, || {
        devices(&gw).filter(|d| d["spec"]["groups"][0]["accelerators"][0]["id"] == card)
    });
    let group = d["spec"]["groups"][0]["id"].as_str().unwrap().to_owned();
    // Seven partition tokens (the most instances of any profile), no NUMA topology.
    let parts = kubelet.list_and_watch("nvidia.partitioned.sock");
    let list = next_list_where(&parts, DEADLINE, "seven partition tokens", |l| l.len() == 7);
    assert!(list.iter().all(|t| t.topology.is_none()), "{list:?}");
    let token = |n: u32| format!("{group}:{card}:{n:04}");

    let uid = pod(
        &gw,
        dir.path(),
        "mig",
        &[
            ("nvidia.com/gpu.partitioned", "1"),
            ("nvidia.com/gpu.partitioned.mig-1g.10gb", "1"),
        ],
    );
    let reply = kubelet
        .allocate("nvidia.partitioned.sock", &[token(2)])
        .expect("partitioned Allocate");
    let envs = &reply.container_responses[0].envs;
    assert_eq!(envs.len(), 1, "{envs:?}");
    let mig = envs["NVIDIA_VISIBLE_DEVICES"].clone();
    assert!(mig.starts_with("MIG-"), "{mig}");

    // The driver holds one 1g GPU instance at the first slot with one compute instance.
    let held = mig_instances(&node.nvml_fixture);
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0]["device"], card);
    assert_eq!(
        (held[0]["start"].as_u64(), held[0]["size"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(held[0]["computeInstances"], serde_json::json!([0]));

    // The annotation names the partition, its profile and slot; the ledger charges it.
    let annotated = gw.kubectl_ok(&[
        "get",
        "pod",
        "mig",
        "-o",
        "jsonpath={.metadata.annotations.device\\.gpustack\\.ai/accelerator\\.allocated}",
    ]);
    let annotated: Value = serde_json::from_str(&annotated).unwrap();
    let charge = &annotated["main"]["devices"]["groups"][0]["accelerators"][0];
    assert_eq!(charge["mode"], 4);
    assert_eq!(charge["allocatedPhysicalProfile"], "1g.10gb");
    assert_eq!(charge["allocatedPhysicalID"], mig.as_str());
    assert_eq!(
        charge["allocatedPhysicalPlacements"],
        serde_json::json!([{"start": 0, "length": 1}])
    );
    let entry = wait_until("the ledger to charge the partition", DEADLINE, || {
        ledger_entry(&gw, card).filter(|e| e["mode"] == 4)
    });
    assert_eq!(entry["allocated"], D / 7);
    assert_eq!(
        entry["allocatedProfiles"],
        serde_json::json!([{"name": "1g.10gb", "count": 1}])
    );
    let remaining = |e: &Value, name: &str| {
        e["remainingProfiles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["count"].clone())
    };
    assert_eq!(remaining(&entry, "1g.10gb"), Some(6.into()));
    assert_eq!(remaining(&entry, "7g.80gb"), Some(0.into()));
    assert!(entry.get("allocatedPhysicalID").is_none(), "{entry}");
    let work = node
        .root
        .join(format!("var/lib/gpustack/operator/pods/{uid}/c-main"));
    assert!(work.join("partition.json").is_file());

    // The snapshot lists the partition with its MIG device's memory (the 1g.10gb profile's
    // 9,728 MiB) and the card's compute it is charged (1 of 7 slices).
    let partitions = wait_until("the partition in the snapshot", DEADLINE, || {
        let snap: Value = serde_json::from_str(&agent.get("/monitor/snapshot")?).ok()?;
        snap["slices"]["partitions"]
            .as_array()
            .filter(|p| !p.is_empty())
            .cloned()
    });
    assert_eq!(
        partitions,
        [serde_json::json!({
            "manufacturer": "nvidia",
            "podUID": uid.as_str(),
            "container": "main",
            "deviceID": card,
            "id": mig.as_str(),
            "profile": "1g.10gb",
            "memoryTotalMiB": 9728,
            "memoryUsedMiB": nvidia::A100_MIG_MEMORY_USED_MIB,
            "coresPercent": 14,
        })]
    );

    // While the partition is held, a real Prometheus scraping /metrics sees the card's figures
    // labelled with the partition's namespace, Pod, container and mode.
    let prom = prometheus::Prometheus::start(dir.path(), &format!("127.0.0.1:{}", agent.port));
    let (labels, value) = pod_series(&prom, "mig");
    assert_eq!(
        labels,
        pod_labels(card, "0", "mig", "partitioned"),
        "the partitioned pod's series"
    );
    let card_value = wait_until("the card's own series", DEADLINE, || {
        prom.query(&format!(
            r#"gpustack_accelerator_memory_total_mib{{id="{card}"}}"#
        ))
        .filter(|r| r.len() == 1)
    })[0]["value"][1]
        .clone();
    assert_eq!(value, card_value.as_str().unwrap(), "the card's memory");

    // The whole card does not fit beside it: refused, and nothing is made.
    pod(
        &gw,
        dir.path(),
        "whole",
        &[
            ("nvidia.com/gpu.partitioned", "1"),
            ("nvidia.com/gpu.partitioned.mig-7g.80gb", "1"),
        ],
    );
    let refused = kubelet
        .allocate("nvidia.partitioned.sock", &[token(0)])
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused
            .message()
            .contains("no healthy card has a free slot"),
        "{}",
        refused.message()
    );
    assert_eq!(mig_instances(&node.nvml_fixture).len(), 1);

    // Deleting the Pod releases the charge, destroys the instance and its work directory.
    gw.kubectl_ok(&["delete", "pod", "mig", "--wait=false"]);
    wait_until("the partition to be released", DEADLINE, || {
        ledger_entry(&gw, card).filter(|e| e["mode"] == 0 && e["remaining"] == D)
    });
    wait_until("the driver's instance to be destroyed", DEADLINE, || {
        mig_instances(&node.nvml_fixture).is_empty().then_some(())
    });
    wait_until("the work directory to be reclaimed", DEADLINE, || {
        (!work.exists()).then_some(())
    });

    // Now the whole card fits.
    let whole = kubelet
        .allocate("nvidia.partitioned.sock", &[token(0)])
        .expect("the 7g partition once the card is free");
    assert!(whole.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"].starts_with("MIG-"));
    let held = mig_instances(&node.nvml_fixture);
    assert_eq!(
        (held[0]["start"].as_u64(), held[0]["size"].as_u64()),
        (Some(0), Some(8))
    );
}

/// `gpustack_device_manager_monitor_passes_total` from the agent's `/metrics`.
fn monitor_passes(agent: &Agent) -> Option<u64> {
    agent.get("/metrics")?.lines().find_map(|l| {
        l.strip_prefix("gpustack_device_manager_monitor_passes_total ")?
            .trim()
            .parse()
            .ok()
    })
}

fn node_labels(gw: &GatewayProcess) -> Option<Value> {
    json(gw, &["get", "node", NODE, "-o", "json"]).map(|n| n["metadata"]["labels"].clone())
}

#[test]
fn labels_move_from_the_node_to_nfd_once_served_and_kubelet_identification_can_be_off() {
    let dir = tempfile::tempdir().unwrap();
    let gw = cluster(dir.path());
    gw.kubectl_ok(&["create", "namespace", "gpustack-system"]);
    // A label of someone else's on the Node, which no cleanup may touch.
    gw.kubectl_ok(&["label", "node", NODE, "team=infra"]);
    let node = nvidia::hgx_h100_node(&dir.path().join("host"));
    let kubelet = Kubelet::start(&dir.path().join("kubelet"));
    let fixture = [
        (nvidia::FIXTURE_ENV, node.nvml_fixture.as_path()),
        (
            "GPUSTACK_DEVICE_PLUGIN_IDENTIFY_BY_KUBELET",
            Path::new("false"),
        ),
    ];
    let agent = Agent::start_on(
        &node.root,
        "nvidia",
        &fixture,
        &kubelet,
        &gw,
        dir.path(),
        &[],
    );
    let count_key = format!("acceleratable.feature.gpustack.ai/nvidia-{GROUP}.count");
    // Without NFD the labels go on the Node itself.
    wait_until("the labels on the Node", DEADLINE, || {
        node_labels(&gw).filter(|l| l[&count_key] == "7")
    });

    // NFD installed: the labels go to its NodeFeature, and the ones on the Node are removed.
    let crd = dir.path().join("nfd.yaml");
    std::fs::write(&crd, gpustack_tests::inventory::NODE_FEATURE_CRD).unwrap();
    gw.kubectl_ok(&["apply", "-f", &crd.display().to_string()]);
    let name = format!("{NODE}-gpustack-device-manager");
    let nf = wait_until("the NodeFeature", DEADLINE, || {
        json(
            &gw,
            &[
                "get",
                "nodefeature",
                &name,
                "-n",
                "gpustack-system",
                "-o",
                "json",
            ],
        )
    });
    let labels = &nf["spec"]["labels"];
    assert_eq!(labels["feature.gpustack.ai/acceleratable"], "true", "{nf}");
    assert_eq!(labels[&count_key], "7");
    assert_eq!(
        nf["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"],
        NODE
    );
    assert_eq!(nf["metadata"]["ownerReferences"][0]["kind"], "Node");
    let left = wait_until("the Node's own labels to be removed", DEADLINE, || {
        node_labels(&gw).filter(|l| {
            l.as_object().is_some_and(|m| {
                !m.keys()
                    .any(|k| k.contains("feature.gpustack.ai") || k.contains("acceleratable"))
            })
        })
    });
    assert_eq!(left["team"], "infra", "{left}");
    wait_until("the Devices spec", DEADLINE, || devices(&gw));

    // What NFD's master then writes on the Node (its own field manager) stays: the cleanup is
    // not repeated against it on later passes.
    gw.kubectl_ok(&[
        "label",
        "node",
        NODE,
        "--field-manager=nfd-master",
        "feature.gpustack.ai/acceleratable=true",
        &format!("{count_key}=7"),
    ]);
    let now = wait_until("the pass counter", DEADLINE, || monitor_passes(&agent));
    wait_until("two more passes", DEADLINE, || {
        monitor_passes(&agent).filter(|c| *c >= now + 2)
    });
    let kept = node_labels(&gw).unwrap();
    assert_eq!(kept["feature.gpustack.ai/acceleratable"], "true", "{kept}");
    assert_eq!(kept[&count_key], "7", "{kept}");

    // With kubelet identification off, the pod-resources answer is not asked: the oldest
    // pending Pod gets the grant even though the kubelet assigned the device to another.
    wait_until("the exclusive plugin to register", DEADLINE, || {
        kubelet
            .registered_resources()
            .contains(&"nvidia.com/gpu".to_owned())
            .then_some(())
    });
    pod(&gw, dir.path(), "a-first", &[("nvidia.com/gpu", "1")]);
    pod(&gw, dir.path(), "b-assigned", &[("nvidia.com/gpu", "1")]);
    kubelet.assign(
        "default",
        "b-assigned",
        "main",
        "nvidia.com/gpu",
        &[token(1, 0)],
    );
    kubelet
        .allocate("nvidia.exclusive.sock", &[token(1, 0)])
        .expect("exclusive Allocate");
    let annotation = |pod: &str| {
        gw.kubectl_ok(&[
            "get",
            "pod",
            pod,
            "-o",
            "jsonpath={.metadata.annotations.device\\.gpustack\\.ai/accelerator\\.allocated}",
        ])
    };
    assert!(annotation("a-first").contains(H100_GPUS[1].uuid));
    assert_eq!(annotation("b-assigned"), "");
}
