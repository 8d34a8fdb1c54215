//! The worker's aggregated API end to end: the real `worker` binary against an embedded cluster
//! (the real `worker-gateway`), its install checked through the cluster, and its API used with
//! kubectl and kube-rs directly on the worker's HTTPS endpoint.

use std::{
    io::{BufRead, BufReader},
    process::Stdio,
    sync::mpsc,
    time::Duration,
};

use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess, assert_refused, kubectl_as, with_token},
    wait::wait_until,
    worker::WorkerProcess,
};
use kube::{
    Api,
    api::{DynamicObject, Patch, PatchParams, PostParams},
    core::{ApiResource, GroupVersionKind},
};
use serde_json::{Value, json};

const NS: &str = "gpustack-system";

fn device_yaml(name: &str, api_version: &str) -> String {
    format!(
        "apiVersion: {api_version}\nkind: Devices\nmetadata:\n  name: {name}\n  labels: {{pool: a}}\nspec:\n  groups:\n  - id: radeon-rx-7800-xt\n    manufacturer: amd\n    name: AMD Radeon RX 7800 XT\n    memory: 16368\n    cores: 60\n    driverVersion: 6.10.5\n    accelerators: []\n"
    )
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn installs_then_serves_views_and_settings_to_kubectl() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    let wdir = tmp.path().join("worker");
    let worker = WorkerProcess::start(
        &gw,
        &wdir,
        &["--disable-auths"],
        &[("GPUSTACK_WORKLOAD_FIT_AFFINITY", "false")],
    );

    // The install, as the cluster sees it.
    gw.kubectl_ok(&["get", "namespace", NS]);
    let crds = gw.kubectl_ok(&["get", "crd", "-o", "name"]);
    for crd in [
        "devices",
        "instancetypes",
        "nodemodelstores",
        "modelartifacts",
    ] {
        assert!(
            crds.contains(&format!("{crd}.worker.gpustack.ai")),
            "{crds}"
        );
    }
    let ip = gw.kubectl_ok(&[
        "get",
        "svc",
        "-n",
        NS,
        "gpustack-operator-worker",
        "-o",
        "jsonpath={.spec.clusterIP}:{.spec.ports[0].port}",
    ]);
    assert_eq!(
        ip,
        format!("127.0.0.1:{}", worker.port),
        "an embedded cluster reaches the worker on loopback"
    );
    let ca = gw.kubectl_ok(&[
        "get",
        "secret",
        "-n",
        NS,
        "gpustack-operator-worker-serving",
        "-o",
        "jsonpath={.data.ca\\.crt}",
    ]);
    for apisvc in ["v1.worker.gpustack.ai", "v1.gpustack.ai"] {
        let spec = gw.kubectl_ok(&[
            "get",
            "apiservice",
            apisvc,
            "-o",
            "jsonpath={.spec.caBundle} {.spec.groupPriorityMinimum} {.spec.service.name}",
        ]);
        assert_eq!(
            spec,
            format!("{ca} 100 gpustack-operator-worker"),
            "{apisvc}"
        );
    }
    let seeded = gw.kubectl_ok(&[
        "get",
        "secret",
        "-n",
        NS,
        "gpustack-settings",
        "-o",
        "jsonpath={.data.workload-fit-affinity}",
    ]);
    assert_eq!(
        seeded, "ZmFsc2U=",
        "seeded from GPUSTACK_WORKLOAD_FIT_AFFINITY=false"
    );

    // Discovery.
    let resources = worker.kubectl_ok(&["api-resources"]);
    let line = resources
        .lines()
        .find(|l| l.starts_with("devices "))
        .unwrap_or_else(|| panic!("{resources}"));
    assert!(
        line.contains("devs")
            && line.contains("worker.gpustack.ai/v1")
            && line.contains("false")
            && line.contains("Devices"),
        "{line}"
    );
    assert!(
        resources.lines().any(|l| l.starts_with("settings ")
            && l.contains("set")
            && l.contains("gpustack.ai/v1")
            && l.contains("true")),
        "{resources}"
    );
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("instancetypes ") && l.contains("instype")),
        "{resources}"
    );

    // Devices: written through the v1 view, stored as the v1alpha1 custom resource.
    let file = write(
        &wdir,
        "node-a.yaml",
        &device_yaml("node-a", "worker.gpustack.ai/v1"),
    );
    worker.kubectl_ok(&["create", "-f", &file]);
    let stored: Value = serde_json::from_str(&gw.kubectl_ok(&[
        "get",
        "devices.v1alpha1.worker.gpustack.ai",
        "node-a",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(stored["apiVersion"], "worker.gpustack.ai/v1alpha1");
    assert_eq!(stored["spec"]["groups"][0]["memory"], 16368);
    let served: Value =
        serde_json::from_str(&worker.kubectl_ok(&["get", "devs", "node-a", "-o", "json"])).unwrap();
    assert_eq!(served["apiVersion"], "worker.gpustack.ai/v1");
    assert_eq!(served["metadata"]["uid"], stored["metadata"]["uid"]);
    let table = worker.kubectl_ok(&["get", "devices"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "MANUFACTURER", "PRODUCT", "AGE"],
        "{table}"
    );
    let row = lines.next().unwrap();
    assert!(
        row.starts_with("node-a") && row.contains("amd") && row.contains("AMD Radeon RX 7800 XT"),
        "{table}"
    );
    let wide = worker.kubectl_ok(&["get", "devices", "-o", "wide"]);
    assert!(
        wide.contains("MEMORY(MIB)") && wide.contains("16368") && wide.contains("6.10.5"),
        "{wide}"
    );
    let selected = worker.kubectl_ok(&["get", "devices", "-l", "pool=b", "-o", "name"]);
    assert!(
        selected.trim().is_empty(),
        "label selectors reach the cluster: {selected}"
    );

    // A watch through the worker sees a change made in the cluster.
    let mut watch = worker
        .kubectl_command(&[
            "get",
            "devices",
            "--watch-only",
            "--output-watch-events",
            "-o",
            "name",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // The watch may start after a create (which the list before it then holds): one new
    // object per attempt until one arrives keeps the test honest without a fixed sleep.
    let mut attempt = 0;
    let seen = wait_until("the watch to deliver a new Devices", DEADLINE, || {
        attempt += 1;
        let name = format!("node-b{attempt}");
        let yaml = device_yaml(&name, "worker.gpustack.ai/v1alpha1");
        let file = write(&wdir, &format!("{name}.yaml"), &yaml);
        gw.kubectl_ok(&["create", "-f", &file]);
        rx.recv_timeout(Duration::from_millis(500))
            .ok()
            .filter(|l| l.contains("node-b"))
    });
    assert!(
        seen.starts_with("devices.worker.gpustack.ai/node-b"),
        "{seen}"
    );
    let _ = watch.kill();
    let _ = watch.wait();

    // Status through the view's subresource, delete through the view.
    worker.kubectl_ok(&[
        "patch",
        "devices",
        "node-a",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"groups":[]}}"#,
    ]);
    worker.kubectl_ok(&["delete", "devices", "node-a"]);
    let gone = gw.kubectl(&[
        "get",
        "devices.v1alpha1.worker.gpustack.ai",
        "node-a",
        "-v=6",
    ]);
    assert_refused(&gone, 404, "deleted through the view");

    // Settings.
    let value = |name: &str| {
        worker.kubectl_ok(&[
            "get",
            "setting",
            "-n",
            NS,
            name,
            "-o",
            "jsonpath={.status.value}",
        ])
    };
    assert_eq!(value("workload-fit-affinity"), "false");
    let listed = worker.kubectl_ok(&["get", "settings", "-n", NS]);
    assert!(
        listed
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            == ["NAME", "VALUE", "EDITABLE", "AGE"],
        "{listed}"
    );
    assert!(
        listed.contains("image-pull-policy") && listed.contains("IfNotPresent"),
        "{listed}"
    );
    assert!(
        worker
            .kubectl_ok(&["get", "settings", "-n", "default", "-o", "name"])
            .trim()
            .is_empty(),
        "settings live in the system namespace only"
    );
    worker.kubectl_ok(&[
        "patch",
        "setting",
        "-n",
        NS,
        "workload-fit-affinity",
        "--type=merge",
        "-p",
        r#"{"spec":{"value":"true"}}"#,
    ]);
    assert_eq!(value("workload-fit-affinity"), "true");
    let stored = gw.kubectl_ok(&[
        "get",
        "secret",
        "-n",
        NS,
        "gpustack-settings",
        "-o",
        "jsonpath={.data.workload-fit-affinity}",
    ]);
    assert_eq!(stored, "dHJ1ZQ==", "written to the Secret");
    let out = worker.kubectl(&[
        "patch",
        "setting",
        "-n",
        NS,
        "model-store-download-concurrency",
        "--type=merge",
        "-p",
        r#"{"spec":{"value":"100"}}"#,
        "-v=6",
    ]);
    assert_refused(&out, 422, "an out-of-range value");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "setting \"model-store-download-concurrency\" must be a whole number from 1 to 64"
        ),
        "{err}"
    );
    let proxy = "http://user:hunter2@proxy.internal:3128";
    worker.kubectl_ok(&[
        "patch",
        "setting",
        "-n",
        NS,
        "model-artifact-https-proxy",
        "--type=json",
        "-p",
        &format!(r#"[{{"op":"add","path":"/spec/value","value":"{proxy}"}}]"#),
    ]);
    let shown = worker.kubectl_ok(&[
        "get",
        "setting",
        "-n",
        NS,
        "model-artifact-https-proxy",
        "-o",
        "yaml",
    ]);
    assert!(
        shown.contains("value: (sensitive)") && !shown.contains("hunter2"),
        "{shown}"
    );
    assert!(
        !worker
            .kubectl_ok(&["get", "settings", "-n", NS, "-o", "json"])
            .contains("hunter2")
    );
    let created = write(
        &wdir,
        "setting.yaml",
        "apiVersion: gpustack.ai/v1\nkind: Setting\nmetadata:\n  name: made-up\n  namespace: gpustack-system\nspec:\n  value: x\n",
    );
    let out = worker.kubectl(&["create", "-f", &created, "-v=6"]);
    assert_refused(&out, 405, "creating a setting");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("settings cannot be created"), "{err}");
    let out = worker.kubectl(&["delete", "setting", "-n", NS, "image-pull-policy", "-v=6"]);
    assert_refused(&out, 405, "deleting a setting");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("settings cannot be deleted"), "{err}");
    assert!(
        !worker.log().contains("hunter2"),
        "a sensitive value never reaches the log"
    );

    // A restart serves the same certificate and keeps what users changed.
    let port = worker.port;
    assert!(worker.stop().success(), "SIGTERM stops the worker cleanly");
    let again = WorkerProcess::start_on(&gw, &wdir, port, &["--disable-auths"], &[]);
    let ca_after = gw.kubectl_ok(&[
        "get",
        "secret",
        "-n",
        NS,
        "gpustack-operator-worker-serving",
        "-o",
        "jsonpath={.data.ca\\.crt}",
    ]);
    assert_eq!(ca, ca_after);
    assert_eq!(
        again.kubectl_ok(&[
            "get",
            "setting",
            "-n",
            NS,
            "workload-fit-affinity",
            "-o",
            "jsonpath={.status.value}"
        ]),
        "true",
        "a restart only backfills missing settings"
    );
}

