//! `worker.gpustack.ai/v1alpha1` `NodeModelStore`: one node's model cache.
//!
//! Named after its Node, which owns it. The worker writes `spec` (merged from Settings, the
//! ModelStore policy and prefetch pins); only the model-manager on that node writes `status`.
//! The object names no tenant.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
#[cfg(feature = "schema")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A node's model cache: its limits, download policy and hub settings.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[cfg_attr(not(feature = "schema"), kube(schema = "disabled"))]
#[kube(
    group = "worker.gpustack.ai",
    version = "v1alpha1",
    kind = "NodeModelStore",
    plural = "nodemodelstores",
    shortname = "nms",
    category = "gpustack",
    status = "NodeModelStoreStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"Used","type":"integer","jsonPath":".status.capacity.usedPercent"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NodeModelStoreSpec {
    /// When garbage collection starts and stops.
    #[serde(default)]
    pub watermarks: Watermarks,
    /// How fast the node downloads.
    #[serde(default)]
    pub download: DownloadPolicy,
    /// How the node reaches model hubs.
    #[serde(default)]
    pub hub: HubSettings,
    /// Kubelet eviction thresholds that bound how full the cache may get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletThresholds>,
    /// The ModelStore whose policy this node follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// Manifest digests that garbage collection must keep: the union of prefetch pins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 256)))]
    pub pinned: Vec<String>,
    /// Whether the node may fetch files from peers that already hold them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_sync_enabled: Option<bool>,
}

/// Disk-use thresholds of the cache, percent of the filesystem.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Watermarks {
    /// Above this, GC starts removing unreferenced models.
    #[cfg_attr(feature = "schema", schemars(range(min = 2, max = 95)))]
    pub high_percent: u32,
    /// GC stops once usage is back under this.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 94)))]
    pub low_percent: u32,
}

impl Default for Watermarks {
    fn default() -> Self {
        Self {
            high_percent: 80,
            low_percent: 70,
        }
    }
}

/// Node-wide download limits.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DownloadPolicy {
    /// Parallel file downloads, node-wide.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 64)))]
    pub concurrency: u32,
    /// Node-wide bandwidth cap; 0 means unlimited.
    #[serde(default)]
    pub bytes_per_second: u64,
}

impl Default for DownloadPolicy {
    fn default() -> Self {
        Self {
            concurrency: 8,
            bytes_per_second: 0,
        }
    }
}

/// Where and how the node reaches model hubs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HubSettings {
    /// The Hugging Face endpoint; `https://huggingface.co` when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hugging_face_endpoint: String,
    /// The ModelScope endpoint; `https://www.modelscope.cn` when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model_scope_endpoint: String,
    /// The proxy for hub requests; none when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub https_proxy: String,
    /// Hosts reached without the proxy, comma separated.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub no_proxy: String,
    /// ConfigMap in the operator namespace whose key `ca.crt` holds extra trusted CAs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ca_bundle_config_map: String,
}

/// The kubelet's eviction and image GC thresholds, as read from its configz.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct KubeletThresholds {
    /// `evictionHard` of `nodefs.available` (`10%` or a quantity).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub nodefs_available: String,
    /// `evictionHard` of `imagefs.available`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub imagefs_available: String,
    /// `imageGCHighThresholdPercent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_gc_high_threshold_percent: Option<u32>,
}

/// What a spec may not say; each message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidNodeModelStoreSpec {
    /// The high watermark is outside 2..=95.
    #[error("spec.watermarks.highPercent {0} is outside 2..=95")]
    HighWatermark(u32),
    /// The low watermark is outside 1..=94.
    #[error("spec.watermarks.lowPercent {0} is outside 1..=94")]
    LowWatermark(u32),
    /// The low watermark is not below the high one.
    #[error("spec.watermarks.lowPercent {low} must be below highPercent {high}")]
    WatermarkOrder {
        /// The low watermark given.
        low: u32,
        /// The high watermark given.
        high: u32,
    },
    /// The download concurrency is outside 1..=64.
    #[error("spec.download.concurrency {0} is outside 1..=64")]
    Concurrency(u32),
    /// More than 256 pinned digests.
    #[error("spec.pinned has {0} entries; at most 256 are allowed")]
    TooManyPins(usize),
}

impl NodeModelStoreSpec {
    /// The worker's validation, which the plugin repeats before acting on a spec.
    pub fn validate(&self) -> Result<(), InvalidNodeModelStoreSpec> {
        use InvalidNodeModelStoreSpec as E;
        let Watermarks {
            high_percent: high,
            low_percent: low,
        } = self.watermarks;
        if !(2..=95).contains(&high) {
            return Err(E::HighWatermark(high));
        }
        if !(1..=94).contains(&low) {
            return Err(E::LowWatermark(low));
        }
        if low >= high {
            return Err(E::WatermarkOrder { low, high });
        }
        if !(1..=64).contains(&self.download.concurrency) {
            return Err(E::Concurrency(self.download.concurrency));
        }
        if self.pinned.len() > 256 {
            return Err(E::TooManyPins(self.pinned.len()));
        }
        Ok(())
    }
}

/// What the node's model manager reports of its cache.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeModelStoreStatus {
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The cache filesystem's size and use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<StoreCapacity>,
    /// Models on this node, keyed by digest; at most 256.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["digest"])))]
    pub models: Vec<StoredModel>,
    /// `Ready` and `CapacityLow`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The cache filesystem's size and use.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StoreCapacity {
    /// Size of the filesystem, in bytes.
    pub total_bytes: u64,
    /// Bytes the cache's models take.
    pub stored_bytes: u64,
    /// Rounded to a multiple of 5 so that status does not churn.
    pub used_percent: u32,
}

/// One model in the node's cache.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StoredModel {
    /// The manifest digest (`sha256:...`) the model is stored under.
    pub digest: String,
    /// Whether it is downloading, ready or failed.
    pub state: ModelState,
    /// Its total size, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Bytes downloaded so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downloaded_bytes: Option<u64>,
    /// Where its files came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ModelSource>,
    /// Whether a mounted volume uses it now (GC keeps it).
    #[serde(default)]
    pub referenced: bool,
    /// Hour granularity, so that status does not churn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_time: Option<Time>,
    /// Why the last download failed, as one word.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Why the last download failed, for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When a failed download is tried again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_time: Option<Time>,
}

/// Where a model's download stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub enum ModelState {
    /// Files are being fetched.
    Downloading,
    /// Every file is verified and mountable.
    Ready,
    /// The download failed; see `reason` and `retryTime`.
    Failed,
}

/// Where a model's files were fetched from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub enum ModelSource {
    /// The model hub.
    Hub,
    /// Another node's cache.
    Peer,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(NodeModelStoreSpec::default().validate(), Ok(()));
    }

    #[test]
    fn each_bound_names_its_field() {
        let with = |high, low, conc| NodeModelStoreSpec {
            watermarks: Watermarks {
                high_percent: high,
                low_percent: low,
            },
            download: DownloadPolicy {
                concurrency: conc,
                bytes_per_second: 0,
            },
            ..Default::default()
        };
        let msg = |s: NodeModelStoreSpec| s.validate().unwrap_err().to_string();
        assert!(msg(with(96, 70, 8)).contains("highPercent 96"));
        assert!(msg(with(80, 0, 8)).contains("lowPercent 0"));
        assert!(msg(with(50, 60, 8)).contains("must be below"));
        assert!(msg(with(80, 70, 65)).contains("concurrency 65"));
    }
}
