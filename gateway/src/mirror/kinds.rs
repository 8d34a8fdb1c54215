//! Which kinds a mirror copies, and how a kind is named in status.

/// A kind to mirror, as the upstream serves it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirroredKind {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl MirroredKind {
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        MirroredKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// `Kind.group` (`Kind` for the core group): how status names it.
    pub fn label(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
}

/// The GPU-relevant kinds every upstream is mirrored for: the node ledgers, the model stores
/// and artifacts of `worker.gpustack.ai`, and the nodes themselves.
pub fn default_kinds() -> Vec<MirroredKind> {
    vec![
        MirroredKind::new("worker.gpustack.ai", "v1alpha1", "Devices"),
        MirroredKind::new("worker.gpustack.ai", "v1alpha1", "NodeModelStore"),
        MirroredKind::new("worker.gpustack.ai", "v1alpha1", "ModelArtifact"),
        MirroredKind::new("", "v1", "Node"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        let k = default_kinds();
        assert_eq!(k[0].label(), "Devices.worker.gpustack.ai");
        assert_eq!(k[3].label(), "Node");
    }
}
