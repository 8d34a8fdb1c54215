//! Validating a NodePublishVolume request and authorizing it against the `ModelArtifact` of the
//! Pod's namespace. Pure: the CSI layer looks the artifact up and maps errors to gRPC codes.

use std::{
    collections::HashMap,
    path::{Component, Path, PathBuf},
};

use gpustack_api::model_artifact::ModelArtifact;

use crate::{filter::FileFilter, manifest::ManifestDigest, materializer::Source};

pub const ATTR_ARTIFACT: &str = "artifact";
pub const ATTR_ARTIFACT_UID: &str = "artifactUID";
pub const ATTR_MANIFEST_DIGEST: &str = "manifestDigest";
pub const ATTR_EPHEMERAL: &str = "csi.storage.k8s.io/ephemeral";
pub const ATTR_POD_NAMESPACE: &str = "csi.storage.k8s.io/pod.namespace";
pub const ATTR_POD_NAME: &str = "csi.storage.k8s.io/pod.name";
pub const ATTR_POD_UID: &str = "csi.storage.k8s.io/pod.uid";

/// A publish request that passed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishRequest {
    pub volume_id: String,
    pub target: PathBuf,
    pub artifact: String,
    pub artifact_uid: String,
    pub digest: ManifestDigest,
    pub pod_namespace: String,
    pub pod_name: String,
    pub pod_uid: String,
}

/// `target` with `.` and `..` resolved lexically (the target need not exist yet).
pub fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Why a publish request is malformed (an InvalidArgument, before anything is looked up).
#[derive(Debug, thiserror::Error)]
pub enum Malformed {
    #[error("{0} is required")]
    Missing(&'static str),
    #[error("target_path must lie under {}", .0.display())]
    TargetOutside(PathBuf),
    #[error(transparent)]
    VolumeId(#[from] crate::store::StoreError),
    #[error("volume_capability must be a mount capability")]
    NotAMount,
    #[error("only inline ephemeral volumes are served ({ATTR_EPHEMERAL} must be \"true\")")]
    NotEphemeral,
    #[error("volume attribute {0} is required")]
    MissingAttribute(&'static str),
    #[error("volume attribute {ATTR_MANIFEST_DIGEST} must be sha256:<64 hex>")]
    Digest,
}

/// A target must lie strictly under `<kubelet-dir>/pods` once cleaned.
pub fn check_target(target: &str, kubelet_dir: &Path) -> Result<PathBuf, Malformed> {
    if target.is_empty() {
        return Err(Malformed::Missing("target_path"));
    }
    let t = clean(Path::new(target));
    let pods = clean(&kubelet_dir.join("pods"));
    if !Path::new(target).is_absolute() || !t.starts_with(&pods) || t == pods {
        return Err(Malformed::TargetOutside(pods));
    }
    Ok(t)
}

pub fn validate(
    volume_id: &str,
    target: &str,
    has_mount_capability: bool,
    attrs: &HashMap<String, String>,
    kubelet_dir: &Path,
) -> Result<PublishRequest, Malformed> {
    if volume_id.is_empty() {
        return Err(Malformed::Missing("volume_id"));
    }
    crate::store::check_volume_id(volume_id)?;
    let target = check_target(target, kubelet_dir)?;
    if !has_mount_capability {
        return Err(Malformed::NotAMount);
    }
    if attrs.get(ATTR_EPHEMERAL).map(String::as_str) != Some("true") {
        return Err(Malformed::NotEphemeral);
    }
    let get = |k: &str| attrs.get(k).cloned().unwrap_or_default();
    let need = |k: &'static str| {
        attrs
            .get(k)
            .filter(|v| !v.is_empty())
            .cloned()
            .ok_or(Malformed::MissingAttribute(k))
    };
    let digest_text = need(ATTR_MANIFEST_DIGEST)?;
    let digest = ManifestDigest::parse(&digest_text).map_err(|_| Malformed::Digest)?;
    Ok(PublishRequest {
        volume_id: volume_id.to_owned(),
        target,
        artifact: need(ATTR_ARTIFACT)?,
        artifact_uid: need(ATTR_ARTIFACT_UID)?,
        digest,
        pod_namespace: need(ATTR_POD_NAMESPACE)?,
        pod_name: get(ATTR_POD_NAME),
        pod_uid: get(ATTR_POD_UID),
    })
}

/// Which rule refused the mount.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("ModelArtifact {namespace}/{name} does not exist")]
    NotFound { namespace: String, name: String },
    #[error("artifactUID does not match ModelArtifact {0}'s UID")]
    UidMismatch(String),
    #[error(
        "ModelArtifact {0} has no Hugging Face source; this node serves only huggingFace sources"
    )]
    UnsupportedSource(String),
    #[error("ModelArtifact {0} is not resolved")]
    NotResolved(String),
    #[error("manifestDigest does not match ModelArtifact {0}'s resolved digest")]
    DigestMismatch(String),
}

