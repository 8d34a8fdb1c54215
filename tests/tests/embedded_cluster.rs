//! End to end: the real `worker-gateway --embedded-cluster` process, driven by the real `kubectl`
//! with the kubeconfig the gateway writes, nothing else.

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::Stdio,
    sync::mpsc,
    time::Duration,
};

use gpustack_tests::embedded::{DEADLINE, GatewayProcess, kubectl_with};
use serde_json::Value;

fn crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds")
}

fn start() -> (tempfile::TempDir, GatewayProcess) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = GatewayProcess::start(&dir.path().join("data"), "demo");
    (dir, gw)
}

/// The arguments of `kubectl patch KIND NAME --type TYPE -p BODY`.
fn patch<'a>(kind: &'a str, name: &'a str, ty: &'a str, body: &'a str) -> [&'a str; 7] {
    ["patch", kind, name, "--type", ty, "-p", body]
}

/// The arguments of `kubectl apply --server-side`, then `flags`, then `-f FILE`.
fn server_side_apply<'a>(flags: &[&'a str], file: &'a str) -> Vec<&'a str> {
    let mut args = vec!["apply", "--server-side"];
    args.extend_from_slice(flags);
    args.extend(["-f", file]);
    args
}

const OBJECTS: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
  namespace: default
  labels: {app: web, tier: front}
data:
  greeting: hello
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: db-config
  namespace: default
  labels: {app: db}
data:
  size: "3"
---
apiVersion: worker.gpustack.ai/v1alpha1
kind: Devices
metadata:
  name: node-1
  labels: {pool: a}
spec: {}
"#;

const WORKLOADS: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: gpustack-test}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: dm, namespace: default}
spec:
  selector: {matchLabels: {app: dm}}
  template:
    metadata: {labels: {app: dm}}
    spec: {containers: [{name: dm, image: x}]}
"#;

fn apply_fixtures(gw: &GatewayProcess, dir: &std::path::Path) {
    let crds = crds_dir();
    let out = gw.kubectl_ok(&["apply", "-f", crds.to_str().unwrap()]);
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/devices.worker.gpustack.ai created"
        ),
        "{out}"
    );
    let out = gw.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/devices.worker.gpustack.ai",
        "--timeout=20s",
    ]);
    assert!(out.contains("condition met"), "{out}");
    let file = dir.join("objects.yaml");
    std::fs::write(&file, OBJECTS).unwrap();
    let out = gw.kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);
    assert!(out.contains("configmap/web-config created"), "{out}");
    assert!(
        out.contains("devices.worker.gpustack.ai/node-1 created"),
        "{out}"
    );
    // Applying again changes nothing.
    let out = gw.kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);
    assert!(out.contains("configmap/web-config unchanged"), "{out}");
}

