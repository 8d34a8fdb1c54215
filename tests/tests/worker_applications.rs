//! Image mode, end to end: the real `worker` against an embedded cluster keeps the node agents
//! installed itself. It adds a manufacturer's device-manager DaemonSet when NFD-labelled nodes
//! of that vendor appear, repairs a deleted or edited one within a resync, removes it when the
//! vendor's nodes are gone or the application is disabled, never touches an object a Helm
//! release owns, and reports the upstream applications it lacks (Kueue, NFD, the CSI drivers)
//! in `/readyz?verbose` and an Event.
//!
//! Waits are on conditions: the objects themselves, or the worker's pass counter on `/metrics`
//! (`gpustack_worker_applications_passes_total{role="holder"}`), never on fixed sleeps.

use std::path::Path;

use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess, write_file},
    wait::wait_until,
    worker::WorkerProcess,
};
use serde_json::{Value, json};

const NS: &str = "gpustack-system";
const NVIDIA_DS: &str = "gpustack-operator-device-manager-nvidia";
const AMD_DS: &str = "gpustack-operator-device-manager-amd";
const MM_DS: &str = "gpustack-operator-model-manager";
/// The device manager's ServiceAccount, ClusterRole and binding, as `kubectl get` arguments.
const DEVICE_MANAGER_RBAC: [&[&str]; 3] = [
    &[
        "serviceaccount",
        "-n",
        NS,
        "gpustack-operator-device-manager",
    ],
    &["clusterrole", "gpustack-operator-device-manager"],
    &["clusterrolebinding", "gpustack-operator-device-manager"],
];

fn start_worker(gw: &GatewayProcess, dir: &Path, extra: &[&str]) -> WorkerProcess {
    start_worker_every(gw, dir, "1s", extra)
}

fn start_worker_every(
    gw: &GatewayProcess,
    dir: &Path,
    resync: &str,
    extra: &[&str],
) -> WorkerProcess {
    let resync = format!("--applications-resync-period={resync}");
    let mut args = vec![
        resync.as_str(),
        "--manufacturer=nvidia,amd",
        "--kube-leader-election=false",
    ];
    args.extend_from_slice(extra);
    WorkerProcess::start(gw, dir, &args, &[])
}

/// The holder's passes so far, from the worker's `/metrics`.
fn passes(worker: &WorkerProcess) -> u64 {
    let text = worker.kubectl_ok(&["get", "--raw", "/metrics"]);
    text.lines()
        .find(|l| l.starts_with("gpustack_worker_applications_passes_total{role=\"holder\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Waits until the holder has made `n` more passes than now.
fn wait_passes(worker: &WorkerProcess, n: u64) {
    let from = passes(worker);
    wait_until(&format!("{n} more passes"), DEADLINE, || {
        (passes(worker) >= from + n).then_some(())
    });
}

fn get(gw: &GatewayProcess, args: &[&str]) -> Option<Value> {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    let out = gw.kubectl(&all);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("kubectl JSON"))
}

fn daemonset(gw: &GatewayProcess, name: &str) -> Option<Value> {
    get(gw, &["daemonset", "-n", NS, name])
}

fn wait_present(gw: &GatewayProcess, what: &[&str]) -> Value {
    wait_until(&format!("{what:?} to be present"), DEADLINE, || {
        get(gw, what)
    })
}

fn wait_gone(gw: &GatewayProcess, what: &[&str]) {
    wait_until(&format!("{what:?} to be gone"), DEADLINE, || {
        get(gw, what).is_none().then_some(())
    });
}

fn node(gw: &GatewayProcess, dir: &Path, name: &str, vendor: &str) {
    let body = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            format!("feature.node.kubernetes.io/pci-{vendor}.present"): "true",
        }},
    });
    let path = write_file(dir, &format!("{name}.json"), &body.to_string());
    gw.kubectl_ok(&["create", "-f", &path]);
}

fn main_image(ds: &Value) -> String {
    ds["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A DaemonSet as a Helm release would have left it.
fn helm_owned_daemonset(gw: &GatewayProcess, dir: &Path) {
    let labels = json!({"app": "amd-by-helm"});
    let body = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {
            "name": AMD_DS, "namespace": NS,
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"meta.helm.sh/release-name": "gpustack-operator", "meta.helm.sh/release-namespace": NS},
        },
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "example.org/helm-owned:1"}]},
            },
        },
    });
    let path = write_file(dir, "helm-owned.json", &body.to_string());
    gw.kubectl_ok(&["create", "-f", &path]);
}

