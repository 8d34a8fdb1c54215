//! Field errors as Kubernetes words them (`field.ErrorType`, the `Invalid` Status with its
//! causes), shared by every check that refuses an object.

use serde_json::{Value, json};

use serde_json::Number;

use super::status::ApiError;

/// A value as Go's `%v`/`%q` prints it in field errors.
fn render(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        Value::Number(n) => number(n),
        Value::Bool(b) => b.to_string(),
        Value::Null => quote("null"),
        _ => v.to_string(),
    }
}

pub(crate) fn quote(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// A number as Go prints a decoded JSON number: integral floats without a fraction.
pub(crate) fn number(n: &Number) -> String {
    match n.as_f64() {
        Some(f) if !(n.is_i64() || n.is_u64()) && f.fract() == 0.0 && f.abs() < 1e21 => {
            format!("{f:.0}")
        }
        _ => n.to_string(),
    }
}

/// The most field errors one answer lists; past it a check stops collecting, so a small body
/// of many bad values cannot make a huge error answer.
pub const MAX_CAUSES: usize = 100;

/// The kind of a field error (Kubernetes' `field.ErrorType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// A required field is missing (`Required value`).
    Required,
    /// A value breaks a rule (`Invalid value`).
    Invalid,
    /// A value has the wrong type (also `Invalid value`).
    TypeInvalid,
    /// A value is not one of the allowed ones (`Unsupported value`).
    NotSupported,
    /// A string is too long (`Too long`).
    TooLong,
    /// A list or map has too many items (`Too many`).
    TooMany,
    /// A field may not be set, or changed (`Forbidden`).
    Forbidden,
    /// A list item repeats another (`Duplicate value`).
    Duplicate,
}

impl Problem {
    /// The cause's `reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Problem::Required => "FieldValueRequired",
            Problem::Invalid => "FieldValueInvalid",
            Problem::TypeInvalid => "FieldValueTypeInvalid",
            Problem::NotSupported => "FieldValueNotSupported",
            Problem::TooLong => "FieldValueTooLong",
            Problem::TooMany => "FieldValueTooMany",
            Problem::Forbidden => "FieldValueForbidden",
            Problem::Duplicate => "FieldValueDuplicate",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Problem::Required => "Required value",
            Problem::Invalid | Problem::TypeInvalid => "Invalid value",
            Problem::NotSupported => "Unsupported value",
            Problem::TooLong => "Too long",
            Problem::TooMany => "Too many",
            Problem::Forbidden => "Forbidden",
            Problem::Duplicate => "Duplicate value",
        }
    }
}

/// One violation, at a dotted field path (`spec.items[0].name`).
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// What is wrong with the field.
    pub problem: Problem,
    /// The field's dotted path.
    pub field: String,
    /// The offending value, as the message shows it (`None`: not shown).
    pub value: Option<Value>,
    /// The explanation after the value (empty: none).
    pub detail: String,
}

impl FieldError {
    /// The message without the field (a cause's `message`).
    pub fn body(&self) -> String {
        let mut s = self.problem.label().to_owned();
        // Kubernetes never shows the value of a missing or over-long field.
        if !matches!(
            self.problem,
            Problem::Required | Problem::TooLong | Problem::Forbidden
        ) && let Some(v) = &self.value
        {
            s.push_str(": ");
            s.push_str(&render(v));
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// `field: body`, as in the `Status` message.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }
}

/// The 422 `Invalid` error Kubernetes answers for `errors` of object `name` of `kind` in
/// `group`.
pub fn invalid(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> ApiError {
    let qualified = if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    };
    // As Go's error aggregate: repeated messages once, several in brackets.
    let mut messages: Vec<String> = Vec::new();
    for m in errors.iter().map(FieldError::message) {
        if !messages.contains(&m) {
            messages.push(m);
        }
    }
    let summary = match messages.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| json!({"reason": e.problem.reason(), "message": e.body(), "field": e.field}))
        .collect();
    let mut details = json!({"name": name, "kind": kind, "causes": causes});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    let mut e = ApiError::new(
        422,
        "Invalid",
        format!("{qualified} \"{name}\" is invalid: {summary}"),
    );
    e.details = Some(details);
    e
}
