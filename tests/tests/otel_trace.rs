//! One `kubectl create` is one trace through every hop: the real `worker-gateway` (an embedded
//! cluster) takes it, its aggregation proxy forwards it to the real `worker`'s aggregated API,
//! whose write of the stored object goes back to the cluster, whose admission chain calls the
//! worker's webhooks. Both processes export over OTLP/HTTP to a receiver here that decodes the
//! protobuf exports; the spans of every hop share the trace, each parent among them. And a
//! device plugin call carrying a caller's `traceparent` is a server span under the caller's,
//! with the gRPC status its trailers carried.

use std::collections::BTreeSet;

use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess, free_port},
    hub::crds_dir,
    kubelet::Kubelet,
    machines::nvidia,
    operator,
    otlp::{OtlpReceiver, ReceivedSpan},
    wait::wait_until,
    worker::WorkerProcess,
};
use serde_json::json;

/// The aggregated view kubectl writes, and the custom resource the worker stores it as.
const VIEW: &str = "/apis/worker.gpustack.ai/v1/instancetypes";
const STORED: &str = "/apis/worker.gpustack.ai/v1alpha1/instancetypes";
const NAME: &str = "traced-small";

fn route(s: &ReceivedSpan) -> &str {
    s.attribute("http.route").unwrap_or_default()
}

/// The server span of a POST to `path` (behind a `/clusters/{cluster}` prefix or not).
fn posts_to(s: &ReceivedSpan, path: &str) -> bool {
    s.attribute("http.request.method") == Some("POST") && route(s).ends_with(path)
}

#[test]
fn a_kubectl_write_through_aggregation_and_admission_is_one_trace() {
    let receiver = OtlpReceiver::start();
    let env = receiver.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start_with_env(&dir.path().join("gw"), "traced", &env);
    let _worker = WorkerProcess::start(
        &gw,
        &dir.path().join("worker"),
        &["--disable-applications=*"],
        &env,
    );
    let file = dir.path().join("instancetype.json");
    let object = json!({
        "apiVersion": "worker.gpustack.ai/v1", "kind": "InstanceType",
        "metadata": {"name": NAME},
        "spec": {"acceleratable": true, "acceleratorGroup": "nvidia-h100", "os": "linux",
                 "arch": "amd64", "unitResources": {"cpu": "8", "ram": "64Gi"},
                 "localStorage": "100Gi"},
    });
    std::fs::write(&file, object.to_string()).unwrap();
    gw.kubectl_ok(&["create", "-f", &file.to_string_lossy()]);

    // kubectl sends no trace context: its POST's span at the gateway is the trace's root.
    let trace = wait_until("the whole trace of the create", DEADLINE, || {
        let spans = receiver.spans();
        let root = spans
            .iter()
            .find(|s| s.parent_span_id.is_empty() && posts_to(s, VIEW))?;
        let trace: Vec<ReceivedSpan> = spans
            .iter()
            .filter(|s| s.trace_id == root.trace_id)
            .cloned()
            .collect();
        let reviews = trace
            .iter()
            .filter(|s| s.name == "admission review")
            .count();
        let calls = trace
            .iter()
            .filter(|s| s.name == "admission webhook")
            .count();
        // The worker's request span ends last of the worker's, the root last of all.
        let worker_api = trace
            .iter()
            .any(|s| posts_to(s, VIEW) && !s.parent_span_id.is_empty());
        (calls > 0 && reviews == calls && worker_api).then_some(trace)
    });
    let by_id = |id: &str| trace.iter().find(|s| s.span_id == id);
    let parent = |s: &ReceivedSpan| {
        by_id(&s.parent_span_id)
            .unwrap_or_else(|| panic!("the parent of {s:?} is not in the trace"))
    };
    let one = |what: &str, pred: &dyn Fn(&ReceivedSpan) -> bool| -> ReceivedSpan {
        let found: Vec<&ReceivedSpan> = trace.iter().filter(|s| pred(s)).collect();
        match found.as_slice() {
            [s] => (*s).clone(),
            _ => panic!("{what}: {} spans in {trace:#?}", found.len()),
        }
    };

    // Every span but the root has its parent in the same trace.
    let roots: Vec<&ReceivedSpan> = trace
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1, "{trace:#?}");
    for s in &trace {
        if !s.parent_span_id.is_empty() {
            parent(s);
        }
    }
    let ids: BTreeSet<&str> = trace.iter().map(|s| s.span_id.as_str()).collect();
    assert_eq!(ids.len(), trace.len(), "span ids are distinct");

    // The hops, each under the one before: gateway -> aggregation proxy -> worker API ->
    // gateway (the stored object) -> admission webhook call -> worker webhook -> its review.
    let root = roots[0].clone();
    assert_eq!(root.attribute("http.response.status_code"), Some("201"));
    let proxy = one("the aggregation proxy", &|s| s.name == "aggregation proxy");
    assert_eq!(proxy.parent_span_id, root.span_id);
    assert_eq!(proxy.attribute("apiservice"), Some("v1.worker.gpustack.ai"));
    let worker_api = one("the worker's request", &|s| {
        posts_to(s, VIEW) && !s.parent_span_id.is_empty()
    });
    assert_eq!(worker_api.parent_span_id, proxy.span_id);
    assert_eq!(route(&worker_api), VIEW, "the worker serves at its root");
    let stored = one("the stored object's write", &|s| posts_to(s, STORED));
    assert_eq!(stored.parent_span_id, worker_api.span_id);
    let calls: Vec<&ReceivedSpan> = trace
        .iter()
        .filter(|s| s.name == "admission webhook")
        .collect();
    let mut webhooks = BTreeSet::new();
    for call in calls {
        assert_eq!(call.parent_span_id, stored.span_id, "{call:?}");
        webhooks.insert(call.attribute("webhook").unwrap_or_default().to_owned());
        let served: Vec<&ReceivedSpan> = trace
            .iter()
            .filter(|s| s.parent_span_id == call.span_id)
            .collect();
        let [served] = served.as_slice() else {
            panic!("the webhook's request under {call:?}: {served:#?}")
        };
        assert!(
            route(served).ends_with("-worker-gpustack-ai-v1alpha1-instancetype"),
            "{served:?}"
        );
        let review = trace
            .iter()
            .find(|s| s.name == "admission review" && s.parent_span_id == served.span_id)
            .unwrap_or_else(|| panic!("no review under {served:?}"));
        assert_eq!(review.attribute("webhook"), Some(route(served)));
    }
    assert!(
        webhooks.contains("instancetype.validation.worker.gpustack.ai"),
        "{webhooks:?}"
    );

    // Routes are templates: no span names the object.
    for s in &trace {
        assert!(!route(s).contains(NAME), "{s:?}");
        assert!(!s.name.contains(NAME), "{s:?}");
    }
}

