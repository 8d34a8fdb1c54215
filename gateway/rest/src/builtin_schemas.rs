//! The OpenAPI schemas of Kubernetes' built-in kinds, generated from k8s-openapi's
//! `JsonSchema` implementations (Kubernetes 1.33) in the shape kube-apiserver publishes them:
//! definitions named by Go package (`io.k8s.api.apps.v1.Deployment`), `$ref`s between them
//! (`#/definitions/NAME`, with the field's own description beside the `$ref` as in swagger 2.0),
//! and `x-kubernetes-group-version-kind` on each kind's definition.
//!
//! The built-in kinds share one document, `{"definitions": {...}}` (with the digest of its
//! content, [`digest_of`]), as their
//! [`ResourceDef::schema`]: a kind's own schema is the definition tagged with its group, version
//! and kind ([`kind_definition`]), as kubectl finds it. A CRD's schema has no `definitions` and
//! no `$ref`s: it is its own root, and every function here takes both. [`crate::openapi`]
//! publishes the definitions a kind reaches; [`crate::schema::prune_with_definitions`] follows the
//! `$ref`s when it drops unknown fields. Read once per set of resources ([`attach`]), never per request.
//!
//! The document is committed (`builtin-definitions.json` beside this file) and compiled in:
//! generating it takes k8s-openapi's `schemars` feature, a third of that crate's build, which
//! only the `schema` feature (on in the tests) turns on. A test checks the committed document
//! against the generated one; `GPUSTACK_UPDATE_SCHEMAS=1 cargo test -p gpustack-kube-rest --lib
//! builtin_schemas` rewrites it.

use k8s_openapi::{
    Resource, api, apiextensions_apiserver::pkg::apis::apiextensions,
    kube_aggregator::pkg::apis::apiregistration,
};
use serde::de::DeserializeOwned;
use serde_json::Value;
#[cfg(feature = "schema")]
use serde_json::json;

pub use crate::definitions::{REF_PREFIX, definitions_of, reachable, resolve};
use crate::resource::{ResourceDef, Schema};

/// The document of every built-in kind's definitions, as `generate` (with the `schema`
/// feature) makes it.
const DOCUMENT: &str = include_str!("builtin-definitions.json");

/// Definitions whose values are free-form JSON: Kubernetes keeps what is inside them as given.
#[cfg(any(feature = "schema", test))]
const FREE_FORM: &[&str] = &[
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
];

/// What this module needs of a built-in kind's type: its identity and its decoder, and its
/// schema where the document is generated.
#[cfg(feature = "schema")]
trait Builtin: schemars::JsonSchema + Resource + DeserializeOwned {}
#[cfg(feature = "schema")]
impl<T: schemars::JsonSchema + Resource + DeserializeOwned> Builtin for T {}
#[cfg(not(feature = "schema"))]
trait Builtin: Resource + DeserializeOwned {}
#[cfg(not(feature = "schema"))]
impl<T: Resource + DeserializeOwned> Builtin for T {}

/// What is done with each built-in kind: its schema collected, its identity listed, or an
/// object decoded as it.
trait Kinds {
    fn add<T: Builtin>(&mut self);
}

/// The kinds with a schema: those the embedded cluster serves or is about to, keyed by their
/// group, version and kind (a [`ResourceDef`] picks its own up by those).
fn add_kinds(c: &mut impl Kinds) {
    use api::{
        admissionregistration::v1 as admission, apps::v1 as apps, authentication::v1 as authn,
        authorization::v1 as authz, batch::v1 as batch, certificates::v1 as certificates,
        coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
        events::v1 as events, networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
        scheduling::v1 as scheduling, storage::v1 as storage,
    };
    c.add::<core::Namespace>();
    c.add::<core::Node>();
    c.add::<core::Pod>();
    c.add::<core::Secret>();
    c.add::<core::ConfigMap>();
    c.add::<core::ServiceAccount>();
    c.add::<core::Service>();
    c.add::<core::Endpoints>();
    c.add::<core::PersistentVolumeClaim>();
    c.add::<core::PersistentVolume>();
    c.add::<core::ReplicationController>();
    c.add::<discovery::EndpointSlice>();
    c.add::<core::Event>();
    c.add::<core::ResourceQuota>();
    c.add::<events::Event>();
    c.add::<coordination::Lease>();
    c.add::<apiextensions::v1::CustomResourceDefinition>();
    c.add::<apiregistration::v1::APIService>();
    c.add::<admission::ValidatingWebhookConfiguration>();
    c.add::<admission::MutatingWebhookConfiguration>();
    c.add::<storage::CSIDriver>();
    c.add::<storage::CSINode>();
    c.add::<authz::SelfSubjectAccessReview>();
    c.add::<authz::SelfSubjectRulesReview>();
    c.add::<authz::SubjectAccessReview>();
    c.add::<authz::LocalSubjectAccessReview>();
    c.add::<authn::SelfSubjectReview>();
    c.add::<authn::TokenReview>();
    c.add::<rbac::ClusterRole>();
    c.add::<rbac::ClusterRoleBinding>();
    c.add::<rbac::Role>();
    c.add::<rbac::RoleBinding>();
    c.add::<apps::Deployment>();
    c.add::<apps::DaemonSet>();
    c.add::<apps::StatefulSet>();
    c.add::<apps::ReplicaSet>();
    c.add::<batch::Job>();
    c.add::<batch::CronJob>();
    c.add::<scheduling::PriorityClass>();
    c.add::<policy::PodDisruptionBudget>();
    c.add::<networking::Ingress>();
    c.add::<networking::IngressClass>();
    c.add::<networking::NetworkPolicy>();
    c.add::<certificates::CertificateSigningRequest>();
}

