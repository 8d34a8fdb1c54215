//! Every kind the worker serves, through the embedded cluster's aggregation as a user meets it:
//! `kubectl get` (its columns), `describe`, `-o yaml` and `get -w` for `devices`,
//! `instancetypes`, `instancetypeflavors`, `nodemodelstores`, `modelartifacts` and `settings`.

use std::{
    io::{BufRead, BufReader},
    process::Stdio,
    sync::mpsc,
    time::Duration,
};

use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess},
    inventory::{H100, Machine, RX7800XT},
    wait::wait_until,
    worker::WorkerProcess,
};

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// Writes a machine's Node (with its status) and Devices as the kubelet and device manager would.
fn put(gw: &GatewayProcess, dir: &std::path::Path, m: &Machine) {
    let node = write(dir, &format!("{}-node.json", m.name), &m.node().to_string());
    gw.kubectl_ok(&[
        "apply",
        "--server-side",
        "--field-manager=kubelet-stand-in",
        "-f",
        &node,
    ]);
    let mut status = m.node_status();
    status["apiVersion"] = "v1".into();
    status["kind"] = "Node".into();
    status["metadata"] = serde_json::json!({"name": m.name});
    let status = write(dir, &format!("{}-status.json", m.name), &status.to_string());
    gw.kubectl_ok(&[
        "apply",
        "--server-side",
        "--field-manager=kubelet-stand-in",
        "--subresource=status",
        "-f",
        &status,
    ]);
    let devices = write(
        dir,
        &format!("{}-devices.json", m.name),
        &m.devices().to_string(),
    );
    gw.kubectl_ok(&[
        "apply",
        "--server-side",
        "--field-manager=device-manager-stand-in",
        "-f",
        &devices,
    ]);
}

/// `kubectl get -w --output-watch-events` through the cluster; lines as they come.
fn watch(gw: &GatewayProcess, args: &[&str]) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--watch-only", "--output-watch-events"]);
    let mut child = gw
        .kubectl_command(&all)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// Makes `change(attempt)` until the watch shows an event line naming `name` (a watch may start
/// after a change; one more change per attempt keeps this free of fixed sleeps).
fn seen_on_watch(rx: &mpsc::Receiver<String>, name: &str, mut change: impl FnMut(usize)) -> String {
    let mut attempt = 0;
    wait_until(&format!("a watch event for {name}"), DEADLINE, || {
        attempt += 1;
        change(attempt);
        rx.recv_timeout(Duration::from_secs(2))
            .ok()
            .filter(|l| l.split_whitespace().nth(1) == Some(name))
    })
}