/// A process killed (and reaped) on drop.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_device_plugin_call_is_a_server_span_under_its_callers() {
    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const CALLER: &str = "00f067aa0ba902b7";
    let receiver = OtlpReceiver::start();
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("gw"), "grpc");
    gw.kubectl_ok(&["apply", "-f", crds_dir().to_str().unwrap()]);
    gw.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/devices.worker.gpustack.ai",
        "--timeout=30s",
    ]);
    let node = dir.path().join("node.yaml");
    std::fs::write(
        &node,
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-node-1\n",
    )
    .unwrap();
    gw.kubectl_ok(&["apply", "-f", node.to_str().unwrap()]);
    let host = nvidia::hgx_h100_node(&dir.path().join("host"));
    let kubelet = Kubelet::start(&dir.path().join("kubelet"));
    let mut dm = operator();
    dm.args([
        "device-manager",
        "serve",
        "--manufacturer=nvidia",
        "--monitor-period=1s",
        "--bind-address=127.0.0.1",
        &format!("--secure-port={}", free_port()),
        &format!("--kube-socket={}", kubelet.kube_socket().display()),
        &format!("--kubeconfig={}", gw.kubeconfig().display()),
    ])
    .env("GPUSTACK_SYSTEM_ROOT", &host.root)
    .env(nvidia::FIXTURE_ENV, &host.nvml_fixture)
    .env("KUBERNETES_NODE_NAME", "gpu-node-1")
    .env_remove("LD_LIBRARY_PATH")
    .env_remove("KUBECONFIG")
    .stdout(std::process::Stdio::null())
    .stderr(std::fs::File::create(dir.path().join("dm.log")).unwrap());
    for (k, v) in receiver.env() {
        dm.env(k, v);
    }
    let _dm = Running(dm.spawn().expect("starting device-manager serve"));
    wait_until("the sliced plugin to register", DEADLINE, || {
        kubelet
            .registered_resources()
            .iter()
            .any(|r| r == "nvidia.com/gpu.sliced")
            .then_some(())
    });
    kubelet
        .options_traced("nvidia.sliced.sock", &format!("00-{TRACE}-{CALLER}-01"))
        .expect("GetDevicePluginOptions");
    let span = wait_until("the call's span", DEADLINE, || {
        receiver
            .spans()
            .into_iter()
            .find(|s| s.trace_id == TRACE && s.parent_span_id == CALLER)
    });
    let method = "v1beta1.DevicePlugin/GetDevicePluginOptions";
    assert_eq!(span.name, method, "{span:?}");
    assert_eq!(span.attribute("rpc.system"), Some("grpc"));
    assert_eq!(span.attribute("rpc.method"), Some(method));
    // A success's status comes in the trailers, after the answer's headers.
    assert_eq!(
        span.attribute("rpc.grpc.status_code"),
        Some("0"),
        "{span:?}"
    );
}
