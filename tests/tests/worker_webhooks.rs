//! The worker's admission webhooks end to end: the real `worker` binary registers its webhook
//! configurations in an embedded cluster (the real `worker-gateway`), whose admission chain
//! calls them; `kubectl` creates the objects and its own output is asserted.

#[path = "../../apiserver/tests/support/webhook.rs"]
mod webhook;

use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess},
    wait::wait_until,
    worker::{WorkerProcess, local_queue_name as entrance},
};
use serde_json::{Value, json};

const IT: &str = "instancetypes.v1alpha1.worker.gpustack.ai";
const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
const SLICED: &str = "nvidia.com/gpu.sliced";

struct Cluster {
    dir: tempfile::TempDir,
    gw: GatewayProcess,
}

impl Cluster {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let gw = GatewayProcess::start(&dir.path().join("gw"), "hooks");
        Cluster { dir, gw }
    }

    /// The worker as the chart runs it (`--disable-applications=*`): these tests make the
    /// model manager's ServiceAccount themselves.
    fn worker(&self) -> WorkerProcess {
        WorkerProcess::start(
            &self.gw,
            &self.dir.path().join("worker"),
            &["--disable-applications=*"],
            &[],
        )
    }

    fn file(&self, name: &str, v: &Value) -> String {
        let path = self.dir.path().join(format!("{name}.json"));
        std::fs::write(&path, v.to_string()).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// `kubectl create -f` of `v`: standard output or standard error, and whether it worked.
    fn create(&self, name: &str, v: &Value) -> (bool, String) {
        let out = self.gw.kubectl(&["create", "-f", &self.file(name, v)]);
        let text = if out.status.success() {
            String::from_utf8_lossy(&out.stdout)
        } else {
            String::from_utf8_lossy(&out.stderr)
        };
        (out.status.success(), text.into_owned())
    }

    fn create_ok(&self, name: &str, v: &Value) {
        let (ok, text) = self.create(name, v);
        assert!(ok, "creating {name}: {text}");
    }

    fn refused(&self, name: &str, v: &Value) -> String {
        let (ok, text) = self.create(name, v);
        assert!(!ok, "{name} should have been refused: {text}");
        text
    }

    /// Creates Pod `name` in queue `queue` with `limits`, which must be refused: the error.
    fn refused_pod(&self, name: &str, queue: &str, limits: Value) -> String {
        self.refused(name, &pod(name, Some(queue), limits))
    }

    /// Writes one setting straight into the Settings Secret.
    fn setting(&self, name: &str, value: &str) {
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(value);
        let patch = json!({"data": {name: encoded}}).to_string();
        self.gw.kubectl_ok(&[
            "patch",
            "secret",
            "-n",
            "gpustack-system",
            "gpustack-settings",
            "--type=merge",
            "-p",
            &patch,
        ]);
    }

    fn get_json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.gw.kubectl_ok(&all)).unwrap()
    }

    /// An InstanceType of 80 GiB H100s, and its status as the controllers would write it.
    fn instance_type(&self, name: &str, status: Option<Value>) {
        self.create_ok(
            name,
            &json!({
                "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType",
                "metadata": {"name": name},
                "spec": {"acceleratable": true, "acceleratorGroup": "nvidia-h100", "os": "linux", "arch": "amd64",
                         "unitResources": {"cpu": "8", "ram": "64Gi"}, "localStorage": "100Gi"},
            }),
        );
        if let Some(status) = status {
            self.gw.kubectl_ok(&[
                "patch",
                IT,
                name,
                "--subresource=status",
                "--type=merge",
                "-p",
                &json!({"status": status}).to_string(),
            ]);
        }
    }
}

fn h100_status(name: &str) -> Value {
    json!({
        "entrance": entrance(name), "phase": "Active",
        "detail": {"manufacturer": "nvidia", "product": "H100", "memory": "80Gi",
                   "slicedDetail": {"physical": {"count": 7, "profiles": [
                       {"name": "1g.10gb", "count": 7, "memoryMib": 9856},
                       {"name": "3g.40gb", "count": 2, "memoryMib": 40192},
                   ]}}},
    })
}

fn pod(name: &str, queue: Option<&str>, limits: Value) -> Value {
    pod_with(
        name,
        queue,
        json!([{"name": "app", "image": "busybox", "resources": {"limits": limits}}]),
        json!([]),
    )
}

fn pod_with(name: &str, queue: Option<&str>, containers: Value, init: Value) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "t"}},
        "spec": {"containers": containers, "initContainers": init},
    });
    if let Some(q) = queue {
        p["metadata"]["labels"][QUEUE_LABEL] = json!(q);
    }
    p
}

/// Asserts that kubectl's error output `err` says `what`.
#[track_caller]
fn says(err: &str, what: impl AsRef<str>) {
    assert!(
        err.contains(what.as_ref()),
        "expected {:?} in:\n{err}",
        what.as_ref()
    );
}

