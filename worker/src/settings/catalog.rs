//! The settings catalog: every `Setting` the worker knows, its default and what a value must
//! look like. Names and defaults follow the reference system so settings carry over.

/// What a setting's value must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `true` or `false`.
    Bool,
    /// Any text without control characters (blank allowed).
    Text,
    /// A container image reference: non-empty, no whitespace.
    Image,
    /// Blank, or an `http(s)://` URL.
    OptionalUrl,
    /// An `http(s)://` URL.
    Url,
    /// One of the listed words.
    OneOf(&'static [&'static str]),
    /// A whole number in the inclusive range.
    Int(i64, i64),
    /// A Go duration of at least this many seconds (`24h`, `90m`).
    DurationAtLeast(u64),
    /// Blank, or comma-separated DNS-1123 subdomains (Secret names).
    NameList,
    /// Blank, or a DNS-1123 subdomain.
    OptionalName,
    /// Blank, or a unit resources table (YAML, several lines allowed).
    UnitPresets,
}

/// One setting of the catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Definition {
    /// The setting's name.
    pub name: &'static str,
    /// Its default value.
    pub default: &'static str,
    /// What it does, for people.
    pub description: &'static str,
    /// What a value must be.
    pub rule: Rule,
    /// Sensitive values read back as `(sensitive)`.
    pub sensitive: bool,
    /// Whether users may change it through the API.
    pub editable: bool,
}

const fn def(
    name: &'static str,
    default: &'static str,
    rule: Rule,
    description: &'static str,
) -> Definition {
    Definition {
        name,
        default,
        description,
        rule,
        sensitive: false,
        editable: true,
    }
}

const fn sensitive(d: Definition) -> Definition {
    Definition {
        sensitive: true,
        ..d
    }
}

const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];
const DELIVERY_MODES: &[&str] = &["Engine", "Node"];

