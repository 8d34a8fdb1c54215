//! `worker.gpustack.ai/v1alpha1` `ModelArtifact`: a tenant's reference to a model's files.
//!
//! The tenant writes `spec` once (it is immutable); the worker resolves it to a commit and a
//! manifest digest in `status.resolved`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
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
    pub source: ArtifactSource,
    /// fnmatch patterns (`*` crosses `/`, a trailing `/` means a directory); at most 32.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub allow_patterns: Vec<String>,
    /// As `allowPatterns`; an ignore wins over an allow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub ignore_patterns: Vec<String>,
    /// When set, resolution fails unless the manifest digest equals it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_digest: Option<String>,
}

/// Exactly one source is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugging_face: Option<HubSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_scope: Option<HubSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<ClaimSource>,
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
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
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

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct SecretReference {
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSource {
    pub claim_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSource {
    pub reference: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelArtifactStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<ResolvedArtifact>,
    /// `Resolved` and `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// What the source resolved to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedArtifact {
    /// Commit id, 40 hex digits.
    pub revision: String,
    /// `sha256:` and the SHA-256 of the manifest text.
    pub manifest_digest: String,
    pub file_count: u64,
    pub size_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_validated_time: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest_source: String,
}
