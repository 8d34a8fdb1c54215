//! Watch event framing: one JSON `WatchEvent` per line, in the representation the client asked
//! for, or length-delimited protobuf `WatchEvent`s for clients that take only protobuf, with
//! bookmarks and `ERROR` events, streamed as the response body. Where the events come from (a
//! store, an upstream) is the server's business.

use std::{convert::Infallible, time::Duration};

use axum::{
    body::{Body, Bytes},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::{
    negotiate::Representation,
    protobuf,
    resource::ResourceDef,
    status::ApiError,
    table::{self, IncludeObject},
};

/// How the events of one watch are rendered.
pub struct Framer {
    def: ResourceDef,
    version: String,
    table: Option<IncludeObject>,
    /// Send `PartialObjectMetadata` instead of whole objects.
    metadata_only: bool,
    /// Frame events in protobuf rather than as JSON lines.
    protobuf: bool,
}

impl Framer {
    /// `include` matters only for [`Representation::Table`].
    pub fn new(
        def: ResourceDef,
        version: &str,
        representation: Representation,
        include: IncludeObject,
    ) -> Self {
        Framer {
            def,
            version: version.to_owned(),
            table: (representation == Representation::Table).then_some(include),
            metadata_only: representation == Representation::Metadata,
            protobuf: false,
        }
    }

    /// Protobuf events of a built-in kind; 406 for a kind without a protobuf form (a custom
    /// resource), as kube-apiserver answers.
    pub fn protobuf(def: ResourceDef, version: &str) -> Result<Self, ApiError> {
        let api_version = def.api_version(version);
        if !protobuf::knows(&api_version, &def.kind) {
            return Err(ApiError::no_protobuf_form(&api_version, &def.kind));
        }
        Ok(Framer {
            protobuf: true,
            ..Framer::new(def, version, Representation::Json, IncludeObject::Metadata)
        })
    }

    /// The `Content-Type` of the stream.
    pub fn content_type(&self) -> &'static str {
        if self.protobuf {
            protobuf::WATCH_MEDIA_TYPE
        } else {
            "application/json"
        }
    }

    /// An `ERROR` event carrying `e` as a `Status`.
    pub fn error(&self, e: &ApiError) -> Bytes {
        if self.protobuf {
            protobuf_frame("ERROR", &e.to_status())
        } else {
            error_event(e)
        }
    }

    /// An `ADDED`/`MODIFIED`/`DELETED` line for `obj` (already at the served version).
    pub fn event(&self, kind: &str, obj: Value) -> Bytes {
        if self.protobuf {
            return protobuf_frame(kind, &obj);
        }
        let obj = match self.table {
            Some(include) => {
                let rv = obj
                    .pointer("/metadata/resourceVersion")
                    .cloned()
                    .unwrap_or(json!(""));
                table::table(
                    &self.def,
                    &[obj],
                    include,
                    json!({"resourceVersion": rv}),
                    jiff::Timestamp::now(),
                )
            }
            None if self.metadata_only => table::partial_object_metadata(&obj),
            None => obj,
        };
        line(kind, obj)
    }

    /// A `BOOKMARK` at `rv`; `initial_end` marks the end of `sendInitialEvents`.
    pub fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.def.kind, "apiVersion": self.def.api_version(&self.version), "metadata": meta});
        if self.protobuf {
            return protobuf_frame("BOOKMARK", &obj);
        }
        line("BOOKMARK", obj)
    }
}

/// A protobuf frame of `obj`; an object that does not fit its kind's message (a value of the
/// wrong type stored before validation) becomes an `ERROR` event saying so.
fn protobuf_frame(kind: &str, obj: &Value) -> Bytes {
    let encoded = protobuf::encode(obj).map(|raw| (kind, raw)).or_else(|e| {
        let status = ApiError::internal(format!("encoding a {kind} event as protobuf: {e}"));
        protobuf::encode(&status.to_status()).map(|raw| ("ERROR", raw))
    });
    // A Status always encodes; an empty event is the last resort, never reached.
    let (kind, raw) = encoded.unwrap_or(("ERROR", Vec::new()));
    Bytes::from(protobuf::watch_frame(kind, &raw))
}

fn line(kind: &str, obj: Value) -> Bytes {
    let mut text = json!({"type": kind, "object": obj}).to_string();
    text.push('\n');
    Bytes::from(text)
}

/// An `ERROR` event carrying `e` as a `Status` (410 Gone for a too-old resourceVersion).
pub fn error_event(e: &ApiError) -> Bytes {
    line("ERROR", e.to_status())
}

/// How long a watch lasts: `timeoutSeconds`, or `default` when unset.
pub fn timeout(param: Option<&str>, default: Duration) -> Result<Duration, ApiError> {
    match param {
        Some(s) if !s.is_empty() => s
            .parse()
            .map(Duration::from_secs)
            .map_err(|_| ApiError::bad_request(format!("timeoutSeconds: Invalid value: \"{s}\""))),
        _ => Ok(default),
    }
}

