//! Every verb in Kubernetes protobuf, as client-go's typed clients send them, for every
//! built-in kind an embedded cluster serves: create, get, update (and `UpdateStatus` where the
//! kind has `status`), patch, list, delete with `DeleteOptions` and deletecollection, plus the reviews' create, `pods/eviction` (a
//! `policy/v1` `Eviction`) and `scale`. Bodies are k8s-pb's own types (an encoder independent
//! of the server's); every answer is asked for in protobuf alone and decoded from its `k8s\0`
//! envelope (a `runtime.Unknown`) with k8s-pb's types, errors (`Status`) included.
//!
//! Patch bodies are JSON whatever the client's serializer: a patch's content type names its
//! format (merge, strategic merge), and client-go sends them as JSON too.
//!
//! The table is checked against discovery: a kind the cluster serves without a row here fails
//! the test, so a new built-in kind cannot go untried.

use std::{
    any::TypeId,
    collections::{BTreeMap, BTreeSet},
};

use gpustack_tests::embedded::{GatewayProcess, kube_client};
use http_body_util::BodyExt;
use k8s_pb::{
    Metadata, NamespaceResourceScope, Resource,
    api::{
        admissionregistration::v1 as admission, apps::v1 as apps, authentication::v1 as authn,
        authorization::v1 as authz, autoscaling::v1 as autoscaling, batch::v1 as batch,
        certificates::v1 as certificates, coordination::v1 as coordination, core::v1 as core,
        discovery::v1 as discovery, events::v1 as events, networking::v1 as networking,
        policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling,
        storage::v1 as storage,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext,
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1 as meta,
        runtime::{TypeMeta, Unknown},
        util::intstr::IntOrString,
    },
    kube_aggregator::pkg::apis::apiregistration::v1 as apireg,
};
use prost::Message;

const PB: &str = "application/vnd.kubernetes.protobuf";
const NS: &str = "pb";
/// The label every object of the table carries (what list and deletecollection select).
const LABEL: (&str, &str) = ("pb", "verbs");

/// Any list's wire form: every Kubernetes list is `metadata` (1) and `items` (2); the items
/// are decoded with the row's own k8s-pb type.
#[derive(Clone, PartialEq, prost::Message)]
struct AnyList {
    #[prost(message, optional, tag = "1")]
    metadata: Option<meta::ListMeta>,
    #[prost(bytes = "vec", repeated, tag = "2")]
    items: Vec<Vec<u8>>,
}

/// The `runtime.Unknown` envelope around `raw`, as client-go's protobuf serializer writes it.
fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = b"k8s\0".to_vec();
    unknown.encode(&mut out).expect("encoding into a Vec");
    out
}

/// An answer's envelope: its type and its message.
fn open(body: &[u8]) -> (String, String, Vec<u8>) {
    let rest = body
        .strip_prefix(b"k8s\0")
        .unwrap_or_else(|| panic!("no protobuf magic: {}", String::from_utf8_lossy(body)));
    let unknown = Unknown::decode(rest).expect("a runtime.Unknown");
    let t = unknown.type_meta.unwrap_or_default();
    (
        t.api_version.unwrap_or_default(),
        t.kind.unwrap_or_default(),
        unknown.raw.unwrap_or_default(),
    )
}

/// A protobuf-only client of one cluster: kube's HTTPS client with the admin's token.
struct Wire {
    client: kube::Client,
}

/// One answer: its status code and envelope.
struct Answer {
    code: u16,
    api_version: String,
    kind: String,
    raw: Vec<u8>,
}

impl Answer {
    /// The answer's `Status` (an error, or a delete's or eviction's success).
    fn status(&self) -> meta::Status {
        assert_eq!(self.kind, "Status", "want a Status, got a {}", self.kind);
        meta::Status::decode(&self.raw[..]).expect("k8s-pb reads the Status")
    }
}

impl Wire {
    async fn call(&self, method: &str, path: &str, content_type: &str, body: Vec<u8>) -> Answer {
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::ACCEPT, PB);
        if !body.is_empty() {
            req = req.header(http::header::CONTENT_TYPE, content_type);
        }
        let req = req.body(kube::client::Body::from(body)).unwrap();
        let res = self
            .client
            .send(req)
            .await
            .expect("the request is answered");
        let code = res.status().as_u16();
        let ct = res
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            ct,
            PB,
            "{method} {path}: answered {code} as {ct:?}: {}",
            String::from_utf8_lossy(&bytes)
        );
        let (api_version, kind, raw) = open(&bytes);
        Answer {
            code,
            api_version,
            kind,
            raw,
        }
    }

    /// `method path` with a protobuf object (or `DeleteOptions`) body; the answer must be
    /// `want`.
    async fn send_pb(&self, method: &str, path: &str, body: Vec<u8>, want: u16) -> Answer {
        let a = self.call(method, path, PB, body).await;
        if a.code != want {
            let detail = if a.kind == "Status" {
                format!("{:?}", a.status().message)
            } else {
                a.kind.clone()
            };
            panic!("{method} {path}: want {want}, got {}: {detail}", a.code);
        }
        a
    }
}

