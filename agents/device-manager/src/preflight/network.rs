//! The report's `network` section: one row per port of each RDMA device the kernel lists in
//! `/sys/class/infiniband`, named by its network interface (for an SR-IOV virtual function,
//! `<physical function's interface>/<VF bus id>`), with the link's verdict. The section never
//! fails the run: a port that is down is reported, not refused.
//!
//! [`read_ports`] is the IO (sysfs under a system root); [`check`] and [`section`] are pure.

use std::fs;

use gpustack_api::time::Timestamp;

use super::report::{Depth, NetworkCheck, NetworkSection, State};
use crate::system_root::SystemRoot;

const CLASS: &str = "/sys/class/infiniband";

/// One port of one RDMA device, as sysfs shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdmaPort {
    /// The interface name the row carries (`eth0`, or `eth0/0000:3b:00.2` for a VF).
    pub name: String,
    /// The RDMA device (`mlx5_0`).
    pub rdma_device: String,
    pub port: u32,
    /// `ports/<n>/state`, e.g. `4: ACTIVE`.
    pub state: Option<String>,
    /// `ports/<n>/phys_state`, e.g. `5: LinkUp`.
    pub phys_state: Option<String>,
    /// `ports/<n>/link_layer`: `InfiniBand` or `Ethernet` (RoCE).
    pub link_layer: Option<String>,
}

/// Every port of every RDMA device under `root`, sorted by device and port.
pub fn read_ports(root: &SystemRoot) -> Vec<RdmaPort> {
    let mut out = Vec::new();
    for dev in root.list_dir(CLASS).unwrap_or_default() {
        let base = format!("{CLASS}/{dev}");
        let first_if = |dir: &str| root.list_dir(dir).ok().and_then(|v| v.into_iter().next());
        let bdf = fs::read_link(root.path(format!("{base}/device")))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        let is_vf = root.path(format!("{base}/device/physfn")).exists();
        let own_if = first_if(&format!("{base}/device/net"));
        let name = match (is_vf, first_if(&format!("{base}/device/physfn/net")), &bdf) {
            (true, Some(pf), Some(bdf)) => format!("{pf}/{bdf}"),
            _ => own_if.unwrap_or_else(|| dev.clone()),
        };
        let mut ports: Vec<u32> = root
            .list_dir(format!("{base}/ports"))
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect();
        ports.sort_unstable();
        for port in ports {
            let attr = |a: &str| root.read_attr(format!("{base}/ports/{port}/{a}"));
            out.push(RdmaPort {
                name: name.clone(),
                rdma_device: dev.clone(),
                port,
                state: attr("state"),
                phys_state: attr("phys_state"),
                link_layer: attr("link_layer"),
            });
        }
    }
    out
}

/// The word after the numeric code (`4: ACTIVE` → `ACTIVE`).
fn word(attr: &str) -> &str {
    attr.split_once(':').map_or(attr, |(_, w)| w).trim()
}

/// A port's verdict: `ok` when the logical state is ACTIVE and the physical link is up.
pub fn check(p: &RdmaPort) -> NetworkCheck {
    let state = p.state.as_deref().map(word);
    let phys = p.phys_state.as_deref().map(word);
    let layer = p.link_layer.as_deref().unwrap_or("unknown link layer");
    let (verdict, detail, reason) = match (state, phys) {
        (Some("ACTIVE"), Some("LinkUp")) => (
            State::Ok,
            Some(format!("port {} is ACTIVE, link up ({layer})", p.port)),
            None,
        ),
        (None, _) | (_, None) => (
            State::Unavailable,
            None,
            Some(format!(
                "port {} does not report its state in sysfs",
                p.port
            )),
        ),
        (Some(s), Some(ph)) => (
            State::Unavailable,
            None,
            Some(format!(
                "port {} is {s}, physical link {ph} ({layer})",
                p.port
            )),
        ),
    };
    NetworkCheck {
        name: p.name.clone(),
        rdma_device: p.rdma_device.clone(),
        port: p.port,
        state: verdict,
        depth: Depth::Declared,
        detail,
        reason,
    }
}