/// The value of `gpustack_worker_admission_total` with these labels, if it was counted.
fn admissions(worker: &WorkerProcess, webhook: &str, result: &str, reason: &str) -> Option<u64> {
    let text = worker.kubectl_ok(&["get", "--raw", "/metrics"]);
    let labels = [
        format!("webhook=\"{webhook}\""),
        format!("result=\"{result}\""),
        format!("reason=\"{reason}\""),
    ];
    text.lines()
        .filter(|l| l.starts_with("gpustack_worker_admission_total{"))
        .find(|l| labels.iter().all(|want| l.contains(want.as_str())))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[test]
fn pod_requests_are_priced_or_refused_through_the_cluster() {
    let c = Cluster::start();
    let worker = c.worker();

    // Installed as the issue says.
    let mutation = c.get_json(&[
        "get",
        "mutatingwebhookconfiguration",
        "gpustack-worker-mutation",
    ]);
    let validation = c.get_json(&[
        "get",
        "validatingwebhookconfiguration",
        "gpustack-worker-validation",
    ]);
    // The CA the worker keeps in its serving Secret (read by the harness at start).
    let ca = std::fs::read_to_string(worker.dir.join("ca.b64")).unwrap();
    for w in mutation["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .chain(validation["webhooks"].as_array().unwrap())
    {
        assert_eq!(w["clientConfig"]["caBundle"], ca.as_str(), "{}", w["name"]);
        assert_eq!(
            w["clientConfig"]["service"]["name"],
            "gpustack-operator-worker"
        );
        assert_eq!(w["clientConfig"]["service"]["namespace"], "gpustack-system");
        assert_eq!(
            (
                w["sideEffects"].as_str(),
                w["matchPolicy"].as_str(),
                w["timeoutSeconds"].as_i64()
            ),
            (Some("None"), Some("Equivalent"), Some(10))
        );
    }

    // The InstanceType webhooks: defaulted, then checked.
    c.instance_type("h100", Some(h100_status("h100")));
    let it = c.get_json(&["get", IT, "h100"]);
    assert_eq!(it["spec"]["generalGroup"], "generic");
    assert_eq!(
        it["metadata"]["labels"]["schedule.gpustack.ai/queue-entrance"],
        entrance("h100").as_str()
    );
    assert_eq!(
        it["metadata"]["labels"]["feature.gpustack.ai/acceleratable"],
        "true"
    );
    let q = entrance("h100");
    let err = c.refused(
        "bad-it",
        &json!({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType", "metadata": {"name": "bad"},
                "spec": {"acceleratable": true, "os": "linux", "arch": "amd64", "unitResources": {"cpu": "1", "ram": "16gi"}, "localStorage": "1Gi"}}),
    );
    // The webhook's causes, one a line, as kubectl prints a 422 that carries them.
    says(
        &err,
        "The InstanceType \"bad\" is invalid: \n* spec.acceleratorGroup: Required value: an acceleratable instance type needs its accelerator group (<manufacturer>-<groupID>)\n* spec.unitResources.ram: Invalid value: \"16gi\": must be a positive whole number of Gi, like 16Gi",
    );
    let err = c.gw.kubectl_err(&[
        "patch",
        IT,
        "h100",
        "--type=merge",
        "-p",
        r#"{"spec":{"os":"windows"}}"#,
    ]);
    says(
        &err,
        "spec: Forbidden: is immutable except displayName, description and inactive",
    );
    c.gw.kubectl_ok(&[
        "patch",
        IT,
        "h100",
        "--type=merge",
        "-p",
        r#"{"spec":{"displayName":"H100 80GB"}}"#,
    ]);

    // A Kueue-named mutating webhook, called after ours: it sees the credits already written.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let kueue = runtime.block_on(webhook::WebhookServer::start());
    c.create_ok(
        "kueue-hook",
        &webhook::configuration(
            "MutatingWebhookConfiguration",
            "kueue-mutating-webhook-configuration",
            "mpod.kb.io",
            json!({"url": kueue.url("/kueue"), "caBundle": kueue.ca_bundle()}),
            json!({"rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]}]}),
        ),
    );

    // Valid requests of each family, with what the webhook computed.
    let limits_of = |name: &str| {
        c.get_json(&["get", "pod", name])["spec"]["containers"][0]["resources"].clone()
    };
    let priced = [
        (
            "slice-pct",
            json!({SLICED: "1", "nvidia.com/gpu.sliced.memory-percentage": "25"}),
            "nvidia.com/gpu.sliced.units",
            "400000",
        ),
        (
            "slice-mib",
            json!({SLICED: "1", "nvidia.com/gpu.sliced.memory-mib": "1000", "nvidia.com/gpu.sliced.cores-percentage": "30"}),
            "nvidia.com/gpu.sliced.units",
            "19531",
        ),
        (
            "mig",
            json!({"nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-1g.10gb": "1"}),
            "nvidia.com/gpu.partitioned.units",
            "192500",
        ),
    ];
    for (name, limits, key, units) in &priced {
        c.create_ok(name, &pod(name, Some(&q), limits.clone()));
        let res = limits_of(name);
        for list in ["limits", "requests"] {
            assert_eq!(res[list][key], *units, "{name} {list}: {res}");
        }
    }
    let res = limits_of("slice-pct");
    assert_eq!(
        res["limits"]["nvidia.com/gpu.sliced.cores-percentage"], "100",
        "the default core share"
    );
    assert_eq!(
        limits_of("slice-mib")["requests"]["nvidia.com/gpu.sliced.cores-percentage"],
        "30"
    );
    let seen = kueue.requests("/kueue");
    let first = seen
        .iter()
        .find(|r| r["name"] == "slice-pct" || r["object"]["metadata"]["name"] == "slice-pct")
        .expect("the kueue webhook saw the Pod");
    assert_eq!(
        first["object"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu.sliced.units"],
        "400000",
        "ours ran first"
    );

    c.create_ok(
        "shared",
        &pod("shared", Some(&q), json!({"nvidia.com/gpu.shared": "3"})),
    );
    let affinity = &c.get_json(&["get", "pod", "shared"])["spec"]["affinity"]["nodeAffinity"];
    assert_eq!(
        affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
            [0],
        json!({"key": "acceleratable.feature.gpustack.ai/nvidia-h100.count", "operator": "Gt", "values": ["2"]})
    );
    c.create_ok(
        "whole",
        &pod("whole", Some(&q), json!({"nvidia.com/gpu": "2"})),
    );
    assert_eq!(limits_of("whole")["limits"], json!({"nvidia.com/gpu": "2"}));
    // Without the queue label the webhooks are not called at all.
    c.create_ok("unqueued", &pod("unqueued", None, json!({SLICED: "2"})));

    // Each rule of §3.4, refused with its message under the key.
    let sliced_pct = |n: &str| json!({SLICED: n, "nvidia.com/gpu.sliced.memory-percentage": "10"});
    let app = |name: &str, limits: Value| json!({"name": name, "image": "busybox", "resources": {"limits": limits}});
    let rules: Vec<(&str, Value, &str)> = vec![
        (
            "r1-families",
            pod(
                "r1-families",
                Some(&q),
                json!({"nvidia.com/gpu": "1", "nvidia.com/gpu.shared": "1"}),
            ),
            "spec.containers[0].resources.limits[nvidia.com/gpu.shared]: Forbidden: a Pod may request only one accelerator family, found [nvidia.com/gpu, nvidia.com/gpu.shared]",
        ),
        (
            "r1-groups",
            pod_with(
                "r1-groups",
                Some(&q),
                json!([app("a", json!({"nvidia.com/gpu": "1"}))]),
                json!([app("i", json!({"nvidia.com/gpu": "1"}))]),
            ),
            "spec.initContainers[0].resources.limits[nvidia.com/gpu]: Forbidden: accelerator requests must all sit in one container group; spec.initContainers must give up its request",
        ),
        (
            "r2-cards",
            pod("r2-cards", Some(&q), sliced_pct("2")),
            "spec.containers[0].resources.limits[nvidia.com/gpu.sliced]: Invalid value: \"2\": a logical slice request is always a single card; multi-card logical slicing is not supported yet",
        ),
        (
            "r2-milli",
            pod("r2-milli", Some(&q), sliced_pct("1m")),
            "Invalid value: \"1m\": a logical slice request is always a single card",
        ),
        (
            "r2-budget",
            pod("r2-budget", Some(&q), json!({SLICED: "1"})),
            "spec.containers[0].resources.limits[nvidia.com/gpu.sliced.memory-percentage]: Required value: a logical slice needs its memory budget",
        ),
        (
            "r3-cards",
            pod(
                "r3-cards",
                Some(&q),
                json!({"nvidia.com/gpu.partitioned": "2", "nvidia.com/gpu.partitioned.mig-1g.10gb": "1"}),
            ),
            "a partition request is always a single card; request one Pod per instance",
        ),
        (
            "r3-profile",
            pod(
                "r3-profile",
                Some(&q),
                json!({"nvidia.com/gpu.partitioned": "1"}),
            ),
            "Required value: a partition request must name a profile, e.g. nvidia.com/gpu.partitioned.mig-<profile>",
        ),
        (
            "r4-profiles",
            pod(
                "r4-profiles",
                Some(&q),
                json!({"nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-1g.10gb": "1", "nvidia.com/gpu.partitioned.mig-3g.40gb": "1"}),
            ),
            "a Pod may request only one partition profile, found [nvidia.com/gpu.partitioned.mig-1g.10gb, nvidia.com/gpu.partitioned.mig-3g.40gb]",
        ),
        (
            "r5-instances",
            pod(
                "r5-instances",
                Some(&q),
                json!({"nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-1g.10gb": "2"}),
            ),
            "spec.containers[0].resources.limits[nvidia.com/gpu.partitioned.mig-1g.10gb]: Invalid value: \"2\": a partition profile request must be exactly 1 instance",
        ),
        (
            "r6-containers",
            pod_with(
                "r6-containers",
                Some(&q),
                json!([app("a", sliced_pct("1")), app("b", sliced_pct("1"))]),
                json!([]),
            ),
            "spec.containers[1].resources.limits[nvidia.com/gpu.sliced]: Forbidden: at most one container may request a slicing family, found 2",
        ),
        (
            "r7-sidecar",
            pod_with(
                "r7-sidecar",
                Some(&q),
                json!([app("a", json!({}))]),
                json!([{"name": "s", "image": "busybox", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]),
            ),
            "spec.initContainers[0].resources.limits[nvidia.com/gpu]: Forbidden: a restartable init container (a native sidecar) may not request an accelerator; move the request to an app container",
        ),
    ];
    for (name, p, message) in &rules {
        let err = c.refused(name, p);
        // The embedded cluster returns the webhook's Status as it is (as kube-apiserver does),
        // so kubectl prints its causes (path and body) under the object.
        assert!(
            err.contains(&format!("The Pod \"{name}\" is invalid: ")),
            "{name}: {err}"
        );
        assert!(err.contains(message), "{name}: {err}");
    }
    // One rule's cause in full, as kubectl prints a single cause: the path under the key.
    let err = c.refused(
        "r2-cards-again",
        &pod("r2-cards-again", Some(&q), sliced_pct("2")),
    );
    assert!(
        err.lines().any(|l| l
            == "The Pod \"r2-cards-again\" is invalid: spec.containers[0].resources.limits[nvidia.com/gpu.sliced]: Invalid value: \"2\": a logical slice request is always a single card; multi-card logical slicing is not supported yet"),
        "{err}"
    );

    // §3.3's refusals, from the mutating half.
    let err = c.refused_pod(
        "too-big",
        &q,
        json!({SLICED: "1", "nvidia.com/gpu.sliced.memory-mib": "90000"}),
    );
    // (The mutating half refused it: counted as ExceedsCardMemory below.)
    says(
        &err,
        "The Pod \"too-big\" is invalid: spec.containers[0].resources.limits[nvidia.com/gpu.sliced.memory-mib]: Invalid value: \"90000\": nvidia.com/gpu.sliced.memory-mib must not exceed the per-card VRAM (81920 MiB)",
    );
    let err = c.refused_pod(
        "no-profile",
        &q,
        json!({"nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-7g.80gb": "1"}),
    );
    says(
        &err,
        "partition profile \"mig-7g.80gb\" is not offered by the target pool (instance type h100)",
    );
    let err = c.refused(
        "no-pool",
        &pod(
            "no-pool",
            Some("gpustack-fnv64-0000000000000000"),
            sliced_pct("1"),
        ),
    );
    says(
        &err,
        "no instance type fronts local queue gpustack-fnv64-0000000000000000",
    );
    c.instance_type("fresh", None);
    let err = c.refused_pod(
        "not-ready",
        &entrance("fresh"),
        json!({SLICED: "1", "nvidia.com/gpu.sliced.memory-mib": "100"}),
    );
    says(&err, "Error from server (ServiceUnavailable)");
    assert!(
        err.contains(
            "instance type fresh is not ready yet (the card's memory is not known); retry"
        ),
        "{err}"
    );

    // The same reasons in the metrics and in events.
    let validation = "pod.validation.worker.gpustack.ai";
    let mutation = "pod.mutation.worker.gpustack.ai";
    assert_eq!(
        admissions(&worker, validation, "denied", "SliceNotSingleCard"),
        Some(3)
    );
    assert_eq!(
        admissions(&worker, mutation, "denied", "ExceedsCardMemory"),
        Some(1)
    );
    assert!(admissions(&worker, mutation, "patched", "UnitsComputed") >= Some(3));
    assert_eq!(
        admissions(
            &worker,
            "instancetype.validation.worker.gpustack.ai",
            "denied",
            "FieldImmutable"
        ),
        Some(1)
    );
    // The worker's series (requests, admissions, reconciles) pass promtool's checks.
    let metrics = worker.kubectl_ok(&["get", "--raw", "/metrics"]);
    gpustack_tests::prometheus::check_metrics("worker", &metrics);
    // A review never writes: the refusals reached their clients and the metrics, and no
    // Event (the webhooks declare no side effects; dry runs call them too).
    let events = c.get_json(&["get", "events", "-n", "default"]);
    let written: Vec<&Value> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["reportingComponent"] == "gpustack-worker"
                || e["source"]["component"] == "gpustack-worker"
        })
        .collect();
    assert!(written.is_empty(), "events from reviews: {written:?}");

    // The deletion guard: an InstanceType held by a finalizer takes updates while it goes.
    c.gw.kubectl_ok(&[
        "patch",
        IT,
        "fresh",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["test.gpustack.ai/hold"]}}"#,
    ]);
    c.gw.kubectl_ok(&["delete", IT, "fresh", "--wait=false"]);
    c.gw.kubectl_ok(&[
        "patch",
        IT,
        "fresh",
        "--type=merge",
        "-p",
        r#"{"spec":{"os":"windows"}}"#,
    ]);
    c.gw.kubectl_ok(&[
        "patch",
        IT,
        "fresh",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    assert!(
        admissions(
            &worker,
            "instancetype.validation.worker.gpustack.ai",
            "allowed",
            "BeingDeleted"
        ) >= Some(1)
    );
}

/// Posts a NodeModelStore status review straight to the worker (the embedded cluster names
/// every writer `admin`, so a service account's review is sent by hand) and returns the answer.
fn status_review(c: &Cluster, worker: &WorkerProcess, user: &str, extra: Value) -> Value {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u-1", "name": "node-a", "operation": "UPDATE", "subResource": "status",
            "kind": {"group": "worker.gpustack.ai", "version": "v1alpha1", "kind": "NodeModelStore"},
            "resource": {"group": "worker.gpustack.ai", "version": "v1alpha1", "resource": "nodemodelstores"},
            "userInfo": {"username": user, "groups": ["system:serviceaccounts", "system:authenticated"], "extra": extra},
            "object": {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "NodeModelStore", "metadata": {"name": "node-a"}, "spec": {}},
            "oldObject": {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "NodeModelStore", "metadata": {"name": "node-a"}, "spec": {}},
        },
    });
    let file = c.file("review", &review);
    let out = worker.kubectl_ok(&[
        "create",
        "--raw",
        "/validate-worker-gpustack-ai-v1alpha1-nodemodelstore-status",
        "-f",
        &file,
    ]);
    serde_json::from_str::<Value>(&out).unwrap()["response"].clone()
}

#[test]
fn node_model_store_status_is_written_only_by_that_nodes_model_manager() {
    let c = Cluster::start();
    let worker = c.worker();
    let sa = "system:serviceaccount:gpustack-system:gpustack-operator-model-manager";
    let bound = |pod: &str, node: Option<&str>| {
        let mut e = json!({"authentication.kubernetes.io/pod-name": [pod]});
        if let Some(n) = node {
            e["authentication.kubernetes.io/node-name"] = json!([n]);
        }
        e
    };
    let r = status_review(&c, &worker, sa, bound("mm-a", Some("node-a")));
    assert_eq!(r["allowed"], true, "{r}");
    let r = status_review(&c, &worker, sa, bound("mm-b", Some("node-b")));
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(
        r["status"]["message"],
        "the model-manager on node node-b may not write the status of NodeModelStore node-a"
    );
    let r = status_review(
        &c,
        &worker,
        "system:serviceaccount:default:default",
        bound("x", Some("node-a")),
    );
    assert_eq!(
        (r["allowed"].as_bool(), r["status"]["code"].as_i64()),
        (Some(false), Some(403)),
        "{r}"
    );
    assert_eq!(
        r["status"]["message"],
        format!(
            "only {sa} may write the status of NodeModelStore node-a, not system:serviceaccount:default:default"
        )
    );
    // A token without the node: the node of its Pod, looked up.
    c.create_ok(
        "mm-pod",
        &json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "mm-a", "namespace": "gpustack-system"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "mm", "image": "busybox"}]}}),
    );
    let r = status_review(&c, &worker, sa, bound("mm-a", None));
    assert_eq!(r["allowed"], true, "{r}");
    let r = status_review(&c, &worker, sa, json!({}));
    assert_eq!(r["allowed"], false, "a token not bound to a Pod: {r}");
    let hook = "nodemodelstore-status.validation.worker.gpustack.ai";
    assert_eq!(
        admissions(&worker, hook, "denied", "WriterNotAllowed"),
        Some(3)
    );
    assert_eq!(admissions(&worker, hook, "allowed", "Admitted"), Some(2));
}

