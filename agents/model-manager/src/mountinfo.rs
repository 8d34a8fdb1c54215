//! `/proc/self/mountinfo` lines, parsed: which targets are mounted, from which root, with
//! which options. Pure; the caller reads the file.

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// `major:minor` of the filesystem.
    pub device: String,
    /// The path inside the filesystem that is mounted (a bind mount's source, relative to it).
    pub root: PathBuf,
    pub mount_point: PathBuf,
    pub options: Vec<String>,
}

impl MountEntry {
    pub fn is_read_only(&self) -> bool {
        self.options.iter().any(|o| o == "ro")
    }

    /// Read-only, nosuid and nodev, as every mount this plugin makes.
    pub fn is_sealed(&self) -> bool {
        ["ro", "nosuid", "nodev"]
            .iter()
            .all(|want| self.options.iter().any(|o| o == want))
    }
}

/// The kernel escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub fn parse(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            if f.len() < 6 {
                return None;
            }
            Some(MountEntry {
                device: f[2].to_owned(),
                root: PathBuf::from(unescape(f[3])),
                mount_point: PathBuf::from(unescape(f[4])),
                options: f[5].split(',').map(str::to_owned).collect(),
            })
        })
        .collect()
}

/// The last (topmost) mount at `target`.
pub fn find<'a>(entries: &'a [MountEntry], target: &std::path::Path) -> Option<&'a MountEntry> {
    entries.iter().rev().find(|e| e.mount_point == target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bind_mounts_and_escapes() {
        let text = "\
36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
812 30 8:1 /cache/published/ab/tree /var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/m/mount ro,nosuid,nodev,relatime shared:1 - ext4 /dev/sda1 rw
813 30 8:1 /a\\040b /x\\011y rw - ext4 /dev/sda1 rw
";
        let e = parse(text);
        assert_eq!(e.len(), 3);
        assert_eq!(e[1].device, "8:1");
        assert_eq!(e[1].root, PathBuf::from("/cache/published/ab/tree"));
        assert!(e[1].is_sealed());
        assert!(!e[0].is_read_only());
        assert_eq!(e[2].root, PathBuf::from("/a b"));
        assert_eq!(e[2].mount_point, PathBuf::from("/x\ty"));
        assert!(find(&e, std::path::Path::new("/mnt2")).is_some());
        assert!(find(&e, std::path::Path::new("/nope")).is_none());
    }
}
