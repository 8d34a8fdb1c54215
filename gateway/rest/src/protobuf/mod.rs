//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) of every kind
//! k8s-pb (the generated Kubernetes protobuf types) defines: what kubectl's typed clients send
//! (`kubectl create deployment`, `run`, `expose`, ...) and what protobuf-only clients read.
//!
//! Objects travel in a `runtime.Unknown` envelope: the magic `k8s\0`, then the type
//! (`apiVersion`, `kind`) and the message's bytes. The message is walked with a wire schema
//! generated from k8s-pb ([`schema`], by `examples/protobuf_schema.rs`; field tags and types
//! from k8s-pb's prost structs, JSON names from k8s-openapi), so one decoder and one encoder
//! serve every kind, and `agreement_tests.rs` proves them against k8s-pb's own types.
//! Decoding is bounded: messages nest at most [`error::MAX_DEPTH`] deep and a body decodes
//! into at most [`error::MAX_VALUES`] values, whatever it holds.

mod decode;
mod encode;
mod error;
mod kinds;
// Generated: one message a line, as the generator writes it.
#[rustfmt::skip]
mod schema;
mod table;
mod time;
pub(crate) mod wire;

use serde_json::Value;

use decode::Budget;
pub use error::ProtobufError;
use kinds::{MAGIC, message_of};
use wire::Writer;

/// The media type of Kubernetes' protobuf encoding.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// What a watch in protobuf is answered as: length-delimited `WatchEvent`s.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// Whether objects of `kind` in `api_version` (and their lists) have a protobuf form.
pub fn knows(api_version: &str, kind: &str) -> bool {
    message_of(api_version, kind).is_some()
}

/// Decodes a protobuf-encoded object of any known kind into its JSON form.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    decode::envelope(body, 0, &mut Budget::new())
}

/// One frame of a protobuf watch: a `meta.k8s.io/v1` `WatchEvent` of `event_type` around
/// `object` (an object already [`encode`]d, envelope and all), written bare (no envelope of its
/// own, as kube-apiserver streams them) after its length as four big-endian bytes.
pub fn watch_frame(event_type: &str, object: &[u8]) -> Vec<u8> {
    let mut raw_extension = Writer::default();
    raw_extension.bytes(1, object);
    // The length goes first, written once the event is: four bytes kept for it.
    let mut event = Writer { buf: vec![0; 4] };
    event.bytes(1, event_type.as_bytes());
    event.bytes(2, &raw_extension.buf);
    // A frame over 4 GiB cannot be written: the objects streamed are bounded far below that.
    let len = u32::try_from(event.buf.len() - 4).unwrap_or(u32::MAX);
    event.buf[..4].copy_from_slice(&len.to_be_bytes());
    event.buf
}

/// The start of a `runtime.Unknown` envelope: the magic, then the type and the raw message.
fn envelope_of(api_version: &str, kind: &str, raw: &[u8]) -> Writer {
    let mut type_meta = Writer::default();
    type_meta.bytes(1, api_version.as_bytes());
    type_meta.bytes(2, kind.as_bytes());
    let mut out = Writer {
        buf: MAGIC.to_vec(),
    };
    out.bytes(1, &type_meta.buf);
    out.bytes(2, raw);
    out
}

/// Encodes `obj`, a JSON object (or list) of a known kind, in the protobuf envelope.
pub fn encode(obj: &Value) -> Result<Vec<u8>, ProtobufError> {
    let field = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    let index = message_of(api_version, kind).ok_or_else(|| ProtobufError::UnknownKind {
        api_version: api_version.into(),
        kind: kind.into(),
    })?;
    let raw = encode::message(obj, index, 0)?.unwrap_or_default();
    let mut out = envelope_of(api_version, kind, &raw);
    out.bytes(3, b"");
    out.bytes(4, b"");
    Ok(out.buf)
}

#[cfg(test)]
mod agreement_tests;

#[cfg(test)]
mod tests {
    use super::error::MAX_VALUES;
    use super::*;
    use k8s_pb::api::apps::v1 as apps;
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use prost::Message as _;
    use serde_json::json;

    fn envelope_of(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        super::envelope_of(api_version, kind, raw).buf
    }