fn devices_v1() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("worker.gpustack.ai", "v1", "Devices"),
        "devices",
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn kube_rs_crud_and_watch_on_v1_devices() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    let worker = WorkerProcess::start(&gw, &tmp.path().join("worker"), &["--disable-auths"], &[]);
    let kubeconfig = kube::config::Kubeconfig::read_from(worker.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let api: Api<DynamicObject> = Api::all_with(client, &devices_v1());

    let watcher = {
        use futures::StreamExt;
        let stream = kube::runtime::watcher(api.clone(), Default::default());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                if let Ok(
                    kube::runtime::watcher::Event::Apply(o)
                    | kube::runtime::watcher::Event::InitApply(o),
                ) = ev
                {
                    let _ = tx.send(o);
                }
            }
        });
        (rx, task)
    };

    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1", "kind": "Devices",
        "metadata": {"name": "rs-node", "labels": {"pool": "rs"}},
        "spec": {"groups": []},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(
        created.types.as_ref().unwrap().api_version,
        "worker.gpustack.ai/v1"
    );
    let got = api.get("rs-node").await.unwrap();
    assert_eq!(got.metadata.uid, created.metadata.uid);
    let listed = api
        .list(&kube::api::ListParams::default().labels("pool=rs"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    let patched = api
        .patch_status(
            "rs-node",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"groups": []}})),
        )
        .await
        .unwrap();
    assert!(patched.metadata.resource_version > created.metadata.resource_version);
    let mut replaced = got.clone();
    replaced
        .metadata
        .labels
        .get_or_insert_default()
        .insert("pool".into(), "rs2".into());
    replaced.metadata.resource_version = created.metadata.resource_version.clone();
    let conflict = api
        .replace("rs-node", &PostParams::default(), &replaced)
        .await
        .unwrap_err();
    assert!(
        matches!(conflict, kube::Error::Api(ref s) if s.code == 409),
        "a stale update conflicts: {conflict}"
    );

    let (mut watcher, watching) = watcher;
    let seen = tokio::time::timeout(DEADLINE, async {
        loop {
            let o = watcher.recv().await.expect("watch open");
            if o.metadata.name.as_deref() == Some("rs-node") {
                return o;
            }
        }
    })
    .await
    .expect("the watch through the worker delivers the object");
    assert_eq!(seen.types.unwrap().api_version, "worker.gpustack.ai/v1");
    api.delete("rs-node", &Default::default()).await.unwrap();
    assert!(api.get_opt("rs-node").await.unwrap().is_none());
    // Stopped while the processes still serve: a watcher without backoff whose client is torn
    // down with the runtime retries without ever yielding, and the runtime never shuts down.
    watching.abort();
    let _ = watching.await;
}