/// A group, version and kind.
type Gvk = (&'static str, &'static str, &'static str);

/// The kinds the document defines.
struct Listed(Vec<Gvk>);

impl Kinds for Listed {
    fn add<T: Builtin>(&mut self) {
        self.0.push((T::GROUP, T::VERSION, T::KIND));
    }
}

/// Decodes one object as the typed form of its kind, when that kind is built in.
struct Decoder<'a> {
    gvk: (&'a str, &'a str, &'a str),
    object: &'a Value,
    outcome: Option<Result<(), serde_json::Error>>,
}

impl Kinds for Decoder<'_> {
    fn add<T: Builtin>(&mut self) {
        if self.outcome.is_none() && self.gvk == (T::GROUP, T::VERSION, T::KIND) {
            self.outcome = Some(T::deserialize(self.object).map(|_| ()));
        }
    }
}

/// Whether `object` decodes as the built-in kind `group`/`version`/`kind` (`None`: not a
/// built-in kind). kube-apiserver decodes every write into its Go type first, so a field of
/// the wrong type (`containers: "nope"`, a number for a label, Secret data that is not base64)
/// is refused before anything is stored; this is that decoder, with k8s-openapi's types.
pub fn decode_typed(
    group: &str,
    version: &str,
    kind: &str,
    object: &Value,
) -> Option<Result<(), serde_json::Error>> {
    let mut d = Decoder {
        gvk: (group, version, kind),
        object,
        outcome: None,
    };
    add_kinds(&mut d);
    d.outcome
}

/// The kinds the built-in document defines, known without reading it.
fn kinds() -> Vec<Gvk> {
    let mut listed = Listed(Vec::new());
    add_kinds(&mut listed);
    listed.0
}

/// The document of every built-in kind's definitions, as committed (566 KB of JSON to parse:
/// do it once).
pub fn document() -> Value {
    // Compiled in and checked against the types by the tests: a document that does not parse
    // is a broken build, not a condition to handle.
    serde_json::from_str(DOCUMENT).expect("builtin-definitions.json is JSON")
}

/// The document of every built-in kind's definitions, generated from k8s-openapi's types
/// (some tens of milliseconds), with the digest of its content.
#[cfg(feature = "schema")]
pub fn generate() -> Value {
    use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
    use sha2::{Digest, Sha256};

    /// Each kind's schema, and its definition's name with its group, version and kind.
    struct Collector {
        generator: SchemaGenerator,
        kinds: Vec<(String, Gvk)>,
    }

    impl Kinds for Collector {
        fn add<T: Builtin>(&mut self) {
            self.generator.subschema_for::<T>();
            self.kinds.push((
                <T as JsonSchema>::schema_name().into_owned(),
                (T::GROUP, T::VERSION, T::KIND),
            ));
        }
    }

    let settings = SchemaSettings::draft07().with(|s| {
        s.definitions_path = "/definitions".into();
        s.meta_schema = None;
        s.transforms.clear();
    });
    let mut c = Collector {
        generator: settings.into_generator(),
        kinds: Vec::new(),
    };
    add_kinds(&mut c);
    let mut definitions = c.generator.take_definitions(false);
    for name in FREE_FORM {
        if let Some(m) = definitions.get_mut(*name).and_then(Value::as_object_mut) {
            m.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
        }
    }
    for (name, (group, version, kind)) in c.kinds {
        let Some(def) = definitions.get_mut(&name).and_then(Value::as_object_mut) else {
            continue;
        };
        let gvk = json!({"group": group, "version": version, "kind": kind});
        def.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
        // k8s-openapi requires metadata (a Rust field that is no Option); Kubernetes does not.
        if let Some(Value::Array(required)) = def.get_mut("required") {
            required.retain(|r| r != "metadata");
            if required.is_empty() {
                def.remove("required");
            }
        }
    }
    let content = serde_json::to_vec(&definitions).unwrap_or_default();
    let digest = Sha256::digest(&content);
    let digest: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    json!({"definitions": definitions, DIGEST: digest})
}

