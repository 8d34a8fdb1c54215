//! End to end: `kubectl get` and `kubectl get -o wide` against an embedded cluster print the
//! columns kube-apiserver prints for each built-in kind, with the cells it computes. Objects
//! are created from JSON files (`kubectl create -f`) and their status set through the status
//! subresource, as controllers would.

use std::{collections::BTreeMap, path::Path};

use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess},
    wait::wait_until,
};
use serde_json::{Value, json};

fn start(name: &str) -> (tempfile::TempDir, GatewayProcess) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = GatewayProcess::start(&dir.path().join("data"), name);
    (dir, gw)
}

/// Writes `obj` to a file and creates it with `kubectl create -f`.
fn create(gw: &GatewayProcess, dir: &Path, obj: &Value) {
    let name = obj["metadata"]["name"].as_str().unwrap();
    let kind = obj["kind"].as_str().unwrap();
    let path = dir.join(format!("{kind}-{name}.json"));
    std::fs::write(&path, obj.to_string()).unwrap();
    gw.kubectl_ok(&["create", "-f", path.to_str().unwrap()]);
}

/// Merges `status` into the object's status through the status subresource.
fn set_status(gw: &GatewayProcess, resource: &str, name: &str, status: Value) {
    let body = json!({ "status": status }).to_string();
    gw.kubectl_ok(&[
        "patch",
        resource,
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &body,
    ]);
}

/// A `kubectl get` table: its headers, and each row as header → cell. Cells are cut at the
/// offsets where the headers start (kubectl aligns columns), so empty cells and cells with
/// spaces (`3 (20m ago)`) come out whole.
struct Table {
    headers: Vec<String>,
    rows: Vec<BTreeMap<String, String>>,
}

fn parse(out: &str) -> Table {
    let mut lines = out.lines();
    let header: Vec<char> = lines.next().expect("a header line").chars().collect();
    // A header starts after two spaces or at the line's start; headers hold single spaces.
    let mut starts = Vec::new();
    for i in 0..header.len() {
        let after_gap = i == 0 || (i >= 2 && header[i - 1] == ' ' && header[i - 2] == ' ');
        if header[i] != ' ' && after_gap {
            starts.push(i);
        }
    }
    let cut = |line: &[char], k: usize| -> String {
        let from = starts[k].min(line.len());
        let to = starts
            .get(k + 1)
            .copied()
            .unwrap_or(line.len())
            .min(line.len());
        line[from..to].iter().collect::<String>().trim().to_owned()
    };
    let headers: Vec<String> = (0..starts.len()).map(|k| cut(&header, k)).collect();
    let rows = lines
        .map(|l| {
            let line: Vec<char> = l.chars().collect();
            (0..starts.len())
                .map(|k| (headers[k].clone(), cut(&line, k)))
                .collect()
        })
        .collect();
    Table { headers, rows }
}

/// `kubectl get ARGS` as a table.
fn get(gw: &GatewayProcess, args: &[&str]) -> Table {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    parse(&gw.kubectl_ok(&all))
}

impl Table {
    /// The row whose NAME is `name`.
    fn row(&self, name: &str) -> &BTreeMap<String, String> {
        self.rows
            .iter()
            .find(|r| r.get("NAME").map(String::as_str) == Some(name))
            .unwrap_or_else(|| panic!("no row {name} in {:?}", self.rows))
    }

    fn assert_headers(&self, expected: &[&str]) {
        assert_eq!(self.headers, expected);
    }
}

/// Asserts the cells named in `expected` (header, cell) of `row`.
fn assert_cells(row: &BTreeMap<String, String>, expected: &[(&str, &str)]) {
    for (header, cell) in expected {
        assert_eq!(
            row.get(*header).map(String::as_str),
            Some(*cell),
            "{header} of {row:?}"
        );
    }
}

/// An age as kubectl shows one (`0s`, `12s`, `3m2s`), not `<unknown>`.
fn assert_age(row: &BTreeMap<String, String>) {
    let age = &row["AGE"];
    assert!(
        age.ends_with('s') || age.ends_with('m'),
        "AGE of {row:?} is not a fresh age"
    );
}