/// What the table needs of a kind: its k8s-pb type, and a minimal valid object of it.
trait Minimal:
    Resource + Metadata<Ty = meta::ObjectMeta> + Message + Default + Sized + 'static
{
    /// Object number `n` (1 or 2) of this kind, with `metadata` (its name and the label).
    fn minimal(metadata: meta::ObjectMeta, n: u8) -> Self;

    /// Its name: `<plural>-<n>` unless the kind names its objects otherwise.
    fn name(n: u8) -> String {
        let group = Self::GROUP.split('.').next().unwrap_or_default();
        format!(
            "{}{}{}-{n}",
            Self::URL_PATH_SEGMENT,
            if group.is_empty() { "" } else { "-" },
            group
        )
    }
}

/// One kind of the table, its type erased into what the verbs need.
struct Row {
    api_version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    /// Object `n`'s message (no envelope).
    object: fn(u8) -> Vec<u8>,
    /// The metadata of a message of this kind (k8s-pb decodes it, or the test fails).
    meta: fn(&[u8]) -> meta::ObjectMeta,
    /// A message of this kind with label `key=value` added.
    labelled: fn(&[u8], &str, &str) -> Vec<u8>,
}

fn row<K: Minimal>() -> Row
where
    K::Scope: 'static,
{
    Row {
        api_version: K::API_VERSION,
        kind: K::KIND,
        plural: K::URL_PATH_SEGMENT,
        namespaced: TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>(),
        object: |n| {
            let mut labels = BTreeMap::new();
            labels.insert(LABEL.0.to_owned(), LABEL.1.to_owned());
            let metadata = meta::ObjectMeta {
                name: Some(K::name(n)),
                labels,
                ..Default::default()
            };
            K::minimal(metadata, n).encode_to_vec()
        },
        meta: |raw| {
            let obj =
                K::decode(raw).unwrap_or_else(|e| panic!("k8s-pb reads the {}: {e}", K::KIND));
            obj.metadata().cloned().unwrap_or_default()
        },
        labelled: |raw, key, value| {
            let mut obj = K::decode(raw).expect("a decodable object");
            if let Some(m) = obj.metadata_mut() {
                m.labels.insert(key.to_owned(), value.to_owned());
            }
            obj.encode_to_vec()
        },
    }
}

impl Row {
    fn collection(&self) -> String {
        let root = if self.api_version.contains('/') {
            format!("/apis/{}", self.api_version)
        } else {
            format!("/api/{}", self.api_version)
        };
        match self.namespaced {
            true => format!("{root}/namespaces/{NS}/{}", self.plural),
            false => format!("{root}/{}", self.plural),
        }
    }

    fn name(&self, n: u8) -> String {
        (self.meta)(&(self.object)(n)).name.unwrap_or_default()
    }

    fn body(&self, raw: Vec<u8>) -> Vec<u8> {
        envelope(self.api_version, self.kind, raw)
    }

    /// The answer decoded as this kind: its metadata.
    fn read(&self, a: &Answer) -> meta::ObjectMeta {
        assert_eq!(
            (a.api_version.as_str(), a.kind.as_str()),
            (self.api_version, self.kind),
            "the answer's type"
        );
        (self.meta)(&a.raw)
    }

    /// The answer decoded as a list of this kind: its items' names.
    fn read_list(&self, a: &Answer) -> Vec<String> {
        assert_eq!(a.kind, format!("{}List", self.kind), "the answer's type");
        let list = AnyList::decode(&a.raw[..]).expect("a list");
        assert!(list.metadata.is_some(), "a list has its metadata");
        list.items
            .iter()
            .map(|item| (self.meta)(item).name.unwrap_or_default())
            .collect()
    }
}

/// client-go's `DeleteOptions`, in the envelope of the resource's own group version (its
/// scheme registers the options type in every group version).
fn delete_options(api_version: &str) -> Vec<u8> {
    let options = meta::DeleteOptions {
        propagation_policy: Some("Background".into()),
        ..Default::default()
    };
    envelope(api_version, "DeleteOptions", options.encode_to_vec())
}

fn selector(labels: &[(&str, &str)]) -> meta::LabelSelector {
    meta::LabelSelector {
        match_labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Default::default()
    }
}

fn pod_spec() -> core::PodSpec {
    core::PodSpec {
        containers: vec![core::Container {
            name: Some("main".into()),
            image: Some("example.org/app:1".into()),
            ..Default::default()
        }],
        restart_policy: Some("Always".into()),
        ..Default::default()
    }
}