/// Where a document of definitions keeps the digest of its content.
const DIGEST: &str = "x-content-sha256";

/// The digest of a document of definitions' content (computed when it was generated), which
/// stands for the content in the hashes of the documents built from it.
pub fn digest_of(doc: &Value) -> Option<&str> {
    doc.get(DIGEST).and_then(Value::as_str)
}

fn tagged(def: &Value, group: &str, version: &str, kind: &str) -> bool {
    def.get("x-kubernetes-group-version-kind")
        .and_then(Value::as_array)
        .is_some_and(|gvks| {
            gvks.iter()
                .any(|g| g["group"] == group && g["version"] == version && g["kind"] == kind)
        })
}

/// The name Kubernetes gives a built-in kind's definition: the Go package of its group (the
/// group's first label; `core` for the legacy group), but for the two API servers that live
/// elsewhere. Only a first guess: [`kind_definition`] checks the tag.
fn likely_name(group: &str, version: &str, kind: &str) -> String {
    match group {
        "apiextensions.k8s.io" => {
            format!("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{version}.{kind}")
        }
        "apiregistration.k8s.io" => {
            format!("io.k8s.kube-aggregator.pkg.apis.apiregistration.{version}.{kind}")
        }
        "" => format!("io.k8s.api.core.{version}.{kind}"),
        g => {
            let package = g.split('.').next().unwrap_or(g);
            format!("io.k8s.api.{package}.{version}.{kind}")
        }
    }
}

/// The name and definition of a kind in `schema`'s definitions, when it has one there.
pub fn kind_definition<'a>(
    schema: &'a Value,
    group: &str,
    version: &str,
    kind: &str,
) -> Option<(&'a str, &'a Value)> {
    let defs = definitions_of(schema)?;
    let guess = likely_name(group, version, kind);
    if let Some((name, def)) = defs.get_key_value(&guess)
        && tagged(def, group, version, kind)
    {
        return Some((name.as_str(), def));
    }
    defs.iter()
        .find(|(_, d)| tagged(d, group, version, kind))
        .map(|(n, d)| (n.as_str(), d))
}

/// The schema of objects of a kind: its definition in a shared document, or a CRD's schema
/// itself.
pub fn root_of<'a>(schema: &'a Value, group: &str, version: &str, kind: &str) -> &'a Value {
    kind_definition(schema, group, version, kind).map_or(schema, |(_, d)| d)
}