#[test]
fn node_model_store_status_follows_the_writers_own_token() {
    let c = Cluster::start();
    let _worker = c.worker();
    let ns = "gpustack-system";
    let mm = "gpustack-operator-model-manager";
    for sa in [mm, "other"] {
        c.create_ok(
            &format!("sa-{sa}"),
            &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": ns}}),
        );
    }
    // RBAC lets both write store status: only the webhook tells them apart.
    c.create_ok(
        "role",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "store-status"},
                "rules": [{"apiGroups": ["worker.gpustack.ai"], "resources": ["nodemodelstores", "nodemodelstores/status"],
                           "verbs": ["get", "patch", "update"]}]}),
    );
    c.create_ok(
        "binding",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "store-status"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "store-status"},
                "subjects": [{"kind": "ServiceAccount", "name": mm, "namespace": ns},
                             {"kind": "ServiceAccount", "name": "other", "namespace": ns}]}),
    );
    for node in ["node-a", "node-b"] {
        let store = gpustack_api::model_store::NodeModelStore::new(node, Default::default());
        c.create_ok(
            &format!("store-{node}"),
            &serde_json::to_value(store).unwrap(),
        );
    }
    let pod_on = |name: &str, sa: &str, node: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
               "spec": {"nodeName": node, "serviceAccountName": sa, "containers": [{"name": "mm", "image": "busybox"}]}})
    };
    c.create_ok("mm-a", &pod_on("mm-a", mm, "node-a"));
    c.create_ok("other-a", &pod_on("other-a", "other", "node-a"));
    // Tokens as the kubelet asks for them: bound to the Pod.
    let token = |sa: &str, pod: Option<&str>| {
        let mut args = vec!["create", "token", sa, "-n", ns];
        if let Some(p) = pod {
            args.extend(["--bound-object-kind=Pod", "--bound-object-name", p]);
        }
        c.gw.kubectl_ok(&args).trim().to_owned()
    };
    let write = |token: &str, store: &str| {
        let flag = format!("--token={token}");
        let out = c.gw.kubectl(&[
            &flag,
            "patch",
            "nodemodelstores.v1alpha1.worker.gpustack.ai",
            store,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"observedGeneration":1}}"#,
        ]);
        let text = String::from_utf8_lossy(if out.status.success() {
            &out.stdout
        } else {
            &out.stderr
        });
        (out.status.success(), text.into_owned())
    };
    let sa = |name: &str| format!("system:serviceaccount:{ns}:{name}");

    let mm_a = token(mm, Some("mm-a"));
    let (ok, text) = write(&mm_a, "node-a");
    assert!(ok, "the model-manager of node-a writes its store: {text}");
    let (ok, text) = write(&mm_a, "node-b");
    assert!(!ok);
    says(
        &text,
        "admission webhook \"nodemodelstore-status.validation.worker.gpustack.ai\" denied the request: the model-manager on node node-a may not write the status of NodeModelStore node-b",
    );
    let (ok, text) = write(&token("other", Some("other-a")), "node-a");
    assert!(!ok);
    says(
        &text,
        format!(
            "only {} may write the status of NodeModelStore node-a, not {}",
            sa(mm),
            sa("other")
        ),
    );
    let (ok, text) = write(&token(mm, None), "node-a");
    assert!(!ok);
    says(
        &text,
        format!(
            "{} must write NodeModelStore status with a token bound to its Pod",
            sa(mm)
        ),
    );
    // A Pod-bound token dies with its Pod.
    c.gw.kubectl_ok(&["delete", "pod", "-n", ns, "mm-a", "--wait=false"]);
    let (ok, text) = write(&mm_a, "node-a");
    assert!(!ok);
    says(&text, "Unauthorized");
}

