//! kubectl's everyday commands against an embedded cluster, each with its output checked as a
//! user reads it: server-side apply with a conflict, diff, wait, rollout status, label and
//! annotate, custom columns, events, auth can-i and certificate approve. The real
//! `worker-gateway` serves the cluster; the real kubectl drives it.

use gpustack_tests::embedded::GatewayProcess;

struct Cluster {
    dir: tempfile::TempDir,
    gw: GatewayProcess,
}

impl Cluster {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let gw = GatewayProcess::start(&dir.path().join("gw"), "everyday");
        Cluster { dir, gw }
    }

    /// `text` written to a file of the test's: its path.
    fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }

    fn ok(&self, args: &[&str]) -> String {
        self.gw.kubectl_ok(args)
    }

    /// kubectl's combined output and whether it succeeded.
    fn run(&self, args: &[&str]) -> (bool, String) {
        let out = self.gw.kubectl(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }
}

#[track_caller]
fn says(text: &str, what: &str) {
    assert!(text.contains(what), "expected {what:?} in:\n{text}");
}

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx:1.27}]
";

#[test]
fn server_side_apply_diff_label_and_custom_columns() {
    let c = Cluster::start();
    let manifest = c.file("web.yaml", DEPLOYMENT);
    let out = c.ok(&[
        "apply",
        "--server-side",
        "--field-manager=alice",
        "-f",
        &manifest,
    ]);
    says(&out, "deployment.apps/web serverside-applied");
    // Another manager changing alice's field conflicts, and names both.
    let bob = c.file(
        "bob.yaml",
        &DEPLOYMENT.replace("replicas: 2", "replicas: 5"),
    );
    let (ok, out) = c.run(&["apply", "--server-side", "--field-manager=bob", "-f", &bob]);
    assert!(!ok, "{out}");
    says(&out, "conflict");
    says(&out, "alice");
    says(&out, ".spec.replicas");
    // Forced, bob owns it.
    c.ok(&[
        "apply",
        "--server-side",
        "--field-manager=bob",
        "--force-conflicts",
        "-f",
        &bob,
    ]);
    let replicas = c.ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]);
    assert_eq!(replicas, "5");

    // diff: nothing for the live state, the change for a new image (exit status 1).
    let (same, out) = c.run(&["diff", "-f", &bob]);
    assert!(same, "no difference: {out}");
    let newer = c.file(
        "newer.yaml",
        &DEPLOYMENT.replace("nginx:1.27", "nginx:1.28"),
    );
    let (same, out) = c.run(&["diff", "-f", &newer]);
    assert!(!same, "a difference is exit status 1");
    says(&out, "-      - image: nginx:1.27");
    says(&out, "+      - image: nginx:1.28");

    // label and annotate: refused without --overwrite once set, changed with it.
    c.ok(&["label", "deploy", "web", "tier=front"]);
    let (ok, out) = c.run(&["label", "deploy", "web", "tier=back"]);
    assert!(!ok);
    says(&out, "already has a value (front)");
    c.ok(&["label", "deploy", "web", "tier=back", "--overwrite"]);
    c.ok(&["annotate", "deploy", "web", "owner=team-a"]);
    c.ok(&["annotate", "deploy", "web", "owner=team-b", "--overwrite"]);
    let columns = c.ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "custom-columns=NAME:.metadata.name,TIER:.metadata.labels.tier,OWNER:.metadata.annotations.owner,REPLICAS:.spec.replicas",
    ]);
    let rows: Vec<Vec<&str>> = columns
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["NAME", "TIER", "OWNER", "REPLICAS"],
            vec!["web", "back", "team-b", "5"]
        ]
    );
}

#[test]
fn wait_and_rollout_status_follow_a_status_the_test_writes() {
    let c = Cluster::start();
    let manifest = c.file("web.yaml", DEPLOYMENT);
    c.ok(&["apply", "-f", &manifest]);
    // No controller runs here: the test plays the deployment controller and writes the
    // status a finished rollout has, while kubectl waits on it.
    let mut rollout =
        c.gw.kubectl_command(&["rollout", "status", "deploy/web", "--timeout=60s"]);
    let rollout = rollout
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut wait = c.gw.kubectl_command(&[
        "wait",
        "--for=condition=Available",
        "deploy/web",
        "--timeout=60s",
    ]);
    let wait = wait.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let generation = c.ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    let status = format!(
        r#"{{"status":{{"observedGeneration":{generation},"replicas":2,"updatedReplicas":2,"readyReplicas":2,"availableReplicas":2,
        "conditions":[{{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","message":"up"}},
        {{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable","message":"done"}}]}}}}"#
    );
    c.ok(&[
        "patch",
        "deploy",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ]);
    let rollout = rollout.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&rollout.stdout);
    assert!(rollout.status.success(), "{text}");
    says(&text, "deployment \"web\" successfully rolled out");
    let wait = wait.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&wait.stdout);
    assert!(wait.status.success(), "{text}");
    says(&text, "deployment.apps/web condition met");
}

#[test]
fn events_can_i_and_certificate_approve() {
    let c = Cluster::start();
    // events: kubectl's own table of the namespace's Events.
    let event = c.file(
        "event.yaml",
        "apiVersion: v1
kind: Event
metadata: {name: web.1, namespace: default}
involvedObject: {kind: Deployment, name: web, namespace: default, apiVersion: apps/v1}
reason: ScalingReplicaSet
message: Scaled up replica set web-1 to 2
type: Normal
source: {component: deployment-controller}
firstTimestamp: \"2026-01-01T00:00:00Z\"
lastTimestamp: \"2026-01-01T00:00:00Z\"
count: 1
",
    );
    c.ok(&["create", "-f", &event]);
    let events = c.ok(&["events", "-n", "default"]);
    says(&events, "ScalingReplicaSet");
    says(&events, "Deployment/web");
    says(&events, "Scaled up replica set web-1 to 2");

    // auth can-i: the admin may; a ServiceAccount bound to nothing may not.
    assert_eq!(c.ok(&["auth", "can-i", "create", "pods"]).trim(), "yes");
    c.ok(&["create", "serviceaccount", "nobody"]);
    let (ok, out) = c.run(&[
        "auth",
        "can-i",
        "create",
        "pods",
        "--as=system:serviceaccount:default:nobody",
    ]);
    assert!(!ok, "no is exit status 1");
    assert_eq!(out.trim(), "no");

    // certificate approve: a CSR for a client certificate, approved and so marked.
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "jane");
    let csr = params.serialize_request(&key).unwrap().pem().unwrap();
    use base64::Engine;
    let request = base64::engine::general_purpose::STANDARD.encode(csr);
    let csr = c.file(
        "csr.yaml",
        &format!(
            "apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {{name: jane}}
spec:
  request: {request}
  signerName: kubernetes.io/kube-apiserver-client
  usages: [client auth]
"
        ),
    );
    c.ok(&["create", "-f", &csr]);
    let out = c.ok(&["certificate", "approve", "jane"]);
    says(
        &out,
        "certificatesigningrequest.certificates.k8s.io/jane approved",
    );
    let listed = c.ok(&["get", "csr", "jane"]);
    says(&listed, "Approved");
}
