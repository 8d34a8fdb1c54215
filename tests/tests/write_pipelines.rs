//! The embedded API server's write pipelines name no kind (issue 41): create, update, patch,
//! apply, delete and garbage collection are fixed pipelines, and what is special about a kind
//! is its strategy's (`apiserver/src/api/kinds/`, one file per special kind). This reads the
//! pipelines' sources (comments and tests left out) for the ways a kind used to be singled out.
use gpustack_tests::sources::{code, workspace_root};

/// The pipelines: the dispatcher and the verbs, the subresources' dispatcher, the one commit
/// path, the collector, and the pure rules every write follows. (What a kind's subresources do
/// is its own, next to its strategy in `kinds/`.)
const PIPELINES: &[&str] = &[
    "apiserver/src/api/handlers/mod.rs",
    "apiserver/src/api/handlers/subresources.rs",
    "apiserver/src/api/handlers/target.rs",
    "apiserver/src/api/handlers/read.rs",
    "apiserver/src/api/handlers/write.rs",
    "apiserver/src/api/handlers/commit.rs",
    "apiserver/src/api/handlers/delete.rs",
    "apiserver/src/api/handlers/collector.rs",
    "apiserver/src/api/handlers/gc.rs",
    "apiserver/src/api/handlers/owners.rs",
    "apiserver/src/api/objects.rs",
    "apiserver/src/api/conversion.rs",
    "apiserver/src/api/validation.rs",
];

/// How a kind was singled out: by comparing a resource's names, or by naming a special kind
/// or its resource.
const SINGLING_OUT: &[&str] = &[
    "def.kind ==",
    "def.kind !=",
    "def.plural ==",
    "def.plural !=",
    "def.group ==",
    "def.group !=",
    "is_crd",
    "is_namespace",
    "is_csr",
    "\"Namespace\"",
    "\"Pod\"",
    "\"Service\"",
    "\"Secret\"",
    "\"Event\"",
    "\"ConfigMap\"",
    "\"ServiceAccount\"",
    "\"CustomResourceDefinition\"",
    "\"CertificateSigningRequest\"",
    "\"Node\"",
    "\"Binding\"",
    "\"Eviction\"",
    "\"namespaces\"",
    "\"pods\"",
    "\"services\"",
    "\"secrets\"",
    "\"events\"",
    "\"configmaps\"",
    "\"serviceaccounts\"",
    "\"customresourcedefinitions\"",
    "\"certificatesigningrequests\"",
    "\"nodes\"",
    "\"poddisruptionbudgets\"",
    "\"binding\"",
    "\"eviction\"",
    "\"ephemeralcontainers\"",
    "\"approval\"",
    "\"log\"",
    "\"proxy\"",
    "\"apiextensions.k8s.io\"",
    "\"events.k8s.io\"",
    "\"certificates.k8s.io\"",
    "\"rbac.authorization.k8s.io\"",
    "\"admissionregistration.k8s.io\"",
];

#[test]
fn the_write_pipelines_name_no_kind() {
    let mut found = Vec::new();
    for file in PIPELINES {
        let text = std::fs::read_to_string(workspace_root().join(file)).unwrap();
        for line in code(&text).lines() {
            for pattern in SINGLING_OUT {
                if line.contains(pattern) {
                    found.push(format!("{file}: {pattern} in `{}`", line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "kinds singled out in the pipelines: {found:#?}"
    );
}

/// The strategies are where the special kinds are: one file each, and one table.
#[test]
fn each_special_kind_has_its_strategy_file() {
    let dir = workspace_root().join("apiserver/src/api/kinds");
    for kind in [
        "namespace",
        "pod",
        "service",
        "secret",
        "service_account",
        "config_map",
        "event",
        "crd",
        "csr",
        "node",
        "rbac",
        "webhook_configuration",
    ] {
        assert!(dir.join(format!("{kind}.rs")).is_file(), "{kind}.rs");
    }
}

/// A kind's subresources sit next to its strategy (`kinds/KIND/SUB.rs`), reached from it; the
/// subresources' dispatcher only asks the kind.
#[test]
fn each_kinds_subresources_sit_next_to_it() {
    let dir = workspace_root().join("apiserver/src/api/kinds");
    for file in [
        "pod/binding.rs",
        "pod/eviction.rs",
        "pod/ephemeral.rs",
        "pod/log.rs",
        "csr/approval.rs",
        "node/kubelet_proxy.rs",
        "scale.rs",
    ] {
        assert!(dir.join(file).is_file(), "{file}");
    }
    let dispatcher = std::fs::read_to_string(
        workspace_root().join("apiserver/src/api/handlers/subresources.rs"),
    )
    .unwrap();
    assert!(
        code(&dispatcher).contains("t.kind.subresource(sub)"),
        "the dispatcher asks the kind"
    );
}