fn kueue_crds(c: &Cluster) {
    for crd in gpustack_api::crds::kueue() {
        let v = serde_json::to_value(&crd).unwrap();
        let name = crd.metadata.name.clone().unwrap();
        c.create_ok(&name, &v);
    }
    wait_until("the Workload kind", DEADLINE, || {
        c.gw.kubectl(&["get", "workloads.kueue.x-k8s.io", "-A"])
            .status
            .success()
            .then_some(())
    });
}

fn workload(name: &str, queue: &str, limits: Value) -> Value {
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "a", "image": "busybox", "resources": {"limits": limits}}]}}}]},
    })
}

fn workload_expressions(c: &Cluster, name: &str) -> Value {
    c.get_json(&["get", "workloads.kueue.x-k8s.io", name])["spec"]["podSets"][0]["template"]["spec"]["affinity"]
        ["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
        .clone()
}

#[test]
fn workloads_are_pinned_and_failure_policies_hold_when_the_worker_is_down() {
    let c = Cluster::start();
    kueue_crds(&c);
    let worker = c.worker();
    c.instance_type("h100", Some(h100_status("h100")));
    let q = entrance("h100");

    c.create_ok(
        "wl-slice",
        &workload(
            "wl-slice",
            &q,
            json!({SLICED: "1", "nvidia.com/gpu.sliced.units": "400000"}),
        ),
    );
    assert_eq!(
        workload_expressions(&c, "wl-slice"),
        json!([{"key": "sliced-max-free-units.fit.gpustack.ai/nvidia-h100", "operator": "Gt", "values": ["399999"]}])
    );
    c.create_ok(
        "wl-shared",
        &workload("wl-shared", &q, json!({"nvidia.com/gpu.shared": "2"})),
    );
    assert_eq!(
        workload_expressions(&c, "wl-shared"),
        json!([{"key": "shared-free-cards.fit.gpustack.ai/nvidia-h100", "operator": "Gt", "values": ["1"]}])
    );
    // A user's LocalQueue that points at the pool's ClusterQueue (named after the
    // InstanceType) gets the same pin; one that points elsewhere, or no LocalQueue, none.
    let local_queue = |name: &str, cluster_queue: &str| {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
               "metadata": {"name": name, "namespace": "default"},
               "spec": {"clusterQueue": cluster_queue}})
    };
    c.create_ok("lq-team-gpu", &local_queue("team-gpu", "h100"));
    c.create_ok("lq-team-cpu", &local_queue("team-cpu", "not-a-pool"));
    c.create_ok(
        "wl-user-queue",
        &workload(
            "wl-user-queue",
            "team-gpu",
            json!({"nvidia.com/gpu.shared": "2"}),
        ),
    );
    assert_eq!(
        workload_expressions(&c, "wl-user-queue"),
        json!([{"key": "shared-free-cards.fit.gpustack.ai/nvidia-h100", "operator": "Gt", "values": ["1"]}])
    );
    for (name, queue) in [("wl-other", "team-cpu"), ("wl-no-queue", "team-a")] {
        c.create_ok(
            name,
            &workload(name, queue, json!({"nvidia.com/gpu.shared": "2"})),
        );
        assert_eq!(workload_expressions(&c, name), Value::Null, "{name}");
    }
    // Workloads in no queue are not Kueue's: the registration's matchCondition keeps them
    // from the worker altogether (it counts every review it answers).
    let hook = "workload.mutation.worker.gpustack.ai";
    let answered = || {
        ["NotApplicable", "FitPinned"]
            .map(|r| {
                admissions(&worker, hook, "allowed", r).unwrap_or(0)
                    + admissions(&worker, hook, "patched", r).unwrap_or(0)
            })
            .iter()
            .sum::<u64>()
    };
    let before = answered();
    assert!(before >= 5, "the queued Workloads were answered");
    let mut unqueued = workload("wl-unqueued", "", json!({"nvidia.com/gpu.shared": "2"}));
    unqueued["spec"]
        .as_object_mut()
        .unwrap()
        .remove("queueName");
    c.create_ok("wl-unqueued", &unqueued);
    assert_eq!(workload_expressions(&c, "wl-unqueued"), Value::Null);
    assert_eq!(answered(), before, "not sent to the worker");

    // The model-manager pin. The test plays the kubelet: it writes the node's CSINode as the
    // kubelet does when the model-manager's CSI plugin registers, and drops the driver when the
    // plugin goes; the worker keeps the Node's label from it.
    let label = gpustack_api::labels::MODEL_CSI_REGISTERED;
    c.create_ok(
        "node-gpu-a",
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a"}}),
    );
    let csi_node = |drivers: Value| {
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "gpu-a"},
               "spec": {"drivers": drivers}})
    };
    c.create_ok(
        "csinode-gpu-a",
        &csi_node(json!([{"name": gpustack_api::labels::MODEL_CSI_DRIVER, "nodeID": "gpu-a"}])),
    );
    let node_label = || c.get_json(&["get", "node", "gpu-a"])["metadata"]["labels"][label].clone();
    wait_until("the node's model-manager label", DEADLINE, || {
        (node_label() == "true").then_some(())
    });
    let mut with_cache = workload("wl-model", &q, json!({"nvidia.com/gpu.shared": "2"}));
    with_cache["spec"]["podSets"][0]["template"]["spec"]["volumes"] = json!([
        {"name": "model", "csi": {"driver": gpustack_api::labels::MODEL_CSI_DRIVER, "readOnly": true}},
    ]);
    c.create_ok("wl-model", &with_cache);
    assert_eq!(
        workload_expressions(&c, "wl-model"),
        json!([
            {"key": "shared-free-cards.fit.gpustack.ai/nvidia-h100", "operator": "Gt", "values": ["1"]},
            {"key": label, "operator": "In", "values": ["true"]},
        ])
    );
    // The plugin goes: the kubelet drops the driver, the label goes.
    c.gw.kubectl_ok(&[
        "patch",
        "csinode",
        "gpu-a",
        "--type=merge",
        "-p",
        r#"{"spec":{"drivers":[]}}"#,
    ]);
    wait_until("the node's model-manager label to go", DEADLINE, || {
        node_label().is_null().then_some(())
    });

    // Off with the setting (the worker follows the Settings Secret).
    c.setting("workload-fit-affinity", "false");
    wait_until("the fit pin to be off", DEADLINE, || {
        let name = format!(
            "wl-off-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?
                .as_nanos()
        );
        c.create_ok(
            &name,
            &workload(&name, &q, json!({"nvidia.com/gpu.shared": "2"})),
        );
        workload_expressions(&c, &name).is_null().then_some(())
    });

    // The worker down: Pods are refused (Fail), Workloads still go in (Ignore).
    worker.stop();
    let err = c.refused_pod(
        "orphan",
        &q,
        json!({SLICED: "1", "nvidia.com/gpu.sliced.memory-percentage": "10"}),
    );
    says(
        &err,
        "failed calling webhook \"pod.mutation.worker.gpustack.ai\"",
    );
    c.create_ok(
        "wl-down",
        &workload("wl-down", &q, json!({"nvidia.com/gpu.shared": "2"})),
    );
    assert_eq!(workload_expressions(&c, "wl-down"), Value::Null);
}

