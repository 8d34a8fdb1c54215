//! The generated schema agrees with k8s-pb's prost types (field tags and wire types) and with
//! k8s-openapi's JSON (field names, the forms of times, quantities, int-or-strings, bytes and
//! raw JSON), for every kind a cluster serves: a sample object with every field set goes
//! through k8s-openapi's JSON, our encoder, k8s-pb's decoder and encoder, and our decoder,
//! and comes out as it went in.

use std::collections::BTreeSet;

use prost::Message as _;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Map, Value, json};

use super::schema::MESSAGES;
use super::table::{Special, Ty};
use super::{decode, encode, message_of, wire};

/// A value for every field of message `index`; `path` holds the messages being filled, so a
/// recursive schema (`JSONSchemaProps`) stops at its second level.
fn sample(index: u16, path: &mut Vec<u16>) -> Value {
    let m = &MESSAGES[usize::from(index)];
    match m.special {
        Special::Time => return json!("2024-01-02T03:04:05Z"),
        Special::MicroTime => return json!("2024-01-02T03:04:05.123456Z"),
        Special::Quantity => return json!("1500m"),
        Special::IntOrString => return json!("http"),
        Special::RawJson => return json!({"a": [1, "x", {"b": null}]}),
        Special::PropsOrArray => return json!([{"type": "string"}, {"type": "integer"}]),
        Special::PropsOrBool => return json!(true),
        Special::PropsOrStringArray => return json!(["a", "b"]),
        Special::Items => return json!(["a", "b"]),
        Special::Plain => {}
    }
    path.push(index);
    let mut obj = Map::new();
    for f in m.fields {
        let one = |ty: Ty, path: &mut Vec<u16>| -> Option<Value> {
            Some(match ty {
                Ty::Str => json!(format!("s-{}", f.json)),
                Ty::Bytes => json!("Ynl0ZXM="),
                Ty::Bool => json!(true),
                Ty::I32 => json!(-7),
                Ty::I64 => json!(-1_234_567),
                Ty::F64 => json!(1.5),
                Ty::Msg(i) if path.contains(&i) => return None,
                Ty::Msg(i) => sample(i, path),
                Ty::MapStr => json!({"k": "v", "empty": ""}),
                Ty::MapBytes => json!({"k": "Ynl0ZXM=", "empty": ""}),
                Ty::MapMsg(i) if path.contains(&i) => return None,
                Ty::MapMsg(i) => json!({ "k": sample(i, path) }),
            })
        };
        let Some(v) = one(f.ty, path) else { continue };
        if f.json.is_empty() {
            if let Value::Object(inner) = v {
                obj.extend(inner);
            }
        } else if f.repeated {
            let second = one(f.ty, path).expect("as the first");
            obj.insert(f.json.into(), json!([v, second]));
        } else {
            obj.insert(f.json.into(), v);
        }
    }
    path.pop();
    Value::Object(obj)
}

/// The paths where `a` and `b` differ.
fn diff(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (l, r) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                diff(l, r, &format!("{at}.{k}"), out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (l, r)) in x.iter().zip(y).enumerate() {
                diff(l, r, &format!("{at}[{i}]"), out);
            }
        }
        _ if a != b => out.push(format!("{at}: {a} vs {b}")),
        _ => {}
    }
}

/// k8s-openapi writes `apiVersion` and `kind` into objects embedded in others
/// (`volumeClaimTemplates`), which have no type on the wire and none in Go's JSON either.
fn untype_embedded(v: &mut Value, root: bool) {
    match v {
        Value::Object(m) => {
            if !root && m.contains_key("metadata") {
                m.remove("apiVersion");
                m.remove("kind");
            }
            m.values_mut().for_each(|v| untype_embedded(v, false));
        }
        Value::Array(a) => a.iter_mut().for_each(|v| untype_embedded(v, false)),
        _ => {}
    }
}

