//! End to end: `kubectl` against the real `worker-gateway --embedded-cluster` process, whose
//! embedded cluster calls an admission webhook (the in-test stand-in for the worker's admission
//! webhooks) and reports its denial; keeps its connections; names the real requester; and
//! evaluates its `matchConditions`.

#[path = "../../apiserver/tests/support/webhook.rs"]
mod webhook;

use gpustack_tests::embedded::GatewayProcess;
use serde_json::{Value, json};

use webhook::{DENIAL, WebhookServer, configuration};

#[test]
fn kubectl_prints_a_validating_webhook_denial() {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let server = runtime.block_on(WebhookServer::start());
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = GatewayProcess::start(&dir.path().join("data"), "demo");

    let config = configuration(
        "ValidatingWebhookConfiguration",
        "deny",
        "deny.example.com",
        json!({"url": server.url("/validate"), "caBundle": server.ca_bundle()}),
        json!({}),
    );
    let config_file = dir.path().join("webhook.json");
    std::fs::write(&config_file, config.to_string()).unwrap();
    gw.kubectl_ok(&["create", "-f", config_file.to_str().unwrap()]);

    let refused = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "refused", "namespace": "default", "labels": {"deny": "true"}},
        "data": {"k": "v"},
    });
    let refused_file = dir.path().join("refused.json");
    std::fs::write(&refused_file, refused.to_string()).unwrap();
    let stderr = gw.kubectl_err(&["create", "-f", refused_file.to_str().unwrap()]);
    assert!(
        stderr.contains(&format!(
            "admission webhook \"deny.example.com\" denied the request: {DENIAL}"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("Forbidden"), "{stderr}");

    // Allowed objects are created, with the webhook's warning printed.
    let out = gw.kubectl(&["create", "configmap", "fine", "--from-literal=k=v"]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(webhook::WARNING), "{stderr}");
    assert_eq!(server.requests("/validate").len(), 2);
    gw.stop();
}

/// `kubectl create -f` of `v` (written to `dir/name.json`) with `extra` flags.
fn create(
    gw: &GatewayProcess,
    dir: &std::path::Path,
    v: &Value,
    extra: &[&str],
) -> std::process::Output {
    let name = v["metadata"]["name"].as_str().unwrap();
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, v.to_string()).unwrap();
    let mut args = vec!["create", "-f", file.to_str().unwrap()];
    args.extend(extra);
    gw.kubectl(&args)
}

fn config_map(name: &str, deny: bool) -> Value {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": {}}, "data": {"k": "v"}});
    if deny {
        cm["metadata"]["labels"]["deny"] = json!("true");
    }
    cm
}

#[test]
fn connections_are_kept_requesters_named_and_match_conditions_decide() {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let server = runtime.block_on(WebhookServer::start());
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = GatewayProcess::start(&dir.path().join("data"), "demo");
    let client_config = json!({"url": server.url("/validate"), "caBundle": server.ca_bundle()});
    let hooked = configuration(
        "ValidatingWebhookConfiguration",
        "checked",
        "checked.example.com",
        client_config.clone(),
        json!({"matchConditions": [
            {"name": "named", "expression": "object.metadata.name.startsWith('checked-')"},
            {"name": "not-a-dry-run", "expression": "request.dryRun == false"},
        ]}),
    );
    assert!(create(&gw, dir.path(), &hooked, &[]).status.success());

    // Every call on one kept-alive connection.
    for i in 0..5 {
        let out = create(
            &gw,
            dir.path(),
            &config_map(&format!("checked-{i}"), false),
            &[],
        );
        assert!(out.status.success(), "{out:?}");
    }
    assert_eq!(server.requests("/validate").len(), 5);
    assert_eq!(server.connections(), 1, "one connection for five calls");

    // A false condition: the webhook is not called, so its refusal does not happen.
    let out = create(&gw, dir.path(), &config_map("other", true), &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(server.requests("/validate").len(), 5);
    let err = create(&gw, dir.path(), &config_map("checked-deny", true), &[]);
    assert!(!err.status.success());
    assert!(
        String::from_utf8_lossy(&err.stderr).contains(DENIAL),
        "{err:?}"
    );

    // The configuration changes: its webhook is called on a new connection.
    gw.kubectl_ok(&[
        "patch",
        "validatingwebhookconfiguration",
        "checked",
        "--type=json",
        "-p",
        r#"[{"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": 7}]"#,
    ]);
    let out = create(&gw, dir.path(), &config_map("checked-after", false), &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(server.connections(), 2);

    // The review names who asked: a ServiceAccount's token, with its groups and uid.
    gw.kubectl_ok(&["create", "serviceaccount", "bot"]);
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "bot-edit", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "default"}]});
    assert!(create(&gw, dir.path(), &binding, &[]).status.success());
    let token = gw.kubectl_ok(&["create", "token", "bot"]);
    let uid = gw.kubectl_ok(&[
        "get",
        "serviceaccount",
        "bot",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let token_flag = format!("--token={}", token.trim());
    let out = create(
        &gw,
        dir.path(),
        &config_map("checked-by-bot", false),
        &[&token_flag],
    );
    assert!(out.status.success(), "{out:?}");
    let review = server.requests("/validate").pop().unwrap();
    assert_eq!(
        review["userInfo"],
        json!({"username": "system:serviceaccount:default:bot", "uid": uid,
               "groups": ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]}),
    );
    assert_eq!(review["name"], "checked-by-bot");

    // A condition that cannot be evaluated: Ignore skips the webhook, Fail refuses.
    let broken = |name: &str, policy: &str, expression: &str| {
        configuration(
            "ValidatingWebhookConfiguration",
            name,
            &format!("{name}.example.com"),
            client_config.clone(),
            json!({"failurePolicy": policy, "matchConditions": [{"name": "broken", "expression": expression}]}),
        )
    };
    let missing = "object.data.missing == 'x'";
    assert!(
        create(&gw, dir.path(), &broken("lenient", "Ignore", missing), &[])
            .status
            .success()
    );
    let before = server.requests("/validate").len();
    let out = create(&gw, dir.path(), &config_map("lenient-1", true), &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(server.requests("/validate").len(), before, "skipped");
    // A condition that can never run is refused when written (422); one that fails on an
    // object refuses that object under Fail.
    let authorizer = "authorizer.group('').resource('pods').check('get').allowed()";
    let out = create(&gw, dir.path(), &broken("never", "Fail", authorizer), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "webhooks[0].matchConditions[0].expression: Invalid value: \"authorizer.group('').resource('pods').check('get').allowed()\": the authorizer variable is not supported by the embedded cluster"
        ),
        "{stderr}"
    );
    assert!(
        create(&gw, dir.path(), &broken("strict", "Fail", missing), &[])
            .status
            .success()
    );
    let err = create(&gw, dir.path(), &config_map("strict-1", false), &[]);
    let stderr = String::from_utf8_lossy(&err.stderr);
    assert!(!err.status.success());
    assert!(
        stderr.contains(
            "configmaps \"strict-1\" is forbidden: matchCondition \"broken\": evaluation failed: "
        ),
        "{stderr}"
    );
    gw.stop();
}
