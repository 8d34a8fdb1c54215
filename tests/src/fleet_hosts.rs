//! The fleet's GPU nodes as `device-manager serve` sees them: a fixture host tree per node (the
//! HGX H100 node with its NVML stand-in, the MI210 node, a mixed node of an A100 in MIG mode
//! and two Radeon cards), mounted into the node's agent container at [`MOUNT`], plus what the
//! kubelet would report of the node (its Node and capacity), which no kubelet here writes.
//! The agent detects the cards and writes the node's `Devices` and accelerator labels itself.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{
    inventory::{A100_MIG, H100, Machine, Product, RX7800XT},
    machines::{
        amd::{self, AmdgpuCard, MI210_CARDS, RX_7800_XT},
        nvidia::{self, H100_UNHEALTHY_INDEX},
    },
    sysfs::HostTree,
};

/// Where a node's fixture directory is mounted in its agent's container.
pub const MOUNT: &str = "/fixture";

/// Which machine a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host {
    /// Eight H100 SXM5 cards, card 5 with uncorrected ECC errors (NVML stand-in).
    HgxH100,
    /// Four Instinct MI210 cards (amdgpu sysfs, ROCm's `amdgpu.ids`).
    Mi210,
    /// One A100 in MIG mode (NVML stand-in) and two Radeon RX 7800 XT cards.
    Mixed,
}

/// One node of a cluster: its name and its machine.
#[derive(Clone, Debug)]
pub struct FleetNode {
    pub name: String,
    pub host: Host,
}

impl FleetNode {
    pub fn new(name: &str, host: Host) -> Self {
        FleetNode {
            name: name.to_owned(),
            host,
        }
    }

    /// The manufacturers its agent acts for (`--manufacturer`).
    pub fn manufacturers(&self) -> &'static str {
        match self.host {
            Host::HgxH100 => "nvidia",
            Host::Mi210 => "amd",
            Host::Mixed => "nvidia,amd",
        }
    }

    /// The cards of each product on it, as the kubelet's device plugin pools count them (the
    /// unhealthy ones left out).
    fn parts(&self) -> Vec<Machine> {
        let named = |product: Product, cards: u32| Machine::gpu(&self.name, product, cards);
        match self.host {
            Host::HgxH100 => {
                let mut m = named(H100, 8);
                m.unhealthy = vec![H100_UNHEALTHY_INDEX as u32];
                vec![m]
            }
            Host::Mi210 => vec![named(crate::inventory::MI210, MI210_CARDS)],
            Host::Mixed => vec![named(A100_MIG, 1), named(RX7800XT, 2)],
        }
    }

    /// The Node as the kubelet and NFD write it: no accelerator labels (the agent's).
    pub fn node(&self) -> Value {
        Machine::cpu_only(&self.name, 96).node()
    }

    /// The Node's status as the kubelet reports it: cores, and every device plugin pool.
    pub fn node_status(&self) -> Value {
        let mut status = Machine::cpu_only(&self.name, 96).node_status();
        for part in self.parts() {
            let pools = part.node_status();
            for (k, v) in pools["status"]["capacity"]
                .as_object()
                .into_iter()
                .flatten()
            {
                if k.contains('/') {
                    status["status"]["capacity"][k] = v.clone();
                    status["status"]["allocatable"][k] = v.clone();
                }
            }
        }
        status["apiVersion"] = json!("v1");
        status["kind"] = json!("Node");
        status
    }

    /// Writes its fixture under `dir` (mounted at [`MOUNT`]); the agent's environment there.
    pub fn build(&self, dir: &Path) -> Vec<(String, String)> {
        std::fs::create_dir_all(dir).unwrap();
        let root = format!("{MOUNT}/root");
        let nvml = format!("{MOUNT}/nvml.json");
        let mut env = vec![("GPUSTACK_SYSTEM_ROOT".to_owned(), root)];
        match self.host {
            Host::HgxH100 => {
                nvidia::hgx_h100_node(dir);
                env.push((nvidia::FIXTURE_ENV.to_owned(), nvml));
            }
            Host::Mi210 => amd::mi210_node(&HostTree::new(dir.join("root"))),
            Host::Mixed => {
                nvidia::a100_mig_node(dir);
                radeon_pair(&HostTree::new(dir.join("root")));
                env.push((nvidia::FIXTURE_ENV.to_owned(), nvml));
            }
        }
        readable(dir);
        env
    }
}

/// Two RX 7800 XT cards on a second PCI root of the mixed node, with ROCm's product names.
fn radeon_pair(tree: &HostTree) {
    tree.file("/opt/rocm/.info/version", "7.2.0-43\n")
        .file(
            "/opt/rocm/share/libdrm/amdgpu.ids",
            "# List of AMDGPU IDs\n1.0.0\n747E,\tC8,\tAMD Radeon RX 7800 XT\n",
        )
        .file(
            "/sys/class/kfd/kfd/topology/nodes/0/properties",
            "cpu_cores_count 32\nsimd_count 0\ndrm_render_minor 0\n",
        );
    let cards = [
        (
            ["pci0000:80", "0000:80:01.1", "0000:81:00.0"],
            "41d2a7c90e5b3f68",
        ),
        (
            ["pci0000:90", "0000:90:01.1", "0000:91:00.0"],
            "b7e3f0a1c5d92846",
        ),
    ];
    for (i, (path, unique_id)) in cards.iter().enumerate() {
        amd::add_amdgpu_card(
            tree,
            &RX_7800_XT,
            &AmdgpuCard {
                bus_path: path,
                card: i as u32 + 1,
                render: 128 + i as u32,
                unique_id,
                vram_used_bytes: 64 * 1024 * 1024,
                busy_percent: 0,
                temp_millicelsius: 40000,
                power_microwatts: 9_000_000,
                kfd_node: i as u32 + 1,
                numa_node: -1,
            },
        );
    }
}

/// Makes `dir` and everything below it readable (and directories enterable) by any user: the
/// agent's container reads the fixture as whatever user it runs as.
fn readable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        let library = p.extension().is_some_and(|e| e == "so" || e == "1");
        let mode = if meta.is_dir() || library {
            0o755
        } else {
            0o644
        };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        if meta.is_dir() {
            for e in std::fs::read_dir(&p).unwrap().flatten() {
                stack.push(e.path());
            }
        }
    }
}

/// The clusters of `deploy/compose/` and the node each one runs, as its `up.sh` lays them out
/// (`fleet-hosts DIR` writes `DIR/<cluster>/`).
pub const COMPOSE: [(&str, &str, Host); 3] = [
    ("east", "hgx-h100", Host::HgxH100),
    ("west", "mi210-node", Host::Mi210),
    ("north", "mixed-node", Host::Mixed),
];

/// Writes, for each cluster of [`COMPOSE`], its node's fixture in `dir/<cluster>` with what
/// the kubelet would write of the node beside it (`node.json`, `node-status.json`: `up.sh`
/// applies them).
pub fn write_compose_hosts(dir: &Path) {
    for (cluster, name, host) in COMPOSE {
        let node = FleetNode::new(name, host);
        let at = dir.join(cluster);
        node.build(&at);
        let status = json!({"status": node.node_status()["status"].clone()});
        for (file, doc) in [("node.json", node.node()), ("node-status.json", status)] {
            std::fs::write(at.join(file), serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        }
        readable(&at);
    }
}
