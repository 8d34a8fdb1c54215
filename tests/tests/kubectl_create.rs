//! End to end: the `kubectl create ...` family, `run`, `expose`, `set image`, `label` and
//! `annotate` against an embedded cluster. kubectl's typed clients send these objects as
//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`); each test asserts on kubectl's
//! own output and on the stored object read back as JSON, so a field lost in decoding fails.
//! One test reads objects, lists and a watch back as protobuf over the unix socket and decodes
//! them with k8s-pb.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use gpustack_tests::embedded::{GatewayProcess, write_file};
use prost::Message as _;
use serde_json::{Value, json};

fn start(name: &str) -> (tempfile::TempDir, GatewayProcess) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = GatewayProcess::start(&dir.path().join("gw"), name);
    (dir, gw)
}

#[test]
fn workloads_created_by_kubectl_keep_every_field_it_sent() {
    let (_dir, gw) = start("workloads");

    let out = gw.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=3",
        "--port=80",
    ]);
    assert_eq!(out.trim(), "deployment.apps/web created");
    let d = gw.get_json(&["deployment", "web"]);
    assert_eq!(d["spec"]["replicas"], json!(3), "{d}");
    assert_eq!(d["spec"]["selector"]["matchLabels"], json!({"app": "web"}));
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], json!("nginx"), "{d}");
    assert_eq!(c["ports"][0]["containerPort"], json!(80), "{d}");
    // Go writes unset strings and times as zero values; none of them is stored.
    assert!(d["metadata"].get("generateName").is_none(), "{d}");
    assert!(
        d["spec"]["template"]["metadata"]
            .get("creationTimestamp")
            .is_none(),
        "{d}"
    );
    assert!(
        gw.kubectl_ok(&["get", "deployments"]).contains("web"),
        "kubectl get lists it"
    );

    // A zero kubectl sends is a zero stored, not a field dropped (and defaulted to 1).
    gw.kubectl_ok(&[
        "create",
        "deployment",
        "idle",
        "--image=nginx",
        "--replicas=0",
    ]);
    let idle = gw.get_json(&["deployment", "idle"]);
    assert_eq!(idle["spec"]["replicas"], json!(0), "{idle}");

    let out = gw.kubectl_ok(&[
        "create",
        "job",
        "once",
        "--image=busybox",
        "--",
        "echo",
        "hi",
    ]);
    assert_eq!(out.trim(), "job.batch/once created");
    let job = gw.get_json(&["job", "once"]);
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], json!("busybox"), "{job}");
    assert_eq!(c["command"], json!(["echo", "hi"]), "{job}");
    assert_eq!(
        job["spec"]["template"]["spec"]["restartPolicy"],
        json!("Never")
    );

    let out = gw.kubectl_ok(&[
        "create",
        "cronjob",
        "tick",
        "--image=busybox",
        "--schedule=*/5 * * * *",
        "--",
        "date",
    ]);
    assert_eq!(out.trim(), "cronjob.batch/tick created");
    let cj = gw.get_json(&["cronjob", "tick"]);
    assert_eq!(cj["spec"]["schedule"], json!("*/5 * * * *"), "{cj}");
    let c = &cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["command"], json!(["date"]), "{cj}");
    for name in ["cronjobs", "cj", "cronjob.batch"] {
        let table = gw.kubectl_ok(&["get", name]);
        assert!(table.contains("tick"), "kubectl get {name}: {table}");
    }
    assert!(
        gw.kubectl_ok(&["get", "all"])
            .contains("cronjob.batch/tick")
    );
    // Discovery lists the kinds these commands need, with their short names.
    let resources = gw.kubectl_ok(&["api-resources", "--no-headers"]);
    let listed = |row: &[&str]| {
        resources
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == row)
    };
    for row in [
        &["cronjobs", "cj", "batch/v1", "true", "CronJob"][..],
        &["resourcequotas", "quota", "v1", "true", "ResourceQuota"],
        &[
            "ingresses",
            "ing",
            "networking.k8s.io/v1",
            "true",
            "Ingress",
        ],
        &[
            "ingressclasses",
            "networking.k8s.io/v1",
            "false",
            "IngressClass",
        ],
    ] {
        assert!(listed(row), "{row:?} in {resources}");
    }

    let out = gw.kubectl_ok(&[
        "run",
        "solo",
        "--image=nginx",
        "--port=8080",
        "--labels=run=solo",
    ]);
    assert_eq!(out.trim(), "pod/solo created");
    let pod = gw.get_json(&["pod", "solo"]);
    let c = &pod["spec"]["containers"][0];
    assert_eq!((&c["name"], &c["image"]), (&json!("solo"), &json!("nginx")));
    assert_eq!(c["ports"][0]["containerPort"], json!(8080), "{pod}");
    assert_eq!(pod["metadata"]["labels"], json!({"run": "solo"}));

    let out = gw.kubectl_ok(&[
        "expose",
        "deployment",
        "web",
        "--port=80",
        "--target-port=8080",
    ]);
    assert_eq!(out.trim(), "service/web exposed");
    let svc = gw.get_json(&["service", "web"]);
    assert_eq!(svc["spec"]["selector"], json!({"app": "web"}), "{svc}");
    assert_eq!(svc["spec"]["ports"][0]["port"], json!(80), "{svc}");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], json!(8080), "{svc}");

    let out = gw.kubectl_ok(&["set", "image", "deployment/web", "nginx=nginx:1.27"]);
    assert_eq!(out.trim(), "deployment.apps/web image updated");
    let d = gw.get_json(&["deployment", "web"]);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        json!("nginx:1.27")
    );
    assert_eq!(
        d["spec"]["replicas"],
        json!(3),
        "set image keeps the rest: {d}"
    );
}

