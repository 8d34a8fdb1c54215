//! Why a materialization attempt failed, in the reasons status and metrics use. Messages are
//! written for status: they never carry a token or a signed URL.

use std::fmt;

/// Why an attempt failed: the `reason` of status conditions and the metrics' `result` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Bad endpoint, proxy, CA or spec: retried only when the configuration changes.
    InvalidRequest,
    /// 401/403/404 or a gated repository.
    AccessDenied,
    /// 5xx, 429, network errors, ranges failing.
    SourceUnavailable,
    /// A hash, size or manifest that does not match.
    IntegrityMismatch,
    /// The tree does not fit under the high watermark even after collection.
    InsufficientCapacity,
    /// No mount asked for the download any more.
    Canceled,
}

impl Reason {
    /// The name status and metrics show (`AccessDenied`).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::InvalidRequest => "InvalidRequest",
            Reason::AccessDenied => "AccessDenied",
            Reason::SourceUnavailable => "SourceUnavailable",
            Reason::IntegrityMismatch => "IntegrityMismatch",
            Reason::InsufficientCapacity => "InsufficientCapacity",
            Reason::Canceled => "Canceled",
        }
    }

    /// Whether a failure for this reason starts a backoff before the next attempt.
    pub fn backs_off(self) -> bool {
        !matches!(self, Reason::Canceled | Reason::InvalidRequest)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed attempt: its reason, and a message safe to show in status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Failure {
    /// The class of failure (decides backoff and retry).
    pub reason: Reason,
    /// What went wrong, for status; never a token or a signed URL.
    pub message: String,
}

impl Failure {
    /// A failure for `reason` with `message`.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}