    /// What kubectl's Go encoder sends: every non-pointer field, zero or not.
    #[test]
    fn zeros_are_kept_where_they_mean_something_and_unset_strings_and_times_are_dropped() {
        let d = apps::Deployment {
            metadata: Some(meta::ObjectMeta {
                name: Some("web".into()),
                generate_name: Some(String::new()),
                namespace: Some(String::new()),
                generation: Some(0),
                creation_timestamp: Some(meta::Time::default()),
                labels: [
                    ("app".to_owned(), "web".to_owned()),
                    ("empty".to_owned(), String::new()),
                ]
                .into(),
                ..Default::default()
            }),
            spec: Some(apps::DeploymentSpec {
                replicas: Some(0),
                paused: Some(false),
                template: Some(core::PodTemplateSpec {
                    metadata: Some(meta::ObjectMeta::default()),
                    spec: Some(core::PodSpec {
                        automount_service_account_token: Some(false),
                        containers: vec![core::Container {
                            name: Some("nginx".into()),
                            image: Some("nginx".into()),
                            args: vec![String::new()],
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            }),
            status: None,
        };
        let v = decode(&envelope_of("apps/v1", "Deployment", &d.encode_to_vec())).unwrap();
        assert_eq!(
            v["metadata"],
            json!({"name": "web", "generation": 0, "labels": {"app": "web", "empty": ""}})
        );
        assert_eq!(v["spec"]["replicas"], json!(0));
        assert_eq!(v["spec"]["paused"], json!(false));
        let pod = &v["spec"]["template"]["spec"];
        assert_eq!(pod["automountServiceAccountToken"], json!(false));
        assert_eq!(
            pod["containers"],
            json!([{"name": "nginx", "image": "nginx", "args": [""]}])
        );
        assert_eq!(v["spec"]["template"]["metadata"], json!({}));
    }

    #[test]
    fn special_forms_read_as_kubernetes_writes_them() {
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s",
            "creationTimestamp": "2024-05-06T07:08:09Z"},
            "spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": "https"}]}});
        assert_eq!(decode(&encode(&svc).unwrap()).unwrap(), svc);
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"k": "AAEC/w==", "empty": ""}, "type": "Opaque"});
        assert_eq!(decode(&encode(&secret).unwrap()).unwrap(), secret);
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "xs.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
              "names": {"plural": "xs", "kind": "X"},
              "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                  "x-kubernetes-preserve-unknown-fields": true,
                  "additionalProperties": {"type": "string"},
                  "properties": {
                    "a": {"type": "object", "additionalProperties": false},
                    "b": {"type": "array", "items": {"type": "integer", "default": 3}},
                    "c": {"x-kubernetes-int-or-string": true, "enum": ["x", 1]}}}}}]}});
        assert_eq!(decode(&encode(&crd).unwrap()).unwrap(), crd);
    }

    #[test]
    fn decodes_what_kubectl_auth_can_i_and_create_token_send() {
        use k8s_pb::api::authentication::v1 as authn;
        use k8s_pb::api::authorization::v1 as authz;
        let review = authz::SelfSubjectAccessReview {
            metadata: Some(meta::ObjectMeta::default()),
            spec: Some(authz::SelfSubjectAccessReviewSpec {
                resource_attributes: Some(authz::ResourceAttributes {
                    namespace: Some("default".into()),
                    verb: Some("list".into()),
                    resource: Some("pods".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: Some(Default::default()),
        };
        let body = envelope_of(
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            &review.encode_to_vec(),
        );
        let v = decode(&body).unwrap();
        assert_eq!(
            v["spec"]["resourceAttributes"],
            json!({"namespace": "default", "verb": "list", "resource": "pods"})
        );
        let token = authn::TokenRequest {
            metadata: Some(meta::ObjectMeta::default()),
            spec: Some(authn::TokenRequestSpec {
                audiences: vec!["api".into()],
                expiration_seconds: Some(3600),
                bound_object_ref: Some(authn::BoundObjectReference {
                    kind: Some("Pod".into()),
                    api_version: Some("v1".into()),
                    name: Some("mm-a".into()),
                    u_id: Some(String::new()),
                }),
            }),
            status: None,
        };
        let body = envelope_of(
            "authentication.k8s.io/v1",
            "TokenRequest",
            &token.encode_to_vec(),
        );
        assert_eq!(
            decode(&body).unwrap()["spec"],
            json!({"audiences": ["api"], "expirationSeconds": 3600,
                   "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "mm-a"}})
        );
    }

    #[test]
    fn refuses_unknown_kinds_encodings_and_garbage() {
        let unknown = envelope_of("v1", "Nothing", b"");
        assert!(matches!(
            decode(&unknown),
            Err(ProtobufError::UnknownKind { .. })
        ));
        assert!(matches!(decode(b"{}"), Err(ProtobufError::NoMagic)));
        assert!(decode(b"k8s\0\x0a\x7f").is_err());
        let mut gzip = envelope_of("v1", "ConfigMap", b"");
        gzip.extend_from_slice(&[0x1a, 4]);
        gzip.extend_from_slice(b"gzip");
        assert!(matches!(
            decode(&gzip),
            Err(ProtobufError::ContentEncoding(_))
        ));
        // A string field holding a varint is refused, as prost refuses it.
        assert!(decode(&envelope_of("v1", "ConfigMap", &[0x0a, 0x02, 0x08, 0x01])).is_err());
        assert!(!knows("v1", "Nothing"));
        assert!(knows("batch/v1", "CronJob") && knows("batch/v1", "CronJobList"));
    }

    #[test]
    fn decoding_is_bounded_in_depth_and_in_values() {
        // A schema nested 200 deep (`not` within `not` ...).
        let mut props = Vec::new();
        for _ in 0..200 {
            let mut w = Writer::default();
            w.bytes(28, &props);
            props = w.buf;
        }
        let crd = [
            (1u32, vec![]),
            (2, {
                let mut validation = Writer::default();
                validation.bytes(1, &props);
                let mut version = Writer::default();
                version.bytes(1, b"v1");
                version.bytes(4, &validation.buf);
                let mut spec = Writer::default();
                spec.bytes(7, &version.buf);
                spec.buf
            }),
        ]
        .iter()
        .fold(Writer::default(), |mut w, (t, b)| {
            w.bytes(*t, b);
            w
        });
        let body = envelope_of(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            &crd.buf,
        );
        assert!(matches!(decode(&body), Err(ProtobufError::TooDeep)));
        // Over a million empty finalizers: two bytes each on the wire.
        let mut meta = Writer::default();
        for _ in 0..(MAX_VALUES + 1) {
            meta.bytes(14, b"");
        }
        let mut cm = Writer::default();
        cm.bytes(1, &meta.buf);
        let body = envelope_of("v1", "ConfigMap", &cm.buf);
        assert!(matches!(decode(&body), Err(ProtobufError::TooLarge)));
    }
}