#[test]
fn services_secrets_rbac_and_policy_created_by_kubectl() {
    let (_dir, gw) = start("policy");

    let out = gw.kubectl_ok(&["create", "service", "clusterip", "api", "--tcp=80:8080"]);
    assert_eq!(out.trim(), "service/api created");
    let svc = gw.get_json(&["service", "api"]);
    assert_eq!(svc["spec"]["type"], json!("ClusterIP"), "{svc}");
    let port = &svc["spec"]["ports"][0];
    assert_eq!(
        (&port["port"], &port["targetPort"]),
        (&json!(80), &json!(8080)),
        "{svc}"
    );
    assert_eq!(port["name"], json!("80-8080"), "{svc}");

    let out = gw.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "creds",
        "--from-literal=password=s3cr3t",
        "--from-literal=empty=",
    ]);
    assert_eq!(out.trim(), "secret/creds created");
    let secret = gw.get_json(&["secret", "creds"]);
    // Bytes are base64 in JSON, an empty value is kept.
    assert_eq!(
        secret["data"],
        json!({"password": "czNjcjN0", "empty": ""}),
        "{secret}"
    );

    let out = gw.kubectl_ok(&[
        "create",
        "role",
        "reader",
        "--verb=get,list",
        "--resource=pods",
    ]);
    assert_eq!(out.trim(), "role.rbac.authorization.k8s.io/reader created");
    let role = gw.get_json(&["role", "reader"]);
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}])
    );
    let out = gw.kubectl_ok(&[
        "create",
        "rolebinding",
        "read",
        "--role=reader",
        "--user=alice",
    ]);
    assert_eq!(
        out.trim(),
        "rolebinding.rbac.authorization.k8s.io/read created"
    );
    let rb = gw.get_json(&["rolebinding", "read"]);
    assert_eq!(
        rb["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"})
    );
    assert_eq!(rb["subjects"][0]["name"], json!("alice"), "{rb}");
    assert_eq!(rb["subjects"][0]["kind"], json!("User"), "{rb}");

    let out = gw.kubectl_ok(&[
        "create",
        "clusterrole",
        "node-reader",
        "--verb=get,watch",
        "--resource=nodes",
    ]);
    assert_eq!(
        out.trim(),
        "clusterrole.rbac.authorization.k8s.io/node-reader created"
    );
    let cr = gw.get_json(&["clusterrole", "node-reader"]);
    assert_eq!(cr["rules"][0]["resources"], json!(["nodes"]), "{cr}");
    assert_eq!(cr["rules"][0]["verbs"], json!(["get", "watch"]), "{cr}");
    let out = gw.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "node-readers",
        "--clusterrole=node-reader",
        "--group=ops",
    ]);
    assert_eq!(
        out.trim(),
        "clusterrolebinding.rbac.authorization.k8s.io/node-readers created"
    );
    let crb = gw.get_json(&["clusterrolebinding", "node-readers"]);
    assert_eq!(crb["subjects"][0]["kind"], json!("Group"), "{crb}");
    assert_eq!(crb["roleRef"]["name"], json!("node-reader"), "{crb}");
    // The binding takes effect: alice may list pods in default, not secrets.
    assert_eq!(
        gw.kubectl(&["auth", "can-i", "list", "pods", "--as=alice"])
            .stdout,
        b"yes\n"
    );

    let out = gw.kubectl_ok(&[
        "create",
        "priorityclass",
        "high",
        "--value=1000",
        "--description=important",
        "--preemption-policy=Never",
    ]);
    assert_eq!(out.trim(), "priorityclass.scheduling.k8s.io/high created");
    let pc = gw.get_json(&["priorityclass", "high"]);
    assert_eq!(pc["value"], json!(1000), "{pc}");
    assert_eq!(pc["description"], json!("important"));
    assert_eq!(pc["preemptionPolicy"], json!("Never"));
    // globalDefault is false, and a false kubectl sent is kept.
    assert_eq!(pc["globalDefault"], json!(false), "{pc}");

    let out = gw.kubectl_ok(&[
        "create",
        "poddisruptionbudget",
        "web-pdb",
        "--selector=app=web",
        "--min-available=50%",
    ]);
    assert_eq!(out.trim(), "poddisruptionbudget.policy/web-pdb created");
    let pdb = gw.get_json(&["pdb", "web-pdb"]);
    assert_eq!(pdb["spec"]["minAvailable"], json!("50%"), "{pdb}");
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        json!({"app": "web"})
    );

    let out = gw.kubectl_ok(&["create", "quota", "small", "--hard=cpu=1,memory=1G,pods=2"]);
    assert_eq!(out.trim(), "resourcequota/small created");
    let quota = gw.get_json(&["quota", "small"]);
    assert_eq!(
        quota["spec"]["hard"],
        json!({"cpu": "1", "memory": "1G", "pods": "2"}),
        "{quota}"
    );
    assert!(gw.kubectl_ok(&["get", "resourcequotas"]).contains("small"));

    let out = gw.kubectl_ok(&[
        "create",
        "ingress",
        "site",
        "--rule=example.com/shop*=shop:8080",
        "--class=default",
    ]);
    assert_eq!(out.trim(), "ingress.networking.k8s.io/site created");
    let ing = gw.get_json(&["ingress", "site"]);
    assert_eq!(ing["spec"]["ingressClassName"], json!("default"), "{ing}");
    let rule = &ing["spec"]["rules"][0];
    assert_eq!(rule["host"], json!("example.com"), "{ing}");
    let path = &rule["http"]["paths"][0];
    assert_eq!(path["path"], json!("/shop"), "{ing}");
    assert_eq!(path["pathType"], json!("Prefix"), "{ing}");
    assert_eq!(
        path["backend"]["service"],
        json!({"name": "shop", "port": {"number": 8080}}),
        "{ing}"
    );
    assert!(gw.kubectl_ok(&["get", "ing"]).contains("site"));

    // label and annotate on several kinds.
    for target in [
        "service/api",
        "secret/creds",
        "role/reader",
        "clusterrole/node-reader",
        "priorityclass/high",
        "pdb/web-pdb",
        "quota/small",
        "ingress/site",
    ] {
        let out = gw.kubectl_ok(&["label", target, "tier=front"]);
        assert!(out.trim().ends_with(" labeled"), "{target}: {out}");
        let out = gw.kubectl_ok(&["annotate", target, "owner=team-a"]);
        assert!(out.trim().ends_with(" annotated"), "{target}: {out}");
        let obj = gw.get_json(&[target]);
        assert_eq!(
            obj["metadata"]["labels"]["tier"],
            json!("front"),
            "{target}"
        );
        assert_eq!(
            obj["metadata"]["annotations"]["owner"],
            json!("team-a"),
            "{target}"
        );
    }
    let listed = gw.kubectl_ok(&[
        "get",
        "secrets,services,roles",
        "-l",
        "tier=front",
        "-o",
        "name",
    ]);
    assert!(
        listed.contains("secret/creds") && listed.contains("service/api"),
        "{listed}"
    );
}