/// Fields k8s-pb has and k8s-openapi's `v1_33` does not (Kubernetes 1.34 and later), as
/// `parent.field`.
const NEWER_THAN_K8S_OPENAPI: &[&str] = &[
    "conditions.observedGeneration",
    "containers.restartPolicyRules",
    "ephemeralContainers.restartPolicyRules",
    "initContainers.restartPolicyRules",
    "sources.podCertificate",
    "spec.hostnameOverride",
    "spec.serviceAccountTokenInSecrets",
    "spec.workloadRef",
    "status.allocatedResources",
    "status.declaredFeatures",
    "status.extendedResourceClaimStatus",
    "status.observedGeneration",
    "status.resources",
    "valueFrom.fileKeyRef",
];

/// The raw message inside an envelope.
fn raw_of(envelope: &[u8]) -> Vec<u8> {
    let rest = envelope.strip_prefix(super::MAGIC).expect("the magic");
    wire::fields(rest)
        .filter_map(Result::ok)
        .find_map(|(tag, v)| match (tag, v) {
            (2, wire::Value::Bytes(b)) => Some(b.to_vec()),
            _ => None,
        })
        .unwrap_or_default()
}

fn with_raw(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    super::envelope_of(api_version, kind, raw).buf
}

/// JSON (as k8s-openapi writes `sample`) → ours → prost `P` → prost → ours: the same JSON.
fn round_trip<P, O>(sample_json: Value) -> Value
where
    P: prost::Message + Default,
    O: Serialize + DeserializeOwned,
{
    let typed: O = serde_json::from_value(sample_json.clone())
        .unwrap_or_else(|e| panic!("k8s-openapi refuses {:.300}: {e}", sample_json["kind"]));
    let mut want = serde_json::to_value(&typed).expect("k8s-openapi writes JSON");
    untype_embedded(&mut want, true);
    let kind = want["kind"].as_str().unwrap_or_default().to_owned();
    let ours = encode(&want).unwrap_or_else(|e| panic!("{kind}: {e}"));
    let typed = P::decode(raw_of(&ours).as_slice())
        .unwrap_or_else(|e| panic!("{kind}: k8s-pb refuses what we wrote: {e}"));
    let again = with_raw(
        want["apiVersion"].as_str().unwrap_or_default(),
        &kind,
        &typed.encode_to_vec(),
    );
    let got = decode(&again).unwrap_or_else(|e| panic!("{kind}: {e}"));
    let mut differences = Vec::new();
    diff(&want, &got, "", &mut differences);
    assert!(
        differences.is_empty(),
        "{kind}:\n{}",
        differences.join("\n")
    );
    want
}

fn agrees<P, O>() -> (String, String)
where
    P: prost::Message + Default,
    O: k8s_openapi::Resource + Serialize + DeserializeOwned,
{
    let (api_version, kind) = (O::API_VERSION, O::KIND);
    let index = message_of(api_version, kind)
        .unwrap_or_else(|| panic!("no protobuf message for {api_version} {kind}"));
    let mut obj = sample(index, &mut Vec::new());
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    let kept = round_trip::<P, O>(obj.clone());
    // What k8s-openapi dropped from the sample: only fields newer than its Kubernetes
    // version. A field whose JSON name we got wrong would be dropped too, and fail here.
    let mut dropped = Vec::new();
    diff(&obj, &kept, "", &mut dropped);
    for d in dropped {
        let path: String = d
            .split(':')
            .next()
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_ascii_digit() && !matches!(c, '[' | ']'))
            .collect();
        let last_two: Vec<&str> = path.rsplit('.').take(2).collect();
        let field = format!("{}.{}", last_two[1], last_two[0]);
        assert!(
            NEWER_THAN_K8S_OPENAPI.contains(&field.as_str()),
            "{kind}: k8s-openapi does not know {d}"
        );
    }
    (api_version.to_owned(), kind.to_owned())
}

macro_rules! agree {
    ($($($seg:ident)::+),* $(,)?) => {
        vec![$(agrees::<k8s_pb::$($seg)::+, k8s_openapi::$($seg)::+>()),*]
    };
}

