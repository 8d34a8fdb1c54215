//! `worker-gateway`'s `/metrics` end to end: the real binary mirroring a real upstream (another
//! gateway's embedded cluster) and serving its own, scraped over its unix socket as the
//! admin. Its text passes `promtool check metrics`; requests are counted by verb, resource and
//! code with kube-apiserver's duration buckets; and ten thousand objects with distinct names
//! (and as many distinct names asked for and not found) add no series.

use std::collections::BTreeSet;

use futures::{StreamExt, TryStreamExt};
use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess, free_port, kube_client},
    hub::{http_over_unix, upstream, upstream_status, upstreams_file},
    prometheus::check_metrics,
    wait::wait_until,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};

/// The admin's `/metrics` (over the owner-only socket).
fn scrape(gw: &GatewayProcess) -> String {
    let (code, text) =
        http_over_unix(&gw.socket(), "GET", "/metrics", None).expect("/metrics over the socket");
    assert_eq!(code, 200, "{text}");
    text
}

/// The series in `text`: each sample line's name and labels, without its value.
fn series(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| Some(l.rsplit_once(' ')?.0.to_owned()))
        .collect()
}

/// The value of the sample line `series` in `text`.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn gateway_metrics_pass_promtool_and_count_requests_by_verb_resource_and_code() {
    let root = tempfile::tempdir().unwrap();
    let east = upstream(root.path(), "east", &["gpu-a"]);
    let upstreams = upstreams_file(root.path(), &[&east]);
    let gw = GatewayProcess::start_with(
        &root.path().join("hub"),
        "demo",
        free_port(),
        &[
            "--embedded-cluster=demo",
            &format!("--upstreams={}", upstreams.display()),
        ],
    );
    wait_until("east to be mirrored", DEADLINE, || {
        (upstream_status(&gw, "east")["phase"] == "Ready").then_some(())
    });
    gw.kubectl_ok(&["create", "configmap", "counted"]);
    gw.kubectl_ok(&["get", "configmap", "counted"]);
    gw.kubectl_err(&["get", "configmap", "not-there"]);
    // A resource no cluster serves, under a name of the client's choosing.
    gw.kubectl_err(&["get", "--raw", "/api/v1/namespaces/default/made-up-kind"]);

    let text = scrape(&gw);
    check_metrics("worker-gateway", &text);
    for (line, at_least) in [
        (
            r#"gpustack_gateway_api_requests_total{code="201",resource="configmaps",verb="create"}"#,
            1.0,
        ),
        (
            r#"gpustack_gateway_api_requests_total{code="200",resource="configmaps",verb="get"}"#,
            1.0,
        ),
        (
            r#"gpustack_gateway_api_requests_total{code="404",resource="configmaps",verb="get"}"#,
            1.0,
        ),
        (
            r#"gpustack_gateway_api_requests_total{code="404",resource="other",verb="list"}"#,
            1.0,
        ),
        (
            r#"gpustack_gateway_api_request_duration_seconds_bucket{resource="configmaps",verb="create",le="60"}"#,
            1.0,
        ),
        (
            r#"gpustack_gateway_http_requests_total{code="201",method="POST"}"#,
            1.0,
        ),
        (
            r#"gpustack_gateway_upstream_phase{cluster="east",phase="Ready"}"#,
            1.0,
        ),
        (
            r#"gpustack_gateway_upstream_objects{cluster="east",kind="Devices.worker.gpustack.ai"}"#,
            1.0,
        ),
    ] {
        let v = value(&text, line).unwrap_or_else(|| panic!("{line} missing from:\n{text}"));
        assert!(v >= at_least, "{line} is {v}:\n{text}");
    }
    // kube-apiserver's buckets, from 5 ms to a minute.
    let buckets: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with(
                r#"gpustack_gateway_api_request_duration_seconds_bucket{resource="configmaps",verb="create","#,
            )
        })
        .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(buckets.first(), Some(&"0.005"), "{buckets:?}");
    assert_eq!(buckets.len(), 24, "23 bounds and +Inf: {buckets:?}");
    // No label carries what the client named.
    assert!(
        !text.contains("not-there") && !text.contains("made-up-kind"),
        "{text}"
    );
}

/// Creates a ConfigMap for each of `names`, 16 at a time, and asks for as many names that do
/// not exist, and for as many resources no cluster serves.
async fn named_requests(client: &kube::Client, names: Vec<String>) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    futures::stream::iter(names)
        .map(|name| {
            let api = api.clone();
            let client = client.clone();
            async move {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        ..ObjectMeta::default()
                    },
                    ..ConfigMap::default()
                };
                api.create(&PostParams::default(), &cm).await?;
                let missing = api.get_opt(&format!("{name}-missing")).await?;
                assert!(missing.is_none());
                let unserved = http::Request::get(format!("/api/v1/namespaces/default/{name}s"))
                    .body(Vec::new())
                    .expect("a request");
                let refused = client.request_text(unserved).await;
                assert!(
                    matches!(&refused, Err(kube::Error::Api(s)) if s.code == 404),
                    "{refused:?}"
                );
                Ok::<_, kube::Error>(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<()>()
        .await
        .expect("creating ConfigMaps");
}

#[test]
fn ten_thousand_named_objects_add_no_series() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("gw"), "cardinality");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime.block_on(kube_client(&gw.kubeconfig()));
    // A few of each request first: every series these requests make exists from here on.
    let warm: Vec<String> = (0..16).map(|i| format!("warm-{i}")).collect();
    runtime.block_on(named_requests(&client, warm));
    let before = scrape(&gw);

    let names: Vec<String> = (0..10_000).map(|i| format!("object-{i:05}")).collect();
    runtime.block_on(named_requests(&client, names));
    let after = scrape(&gw);

    let created = value(
        &after,
        r#"gpustack_gateway_api_requests_total{code="201",resource="configmaps",verb="create"}"#,
    );
    assert_eq!(created, Some(10_016.0), "{after}");
    assert_eq!(
        series(&before),
        series(&after),
        "the series changed with the objects' names"
    );
    assert!(
        !after.contains("object-"),
        "a label carries a name:\n{after}"
    );
}
