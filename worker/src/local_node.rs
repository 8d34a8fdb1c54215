//! The one-machine control plane registers the machine it runs on as a Node: its name, OS and
//! architecture labels, and CPU and memory capacity read from `/proc`. Parsing is pure; the
//! caller reads the files (through the system root, so fixtures stand in for a machine).

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// What the Node says about the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// The host name.
    pub hostname: String,
    /// The operating system (`linux`).
    pub os: String,
    /// The architecture (`amd64`).
    pub arch: String,
    /// Logical CPUs.
    pub cpus: u32,
    /// Memory in KiB.
    pub memory_kib: u64,
    /// What the kubelet reports in `nodeInfo` (empty where this machine does not say).
    pub info: MachineInfo,
    /// The Node's `InternalIP`, when this machine has an address other than loopback.
    pub internal_ip: Option<std::net::IpAddr>,
}

/// The identity the kubelet reads from the host for `status.nodeInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineInfo {
    /// The kernel's release.
    pub kernel_version: String,
    /// The distribution's pretty name.
    pub os_image: String,
    /// `/etc/machine-id`.
    pub machine_id: String,
    /// The firmware's system UUID.
    pub system_uuid: String,
    /// This boot's id.
    pub boot_id: String,
}

/// `PRETTY_NAME` of an os-release file (what the kubelet shows as the OS image), unquoted;
/// "Linux" when it is missing, as the kubelet says.
pub fn os_image(os_release: &str) -> String {
    os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches(['"', '\'']).to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "Linux".to_owned())
}

/// The interface of the IPv4 default route in `/proc/net/route` (destination 0, mask 0).
pub fn default_route_interface(route: &str) -> Option<&str> {
    route.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 7 && f[1] == "00000000" && f[7] == "00000000").then_some(f[0])
    })
}

/// Logical CPUs in `/proc/cpuinfo` (at least one).
pub fn cpus(cpuinfo: &str) -> u32 {
    let n = cpuinfo
        .lines()
        .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
        .count();
    u32::try_from(n.max(1)).unwrap_or(u32::MAX)
}

/// `MemTotal` of `/proc/meminfo`, in KiB.
pub fn memory_kib(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemTotal:")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Go's architecture names, as Kubernetes labels carry them.
pub fn go_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// The Node object (labels and capacity; status written separately).
pub fn node(m: &Machine) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": m.hostname,
            "labels": {
                "kubernetes.io/hostname": m.hostname,
                "kubernetes.io/os": m.os,
                "kubernetes.io/arch": m.arch,
                "beta.kubernetes.io/os": m.os,
                "beta.kubernetes.io/arch": m.arch,
                "node-role.kubernetes.io/control-plane": "",
            },
        },
        "spec": {},
    })
}

/// The Node's status: capacity, addresses, what the kubelet says of the host, and Ready as of
/// `now`.
pub fn status(m: &Machine, now: &str) -> Value {
    let mut addresses = Vec::new();
    if let Some(ip) = m.internal_ip {
        addresses.push(json!({"type": "InternalIP", "address": ip.to_string()}));
    }
    addresses.push(json!({"type": "Hostname", "address": m.hostname}));
    let capacity = json!({
        "cpu": m.cpus.to_string(),
        "memory": format!("{}Ki", m.memory_kib),
        "pods": "110",
    });
    json!({
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "addresses": addresses,
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "reason": "GPUStackOneMachine",
                "message": "the one-machine control plane runs on this node",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }],
            "nodeInfo": {
                "operatingSystem": m.os,
                "architecture": m.arch,
                "kubeletVersion": "",
                "containerRuntimeVersion": "",
                "kernelVersion": m.info.kernel_version,
                "osImage": m.info.os_image,
                "machineID": m.info.machine_id,
                "systemUUID": m.info.system_uuid,
                "bootID": m.info.boot_id,
                "kubeProxyVersion": "",
            },
        }
    })
}

/// Creates the Node if it is missing and writes its status.
pub fn register<'a>(
    client: &'a kube::Client,
    m: &'a Machine,
) -> BoxFuture<'a, Result<(), kube::Error>> {
    Box::pin(async move {
        let api: Api<Node> = Api::all(client.clone());
        if api.get_opt(&m.hostname).await?.is_none() {
            let obj: Node = crate::typed::from_json(&node(m)).expect("a Node object");
            match api.create(&PostParams::default(), &obj).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        let now = jiff::Timestamp::now().to_string();
        api.patch_status(
            &m.hostname,
            &PatchParams::default(),
            &Patch::Merge(status(m, &now)),
        )
        .await?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc() {
        let cpuinfo = "processor\t: 0\nmodel name\t: X\n\nprocessor\t: 1\nmodel name\t: X\n";
        assert_eq!(cpus(cpuinfo), 2);
        assert_eq!(cpus(""), 1);
        assert_eq!(
            memory_kib("MemTotal:       32768000 kB\nMemFree: 1 kB\n"),
            Some(32768000)
        );
        assert_eq!(memory_kib("nothing"), None);
        assert_eq!(go_arch("x86_64"), "amd64");
        let m = Machine {
            hostname: "h".into(),
            os: "linux".into(),
            arch: "amd64".into(),
            cpus: 2,
            memory_kib: 1024,
            info: MachineInfo {
                kernel_version: "6.1.0-13-amd64".into(),
                os_image: os_image(
                    "NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
                ),
                ..MachineInfo::default()
            },
            internal_ip: Some([192, 0, 2, 3].into()),
        };
        assert_eq!(
            node(&m)["metadata"]["labels"]["kubernetes.io/arch"],
            "amd64"
        );
        let s = status(&m, "2026-01-01T00:00:00Z");
        assert_eq!(s["status"]["capacity"]["memory"], "1024Ki");
        assert_eq!(s["status"]["conditions"][0]["type"], "Ready");
        let info = &s["status"]["nodeInfo"];
        assert_eq!(info["osImage"], "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(info["kernelVersion"], "6.1.0-13-amd64");
        assert_eq!(
            s["status"]["addresses"],
            json!([{"type": "InternalIP", "address": "192.0.2.3"}, {"type": "Hostname", "address": "h"}])
        );
        assert_eq!(os_image(""), "Linux");
        let route = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
            eth0\t0002A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\n\
            eth1\t00000000\t0102A8C0\t0003\t0\t0\t0\t00000000\n";
        assert_eq!(default_route_interface(route), Some("eth1"));
        assert_eq!(default_route_interface("Iface\n"), None);
    }
}