#[test]
fn every_served_kind_round_trips_through_k8s_pb() {
    let checked = agree![
        api::admissionregistration::v1::MutatingWebhookConfiguration,
        api::admissionregistration::v1::ValidatingAdmissionPolicy,
        api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        api::admissionregistration::v1::ValidatingWebhookConfiguration,
        api::apps::v1::ControllerRevision,
        api::apps::v1::DaemonSet,
        api::apps::v1::Deployment,
        api::apps::v1::ReplicaSet,
        api::apps::v1::StatefulSet,
        api::authentication::v1::SelfSubjectReview,
        api::authentication::v1::TokenReview,
        api::authentication::v1::TokenRequest,
        api::authorization::v1::LocalSubjectAccessReview,
        api::authorization::v1::SelfSubjectAccessReview,
        api::authorization::v1::SelfSubjectRulesReview,
        api::authorization::v1::SubjectAccessReview,
        api::autoscaling::v1::HorizontalPodAutoscaler,
        api::autoscaling::v1::Scale,
        api::autoscaling::v2::HorizontalPodAutoscaler,
        api::batch::v1::CronJob,
        api::batch::v1::Job,
        api::certificates::v1::CertificateSigningRequest,
        api::coordination::v1::Lease,
        api::core::v1::Binding,
        api::core::v1::ComponentStatus,
        api::core::v1::ConfigMap,
        api::core::v1::Endpoints,
        api::core::v1::Event,
        api::core::v1::LimitRange,
        api::core::v1::Namespace,
        api::core::v1::Node,
        api::core::v1::PersistentVolume,
        api::core::v1::PersistentVolumeClaim,
        api::core::v1::Pod,
        api::core::v1::PodTemplate,
        api::core::v1::ReplicationController,
        api::core::v1::ResourceQuota,
        api::core::v1::Secret,
        api::core::v1::Service,
        api::core::v1::ServiceAccount,
        api::discovery::v1::EndpointSlice,
        api::events::v1::Event,
        api::flowcontrol::v1::FlowSchema,
        api::flowcontrol::v1::PriorityLevelConfiguration,
        api::networking::v1::Ingress,
        api::networking::v1::IngressClass,
        api::networking::v1::NetworkPolicy,
        api::node::v1::RuntimeClass,
        api::policy::v1::Eviction,
        api::policy::v1::PodDisruptionBudget,
        api::rbac::v1::ClusterRole,
        api::rbac::v1::ClusterRoleBinding,
        api::rbac::v1::Role,
        api::rbac::v1::RoleBinding,
        api::scheduling::v1::PriorityClass,
        api::storage::v1::CSIDriver,
        api::storage::v1::CSINode,
        api::storage::v1::CSIStorageCapacity,
        api::storage::v1::StorageClass,
        api::storage::v1::VolumeAttachment,
        apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        kube_aggregator::pkg::apis::apiregistration::v1::APIService,
    ];
    // Every built-in kind a cluster serves is among them.
    for def in crate::resource::builtins() {
        let version = def.versions.first().expect("a served version");
        let key = (def.api_version(version), def.kind.clone());
        assert!(checked.contains(&key), "{key:?} is served but not checked");
    }
}

#[test]
fn lists_round_trip_through_k8s_pb() {
    let index = message_of("apps/v1", "Deployment").expect("Deployment");
    let mut item = sample(index, &mut Vec::new());
    item["apiVersion"] = json!("apps/v1");
    item["kind"] = json!("Deployment");
    let item: k8s_openapi::api::apps::v1::Deployment =
        serde_json::from_value(item).expect("a Deployment");
    let item = serde_json::to_value(item).expect("JSON");
    let list = json!({
        "apiVersion": "apps/v1",
        "kind": "DeploymentList",
        "metadata": {"resourceVersion": "12", "continue": "abc", "remainingItemCount": 3},
        "items": [item.clone(), item],
    });
    let got = decode(&encode(&list).unwrap()).unwrap();
    // Items carry no type on the wire.
    let mut want = list.clone();
    for item in want["items"].as_array_mut().unwrap() {
        let item = item.as_object_mut().unwrap();
        item.remove("apiVersion");
        item.remove("kind");
    }
    assert_eq!(got, want);
    let typed =
        k8s_pb::api::apps::v1::DeploymentList::decode(raw_of(&encode(&list).unwrap()).as_slice())
            .expect("k8s-pb reads our list");
    assert_eq!(typed.items.len(), 2);
    assert_eq!(
        typed.metadata.and_then(|m| m.resource_version).as_deref(),
        Some("12")
    );
}