/// The streamed body, of `content_type` ([`Framer::content_type`]): `first`, then whatever
/// arrives on `rest` until it closes.
pub fn stream_response(
    content_type: &'static str,
    first: Vec<Bytes>,
    rest: Option<mpsc::Receiver<Result<Bytes, Infallible>>>,
) -> Response {
    use futures::StreamExt;
    let head = futures::stream::iter(first.into_iter().map(Ok::<_, Infallible>));
    let body = match rest {
        Some(rx) => Body::from_stream(head.chain(ReceiverStream::new(rx))),
        None => Body::from_stream(head),
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::builtins;

    fn pods() -> ResourceDef {
        builtins().into_iter().find(|d| d.plural == "pods").unwrap()
    }

    fn parse(b: &Bytes) -> Value {
        assert!(b.ends_with(b"\n"), "one event per line");
        serde_json::from_slice(b).unwrap()
    }

    #[test]
    fn events_in_each_representation() {
        let obj = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "resourceVersion": "4"}, "spec": {}});
        let json = Framer::new(pods(), "v1", Representation::Json, IncludeObject::Metadata);
        let ev = parse(&json.event("ADDED", obj.clone()));
        assert_eq!(ev["type"], "ADDED");
        assert_eq!(ev["object"], obj);
        let meta = Framer::new(
            pods(),
            "v1",
            Representation::Metadata,
            IncludeObject::Metadata,
        );
        let ev = parse(&meta.event("MODIFIED", obj.clone()));
        assert_eq!(ev["object"]["kind"], "PartialObjectMetadata");
        assert!(ev["object"].get("spec").is_none());
        let table = Framer::new(pods(), "v1", Representation::Table, IncludeObject::None);
        let ev = parse(&table.event("DELETED", obj));
        assert_eq!(ev["object"]["kind"], "Table");
        assert_eq!(ev["object"]["metadata"]["resourceVersion"], "4");
    }

    #[test]
    fn bookmarks_and_errors() {
        let f = Framer::new(pods(), "v1", Representation::Json, IncludeObject::Metadata);
        let b = parse(&f.bookmark(9, true));
        assert_eq!(b["type"], "BOOKMARK");
        assert_eq!(b["object"]["metadata"]["resourceVersion"], "9");
        assert_eq!(
            b["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        let e = parse(&error_event(&ApiError::expired("too old")));
        assert_eq!(e["type"], "ERROR");
        assert_eq!(e["object"]["code"], 410);
        assert_eq!(
            timeout(Some("5"), Duration::ZERO).unwrap(),
            Duration::from_secs(5)
        );
        assert!(timeout(Some("x"), Duration::ZERO).is_err());
    }

    #[test]
    fn protobuf_frames_are_length_delimited_watch_events_k8s_pb_reads() {
        use k8s_pb::apimachinery::pkg::{apis::meta::v1 as meta, runtime::Unknown};
        use prost::Message;
        fn read(frame: &Bytes) -> (String, Unknown) {
            let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
            assert_eq!(len, frame.len() - 4, "one frame, its length first");
            let event = meta::WatchEvent::decode(&frame[4..]).unwrap();
            let raw = event.object.unwrap().raw.unwrap();
            let envelope = Unknown::decode(raw.strip_prefix(b"k8s\0").unwrap()).unwrap();
            (event.r#type.unwrap(), envelope)
        }
        let f = Framer::protobuf(pods(), "v1").unwrap();
        assert_eq!(
            f.content_type(),
            "application/vnd.kubernetes.protobuf;stream=watch"
        );
        let obj = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "resourceVersion": "4"}});
        let (kind, envelope) = read(&f.event("ADDED", obj));
        assert_eq!(kind, "ADDED");
        let pod = k8s_pb::api::core::v1::Pod::decode(envelope.raw.unwrap().as_slice()).unwrap();
        assert_eq!(pod.metadata.unwrap().name.as_deref(), Some("p"));
        let (kind, envelope) = read(&f.bookmark(9, false));
        assert_eq!(kind, "BOOKMARK");
        let pod = k8s_pb::api::core::v1::Pod::decode(envelope.raw.unwrap().as_slice()).unwrap();
        assert_eq!(pod.metadata.unwrap().resource_version.as_deref(), Some("9"));
        let (kind, envelope) = read(&f.error(&ApiError::expired("too old")));
        assert_eq!(kind, "ERROR");
        let status = meta::Status::decode(envelope.raw.unwrap().as_slice()).unwrap();
        assert_eq!(status.code, Some(410));
        // An object that does not fit its message is an ERROR event, not a broken stream.
        let bad = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": 7}});
        let (kind, envelope) = read(&f.event("MODIFIED", bad));
        assert_eq!(kind, "ERROR");
        let status = meta::Status::decode(envelope.raw.unwrap().as_slice()).unwrap();
        assert_eq!(status.code, Some(500));
        // A custom kind has no protobuf form.
        let mut custom = pods();
        custom.group = "example.com".into();
        custom.kind = "Widget".into();
        assert_eq!(
            Framer::protobuf(custom, "v1").err().map(|e| e.code),
            Some(406)
        );
    }
}