/// `kubeconfig` with its user's token replaced by `token`, written to `path`.
/// A kube client on the worker's endpoint with no credentials, sending `headers`.
async fn anonymous_client(
    worker: &WorkerProcess,
    headers: &[(&'static str, &'static str)],
) -> kube::Client {
    let mut config = kube::Config::new(
        format!("https://127.0.0.1:{}", worker.port)
            .parse()
            .unwrap(),
    );
    config.accept_invalid_certs = true;
    config.headers = headers
        .iter()
        .map(|(k, v)| {
            (
                http::HeaderName::from_static(k),
                http::HeaderValue::from_static(v),
            )
        })
        .collect();
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn through_the_aggregator_with_delegated_authentication_and_authorization() {
    let tmp = tempfile::tempdir().unwrap();
    let port = gpustack_tests::embedded::free_port();
    let gw = GatewayProcess::start_with(
        &tmp.path().join("gw"),
        "one",
        port,
        &["--embedded-cluster=one", "--apiservice-check-interval=1s"],
    );
    let wdir = tmp.path().join("worker");
    let audit = wdir.join("audit.log");
    let audit_flag = format!("--audit-log-path={}", audit.display());
    let worker = WorkerProcess::start(&gw, &wdir, &[audit_flag.as_str()], &[]);
    let cache = tmp.path().join("cache");

    // The cluster's admin, through the aggregation: the worker trusts the front proxy's headers.
    let file = write(
        &wdir,
        "agg.yaml",
        &device_yaml("agg-node", "worker.gpustack.ai/v1"),
    );
    wait_until("the aggregated API to answer the admin", DEADLINE, || {
        gw.kubectl(&["create", "-f", &file])
            .status
            .success()
            .then_some(())
    });
    let listed = gw.kubectl_ok(&["get", "devices.v1.worker.gpustack.ai"]);
    assert!(
        listed.contains("agg-node") && listed.contains("MANUFACTURER"),
        "{listed}"
    );

    // A ServiceAccount with no bindings: refused by the cluster and by the worker itself.
    gw.kubectl_ok(&["create", "serviceaccount", "reader", "-n", "default"]);
    let token = gw.kubectl_ok(&["create", "token", "reader", "-n", "default"]);
    let token = token.trim();
    let sa_cluster = tmp.path().join("sa-cluster.kubeconfig");
    with_token(&gw.kubeconfig(), token, &sa_cluster);
    let sa_worker = worker.kubeconfig_with_token("sa-worker", token);
    let denied = kubectl_as(
        &sa_cluster,
        &cache,
        &["get", "devices.v1.worker.gpustack.ai", "-v=6"],
    );
    assert_refused(&denied, 403, "the reader through the cluster");
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains("forbidden"),
        "{}",
        String::from_utf8_lossy(&denied.stderr)
    );
    let denied = kubectl_as(&sa_worker, &cache, &["get", "devices", "-v=6"]);
    assert_refused(&denied, 403, "the reader at the worker");
    let err = String::from_utf8_lossy(&denied.stderr);
    assert!(
        err.contains("User \"system:serviceaccount:default:reader\" cannot list resource \"devices\" in API group \"worker.gpustack.ai\""),
        "the worker asks the cluster (SubjectAccessReview) and refuses: {err}"
    );

    // Granted: both paths answer once the denial's cache time has passed.
    // Sent as JSON: `kubectl create clusterrole` would send a protobuf body, which embedded
    // clusters accept for only a few kinds.
    let rbac = write(
        &wdir,
        "rbac.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: devices-reader\nrules:\n- apiGroups: [worker.gpustack.ai]\n  resources: [devices]\n  verbs: [get, list, watch]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: reader-devices\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: devices-reader\nsubjects:\n- kind: ServiceAccount\n  name: reader\n  namespace: default\n",
    );
    gw.kubectl_ok(&["create", "-f", &rbac]);
    for kubeconfig in [&sa_cluster, &sa_worker] {
        let out = wait_until(
            "the binding to take effect",
            Duration::from_secs(45),
            || {
                let out = kubectl_as(
                    kubeconfig,
                    &cache,
                    &["get", "devices.v1.worker.gpustack.ai", "-o", "name"],
                );
                out.status
                    .success()
                    .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
            },
        );
        assert!(out.contains("agg-node"), "{out}");
    }
    // Only what was granted: no settings for the reader.
    let out = kubectl_as(&sa_worker, &cache, &["get", "settings", "-n", NS, "-v=6"]);
    assert_refused(&out, 403, "settings were not granted");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "User \"system:serviceaccount:default:reader\" cannot list resource \"settings\""
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // No credentials at all: 401. Forged front-proxy headers without its certificate: not
    // believed, so still 401.
    let api: Api<DynamicObject> =
        Api::all_with(anonymous_client(&worker, &[]).await, &devices_v1());
    let e = api.list(&Default::default()).await.unwrap_err();
    assert!(matches!(e, kube::Error::Api(ref s) if s.code == 401), "{e}");
    let forged = anonymous_client(
        &worker,
        &[
            ("x-remote-user", "admin"),
            ("x-remote-group", "system:masters"),
        ],
    )
    .await;
    let api: Api<DynamicObject> = Api::all_with(forged, &devices_v1());
    let e = api.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 401),
        "forged headers: {e}"
    );

    // Every request left an audit line with its user; the token never did.
    let lines = std::fs::read_to_string(&audit).unwrap();
    assert!(
        lines.lines().any(
            |l| l.contains("\"username\":\"system:serviceaccount:default:reader\"")
                && l.contains("\"code\":403")
        ),
        "{lines}"
    );
    assert!(!lines.contains(token), "no token in the audit log");

    // The worker goes away: the APIService turns unavailable and requests answer 503; it
    // comes back: available again.
    let wport = worker.port;
    assert!(worker.stop().success());
    let available = |want: &str| {
        wait_until(&format!("APIService Available={want}"), DEADLINE, || {
            let s = gw.kubectl_ok(&[
                "get",
                "apiservice",
                "v1.worker.gpustack.ai",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
            ]);
            (s == want).then_some(())
        })
    };
    available("False");
    let out = gw.kubectl(&["get", "devices.v1.worker.gpustack.ai", "-v=6"]);
    assert_refused(&out, 503, "the worker is gone");
    let _back = WorkerProcess::start_on(&gw, &wdir, wport, &[], &[]);
    available("True");
    gw.kubectl_ok(&["get", "devices.v1.worker.gpustack.ai", "agg-node"]);
}