/// The whole catalog, sorted by name.
pub const CATALOG: &[Definition] = &[
    def(
        "container-namespace",
        "",
        Rule::Text,
        "Namespace (organisation) prefixed to the images the operator runs.",
    ),
    def(
        "container-registry",
        "",
        Rule::Text,
        "Registry host prefixed to the images the operator runs; blank keeps each image's own.",
    ),
    def(
        "image-pull-policy",
        "IfNotPresent",
        Rule::OneOf(PULL_POLICIES),
        "Pull policy of the images the operator runs.",
    ),
    def(
        "image-pull-secrets",
        "",
        Rule::NameList,
        "Secrets (comma separated) used to pull the images the operator runs.",
    ),
    def(
        "instance-access-static-address",
        "",
        Rule::Text,
        "Fixed address instances are reached at; blank derives it from the node.",
    ),
    def(
        "instance-access-wildcard-dns",
        "",
        Rule::OptionalName,
        "Wildcard DNS domain under which instances get names; blank disables it.",
    ),
    def(
        "instance-general-resources-overcommit",
        "true",
        Rule::Bool,
        "Overcommit CPU, memory and storage of instances against their unit resources.",
    ),
    def(
        "instance-host-path-volume-allowed",
        "false",
        Rule::Bool,
        "Allow instances to mount host paths.",
    ),
    def(
        "instance-persistent-volume-placement",
        "true",
        Rule::Bool,
        "Place instances on nodes that can reach their persistent volumes.",
    ),
    def(
        "instance-privileged-allowed",
        "false",
        Rule::Bool,
        "Allow privileged instances.",
    ),
    def(
        "instance-ssh-server-image",
        "gpustack/ssh-server:v1.3.0",
        Rule::Image,
        "Image of the SSH sidecar of instances.",
    ),
    def(
        "instance-type-aware-cpu-manufacturer",
        "false",
        Rule::Bool,
        "Group instance types by CPU manufacturer as well as by accelerator.",
    ),
    def(
        "instance-type-derived-from-node",
        "true",
        Rule::Bool,
        "Create an instance type for every pool of nodes with the same hardware.",
    ),
    def(
        "instance-type-drain-when-no-flavors",
        "true",
        Rule::Bool,
        "Drain an instance type's queue when no node backs it any more.",
    ),
    def(
        "instance-type-mixed-on-node",
        "true",
        Rule::Bool,
        "Let CPU-only and accelerated instances share a node.",
    ),
    def(
        "instance-type-unit-resources-preset",
        "",
        Rule::UnitPresets,
        "CPU and memory per card of derived instance types, as YAML manufacturer -> product -> \
         {cpu, ram}; consulted before the shipped table. Blank uses the shipped table alone.",
    ),
    def(
        "kv-cache-backend-image",
        "gpustack/mirrored-mooncake:0.3.13.post1-cpu",
        Rule::Image,
        "Image of the KV-cache backend.",
    ),
    def(
        "model-artifact-ca-bundle",
        "",
        Rule::OptionalName,
        "ConfigMap (key ca.crt) of extra CAs trusted when downloading models.",
    ),
    def(
        "model-artifact-delivery-mode",
        "Engine",
        Rule::OneOf(DELIVERY_MODES),
        "Who fetches model files: the inference engine, or the node's model manager.",
    ),
    sensitive(def(
        "model-artifact-https-proxy",
        "",
        Rule::OptionalUrl,
        "HTTPS proxy for model downloads; it may carry credentials, so it is never shown.",
    )),
    def(
        "model-artifact-huggingface-endpoint",
        "https://huggingface.co",
        Rule::Url,
        "Hugging Face endpoint models are downloaded from.",
    ),
    def(
        "model-artifact-modelscope-endpoint",
        "https://www.modelscope.cn",
        Rule::Url,
        "ModelScope endpoint models are downloaded from.",
    ),
    def(
        "model-artifact-no-proxy",
        "",
        Rule::Text,
        "Hosts (comma separated) reached without the proxy.",
    ),
    def(
        "model-artifact-revalidate-interval",
        "24h",
        Rule::DurationAtLeast(60),
        "How often a resolved model revision is checked again (at least 1m).",
    ),
    def(
        "model-deployment-kv-cache-dtype-owned",
        "true",
        Rule::Bool,
        "The operator chooses the KV-cache data type of model deployments.",
    ),
    def(
        "model-deployment-router-image",
        "gpustack/llm-router:v0.1.0",
        Rule::Image,
        "Image of the model deployment router.",
    ),
    def(
        "model-deployment-router-proxy-image",
        "gpustack/mirrored-envoy:distroless-v1.33.2",
        Rule::Image,
        "Image of the model deployment router's proxy.",
    ),
    def(
        "model-deployment-routing-sidecar-image",
        "gpustack/mirrored-llm-d-router-disagg-sidecar:v0.10.0",
        Rule::Image,
        "Image of the disaggregated routing sidecar.",
    ),
    def(
        "model-deployment-tcp-tw-reuse",
        "false",
        Rule::Bool,
        "Enable net.ipv4.tcp_tw_reuse in model deployment Pods.",
    ),
    def(
        "model-prefetch-warmup-image",
        "gpustack/mirrored-python:3.12-alpine",
        Rule::Image,
        "Image that warms the page cache before a model starts.",
    ),
    def(
        "model-store-download-bandwidth",
        "0",
        Rule::Int(0, i64::MAX),
        "Download bandwidth per node in bytes per second; 0 is unlimited.",
    ),
    def(
        "model-store-download-concurrency",
        "8",
        Rule::Int(1, 64),
        "Parallel file downloads per node (1 to 64).",
    ),
    def(
        "model-store-high-watermark",
        "80",
        Rule::Int(1, 95),
        "Cache disk use (percent, at most 95) above which unused models are evicted.",
    ),
    def(
        "model-store-low-watermark",
        "70",
        Rule::Int(1, 94),
        "Cache disk use (percent, below the high watermark) eviction stops at.",
    ),
    def(
        "model-store-peer-sync",
        "true",
        Rule::Bool,
        "Copy model files from other nodes before downloading them.",
    ),
    def(
        "node-management-manual",
        "false",
        Rule::Bool,
        "Only nodes labelled gpustack.ai/managed=true are managed.",
    ),
    def(
        "workload-fit-affinity",
        "true",
        Rule::Bool,
        "Pin sliced and shared workloads to nodes whose cards can host them.",
    ),
];

/// The definition of `name`.
pub fn find(name: &str) -> Option<&'static Definition> {
    CATALOG.iter().find(|d| d.name == name)
}

/// `GPUSTACK_<UPPER_SNAKE>`: the environment variable that seeds a setting.
pub fn env_name(name: &str) -> String {
    format!("GPUSTACK_{}", name.to_ascii_uppercase().replace('-', "_"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_is_sorted_unique_and_defaults_are_valid() {
        for w in CATALOG.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
        for d in CATALOG {
            assert_eq!(
                crate::settings::validate::value(d, d.default, |_| None),
                Ok(()),
                "default of {}",
                d.name
            );
        }
        assert_eq!(
            env_name("instance-type-mixed-on-node"),
            "GPUSTACK_INSTANCE_TYPE_MIXED_ON_NODE"
        );
    }
}
