//! The Helm chart `deploy/chart/gpustack-operator` through Helm's own engine (PyPI's
//! `helm-sdkpy`) against embedded clusters: lint, install with defaults (every object accepted
//! and as specified), upgrade with changed values, uninstall (nothing left but the CRDs), bad
//! values refused with their path and nothing installed; and the chart's tables kept in step
//! with the code (manufacturers, applications, version, the values schema, the rendered
//! manifests under `deploy/manifests/`).
//!
//! To regenerate `deploy/manifests/` after changing the chart:
//! `GPUSTACK_UPDATE_MANIFESTS=1 cargo test -p gpustack-tests --test chart rendered_manifests`.

use std::{collections::BTreeSet, path::Path, process::Command, time::Instant};

use gpustack_api::manufacturer::Manufacturer;
use gpustack_tests::{
    embedded::GatewayProcess,
    helm::{Helm, Refused, chart_dir},
    python_grpc::checkout,
};
use serde_json::{Value, json};

const RELEASE: &str = "gpustack-operator";
const NS: &str = "gpustack-system";

fn cluster() -> (tempfile::TempDir, GatewayProcess) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = GatewayProcess::start(&dir.path().join("data"), "charts");
    (dir, gw)
}

/// `kubectl get KIND -n NS -o json`'s items.
fn items(gw: &GatewayProcess, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    let v: Value = serde_json::from_str(&gw.kubectl_ok(&all)).expect("kubectl JSON");
    v["items"].as_array().cloned().unwrap_or_default()
}

fn named<'a>(objs: &'a [Value], name: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{name} is missing among {}", names(objs).join(", ")))
}

fn names(objs: &[Value]) -> Vec<String> {
    objs.iter()
        .map(|o| {
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

fn container<'a>(pod_spec: &'a Value, name: &str) -> &'a Value {
    pod_spec["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no container {name}"))
}

fn args(c: &Value) -> Vec<String> {
    serde_json::from_value(c["args"].clone()).expect("args")
}

/// The mount paths of a container, by volume name, with each volume's host path.
fn host_mounts(pod_spec: &Value, c: &Value) -> Vec<(String, String)> {
    let volumes = pod_spec["volumes"].as_array().unwrap();
    c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| {
            let v = volumes.iter().find(|v| v["name"] == m["name"])?;
            let host = v["hostPath"]["path"].as_str()?;
            Some((host.to_owned(), m["mountPath"].as_str()?.to_owned()))
        })
        .collect()
}

/// The crate version, which the image is tagged with and the chart carries.
const VERSION: &str = env!("CARGO_PKG_VERSION");

