//! `gpustack-operator worker` with no cluster at hand: the one-machine control plane, on the
//! seed's RX 7800 XT machine (a host tree read through `GPUSTACK_SYSTEM_ROOT`). The embedded
//! cluster comes up in-process, the machine appears as a Node with its Devices, and a restart
//! finds everything as it was.

use std::{
    path::Path,
    process::{Child, Stdio},
    time::Instant,
};

use gpustack_tests::{
    embedded::{DEADLINE, free_port, kubectl_with},
    machines::amd,
    operator,
    sysfs::HostTree,
    wait::wait_until,
};
use serde_json::Value;

const HOST: &str = "rx-node";

fn machine(dir: &Path) -> HostTree {
    let tree = HostTree::new(dir);
    amd::seed_node(&tree);
    let cpuinfo: String = (0..14)
        .map(|i| format!("processor\t: {i}\nvendor_id\t: AuthenticAMD\n\n"))
        .collect();
    tree.file("/proc/cpuinfo", &cpuinfo)
        .file(
            "/proc/meminfo",
            "MemTotal:       65536000 kB\nMemFree:        1000 kB\n",
        )
        .file("/proc/sys/kernel/hostname", "RX-Node\n")
        .file("/proc/sys/kernel/osrelease", "6.1.0-13-amd64\n")
        .file(
            "/etc/os-release",
            "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
        );
    tree
}

struct OneMachine {
    child: Child,
    log: std::path::PathBuf,
}

impl OneMachine {
    fn start(root: &Path, data: &Path, api_port: u16, port: u16) -> OneMachine {
        let log = data.with_extension("log");
        let child = operator()
            .args([
                "worker",
                &format!("--embedded-api-port={api_port}"),
                &format!("--secure-port={port}"),
            ])
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("GPUSTACK_DATA_DIR", data)
            .env("GPUSTACK_SYSTEM_ROOT", root)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        OneMachine { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn stop(mut self) -> std::process::ExitStatus {
        let _ = std::process::Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        wait_until("the worker to exit", DEADLINE, || {
            self.child.try_wait().unwrap()
        })
    }
}

impl Drop for OneMachine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> Option<String> {
    let flags = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--cache-dir={}", cache.display()),
    ];
    let out = kubectl_with(&flags, args).output().unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn one_machine_registers_this_machine_and_keeps_it_across_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = machine(&tmp.path().join("root"));
    let data = tmp.path().join("data");
    let cache = tmp.path().join("kube-cache");
    let (api_port, port) = (free_port(), free_port());
    let started = Instant::now();
    let w = OneMachine::start(tree.root(), &data, api_port, port);
    let kubeconfig = data.join("local.kubeconfig");
    let devices = wait_until("this machine's Devices", DEADLINE, || {
        kubectl(
            &kubeconfig,
            &cache,
            &[
                "get",
                "devices.v1alpha1.worker.gpustack.ai",
                HOST,
                "-o",
                "json",
            ],
        )
    });
    eprintln!(
        "one-machine start to Devices readable: {:?}",
        started.elapsed()
    );
    assert!(
        w.log()
            .contains(&format!("kubectl --kubeconfig {}", kubeconfig.display())),
        "it says where the kubeconfig is:\n{}",
        w.log()
    );
    let devices: Value = serde_json::from_str(&devices).unwrap();
    let group = &devices["spec"]["groups"][0];
    assert_eq!(group["name"], "AMD Radeon RX 7800 XT");
    assert_eq!(group["accelerators"].as_array().unwrap().len(), 2);
    assert_eq!(devices["metadata"]["ownerReferences"][0]["kind"], "Node");
    let node: Value = serde_json::from_str(
        &kubectl(&kubeconfig, &cache, &["get", "node", HOST, "-o", "json"]).unwrap(),
    )
    .unwrap();
    assert_eq!(node["status"]["capacity"]["cpu"], "14");
    assert_eq!(node["status"]["capacity"]["memory"], "65536000Ki");
    assert_eq!(node["metadata"]["labels"]["kubernetes.io/os"], "linux");
    // What the kubelet would say of the host, from the host tree.
    let info = &node["status"]["nodeInfo"];
    assert_eq!(info["osImage"], "Debian GNU/Linux 12 (bookworm)");
    assert_eq!(info["kernelVersion"], "6.1.0-13-amd64");
    assert_eq!(info["architecture"], "amd64");
    let addresses = node["status"]["addresses"].as_array().unwrap();
    assert!(
        addresses.contains(&serde_json::json!({"type": "Hostname", "address": HOST})),
        "{addresses:?}"
    );
    // This machine's own interface address, where it has one besides loopback.
    for a in addresses.iter().filter(|a| a["type"] == "InternalIP") {
        let ip: std::net::IpAddr = a["address"].as_str().unwrap().parse().unwrap();
        assert!(!ip.is_loopback(), "{ip}");
    }
    let uid = node["metadata"]["uid"].clone();
    // The worker's API, through the cluster's aggregation, as the README says to try.
    let listed = wait_until("devices through the aggregated API", DEADLINE, || {
        kubectl(
            &kubeconfig,
            &cache,
            &["get", "devices.v1.worker.gpustack.ai"],
        )
        .filter(|out| out.contains(HOST))
    });
    eprintln!(
        "one-machine start to `kubectl get devices` answering: {:?}",
        started.elapsed()
    );
    let header: Vec<&str> = listed.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "MANUFACTURER", "PRODUCT", "AGE"],
        "{listed}"
    );
    assert!(listed.contains("AMD Radeon RX 7800 XT"), "{listed}");
    // explain (the worker's OpenAPI, through the cluster) and describe.
    let explain = ["explain", "devices", "--api-version=worker.gpustack.ai/v1"];
    let explained = kubectl(&kubeconfig, &cache, &explain).unwrap();
    assert!(
        explained.contains("KIND:       Devices") && explained.contains("spec\t<Object>"),
        "{explained}"
    );
    let explained = kubectl(&kubeconfig, &cache, &["explain", "settings.spec.value"]).unwrap();
    assert!(explained.contains("write-only"), "{explained}");
    let described = kubectl(&kubeconfig, &cache, &["describe", "devs", HOST]).unwrap();
    assert!(
        described.contains("API Version:  worker.gpustack.ai/v1")
            && described.contains("Kind:         Devices"),
        "{described}"
    );
    let set = ["get", "set", "-n", "gpustack-system", "image-pull-policy"];
    let set = kubectl(&kubeconfig, &cache, &set).unwrap();
    assert!(set.contains("IfNotPresent"), "{set}");

    // The controllers build the Kueue chain from this machine: a pool for its cards and one
    // for its CPUs, each with its queue and a LocalQueue in `default`.
    let chain = [
        "get",
        "resourceflavors,clusterqueues,localqueues,instancetypes",
    ];
    let listed = wait_until("the Kueue chain of this machine", DEADLINE, || {
        kubectl(&kubeconfig, &cache, &chain).filter(|out| {
            out.contains(
                "instancetype.worker.gpustack.ai/gpustack--amd-radeon-rx-7800-xt-linux-amd64",
            ) && out.contains("localqueue.kueue.x-k8s.io/gpustack-fnv64-")
                && out.contains("clusterqueue.kueue.x-k8s.io/gpustack--generic-linux-amd64")
        })
    });
    eprintln!("{listed}");
    let queue = [
        "get",
        "clusterqueue",
        "gpustack--amd-radeon-rx-7800-xt-linux-amd64",
        "-o",
        "json",
    ];
    let queue: Value =
        serde_json::from_str(&kubectl(&kubeconfig, &cache, &queue).unwrap()).unwrap();
    let quota = &queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0];
    assert_eq!(quota["name"], "credits.gpustack.ai/amd");
    assert_eq!(
        quota["nominalQuota"], "3200000",
        "two cards of 1,600,000 credits"
    );
    let it = [
        "get",
        "instancetype",
        "gpustack--amd-radeon-rx-7800-xt-linux-amd64",
        "-o",
        "jsonpath={.status.accelerator}",
    ];
    let whole = wait_until("the pool's status", DEADLINE, || {
        kubectl(&kubeconfig, &cache, &it).filter(|s| !s.is_empty())
    });
    eprintln!("{whole}");
    let whole: Value = serde_json::from_str(&whole).unwrap();
    assert_eq!(
        whole,
        serde_json::json!({"capacity": 2, "onceMaxRequest": 2, "remaining": 2})
    );

    assert!(w.stop().success(), "Ctrl-C stops it cleanly");
    let w = OneMachine::start(tree.root(), &data, api_port, port);
    let again = wait_until("the Node after a restart", DEADLINE, || {
        kubectl(
            &kubeconfig,
            &cache,
            &["get", "node", HOST, "-o", "jsonpath={.metadata.uid}"],
        )
    });
    assert_eq!(
        Value::String(again),
        uid,
        "the next start finds the same Node"
    );
    assert!(w.stop().success());
}

