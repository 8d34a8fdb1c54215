//! End to end: run-time subscriptions of the hub (`POST`/`DELETE /apis/workers`) in both
//! connection modes, their persistence across a restart, who may make them, `/metrics`, and
//! resuming mirrors from stored watch progress. Upstreams are embedded clusters in their own
//! `worker-gateway` processes; the GPUStack server's proxy is a stand-in (see
//! [`GpustackProxy`]). Each test runs with the hub's store on SQLite and on PostgreSQL
//! (`on_sqlite::NAME`, `on_postgres::NAME`).

use std::collections::HashMap;

use gpustack_tests::{
    embedded::{DEADLINE, free_port, kubectl_with},
    hub::{GpustackProxy, HubProcess, add_device, restart_and_resume, upstream, upstreams_file},
    hub_backend::{Backend, HubStore},
    on_both_backends,
    wait::wait_until,
};
use serde_json::Value;

on_both_backends!(
    subscribe_and_unsubscribe_at_run_time_over_the_socket_and_survive_a_restart,
    gpustack_api_mode_goes_through_the_proxy_with_the_token_and_never_shows_it,
    over_https_only_the_admin_token_subscribes_and_cluster_tokens_read,
    a_restarted_hub_resumes_its_watches_instead_of_relisting,
    an_inline_kubeconfig_subscribes_in_any_mode_survives_a_restart_and_is_never_shown,
);

fn subscribe_and_unsubscribe_at_run_time_over_the_socket_and_survive_a_restart(backend: Backend) {
    let store = HubStore::new(backend);
    let root = tempfile::tempdir().unwrap();
    let east = upstream(root.path(), "east", &["gpu-a", "gpu-b"]);
    // Run-time subscriptions may name kubeconfigs under --data-dir and the allowed directories.
    let allow = format!("--subscription-kubeconfig-dir={}", root.path().display());
    let data = root.path().join("hub");
    let port = free_port();
    let flags = store.args(&["--worker-conn-mode=loopback", &allow]);
    let hub = HubProcess::start(&data, port, &flags);
    assert_eq!(hub.workers()["items"], serde_json::json!([]));

    // Bad requests: one line naming the parameter, nothing subscribed.
    for (target, expected) in [
        ("/apis/workers", "cluster: required"),
        ("/apis/workers?cluster=East", "DNS label"),
        (
            "/apis/workers?cluster=east&gvk=Devices",
            "group/version/Kind",
        ),
        (
            "/apis/workers?cluster=east&kubeconfig=/nonexistent/kc",
            "outside the directories subscriptions may name",
        ),
    ] {
        let (code, body) = hub.request("POST", target, None);
        assert_eq!(code, 400, "{target}: {body}");
        let status: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["kind"], "Status");
        assert!(
            status["message"].as_str().unwrap().contains(expected),
            "{target}: {body}"
        );
    }
    assert_eq!(hub.workers()["items"], serde_json::json!([]));

    let subscribe = format!(
        "/apis/workers?cluster=east&kubeconfig={}",
        east.kubeconfig().display()
    );
    let (code, body) = hub.request("POST", &subscribe, None);
    assert_eq!(code, 202, "{body}");
    assert!(body.contains("\"Started\""), "{body}");
    let ready = hub.wait_phase("east", "Ready");
    hub.wait_mirrored("east", &["gpu-a", "gpu-b"]);
    store.assert_devices_in_database("east", 2);
    assert!(ready["lastSyncTime"].is_string());
    // A duplicate is a no-op; `force` restarts the mirror.
    let (_, body) = hub.request("POST", &subscribe, None);
    assert!(body.contains("\"Unchanged\""), "{body}");
    let (_, body) = hub.request("POST", &format!("{subscribe}&force"), None);
    assert!(body.contains("\"Replaced\""), "{body}");
    hub.wait_phase("east", "Ready");
    // The mirror's kubeconfig works with kubectl, read-only.
    let east_kubeconfig = data.join("east.kubeconfig");
    let kubectl_flags = vec![
        format!("--kubeconfig={}", east_kubeconfig.display()),
        format!("--cache-dir={}", root.path().join("kc-cache").display()),
    ];
    let out = kubectl_with(&kubectl_flags, &["get", "devices", "-o", "name"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "devices.worker.gpustack.ai/gpu-a\ndevices.worker.gpustack.ai/gpu-b\n"
    );

    // Stored: a restarted hub (no flags naming east) mirrors it again.
    hub.stop();
    let hub = HubProcess::start(&data, port, &flags);
    assert_eq!(hub.mirrored("east"), ["gpu-a", "gpu-b"], "served at once");
    add_device(&east, "gpu-c");
    hub.wait_mirrored("east", &["gpu-a", "gpu-b", "gpu-c"]);

    // Unsubscribing drops the mirror, its fleet copies and its kubeconfig.
    let (code, body) = hub.request("DELETE", "/apis/workers?cluster=east", None);
    assert_eq!(code, 200, "{body}");
    assert!(hub.worker("east").is_none());
    let (code, _) = hub.request(
        "GET",
        "/clusters/east/apis/worker.gpustack.ai/v1alpha1/devices",
        None,
    );
    assert_eq!(code, 404);
    let (code, fleet) = hub.request(
        "GET",
        "/clusters/_fleet/apis/worker.gpustack.ai/v1alpha1/devices",
        None,
    );
    assert_eq!(code, 200, "the fleet is still served: {fleet}");
    assert!(!fleet.contains("east."), "{fleet}");
    assert!(!east_kubeconfig.exists());
    let (code, _) = hub.request("DELETE", "/apis/workers?cluster=east", None);
    assert_eq!(code, 404);
    // And it stays gone after a restart.
    hub.stop();
    let hub = HubProcess::start(&data, port, &flags);
    assert!(hub.worker("east").is_none());
}

