//! Helm's own engine (PyPI's `helm-sdkpy`, Helm's Go code) through a release's whole life
//! against an embedded cluster served by the real `worker-gateway`: lint, install of a chart
//! with a CRD in `crds/` and a `pre-install` hook deleted once it succeeded, an upgrade with
//! client-side apply and one with server-side apply (`--server-side`), history, and uninstall
//! with purge, after which nothing of the release is left but the CRD (Helm never deletes
//! what `crds/` installed).

use std::path::{Path, PathBuf};

use gpustack_tests::{embedded::GatewayProcess, helm::Helm, python_grpc::checkout};
use serde_json::{Value, json};

const NS: &str = "helm-life";
const RELEASE: &str = "life";

fn chart() -> PathBuf {
    checkout().join("tests/fixtures/helm/lifecycle")
}

/// The chart copied under `dir` with one template broken (an unclosed action).
fn broken_chart(dir: &Path) -> PathBuf {
    let copy = dir.join("broken");
    for sub in ["", "crds", "templates"] {
        std::fs::create_dir_all(copy.join(sub)).unwrap();
        for entry in std::fs::read_dir(chart().join(sub)).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), copy.join(sub).join(entry.file_name())).unwrap();
            }
        }
    }
    std::fs::write(
        copy.join("templates/configmap.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name\n",
    )
    .unwrap();
    copy
}

/// `kubectl get` of the chart's objects (by the release's instance label) in the release
/// namespace, as `kind/name` lines.
fn release_objects(gw: &GatewayProcess) -> Vec<String> {
    let kinds = "configmaps,secrets,serviceaccounts,services,deployments,roles,rolebindings,gadgets.example.com";
    let out = gw.kubectl_ok(&[
        "get",
        kinds,
        "-n",
        NS,
        "-l",
        &format!("app.kubernetes.io/instance={RELEASE}"),
        "-o",
        "name",
    ]);
    let mut names: Vec<String> = out.lines().map(str::to_owned).collect();
    names.sort();
    names
}

/// Helm's release records: Secrets labelled `owner=helm` with the release's name.
fn release_secrets(gw: &GatewayProcess) -> Vec<String> {
    let out = gw.kubectl_ok(&[
        "get",
        "secrets",
        "-n",
        NS,
        "-l",
        &format!("owner=helm,name={RELEASE}"),
        "-o",
        "name",
    ]);
    out.lines().map(str::to_owned).collect()
}

fn greeting(gw: &GatewayProcess) -> Value {
    gw.get_json(&["configmap", &format!("{RELEASE}-settings"), "-n", NS])["data"]["greeting"]
        .clone()
}

/// The managers (and their operations) that own fields of the release's ConfigMap.
fn managers(gw: &GatewayProcess) -> Vec<(String, String)> {
    let cm = gw.get_json(&[
        "configmap",
        &format!("{RELEASE}-settings"),
        "-n",
        NS,
        "--show-managed-fields",
    ]);
    cm["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            (
                m["manager"].as_str().unwrap_or_default().to_owned(),
                m["operation"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_release_lives_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("gw"), "helm");
    let helm = Helm::new(&gw.kubeconfig(), NS);

    // Lint: the fixture is clean, and lint does read it (a broken copy fails).
    let errors = |messages: Vec<Value>| -> Vec<Value> {
        messages
            .into_iter()
            .filter(|m| m["severity"] == "ERROR")
            .collect()
    };
    assert_eq!(errors(helm.lint(&chart())), Vec::<Value>::new());
    let broken = errors(helm.lint(&broken_chart(dir.path())));
    assert!(!broken.is_empty(), "a broken template is an error");

    // Install: the CRD first, then the hook (deleted once it succeeded), then the objects.
    // One action of the release with `values` and the SDK's `options`, which must leave
    // revision `version` deployed.
    let act = |action: &str, values: Value, options: Value, version: i64| {
        let done = helm
            .chart_action(action, RELEASE, &chart(), &values, &options)
            .unwrap_or_else(|e| panic!("{action} {options}: {e:?}"));
        assert_eq!(
            (&done["status"], &done["version"]),
            (&json!("deployed"), &json!(version)),
            "{done}"
        );
        done
    };
    let installed = act("install", json!({"greeting": "hello"}), json!({}), 1);
    let hooks = installed["hooks"].as_array().expect("the release's hooks");
    assert_eq!(hooks.len(), 1, "{installed}");
    assert_eq!(hooks[0]["kind"], "ConfigMap");
    assert_eq!(hooks[0]["phase"], "Succeeded", "{installed}");
    let hook = gw.kubectl(&["get", "configmap", "life-pre-install", "-n", NS]);
    assert!(
        !hook.status.success(),
        "the hook's ConfigMap is deleted once it succeeded"
    );
    gw.kubectl_ok(&["get", "crd", "gadgets.example.com"]);
    assert_eq!(
        release_objects(&gw),
        [
            "configmap/life-settings",
            "deployment.apps/life",
            "gadget.example.com/life",
            "role.rbac.authorization.k8s.io/life",
            "rolebinding.rbac.authorization.k8s.io/life",
            "secret/life-credentials",
            "service/life",
            "serviceaccount/life",
        ]
    );
    assert_eq!(greeting(&gw), "hello");

    // Upgrade with client-side apply (Helm's three-way merge patches).
    act(
        "upgrade",
        json!({"greeting": "hi"}),
        json!({"server_side_apply": false}),
        2,
    );
    assert_eq!(greeting(&gw), "hi");
    let gadget = gw.get_json(&["gadget", RELEASE, "-n", NS]);
    assert_eq!(gadget["spec"]["greeting"], "hi");

    // Upgrade with server-side apply: Helm now owns the fields as an applier.
    act(
        "upgrade",
        json!({"greeting": "hey", "replicas": 2}),
        json!({"server_side_apply": true, "force_conflicts": true}),
        3,
    );
    assert_eq!(greeting(&gw), "hey");
    let deployment = gw.get_json(&["deployment", RELEASE, "-n", NS]);
    assert_eq!(deployment["spec"]["replicas"], 2);
    let owners = managers(&gw);
    assert!(
        owners.iter().any(|(_, op)| op == "Apply"),
        "server-side apply records an Apply manager: {owners:?}"
    );

    // History: every revision, the last one deployed.
    let history = helm.history(RELEASE).expect("history");
    let revisions: Vec<(i64, String)> = history
        .iter()
        .map(|r| {
            (
                r["version"].as_i64().unwrap_or_default(),
                r["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        revisions,
        [
            (1, "superseded".to_owned()),
            (2, "superseded".to_owned()),
            (3, "deployed".to_owned()),
        ]
    );
    assert_eq!(release_secrets(&gw).len(), 3);

    // Uninstall (purge): no record, no object; the CRD stays, as Helm leaves CRDs.
    helm.uninstall(RELEASE).expect("uninstall");
    assert_eq!(release_secrets(&gw), Vec::<String>::new());
    assert_eq!(release_objects(&gw), Vec::<String>::new());
    assert!(helm.releases().is_empty());
    gw.kubectl_ok(&["get", "crd", "gadgets.example.com"]);
    let refused = helm.history(RELEASE);
    assert!(refused.is_err(), "no history is kept after a purge");
}