#[test]
fn the_worker_keeps_the_node_agents_installed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = GatewayProcess::start(&dir.path().join("data"), "apps");
    gw.kubectl_ok(&["create", "namespace", NS]);
    helm_owned_daemonset(&gw, dir.path());
    let helm_before = daemonset(&gw, AMD_DS).expect("the Helm-owned DaemonSet");

    let worker = start_worker(&gw, &dir.path().join("w1"), &[]);

    // The model manager goes in at once, with its CSIDriver and RBAC, on the worker's image
    // (no Pod of its own here: the crate version's).
    let mm = wait_present(&gw, &["daemonset", "-n", NS, MM_DS]);
    let image = format!("gpustack/gpustack-operator:{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(main_image(&mm), image);
    wait_present(&gw, &["csidriver", "model.csi.gpustack.ai"]);
    wait_present(
        &gw,
        &["clusterrolebinding", "gpustack-operator-model-manager"],
    );
    // No vendor's nodes yet: no device manager. And a steady cluster sees no writes.
    wait_passes(&worker, 2);
    let mm_version = daemonset(&gw, MM_DS).unwrap()["metadata"]["resourceVersion"].clone();
    wait_passes(&worker, 2);
    assert_eq!(
        daemonset(&gw, MM_DS).unwrap()["metadata"]["resourceVersion"],
        mm_version,
        "a pass with nothing to repair wrote the model manager's DaemonSet"
    );
    assert!(daemonset(&gw, NVIDIA_DS).is_none());
    assert!(
        get(
            &gw,
            &[
                "serviceaccount",
                "-n",
                NS,
                "gpustack-operator-device-manager"
            ]
        )
        .is_none()
    );

    // NVIDIA nodes appear: its DaemonSet and the device manager's RBAC follow.
    node(&gw, dir.path(), "gpu-1", "10de");
    node(&gw, dir.path(), "gpu-2", "10de");
    let ds = wait_present(&gw, &["daemonset", "-n", NS, NVIDIA_DS]);
    assert_eq!(main_image(&ds), image);
    assert_eq!(
        ds["spec"]["template"]["spec"]["nodeSelector"]["feature.node.kubernetes.io/pci-10de.present"],
        "true"
    );
    for what in DEVICE_MANAGER_RBAC {
        wait_present(&gw, what);
    }

    // Deleted: back within a resync.
    let uid = ds["metadata"]["uid"].clone();
    gw.kubectl_ok(&["delete", "daemonset", "-n", NS, NVIDIA_DS]);
    wait_until("the deleted DaemonSet to be back", DEADLINE, || {
        daemonset(&gw, NVIDIA_DS).filter(|d| d["metadata"]["uid"] != uid)
    });
    // Edited: put back too.
    gw.kubectl_ok(&[
        "patch",
        "daemonset",
        "-n",
        NS,
        NVIDIA_DS,
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"example.org/edited:1"}]"#,
    ]);
    wait_until("the edited DaemonSet to be repaired", DEADLINE, || {
        daemonset(&gw, NVIDIA_DS).filter(|d| main_image(d) == image)
    });

    // An AMD node appears, but AMD's DaemonSet belongs to a Helm release: never patched,
    // never deleted, over several passes.
    node(&gw, dir.path(), "gpu-3", "1002");
    wait_passes(&worker, 3);
    let helm_after = daemonset(&gw, AMD_DS).expect("the Helm-owned DaemonSet stays");
    assert_eq!(
        helm_after["metadata"]["resourceVersion"], helm_before["metadata"]["resourceVersion"],
        "the Helm-owned DaemonSet was written"
    );
    assert_eq!(main_image(&helm_after), "example.org/helm-owned:1");
    assert!(
        helm_after["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|f| f["manager"] != "gpustack-worker-applications"),
        "{helm_after}"
    );

    // The upstream applications this cluster lacks are named, with what installs them, in
    // /readyz's detail (still ready: the worker carries on) and in an Event.
    let detail = worker.kubectl_ok(&["get", "--raw", "/readyz?verbose"]);
    for want in [
        "[+]install ok",
        "[!]applications: kueue is enabled but not installed",
        "helm install kueue oci://registry.k8s.io/kueue/charts/kueue --version 0.18.10",
        "[!]applications: node-feature-discovery is enabled but not installed (CustomResourceDefinition nodefeatures.nfd.k8s-sigs.io not found)",
        "csi-driver-nfs is enabled",
        "csi-driver-s3 is enabled",
        "readyz check passed",
    ] {
        assert!(detail.contains(want), "{want:?} in\n{detail}");
    }
    assert_eq!(worker.kubectl_ok(&["get", "--raw", "/readyz"]), "ok");
    wait_until("the missing applications' events", DEADLINE, || {
        let events = get(&gw, &["events", "-n", NS])?;
        let items = events["items"].as_array()?;
        let says = |reason: &str, what: &str| {
            items.iter().any(|e| {
                e["reason"] == reason
                    && e["type"] == "Warning"
                    && e["involvedObject"]["kind"] == "Lease"
                    && e["involvedObject"]["name"] == "applications.worker.gpustack.ai"
                    && e["message"].as_str().is_some_and(|m| m.contains(what))
            })
        };
        (says(
            "KueueMissing",
            "helm install kueue oci://registry.k8s.io/kueue/charts/kueue",
        ) && says(
            "NodeFeatureDiscoveryMissing",
            "node-feature-discovery is enabled but not installed",
        ))
        .then_some(())
    });

    // NFD's kind installed: no longer named missing (the worker reads only the CRD's metadata).
    let crd = dir.path().join("nodefeature-crd.yaml");
    std::fs::write(&crd, gpustack_tests::inventory::NODE_FEATURE_CRD).unwrap();
    gw.kubectl_ok(&["apply", "-f", crd.to_str().unwrap()]);
    wait_until("NFD to be found installed", DEADLINE, || {
        let detail = worker.kubectl_ok(&["get", "--raw", "/readyz?verbose"]);
        (!detail.contains("node-feature-discovery is enabled but not installed")
            && detail.contains("kueue is enabled but not installed"))
        .then_some(())
    });

    // The NVIDIA nodes go: so does its DaemonSet; a new one brings it back.
    gw.kubectl_ok(&["delete", "node", "gpu-1", "gpu-2"]);
    wait_gone(&gw, &["daemonset", "-n", NS, NVIDIA_DS]);
    node(&gw, dir.path(), "gpu-4", "10de");
    wait_present(&gw, &["daemonset", "-n", NS, NVIDIA_DS]);

    // Restarted with the device manager disabled: its objects go, the model manager's stay,
    // Helm's still untouched.
    worker.stop();
    let worker = start_worker(
        &gw,
        &dir.path().join("w2"),
        &["--disable-applications=device-manager"],
    );
    wait_gone(&gw, &["daemonset", "-n", NS, NVIDIA_DS]);
    for what in DEVICE_MANAGER_RBAC {
        wait_gone(&gw, what);
    }
    wait_passes(&worker, 2);
    assert!(daemonset(&gw, MM_DS).is_some());
    let helm_last = daemonset(&gw, AMD_DS).expect("the Helm-owned DaemonSet stays");
    assert_eq!(
        helm_last["metadata"]["resourceVersion"],
        helm_before["metadata"]["resourceVersion"]
    );
    // The device manager is no longer named among what is missing or kept.
    let detail = worker.kubectl_ok(&["get", "--raw", "/readyz?verbose"]);
    assert!(detail.contains("kueue is enabled"), "{detail}");
}