fn gpustack_api_mode_goes_through_the_proxy_with_the_token_and_never_shows_it(backend: Backend) {
    let store = HubStore::new(backend);
    let root = tempfile::tempdir().unwrap();
    let east = upstream(root.path(), "east", &["gpu-a"]);
    let west = upstream(root.path(), "west", &["gpu-w"]);
    let (east_token, west_token) = ("east-secret-7f3a9c", "west-secret-0b1d2e");
    let proxy = GpustackProxy::start(HashMap::from([
        ("east".to_owned(), (east.socket(), east_token.to_owned())),
        ("west".to_owned(), (west.socket(), west_token.to_owned())),
    ]));
    let hub = HubProcess::start(
        &root.path().join("hub"),
        free_port(),
        &store.args(&[&format!("--worker-conn-gpustack-api-port={}", proxy.port)]),
    );
    let body = format!(r#"{{"clusters":["east"],"token":"{east_token}"}}"#);
    let (code, answer) = hub.request("POST", "/apis/workers", Some(&body));
    assert_eq!(code, 202, "{answer}");
    hub.wait_phase("east", "Ready");
    hub.wait_mirrored("east", &["gpu-a"]);
    // A wrong token: the proxy refuses, status says why without any token.
    let (code, _) = hub.request(
        "POST",
        "/apis/workers?cluster=west&token=not-the-west-secret",
        None,
    );
    assert_eq!(code, 202);
    let west_status = wait_until("west to report its failure", DEADLINE, || {
        hub.worker("west")
            .filter(|w| w["lastError"].as_str().is_some_and(|e| e.contains("401")))
    });
    assert_eq!(west_status["phase"], "Pending");
    let seen = proxy.seen.lock().unwrap().clone();
    assert!(seen["east"].iter().all(|t| t == east_token), "{seen:?}");
    assert!(seen["west"].iter().all(|t| t == "not-the-west-secret"));
    // Tokens reach neither status, nor metrics, nor the log.
    let status = hub.workers().to_string();
    let (_, metrics) = hub.request("GET", "/metrics", None);
    for secret in [east_token, "not-the-west-secret"] {
        assert!(!status.contains(secret), "{status}");
        assert!(!metrics.contains(secret));
        assert!(!hub.log().contains(secret), "the log shows a token");
    }
    assert!(
        metrics.contains("gpustack_gateway_upstream_phase{cluster=\"east\",phase=\"Ready\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "gpustack_gateway_upstream_objects{cluster=\"east\",kind=\"Devices.worker.gpustack.ai\"} 1"
        ),
        "{metrics}"
    );
    // The right token, forced: west converges.
    let (code, _) = hub.request(
        "POST",
        &format!("/apis/workers?cluster=west&token={west_token}&force=true"),
        None,
    );
    assert_eq!(code, 202);
    hub.wait_phase("west", "Ready");
    hub.wait_mirrored("west", &["gpu-w"]);
}

fn over_https_only_the_admin_token_subscribes_and_cluster_tokens_read(backend: Backend) {
    let store = HubStore::new(backend);
    let root = tempfile::tempdir().unwrap();
    let east = upstream(root.path(), "east", &["gpu-a"]);
    let data = root.path().join("hub");
    let upstreams = upstreams_file(root.path(), &[&east]);
    let hub = HubProcess::start(
        &data,
        free_port(),
        &store.args(&[
            "--worker-conn-mode=loopback",
            &format!("--upstreams={}", upstreams.display()),
            &format!("--token-file={}", data.with_extension("token").display()),
            &format!("--subscription-kubeconfig-dir={}", root.path().display()),
        ]),
    );
    hub.wait_phase("east", "Ready");
    let kubectl = |kubeconfig: &str, args: &[&str]| {
        let flags = vec![
            format!("--kubeconfig={}", data.join(kubeconfig).display()),
            format!("--cache-dir={}", root.path().join("kc-cache").display()),
        ];
        kubectl_with(&flags, args).output().unwrap()
    };
    let body = root.path().join("subscribe.json");
    std::fs::write(
        &body,
        format!(
            r#"{{"clusters":["again"],"kubeconfig":"{}"}}"#,
            east.kubeconfig().display()
        ),
    )
    .unwrap();
    let create = [
        "create",
        "--raw",
        "/apis/workers",
        "-f",
        body.to_str().unwrap(),
    ];
    // The mirror's reader token reads status and metrics, but may not subscribe.
    let out = kubectl("east.kubeconfig", &["get", "--raw", "/apis/workers"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Its own cluster's series only: not the gateway-wide ones, which sum every cluster's.
    let out = kubectl("east.kubeconfig", &["get", "--raw", "/metrics"]);
    let metrics = String::from_utf8_lossy(&out.stdout);
    assert!(
        metrics.contains("gpustack_gateway_upstream_phase{cluster=\"east\""),
        "{metrics}"
    );
    assert!(
        !metrics.contains("gpustack_gateway_store_resource_version"),
        "{metrics}"
    );
    let out = kubectl("east.kubeconfig", &create);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("admin token"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The admin kubeconfig (written for --token-file) may.
    let out = kubectl("_admin.kubeconfig", &create);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    hub.wait_phase("again", "Ready");
    // No bearer token at all: 401. A user entry with no credentials makes kubectl prompt for a
    // username on standard input (it reports `EOF` without reaching the server), so the user
    // names itself without a password: kubectl then sends no token and shows the server's answer.
    std::fs::write(
        data.join("none.kubeconfig"),
        std::fs::read_to_string(data.join("_admin.kubeconfig"))
            .unwrap()
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("token:") {
                    "    username: anonymous"
                } else {
                    l
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let out = kubectl("none.kubeconfig", &["get", "--raw", "/apis/workers"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("(Unauthorized)"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn a_restarted_hub_resumes_its_watches_instead_of_relisting(backend: Backend) {
    let store = HubStore::new(backend);
    let root = tempfile::tempdir().unwrap();
    let east = upstream(root.path(), "east", &["gpu-a", "gpu-b"]);
    let data = root.path().join("hub");
    let upstreams = upstreams_file(root.path(), &[&east]);
    let flags = [
        "--worker-conn-mode=loopback".to_owned(),
        format!("--upstreams={}", upstreams.display()),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let flags = store.args(&flags);
    let port = free_port();
    let hub = HubProcess::start(&data, port, &flags);
    hub.wait_phase("east", "Ready");
    hub.wait_mirrored("east", &["gpu-a", "gpu-b"]);
    // Progress is flushed every second; a change after the list moves it.
    add_device(&east, "gpu-c");
    hub.wait_mirrored("east", &["gpu-a", "gpu-b", "gpu-c"]);
    restart_and_resume(hub, &east, &flags);
}

/// GETs `target` over the hub's socket and parses the JSON answer.
fn get_json(hub: &HubProcess, target: &str) -> Value {
    let (code, body) = hub.request("GET", target, None);
    assert_eq!(code, 200, "{target}: {body}");
    serde_json::from_str(&body).unwrap()
}

fn an_inline_kubeconfig_subscribes_in_any_mode_survives_a_restart_and_is_never_shown(
    backend: Backend,
) {
    let store = HubStore::new(backend);
    let root = tempfile::tempdir().unwrap();
    let east = upstream(root.path(), "east", &["gpu-a"]);
    // An InstanceType with its status, as the worker's controllers would write it.
    let it = root.path().join("h100.yaml");
    std::fs::write(
        &it,
        "apiVersion: worker.gpustack.ai/v1alpha1\nkind: InstanceType\nmetadata: {name: h100}\nspec: {acceleratable: true, acceleratorGroup: nvidia-h100, os: linux, arch: amd64, unitResources: {cpu: '8', ram: 64Gi}}\n",
    )
    .unwrap();
    east.kubectl_ok(&["create", "-f", it.to_str().unwrap()]);
    east.kubectl_ok(&[
        "patch",
        "instancetypes.v1alpha1.worker.gpustack.ai",
        "h100",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Active"}}"#,
    ]);
    let kubeconfig = std::fs::read_to_string(east.kubeconfig()).unwrap();
    let token_line = kubeconfig
        .lines()
        .find(|l| l.trim_start().starts_with("token:"))
        .unwrap();
    let token = token_line
        .trim_start()
        .trim_start_matches("token:")
        .trim()
        .trim_matches(['"', '\''])
        .to_owned();
    // The default mode (gpustack-api, with no GPUStack server): the inline kubeconfig is used.
    let data = root.path().join("hub");
    let port = free_port();
    let flags = store.args(&[]);
    let hub = HubProcess::start(&data, port, &flags);
    let body = |extra: &str, doc: &str| {
        format!(
            r#"{{"clusters":["east"],"kubeconfigData":{}{extra}}}"#,
            serde_json::to_string(doc).unwrap()
        )
    };
    // Only alone: it names the server and carries the credentials.
    let (code, answer) = hub.request(
        "POST",
        "/apis/workers",
        Some(&body(r#","token":"t""#, &kubeconfig)),
    );
    assert_eq!(code, 400, "{answer}");
    assert!(answer.contains("kubeconfigData excludes token"), "{answer}");
    let (code, answer) = hub.request("POST", "/apis/workers", Some(&body("", &kubeconfig)));
    assert_eq!(code, 202, "{answer}");
    hub.wait_phase("east", "Ready");
    hub.wait_mirrored("east", &["gpu-a"]);

    // InstanceTypes are mirrored by default, status included, and served in the fleet view.
    let types = "apis/worker.gpustack.ai/v1alpha1/instancetypes";
    let own = get_json(&hub, &format!("/clusters/east/{types}"));
    assert_eq!(own["items"][0]["metadata"]["name"], "h100", "{own}");
    let fleet = get_json(&hub, &format!("/clusters/_fleet/{types}"));
    let item = &fleet["items"][0];
    assert_eq!(item["metadata"]["name"], "east.h100", "{fleet}");
    assert_eq!(item["metadata"]["labels"]["gpustack.ai/cluster"], "east");
    assert_eq!(item["status"]["phase"], "Active", "{fleet}");
    let (code, events) = hub.request(
        "GET",
        &format!("/clusters/_fleet/{types}?watch=1&timeoutSeconds=1"),
        None,
    );
    assert_eq!(code, 200, "{events}");
    assert!(
        events.contains(r#""type":"ADDED""#) && events.contains(r#""name":"east.h100""#),
        "{events}"
    );

    // The kubeconfig's credentials reach neither status, nor metrics, nor the log.
    let shown = || {
        let (_, metrics) = hub.request("GET", "/metrics", None);
        format!("{}\n{metrics}\n{}", hub.workers(), hub.log())
    };
    assert!(
        !shown().contains(&token),
        "the hub shows the kubeconfig's token"
    );

    // Stored: a restarted hub mirrors it again.
    hub.stop();
    let hub = HubProcess::start(&data, port, &flags);
    assert_eq!(hub.mirrored("east"), ["gpu-a"], "served at once");
    add_device(&east, "gpu-b");
    hub.wait_mirrored("east", &["gpu-a", "gpu-b"]);
    hub.wait_phase("east", "Ready");

    // An exec plugin is refused by rule; the answer never quotes the document.
    let marker = "inline-kubeconfig-marker-4e1f";
    let exec = kubeconfig.replace(
        token_line,
        &format!("    exec: {{apiVersion: client.authentication.k8s.io/v1, command: /bin/echo, args: [{marker}]}}"),
    );
    let west = body("", &exec).replace("\"east\"", "\"west\"");
    let (code, answer) = hub.request("POST", "/apis/workers", Some(&west));
    assert_eq!(code, 400, "{answer}");
    assert!(
        answer.contains("kubeconfigData: users[0] uses an exec credential plugin"),
        "{answer}"
    );
    assert!(
        !answer.contains(marker) && !answer.contains(&token),
        "{answer}"
    );
    assert!(hub.worker("west").is_none());
}
