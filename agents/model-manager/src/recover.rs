//! Restart recovery: the mounts that survived the plugin (kubelet keeps Pods running while it is
//! down) are found in `/proc/self/mountinfo` and reconciled with `ledger/refs`, so that GC never
//! removes a tree a Pod still has mounted. Pure: the caller reads the table and applies the plan.

use std::path::Path;

use sha2::{Digest as _, Sha256};

use crate::{hex, manifest::ManifestDigest, mountinfo::MountEntry, store::VolumeRef};

/// A mount of one of our published trees onto a kubelet CSI target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveMount {
    pub pod_uid: String,
    pub volume_name: String,
    pub target: std::path::PathBuf,
    pub hex: String,
}

/// Kubelet's inline volume id: `csi-` and the SHA-256 of the Pod UID and volume name.
pub fn kubelet_volume_id(pod_uid: &str, volume_name: &str) -> String {
    format!(
        "csi-{}",
        hex::encode(&Sha256::digest(
            format!("{pod_uid}{volume_name}").as_bytes()
        ))
    )
}

/// Our mounts in the table: on the cache's device, rooted at `…/published/<hex>/tree`, onto
/// `…/pods/<uid>/volumes/kubernetes.io~csi/<vol>/mount`.
pub fn live_mounts(table: &[MountEntry], cache_device: &str) -> Vec<LiveMount> {
    table
        .iter()
        .filter(|e| e.device == cache_device)
        .filter_map(|e| {
            let root: Vec<&str> = e.root.to_str()?.rsplit('/').take(4).collect();
            let hex = match root.as_slice() {
                ["tree", hex, "published", ..] => ManifestDigest::from_hex(hex)?.hex().to_owned(),
                _ => return None,
            };
            let target: Vec<&str> = e.mount_point.to_str()?.rsplit('/').take(6).collect();
            match target.as_slice() {
                ["mount", vol, "kubernetes.io~csi", "volumes", uid, "pods"] => Some(LiveMount {
                    pod_uid: (*uid).to_owned(),
                    volume_name: (*vol).to_owned(),
                    target: e.mount_point.clone(),
                    hex,
                }),
                _ => None,
            }
        })
        .collect()
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconcile {
    /// Refs to write: corrected hexes and adopted mounts.
    pub write: Vec<VolumeRef>,
    /// Volume ids whose target no longer holds our mount.
    pub drop: Vec<String>,
}

pub fn reconcile(live: &[LiveMount], refs: &[VolumeRef]) -> Reconcile {
    let mut plan = Reconcile::default();
    for m in live {
        match refs.iter().find(|r| r.target_path == m.target) {
            Some(r) if r.hex == m.hex => {}
            Some(r) => plan.write.push(VolumeRef {
                hex: m.hex.clone(),
                ..r.clone()
            }),
            None => plan.write.push(VolumeRef {
                volume_id: kubelet_volume_id(&m.pod_uid, &m.volume_name),
                target_path: m.target.clone(),
                hex: m.hex.clone(),
                pod_namespace: String::new(),
                pod_name: String::new(),
                pod_uid: m.pod_uid.clone(),
            }),
        }
    }
    for r in refs {
        if !live.iter().any(|m| m.target == r.target_path) {
            plan.drop.push(r.volume_id.clone());
        }
    }
    plan
}

/// `major:minor` of the filesystem holding `path`, as mountinfo writes it.
pub fn device_of(path: &Path) -> Result<String, nix::Error> {
    let st = nix::sys::stat::stat(path)?;
    Ok(format!(
        "{}:{}",
        nix::sys::stat::major(st.st_dev),
        nix::sys::stat::minor(st.st_dev)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mountinfo;

    #[test]
    fn finds_and_reconciles_surviving_mounts() {
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let text = format!(
            "\
1 0 8:1 /cache/published/{a}/tree /var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/model/mount ro,nosuid,nodev - ext4 /dev/sda1 rw
2 0 8:1 /cache/published/{b}/tree /var/lib/kubelet/pods/u2/volumes/kubernetes.io~csi/model/mount ro,nosuid,nodev - ext4 /dev/sda1 rw
3 0 8:2 /cache/published/{a}/tree /var/lib/kubelet/pods/u3/volumes/kubernetes.io~csi/model/mount ro - ext4 /dev/sdb1 rw
4 0 8:1 /cache/partial/{a}/1/tree /var/lib/kubelet/pods/u4/volumes/kubernetes.io~csi/model/mount ro - ext4 /dev/sda1 rw
5 0 8:1 /cache/published/{a}/tree /elsewhere ro - ext4 /dev/sda1 rw
"
        );
        let live = live_mounts(&mountinfo::parse(&text), "8:1");
        assert_eq!(
            live.len(),
            2,
            "other devices, partial trees and other targets are not ours"
        );
        let target = |u: &str| live.iter().find(|m| m.pod_uid == u).unwrap().target.clone();
        let r = |id: &str, t, hex: &str| VolumeRef {
            volume_id: id.into(),
            target_path: t,
            hex: hex.into(),
            pod_namespace: "ns".into(),
            pod_name: "p".into(),
            pod_uid: "x".into(),
        };
        let refs = vec![
            r("csi-1", target("u1"), &b), // wrong hex
            r(
                "csi-gone",
                "/var/lib/kubelet/pods/u9/volumes/kubernetes.io~csi/model/mount".into(),
                &a,
            ),
        ];
        let plan = reconcile(&live, &refs);
        assert_eq!(plan.drop, ["csi-gone"]);
        assert_eq!(plan.write.len(), 2);
        assert_eq!(
            (plan.write[0].volume_id.as_str(), plan.write[0].hex.as_str()),
            ("csi-1", a.as_str())
        );
        assert_eq!(plan.write[1].volume_id, kubelet_volume_id("u2", "model"));
        assert_eq!(plan.write[1].hex, b);
        assert!(kubelet_volume_id("u", "v").len() == 68);
    }
}
