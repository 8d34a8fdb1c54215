//! Least privilege, shown: each component run with a token of the ServiceAccount the chart gives
//! it, against an embedded cluster where the chart is installed (so exactly the chart's roles
//! apply), does its whole job, and nothing it asks for is refused (no 403 in its log).

use std::{path::Path, time::Duration};

use gpustack_tests::{
    embedded::{GatewayProcess, free_port, kube_client, with_token},
    helm::Helm,
    inventory::{H100, Machine, publish},
    wait::poll_until,
    worker::WorkerProcess,
};
use serde_json::json;

const NS: &str = "gpustack-system";
const WAIT: Duration = Duration::from_secs(60);

/// An embedded cluster with the chart installed (defaults) as release `gpustack-operator`.
fn cluster_with_chart(dir: &Path) -> GatewayProcess {
    let gw = GatewayProcess::start(&dir.join("data"), "least");
    Helm::new(&gw.kubeconfig(), NS)
        .install("gpustack-operator", &json!({}))
        .expect("installing the chart");
    gw
}

/// A kubeconfig at `dir/<account>.kubeconfig` presenting a token of the chart's
/// ServiceAccount `account`.
fn kubeconfig_of(gw: &GatewayProcess, dir: &Path, account: &str) -> std::path::PathBuf {
    let token = gw.kubectl_ok(&["create", "token", account, "-n", NS, "--duration=2h"]);
    let path = dir.join(format!("{account}.kubeconfig"));
    with_token(&gw.kubeconfig(), token.trim(), &path);
    path
}

/// The lines of `log` that say the cluster refused the component something (a 403's reason is
/// `Forbidden`, its message "... is forbidden: ..."; a bare "403" could be a timestamp's).
fn refusals(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.to_ascii_lowercase().contains("forbidden") || l.contains("code: 403"))
        .collect()
}