/// The artifact authorizes the mount only if it matches the volume's UID and digest, is
/// resolved, and has a hub source. A digest alone never authorizes.
pub fn authorize(
    req: &PublishRequest,
    artifact: Option<&ModelArtifact>,
    token: Option<crate::hub::HubToken>,
) -> Result<Source, Denied> {
    let Some(a) = artifact else {
        return Err(Denied::NotFound {
            namespace: req.pod_namespace.clone(),
            name: req.artifact.clone(),
        });
    };
    let name = req.artifact.clone();
    if a.metadata.uid.as_deref() != Some(req.artifact_uid.as_str()) {
        return Err(Denied::UidMismatch(name));
    }
    let Some(hub) = &a.spec.source.hugging_face else {
        return Err(Denied::UnsupportedSource(name));
    };
    let status = a.status.as_ref();
    let resolved_cond = status.is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Resolved" && c.status == "True")
    });
    let Some(resolved) = status
        .and_then(|s| s.resolved.as_ref())
        .filter(|_| resolved_cond)
    else {
        return Err(Denied::NotResolved(name));
    };
    if ManifestDigest::parse(&resolved.manifest_digest)
        .ok()
        .as_ref()
        != Some(&req.digest)
    {
        return Err(Denied::DigestMismatch(name));
    }
    Ok(Source {
        repository: hub.repository.clone(),
        commit: resolved.revision.clone(),
        filter: FileFilter::new(&a.spec.allow_patterns, &a.spec.ignore_patterns),
        token,
    })
}

#[cfg(test)]
mod tests {
    use gpustack_api::model_artifact::{
        ArtifactSource, HubSource, ModelArtifactSpec, ModelArtifactStatus, ResolvedArtifact,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use super::*;

    fn digest() -> String {
        format!("sha256:{}", "a".repeat(64))
    }

    fn attrs() -> HashMap<String, String> {
        [
            (ATTR_ARTIFACT, "llm"),
            (ATTR_ARTIFACT_UID, "uid-1"),
            (ATTR_MANIFEST_DIGEST, digest().as_str()),
            (ATTR_EPHEMERAL, "true"),
            (ATTR_POD_NAMESPACE, "team-a"),
            (ATTR_POD_NAME, "p"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    const TARGET: &str = "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/m/mount";

    #[test]
    fn validation_table() {
        let kd = Path::new("/var/lib/kubelet");
        assert!(validate("csi-1", TARGET, true, &attrs(), kd).is_ok());
        let without = |k: &str| {
            let mut a = attrs();
            a.remove(k);
            a
        };
        type Case<'a> = (&'a str, &'a str, bool, HashMap<String, String>, &'a str);
        let cases: Vec<Case> = vec![
            ("", TARGET, true, attrs(), "volume_id"),
            ("a/b", TARGET, true, attrs(), "volume id"),
            (
                "csi-1",
                "/var/lib/kubelet/pods",
                true,
                attrs(),
                "target_path",
            ),
            (
                "csi-1",
                "/var/lib/kubelet/pods/../plugins/x",
                true,
                attrs(),
                "target_path",
            ),
            ("csi-1", "relative/pods/x", true, attrs(), "target_path"),
            ("csi-1", TARGET, false, attrs(), "mount capability"),
            ("csi-1", TARGET, true, without(ATTR_EPHEMERAL), "ephemeral"),
            (
                "csi-1",
                TARGET,
                true,
                without(ATTR_ARTIFACT_UID),
                "artifactUID",
            ),
            (
                "csi-1",
                TARGET,
                true,
                without(ATTR_POD_NAMESPACE),
                "pod.namespace",
            ),
        ];
        for (id, target, cap, a, want) in cases {
            let err = validate(id, target, cap, &a, kd).unwrap_err().to_string();
            assert!(err.contains(want), "{id} {target}: {err}");
        }
        let mut bad = attrs();
        bad.insert(ATTR_MANIFEST_DIGEST.into(), "sha256:xyz".into());
        assert!(
            validate("csi-1", TARGET, true, &bad, kd)
                .unwrap_err()
                .to_string()
                .contains("manifestDigest")
        );
    }

    fn artifact() -> ModelArtifact {
        let mut a = ModelArtifact::new(
            "llm",
            ModelArtifactSpec {
                source: ArtifactSource {
                    hugging_face: Some(HubSource {
                        repository: "org/model".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ignore_patterns: vec!["*.md".into()],
                ..Default::default()
            },
        );
        a.metadata.uid = Some("uid-1".into());
        a.status = Some(ModelArtifactStatus {
            resolved: Some(ResolvedArtifact {
                revision: "c".repeat(40),
                manifest_digest: digest(),
                ..Default::default()
            }),
            conditions: vec![Condition {
                type_: "Resolved".into(),
                status: "True".into(),
                reason: "Resolved".into(),
                message: String::new(),
                last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
                observed_generation: None,
            }],
            ..Default::default()
        });
        a
    }

    #[test]
    fn authorization_table() {
        let req = validate(
            "csi-1",
            TARGET,
            true,
            &attrs(),
            Path::new("/var/lib/kubelet"),
        )
        .unwrap();
        let ok = authorize(&req, Some(&artifact()), None).unwrap();
        assert_eq!((ok.repository.as_str(), ok.commit.len()), ("org/model", 40));
        assert!(!ok.filter.keeps("README.md"));

        let mut other_uid = artifact();
        other_uid.metadata.uid = Some("uid-2".into());
        let mut scope = artifact();
        scope.spec.source = ArtifactSource {
            model_scope: Some(HubSource::default()),
            ..Default::default()
        };
        let mut unresolved = artifact();
        unresolved.status.as_mut().unwrap().conditions[0].status = "False".into();
        let mut other_digest = artifact();
        other_digest
            .status
            .as_mut()
            .unwrap()
            .resolved
            .as_mut()
            .unwrap()
            .manifest_digest = format!("sha256:{}", "b".repeat(64));
        let cases: Vec<(Option<ModelArtifact>, &str)> = vec![
            (None, "does not exist"),
            (Some(other_uid), "artifactUID"),
            (Some(scope), "huggingFace"),
            (Some(unresolved), "not resolved"),
            (Some(other_digest), "manifestDigest"),
        ];
        for (a, want) in cases {
            let err = authorize(&req, a.as_ref(), None).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
    }
}