/// Gives each built-in kind of `defs` (not from a CRD, without a schema) the shared document
/// of definitions when its storage version has one there. The document is built the first time
/// any kind's schema is read, not here.
pub fn attach(defs: &mut [ResourceDef]) {
    let doc = Schema::deferred(document);
    let known = kinds();
    for d in defs.iter_mut().filter(|d| !d.custom && d.schema.is_none()) {
        let Some(version) = d.versions.first() else {
            continue;
        };
        if known.contains(&(d.group.as_str(), version.as_str(), d.kind.as_str())) {
            d.schema = Some(doc.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "schema")]
    #[test]
    fn the_committed_document_is_the_generated_one() {
        let generated = generate();
        if std::env::var_os("GPUSTACK_UPDATE_SCHEMAS").is_some() {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("src")
                .join("builtin-definitions.json");
            let mut text = serde_json::to_string_pretty(&generated).unwrap();
            text.push('\n');
            std::fs::write(path, text).unwrap();
            return;
        }
        assert!(
            document() == generated,
            "src/builtin-definitions.json is not what k8s-openapi's types generate; regenerate it \
             with `GPUSTACK_UPDATE_SCHEMAS=1 cargo test -p gpustack-kube-rest --lib builtin_schemas`"
        );
    }

    #[test]
    fn a_deployment_refers_to_its_spec_where_replicas_is_an_integer() {
        let doc = document();
        let (name, deployment) = kind_definition(&doc, "apps", "v1", "Deployment").unwrap();
        assert_eq!(name, "io.k8s.api.apps.v1.Deployment");
        assert!(deployment.get("required").is_none(), "metadata is optional");
        let spec_ref = &deployment["properties"]["spec"];
        assert_eq!(
            spec_ref["$ref"],
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert_eq!(
            spec_ref["description"],
            "Specification of the desired behavior of the Deployment."
        );
        let spec = resolve(&doc, spec_ref);
        assert_eq!(spec["properties"]["replicas"]["type"], "integer");
        let reached = reachable(&doc, &[name]);
        assert!(reached.contains("io.k8s.api.core.v1.Container"));
        assert!(!reached.contains("io.k8s.api.rbac.v1.Role"));
    }

    #[test]
    fn kinds_are_found_by_their_tag_whatever_their_package() {
        let doc = document();
        for (group, kind, name) in [
            ("", "ConfigMap", "io.k8s.api.core.v1.ConfigMap"),
            (
                "rbac.authorization.k8s.io",
                "Role",
                "io.k8s.api.rbac.v1.Role",
            ),
            ("events.k8s.io", "Event", "io.k8s.api.events.v1.Event"),
            (
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
            ),
            (
                "apiregistration.k8s.io",
                "APIService",
                "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService",
            ),
        ] {
            assert_eq!(kind_definition(&doc, group, "v1", kind).unwrap().0, name);
        }
        assert!(kind_definition(&doc, "apps", "v1", "Widget").is_none());
        // A CRD's schema is its own root.
        let crd = json!({"type": "object"});
        assert_eq!(root_of(&crd, "e.com", "v1", "W"), &crd);
    }

    #[test]
    fn free_form_values_keep_unknown_fields_and_quantities_are_int_or_string() {
        let doc = document();
        let defs = definitions_of(&doc).unwrap();
        assert_eq!(
            defs["io.k8s.apimachinery.pkg.api.resource.Quantity"]["x-kubernetes-int-or-string"],
            true
        );
        for name in FREE_FORM.iter().filter(|n| defs.contains_key(**n)) {
            assert_eq!(
                defs[*name]["x-kubernetes-preserve-unknown-fields"], true,
                "{name}"
            );
        }
        assert!(defs.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"));
    }

    #[test]
    fn every_builtin_and_announced_kind_has_a_schema_built_on_first_read() {
        let mut defs = crate::resource::builtins();
        attach(&mut defs);
        let doc = document();
        for d in &defs {
            let schema = d.schema.as_ref();
            assert!(
                schema.is_some_and(|s| !s.is_built()),
                "{}/{}",
                d.group,
                d.kind
            );
            let version = &d.versions[0];
            assert!(kind_definition(&doc, &d.group, version, &d.kind).is_some());
        }
        let shared = defs[0].schema.as_ref().unwrap();
        assert!(kind_definition(shared, "apps", "v1", "Deployment").is_some());
        assert!(defs.iter().all(|d| d.schema.as_ref().unwrap().is_built()));
        for (g, k) in [
            ("batch", "CronJob"),
            ("", "ResourceQuota"),
            ("networking.k8s.io", "Ingress"),
            ("networking.k8s.io", "IngressClass"),
            ("networking.k8s.io", "NetworkPolicy"),
            ("", "Endpoints"),
            ("", "PersistentVolumeClaim"),
            ("", "PersistentVolume"),
            ("", "ReplicationController"),
            ("discovery.k8s.io", "EndpointSlice"),
            ("certificates.k8s.io", "CertificateSigningRequest"),
        ] {
            assert!(kind_definition(&doc, g, "v1", k).is_some(), "{g}/{k}");
        }
    }
}

#[cfg(test)]
mod decode_tests {
    use super::*;

    #[test]
    fn built_in_kinds_decode_as_their_types() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"limits": {"cpu": 1, "nvidia.com/gpu": "1"}}}]}});
        assert!(matches!(decode_typed("", "v1", "Pod", &pod), Some(Ok(()))));
        let bad = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": "nope"}});
        assert!(matches!(decode_typed("", "v1", "Pod", &bad), Some(Err(_))));
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"k": "not base64!"}});
        assert!(matches!(
            decode_typed("", "v1", "Secret", &secret),
            Some(Err(_))
        ));
        // Kinds that are not built in are for their own schemas to judge.
        assert!(decode_typed("kueue.x-k8s.io", "v1beta2", "LocalQueue", &bad).is_none());
    }
}