#[test]
fn kubectl_apply_get_and_output_formats() {
    let (dir, gw) = start();
    apply_fixtures(&gw, dir.path());

    let table = gw.kubectl_ok(&["get", "configmaps"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "DATA", "AGE"], "{table}");
    assert!(
        table.lines().any(|l| l.starts_with("web-config ")),
        "{table}"
    );

    let yaml = gw.kubectl_ok(&["get", "configmap", "web-config", "-o", "yaml"]);
    assert!(
        yaml.contains("kind: ConfigMap")
            && yaml.contains("greeting: hello")
            && yaml.contains("resourceVersion:"),
        "{yaml}"
    );
    let json: Value =
        serde_json::from_str(&gw.kubectl_ok(&["get", "devices", "node-1", "-o", "json"])).unwrap();
    assert_eq!(json["kind"], "Devices");
    assert_eq!(json["metadata"]["generation"], 1);
    assert!(
        json["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| u.len() == 36)
    );

    let selected = gw.kubectl_ok(&["get", "cm", "-l", "app in (web),tier", "-o", "name"]);
    assert_eq!(selected.trim(), "configmap/web-config");
    // `!=` also selects what has no such label: the namespace's CA, as on any cluster.
    let selected = gw.kubectl_ok(&["get", "cm", "-l", "app!=web", "-o", "name"]);
    assert_eq!(
        selected.trim(),
        "configmap/db-config\nconfigmap/kube-root-ca.crt"
    );
    let by_field = gw.kubectl_ok(&[
        "get",
        "cm",
        "--field-selector",
        "metadata.name=db-config",
        "-o",
        "name",
    ]);
    assert_eq!(by_field.trim(), "configmap/db-config");

    gw.kubectl_ok(&["create", "namespace", "team-a"]);
    gw.kubectl_ok(&[
        "create",
        "configmap",
        "other",
        "-n",
        "team-a",
        "--from-literal=k=v",
    ]);
    let all = gw.kubectl_ok(&["get", "cm", "-A"]);
    let header: Vec<&str> = all.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAMESPACE", "NAME", "DATA", "AGE"], "{all}");
    assert!(
        all.lines()
            .any(|l| l.split_whitespace().take(2).eq(["team-a", "other"])),
        "{all}"
    );
    let err = gw.kubectl_err(&[
        "create",
        "configmap",
        "x",
        "-n",
        "missing",
        "--from-literal=k=v",
    ]);
    assert!(err.contains("namespaces \"missing\" not found"), "{err}");

    let devices = gw.kubectl_ok(&["get", "devices", "-o", "wide"]);
    assert!(
        devices.lines().any(|l| l.starts_with("node-1 ")),
        "{devices}"
    );
    let resources = gw.kubectl_ok(&["api-resources"]);
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("devices ") && l.contains("worker.gpustack.ai/v1alpha1")),
        "{resources}"
    );
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("configmaps ") && l.contains(" cm ")),
        "{resources}"
    );
    let version: Value =
        serde_json::from_str(&gw.kubectl_ok(&["get", "--raw", "/version"])).unwrap();
    assert_eq!(version["major"], "1");
    // No RBAC: the admin may do anything, and says who it is.
    assert_eq!(
        gw.kubectl_ok(&["auth", "can-i", "delete", "nodes"]).trim(),
        "yes"
    );
    assert!(gw.kubectl_ok(&["auth", "whoami"]).contains("admin"));
    let crds = gw.kubectl_ok(&["get", "crd"]);
    assert!(crds.contains("modelartifacts.worker.gpustack.ai"), "{crds}");
    // RBAC and workload kinds are stored as given, so the operator's own manifests apply.
    let manifests = dir.path().join("workloads.yaml");
    std::fs::write(&manifests, WORKLOADS).unwrap();
    let out = gw.kubectl_ok(&["apply", "-f", manifests.to_str().unwrap()]);
    assert!(
        out.contains("clusterrole.rbac.authorization.k8s.io/gpustack-test created"),
        "{out}"
    );
    assert!(out.contains("daemonset.apps/dm created"), "{out}");
    assert_eq!(
        gw.kubectl_ok(&["get", "ds", "-o", "name"]).trim(),
        "daemonset.apps/dm"
    );

    let described = gw.kubectl_ok(&["describe", "cm", "web-config"]);
    assert!(
        described.contains("web-config")
            && described.contains("greeting")
            && described.contains("app=web"),
        "{described}"
    );

    let pod = dir.path().join("pod.yaml");
    std::fs::write(&pod, "apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec:\n  nodeName: node-1\n  containers: [{name: c, image: busybox}, {name: d, image: nginx}]\n").unwrap();
    gw.kubectl_ok(&["apply", "-f", pod.to_str().unwrap()]);
    let narrow = gw.kubectl_ok(&["get", "pods"]);
    assert!(!narrow.lines().next().unwrap().contains("NODE"), "{narrow}");
    let wide = gw.kubectl_ok(&["get", "pods", "-o", "wide"]);
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert!(header.contains(&"NODE"), "{wide}");
    assert!(wide.lines().nth(1).unwrap().contains("node-1"), "{wide}");
    // A Pod's containers are settled at creation: adding one is refused as kube-apiserver
    // refuses it.
    std::fs::write(&pod, "apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec:\n  nodeName: node-1\n  containers: [{name: c, image: busybox}, {name: d, image: nginx}, {name: e, image: x}]\n").unwrap();
    let refused = gw.kubectl(&["apply", "-f", pod.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains("pod updates may not change fields other than"),
        "{err}"
    );
    // Re-applying with one image changed: kubectl sends a strategic merge patch that names only
    // that container; the other container must stay.
    std::fs::write(&pod, "apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec:\n  nodeName: node-1\n  containers: [{name: c, image: busybox:2}, {name: d, image: nginx}]\n").unwrap();
    assert!(
        gw.kubectl_ok(&["apply", "-f", pod.to_str().unwrap()])
            .contains("pod/p1 configured")
    );
    let images = gw.kubectl_ok(&[
        "get",
        "pod",
        "p1",
        "-o",
        "jsonpath={.spec.containers[*].image}",
    ]);
    assert_eq!(images.trim(), "busybox:2 nginx");
    let on_node = gw.kubectl_ok(&[
        "get",
        "pods",
        "--field-selector",
        "spec.nodeName=node-1",
        "-o",
        "name",
    ]);
    assert_eq!(on_node.trim(), "pod/p1");

    // Deleting a namespace takes its objects along; kubectl waits until it is gone.
    let out = gw.kubectl_ok(&["delete", "namespace", "team-a", "--timeout=20s"]);
    assert!(out.contains("namespace \"team-a\" deleted"), "{out}");
    assert!(!gw.kubectl_ok(&["get", "cm", "-A"]).contains("team-a"));

    let missing = gw.kubectl_err(&["get", "cm", "nope"]);
    assert!(
        missing.contains("Error from server (NotFound): configmaps \"nope\" not found"),
        "{missing}"
    );
}