#[test]
fn with_every_application_disabled_the_worker_installs_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = GatewayProcess::start(&dir.path().join("data"), "apps-off");
    gw.kubectl_ok(&["create", "namespace", NS]);
    node(&gw, dir.path(), "gpu-1", "10de");
    let worker = start_worker(&gw, &dir.path().join("w"), &["--disable-applications=*"]);
    // The worker says so at start; with nothing to keep it makes no pass at all.
    wait_until("the worker to say it installs nothing", DEADLINE, || {
        worker
            .log()
            .contains("the worker installs no applications")
            .then_some(())
    });
    assert_eq!(passes(&worker), 0);
    let ds = get(&gw, &["daemonsets", "-n", NS]).unwrap();
    assert_eq!(ds["items"], json!([]));
    let detail = worker.kubectl_ok(&["get", "--raw", "/readyz?verbose"]);
    assert!(detail.contains("[+]applications ok"), "{detail}");
}

#[test]
fn a_vendors_first_node_is_served_without_waiting_for_the_resync() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = GatewayProcess::start(&dir.path().join("data"), "apps-watch");
    gw.kubectl_ok(&["create", "namespace", NS]);
    // An hour between passes: only the node watch can bring the DaemonSet in time.
    let worker = start_worker_every(&gw, &dir.path().join("w"), "1h", &[]);
    wait_present(&gw, &["daemonset", "-n", NS, MM_DS]);
    node(&gw, dir.path(), "gpu-1", "10de");
    wait_present(&gw, &["daemonset", "-n", NS, NVIDIA_DS]);
    gw.kubectl_ok(&["delete", "node", "gpu-1"]);
    wait_gone(&gw, &["daemonset", "-n", NS, NVIDIA_DS]);
    node(&gw, dir.path(), "gpu-2", "1002");
    wait_present(&gw, &["daemonset", "-n", NS, AMD_DS]);
    assert!(passes(&worker) >= 3, "passes were made");
}