fn template(restart: &str) -> core::PodTemplateSpec {
    let mut labels = BTreeMap::new();
    labels.insert("app".to_owned(), "pb".to_owned());
    let mut spec = pod_spec();
    spec.restart_policy = Some(restart.into());
    core::PodTemplateSpec {
        metadata: Some(meta::ObjectMeta {
            labels,
            ..Default::default()
        }),
        spec: Some(spec),
    }
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| {
            (
                (*k).to_owned(),
                Quantity {
                    string: Some((*v).to_owned()),
                },
            )
        })
        .collect()
}

fn reference(kind: &str, name: &str) -> core::ObjectReference {
    core::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some(kind.into()),
        name: Some(name.into()),
        namespace: Some(NS.into()),
        ..Default::default()
    }
}

fn micro_time() -> meta::MicroTime {
    meta::MicroTime {
        seconds: Some(1_767_225_600),
        nanos: Some(0),
    }
}

/// A certificate request of a fresh key (PEM), for CertificateSigningRequests.
fn certificate_request() -> Vec<u8> {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["pb.example.com".to_owned()]).unwrap();
    params
        .serialize_request(&key)
        .unwrap()
        .pem()
        .unwrap()
        .into_bytes()
}

macro_rules! minimal {
    ($($ty:ty => |$m:ident, $n:ident| $body:expr;)*) => {
        $(impl Minimal for $ty {
            #[allow(unused_variables)]
            fn minimal($m: meta::ObjectMeta, $n: u8) -> Self { $body }
        })*
    };
}