/// The section for these ports.
pub fn section(ports: &[RdmaPort]) -> NetworkSection {
    NetworkSection {
        timestamp: Timestamp::now_local(),
        checks: ports.iter().map(check).collect(),
        note: ports
            .is_empty()
            .then(|| format!("no RDMA device on this node ({CLASS} lists none)")),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    struct Tree(tempfile::TempDir);

    impl Tree {
        fn file(&self, path: &str, text: &str) {
            let p = self.0.path().join(path.trim_start_matches('/'));
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        /// A symlink at `path` to `target`, both tree paths (the link is absolute in the tree).
        fn link(&self, path: &str, target: &str) {
            let p = self.0.path().join(path.trim_start_matches('/'));
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            symlink(self.0.path().join(target.trim_start_matches('/')), p).unwrap();
        }
        fn dir(&self, path: &str) {
            fs::create_dir_all(self.0.path().join(path.trim_start_matches('/'))).unwrap();
        }
        /// An RDMA device on PCI function `bdf`, with its netdev `netdev` and one port.
        fn rdma(&self, dev: &str, bdf: &str, netdev: &str, state: &str, phys: &str) {
            let pci = format!("/sys/devices/pci0000:00/{bdf}");
            self.dir(&format!("{pci}/net/{netdev}"));
            self.link(&format!("{CLASS}/{dev}/device"), &pci);
            self.file(&format!("{CLASS}/{dev}/ports/1/state"), state);
            self.file(&format!("{CLASS}/{dev}/ports/1/phys_state"), phys);
            self.file(&format!("{CLASS}/{dev}/ports/1/link_layer"), "Ethernet\n");
        }
    }

    #[test]
    fn ports_named_by_interface_and_vf_with_link_verdicts() {
        let t = Tree(tempfile::tempdir().unwrap());
        let root = SystemRoot::new(t.0.path());
        t.rdma(
            "mlx5_0",
            "0000:3b:00.0",
            "ens1f0",
            "4: ACTIVE\n",
            "5: LinkUp\n",
        );
        t.rdma(
            "mlx5_1",
            "0000:3b:00.1",
            "ens1f1",
            "1: DOWN\n",
            "3: Disabled\n",
        );
        // A VF of mlx5_0's function: named after the PF's interface and its own bus id.
        let vf = "/sys/devices/pci0000:00/0000:3b:00.2";
        t.dir(&format!("{vf}/net/ens1f0v0"));
        t.link(
            &format!("{vf}/physfn"),
            "/sys/devices/pci0000:00/0000:3b:00.0",
        );
        t.link(&format!("{CLASS}/mlx5_2/device"), vf);
        t.file(&format!("{CLASS}/mlx5_2/ports/1/state"), "4: ACTIVE\n");
        t.file(&format!("{CLASS}/mlx5_2/ports/1/phys_state"), "5: LinkUp\n");

        let ports = read_ports(&root);
        let s = section(&ports);
        let rows: Vec<(&str, &str, State)> = s
            .checks
            .iter()
            .map(|c| (c.name.as_str(), c.rdma_device.as_str(), c.state))
            .collect();
        assert_eq!(
            rows,
            [
                ("ens1f0", "mlx5_0", State::Ok),
                ("ens1f1", "mlx5_1", State::Unavailable),
                ("ens1f0/0000:3b:00.2", "mlx5_2", State::Ok),
            ]
        );
        assert_eq!(
            s.checks[1].reason.as_deref(),
            Some("port 1 is DOWN, physical link Disabled (Ethernet)")
        );
        assert!(s.checks.iter().all(|c| c.depth == Depth::Declared));
        assert!(s.note.is_none());

        // A port without a state is not passed.
        fs::remove_file(root.path(format!("{CLASS}/mlx5_0/ports/1/state"))).unwrap();
        assert_eq!(check(&read_ports(&root)[0]).state, State::Unavailable);
    }

    #[test]
    fn no_rdma_device_is_a_note_not_a_row() {
        let t = tempfile::tempdir().unwrap();
        let s = section(&read_ports(&SystemRoot::new(t.path())));
        assert!(s.checks.is_empty());
        assert!(s.note.unwrap().contains("no RDMA device"));
    }
}