fn instance(name: &str, resources: Value, privileged: bool) -> Value {
    json!({
        "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Instance",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "h100", "resources": resources, "privileged": privileged},
    })
}

#[test]
fn instances_fit_their_pool_and_privileges_follow_the_settings() {
    let c = Cluster::start();
    let _worker = c.worker();
    let mut status = h100_status("h100");
    status["accelerator"] = json!({"onceMaxRequest": 8, "remaining": 8, "capacity": 8});
    status["acceleratorSliced"] = json!({"onceMaxRequest": 100, "remaining": 800, "capacity": 800});
    c.instance_type("h100", Some(status));

    // Defaulted: a slice is one card with all its cores' time, and its share of the unit's
    // CPU and memory (overcommit is on by default: always recomputed).
    c.create_ok(
        "slice",
        &instance(
            "slice",
            json!({"acceleratorSlicedMemoryPercentage": 25}),
            false,
        ),
    );
    let got = c.get_json(&["get", "instances.v1alpha1.worker.gpustack.ai", "slice"]);
    assert_eq!(
        got["spec"]["resources"],
        json!({"accelerator": 1, "acceleratorSlicedCoresPercentage": 100, "acceleratorSlicedMemoryPercentage": 25,
               "cpu": "2", "ram": "16Gi", "localStorage": "15Gi"})
    );
    c.create_ok(
        "two",
        &instance("two", json!({"accelerator": 2, "ram": "128Gi"}), false),
    );

    let cases = [
        (
            "both",
            json!({"acceleratorSlicedMemoryPercentage": 25, "acceleratorPartitionedProfile": "1g.10gb"}),
            false,
            "spec.resources.acceleratorPartitionedProfile: Forbidden: a hardware partition and a logical slice percentage are mutually exclusive",
        ),
        (
            "unoffered",
            json!({"acceleratorPartitionedProfile": "7g.80gb"}),
            false,
            "partition profile \"7g.80gb\" is not offered by instance type h100; offered: [1g.10gb, 3g.40gb]",
        ),
        (
            "too-many",
            json!({"accelerator": 9}),
            false,
            "spec.resources.accelerator: Invalid value: \"9\": must be from 1 to the pool's capacity of 8 cards",
        ),
        (
            "too-much-storage",
            json!({"accelerator": 1, "localStorage": "101Gi"}),
            false,
            "spec.resources.localStorage: Invalid value: \"101Gi\": must not exceed the pool's local storage",
        ),
        (
            "privileged",
            json!({"accelerator": 1}),
            true,
            "spec.privileged: Forbidden: privileged instances are not allowed (setting instance-privileged-allowed)",
        ),
    ];
    for (name, resources, privileged, message) in &cases {
        let err = c.refused(name, &instance(name, resources.clone(), *privileged));
        assert!(
            err.contains(&format!("The Instance \"{name}\" is invalid: ")),
            "{name}: {err}"
        );
        assert!(err.contains(message), "{name}: {err}");
    }

    // A pool that does not exist is named.
    let mut missing = instance("missing", json!({"accelerator": 1}), false);
    missing["spec"]["type"] = json!("gone");
    let err = c.refused("missing", &missing);
    assert!(
        err.contains("spec.type: Invalid value: \"gone\": instance type gone does not exist"),
        "{err}"
    );

    // Frozen while it runs: only a stop (then a start) changes what it is.
    let patch = |body: Value| {
        c.gw.kubectl(&[
            "patch",
            "instances.v1alpha1.worker.gpustack.ai",
            "two",
            "--type=merge",
            "-p",
            &body.to_string(),
        ])
    };
    let out = patch(json!({"spec": {"image": "other:1"}}));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains(
                "spec.image: Forbidden: is immutable while the instance runs; stop it first"
            ),
        "{err}"
    );
    let out = patch(json!({"spec": {"stop": true}}));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = patch(json!({"spec": {"volume": {"ephemeral": {"capacity": "2Gi"}}}}));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spec.volume: Forbidden: is immutable"),
        "{err}"
    );

    // Allowed once the setting says so (the worker follows the Settings Secret).
    c.setting("instance-privileged-allowed", "true");
    wait_until("privileged instances to be allowed", DEADLINE, || {
        c.create(
            "privileged",
            &instance("privileged", json!({"accelerator": 1}), true),
        )
        .0
        .then_some(())
    });
}

