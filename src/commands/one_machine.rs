//! `worker` with no cluster at hand: the one-machine control plane. An embedded cluster runs
//! in-process (its data under `GPUSTACK_DATA_DIR`), this machine is registered as its Node with
//! its detected accelerators as the Node's `Devices`, and the worker serves its API through the
//! cluster's aggregation, exactly as on a real cluster.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::{Path, PathBuf},
};

use gpustack_api::Manufacturer;
use gpustack_device_manager::{detect, serve::objects, system_root::SystemRoot};
use gpustack_gateway::server::{Gateway, GatewayOptions};
use gpustack_worker::local_node::{self, Machine, MachineInfo};

/// The embedded cluster's name (its kubeconfig is `<data dir>/local.kubeconfig`).
pub const CLUSTER: &str = "local";

/// Where the one-machine control plane keeps its data: `GPUSTACK_DATA_DIR`, else
/// `/var/lib/gpustack` when this user may write there, else the user's data directory.
pub fn data_dir(env: impl Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(dir) = env("GPUSTACK_DATA_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let system = PathBuf::from("/var/lib/gpustack");
    if writable(&system) {
        return system;
    }
    let base = env("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("gpustack")
}

/// The gateway socket's name in its data directory (the flags' default is in
/// `/var/lib/gpustack`).
const SOCKET_NAME: &str = "gpustack-operator-worker-gateway.sock";
pub const DEFAULT_SOCKET: &str = "/var/lib/gpustack/gpustack-operator-worker-gateway.sock";

/// The gateway's unix socket, for `worker --gateway-socket` and `worker-gateway
/// --bind-unix-path`: the flag's value, except that its default follows `GPUSTACK_DATA_DIR`
/// when that is set, so that both ends of the socket agree on a data directory moved away
/// from `/var/lib/gpustack`.
pub fn gateway_socket(flag: &str, env: impl Fn(&str) -> Option<String>) -> String {
    match env("GPUSTACK_DATA_DIR").filter(|d| !d.is_empty()) {
        Some(dir) if flag == DEFAULT_SOCKET => PathBuf::from(dir)
            .join(SOCKET_NAME)
            .to_string_lossy()
            .into_owned(),
        _ => flag.to_owned(),
    }
}

fn writable(dir: &Path) -> bool {
    if std::fs::create_dir_all(dir).is_err() {
        return false;
    }
    let probe = dir.join(".write-probe");
    let ok = std::fs::write(&probe, b"").is_ok();
    let _ = std::fs::remove_file(probe);
    ok
}

/// Whether a cluster is at hand: `--kubeconfig`, `KUBECONFIG`, or the in-cluster environment.
pub fn cluster_given(kubeconfig_flag: &str, env: impl Fn(&str) -> Option<String>) -> bool {
    !kubeconfig_flag.is_empty()
        || env("KUBECONFIG").is_some_and(|k| !k.is_empty())
        || env("KUBERNETES_SERVICE_HOST").is_some_and(|h| !h.is_empty())
}

/// This machine as the Node sees it, read through the system root.
pub fn machine(root: &SystemRoot) -> Machine {
    let read = |p: &str| std::fs::read_to_string(root.path(p)).unwrap_or_default();
    let hostname = sanitize_hostname(read("/proc/sys/kernel/hostname").trim());
    Machine {
        hostname,
        os: std::env::consts::OS.to_owned(),
        arch: local_node::go_arch(std::env::consts::ARCH).to_owned(),
        cpus: local_node::cpus(&read("/proc/cpuinfo")),
        memory_kib: local_node::memory_kib(&read("/proc/meminfo")).unwrap_or(0),
        info: MachineInfo {
            kernel_version: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            os_image: local_node::os_image(&read("/etc/os-release")),
            machine_id: read("/etc/machine-id").trim().to_owned(),
            // Readable by root only, as for the kubelet.
            system_uuid: read("/sys/class/dmi/id/product_uuid").trim().to_owned(),
            boot_id: read("/proc/sys/kernel/random/boot_id").trim().to_owned(),
        },
        internal_ip: internal_ip(local_node::default_route_interface(&read(
            "/proc/net/route",
        ))),
    }
}

/// The address the kubelet would report as `InternalIP`: the IPv4 address of the default
/// route's interface, else of any interface that is up and not loopback.
fn internal_ip(default_interface: Option<&str>) -> Option<IpAddr> {
    use nix::{ifaddrs::getifaddrs, net::if_::InterfaceFlags};
    let candidates: Vec<(String, IpAddr)> = getifaddrs()
        .ok()?
        .filter(|a| {
            a.flags.contains(InterfaceFlags::IFF_UP)
                && !a.flags.contains(InterfaceFlags::IFF_LOOPBACK)
        })
        .filter_map(|a| {
            let v4 = a.address?.as_sockaddr_in()?.ip();
            Some((a.interface_name, IpAddr::V4(v4)))
        })
        .collect();
    candidates
        .iter()
        .find(|(name, _)| Some(name.as_str()) == default_interface)
        .or_else(|| candidates.first())
        .map(|(_, ip)| *ip)
}

/// A Node name from a hostname: lowercase, DNS characters only, `localhost` when nothing is left.
fn sanitize_hostname(h: &str) -> String {
    let s: String = h
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches(['-', '.']).to_owned();
    if s.is_empty() { "localhost".into() } else { s }
}

/// The running embedded cluster and what the worker needs of it.
pub struct Local {
    pub gateway: Gateway,
    pub kubeconfig: PathBuf,
}

/// Starts the embedded cluster on 127.0.0.1:`port` with its data in `dir`.
pub async fn start_cluster(dir: &Path, port: u16) -> anyhow::Result<Local> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("creating the data directory {}: {e}", dir.display()))?;
    let bind = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut options = GatewayOptions::new(vec![CLUSTER.to_owned()], dir.to_owned(), bind);
    options.server.unix_socket = None;
    // The embedded cluster's /metrics, on its own registry (the worker serves its own).
    let gateway = Gateway::start(options, &prometheus::Registry::new())
        .await
        .map_err(|e| anyhow::anyhow!("starting the embedded cluster on {bind}: {e:#}"))?;
    let kubeconfig = gpustack_apiserver::hosting::kubeconfig_path(dir, CLUSTER);
    Ok(Local {
        gateway,
        kubeconfig,
    })
}