/// `GET path` over the gateway's plain-HTTP unix socket with `accept`: status and body.
fn raw_get(gw: &GatewayProcess, path: &str, accept: &str) -> (String, String, Vec<u8>) {
    raw_request(gw, "GET", path, accept, "")
}

/// `method path` with a JSON `body` over the gateway's unix socket: status, head and body.
fn raw_request(
    gw: &GatewayProcess,
    method: &str,
    path: &str,
    accept: &str,
    body: &str,
) -> (String, String, Vec<u8>) {
    let mut s = UnixStream::connect(gw.socket()).expect("the gateway's socket");
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: gateway\r\nAccept: {accept}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("request written");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("response read");
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (status, head, raw[end + 4..].to_vec())
}

fn unwrap_envelope(body: &[u8]) -> k8s_pb::apimachinery::pkg::runtime::Unknown {
    let rest = body.strip_prefix(b"k8s\0").expect("the protobuf magic");
    k8s_pb::apimachinery::pkg::runtime::Unknown::decode(rest).expect("a runtime.Unknown")
}

#[test]
fn protobuf_only_clients_are_answered_in_protobuf() {
    let (dir, gw) = start("answers");
    gw.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=2",
    ]);
    let pb = "application/vnd.kubernetes.protobuf";

    let (status, head, body) = raw_get(&gw, "/apis/apps/v1/namespaces/default/deployments/web", pb);
    assert_eq!(status, "200", "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("content-type: {pb}")),
        "{head}"
    );
    let unknown = unwrap_envelope(&body);
    let type_meta = unknown.type_meta.expect("a type");
    assert_eq!(type_meta.api_version.as_deref(), Some("apps/v1"));
    assert_eq!(type_meta.kind.as_deref(), Some("Deployment"));
    let d = k8s_pb::api::apps::v1::Deployment::decode(unknown.raw.as_deref().unwrap_or_default())
        .expect("k8s-pb reads the Deployment");
    let spec = d.spec.expect("a spec");
    assert_eq!(spec.replicas, Some(2));
    let containers = spec
        .template
        .and_then(|t| t.spec)
        .expect("a pod spec")
        .containers;
    assert_eq!(containers[0].image.as_deref(), Some("nginx"));
    let meta = d.metadata.expect("metadata");
    assert_eq!(meta.name.as_deref(), Some("web"));
    assert!(meta.creation_timestamp.and_then(|t| t.seconds).unwrap_or(0) > 1_600_000_000);

    gw.kubectl_ok(&["create", "deployment", "api", "--image=nginx"]);
    let (status, _, body) = raw_get(&gw, "/apis/apps/v1/namespaces/default/deployments", pb);
    assert_eq!(status, "200");
    let list = k8s_pb::api::apps::v1::DeploymentList::decode(
        unwrap_envelope(&body).raw.as_deref().unwrap_or_default(),
    )
    .expect("k8s-pb reads the list");
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|i| i.metadata.as_ref()?.name.as_deref())
        .collect();
    assert_eq!(names, ["api", "web"]);
    assert!(list.metadata.and_then(|m| m.resource_version).is_some());

    // JSON whenever the client also takes it (kubectl's typed clients list `*/*`).
    let (status, head, body) = raw_get(
        &gw,
        "/apis/apps/v1/namespaces/default/deployments/web",
        &format!("{pb}, */*"),
    );
    assert_eq!(status, "200");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["spec"]["replicas"],
        json!(2)
    );

    // A protobuf watch: length-delimited WatchEvents (bare, as kube-apiserver streams them),
    // each object in its envelope, read with k8s-pb's types; the watch ends at its timeout.
    let (status, head, body) = raw_get(
        &gw,
        "/apis/apps/v1/namespaces/default/deployments?watch=1&timeoutSeconds=1&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
        pb,
    );
    assert_eq!(status, "200", "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("content-type: {pb};stream=watch")),
        "{head}"
    );
    let mut events = Vec::new();
    let mut rest = &body[..];
    while !rest.is_empty() {
        let (len, tail) = rest.split_at(4);
        let len = u32::from_be_bytes(len.try_into().unwrap()) as usize;
        let (frame, tail) = tail.split_at(len);
        rest = tail;
        let event = k8s_pb::apimachinery::pkg::apis::meta::v1::WatchEvent::decode(frame)
            .expect("k8s-pb reads the WatchEvent");
        let raw = event.object.and_then(|o| o.raw).unwrap_or_default();
        let unknown = unwrap_envelope(&raw);
        let kind = unknown.type_meta.and_then(|t| t.kind).unwrap_or_default();
        let d =
            k8s_pb::api::apps::v1::Deployment::decode(unknown.raw.as_deref().unwrap_or_default())
                .expect("k8s-pb reads the event's Deployment");
        let meta = d.metadata.unwrap_or_default();
        events.push((
            event.r#type.unwrap_or_default(),
            kind,
            meta.name.unwrap_or_default(),
            meta.annotations.contains_key("k8s.io/initial-events-end"),
        ));
    }
    assert_eq!(
        events,
        [
            ("ADDED".into(), "Deployment".into(), "api".into(), false),
            ("ADDED".into(), "Deployment".into(), "web".into(), false),
            ("BOOKMARK".into(), "Deployment".into(), String::new(), true),
        ],
        "the initial events, then the bookmark that ends them"
    );

    // A kind without a protobuf form (a custom resource) is refused with a Status saying so.
    gw.kubectl_ok(&[
        "apply",
        "-f",
        &write_file(dir.path(), "crd.yaml", WIDGET_CRD),
    ]);
    gw.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
    ]);
    let (status, _, body) = raw_get(
        &gw,
        "/apis/example.com/v1/namespaces/default/widgets?watch=1&timeoutSeconds=1",
        pb,
    );
    assert_eq!(status, "406");
    let refusal: Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(refusal["reason"], json!("NotAcceptable"), "{refusal}");

    // So is a create of one, before anything is stored.
    let widget = r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}"#;
    let (status, _, body) = raw_request(
        &gw,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        pb,
        widget,
    );
    assert_eq!(status, "406", "{}", String::from_utf8_lossy(&body));
    let listed = gw.kubectl_ok(&["get", "widgets", "-o", "name"]);
    assert!(listed.trim().is_empty(), "nothing stored: {listed}");
}

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;