#[test]
fn kubectl_label_annotate_patch_and_delete_with_a_finalizer() {
    let (dir, gw) = start();
    apply_fixtures(&gw, dir.path());

    assert!(
        gw.kubectl_ok(&["label", "cm", "web-config", "env=prod"])
            .contains("configmap/web-config labeled")
    );
    assert!(
        gw.kubectl_ok(&["annotate", "devices", "node-1", "note=checked"])
            .contains("annotated")
    );
    gw.kubectl_ok(&patch(
        "cm",
        "web-config",
        "merge",
        r#"{"data":{"extra":"1"}}"#,
    ));
    gw.kubectl_ok(&patch(
        "cm",
        "web-config",
        "json",
        r#"[{"op":"replace","path":"/data/greeting","value":"hi"}]"#,
    ));
    let cm: Value =
        serde_json::from_str(&gw.kubectl_ok(&["get", "cm", "web-config", "-o", "json"])).unwrap();
    assert_eq!(cm["metadata"]["labels"]["env"], "prod");
    assert_eq!(cm["data"]["extra"], "1");
    assert_eq!(cm["data"]["greeting"], "hi");
    let d: Value =
        serde_json::from_str(&gw.kubectl_ok(&["get", "devices", "node-1", "-o", "json"])).unwrap();
    assert_eq!(d["metadata"]["annotations"]["note"], "checked");
    let bad = gw.kubectl_err(&patch(
        "cm",
        "web-config",
        "json",
        r#"[{"op":"test","path":"/data/greeting","value":"nope"}]"#,
    ));
    assert!(
        bad.contains("The request is invalid") && bad.contains("did not match"),
        "{bad}"
    );

    // Unknown fields of a custom kind: refused under kubectl's default (strict) validation,
    // warned about and pruned with --validate=warn.
    let typo = dir.path().join("typo.yaml");
    std::fs::write(
        &typo,
        "apiVersion: worker.gpustack.ai/v1alpha1\nkind: Devices\nmetadata: {name: node-typo}\nspec: {typo: 1}\n",
    )
    .unwrap();
    let refused = gw.kubectl_err(&["apply", "-f", typo.to_str().unwrap()]);
    assert!(
        refused.contains("strict decoding error: unknown field \"spec.typo\""),
        "{refused}"
    );
    let out = gw.kubectl(&["apply", "--validate=warn", "-f", typo.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Warning: unknown field \"spec.typo\""),
        "{out:?}"
    );
    let spec = gw.kubectl_ok(&["get", "devices", "node-typo", "-o", "jsonpath={.spec}"]);
    assert_eq!(spec.trim(), "{}");

    gw.kubectl_ok(&patch(
        "devices",
        "node-1",
        "merge",
        r#"{"metadata":{"finalizers":["gpustack.ai/hold"]}}"#,
    ));
    let out = gw.kubectl_ok(&["delete", "devices", "node-1", "--wait=false"]);
    assert!(out.contains("deleted"), "{out}");
    let ts = gw.kubectl_ok(&[
        "get",
        "devices",
        "node-1",
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(
        !ts.trim().is_empty(),
        "deletionTimestamp must be set while a finalizer is pending"
    );
    gw.kubectl_ok(&patch(
        "devices",
        "node-1",
        "json",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ));
    let gone = gw.kubectl_err(&["get", "devices", "node-1"]);
    assert!(gone.contains("NotFound"), "{gone}");

    // `kubectl patch` took web-config's greeting: as on Kubernetes, taking it back is forced.
    let out = gw.kubectl_ok(&server_side_apply(
        &["--force-conflicts"],
        dir.path().join("objects.yaml").to_str().unwrap(),
    ));
    assert!(
        out.contains("devices.worker.gpustack.ai/node-1 serverside-applied"),
        "{out}"
    );
    let out = gw.kubectl_ok(&["delete", "cm", "-l", "app"]);
    assert!(
        out.contains("configmap \"web-config\" deleted")
            && out.contains("configmap \"db-config\" deleted"),
        "{out}"
    );
}

#[test]
fn kubectl_get_watch_sees_changes_and_ends_at_the_request_timeout() {
    let (_dir, gw) = start();
    gw.kubectl_ok(&["create", "configmap", "first", "--from-literal=k=v"]);
    let started = std::time::Instant::now();
    let mut child = gw
        .kubectl_command(&["get", "configmaps", "--watch", "--request-timeout=4s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let wait_line = |want: &str| loop {
        let line = rx
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|_| panic!("no watch line with {want}"));
        if line.starts_with(want) {
            return line;
        }
    };
    wait_line("first ");
    gw.kubectl_ok(&["create", "configmap", "second", "--from-literal=k=v"]);
    wait_line("second ");
    let status =
        gpustack_tests::wait::wait_until("kubectl get -w to end", Duration::from_secs(20), || {
            child.try_wait().unwrap()
        });
    assert!(status.success(), "kubectl get -w exited with {status}");
    // It ended at the timeout, not before: a server closing watches early must not pass.
    let lasted = started.elapsed();
    assert!(
        lasted >= Duration::from_secs(4),
        "the watch ended after {lasted:?}, before its 4s timeout"
    );
}

#[test]
fn restart_keeps_acknowledged_objects_and_versions_keep_increasing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let gw = GatewayProcess::start(&data, "demo");
    let crds = crds_dir();
    gw.kubectl_ok(&["apply", "-f", crds.to_str().unwrap()]);
    let first: u64 = gw
        .kubectl_ok(&[
            "create",
            "configmap",
            "first",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
        .trim()
        .parse()
        .unwrap();

    // A writer keeps creating objects; the gateway is killed (SIGKILL) in the middle of it.
    let (tx, rx) = mpsc::channel::<(String, u64)>();
    let flags = gw.kubectl_flags();
    let thread = std::thread::spawn(move || {
        for i in 0.. {
            let name = format!("w{i}");
            let out = kubectl_with(
                &flags,
                &[
                    "create",
                    "configmap",
                    &name,
                    "-o",
                    "jsonpath={.metadata.resourceVersion}",
                ],
            )
            .output()
            .unwrap();
            if !out.status.success() {
                break;
            }
            let rv = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
            if tx.send((name, rv)).is_err() {
                break;
            }
        }
    });
    let mut acked = Vec::new();
    while acked.len() < 5 {
        acked.push(
            rx.recv_timeout(DEADLINE)
                .expect("the writer makes progress"),
        );
    }
    assert!(!gw.crash().success());
    thread.join().unwrap();
    acked.extend(rx.try_iter());
    let mut last_rv = first;
    for (_, rv) in &acked {
        assert!(*rv > last_rv, "versions must increase: {acked:?}");
        last_rv = *rv;
    }

    // Every acknowledged write survived the crash; versions keep increasing.
    let gw = GatewayProcess::start(&data, "demo");
    // CRD kinds are served again straight away.
    let devices = gw.kubectl_ok(&["get", "devices"]);
    assert!(devices.is_empty(), "{devices}");
    gw.kubectl_ok(&["get", "crd", "devices.worker.gpustack.ai"]);
    let names = gw.kubectl_ok(&["get", "cm", "-o", "name"]);
    for (name, _) in &acked {
        assert!(
            names.lines().any(|l| l == format!("configmap/{name}")),
            "{name} lost: {names}"
        );
    }
    let rv: u64 = gw
        .kubectl_ok(&[
            "create",
            "configmap",
            "after",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
        .trim()
        .parse()
        .unwrap();
    assert!(rv > last_rv, "{rv} <= {last_rv}");

    // A clean stop exits 0 and the next start serves the same objects.
    let status = gw.stop();
    assert!(status.success(), "SIGTERM must exit cleanly: {status}");
    let gw = GatewayProcess::start(&data, "demo");
    gw.kubectl_ok(&["get", "cm", "after", "first"]);
    let rv2: u64 = gw
        .kubectl_ok(&[
            "create",
            "configmap",
            "later",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
        .trim()
        .parse()
        .unwrap();
    assert!(rv2 > rv);
}

#[test]
fn unix_socket_serves_plain_http_to_its_owner_only() {
    use std::{
        io::{Read, Write},
        os::unix::{fs::PermissionsExt, net::UnixStream},
    };
    let (_dir, gw) = start();
    let mode = std::fs::metadata(gw.socket()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {mode:o}");
    let mut conn = UnixStream::connect(gw.socket()).unwrap();
    conn.write_all(
        b"GET /api/v1/namespaces/default HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut response = String::new();
    conn.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("\"kind\":\"Namespace\""), "{response}");
    // HTTPS with a wrong token is refused.
    let text = std::fs::read_to_string(gw.kubeconfig()).unwrap();
    let token = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("a token line")
        .to_owned();
    let kubeconfig = text.replace(&token, "not-the-token");
    let anonymous = gw.data_dir.join("anonymous.kubeconfig");
    std::fs::write(&anonymous, kubeconfig).unwrap();
    let flags = [
        format!("--kubeconfig={}", anonymous.display()),
        format!("--cache-dir={}", gw.cache_dir.display()),
    ];
    let out = kubectl_with(&flags, &["get", "ns"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("You must be logged in to the server"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn kubectl_server_side_apply_conflicts_until_forced() {
    let (dir, gw) = start();
    let manifest = |name: &str, owner: &str, color: &str| {
        let file = dir.path().join(name);
        std::fs::write(
            &file,
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: ssa, namespace: default}}\ndata: {{owner: {owner}, color: {color}}}\n"
            ),
        )
        .unwrap();
        file.to_str().unwrap().to_owned()
    };
    let red = manifest("red.yaml", "one", "red");
    let blue = manifest("blue.yaml", "one", "blue");
    let out = gw.kubectl_ok(&server_side_apply(&[], &red));
    assert!(out.contains("configmap/ssa serverside-applied"), "{out}");

    // Another manager changing colour: refused, naming the owner and the way out.
    let refused = gw.kubectl_err(&server_side_apply(&["--field-manager=other"], &blue));
    assert!(
        refused.contains("Apply failed with 1 conflict: conflict with \"kubectl\": .data.color")
            && refused.contains("--force-conflicts"),
        "{refused}"
    );
    let color = gw.kubectl_ok(&["get", "cm", "ssa", "-o", "jsonpath={.data.color}"]);
    assert_eq!(color, "red");

    // Forced, it goes through and the colour changes owner; `owner` stays shared.
    let out = gw.kubectl_ok(&server_side_apply(
        &["--field-manager=other", "--force-conflicts"],
        &blue,
    ));
    assert!(out.contains("configmap/ssa serverside-applied"), "{out}");
    let cm: Value = serde_json::from_str(&gw.kubectl_ok(&[
        "get",
        "cm",
        "ssa",
        "-o",
        "json",
        "--show-managed-fields",
    ]))
    .unwrap();
    assert_eq!(cm["data"]["color"], "blue");
    let fields = |manager: &str| {
        cm["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["manager"] == manager)
            .map(|e| e["fieldsV1"]["f:data"].clone())
    };
    assert_eq!(
        fields("kubectl"),
        Some(serde_json::json!({"f:owner": {}})),
        "{cm}"
    );
    assert_eq!(
        fields("other"),
        Some(serde_json::json!({"f:color": {}, "f:owner": {}})),
        "{cm}"
    );

    // `kubectl edit`, then an apply changing what the edit set: a conflict with the editor.
    let edited = gw
        .kubectl_command(&["edit", "cm", "ssa"])
        .env("KUBE_EDITOR", "sed -i s/blue/green/")
        .env("EDITOR", "sed -i s/blue/green/")
        .output()
        .unwrap();
    assert!(edited.status.success(), "{edited:?}");
    let refused = gw.kubectl_err(&server_side_apply(&["--field-manager=other"], &blue));
    assert!(
        refused.contains(
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.color"
        ),
        "{refused}"
    );

    // `kubectl patch` likewise.
    gw.kubectl_ok(&patch("cm", "ssa", "merge", r#"{"data":{"owner":"two"}}"#));
    let refused = gw.kubectl_err(&server_side_apply(&[], &red));
    assert!(
        refused.contains("Apply failed with 2 conflicts")
            && refused.contains("conflicts with \"kubectl-edit\" using v1:\n- .data.color")
            && refused.contains("conflicts with \"kubectl-patch\" using v1:\n- .data.owner"),
        "{refused}"
    );
    gw.kubectl_ok(&server_side_apply(&["--force-conflicts"], &red));
    let data = gw.kubectl_ok(&["get", "cm", "ssa", "-o", "jsonpath={.data}"]);
    assert_eq!(
        serde_json::from_str::<Value>(&data).unwrap(),
        serde_json::json!({"owner": "one", "color": "red"})
    );
}

#[test]
fn kubectl_apply_of_an_invalid_custom_resource_is_refused_naming_the_field() {
    let (dir, gw) = start();
    let crd = dir.path().join("crd.yaml");
    std::fs::write(
        &crd,
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [replicas]
            properties:
              replicas: {type: integer, minimum: 1}
              mode: {type: string, enum: [fast, slow]}
"#,
    )
    .unwrap();
    gw.kubectl_ok(&["apply", "-f", crd.to_str().unwrap()]);
    gw.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=20s",
    ]);
    let widget = dir.path().join("widget.yaml");
    std::fs::write(
        &widget,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {replicas: three, mode: warp}\n",
    )
    .unwrap();
    let refused = gw.kubectl_err(&["apply", "-f", widget.to_str().unwrap()]);
    assert!(
        refused.contains("is invalid:")
            && refused.contains(
                r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
            )
            && refused.contains(r#"spec.mode: Unsupported value: "warp""#),
        "{refused}"
    );
    let listed = gw.kubectl_ok(&["get", "widgets", "-o", "name"]);
    assert_eq!(listed.trim(), "", "nothing was created");
}