#[test]
fn lint_reports_only_the_upstream_charts_not_fetched_here() {
    let (dir, gw) = cluster();
    let helm = Helm::new(&gw.kubeconfig(), NS);
    // The chart as committed: its one finding is the four upstream charts in Chart.yaml's
    // dependencies, which `helm dependency build` fetches and no machine here can reach.
    let found = helm.lint(&chart_dir());
    assert_eq!(
        found,
        vec![json!({"severity": "WARNING", "path": chart_dir().to_str().unwrap()})],
        "lint findings of the chart"
    );
    // Without the dependency list, nothing at all: templates, values and schema are clean.
    let copy = dir.path().join("gpustack-operator");
    copy_dir(&chart_dir(), &copy);
    let chart_yaml = std::fs::read_to_string(copy.join("Chart.yaml")).unwrap();
    let cut = chart_yaml
        .find("\ndependencies:")
        .expect("a dependency list");
    std::fs::write(copy.join("Chart.yaml"), &chart_yaml[..cut]).unwrap();
    assert_eq!(helm.lint(&copy), Vec::<Value>::new(), "lint findings");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn install_with_defaults_creates_every_object_as_specified() {
    let (_dir, gw) = cluster();
    let helm = Helm::new(&gw.kubeconfig(), NS);
    let started = Instant::now();
    let release = helm.install(RELEASE, &json!({})).expect("install");
    eprintln!(
        "chart install to every object present: {:?}",
        started.elapsed()
    );
    assert_eq!(release["status"], "deployed");

    let image = format!("gpustack/gpustack-operator:{VERSION}");

    // The worker: two replicas spread over nodes, non-root on a read-only root, probes,
    // requests and limits, and the gateway beside it on a socket in a shared emptyDir.
    let deploys = items(&gw, &["deployments", "-n", NS]);
    assert_eq!(names(&deploys), ["gpustack-operator-worker"]);
    let worker = &deploys[0];
    assert_eq!(worker["spec"]["replicas"], 2);
    let pod = &worker["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "gpustack-operator-worker");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let spread = &pod["topologySpreadConstraints"][0];
    assert_eq!(spread["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(
        spread["labelSelector"]["matchLabels"],
        worker["spec"]["selector"]["matchLabels"]
    );
    let main = container(pod, "main");
    let gateway = container(pod, "gateway");
    for c in [main, gateway] {
        assert_eq!(c["image"], image.as_str());
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        assert!(c["resources"]["requests"]["cpu"].is_string(), "{c}");
        assert!(c["resources"]["limits"]["memory"].is_string(), "{c}");
    }
    assert_eq!(main["livenessProbe"]["httpGet"]["path"], "/livez");
    assert_eq!(main["readinessProbe"]["httpGet"]["path"], "/readyz");
    // By default each Pod's gateway keeps its own mirror in SQLite: no shared store, no lease.
    assert!(
        !gateway
            .to_string()
            .contains("GPUSTACK_WORKER_GATEWAY_STORE")
    );
    assert!(
        !args(gateway)
            .iter()
            .any(|a| a.starts_with("--mirror-lease"))
    );
    let main_args = args(main);
    let want_manufacturers = format!(
        "--manufacturer={}",
        Manufacturer::ALL.map(Manufacturer::as_str).join(",")
    );
    for a in [
        "worker",
        "--secure-port=31443",
        want_manufacturers.as_str(),
        "--disable-applications=*",
        "--kube-leader-election=true",
        "--model-manager-service-account=gpustack-operator-model-manager",
        "--gateway-socket=/var/run/gpustack-gateway/gateway.sock",
    ] {
        assert!(main_args.iter().any(|x| x == a), "{a} in {main_args:?}");
    }
    let gateway_args = args(gateway);
    assert!(
        gateway_args.contains(&"--bind-unix-path=/var/run/gpustack-gateway/gateway.sock".into()),
        "{gateway_args:?}"
    );
    let shared = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "gateway")
        .expect("the gateway volume");
    assert!(shared["emptyDir"].is_object(), "{shared}");
    for c in [main, gateway] {
        assert!(
            c["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["name"] == "gateway" && m["mountPath"] == "/var/run/gpustack-gateway"),
            "{c}"
        );
    }
    let pdb = &items(&gw, &["poddisruptionbudgets", "-n", NS])[0];
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        worker["spec"]["selector"]["matchLabels"]
    );

    // The device manager: one DaemonSet per manufacturer, on NFD's PCI label for its vendor,
    // with the host's devices, sysfs and the kubelet's sockets.
    let daemonsets = items(&gw, &["daemonsets", "-n", NS]);
    let mut want: BTreeSet<String> = Manufacturer::ALL
        .iter()
        .map(|m| format!("gpustack-operator-device-manager-{m}"))
        .collect();
    want.insert("gpustack-operator-model-manager".into());
    assert_eq!(
        names(&daemonsets).into_iter().collect::<BTreeSet<_>>(),
        want
    );
    for m in Manufacturer::ALL {
        let ds = named(
            &daemonsets,
            &format!("gpustack-operator-device-manager-{m}"),
        );
        let pod = &ds["spec"]["template"]["spec"];
        let label = format!(
            "feature.node.kubernetes.io/pci-{}.present",
            m.spec().pci_vendor_id
        );
        assert_eq!(pod["nodeSelector"][label.as_str()], "true", "{m}");
        assert_eq!(pod["priorityClassName"], "system-node-critical");
        assert_eq!(
            pod["serviceAccountName"],
            "gpustack-operator-device-manager"
        );
        let main = container(pod, "main");
        assert_eq!(main["image"], image.as_str());
        let a = args(main);
        assert_eq!(a[..2], ["device-manager", "serve"]);
        assert!(a.contains(&format!("--manufacturer={m}")), "{a:?}");
        let mounts = host_mounts(pod, main);
        for (host, at) in [
            ("/dev", "/dev"),
            ("/sys", "/sys"),
            (
                "/var/lib/kubelet/device-plugins",
                "/var/lib/kubelet/device-plugins",
            ),
            (
                "/var/lib/kubelet/pod-resources",
                "/var/lib/kubelet/pod-resources",
            ),
        ] {
            assert!(
                mounts.contains(&(host.to_owned(), at.to_owned())),
                "{m}: {host} in {mounts:?}"
            );
        }
        let selector = &ds["spec"]["selector"]["matchLabels"];
        assert_eq!(selector["gpustack.ai/manufacturer"], m.as_str());
    }
    let amd = named(&daemonsets, "gpustack-operator-device-manager-amd");
    let amd_pod = &amd["spec"]["template"]["spec"];
    assert!(
        host_mounts(amd_pod, container(amd_pod, "main"))
            .contains(&("/opt/rocm".to_owned(), "/opt/rocm".to_owned())),
        "AMD's user-space libraries are mounted"
    );

    // The model manager: the CSI plugin with its registrar, bidirectional propagation on the
    // kubelet directory, and its CSIDriver.
    let mm = named(&daemonsets, "gpustack-operator-model-manager");
    let pod = &mm["spec"]["template"]["spec"];
    let main = container(pod, "main");
    let kubelet_mount = main["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == "/var/lib/kubelet")
        .expect("the kubelet directory");
    assert_eq!(kubelet_mount["mountPropagation"], "Bidirectional");
    let registrar = container(pod, "registrar");
    assert!(
        args(registrar).contains(
            &"--kubelet-registration-path=/var/lib/kubelet/plugins/model.csi.gpustack.ai/csi.sock"
                .to_owned()
        ),
        "{registrar}"
    );
    let driver = &items(&gw, &["csidrivers"])[0];
    assert_eq!(driver["metadata"]["name"], "model.csi.gpustack.ai");
    assert_eq!(driver["spec"]["attachRequired"], false);
    assert_eq!(driver["spec"]["podInfoOnMount"], true);
    assert_eq!(driver["spec"]["volumeLifecycleModes"], json!(["Ephemeral"]));

    // A ServiceAccount, a ClusterRole and its binding per component; the node agents' ports
    // behind NetworkPolicies; Services for every component's metrics.
    let accounts = names(&items(&gw, &["serviceaccounts", "-n", NS]));
    let roles = items(
        &gw,
        &[
            "clusterroles",
            "-l",
            "app.kubernetes.io/instance=gpustack-operator",
        ],
    );
    let bindings = items(
        &gw,
        &[
            "clusterrolebindings",
            "-l",
            "app.kubernetes.io/instance=gpustack-operator",
        ],
    );
    for component in ["worker", "device-manager", "model-manager"] {
        let name = format!("gpustack-operator-{component}");
        assert!(accounts.contains(&name), "{name} in {accounts:?}");
        assert!(!named(&roles, &name)["rules"].as_array().unwrap().is_empty());
        let b = named(&bindings, &name);
        assert_eq!(b["roleRef"]["name"], name.as_str());
        assert_eq!(b["subjects"][0]["name"], name.as_str());
        assert_eq!(b["subjects"][0]["namespace"], NS);
        // No component is bound to cluster-admin.
        assert_ne!(b["roleRef"]["name"], "cluster-admin");
    }
    let policies = items(&gw, &["networkpolicies", "-n", NS]);
    assert_eq!(
        names(&policies),
        [
            "gpustack-operator-device-manager",
            "gpustack-operator-model-manager"
        ]
    );
    assert_eq!(
        policies[0]["spec"]["ingress"][0]["ports"][0]["port"], 32443,
        "the device manager's HTTPS port"
    );
    let services = names(&items(&gw, &["services", "-n", NS]));
    for s in [
        "gpustack-operator-worker-metrics",
        "gpustack-operator-device-manager",
        "gpustack-operator-model-manager",
    ] {
        assert!(services.contains(&s.to_owned()), "{s} in {services:?}");
    }
    // No ServiceMonitor API here, so none is rendered (see the test with one).
    assert!(
        !release["manifest"]
            .as_str()
            .unwrap()
            .contains("kind: ServiceMonitor")
    );
}

#[test]
fn upgrade_with_changed_values_rewrites_and_prunes() {
    let (_dir, gw) = cluster();
    let helm = Helm::new(&gw.kubeconfig(), NS);
    helm.install(RELEASE, &json!({})).expect("install");
    let values = json!({
        "global": {
            "imageRegistry": "registry.example:5000",
            "imageNamespace": "mirror",
            "imageTag": "9.9.9",
            "manufacturers": Manufacturer::ALL
                .iter()
                .filter(|m| **m != Manufacturer::Nvidia)
                .map(|m| (m.as_str().to_owned(), Value::Null))
                .collect::<serde_json::Map<_, _>>(),
        },
        "worker": {"replicas": 3, "gateway": {
            "link": "loopback",
            "store": {"secretName": "hub-db"},
            "mirrorLeaseDuration": "10s",
        }},
        "deviceManager": {"sliced": false},
    });
    let up = helm.upgrade(RELEASE, &values).expect("upgrade");
    assert_eq!(up["version"], 2);

    let daemonsets = items(&gw, &["daemonsets", "-n", NS]);
    assert_eq!(
        names(&daemonsets),
        [
            "gpustack-operator-device-manager-nvidia",
            "gpustack-operator-model-manager"
        ],
        "the other manufacturers' DaemonSets are gone"
    );
    let nvidia = &daemonsets[0]["spec"]["template"]["spec"];
    let main = container(nvidia, "main");
    assert_eq!(
        main["image"],
        "registry.example:5000/mirror/gpustack-operator:9.9.9"
    );
    assert!(args(main).contains(&"--no-sliced".to_owned()));
    let mm = &daemonsets[1]["spec"]["template"]["spec"];
    assert_eq!(
        container(mm, "registrar")["image"],
        "registry.example:5000/mirror/csi-node-driver-registrar:v2.17.0",
        "registry and namespace apply to every image; the tag only to the operator's"
    );
    let worker = &items(&gw, &["deployments", "-n", NS])[0];
    assert_eq!(worker["spec"]["replicas"], 3);
    let pod = &worker["spec"]["template"]["spec"];
    let main_args = args(container(pod, "main"));
    assert!(main_args.contains(&"--manufacturer=nvidia".to_owned()));
    assert!(
        main_args.contains(
            &"--gateway-kubeconfig=/var/run/gpustack-gateway/_admin.kubeconfig".to_owned()
        ),
        "{main_args:?}"
    );
    let gateway = container(pod, "gateway");
    let gateway_args = args(gateway);
    assert!(gateway_args.contains(&"--bind-address=127.0.0.1".to_owned()));
    assert!(gateway_args.contains(&"--secure-port=30443".to_owned()));
    // Every Pod's gateway a replica on the Secret's database: the URL through the
    // environment (never the command line), the lease time as a flag.
    assert!(gateway_args.contains(&"--mirror-lease-duration=10s".to_owned()));
    assert!(!gateway_args.iter().any(|a| a.starts_with("--store")));
    let store = gateway["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "GPUSTACK_WORKER_GATEWAY_STORE")
        .unwrap_or_else(|| panic!("{gateway}"));
    assert_eq!(
        store["valueFrom"]["secretKeyRef"],
        json!({"name": "hub-db", "key": "url"})
    );
    let history = helm.run(&["history", RELEASE]).expect("history");
    assert_eq!(
        history,
        json!([{"version": 1, "status": "superseded"}, {"version": 2, "status": "deployed"}])
    );
}

/// Every kind the chart renders, namespaced and cluster-scoped, as `kubectl get` lists them.
const NAMESPACED_KINDS: &str = "deployments,daemonsets,services,serviceaccounts,networkpolicies,\
poddisruptionbudgets,roles,rolebindings,secrets,configmaps";
const CLUSTER_KINDS: &str = "clusterroles,clusterrolebindings,csidrivers";

#[test]
fn uninstall_leaves_only_the_crds() {
    let (_dir, gw) = cluster();
    let helm = Helm::new(&gw.kubeconfig(), NS);
    helm.install(RELEASE, &json!({})).expect("install");
    let crds_before = names(&items(&gw, &["crds"]));
    assert!(crds_before.contains(&"devices.worker.gpustack.ai".to_owned()));
    helm.uninstall(RELEASE).expect("uninstall");

    let instance = "app.kubernetes.io/instance=gpustack-operator";
    let left = items(&gw, &[NAMESPACED_KINDS, "-A", "-l", instance]);
    assert!(left.is_empty(), "left behind: {:?}", names(&left));
    let left = items(&gw, &[CLUSTER_KINDS, "-l", instance]);
    assert!(left.is_empty(), "left behind: {:?}", names(&left));
    let release_records = items(&gw, &["secrets", "-n", NS, "-l", "owner=helm"]);
    assert!(release_records.is_empty(), "{:?}", names(&release_records));
    assert!(helm.releases().is_empty());
    // What the README says stays: the CRDs (Helm never deletes crds/).
    assert_eq!(names(&items(&gw, &["crds"])), crds_before);
}

/// The refusal's text, for a bad value; nothing may have been installed.
fn refused(gw: &GatewayProcess, helm: &Helm, values: Value) -> String {
    let Err(Refused(message)) = helm.install(RELEASE, &values) else {
        panic!("{values} was accepted");
    };
    assert!(helm.releases().is_empty(), "a release was recorded");
    let left = items(gw, &["daemonsets,deployments", "-A"]);
    assert!(left.is_empty(), "half-installed: {:?}", names(&left));
    message
}

#[test]
fn bad_values_are_refused_with_their_path_and_nothing_is_installed() {
    let (_dir, gw) = cluster();
    let helm = Helm::new(&gw.kubeconfig(), NS);
    for (values, want) in [
        (
            json!({"global": {"manufacturers": {"intel": {"pciVendorID": "8086", "resourceName": "gpu.intel.com/i915"}}}}),
            "at '/global/manufacturers': additional properties 'intel' not allowed",
        ),
        (
            json!({"worker": {"disableApplications": ["kueu"]}}),
            "at '/worker/disableApplications/0': value must be one of '*', 'kueue'",
        ),
        (
            json!({"worker": {"replicas": 0}}),
            "at '/worker/replicas': minimum: got 0, want 1",
        ),
        (
            json!({"deviceManager": {"monitorPeriod": "fast"}}),
            "at '/deviceManager/monitorPeriod': 'fast' does not match pattern",
        ),
        (
            json!({"worker": {"gateway": {"link": "tcp"}}}),
            "at '/worker/gateway/link': value must be one of 'unix', 'loopback'",
        ),
        (
            json!({"worker": {"gateway": {"mirrorLeaseDuration": "a while"}}}),
            "at '/worker/gateway/mirrorLeaseDuration': 'a while' does not match pattern",
        ),
        (
            json!({"worker": {"gateway": {"store": {"secretName": "db", "secretKey": ""}}}}),
            "at '/worker/gateway/store/secretKey'",
        ),
        (
            json!({"deviceManger": {"enabled": false}}),
            "additional properties 'deviceManger' not allowed",
        ),
        (
            json!({"global": {"manufacturers": {"nvidia": {"pciVendorID": "NVDA", "resourceName": "nvidia.com/gpu"}}}}),
            "at '/global/manufacturers/nvidia'",
        ),
    ] {
        let message = refused(&gw, &helm, values.clone());
        assert!(message.contains(want), "{values}: {message}");
    }
}

/// Serves `kind` of `monitoring.coreos.com/v1`, standing in for the Prometheus operator's CRD
/// (its chart cannot be fetched here): the same group, version and kind, with an open schema.
fn serve_monitoring_kind(gw: &GatewayProcess, dir: &Path, kind: &str) {
    let singular = kind.to_lowercase();
    let plural = format!("{singular}s");
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.monitoring.coreos.com")},
        "spec": {
            "group": "monitoring.coreos.com", "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": singular, "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    });
    let path = dir.join(format!("{plural}-crd.json"));
    std::fs::write(&path, crd.to_string()).unwrap();
    gw.kubectl_ok(&["create", "-f", path.to_str().unwrap()]);
    gpustack_tests::wait::wait_until(
        &format!("the {kind} kind to be served"),
        gpustack_tests::embedded::DEADLINE,
        || {
            gw.kubectl(&["get", &plural, "-A"])
                .status
                .success()
                .then_some(())
        },
    );
}

#[test]
fn service_monitors_where_the_cluster_serves_them() {
    let (dir, gw) = cluster();
    serve_monitoring_kind(&gw, dir.path(), "ServiceMonitor");
    let helm = Helm::new(&gw.kubeconfig(), NS);
    helm.install(RELEASE, &json!({})).expect("install");
    let monitors = items(&gw, &["servicemonitors", "-n", NS]);
    assert_eq!(
        names(&monitors),
        [
            "gpustack-operator-device-manager",
            "gpustack-operator-model-manager",
            "gpustack-operator-worker"
        ]
    );
    let services = items(&gw, &["services", "-n", NS]);
    for m in &monitors {
        let endpoint = &m["spec"]["endpoints"][0];
        assert_eq!(endpoint["scheme"], "https");
        assert_eq!(endpoint["path"], "/metrics");
        // Each monitor selects exactly one of the chart's Services, on a port it has.
        let selector = m["spec"]["selector"]["matchLabels"].as_object().unwrap();
        let selected: Vec<&Value> = services
            .iter()
            .filter(|s| {
                selector
                    .iter()
                    .all(|(k, v)| &s["metadata"]["labels"][k.as_str()] == v)
            })
            .collect();
        assert_eq!(selected.len(), 1, "{}", m["metadata"]["name"]);
        assert_eq!(selected[0]["spec"]["ports"][0]["name"], endpoint["port"]);
    }
    // And off when asked.
    helm.upgrade(RELEASE, &json!({"monitoring": {"serviceMonitors": false}}))
        .expect("upgrade");
    assert!(items(&gw, &["servicemonitors", "-n", NS]).is_empty());
}

#[test]
fn alerts_and_dashboards_when_asked() {
    let (dir, gw) = cluster();
    serve_monitoring_kind(&gw, dir.path(), "PrometheusRule");
    let helm = Helm::new(&gw.kubeconfig(), NS);
    // auto: the cluster serves PrometheusRules, so the alerts come; dashboards are off by default.
    helm.install(RELEASE, &json!({})).expect("install");
    let rules = items(&gw, &["prometheusrules", "-n", NS]);
    assert_eq!(names(&rules), ["gpustack-operator-alerts"]);
    // The rule groups are files/alerts.yaml's, which promtool checks and tests as they are.
    let text = std::fs::read_to_string(chart_dir().join("files/alerts.yaml")).unwrap();
    let shipped: Value = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(rules[0]["spec"]["groups"], shipped["groups"]);
    let dashboards =
        |gw: &GatewayProcess| items(gw, &["configmaps", "-n", NS, "-l", "grafana_dashboard=1"]);
    assert!(dashboards(&gw).is_empty(), "dashboards are off by default");

    // Thresholds from the values: an alert's `for` and the number its expression ends with.
    helm.upgrade(
        RELEASE,
        &json!({"monitoring": {"alerts": {
            "GpustackMirrorStale": {"for": "15m", "threshold": 1800},
            "GpustackModelCacheNearHighWatermark": {"threshold": 0.9},
            "GpustackWorkerWithoutLeader": {"for": "1m"},
        }}}),
    )
    .expect("upgrade with thresholds");
    let rules = items(&gw, &["prometheusrules", "-n", NS]);
    let rule = |name: &str| -> Value {
        rules[0]["spec"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap().iter())
            .find(|r| r["alert"] == name)
            .unwrap_or_else(|| panic!("{name}"))
            .clone()
    };
    let stale = rule("GpustackMirrorStale");
    assert_eq!(
        stale["expr"],
        "gpustack_gateway_upstream_lag_seconds > 1800"
    );
    assert_eq!(stale["for"], "15m");
    let cache = rule("GpustackModelCacheNearHighWatermark");
    assert!(
        cache["expr"].as_str().unwrap().ends_with("> 0.9"),
        "{cache}"
    );
    assert_eq!(cache["for"], "15m", "the default stays");
    assert_eq!(rule("GpustackWorkerWithoutLeader")["for"], "1m");
    assert_eq!(
        rule("GpustackUpstreamErroring"),
        shipped["groups"][0]["rules"][1],
        "an alert not set is the file's"
    );

    helm.upgrade(
        RELEASE,
        &json!({"monitoring": {"prometheusRules": false, "dashboards": {"enabled": true}}}),
    )
    .expect("upgrade");
    assert!(items(&gw, &["prometheusrules", "-n", NS]).is_empty());
    let maps = dashboards(&gw);
    let mut files: Vec<String> = std::fs::read_dir(chart_dir().join("files/dashboards"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "cluster-accelerators.json",
            "control-plane.json",
            "fleet-overview.json"
        ]
    );
    assert_eq!(maps.len(), files.len(), "{:?}", names(&maps));
    for f in &files {
        let name = format!(
            "gpustack-operator-dashboard-{}",
            f.trim_end_matches(".json")
        );
        let map = named(&maps, &name);
        let shipped: Value = serde_json::from_str(
            &std::fs::read_to_string(chart_dir().join("files/dashboards").join(f)).unwrap(),
        )
        .unwrap();
        let data: Value = serde_json::from_str(map["data"][f.as_str()].as_str().unwrap())
            .unwrap_or_else(|e| panic!("{name}'s {f} is not JSON: {e}"));
        assert_eq!(data, shipped, "{name}");
        assert!(
            !data["panels"].as_array().unwrap().is_empty(),
            "{f} has no panels"
        );
    }
}

/// The chart's values.yaml, parsed.
fn chart_values() -> Value {
    let text = std::fs::read_to_string(chart_dir().join("values.yaml")).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

#[test]
fn chart_tables_agree_with_the_code() {
    // The manufacturer table: the same rows, vendor ids and resource names as the binary's.
    let values = chart_values();
    let rows = values["global"]["manufacturers"].as_object().unwrap();
    let keys: Vec<&str> = rows.keys().map(String::as_str).collect();
    assert_eq!(keys, Manufacturer::ALL.map(Manufacturer::as_str));
    for m in Manufacturer::ALL {
        let row = &rows[m.as_str()];
        assert_eq!(row["pciVendorID"], m.spec().pci_vendor_id, "{m}");
        assert_eq!(row["resourceName"], m.spec().resource_name, "{m}");
    }
    // The chart's version and appVersion are the crate's (the image's tag).
    let chart: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(chart_dir().join("Chart.yaml")).unwrap())
            .unwrap();
    assert_eq!(chart["version"], VERSION);
    assert_eq!(chart["appVersion"], VERSION);
    // The applications the schema allows are the ones the worker accepts: the worker's own
    // refusal lists them.
    let out = gpustack_tests::run(&["worker", "--disable-applications=nothing"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let allowed: Vec<String> = stderr
        .split("allowed are ")
        .nth(1)
        .unwrap_or_else(|| panic!("{stderr}"))
        .lines()
        .next()
        .unwrap()
        .split(", ")
        .map(str::to_owned)
        .collect();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(chart_dir().join("values.schema.json")).unwrap(),
    )
    .unwrap();
    let enumerated: Vec<String> = serde_json::from_value(
        schema["properties"]["worker"]["properties"]["disableApplications"]["items"]["enum"]
            .clone(),
    )
    .unwrap();
    assert_eq!(enumerated, allowed);
    // And the committed schema is what its generator writes.
    let check = Command::new("python3")
        .arg(checkout().join("deploy/chart/tools/schema.py"))
        .arg("--check")
        .output()
        .expect("python3");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

/// The file `kubectl apply` users take: the system namespace, the CRDs, then the chart rendered
/// with its defaults as release `gpustack-operator` in `gpustack-system`.
fn rendered_manifests(manifest: &str) -> String {
    let mut out = String::from(
        "# The gpustack-operator chart rendered with its defaults (release gpustack-operator in\n\
         # gpustack-system), for `kubectl apply --server-side -f`. Generated: see\n\
         # tests/tests/chart.rs; do not edit.\n\
         ---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: gpustack-system\n",
    );
    let crds = chart_dir().join("crds");
    let mut files: Vec<_> = std::fs::read_dir(&crds)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        out.push_str("---\n");
        out.push_str(
            std::fs::read_to_string(f)
                .unwrap()
                .trim_start_matches("---\n"),
        );
    }
    out.push_str(manifest.trim_start_matches('\n'));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

#[test]
fn rendered_manifests_match_the_chart_and_apply() {
    let (_dir, gw) = cluster();
    let helm = Helm::new(&gw.kubeconfig(), NS);
    let release = helm.install(RELEASE, &json!({})).expect("install");
    let text = rendered_manifests(release["manifest"].as_str().unwrap());
    let path = checkout().join("deploy/manifests/gpustack-operator.yaml");
    if std::env::var_os("GPUSTACK_UPDATE_MANIFESTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} differs from the chart; regenerate with \
         `GPUSTACK_UPDATE_MANIFESTS=1 cargo test -p gpustack-tests --test chart rendered_manifests`",
        path.display()
    );
    // And kubectl applies it as it is, on a cluster without the chart.
    let (_dir2, fresh) = cluster();
    fresh.kubectl_ok(&["apply", "--server-side", "-f", path.to_str().unwrap()]);
    let daemonsets = items(&fresh, &["daemonsets", "-n", NS]);
    assert_eq!(daemonsets.len(), Manufacturer::ALL.len() + 1);
}

/// Helm's own labels, the only difference allowed between the chart's agents and the worker's.
const HELM_LABELS: [&str; 4] = [
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
];

/// `object` less Helm's labels (and the worker's `managed-by`, which stands where Helm's does),
/// on the object and on its Pod template.
fn without_helm_labels(mut object: Value) -> Value {
    for path in ["/metadata/labels", "/spec/template/metadata/labels"] {
        if let Some(labels) = object.pointer_mut(path).and_then(Value::as_object_mut) {
            for l in HELM_LABELS {
                labels.remove(l);
            }
        }
    }
    object
}

#[test]
fn the_workers_node_agents_are_the_charts() {
    use gpustack_worker::applications::objects;
    let (_dir, gw) = cluster();
    let helm = Helm::new(&gw.kubeconfig(), NS);
    // The chart as image mode stands for it: fullnameOverride gpustack-operator, every
    // manufacturer, the operator's image at the crate version (the worker's fallback).
    let release = helm
        .install(
            "agents",
            &json!({"fullnameOverride": "gpustack-operator", "worker": {"enabled": false}}),
        )
        .expect("install");
    let manifest = release["manifest"].as_str().unwrap();
    let ours_kinds = [
        "DaemonSet",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "CSIDriver",
    ];
    let key = |o: &Value| {
        (
            o["kind"].as_str().unwrap_or_default().to_owned(),
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };
    let chart: std::collections::BTreeMap<(String, String), Value> =
        serde_yaml_ng::Deserializer::from_str(manifest)
            .filter_map(|doc| {
                let v: Value = serde::Deserialize::deserialize(doc).ok()?;
                (!v.is_null()).then_some(v)
            })
            .filter(|o| ours_kinds.contains(&o["kind"].as_str().unwrap_or_default()))
            .filter(|o| {
                let name = o["metadata"]["name"].as_str().unwrap_or_default();
                name.starts_with("gpustack-operator-device-manager")
                    || name.starts_with("gpustack-operator-model-manager")
                    || name == objects::MODEL_CSI_DRIVER
            })
            .map(|o| (key(&o), without_helm_labels(o)))
            .collect();
    let input = objects::Input::new(NS, &format!("gpustack/gpustack-operator:{VERSION}"));
    let mut worker = objects::device_manager(&input, &Manufacturer::ALL);
    worker.extend(objects::model_manager(&input));
    let worker: std::collections::BTreeMap<(String, String), Value> = worker
        .into_iter()
        .map(|d| (key(&d.object), without_helm_labels(d.object)))
        .collect();
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        worker.keys().collect::<Vec<_>>(),
        "the same objects"
    );
    // 9 DaemonSets and the model manager's, each agent's ServiceAccount, ClusterRole, binding,
    // Role and RoleBinding, the CSIDriver.
    assert_eq!(chart.len(), Manufacturer::ALL.len() + 1 + 5 + 5 + 1);
    for (k, want) in &chart {
        assert_eq!(
            &worker[k], want,
            "{k:?}: the worker's (left) differs from the chart's (right)"
        );
    }
}

#[test]
fn upstream_versions_are_the_charts_dependencies() {
    use gpustack_worker::applications::upstream;
    let chart: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(chart_dir().join("Chart.yaml")).unwrap())
            .unwrap();
    let version = |name: &str| {
        chart["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == name)
            .unwrap_or_else(|| panic!("dependency {name}"))["version"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(version("kueue"), upstream::KUEUE_VERSION);
    assert_eq!(version("node-feature-discovery"), upstream::NFD_VERSION);
    assert_eq!(version("csi-driver-nfs"), upstream::CSI_NFS_VERSION);
    assert_eq!(version("csi-s3"), upstream::CSI_S3_VERSION);
}

/// The rules of the chart's worker ClusterRole (JSON), as installed.
fn worker_rules(gw: &GatewayProcess) -> String {
    gw.kubectl_ok(&[
        "get",
        "clusterrole",
        "gpustack-operator-worker",
        "-o",
        "json",
    ])
}

#[test]
fn image_mode_runs_under_the_charts_worker_role() {
    let (dir, gw) = cluster();
    let helm = Helm::new(&gw.kubeconfig(), NS);
    // Chart mode (`*`): the worker's role holds nothing of image mode.
    helm.install(RELEASE, &json!({})).expect("install");
    assert!(!worker_rules(&gw).contains("daemonsets") && !worker_rules(&gw).contains("escalate"));
    // The node agents left to the worker: the chart renders none, and the worker's roles
    // grow what image mode does.
    // NFD is left on (and missing): the worker names it on its own Pod.
    let values = json!({
        "worker": {"disableApplications": ["kueue", "csi-driver-nfs", "csi-driver-s3"]},
        "deviceManager": {"enabled": false},
        "modelManager": {"enabled": false},
    });
    helm.upgrade(RELEASE, &values).expect("upgrade");
    assert!(items(&gw, &["daemonsets", "-n", NS]).is_empty());
    assert!(worker_rules(&gw).contains("escalate"));

    // The worker with the chart's ServiceAccount token, as its Pod would run it: it installs
    // itself and the node agents, with no 403 on the way.
    let token = gw.kubectl_ok(&["create", "token", "gpustack-operator-worker", "-n", NS]);
    let kubeconfig = dir.path().join("worker-sa.kubeconfig");
    gpustack_tests::embedded::with_token(&gw.kubeconfig(), token.trim(), &kubeconfig);
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1",
        "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"}}});
    let path = dir.path().join("node.json");
    std::fs::write(&path, node.to_string()).unwrap();
    gw.kubectl_ok(&["create", "-f", path.to_str().unwrap()]);
    // The worker's own Pod, as the Deployment would have made it: its image is the agents'.
    let image = "registry.example:5000/mirror/gpustack-operator:9.9.9";
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "gpustack-operator-worker-0", "namespace": NS},
        "spec": {"containers": [{"name": "gateway", "image": "other:1"}, {"name": "main", "image": image}]}});
    let path = dir.path().join("pod.json");
    std::fs::write(&path, pod.to_string()).unwrap();
    gw.kubectl_ok(&["create", "-f", path.to_str().unwrap()]);
    let worker = gpustack_tests::worker::WorkerProcess::start_as(
        &gw,
        &kubeconfig,
        &dir.path().join("worker"),
        gpustack_tests::embedded::free_port(),
        // The Deployment's flags for these values.
        &[
            "--applications-resync-period=1s",
            "--manufacturer=nvidia",
            "--disable-applications=kueue,csi-driver-nfs,csi-driver-s3",
        ],
        &[("KUBERNETES_POD_NAME", "gpustack-operator-worker-0")],
    );
    for (kind, name) in [
        ("daemonset", "gpustack-operator-device-manager-nvidia"),
        ("daemonset", "gpustack-operator-model-manager"),
        ("csidriver", "model.csi.gpustack.ai"),
        ("clusterrolebinding", "gpustack-operator-device-manager"),
        ("rolebinding", "gpustack-operator-model-manager"),
    ] {
        gpustack_tests::wait::wait_until(
            &format!("{kind} {name}"),
            gpustack_tests::embedded::DEADLINE,
            || {
                gw.kubectl(&["get", kind, "-n", NS, name])
                    .status
                    .success()
                    .then_some(())
            },
        );
    }
    for name in [
        "gpustack-operator-device-manager-nvidia",
        "gpustack-operator-model-manager",
    ] {
        let ds: Value = serde_json::from_str(&gw.kubectl_ok(&[
            "get",
            "daemonset",
            "-n",
            NS,
            name,
            "-o",
            "json",
        ]))
        .unwrap();
        assert_eq!(
            ds["spec"]["template"]["spec"]["containers"][0]["image"], image,
            "{name} runs the worker's image"
        );
    }
    // NFD, enabled and missing: a condition on the worker's Pod and an Event about it.
    gpustack_tests::wait::wait_until(
        "the condition on the worker's Pod",
        gpustack_tests::embedded::DEADLINE,
        || {
            let pod: Value = serde_json::from_str(&gw.kubectl_ok(&[
                "get",
                "pod",
                "-n",
                NS,
                "gpustack-operator-worker-0",
                "-o",
                "json",
            ]))
            .ok()?;
            pod["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| {
                    c["type"] == "gpustack.ai/ApplicationsAvailable"
                        && c["status"] == "False"
                        && c["message"].as_str().is_some_and(|m| {
                            m.starts_with("node-feature-discovery is enabled but not installed")
                                && !m.contains("kueue")
                        })
                })
                .map(|_| ())
        },
    );
    gpustack_tests::wait::wait_until(
        "the Event about the worker's Pod",
        gpustack_tests::embedded::DEADLINE,
        || {
            let events = items(&gw, &["events", "-n", NS]);
            events
                .iter()
                .find(|e| {
                    e["reason"] == "NodeFeatureDiscoveryMissing"
                        && e["involvedObject"]["kind"] == "Pod"
                        && e["involvedObject"]["name"] == "gpustack-operator-worker-0"
                })
                .map(|_| ())
        },
    );
    let log = worker.log();
    assert!(
        // (kube's errors say `Forbidden` or `code: 403`; a bare 403 could be a port or a time.)
        !log.to_lowercase().contains("forbidden") && !log.contains("code: 403"),
        "a request was refused:\n{log}"
    );
}
