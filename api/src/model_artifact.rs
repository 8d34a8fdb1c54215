//! `worker.gpustack.ai/v1alpha1` `ModelArtifact`: a tenant's reference to a model's files.
//!
//! The tenant writes `spec` once (it is immutable); the worker resolves it to a commit and a
//! manifest digest in `status.resolved`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
#[cfg(feature = "schema")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A model's files on a hub, a claim or an image, resolved to one immutable manifest.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[cfg_attr(not(feature = "schema"), kube(schema = "disabled"))]
#[kube(
    group = "worker.gpustack.ai",
    version = "v1alpha1",
    kind = "ModelArtifact",
    plural = "modelartifacts",
    shortname = "mart",
    category = "gpustack",
    namespaced,
    status = "ModelArtifactStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Revision","type":"string","jsonPath":".status.resolved.revision"}"#,
    printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".status.resolved.sizeBytes"}"#,
    printcolumn = r#"{"name":"Resolved","type":"string","jsonPath":".status.conditions[?(@.type=='Resolved')].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ModelArtifactSpec {
    /// Where the files come from.
    pub source: ArtifactSource,
    /// fnmatch patterns (`*` crosses `/`, a trailing `/` means a directory); at most 32.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 32)))]
    pub allow_patterns: Vec<String>,
    /// As `allowPatterns`; an ignore wins over an allow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 32)))]
    pub ignore_patterns: Vec<String>,
    /// When set, resolution fails unless the manifest digest equals it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_digest: Option<String>,
}

/// Exactly one source is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ArtifactSource {
    /// A Hugging Face repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugging_face: Option<HubSource>,
    /// A ModelScope repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_scope: Option<HubSource>,
    /// A directory of a PersistentVolumeClaim in the artifact's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<ClaimSource>,
    /// An OCI image holding the files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSource>,
}

impl ArtifactSource {
    /// How many sources are set; a valid spec has exactly one.
    pub fn count(&self) -> usize {
        usize::from(self.hugging_face.is_some())
            + usize::from(self.model_scope.is_some())
            + usize::from(self.persistent_volume_claim.is_some())
            + usize::from(self.image.is_some())
    }
}

/// A repository on a model hub.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HubSource {
    /// `owner/name`.
    pub repository: String,
    /// Branch, tag or commit; the hub's default branch when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub revision: String,
    /// Secret in the artifact's namespace whose key `token` holds the hub token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
}

/// A Secret of the artifact's namespace, by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub struct SecretReference {
    /// The Secret's name.
    pub name: String,
}

/// Files on a PersistentVolumeClaim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClaimSource {
    /// The claim's name, in the artifact's namespace.
    pub claim_name: String,
    /// The directory within the volume; its root when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
}

/// Files in an OCI image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ImageSource {
    /// The image reference, a digest preferred over a tag.
    pub reference: String,
}

/// What the worker resolved the source to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ModelArtifactStatus {
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The manifest the source resolved to; absent until the first resolution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<ResolvedArtifact>,
    /// `Resolved` and `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// What the source resolved to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResolvedArtifact {
    /// Commit id, 40 hex digits.
    pub revision: String,
    /// `sha256:` and the SHA-256 of the manifest text.
    pub manifest_digest: String,
    /// Files in the manifest, after the patterns.
    pub file_count: u64,
    /// Their total size, in bytes.
    pub size_bytes: u64,
    /// When the source was resolved to this revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_time: Option<Time>,
    /// When the revision was last checked against the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_validated_time: Option<Time>,
    /// Where the manifest digest came from (the hub's listing or the files read).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest_source: String,
}
