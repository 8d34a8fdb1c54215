//! What a webhook decides, before it is written as an `AdmissionResponse`: allowed (with the
//! reason and any patch), or refused with a `Status` worded as kube-apiserver words its own
//! errors (`Pod "p" is invalid: <field>: Invalid value: "2": <why>`), so that a refusal reads
//! the same whether the cluster or the webhook made it.

use kube::core::{Status, response::StatusCause, response::StatusDetails};

use super::reasons::Reason;

/// The `causes[].reason` of a field error, as Kubernetes names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CauseKind {
    /// The value is not allowed.
    Invalid,
    /// A value is missing.
    Required,
    /// The change is not permitted.
    Forbidden,
}

/// One thing wrong with one field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path (`spec.containers[0].resources.limits`).
    pub field: String,
    /// How it is wrong.
    pub kind: CauseKind,
    /// The offending value, for `Invalid`.
    pub value: Option<String>,
    /// What is wrong, for people.
    pub detail: String,
    /// The rule that found it.
    pub reason: Reason,
}

impl FieldError {
    /// An invalid value of `field`.
    pub fn invalid(
        field: impl Into<String>,
        value: &str,
        detail: impl Into<String>,
        reason: Reason,
    ) -> Self {
        FieldError {
            field: field.into(),
            kind: CauseKind::Invalid,
            value: Some(value.to_owned()),
            detail: detail.into(),
            reason,
        }
    }

    /// A missing value of `field`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>, reason: Reason) -> Self {
        FieldError {
            field: field.into(),
            kind: CauseKind::Required,
            value: None,
            detail: detail.into(),
            reason,
        }
    }

    /// A forbidden change of `field`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>, reason: Reason) -> Self {
        FieldError {
            field: field.into(),
            kind: CauseKind::Forbidden,
            value: None,
            detail: detail.into(),
            reason,
        }
    }

    /// The body of the cause: what follows the field name.
    fn body(&self) -> String {
        match (self.kind, &self.value) {
            (CauseKind::Invalid, Some(v)) => format!("Invalid value: {v:?}: {}", self.detail),
            (CauseKind::Invalid, None) => format!("Invalid value: {}", self.detail),
            (CauseKind::Required, _) => format!("Required value: {}", self.detail),
            (CauseKind::Forbidden, _) => format!("Forbidden: {}", self.detail),
        }
    }

    fn cause_type(&self) -> &'static str {
        match self.kind {
            CauseKind::Invalid => "FieldValueInvalid",
            CauseKind::Required => "FieldValueRequired",
            CauseKind::Forbidden => "FieldValueForbidden",
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// A refused request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status code.
    pub code: u16,
    /// The `Status` reason (`Invalid`, `Forbidden`, `ServiceUnavailable`).
    pub status_reason: &'static str,
    /// The rule that refused it.
    pub reason: Reason,
    /// The message shown to the client.
    pub message: String,
    /// The kind of the object refused.
    pub kind: String,
    /// The name of the object refused.
    pub name: String,
    /// Each field at fault.
    pub causes: Vec<FieldError>,
}

impl Refusal {
    /// 422 `Invalid` with per-field causes; `None` when there are none.
    pub fn invalid(kind: &str, name: &str, errors: Vec<FieldError>) -> Option<Self> {
        let first = errors.first()?.reason;
        let listed: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let joined = match listed.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        Some(Refusal {
            code: 422,
            status_reason: "Invalid",
            reason: first,
            message: format!("{kind} {name:?} is invalid: {joined}"),
            kind: kind.to_owned(),
            name: name.to_owned(),
            causes: errors,
        })
    }

    /// A refusal without field causes.
    fn plain(code: u16, status_reason: &'static str, reason: Reason, message: String) -> Self {
        Refusal {
            code,
            status_reason,
            reason,
            message,
            kind: String::new(),
            name: String::new(),
            causes: Vec::new(),
        }
    }

    /// A refusal that may succeed when retried (what the webhook needs is not there yet).
    pub fn retry(reason: Reason, message: impl Into<String>) -> Self {
        Self::plain(503, "ServiceUnavailable", reason, message.into())
    }

    /// A 403 refusal.
    pub fn forbidden(reason: Reason, message: impl Into<String>) -> Self {
        Self::plain(403, "Forbidden", reason, message.into())
    }

    /// A 400 refusal.
    pub fn bad_request(reason: Reason, message: impl Into<String>) -> Self {
        Self::plain(400, "BadRequest", reason, message.into())
    }

    /// The refusal as a Kubernetes `Status`.
    pub fn status(&self) -> Status {
        let mut status = Status::failure(&self.message, self.status_reason).with_code(self.code);
        if !self.causes.is_empty() || !self.kind.is_empty() {
            status.details = Some(StatusDetails {
                name: self.name.clone(),
                // The Kind, as kube-apiserver's NewInvalid names it ("The Pod "p" is invalid").
                kind: self.kind.clone(),
                causes: self
                    .causes
                    .iter()
                    .map(|c| StatusCause {
                        reason: c.cause_type().to_owned(),
                        message: c.body(),
                        field: c.field.clone(),
                    })
                    .collect(),
                group: String::new(),
                uid: String::new(),
                retry_after_seconds: 0,
            });
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worded_as_kube_apiserver_words_invalid() {
        let one = Refusal::invalid(
            "Pod",
            "p",
            vec![FieldError::invalid(
                "spec.containers[0].resources.limits[nvidia.com/gpu.sliced]",
                "2",
                "a logical slice request is always a single card",
                Reason::SliceNotSingleCard,
            )],
        )
        .unwrap();
        assert_eq!(
            one.message,
            "Pod \"p\" is invalid: spec.containers[0].resources.limits[nvidia.com/gpu.sliced]: Invalid value: \"2\": a logical slice request is always a single card"
        );
        assert_eq!(one.reason, Reason::SliceNotSingleCard);
        let status = one.status();
        assert_eq!(status.code, 422);
        assert_eq!(status.reason, "Invalid");
        let causes = status.details.unwrap().causes;
        assert_eq!(causes[0].reason, "FieldValueInvalid");
        assert_eq!(
            causes[0].field,
            "spec.containers[0].resources.limits[nvidia.com/gpu.sliced]"
        );

        let two = Refusal::invalid(
            "InstanceType",
            "it",
            vec![
                FieldError::required("spec.os", "os is required", Reason::FieldRequired),
                FieldError::forbidden("spec.arch", "no", Reason::FieldInvalid),
            ],
        )
        .unwrap();
        assert_eq!(
            two.message,
            "InstanceType \"it\" is invalid: [spec.os: Required value: os is required, spec.arch: Forbidden: no]"
        );
        assert!(Refusal::invalid("Pod", "p", vec![]).is_none());
    }
}