minimal! {
    core::Namespace => |m, n| core::Namespace { metadata: Some(m), ..Default::default() };
    core::Node => |m, n| core::Node { metadata: Some(m), ..Default::default() };
    core::Pod => |m, n| core::Pod { metadata: Some(m), spec: Some(pod_spec()), ..Default::default() };
    core::Secret => |m, n| {
        let mut data = BTreeMap::new();
        data.insert("token".to_owned(), b"not-a-secret".to_vec());
        core::Secret { metadata: Some(m), data, r#type: Some("Opaque".into()), ..Default::default() }
    };
    core::ConfigMap => |m, n| {
        let mut data = BTreeMap::new();
        data.insert("k".to_owned(), "v".to_owned());
        core::ConfigMap { metadata: Some(m), data, ..Default::default() }
    };
    core::ServiceAccount => |m, n| core::ServiceAccount { metadata: Some(m), ..Default::default() };
    core::Service => |m, n| core::Service {
        metadata: Some(m),
        spec: Some(core::ServiceSpec {
            ports: vec![core::ServicePort {
                name: Some("http".into()),
                port: Some(80),
                protocol: Some("TCP".into()),
                target_port: Some(IntOrString { r#type: Some(0), int_val: Some(8080), str_val: None }),
                ..Default::default()
            }],
            selector: [("app".to_owned(), "pb".to_owned())].into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    core::PersistentVolumeClaim => |m, n| core::PersistentVolumeClaim {
        metadata: Some(m),
        spec: Some(core::PersistentVolumeClaimSpec {
            access_modes: vec!["ReadWriteOnce".into()],
            resources: Some(core::VolumeResourceRequirements {
                requests: quantities(&[("storage", "1Gi")]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    core::PersistentVolume => |m, n| core::PersistentVolume {
        metadata: Some(m),
        spec: Some(core::PersistentVolumeSpec {
            capacity: quantities(&[("storage", "1Gi")]),
            access_modes: vec!["ReadWriteOnce".into()],
            persistent_volume_source: Some(core::PersistentVolumeSource {
                host_path: Some(core::HostPathVolumeSource { path: Some("/srv/pb".into()), r#type: None }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    core::ReplicationController => |m, n| core::ReplicationController {
        metadata: Some(m),
        spec: Some(core::ReplicationControllerSpec {
            replicas: Some(1),
            selector: [("app".to_owned(), "pb".to_owned())].into(),
            template: Some(template("Always")),
            ..Default::default()
        }),
        ..Default::default()
    };
    core::Endpoints => |m, n| core::Endpoints {
        metadata: Some(m),
        subsets: vec![core::EndpointSubset {
            addresses: vec![core::EndpointAddress { ip: Some("192.0.2.10".into()), ..Default::default() }],
            ports: vec![core::EndpointPort { port: Some(8080), ..Default::default() }],
            ..Default::default()
        }],
    };
    discovery::EndpointSlice => |m, n| discovery::EndpointSlice {
        metadata: Some(m),
        address_type: Some("IPv4".into()),
        endpoints: vec![discovery::Endpoint { addresses: vec!["192.0.2.10".into()], ..Default::default() }],
        ..Default::default()
    };
    core::Event => |m, n| core::Event {
        metadata: Some(m),
        involved_object: Some(reference("ConfigMap", "anything")),
        reason: Some("Tried".into()),
        message: Some("in protobuf".into()),
        r#type: Some("Normal".into()),
        source: Some(core::EventSource { component: Some("pb-test".into()), host: None }),
        count: Some(1),
        ..Default::default()
    };
    events::Event => |m, n| events::Event {
        metadata: Some(m),
        event_time: Some(micro_time()),
        reporting_controller: Some("example.com/pb".into()),
        reporting_instance: Some("pb-1".into()),
        action: Some("Try".into()),
        reason: Some("Tried".into()),
        regarding: Some(reference("ConfigMap", "anything")),
        r#type: Some("Normal".into()),
        ..Default::default()
    };
    coordination::Lease => |m, n| coordination::Lease {
        metadata: Some(m),
        spec: Some(coordination::LeaseSpec {
            holder_identity: Some("pb".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(micro_time()),
            ..Default::default()
        }),
    };
    apiext::CustomResourceDefinition => |m, n| {
        let plural = format!("gadgets{n}");
        let kind = format!("Gadget{n}");
        apiext::CustomResourceDefinition {
            metadata: Some(meta::ObjectMeta { name: Some(format!("{plural}.pb.example.com")), ..m }),
            spec: Some(apiext::CustomResourceDefinitionSpec {
                group: Some("pb.example.com".into()),
                names: Some(apiext::CustomResourceDefinitionNames {
                    plural: Some(plural.clone()),
                    singular: Some(kind.to_lowercase()),
                    kind: Some(kind.clone()),
                    list_kind: Some(format!("{kind}List")),
                    ..Default::default()
                }),
                scope: Some("Namespaced".into()),
                versions: vec![apiext::CustomResourceDefinitionVersion {
                    name: Some("v1".into()),
                    served: Some(true),
                    storage: Some(true),
                    schema: Some(apiext::CustomResourceValidation {
                        open_apiv3_schema: Some(apiext::JsonSchemaProps {
                            r#type: Some("object".into()),
                            x_kubernetes_preserve_unknown_fields: Some(true),
                            ..Default::default()
                        }),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    };
    apireg::APIService => |m, n| apireg::APIService {
        metadata: Some(meta::ObjectMeta { name: Some(format!("v{n}.pb.example.com")), ..m }),
        spec: Some(apireg::APIServiceSpec {
            group: Some("pb.example.com".into()),
            version: Some(format!("v{n}")),
            group_priority_minimum: Some(100),
            version_priority: Some(10),
            ..Default::default()
        }),
        ..Default::default()
    };
    admission::ValidatingWebhookConfiguration => |m, n| admission::ValidatingWebhookConfiguration { metadata: Some(m), webhooks: vec![] };
    admission::MutatingWebhookConfiguration => |m, n| admission::MutatingWebhookConfiguration { metadata: Some(m), webhooks: vec![] };
    storage::CSIDriver => |m, n| storage::CSIDriver {
        metadata: Some(m),
        spec: Some(storage::CSIDriverSpec { attach_required: Some(false), ..Default::default() }),
    };
    storage::CSINode => |m, n| storage::CSINode {
        metadata: Some(m),
        spec: Some(storage::CSINodeSpec {
            drivers: vec![storage::CSINodeDriver {
                name: Some("pb.csi.example.com".into()),
                node_id: Some(format!("node-{n}")),
                ..Default::default()
            }],
        }),
    };
    rbac::ClusterRole => |m, n| rbac::ClusterRole {
        metadata: Some(m),
        rules: vec![rbac::PolicyRule {
            verbs: vec!["get".into()],
            api_groups: vec![String::new()],
            resources: vec!["configmaps".into()],
            ..Default::default()
        }],
        ..Default::default()
    };
    rbac::ClusterRoleBinding => |m, n| rbac::ClusterRoleBinding {
        metadata: Some(m),
        role_ref: Some(rbac::RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: Some("ClusterRole".into()),
            name: Some("view".into()),
        }),
        subjects: vec![rbac::Subject {
            kind: Some("User".into()),
            api_group: Some("rbac.authorization.k8s.io".into()),
            name: Some("pb-user".into()),
            namespace: None,
        }],
    };
    rbac::Role => |m, n| rbac::Role {
        metadata: Some(m),
        rules: vec![rbac::PolicyRule {
            verbs: vec!["get".into()],
            api_groups: vec![String::new()],
            resources: vec!["configmaps".into()],
            ..Default::default()
        }],
    };
    rbac::RoleBinding => |m, n| rbac::RoleBinding {
        metadata: Some(m),
        role_ref: Some(rbac::RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: Some("ClusterRole".into()),
            name: Some("view".into()),
        }),
        subjects: vec![rbac::Subject {
            kind: Some("ServiceAccount".into()),
            api_group: Some(String::new()),
            name: Some("default".into()),
            namespace: Some(NS.into()),
        }],
    };
    apps::Deployment => |m, n| apps::Deployment {
        metadata: Some(m),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(1),
            selector: Some(selector(&[("app", "pb")])),
            template: Some(template("Always")),
            ..Default::default()
        }),
        ..Default::default()
    };
    apps::DaemonSet => |m, n| apps::DaemonSet {
        metadata: Some(m),
        spec: Some(apps::DaemonSetSpec {
            selector: Some(selector(&[("app", "pb")])),
            template: Some(template("Always")),
            ..Default::default()
        }),
        ..Default::default()
    };
    apps::StatefulSet => |m, n| apps::StatefulSet {
        metadata: Some(m),
        spec: Some(apps::StatefulSetSpec {
            replicas: Some(1),
            selector: Some(selector(&[("app", "pb")])),
            template: Some(template("Always")),
            service_name: Some("pb".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    apps::ReplicaSet => |m, n| apps::ReplicaSet {
        metadata: Some(m),
        spec: Some(apps::ReplicaSetSpec {
            replicas: Some(1),
            selector: Some(selector(&[("app", "pb")])),
            template: Some(template("Always")),
            ..Default::default()
        }),
        ..Default::default()
    };
    batch::Job => |m, n| batch::Job {
        metadata: Some(m),
        spec: Some(batch::JobSpec { template: Some(template("Never")), ..Default::default() }),
        ..Default::default()
    };
    batch::CronJob => |m, n| batch::CronJob {
        metadata: Some(m),
        spec: Some(batch::CronJobSpec {
            schedule: Some("*/5 * * * *".into()),
            job_template: Some(batch::JobTemplateSpec {
                metadata: None,
                spec: Some(batch::JobSpec { template: Some(template("Never")), ..Default::default() }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    scheduling::PriorityClass => |m, n| scheduling::PriorityClass {
        metadata: Some(m),
        value: Some(1000 + i32::from(n)),
        description: Some("made in protobuf".into()),
        ..Default::default()
    };
    policy::PodDisruptionBudget => |m, n| policy::PodDisruptionBudget {
        metadata: Some(m),
        spec: Some(policy::PodDisruptionBudgetSpec {
            min_available: Some(IntOrString { r#type: Some(0), int_val: Some(1), str_val: None }),
            selector: Some(selector(&[("app", "pb")])),
            ..Default::default()
        }),
        ..Default::default()
    };
    core::ResourceQuota => |m, n| core::ResourceQuota {
        metadata: Some(m),
        spec: Some(core::ResourceQuotaSpec { hard: quantities(&[("pods", "10")]), ..Default::default() }),
        ..Default::default()
    };
    networking::Ingress => |m, n| networking::Ingress {
        metadata: Some(m),
        spec: Some(networking::IngressSpec {
            default_backend: Some(networking::IngressBackend {
                service: Some(networking::IngressServiceBackend {
                    name: Some("web".into()),
                    port: Some(networking::ServiceBackendPort { number: Some(80), name: None }),
                }),
                resource: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    networking::NetworkPolicy => |m, n| networking::NetworkPolicy {
        metadata: Some(m),
        spec: Some(networking::NetworkPolicySpec {
            pod_selector: Some(selector(&[("app", "pb")])),
            policy_types: vec!["Ingress".into()],
            ..Default::default()
        }),
    };
    networking::IngressClass => |m, n| networking::IngressClass {
        metadata: Some(m),
        spec: Some(networking::IngressClassSpec { controller: Some("example.com/pb".into()), parameters: None }),
    };
    certificates::CertificateSigningRequest => |m, n| certificates::CertificateSigningRequest {
        metadata: Some(m),
        spec: Some(certificates::CertificateSigningRequestSpec {
            request: Some(certificate_request()),
            signer_name: Some("example.com/pb".into()),
            usages: vec!["client auth".into()],
            ..Default::default()
        }),
        ..Default::default()
    };
}

/// Every kind with every verb, in an order where nothing depends on what came before.
fn table() -> Vec<Row> {
    vec![
        row::<core::Namespace>(),
        row::<core::Node>(),
        row::<core::Pod>(),
        row::<core::Secret>(),
        row::<core::ConfigMap>(),
        row::<core::ServiceAccount>(),
        row::<core::Service>(),
        row::<core::PersistentVolumeClaim>(),
        row::<core::PersistentVolume>(),
        row::<core::ReplicationController>(),
        row::<core::Endpoints>(),
        row::<discovery::EndpointSlice>(),
        row::<core::Event>(),
        row::<events::Event>(),
        row::<coordination::Lease>(),
        row::<apiext::CustomResourceDefinition>(),
        row::<apireg::APIService>(),
        row::<admission::ValidatingWebhookConfiguration>(),
        row::<admission::MutatingWebhookConfiguration>(),
        row::<storage::CSIDriver>(),
        row::<storage::CSINode>(),
        row::<rbac::ClusterRole>(),
        row::<rbac::ClusterRoleBinding>(),
        row::<rbac::Role>(),
        row::<rbac::RoleBinding>(),
        row::<apps::Deployment>(),
        row::<apps::DaemonSet>(),
        row::<apps::StatefulSet>(),
        row::<apps::ReplicaSet>(),
        row::<batch::Job>(),
        row::<batch::CronJob>(),
        row::<scheduling::PriorityClass>(),
        row::<policy::PodDisruptionBudget>(),
        row::<core::ResourceQuota>(),
        row::<networking::Ingress>(),
        row::<networking::NetworkPolicy>(),
        row::<networking::IngressClass>(),
        row::<certificates::CertificateSigningRequest>(),
    ]
}

/// The review kinds: create only, answered with their status.
const REVIEWS: &[(&str, &str)] = &[
    ("authorization.k8s.io/v1", "selfsubjectaccessreviews"),
    ("authorization.k8s.io/v1", "selfsubjectrulesreviews"),
    ("authorization.k8s.io/v1", "subjectaccessreviews"),
    ("authorization.k8s.io/v1", "localsubjectaccessreviews"),
    ("authentication.k8s.io/v1", "selfsubjectreviews"),
    ("authentication.k8s.io/v1", "tokenreviews"),
];

/// Create, get, update, patch (merge and strategic), list, delete and deletecollection of
/// one kind, all in protobuf.
/// A PUT to `path` of the object at `item` as `change` makes it, read again and retried on a
/// conflict as client-go's `RetryOnConflict` does (a controller may write the object in
/// between: the APIService availability check does); answered 200.
async fn put_retrying(
    wire: &Wire,
    row: &Row,
    item: &str,
    path: &str,
    change: impl Fn(&[u8]) -> Vec<u8>,
) -> Answer {
    for _ in 0..5 {
        let got = wire.send_pb("GET", item, Vec::new(), 200).await;
        let a = wire.call("PUT", path, PB, row.body(change(&got.raw))).await;
        if a.code != 409 {
            assert_eq!(a.code, 200, "PUT {path}");
            return a;
        }
    }
    panic!("PUT {path}: a conflict five times");
}

async fn every_verb(wire: &Wire, row: &Row, has_status: bool) {
    let base = row.collection();
    let name = row.name(1);
    let item = format!("{base}/{name}");

    let created = wire
        .send_pb("POST", &base, row.body((row.object)(1)), 201)
        .await;
    let m = row.read(&created);
    assert_eq!(m.name.as_deref(), Some(name.as_str()));
    assert!(m.uid.as_deref().is_some_and(|u| !u.is_empty()), "a uid");
    assert!(m.resource_version.is_some(), "a resourceVersion");

    // Update: what was read, with a label added (its resourceVersion pins it).
    let updated = put_retrying(wire, row, &item, &item, |raw| {
        (row.labelled)(raw, "verb", "update")
    })
    .await;
    let um = row.read(&updated);
    assert_eq!(um.labels.get("verb").map(String::as_str), Some("update"));
    assert_ne!(um.resource_version, m.resource_version);

    for (ct, value) in [
        ("application/merge-patch+json", "merge"),
        ("application/strategic-merge-patch+json", "strategic"),
    ] {
        let body = format!(r#"{{"metadata":{{"labels":{{"patched":"{value}"}}}}}}"#);
        let patched = wire.call("PATCH", &item, ct, body.into_bytes()).await;
        assert_eq!(patched.code, 200, "{ct} patch of {item}");
        let pm = row.read(&patched);
        assert_eq!(pm.labels.get("patched").map(String::as_str), Some(value));
        assert_eq!(pm.labels.get("verb").map(String::as_str), Some("update"));
    }

    // UpdateStatus: the object as read, through `/status`.
    if has_status {
        let status =
            put_retrying(wire, row, &item, &format!("{item}/status"), <[u8]>::to_vec).await;
        assert_eq!(row.read(&status).uid, m.uid);
    }

    let selected = format!("{base}?labelSelector={}%3D{}", LABEL.0, LABEL.1);
    let listed = wire.send_pb("GET", &selected, Vec::new(), 200).await;
    assert_eq!(row.read_list(&listed), std::slice::from_ref(&name));

    // Delete with client-go's protobuf DeleteOptions: the object as deleted (or still
    // finalizing), or a Status.
    let deleted = wire
        .send_pb("DELETE", &item, delete_options(row.api_version), 200)
        .await;
    if deleted.kind == "Status" {
        assert_eq!(deleted.status().status.as_deref(), Some("Success"));
    } else {
        assert_eq!(row.read(&deleted).name.as_deref(), Some(name.as_str()));
    }

    // Deletecollection of a second object, by the label.
    let second = row.name(2);
    wire.send_pb("POST", &base, row.body((row.object)(2)), 201)
        .await;
    let swept = wire
        .send_pb("DELETE", &selected, delete_options(row.api_version), 200)
        .await;
    let names = row.read_list(&swept);
    assert!(names.contains(&second), "{names:?} holds {second}");

    // Gone (a Namespace finishes terminating first): 404, answered in protobuf too.
    for gone in [&name, &second] {
        let path = &format!("{base}/{gone}");
        let found =
            gpustack_tests::wait::poll(std::time::Duration::from_secs(30), move || async move {
                let a = wire.call("GET", path, PB, Vec::new()).await;
                (a.code == 404).then_some(a)
            })
            .await
            .unwrap_or_else(|| panic!("{path} is still there"));
        let status = found.status();
        assert_eq!(status.reason.as_deref(), Some("NotFound"));
        assert_eq!(status.code, Some(404));
    }
}

/// What discovery says the cluster lets clients create (`group/version` and plural), and
/// whether each has a `status` subresource.
async fn creatable(client: &kube::Client) -> BTreeMap<(String, String), bool> {
    let mut out = BTreeMap::new();
    let core = client.list_core_api_versions_aggregated().await.unwrap();
    let apis = client.list_api_groups_aggregated().await.unwrap();
    for group in core.items.iter().chain(apis.items.iter()) {
        let name = group
            .metadata
            .as_ref()
            .and_then(|m| m.name.clone())
            .unwrap_or_default();
        for v in &group.versions {
            let version = v.version.clone().unwrap_or_default();
            let gv = if name.is_empty() {
                version
            } else {
                format!("{name}/{version}")
            };
            for r in &v.resources {
                if r.verbs.iter().any(|v| v == "create") {
                    let status = r
                        .subresources
                        .iter()
                        .any(|s| s.subresource.as_deref() == Some("status"));
                    out.insert((gv.clone(), r.resource.clone().unwrap_or_default()), status);
                }
            }
        }
    }
    out
}

#[tokio::test]
async fn every_built_in_kind_takes_every_verb_in_protobuf() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("gw"), "protobuf");
    let client = kube_client(&gw.kubeconfig()).await;
    let wire = Wire {
        client: client.clone(),
    };
    let ns = core::Namespace {
        metadata: Some(meta::ObjectMeta {
            name: Some(NS.into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    wire.send_pb(
        "POST",
        "/api/v1/namespaces",
        envelope("v1", "Namespace", ns.encode_to_vec()),
        201,
    )
    .await;

    let rows = table();
    let covered: BTreeSet<(String, String)> = rows
        .iter()
        .map(|r| (r.api_version.to_owned(), r.plural.to_owned()))
        .chain(
            REVIEWS
                .iter()
                .map(|(gv, p)| ((*gv).to_owned(), (*p).to_owned())),
        )
        .collect();
    let served = creatable(&client).await;
    assert_eq!(
        served.keys().cloned().collect::<BTreeSet<_>>(),
        covered,
        "the table covers every kind the cluster serves"
    );
    let with_status = served.values().filter(|s| **s).count();
    assert!(with_status >= 10, "kinds with a status: {with_status}");
    for row in &rows {
        let has_status = served[&(row.api_version.to_owned(), row.plural.to_owned())];
        every_verb(&wire, row, has_status).await;
    }
}

#[tokio::test]
async fn reviews_eviction_and_scale_in_protobuf() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("gw"), "protobuf");
    let client = kube_client(&gw.kubeconfig()).await;
    let wire = Wire { client };

    // Reviews: created, answered with their status.
    let attributes = || authz::ResourceAttributes {
        namespace: Some("default".into()),
        verb: Some("get".into()),
        resource: Some("pods".into()),
        ..Default::default()
    };
    // Whether `user` in `groups` may get Pods in `default`.
    let asked_by = |user: &str, groups: &[&str]| authz::SubjectAccessReviewSpec {
        resource_attributes: Some(attributes()),
        user: Some(user.into()),
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        ..Default::default()
    };
    let ssar = authz::SelfSubjectAccessReview {
        spec: Some(authz::SelfSubjectAccessReviewSpec {
            resource_attributes: Some(attributes()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let status = review(
        &wire,
        &ssar,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    )
    .await
    .status
    .unwrap();
    assert_eq!(status.allowed, Some(true), "the admin may get pods");

    let sar = authz::SubjectAccessReview {
        spec: Some(asked_by("nobody", &[])),
        ..Default::default()
    };
    let status = review(
        &wire,
        &sar,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    )
    .await
    .status
    .unwrap();
    assert_eq!(status.allowed, Some(false), "nobody may not");

    let lsar = authz::LocalSubjectAccessReview {
        metadata: Some(meta::ObjectMeta {
            namespace: Some("default".into()),
            ..Default::default()
        }),
        spec: Some(asked_by("admin", &["system:masters"])),
        ..Default::default()
    };
    let status = review(
        &wire,
        &lsar,
        "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews",
    )
    .await
    .status
    .unwrap();
    assert_eq!(status.allowed, Some(true), "system:masters may");

    let ssrr = authz::SelfSubjectRulesReview {
        spec: Some(authz::SelfSubjectRulesReviewSpec {
            namespace: Some("default".into()),
        }),
        ..Default::default()
    };
    let status = review(
        &wire,
        &ssrr,
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
    )
    .await
    .status
    .unwrap();
    assert!(!status.resource_rules.is_empty(), "the admin's rules");

    let ssr = authn::SelfSubjectReview::default();
    let user = review(
        &wire,
        &ssr,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    )
    .await
    .status
    .unwrap()
    .user_info
    .unwrap();
    assert!(
        user.groups.iter().any(|g| g == "system:masters"),
        "{user:?}"
    );

    let tr = authn::TokenReview {
        spec: Some(authn::TokenReviewSpec {
            token: Some("not-a-token".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let status = review(&wire, &tr, "/apis/authentication.k8s.io/v1/tokenreviews")
        .await
        .status
        .unwrap();
    assert_eq!(status.authenticated, Some(false));

    // Eviction: a policy/v1 Eviction in protobuf, answered with a Status.
    let pods = "/api/v1/namespaces/default/pods";
    let pod = core::Pod {
        metadata: Some(meta::ObjectMeta {
            name: Some("evictee".into()),
            ..Default::default()
        }),
        spec: Some(pod_spec()),
        ..Default::default()
    };
    wire.send_pb(
        "POST",
        pods,
        envelope("v1", "Pod", pod.encode_to_vec()),
        201,
    )
    .await;
    let eviction = policy::Eviction {
        metadata: Some(meta::ObjectMeta {
            name: Some("evictee".into()),
            namespace: Some("default".into()),
            ..Default::default()
        }),
        delete_options: Some(meta::DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        }),
    };
    let evicted = wire
        .send_pb(
            "POST",
            &format!("{pods}/evictee/eviction"),
            envelope("policy/v1", "Eviction", eviction.encode_to_vec()),
            201,
        )
        .await;
    let status = evicted.status();
    assert_eq!(
        (status.status.as_deref(), status.code),
        (Some("Success"), Some(201))
    );
    let gone = wire
        .call("GET", &format!("{pods}/evictee"), PB, Vec::new())
        .await;
    assert_eq!(gone.code, 404);

    // Scale: read and written as autoscaling/v1 Scale.
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let d = <apps::Deployment as Minimal>::minimal(
        meta::ObjectMeta {
            name: Some("scaled".into()),
            ..Default::default()
        },
        1,
    );
    wire.send_pb(
        "POST",
        deployments,
        envelope("apps/v1", "Deployment", d.encode_to_vec()),
        201,
    )
    .await;
    let scale_path = format!("{deployments}/scaled/scale");
    let read = wire.send_pb("GET", &scale_path, Vec::new(), 200).await;
    assert_eq!(
        (read.api_version.as_str(), read.kind.as_str()),
        ("autoscaling/v1", "Scale")
    );
    let mut scale = autoscaling::Scale::decode(&read.raw[..]).unwrap();
    assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(1));
    scale.spec = Some(autoscaling::ScaleSpec { replicas: Some(3) });
    let written = wire
        .send_pb(
            "PUT",
            &scale_path,
            envelope("autoscaling/v1", "Scale", scale.encode_to_vec()),
            200,
        )
        .await;
    let scale = autoscaling::Scale::decode(&written.raw[..]).unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(3));
}

/// Creates review `obj` at `path` in protobuf: the review answered (201, the same kind).
async fn review<K: Resource + Message + Default>(wire: &Wire, obj: &K, path: &str) -> K {
    let a = wire
        .send_pb(
            "POST",
            path,
            envelope(K::API_VERSION, K::KIND, obj.encode_to_vec()),
            201,
        )
        .await;
    assert_eq!(
        (a.api_version.as_str(), a.kind.as_str()),
        (K::API_VERSION, K::KIND)
    );
    K::decode(&a.raw[..]).unwrap_or_else(|e| panic!("k8s-pb reads the {}: {e}", K::KIND))
}
