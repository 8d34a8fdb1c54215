//! Which kinds a mirror copies, and how a kind is named in status.

/// A kind to mirror, as the upstream serves it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MirroredKind {
    /// The API group; empty for the core group.
    pub group: String,
    /// The version mirrored.
    pub version: String,
    /// The kind's name.
    pub kind: String,
}

impl MirroredKind {
    /// The kind `kind` of `group`/`version`.
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

/// Parses `group/version/Kind` (`v1/Kind` or `/v1/Kind` for the core group), the form of the
/// subscription API's `gvk` parameter.
pub fn parse_gvk(s: &str) -> Result<MirroredKind, GvkError> {
    let parts: Vec<&str> = s.split('/').collect();
    let (group, version, kind) = match parts.as_slice() {
        [version, kind] => ("", *version, *kind),
        [group, version, kind] => (*group, *version, *kind),
        _ => return Err(GvkError::Shape(s.to_owned())),
    };
    let word = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric());
    let group_ok = group.is_empty()
        || group.split('.').all(|l| {
            !l.is_empty()
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        });
    if !group_ok
        || !word(version)
        || !word(kind)
        || !kind.starts_with(|c: char| c.is_ascii_uppercase())
    {
        return Err(GvkError::Parts(s.to_owned()));
    }
    Ok(MirroredKind::new(group, version, kind))
}

/// Why a `gvk` parameter was refused; the message names the form.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GvkError {
    /// Not two or three `/`-separated parts.
    #[error("gvk {0:?} must be group/version/Kind (v1/Kind for the core group)")]
    Shape(String),
    /// Three parts, but one of them is not of its form.
    #[error(
        "gvk {0:?} must be group/version/Kind: a DNS group, an alphanumeric version and a capitalised Kind"
    )]
    Parts(String),
}

/// The kinds mirrored for an upstream that also asked for `extra`: the defaults, then each
/// extra kind not among them.
pub fn with_extra(extra: &[MirroredKind]) -> Vec<MirroredKind> {
    let mut kinds = default_kinds();
    for k in extra {
        if !kinds.contains(k) {
            kinds.push(k.clone());
        }
    }
    kinds
}

/// The GPU-relevant kinds every upstream is mirrored for: the node ledgers, the instance types,
/// the instances, the model stores and artifacts of `worker.gpustack.ai`, and the nodes
/// themselves.
pub fn default_kinds() -> Vec<MirroredKind> {
    vec![
        MirroredKind::new("worker.gpustack.ai", "v1alpha1", "Devices"),
        MirroredKind::new("worker.gpustack.ai", "v1alpha1", "InstanceType"),
        MirroredKind::new("worker.gpustack.ai", "v1alpha1", "Instance"),
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
        assert_eq!(k[1].label(), "InstanceType.worker.gpustack.ai");
        assert_eq!(k.last().unwrap().label(), "Node");
    }

    #[test]
    fn gvks_parse_and_bad_ones_say_the_form() {
        assert_eq!(
            parse_gvk("worker.gpustack.ai/v1/Instance").unwrap(),
            MirroredKind::new("worker.gpustack.ai", "v1", "Instance")
        );
        assert_eq!(
            parse_gvk("v1/Pod").unwrap(),
            MirroredKind::new("", "v1", "Pod")
        );
        assert_eq!(
            parse_gvk("/v1/Pod").unwrap(),
            MirroredKind::new("", "v1", "Pod")
        );
        for bad in [
            "",
            "Pod",
            "a/b/c/D",
            "g/v1/pod",
            "G_x/v1/Pod",
            "g//Pod",
            "g/v1/",
        ] {
            let e = parse_gvk(bad).unwrap_err().to_string();
            assert!(e.contains("group/version/Kind"), "{bad}: {e}");
        }
        let kinds = with_extra(&[parse_gvk("v1/Pod").unwrap(), parse_gvk("v1/Node").unwrap()]);
        assert_eq!(kinds.len(), default_kinds().len() + 1);
    }
}