fn header(table: &str) -> Vec<String> {
    // Column titles may hold one space ("DISPLAY NAME"); they are separated by two or more.
    table
        .lines()
        .next()
        .unwrap_or_default()
        .split("  ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn each_kind_through_the_aggregation_get_describe_yaml_and_watch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let gw = GatewayProcess::start_with(
        &dir.join("gw"),
        "one",
        gpustack_tests::embedded::free_port(),
        &["--embedded-cluster=one", "--apiservice-check-interval=1s"],
    );
    let _worker = WorkerProcess::start(&gw, &dir.join("worker"), &[], &[]);
    wait_until(
        "the worker's kinds through the aggregation",
        DEADLINE,
        || {
            let out = gw.kubectl(&["get", "instancetypeflavors.v1.worker.gpustack.ai"]);
            out.status.success().then_some(())
        },
    );
    put(&gw, dir, &Machine::gpu("gpu-a", H100, 8));
    let artifact = write(
        dir,
        "artifact.yaml",
        "apiVersion: worker.gpustack.ai/v1\nkind: ModelArtifact\nmetadata: {name: qwen, namespace: default}\nspec:\n  source:\n    huggingFace: {repository: Qwen/Qwen3-0.6B, revision: main}\n",
    );
    gw.kubectl_ok(&["create", "-f", &artifact]);
    let store = write(
        dir,
        "store.yaml",
        "apiVersion: worker.gpustack.ai/v1\nkind: NodeModelStore\nmetadata: {name: gpu-a}\nspec: {}\n",
    );
    gw.kubectl_ok(&["create", "-f", &store]);

    let it = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64";
    let kinds: [(&str, &str, &str, &[&str]); 6] = [
        (
            "devices.v1.worker.gpustack.ai",
            "gpu-a",
            "",
            &["NAME", "MANUFACTURER", "PRODUCT", "AGE"],
        ),
        (
            "instancetypes.v1.worker.gpustack.ai",
            it,
            "",
            &[
                "NAME",
                "DISPLAY NAME",
                "ACCELERATOR GROUP",
                "OS",
                "ARCH",
                "PHASE",
                "AGE",
            ],
        ),
        (
            "instancetypeflavors.v1.worker.gpustack.ai",
            "gpustack--nvidia-h100-80gb-hbm3",
            "",
            &[
                "NAME",
                "ACCELERATOR GROUP",
                "PRODUCT",
                "MEMORY",
                "CAPACITY",
                "AGE",
            ],
        ),
        (
            "nodemodelstores.v1.worker.gpustack.ai",
            "gpu-a",
            "",
            &["NAME", "READY", "USED", "AGE"],
        ),
        (
            "modelartifacts.v1.worker.gpustack.ai",
            "qwen",
            "default",
            &["NAME", "REVISION", "SIZE", "RESOLVED", "AGE"],
        ),
        (
            "settings.v1.gpustack.ai",
            "image-pull-policy",
            "gpustack-system",
            &["NAME", "VALUE", "EDITABLE", "AGE"],
        ),
    ];
    for (resource, name, ns, columns) in kinds {
        let scoped = |args: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            if !ns.is_empty() {
                v.push(format!("--namespace={ns}"));
            }
            v
        };
        let run = |args: &[&str]| {
            let args = scoped(args);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            gw.kubectl_ok(&args)
        };
        let table = wait_until(&format!("{resource} listing {name}"), DEADLINE, || {
            let args = scoped(&["get", resource]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = gw.kubectl(&args);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            (out.status.success() && text.lines().any(|l| l.starts_with(name))).then_some(text)
        });
        assert_eq!(header(&table), columns, "{resource}:\n{table}");
        let yaml = run(&["get", resource, name, "-o", "yaml"]);
        let group = resource.split_once(".v1.").unwrap().1;
        assert!(
            yaml.contains(&format!("apiVersion: {group}/v1")),
            "{resource}:\n{yaml}"
        );
        let described = run(&["describe", resource, name]);
        assert!(
            described.contains(&format!("API Version:  {group}/v1")) && described.contains(name),
            "{resource}:\n{described}"
        );
    }

    // Watches through the aggregation, one per kind, each seeing a change made its own way.
    let (mut w1, rx) = watch(&gw, &["devices.v1.worker.gpustack.ai"]);
    seen_on_watch(&rx, "gpu-a", |i| {
        gw.kubectl_ok(&[
            "label",
            "--overwrite",
            "devices.v1alpha1.worker.gpustack.ai",
            "gpu-a",
            &format!("tick={i}"),
        ]);
    });
    let _ = w1.kill();
    let (mut w2, rx) = watch(&gw, &["instancetypes.v1.worker.gpustack.ai"]);
    seen_on_watch(&rx, it, |i| {
        gw.kubectl_ok(&[
            "label",
            "--overwrite",
            "instancetypes.v1alpha1.worker.gpustack.ai",
            it,
            &format!("tick={i}"),
        ]);
    });
    let _ = w2.kill();
    let (mut w3, rx) = watch(&gw, &["instancetypeflavors.v1.worker.gpustack.ai"]);
    seen_on_watch(&rx, "gpustack--amd-radeon-rx-7800-xt", |i| {
        if i == 1 {
            put(&gw, dir, &Machine::gpu("amd-a", RX7800XT, 2));
        }
    });
    let _ = w3.kill();
    let (mut w4, rx) = watch(
        &gw,
        &["modelartifacts.v1.worker.gpustack.ai", "-n", "default"],
    );
    seen_on_watch(&rx, "qwen", |i| {
        gw.kubectl_ok(&[
            "label",
            "--overwrite",
            "-n",
            "default",
            "modelartifacts.v1alpha1.worker.gpustack.ai",
            "qwen",
            &format!("tick={i}"),
        ]);
    });
    let _ = w4.kill();
    let (mut w5, rx) = watch(&gw, &["nodemodelstores.v1.worker.gpustack.ai"]);
    seen_on_watch(&rx, "gpu-a", |i| {
        gw.kubectl_ok(&[
            "label",
            "--overwrite",
            "nodemodelstores.v1alpha1.worker.gpustack.ai",
            "gpu-a",
            &format!("tick={i}"),
        ]);
    });
    let _ = w5.kill();
    let (mut w6, rx) = watch(&gw, &["settings.v1.gpustack.ai", "-n", "gpustack-system"]);
    let line = seen_on_watch(&rx, "image-pull-policy", |i| {
        let value = if i % 2 == 1 { "Always" } else { "IfNotPresent" };
        gw.kubectl_ok(&[
            "patch",
            "settings.v1.gpustack.ai",
            "image-pull-policy",
            "-n",
            "gpustack-system",
            "--type=merge",
            "-p",
            &format!("{{\"spec\":{{\"value\":\"{value}\"}}}}"),
        ]);
    });
    assert!(
        line.starts_with("MODIFIED") || line.starts_with("ADDED"),
        "{line}"
    );
    let _ = w6.kill();
}