/// `GPUSTACK_DATA_DIR` moves the gateway's default socket for both ends: a `worker-gateway`
/// and a one-machine `worker` started with the same data directory and no socket flags meet
/// there, and the worker serves the fleet.
#[test]
fn the_gateway_socket_follows_the_data_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = machine(&tmp.path().join("root"));
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let hub_log = tmp.path().join("hub.log");
    /// Killed when the test ends, passed or not.
    struct Hub(Child);
    impl Drop for Hub {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _hub = Hub(operator()
        .args([
            "worker-gateway",
            &format!("--data-dir={}", tmp.path().join("hub").display()),
            "--bind-address=127.0.0.1",
            &format!("--secure-port={}", free_port()),
        ])
        .env("GPUSTACK_DATA_DIR", &data)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&hub_log).unwrap())
        .spawn()
        .unwrap());
    let socket = data.join("gpustack-operator-worker-gateway.sock");
    wait_until("the hub's socket in the data directory", DEADLINE, || {
        socket.exists().then_some(())
    });
    let (api_port, port) = (free_port(), free_port());
    let w = OneMachine::start(tree.root(), &data, api_port, port);
    let kubeconfig = data.join("local.kubeconfig");
    let cache = tmp.path().join("kube-cache");
    wait_until("the fleet's clusters through the worker", DEADLINE, || {
        kubectl(&kubeconfig, &cache, &["get", "clusters.fleet.gpustack.ai"])
    });
    assert!(w.stop().success());
}