fn minutes_ago(m: i64) -> String {
    let t = jiff::Timestamp::now() - jiff::SignedDuration::from_mins(m);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn container_status(name: &str, ready: bool, restarts: i64) -> Value {
    json!({"name": name, "ready": ready, "restartCount": restarts, "image": "busybox",
        "imageID": "", "state": {"running": {"startedAt": minutes_ago(30)}}})
}

#[test]
fn pods_show_readiness_status_and_restarts() {
    let (dir, gw) = start("pods");
    let pod = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "node-a", "containers": [
                {"name": "app", "image": "busybox"}, {"name": "sidecar", "image": "nginx:1.27"}]}})
    };
    create(&gw, dir.path(), &pod("web"));
    create(&gw, dir.path(), &pod("crashing"));
    create(&gw, dir.path(), &pod("fresh"));

    let mut flaky = container_status("sidecar", false, 3);
    flaky["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error",
        "startedAt": minutes_ago(40), "finishedAt": minutes_ago(20)}});
    set_status(
        &gw,
        "pod",
        "web",
        json!({"phase": "Running", "podIP": "10.1.0.7", "podIPs": [{"ip": "10.1.0.7"}],
            "containerStatuses": [container_status("app", true, 0), flaky]}),
    );
    let mut waiting = container_status("app", false, 5);
    waiting["state"] = json!({"waiting": {"reason": "CrashLoopBackOff"}});
    set_status(
        &gw,
        "pod",
        "crashing",
        json!({"phase": "Running",
            "containerStatuses": [waiting, container_status("sidecar", true, 0)]}),
    );

    let t = get(&gw, &["pods"]);
    t.assert_headers(&["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_cells(
        t.row("web"),
        &[
            ("READY", "1/2"),
            ("STATUS", "Running"),
            ("RESTARTS", "3 (20m ago)"),
        ],
    );
    assert_age(t.row("web"));
    assert_cells(
        t.row("crashing"),
        &[
            ("READY", "1/2"),
            ("STATUS", "CrashLoopBackOff"),
            ("RESTARTS", "5"),
        ],
    );
    assert_cells(
        t.row("fresh"),
        &[("READY", "0/2"), ("STATUS", "Pending"), ("RESTARTS", "0")],
    );

    let wide = get(&gw, &["pods", "-o", "wide"]);
    wide.assert_headers(&[
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ]);
    assert_cells(
        wide.row("web"),
        &[
            ("IP", "10.1.0.7"),
            ("NODE", "node-a"),
            ("NOMINATED NODE", "<none>"),
            ("READINESS GATES", "<none>"),
        ],
    );
    assert_cells(wide.row("crashing"), &[("IP", "<none>")]);

    // A pod being deleted (held by a finalizer) is Terminating.
    gw.kubectl_ok(&[
        "patch",
        "pod",
        "fresh",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);
    gw.kubectl_ok(&["delete", "pod", "fresh", "--wait=false"]);
    assert_cells(
        get(&gw, &["pods"]).row("fresh"),
        &[("STATUS", "Terminating")],
    );
}

#[test]
fn workloads_show_replicas_and_templates() {
    let (dir, gw) = start("workloads");
    let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
        {"name": "web", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}]}});
    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template}}),
    );
    set_status(
        &gw,
        "deployment",
        "web",
        json!({"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}),
    );
    let t = get(&gw, &["deployments"]);
    t.assert_headers(&["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    assert_cells(
        t.row("web"),
        &[("READY", "2/3"), ("UP-TO-DATE", "3"), ("AVAILABLE", "2")],
    );
    assert_age(t.row("web"));
    let wide = get(&gw, &["deployments", "-o", "wide"]);
    wide.assert_headers(&[
        "NAME",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "AGE",
        "CONTAINERS",
        "IMAGES",
        "SELECTOR",
    ]);
    assert_cells(
        wide.row("web"),
        &[
            ("CONTAINERS", "web,log"),
            ("IMAGES", "nginx:1.27,busybox"),
            ("SELECTOR", "app=web"),
        ],
    );

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-1", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template}}),
    );
    set_status(
        &gw,
        "replicaset",
        "web-1",
        json!({"replicas": 2, "readyReplicas": 1}),
    );
    let t = get(&gw, &["replicasets", "-o", "wide"]);
    t.assert_headers(&[
        "NAME",
        "DESIRED",
        "CURRENT",
        "READY",
        "AGE",
        "CONTAINERS",
        "IMAGES",
        "SELECTOR",
    ]);
    assert_cells(
        t.row("web-1"),
        &[
            ("DESIRED", "2"),
            ("CURRENT", "2"),
            ("READY", "1"),
            ("SELECTOR", "app=web"),
        ],
    );

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "web"}},
                "template": template}}),
    );
    let t = get(&gw, &["statefulsets", "-o", "wide"]);
    t.assert_headers(&["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"]);
    assert_cells(t.row("db"), &[("READY", "0/2"), ("CONTAINERS", "web,log")]);

    let mut node_template = template.clone();
    node_template["spec"]["nodeSelector"] = json!({"gpu": "true"});
    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": node_template}}),
    );
    set_status(
        &gw,
        "daemonset",
        "agent",
        json!({"desiredNumberScheduled": 4, "currentNumberScheduled": 3, "numberReady": 2,
            "updatedNumberScheduled": 3, "numberAvailable": 2, "numberMisscheduled": 0}),
    );
    let t = get(&gw, &["daemonsets"]);
    t.assert_headers(&[
        "NAME",
        "DESIRED",
        "CURRENT",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "NODE SELECTOR",
        "AGE",
    ]);
    assert_cells(
        t.row("agent"),
        &[
            ("DESIRED", "4"),
            ("CURRENT", "3"),
            ("READY", "2"),
            ("UP-TO-DATE", "3"),
            ("AVAILABLE", "2"),
            ("NODE SELECTOR", "gpu=true"),
        ],
    );

    let mut job_template = template.clone();
    job_template["spec"]["restartPolicy"] = json!("Never");
    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {"completions": 3, "template": job_template}}),
    );
    set_status(
        &gw,
        "job",
        "train",
        json!({"succeeded": 1, "startTime": minutes_ago(20)}),
    );
    let t = get(&gw, &["jobs", "-o", "wide"]);
    t.assert_headers(&[
        "NAME",
        "STATUS",
        "COMPLETIONS",
        "DURATION",
        "AGE",
        "CONTAINERS",
        "IMAGES",
        "SELECTOR",
    ]);
    assert_cells(
        t.row("train"),
        &[
            ("STATUS", "Running"),
            ("COMPLETIONS", "1/3"),
            ("DURATION", "20m"),
            ("IMAGES", "nginx:1.27,busybox"),
        ],
    );

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}}),
    );
    set_status(
        &gw,
        "pdb",
        "web",
        json!({"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}),
    );
    let t = get(&gw, &["pdb"]);
    t.assert_headers(&[
        "NAME",
        "MIN AVAILABLE",
        "MAX UNAVAILABLE",
        "ALLOWED DISRUPTIONS",
        "AGE",
    ]);
    assert_cells(
        t.row("web"),
        &[
            ("MIN AVAILABLE", "50%"),
            ("MAX UNAVAILABLE", "N/A"),
            ("ALLOWED DISRUPTIONS", "1"),
        ],
    );
}

#[test]
fn core_kinds_show_their_columns() {
    let (dir, gw) = start("core");
    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "default"},
            "data": {"a": "1", "b": "2"}}),
    );
    let t = get(&gw, &["configmaps"]);
    t.assert_headers(&["NAME", "DATA", "AGE"]);
    assert_cells(t.row("settings"), &[("DATA", "2")]);

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "default"},
            "type": "Opaque", "data": {"token": "c2VjcmV0"}}),
    );
    let t = get(&gw, &["secrets"]);
    t.assert_headers(&["NAME", "TYPE", "DATA", "AGE"]);
    assert_cells(t.row("token"), &[("TYPE", "Opaque"), ("DATA", "1")]);

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": "default"},
            "secrets": [{"name": "token"}]}),
    );
    let t = get(&gw, &["serviceaccounts"]);
    t.assert_headers(&["NAME", "SECRETS", "AGE"]);
    assert_cells(t.row("robot"), &[("SECRETS", "1")]);

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.20"],
                "selector": {"app": "web"}, "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}]}}),
    );
    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "edge", "namespace": "default"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.21", "clusterIPs": ["10.96.0.21"],
                "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}, {"port": 53, "protocol": "UDP", "nodePort": 30053}]}}),
    );
    let t = get(&gw, &["services"]);
    t.assert_headers(&[
        "NAME",
        "TYPE",
        "CLUSTER-IP",
        "EXTERNAL-IP",
        "PORT(S)",
        "AGE",
    ]);
    assert_cells(
        t.row("web"),
        &[
            ("TYPE", "ClusterIP"),
            ("CLUSTER-IP", "10.96.0.20"),
            ("EXTERNAL-IP", "<none>"),
            ("PORT(S)", "80/TCP"),
        ],
    );
    assert_cells(
        t.row("edge"),
        &[
            ("TYPE", "NodePort"),
            ("PORT(S)", "80:30080/TCP,53:30053/UDP"),
        ],
    );
    let wide = get(&gw, &["services", "-o", "wide"]);
    assert_eq!(wide.headers.last().map(String::as_str), Some("SELECTOR"));
    assert_cells(wide.row("web"), &[("SELECTOR", "app=web")]);
    assert_cells(wide.row("edge"), &[("SELECTOR", "<none>")]);

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "gpu-1", "labels": {"node-role.kubernetes.io/control-plane": "",
                "node-role.kubernetes.io/gpu": ""}},
            "spec": {"unschedulable": true}}),
    );
    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-1"}}),
    );
    set_status(
        &gw,
        "node",
        "gpu-1",
        json!({"conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "192.168.1.10"}, {"type": "Hostname", "address": "gpu-1"}],
            "nodeInfo": {"kubeletVersion": "v1.32.1", "osImage": "Ubuntu 24.04 LTS", "kernelVersion": "6.8.0-45-generic",
                "containerRuntimeVersion": "containerd://1.7.22", "kubeProxyVersion": "", "machineID": "",
                "systemUUID": "", "bootID": "", "operatingSystem": "linux", "architecture": "amd64"}}),
    );
    set_status(
        &gw,
        "node",
        "cpu-1",
        json!({"conditions": [{"type": "Ready", "status": "False"}]}),
    );
    let t = get(&gw, &["nodes"]);
    t.assert_headers(&["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
    assert_cells(
        t.row("gpu-1"),
        &[
            ("STATUS", "Ready,SchedulingDisabled"),
            ("ROLES", "control-plane,gpu"),
            ("VERSION", "v1.32.1"),
        ],
    );
    assert_cells(
        t.row("cpu-1"),
        &[("STATUS", "NotReady"), ("ROLES", "<none>")],
    );
    let wide = get(&gw, &["nodes", "-o", "wide"]);
    wide.assert_headers(&[
        "NAME",
        "STATUS",
        "ROLES",
        "AGE",
        "VERSION",
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]);
    assert_cells(
        wide.row("gpu-1"),
        &[
            ("INTERNAL-IP", "192.168.1.10"),
            ("EXTERNAL-IP", "<none>"),
            ("OS-IMAGE", "Ubuntu 24.04 LTS"),
            ("KERNEL-VERSION", "6.8.0-45-generic"),
            ("CONTAINER-RUNTIME", "containerd://1.7.22"),
        ],
    );
    assert_cells(wide.row("cpu-1"), &[("OS-IMAGE", "<unknown>")]);

    let t = get(&gw, &["namespaces"]);
    t.assert_headers(&["NAME", "STATUS", "AGE"]);
    assert_cells(t.row("default"), &[("STATUS", "Active")]);

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
            "type": "Warning", "reason": "BackOff", "message": "Back-off restarting failed container",
            "source": {"component": "kubelet", "host": "gpu-1"}, "count": 4,
            "firstTimestamp": minutes_ago(30), "lastTimestamp": minutes_ago(20)}),
    );
    let t = get(&gw, &["events"]);
    t.assert_headers(&["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
    assert_cells(
        &t.rows[0],
        &[
            ("LAST SEEN", "20m"),
            ("TYPE", "Warning"),
            ("REASON", "BackOff"),
            ("OBJECT", "pod/web"),
            ("MESSAGE", "Back-off restarting failed container"),
        ],
    );
    let wide = get(&gw, &["events", "-o", "wide"]);
    wide.assert_headers(&[
        "LAST SEEN",
        "TYPE",
        "REASON",
        "OBJECT",
        "SUBOBJECT",
        "SOURCE",
        "MESSAGE",
        "FIRST SEEN",
        "COUNT",
        "NAME",
    ]);
    assert_cells(
        &wide.rows[0],
        &[
            ("SOURCE", "kubelet, gpu-1"),
            ("FIRST SEEN", "30m"),
            ("COUNT", "4"),
            ("NAME", "web.1"),
        ],
    );
}

#[test]
fn cluster_kinds_show_their_columns() {
    let (dir, gw) = start("cluster");
    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
    );
    let t = get(&gw, &["clusterroles", "reader"]);
    t.assert_headers(&["NAME", "CREATED AT"]);
    let created = &t.row("reader")["CREATED AT"];
    assert!(
        created.parse::<jiff::Timestamp>().is_ok() && created.ends_with('Z'),
        "{created}"
    );

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "readers", "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
                {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"},
                {"kind": "ServiceAccount", "name": "robot", "namespace": "default"}]}),
    );
    let t = get(&gw, &["rolebindings"]);
    t.assert_headers(&["NAME", "ROLE", "AGE"]);
    assert_cells(t.row("readers"), &[("ROLE", "ClusterRole/reader")]);
    let wide = get(&gw, &["rolebindings", "-o", "wide"]);
    wide.assert_headers(&["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]);
    assert_cells(
        wide.row("readers"),
        &[
            ("USERS", "alice"),
            ("GROUPS", "devs"),
            ("SERVICEACCOUNTS", "default/robot"),
        ],
    );

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "inference"}, "value": 1000, "globalDefault": false,
            "preemptionPolicy": "Never"}),
    );
    let t = get(&gw, &["priorityclasses"]);
    t.assert_headers(&["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]);
    assert_cells(
        t.row("inference"),
        &[
            ("VALUE", "1000"),
            ("GLOBAL-DEFAULT", "false"),
            ("PREEMPTIONPOLICY", "Never"),
        ],
    );

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "worker-leader", "namespace": "default"},
            "spec": {"holderIdentity": "worker-0"}}),
    );
    let t = get(&gw, &["leases"]);
    t.assert_headers(&["NAME", "HOLDER", "AGE"]);
    assert_cells(t.row("worker-leader"), &[("HOLDER", "worker-0")]);

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "checks"},
            "webhooks": [
                {"name": "a.example.com", "clientConfig": {"url": "https://127.0.0.1:1/a"},
                    "admissionReviewVersions": ["v1"], "sideEffects": "None", "rules": []},
                {"name": "b.example.com", "clientConfig": {"url": "https://127.0.0.1:1/b"},
                    "admissionReviewVersions": ["v1"], "sideEffects": "None", "rules": []}]}),
    );
    let t = get(&gw, &["validatingwebhookconfigurations"]);
    t.assert_headers(&["NAME", "WEBHOOKS", "AGE"]);
    assert_cells(t.row("checks"), &[("WEBHOOKS", "2")]);

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
            "metadata": {"name": "model.csi.gpustack.ai"},
            "spec": {"attachRequired": false, "podInfoOnMount": true, "volumeLifecycleModes": ["Ephemeral"]}}),
    );
    let t = get(&gw, &["csidrivers"]);
    t.assert_headers(&[
        "NAME",
        "ATTACHREQUIRED",
        "PODINFOONMOUNT",
        "STORAGECAPACITY",
        "TOKENREQUESTS",
        "REQUIRESREPUBLISH",
        "MODES",
        "AGE",
    ]);
    assert_cells(
        t.row("model.csi.gpustack.ai"),
        &[
            ("ATTACHREQUIRED", "false"),
            ("PODINFOONMOUNT", "true"),
            ("TOKENREQUESTS", "<unset>"),
            ("MODES", "Ephemeral"),
        ],
    );

    // The aggregator checks the APIService and finds no Service behind it.
    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1alpha1.metrics.example.com"},
            "spec": {"group": "metrics.example.com", "version": "v1alpha1",
                "service": {"namespace": "default", "name": "metrics"},
                "insecureSkipTLSVerify": true, "groupPriorityMinimum": 100, "versionPriority": 10}}),
    );
    let t = get(&gw, &["apiservices"]);
    t.assert_headers(&["NAME", "SERVICE", "AVAILABLE", "AGE"]);
    assert_cells(
        t.row("v1alpha1.metrics.example.com"),
        &[("SERVICE", "default/metrics")],
    );
    wait_until("the APIService to be found unavailable", DEADLINE, || {
        let t = get(&gw, &["apiservices"]);
        let available = t.row("v1alpha1.metrics.example.com")["AVAILABLE"].clone();
        (available == "False (ServiceNotFound)").then_some(())
    });

    create(
        &gw,
        dir.path(),
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]}}),
    );
    let t = get(&gw, &["customresourcedefinitions"]);
    t.assert_headers(&["NAME", "CREATED AT"]);
    assert!(t.row("widgets.example.com")["CREATED AT"].ends_with('Z'));
}