/// Impersonation reaches the worker as the identity the cluster settled on, through the
/// aggregator; asked of the worker directly, it is refused rather than ignored.
#[test]
fn impersonation_through_the_aggregator_and_never_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&tmp.path().join("gw"), "one");
    let worker = WorkerProcess::start(&gw, &tmp.path().join("worker"), &[], &[]);
    gw.kubectl_ok(&["create", "serviceaccount", "reader", "-n", "default"]);
    let as_reader = "--as=system:serviceaccount:default:reader";
    wait_until("the aggregated API to answer the admin", DEADLINE, || {
        gw.kubectl(&["get", "devices.v1.worker.gpustack.ai"])
            .status
            .success()
            .then_some(())
    });
    // The admin acting as a ServiceAccount with no bindings: the worker refuses that account.
    let out = gw.kubectl(&["get", "devices.v1.worker.gpustack.ai", as_reader]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("system:serviceaccount:default:reader"),
        "the worker judged the impersonated user: {text}"
    );
    // Straight to the worker with the admin's token and an Impersonate-User header (raw: a
    // refused discovery would hide the message).
    let text = worker.kubectl_err(&[
        "get",
        "--raw",
        "/apis/worker.gpustack.ai/v1/devices",
        as_reader,
    ]);
    assert!(text.contains("impersonation is not served here"), "{text}");
}
