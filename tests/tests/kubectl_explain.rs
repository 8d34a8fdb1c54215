//! End to end: built-in kinds' OpenAPI schemas through the real `kubectl`. `kubectl explain`
//! walks `/openapi/v3` (the index, then the group-version document, following `$ref`s); and
//! unknown fields in built-in objects are refused (`--validate=strict`, kubectl's default),
//! warned about and dropped (`--validate=warn`) or dropped (`--validate=false`) by the server,
//! as kube-apiserver does.

use gpustack_tests::embedded::{GatewayProcess, write_file};
use serde_json::{Value, json};

fn start() -> (tempfile::TempDir, GatewayProcess) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = GatewayProcess::start(&dir.path().join("gw"), "explain");
    (dir, gw)
}

#[test]
fn explain_prints_built_in_fields_with_type_and_description() {
    let (_dir, gw) = start();

    let out = gw.kubectl_ok(&["explain", "deployment.spec.replicas"]);
    assert!(out.contains("GROUP:      apps"), "{out}");
    assert!(out.contains("KIND:       Deployment"), "{out}");
    assert!(out.contains("FIELD: replicas <integer>"), "{out}");
    assert!(out.contains("Number of desired pods"), "{out}");

    let out = gw.kubectl_ok(&["explain", "pods.spec.containers.image"]);
    assert!(out.contains("KIND:       Pod"), "{out}");
    assert!(out.contains("FIELD: image <string>"), "{out}");
    assert!(out.contains("Container image name"), "{out}");

    let out = gw.kubectl_ok(&["explain", "configmap"]);
    assert!(out.contains("KIND:       ConfigMap"), "{out}");
    assert!(out.contains("VERSION:    v1"), "{out}");
    assert!(
        out.contains("ConfigMap holds configuration data for pods to consume"),
        "{out}"
    );
    // Its fields, each with its type: a map, and metadata by its definition's name.
    assert!(out.contains("FIELDS:"), "{out}");
    let line = |field: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(&format!("{field}\t")))
            .unwrap_or_else(|| panic!("no {field} field in {out}"))
            .to_owned()
    };
    assert!(line("data").contains("<map[string]string>"), "{out}");
    assert!(line("metadata").contains("<ObjectMeta>"), "{out}");
    assert!(line("immutable").contains("<boolean>"), "{out}");

    // A field that does not exist is named.
    let err = gw.kubectl_err(&["explain", "deployment.spec.replicaz"]);
    assert!(err.contains(r#"field "replicaz" does not exist"#), "{err}");
}

#[test]
fn unknown_top_level_field_of_a_configmap_is_refused_warned_or_dropped() {
    let (dir, gw) = start();
    let dir = dir.path();
    let manifest = |name: &str| {
        write_file(
            dir,
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\n\
                 data: {{x: \"1\"}}\ndataz: {{y: \"2\"}}\n"
            ),
        )
    };

    // Strict (kubectl's default): refused, the field named, nothing created.
    let err = gw.kubectl_err(&["create", "-f", &manifest("strict")]);
    assert!(
        err.contains(r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "dataz""#),
        "{err}"
    );
    let none = gw.kubectl_err(&["get", "configmap", "strict"]);
    assert!(none.contains(r#"configmaps "strict" not found"#), "{none}");

    // Warn: created without the field, the warning printed.
    let out = gw.kubectl(&["create", "--validate=warn", "-f", &manifest("warned")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(r#"Warning: unknown field "dataz""#),
        "{stderr}"
    );
    let cm = gw.get_json(&["configmap", "warned"]);
    assert!(cm.get("dataz").is_none(), "{cm}");
    assert_eq!(cm["data"], json!({"x": "1"}));

    // Ignore: created without the field, silently.
    let out = gw.kubectl(&["create", "--validate=false", "-f", &manifest("ignored")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("dataz"), "{stderr}");
    let cm = gw.get_json(&["configmap", "ignored"]);
    assert!(cm.get("dataz").is_none(), "{cm}");
    assert_eq!(cm["data"], json!({"x": "1"}));
}

fn deployment(name: &str, container: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container]}
            }
        }
    })
}

#[test]
fn nested_unknown_field_of_a_deployment_applied_as_json_is_refused_warned_or_dropped() {
    let (dir, gw) = start();
    let dir = dir.path();
    let manifest = |name: &str| {
        let d = deployment(
            name,
            json!({"name": "app", "image": "nginx:1.27", "imagez": "typo"}),
        );
        write_file(dir, &format!("{name}.json"), &d.to_string())
    };
    let containers = |name: &str| {
        gw.get_json(&["deployment", name])["spec"]["template"]["spec"]["containers"].clone()
    };

    let err = gw.kubectl_err(&["apply", "-f", &manifest("strict")]);
    assert!(
        err.contains(
            r#"strict decoding error: unknown field "spec.template.spec.containers[0].imagez""#
        ),
        "{err}"
    );
    let none = gw.kubectl_err(&["get", "deployment", "strict"]);
    assert!(
        none.contains(r#"deployments.apps "strict" not found"#),
        "{none}"
    );

    let out = gw.kubectl(&["apply", "--validate=warn", "-f", &manifest("warned")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(r#"Warning: unknown field "spec.template.spec.containers[0].imagez""#),
        "{stderr}"
    );
    assert_eq!(
        containers("warned"),
        json!([{"name": "app", "image": "nginx:1.27"}])
    );

    let out = gw.kubectl(&["apply", "--validate=false", "-f", &manifest("ignored")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        containers("ignored"),
        json!([{"name": "app", "image": "nginx:1.27"}])
    );

    // Applied again with a misspelled field, the object exists: kubectl patches it, and the
    // patched object is refused the same way.
    let mut d = deployment("warned", json!({"name": "app", "image": "nginx:1.28"}));
    d["spec"]["replicaz"] = json!(3);
    let again = write_file(dir, "again.json", &d.to_string());
    let err = gw.kubectl_err(&["apply", "-f", &again]);
    assert!(err.contains(r#"unknown field "spec.replicaz""#), "{err}");
    assert_eq!(
        containers("warned")[0]["image"],
        "nginx:1.27",
        "nothing changed"
    );

    // A valid change applies: kubectl works its patch out with these schemas.
    let d = deployment("warned", json!({"name": "app", "image": "nginx:1.28"}));
    let fixed = write_file(dir, "fixed.json", &d.to_string());
    gw.kubectl_ok(&["apply", "-f", &fixed]);
    assert_eq!(
        containers("warned"),
        json!([{"name": "app", "image": "nginx:1.28"}])
    );
}
