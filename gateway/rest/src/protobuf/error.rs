//! What goes wrong reading or writing protobuf, and the bounds a decode keeps to.

/// The deepest nesting of messages decoded (prost's own default).
pub const MAX_DEPTH: usize = 100;

/// The most fields and list elements one body may decode into: each costs a JSON value, so
/// this bounds the memory a body can make the server spend, whatever its size.
pub const MAX_VALUES: usize = 1 << 20;

/// Why a body cannot be read as, or an object cannot be written as, protobuf.
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    /// The body does not start with the `k8s\0` envelope magic.
    #[error("not a Kubernetes protobuf message (no k8s magic)")]
    NoMagic,
    /// The bytes break the protobuf encoding.
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    /// A known field came with the wrong wire type.
    #[error("malformed protobuf: field {0:?} has the wrong wire type")]
    WireType(&'static str),
    /// A field's value is not valid for it.
    #[error("{0}: {1}")]
    Field(&'static str, String),
    /// A field holds another type than the schema's.
    #[error("{field}: expected {expected}")]
    Type {
        /// The field's name.
        field: &'static str,
        /// The type the schema gives it.
        expected: &'static str,
    },
    /// No protobuf form is known for this kind.
    #[error("protobuf is not served for {api_version:?} {kind:?}; send JSON")]
    UnknownKind {
        /// The `apiVersion` given.
        api_version: String,
        /// The `kind` given.
        kind: String,
    },
    /// The envelope's content encoding is not the identity.
    #[error("content encoding {0:?} is not supported")]
    ContentEncoding(String),
    /// Messages nest deeper than the bound.
    #[error("messages nest more than {MAX_DEPTH} deep")]
    TooDeep,
    /// More fields and list items than the bound.
    #[error("more than {MAX_VALUES} fields and list items")]
    TooLarge,
}
