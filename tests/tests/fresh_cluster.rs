//! End to end: a fresh embedded cluster holds what every fresh cluster holds (the
//! `default/kubernetes` Service, the default and `system:` ClusterRoles, a `default`
//! ServiceAccount and a `kube-root-ca.crt` ConfigMap in every namespace, also in one created
//! later), and serves the subresources `kubectl scale`, `kubectl drain` and
//! `kubectl certificate approve|deny` use; all through the real `kubectl`.

use std::path::Path;

use base64::Engine;
use gpustack_tests::embedded::GatewayProcess;
use serde_json::{Value, json};

fn start() -> (tempfile::TempDir, GatewayProcess) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = GatewayProcess::start(&dir.path().join("data"), "demo");
    (dir, gw)
}

/// Creates `objects` with `kubectl create -f` (a JSON file).
fn create(gw: &GatewayProcess, dir: &Path, name: &str, objects: Value) -> String {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, objects.to_string()).unwrap();
    gw.kubectl_ok(&["create", "-f", path.to_str().unwrap()])
}

/// The CA certificate (PEM) the kubeconfig trusts.
fn trusted_ca(gw: &GatewayProcess) -> String {
    let data = gw.kubectl_ok(&[
        "config",
        "view",
        "--raw",
        "-o",
        "jsonpath={.clusters[0].cluster.certificate-authority-data}",
    ]);
    let pem = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .expect("base64 CA data");
    String::from_utf8(pem).expect("a PEM text")
}

#[test]
fn a_fresh_cluster_holds_what_every_cluster_holds() {
    let (dir, gw) = start();

    let table = gw.kubectl_ok(&["get", "svc", "kubernetes"]);
    assert!(
        table.contains("kubernetes") && table.contains("10.96.0.1"),
        "{table}"
    );
    let svc = gw.get_json(&["svc", "kubernetes", "-n", "default"]);
    assert_eq!(
        svc["metadata"]["labels"],
        json!({"component": "apiserver", "provider": "kubernetes"})
    );
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(
        svc["spec"]["ports"],
        json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": gw.port}])
    );
    let uid = svc["metadata"]["uid"].clone();

    let roles = gw.kubectl_ok(&["get", "clusterroles", "-o", "name"]);
    for role in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
    ] {
        assert!(
            roles
                .lines()
                .any(|l| l == format!("clusterrole.rbac.authorization.k8s.io/{role}")),
            "{role} missing from {roles}"
        );
    }
    assert_eq!(
        gw.kubectl_ok(&[
            "get",
            "clusterrolebinding",
            "cluster-admin",
            "-o",
            "jsonpath={.subjects[0].name}",
        ]),
        "system:masters"
    );

    let ca = trusted_ca(&gw);
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        gw.kubectl_ok(&["get", "sa", "default", "-n", ns]);
        let published = gw.kubectl_ok(&[
            "get",
            "cm",
            "kube-root-ca.crt",
            "-n",
            ns,
            "-o",
            "jsonpath={.data.ca\\.crt}",
        ]);
        assert_eq!(published, ca, "kube-root-ca.crt of {ns}");
    }

    // A namespace created later gets both at once, and loses them with it.
    create(
        &gw,
        dir.path(),
        "ns",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
    );
    let accounts = gw.kubectl_ok(&["get", "sa", "default", "-n", "team"]);
    assert!(accounts.contains("default"), "{accounts}");
    let ca_in_team = |gw: &GatewayProcess| {
        gw.kubectl_ok(&[
            "get",
            "cm",
            "kube-root-ca.crt",
            "-n",
            "team",
            "-o",
            "jsonpath={.data.ca\\.crt}",
        ])
    };
    assert_eq!(ca_in_team(&gw), ca);
    // As a real cluster's controllers do: a deleted `default` ServiceAccount comes back (a new
    // object), and so does a `kube-root-ca.crt` deleted or changed.
    let uid_of_account = |gw: &GatewayProcess| {
        gw.kubectl_ok(&[
            "get",
            "sa",
            "default",
            "-n",
            "team",
            "-o",
            "jsonpath={.metadata.uid}",
        ])
    };
    let first = uid_of_account(&gw);
    gw.kubectl_ok(&["delete", "sa", "default", "-n", "team"]);
    let second = uid_of_account(&gw);
    assert!(
        !second.is_empty() && second != first,
        "{first} then {second}"
    );
    gw.kubectl_ok(&["delete", "cm", "kube-root-ca.crt", "-n", "team"]);
    assert_eq!(ca_in_team(&gw), ca);
    gw.kubectl_ok(&[
        "patch",
        "cm",
        "kube-root-ca.crt",
        "-n",
        "team",
        "--type=merge",
        "-p",
        r#"{"data":{"ca.crt":"edited"}}"#,
    ]);
    assert_eq!(ca_in_team(&gw), ca);

    gw.kubectl_ok(&["delete", "namespace", "team", "--timeout=20s"]);
    let gone = gw.kubectl_err(&["get", "sa", "default", "-n", "team"]);
    assert!(
        gone.contains("NotFound") || gone.contains("not found"),
        "{gone}"
    );

    // A restart finds everything there and writes nothing twice; the CA certificate still
    // says what the kubeconfig trusts.
    let (data_dir, port) = (gw.data_dir.clone(), gw.port);
    assert!(gw.stop().success());
    let serve = "--embedded-cluster=demo";
    let gw = GatewayProcess::start_with(&data_dir, "demo", port, &[serve]);
    let again = gw.get_json(&["svc", "kubernetes", "-n", "default"]);
    assert_eq!(again["metadata"]["uid"], uid);
    assert_eq!(
        gw.kubectl_ok(&["get", "sa", "-n", "kube-system", "-o", "name"])
            .lines()
            .filter(|l| *l == "serviceaccount/default")
            .count(),
        1
    );
    let republished = gw.kubectl_ok(&[
        "get",
        "cm",
        "kube-root-ca.crt",
        "-n",
        "kube-public",
        "-o",
        "jsonpath={.data.ca\\.crt}",
    ]);
    assert_eq!(republished, ca);
}

