//! What goes wrong reading or writing protobuf, and the bounds a decode keeps to.

/// The deepest nesting of messages decoded (prost's own default).
pub const MAX_DEPTH: usize = 100;

/// The most fields and list elements one body may decode into: each costs a JSON value, so
/// this bounds the memory a body can make the server spend, whatever its size.
pub const MAX_VALUES: usize = 1 << 20;

/// Why a body cannot be read as, or an object cannot be written as, protobuf.
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    #[error("not a Kubernetes protobuf message (no k8s magic)")]
    NoMagic,
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    #[error("malformed protobuf: field {0:?} has the wrong wire type")]
    WireType(&'static str),
    #[error("{0}: {1}")]
    Field(&'static str, String),
    #[error("{field}: expected {expected}")]
    Type {
        field: &'static str,
        expected: &'static str,
    },
    #[error("protobuf is not served for {api_version:?} {kind:?}; send JSON")]
    UnknownKind { api_version: String, kind: String },
    #[error("content encoding {0:?} is not supported")]
    ContentEncoding(String),
    #[error("messages nest more than {MAX_DEPTH} deep")]
    TooDeep,
    #[error("more than {MAX_VALUES} fields and list items")]
    TooLarge,
}