/// `kubectl get KIND -o name` as the admin, once it lists something.
fn wait_for_some(gw: &GatewayProcess, worker: &WorkerProcess, args: &[&str]) -> Vec<String> {
    let mut last = String::new();
    let found = poll_until(WAIT, || {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "name"]);
        let out = gw.kubectl(&all);
        last = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        (out.status.success() && !names.is_empty()).then_some(names)
    });
    found.unwrap_or_else(|| {
        panic!(
            "nothing listed by {args:?}; last: {last}\nworker log:\n{}",
            worker.log()
        )
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn the_worker_does_its_job_under_its_chart_role() {
    let dir = tempfile::tempdir().unwrap();
    let gw = cluster_with_chart(dir.path());
    let kubeconfig = kubeconfig_of(&gw, dir.path(), "gpustack-operator-worker");
    let worker = WorkerProcess::start_as(
        &gw,
        &kubeconfig,
        &dir.path().join("worker"),
        free_port(),
        // As the chart runs it: the chart installs the applications, the worker none.
        &["--disable-applications=*"],
        &[("KUBERNETES_POD_NAMESPACE", NS)],
    );

    // Install: its APIServices and webhook configurations, its Settings behind the aggregator
    // (delegated authentication and authorization answered for it).
    let apiservice = gw.kubectl_ok(&["get", "apiservice", "v1.worker.gpustack.ai"]);
    assert!(apiservice.contains("True"), "{apiservice}");
    let settings = gw.kubectl_ok(&["get", "settings", "-n", NS]);
    assert!(settings.contains("workload-fit-affinity"), "{settings}");

    // The controllers: a GPU node's inventory becomes flavors, queues and an InstanceType, and
    // every namespace gets its LocalQueues.
    publish(
        &kube_client(&gw.kubeconfig()).await,
        &Machine::gpu("gpu-0", H100, 8),
    )
    .await
    .expect("publishing the node");
    wait_for_some(&gw, &worker, &["resourceflavors"]);
    wait_for_some(&gw, &worker, &["clusterqueues"]);
    wait_for_some(&gw, &worker, &["instancetypes.worker.gpustack.ai"]);
    wait_for_some(&gw, &worker, &["localqueues", "-n", "default"]);
    let node = gw.kubectl_ok(&["get", "node", "gpu-0", "-o", "json"]);
    assert!(node.contains("gpustack.ai/managed"), "the node is labelled");

    // The webhooks: a Pod's admission reaches it and is answered.
    gw.kubectl_ok(&[
        "run",
        "probe",
        "-n",
        "default",
        "--image=busybox",
        "--restart=Never",
    ]);

    let log = worker.log();
    assert!(
        refusals(&log).is_empty(),
        "the worker was refused under its chart role:\n{}",
        refusals(&log).join("\n")
    );
}

/// A process of the binary with `args`, its log in `log`; killed on drop.
struct Component {
    child: std::process::Child,
    log: std::path::PathBuf,
}

impl Component {
    fn start(args: &[String], env: &[(&str, &Path)], log: &Path) -> Self {
        let mut cmd = gpustack_tests::operator();
        cmd.args(args)
            .env_remove("KUBECONFIG")
            .env_remove("LD_LIBRARY_PATH")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(log).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        Component {
            child: cmd.spawn().expect("starting the component"),
            log: log.to_owned(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Component {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_device_manager_does_its_job_under_its_chart_role() {
    use gpustack_tests::{
        embedded::DEADLINE,
        kubelet::Kubelet,
        machines::nvidia::{self, H100_GPUS},
        wait::wait_until,
    };
    const NODE: &str = "gpu-node-1";
    let dir = tempfile::tempdir().unwrap();
    let gw = cluster_with_chart(dir.path());
    let node_file = dir.path().join("node.yaml");
    std::fs::write(
        &node_file,
        format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {NODE}\n"),
    )
    .unwrap();
    gw.kubectl_ok(&["apply", "-f", node_file.to_str().unwrap()]);
    let kubeconfig = kubeconfig_of(&gw, dir.path(), "gpustack-operator-device-manager");
    let node = nvidia::hgx_h100_node(&dir.path().join("host"));
    let kubelet = Kubelet::start(&dir.path().join("kubelet"));
    let agent = Component::start(
        &[
            "device-manager".into(),
            "serve".into(),
            "--manufacturer=nvidia".into(),
            "--monitor-period=1s".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()),
            format!("--kube-socket={}", kubelet.kube_socket().display()),
            format!("--kubeconfig={}", kubeconfig.display()),
        ],
        &[
            ("GPUSTACK_SYSTEM_ROOT", node.root.as_path()),
            (nvidia::FIXTURE_ENV, node.nvml_fixture.as_path()),
            ("KUBERNETES_NODE_NAME", Path::new(NODE)),
            ("KUBERNETES_POD_NAMESPACE", Path::new(NS)),
        ],
        &dir.path().join("dm.log"),
    );

    // Its node's Devices, the node's labels, its plugins registered with the kubelet.
    wait_until("the node's Devices with its eight cards", DEADLINE, || {
        let out = gw.kubectl(&["get", "devices", NODE, "-o", "json"]);
        let d: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let cards = d["spec"]["groups"][0]["accelerators"].as_array()?.len();
        (cards == H100_GPUS.len()).then_some(())
    });
    wait_until("the plugins to register", DEADLINE, || {
        kubelet
            .registered_resources()
            .contains(&"nvidia.com/gpu".to_owned())
            .then_some(())
    });
    // An allocation: the Pod is read and annotated with its grant; the ledger charges it.
    let pod = dir.path().join("pod.yaml");
    std::fs::write(
        &pod,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: job\n  namespace: default\nspec:\n  nodeName: {NODE}\n  containers:\n    - name: main\n      image: cuda\n      resources:\n        limits:\n          nvidia.com/gpu: \"1\"\n"
        ),
    )
    .unwrap();
    gw.kubectl_ok(&["apply", "-f", pod.to_str().unwrap()]);
    let id = format!("h100-80gb-hbm3:{}:0000", H100_GPUS[4].uuid);
    kubelet.assign(
        "default",
        "job",
        "main",
        "nvidia.com/gpu",
        std::slice::from_ref(&id),
    );
    kubelet
        .allocate("nvidia.exclusive.sock", &[id])
        .unwrap_or_else(|e| panic!("Allocate: {e}\n{}", agent.log()));
    wait_until("the Pod's grant annotation", DEADLINE, || {
        let out = gw.kubectl(&[
            "get",
            "pod",
            "job",
            "-o",
            "jsonpath={.metadata.annotations}",
        ]);
        String::from_utf8_lossy(&out.stdout)
            .contains(H100_GPUS[4].uuid)
            .then_some(())
    });

    let log = agent.log();
    assert!(
        refusals(&log).is_empty(),
        "the device manager was refused under its chart role:\n{}",
        refusals(&log).join("\n")
    );
}

#[test]
fn the_model_manager_does_its_job_under_its_chart_role() {
    use gpustack_tests::{embedded::DEADLINE, wait::wait_until};
    const NODE: &str = "node-a";
    let dir = tempfile::tempdir().unwrap();
    let gw = cluster_with_chart(dir.path());
    let store = dir.path().join("store.yaml");
    std::fs::write(
        &store,
        format!(
            "apiVersion: worker.gpustack.ai/v1alpha1\nkind: NodeModelStore\nmetadata: {{name: {NODE}}}\nspec: {{}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: team-a}}\n---\napiVersion: worker.gpustack.ai/v1alpha1\nkind: ModelArtifact\nmetadata: {{name: llm, namespace: team-a}}\nspec:\n  source: {{huggingFace: {{repository: org/model}}}}\n"
        ),
    )
    .unwrap();
    gw.kubectl_ok(&["apply", "-f", store.to_str().unwrap()]);
    let kubeconfig = kubeconfig_of(&gw, dir.path(), "gpustack-operator-model-manager");
    let work = dir.path().join("mm");
    std::fs::create_dir_all(work.join("kubelet")).unwrap();
    let plugin = Component::start(
        &[
            "model-manager".into(),
            format!("--node-name={NODE}"),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--kubelet-dir={}", work.join("kubelet").display()),
            format!("--cache-root={}", work.join("cache").display()),
            format!("--csi-socket={}", work.join("csi.sock").display()),
            format!("--secure-port={}", free_port()),
        ],
        &[("KUBERNETES_POD_NAMESPACE", Path::new(NS))],
        &dir.path().join("mm.log"),
    );
    // Its node's store: the spec applied and reported in the status.
    wait_until("the plugin to report its store's status", DEADLINE, || {
        let out = gw.kubectl(&["get", "nms", NODE, "-o", "json"]);
        let nms: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let generation = nms["metadata"]["generation"].as_i64()?;
        (nms["status"]["observedGeneration"].as_i64() == Some(generation)).then_some(())
    });
    let log = plugin.log();
    assert!(
        refusals(&log).is_empty(),
        "the model manager was refused under its chart role:\n{}",
        refusals(&log).join("\n")
    );
}
