//! The shape of the generated wire schema ([`super::schema`]): each message's fields by tag,
//! with their JSON names and wire types.

/// A field's type on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ty {
    Str,
    Bytes,
    Bool,
    I32,
    I64,
    F64,
    /// A message: its index in `MESSAGES`.
    Msg(u16),
    /// `map<string, string>`.
    MapStr,
    /// `map<string, bytes>` (base64 in JSON).
    MapBytes,
    /// `map<string, message>`.
    MapMsg(u16),
}

/// One field of a message.
#[derive(Clone, Copy, Debug)]
pub(super) struct Field {
    pub tag: u32,
    /// The JSON key; empty for a Go struct embedded inline, whose fields are the parent's.
    pub json: &'static str,
    pub ty: Ty,
    pub repeated: bool,
}

pub(super) const fn one(tag: u32, json: &'static str, ty: Ty) -> Field {
    Field {
        tag,
        json,
        ty,
        repeated: false,
    }
}

pub(super) const fn many(tag: u32, json: &'static str, ty: Ty) -> Field {
    Field {
        tag,
        json,
        ty,
        repeated: true,
    }
}

/// Messages whose JSON form is not an object of their fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Special {
    Plain,
    /// `meta/v1.Time`: RFC 3339 with seconds.
    Time,
    /// `meta/v1.MicroTime`: RFC 3339 with microseconds.
    MicroTime,
    /// Raw JSON bytes embedded as they are (`RawExtension`, `FieldsV1`, apiextensions `JSON`).
    RawJson,
    /// `resource.Quantity`: its string.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// A Go named slice (`ExtraValue`): its one field `items`, as a bare JSON list.
    Items,
    /// `JSONSchemaPropsOrArray`: a schema or an array of schemas.
    PropsOrArray,
    /// `JSONSchemaPropsOrBool`: a schema or a boolean.
    PropsOrBool,
    /// `JSONSchemaPropsOrStringArray`: a schema or an array of strings.
    PropsOrStringArray,
}

/// A message: its k8s-pb module path and name, its JSON form and its fields.
#[derive(Debug)]
pub(super) struct Message {
    pub name: &'static str,
    pub special: Special,
    pub fields: &'static [Field],
}

impl Message {
    pub fn field(&self, tag: u32) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.tag == tag)
    }
}

/// A kind that travels in the `runtime.Unknown` envelope.
#[derive(Debug)]
pub(super) struct Kind {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub message: u16,
    pub list: Option<u16>,
}