/// Registers this machine as a Node and publishes its detected accelerators as its `Devices`.
pub async fn publish_machine(client: &kube::Client, root: SystemRoot) -> anyhow::Result<String> {
    let m = machine(&root);
    local_node::register(client, &m)
        .await
        .map_err(|e| anyhow::anyhow!("registering Node {}: {e}", m.hostname))?;
    let manufacturers = Manufacturer::ALL.to_vec();
    let opts = detect::Options {
        manufacturers: manufacturers.clone(),
        no_pci_check: false,
    };
    let report = tokio::task::spawn_blocking(move || {
        let env = |name: &str| std::env::var(name).ok();
        detect::detect(&root, &env, &opts)
    })
    .await
    .map_err(|e| anyhow::anyhow!("the detection pass panicked: {e}"))?;
    for (manufacturer, e) in &report.failures {
        tracing::warn!(%manufacturer, "detection: {e}");
    }
    objects::publish_spec(client, &m.hostname, &manufacturers, &report.items)
        .await
        .map_err(|e| anyhow::anyhow!("publishing Devices {}: {e}", m.hostname))?;
    // No device manager runs here: its accelerator labels, which the controllers' pools are
    // built from, are published the same way it would.
    objects::publish_labels(client, &m.hostname, &manufacturers, &report.items)
        .await
        .map_err(|e| anyhow::anyhow!("labelling Node {}: {e}", m.hostname))?;
    tracing::info!(node = %m.hostname, groups = report.items.len(), "this machine is registered");
    Ok(m.hostname)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_data_goes_and_when_a_cluster_is_given() {
        let env = crate::env_of;
        assert_eq!(
            data_dir(env(&[("GPUSTACK_DATA_DIR", "/tmp/x")])),
            PathBuf::from("/tmp/x")
        );
        assert!(!cluster_given("", env(&[])));
        assert!(cluster_given("/k", env(&[])));
        assert!(cluster_given("", env(&[("KUBECONFIG", "/k")])));
        assert!(cluster_given(
            "",
            env(&[("KUBERNETES_SERVICE_HOST", "10.0.0.1")])
        ));
        let data = env(&[("GPUSTACK_DATA_DIR", "/tmp/x")]);
        assert_eq!(
            gateway_socket(DEFAULT_SOCKET, &data),
            "/tmp/x/gpustack-operator-worker-gateway.sock"
        );
        assert_eq!(gateway_socket("/run/gw.sock", &data), "/run/gw.sock");
        assert_eq!(gateway_socket("", &data), "", "empty still serves no fleet");
        assert_eq!(gateway_socket(DEFAULT_SOCKET, env(&[])), DEFAULT_SOCKET);
        assert_eq!(sanitize_hostname("My_Host"), "my-host");
        assert_eq!(sanitize_hostname(""), "localhost");
    }
}