/// A Pod of one 10 % slice, admitted through `pool`'s queue.
fn admitted_slice(c: &Cluster, name: &str) -> Value {
    let p = pod(
        name,
        Some(&entrance("pool")),
        json!({SLICED: "1", "nvidia.com/gpu.sliced.memory-percentage": "10"}),
    );
    c.create_ok(name, &p);
    c.get_json(&["get", "pod", name])
}

#[test]
fn an_admitted_pod_keeps_what_was_admitted() {
    let c = Cluster::start();
    let worker = c.worker();
    c.instance_type("pool", Some(h100_status("pool")));
    let admitted = admitted_slice(&c, "slice");
    assert_eq!(
        admitted["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu.sliced.units"],
        "160000"
    );

    // The review's attack: four slices and a whole card after admission. The cluster's Pod
    // rules refuse it before any webhook (kube-apiserver's wording).
    for (what, patch) in [
        (
            "more slices",
            json!([{"op": "replace", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu.sliced", "value": "4"}]),
        ),
        (
            "a whole card",
            json!([{"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu", "value": "1"}]),
        ),
        (
            "another node",
            json!([{"op": "add", "path": "/spec/nodeName", "value": "elsewhere"}]),
        ),
        (
            "another account",
            json!([{"op": "add", "path": "/spec/serviceAccountName", "value": "admin"}]),
        ),
        (
            "privileges",
            json!([{"op": "add", "path": "/spec/containers/0/securityContext", "value": {"privileged": true}}]),
        ),
    ] {
        let err = c.gw.kubectl_err(&[
            "patch",
            "pod",
            "slice",
            "--type=json",
            "-p",
            &patch.to_string(),
        ]);
        assert!(
            err.contains("spec: Forbidden: pod updates may not change fields other than"),
            "{what}: {err}"
        );
    }
    // The units the mutation wrote stay as they were.
    let now = c.get_json(&["get", "pod", "slice"]);
    assert_eq!(now["spec"], admitted["spec"]);

    // What the API server lets change (the image) goes through the worker's UPDATE review...
    let before = admissions(
        &worker,
        "pod.validation.worker.gpustack.ai",
        "allowed",
        "Admitted",
    );
    c.gw.kubectl_ok(&["set", "image", "pod/slice", "app=busybox:2"]);
    wait_until("the update's review counted", DEADLINE, || {
        let after = admissions(
            &worker,
            "pod.validation.worker.gpustack.ai",
            "allowed",
            "Admitted",
        );
        (after > before).then_some(())
    });
    // ...and so does the queue label, which is metadata: moving an admitted Pod to another
    // queue, or out of its queue, is refused by the worker.
    let other = entrance("other");
    for label in [format!("{QUEUE_LABEL}={other}"), format!("{QUEUE_LABEL}-")] {
        let err =
            c.gw.kubectl_err(&["label", "pod", "slice", &label, "--overwrite"]);
        says(
            &err,
            format!(
                "metadata.labels[{QUEUE_LABEL}]: Forbidden: the queue of an admitted Pod may not change"
            ),
        );
    }
    assert_eq!(
        admissions(
            &worker,
            "pod.validation.worker.gpustack.ai",
            "denied",
            "FieldImmutable"
        ),
        Some(2)
    );
    // Labels the worker does not judge stay free.
    c.gw.kubectl_ok(&["label", "pod", "slice", "team=a"]);
}

#[test]
fn reviews_come_only_from_the_api_server() {
    let c = Cluster::start();
    let worker = c.worker();
    c.instance_type("pool", Some(h100_status("pool")));
    // The cluster's own reviews (its front-proxy certificate) are answered.
    admitted_slice(&c, "slice");

    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u-1", "name": "x", "namespace": "default", "operation": "CREATE",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "userInfo": {"username": "attacker"},
            "object": pod("x", Some(&entrance("unknown")), json!({SLICED: "2"})),
        },
    });
    let file = c.file("review", &review);
    let path = "/validate-gpustack-worker-core-v1-pod";
    // No credentials: 401, before the review is read.
    let anonymous = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let mut config = kube::Config::new(
            format!("https://127.0.0.1:{}", worker.port)
                .parse()
                .unwrap(),
        );
        config.accept_invalid_certs = true;
        let client = kube::Client::try_from(config).unwrap();
        let request = http::Request::post(path)
            .header("content-type", "application/json")
            .body(review.to_string().into_bytes())
            .unwrap();
        client.request_text(request).await
    });
    assert!(
        matches!(anonymous, Err(kube::Error::Api(ref s)) if s.code == 401),
        "{anonymous:?}"
    );
    // A token of the cluster without the right to POST the path: 403.
    c.gw.kubectl_ok(&["create", "serviceaccount", "intruder"]);
    let token = c.gw.kubectl_ok(&["create", "token", "intruder"]);
    let intruder = worker.kubeconfig_with_token("intruder", token.trim());
    let out = std::process::Command::new("kubectl")
        .args([
            "--kubeconfig",
            intruder.to_str().unwrap(),
            "create",
            "--raw",
            path,
            "-f",
            &file,
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    says(&String::from_utf8_lossy(&out.stderr), "Forbidden");
    assert_eq!(
        admissions(
            &worker,
            "pod.validation.worker.gpustack.ai",
            "denied",
            "CallerNotAllowed"
        ),
        Some(2)
    );
    // An admin token (allowed everything) may send one, as an API server configured with a
    // token would.
    let answered: Value =
        serde_json::from_str(&worker.kubectl_ok(&["create", "--raw", path, "-f", &file])).unwrap();
    assert_eq!(answered["response"]["uid"], "u-1");
    assert_eq!(answered["response"]["allowed"], false);
}
