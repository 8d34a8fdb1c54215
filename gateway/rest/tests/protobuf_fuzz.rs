//! Property-based fuzzing of protobuf bodies: random messages of every shape inside a valid
//! envelope, and valid objects damaged at random (bytes flipped, cut short, garbage spliced
//! in). Each property: decoding answers (Ok or a typed refusal) and never panics, and what it
//! accepts is a fixed point (encoding and decoding it again gives it back). Cases per
//! property: `PROPTEST_CASES` (default 256).

use gpustack_kube_rest::protobuf;
use proptest::prelude::*;
use serde_json::{Value, json};

const KINDS: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("v1", "Pod"),
    ("v1", "Service"),
    ("v1", "Secret"),
    ("batch/v1", "CronJob"),
    ("networking.k8s.io/v1", "Ingress"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("apps/v1", "DeploymentList"),
];

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn bytes_field(tag: u64, b: &[u8], out: &mut Vec<u8>) {
    varint((tag << 3) | 2, out);
    varint(b.len() as u64, out);
    out.extend_from_slice(b);
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    bytes_field(1, api_version.as_bytes(), &mut type_meta);
    bytes_field(2, kind.as_bytes(), &mut type_meta);
    let mut out = b"k8s\0".to_vec();
    bytes_field(1, &type_meta, &mut out);
    bytes_field(2, raw, &mut out);
    out
}

/// Well-formed wire fields with random tags and payloads, nested a few levels.
fn message() -> impl Strategy<Value = Vec<u8>> {
    let leaf = prop::collection::vec(
        (
            1u64..40,
            prop_oneof![
                any::<u64>().prop_map(|v| (0u8, v.to_le_bytes().to_vec())),
                prop::collection::vec(any::<u8>(), 0..12).prop_map(|b| (2u8, b)),
                any::<u64>().prop_map(|v| (1u8, v.to_le_bytes().to_vec())),
            ],
        ),
        0..8,
    )
    .prop_map(|fields| {
        let mut out = Vec::new();
        for (tag, (wire, payload)) in fields {
            match wire {
                0 => {
                    varint(tag << 3, &mut out);
                    varint(u64::from_le_bytes(payload.try_into().unwrap()), &mut out);
                }
                1 => {
                    varint((tag << 3) | 1, &mut out);
                    out.extend_from_slice(&payload);
                }
                _ => bytes_field(tag, &payload, &mut out),
            }
        }
        out
    });
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop::collection::vec((1u64..40, inner), 1..6).prop_map(|fields| {
            let mut out = Vec::new();
            for (tag, b) in fields {
                bytes_field(tag, &b, &mut out);
            }
            out
        })
    })
}

fn a_deployment() -> Vec<u8> {
    protobuf::encode(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"},
                     "creationTimestamp": "2024-01-02T03:04:05Z"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
          "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
          "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx",
              "ports": [{"containerPort": 80}],
              "resources": {"limits": {"cpu": "500m"}},
              "livenessProbe": {"httpGet": {"port": "http", "path": "/"}}}],
              "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}}]}}}
    }))
    .expect("a Deployment encodes")
}

/// Accepted bodies are fixed points of decode ∘ encode.
fn check_fixed_point(decoded: &Value) {
    let again = protobuf::encode(decoded).expect("what was decoded encodes");
    let twice = protobuf::decode(&again).expect("what was encoded decodes");
    assert_eq!(&twice, decoded);
}

proptest! {
    #[test]
    fn random_messages_of_known_kinds_never_panic(
        kind in 0..KINDS.len(),
        raw in message(),
    ) {
        let (api_version, kind) = KINDS[kind];
        if let Ok(v) = protobuf::decode(&envelope(api_version, kind, &raw)) {
            check_fixed_point(&v);
        }
    }

    #[test]
    fn damaged_objects_never_panic(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
        splice in prop::collection::vec(any::<u8>(), 0..16),
    ) {
        let mut body = a_deployment();
        for (at, byte) in flips {
            let i = at.index(body.len());
            body[i] = byte;
        }
        let keep = cut.index(body.len() + 1);
        let tail = body.split_off(keep);
        body.extend_from_slice(&splice);
        body.extend_from_slice(&tail);
        if let Ok(v) = protobuf::decode(&body) {
            check_fixed_point(&v);
        }
    }
}

#[test]
fn the_undamaged_object_decodes() {
    let v = protobuf::decode(&a_deployment()).unwrap();
    assert_eq!(
        v["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        json!(1)
    );
    assert_eq!(
        v["spec"]["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"],
        json!("1Gi")
    );
    check_fixed_point(&v);
}