fn deployment(name: &str, replicas: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
}

#[test]
fn kubectl_scale_changes_replicas_through_the_scale_subresource() {
    let (dir, gw) = start();
    create(&gw, dir.path(), "web", deployment("web", 2));
    let out = gw.kubectl_ok(&["scale", "deployment", "web", "--replicas=4"]);
    assert!(out.contains("deployment.apps/web scaled"), "{out}");
    assert_eq!(
        gw.kubectl_ok(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "4"
    );
    // A precondition that does not hold is refused, and nothing changes.
    let err = gw.kubectl_err(&[
        "scale",
        "deployment",
        "web",
        "--current-replicas=3",
        "--replicas=1",
    ]);
    assert!(err.contains("Expected replicas to be 3, was 4"), "{err}");
    let raw = gw.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/apps/v1/namespaces/default/deployments/web/scale",
    ]);
    let scale: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 4);
    assert_eq!(scale["status"]["selector"], "app=web");
}

fn pod(name: &str, node: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}})
}

/// Marks Pod `name` running and ready, as a kubelet would.
fn run(gw: &GatewayProcess, name: &str) {
    gw.kubectl_ok(&[
        "patch",
        "pod",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
    ]);
}

#[test]
fn kubectl_drain_evicts_pods_and_honours_disruption_budgets() {
    let (dir, gw) = start();
    create(
        &gw,
        dir.path(),
        "objects",
        json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}},
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}},
            pod("free", "n1", json!({"app": "free"})),
            pod("guarded", "n2", json!({"app": "guarded"})),
            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"name": "guarded"},
             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}},
        ]}),
    );
    run(&gw, "free");
    run(&gw, "guarded");

    let out = gw.kubectl_ok(&["drain", "n1", "--force", "--timeout=20s"]);
    assert!(out.contains("node/n1 cordoned"), "{out}");
    assert!(out.contains("pod/free evicted"), "{out}");
    assert!(out.contains("node/n1 drained"), "{out}");
    assert_eq!(
        gw.kubectl_ok(&["get", "node", "n1", "-o", "jsonpath={.spec.unschedulable}"]),
        "true"
    );
    gw.kubectl_err(&["get", "pod", "free"]);

    // The only healthy Pod of a budget that needs one stays.
    let err = gw.kubectl_err(&["drain", "n2", "--force", "--timeout=3s"]);
    assert!(err.contains("disruption budget"), "{err}");
    gw.kubectl_ok(&["get", "pod", "guarded"]);
}

/// `kubectl certificate approve|deny` (protobuf bodies to `/approval`); a contradicting
/// decision is sent as kubectl would send it with `--force`, as JSON through `replace --raw`.
#[test]
fn certificate_requests_are_approved_and_denied_through_approval() {
    let (dir, gw) = start();
    let csr = |name: &str| {
        json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K",
                "signerName": "example.com/signer", "usages": ["client auth"]}})
    };
    create(
        &gw,
        dir.path(),
        "csrs",
        json!({"apiVersion": "v1", "kind": "List", "items": [csr("alice"), csr("bob")]}),
    );
    let decide = |name: &str, decision: &str| {
        let mut current = gw.get_json(&["csr", name]);
        let condition = json!({"type": decision, "status": "True", "reason": "KubectlApprove",
            "message": "decided by the test"});
        match current["status"]["conditions"].as_array_mut() {
            Some(conditions) => conditions.push(condition),
            None => current["status"]["conditions"] = json!([condition]),
        }
        let path = dir.path().join(format!("{name}-{decision}.json"));
        std::fs::write(&path, current.to_string()).unwrap();
        let url =
            format!("/apis/certificates.k8s.io/v1/certificatesigningrequests/{name}/approval");
        gw.kubectl(&["replace", "--raw", &url, "-f", path.to_str().unwrap()])
    };
    let out = gw.kubectl_ok(&["certificate", "approve", "alice"]);
    assert!(
        out.contains("certificatesigningrequest.certificates.k8s.io/alice approved"),
        "{out}"
    );
    let out = gw.kubectl_ok(&["certificate", "deny", "bob"]);
    assert!(
        out.contains("certificatesigningrequest.certificates.k8s.io/bob denied"),
        "{out}"
    );
    let condition = |name: &str| {
        gw.kubectl_ok(&[
            "get",
            "csr",
            name,
            "-o",
            "jsonpath={.status.conditions[*].type}",
        ])
    };
    assert_eq!(condition("alice"), "Approved");
    assert_eq!(condition("bob"), "Denied");
    // Approved and Denied exclude each other.
    let refused = decide("alice", "Denied");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(err.contains("mutually exclusive"), "{err}");
    assert_eq!(condition("alice"), "Approved");
    let table = gw.kubectl_ok(&["get", "csr", "alice"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "AGE",
            "SIGNERNAME",
            "REQUESTOR",
            "REQUESTEDDURATION",
            "CONDITION"
        ],
        "{table}"
    );
    assert!(table.contains("example.com/signer"), "{table}");
    // Who asked is the server's to say: the kubeconfig's user.
    let requester = gw.kubectl_ok(&["get", "csr", "alice", "-o", "jsonpath={.spec.username}"]);
    let whoami = gw.kubectl_ok(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    assert_eq!(requester, whoami);
}
