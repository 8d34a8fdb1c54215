//! The error vocabulary of every vendor binding: why a library could not be used at all
//! ([`OpenError`]) and why one call gave no answer ([`CallError`]).

use std::fmt;

use crate::detector::DetectError;

/// Why a vendor library could not be used at all.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The dynamic loader refused the file (not a shared object, wrong architecture, a missing
    /// dependency); the loader's own error is the source.
    #[error("could not be loaded: {0}")]
    Load(#[source] libloading::Error),
    /// A function reading accelerators needs is not exported (the names tried, `a or b`).
    #[error("lacks {0}, which reading accelerators needs")]
    MissingSymbol(String),
    /// The library loaded but its initialisation call failed; the library's status is the
    /// source.
    #[error("{call} failed: {status}")]
    Init {
        /// The initialisation call, as the library names it.
        call: &'static str,
        /// What it answered.
        #[source]
        status: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A status code a vendor call answered (whatever C integer type the vendor uses), with the
/// vendor's name for it where the binding keeps a table of names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code {
    /// The code as the library returned it.
    pub value: i64,
    /// The header's name for it, where known.
    pub name: Option<&'static str>,
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name {
            Some(name) => write!(f, "{} ({name})", self.value),
            None => write!(f, "{}", self.value),
        }
    }
}

/// Why one call gave no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The library does not export this function.
    #[error("{0} is not exported")]
    Missing(&'static str),
    /// The library answered the call with this status.
    #[error("{0} returned {1}")]
    Code(&'static str, Code),
}

impl CallError {
    /// A failed `call` that answered `code`, unnamed.
    pub fn code(call: &'static str, code: impl Into<i64>) -> Self {
        CallError::Code(
            call,
            Code {
                value: code.into(),
                name: None,
            },
        )
    }

    /// The same error with the vendor's name for its code.
    pub fn named(self, name: impl FnOnce(i64) -> &'static str) -> Self {
        match self {
            CallError::Code(call, code) => CallError::Code(
                call,
                Code {
                    name: Some(name(code.value)),
                    ..code
                },
            ),
            missing => missing,
        }
    }

    /// The code the library answered; `None` when the function is not exported.
    pub fn value(&self) -> Option<i64> {
        match self {
            CallError::Missing(_) => None,
            CallError::Code(_, code) => Some(code.value),
        }
    }

    /// The pass-level error for a call whose failure means "could not measure".
    pub fn detect_error(self, library: &str) -> DetectError {
        let (call, message) = match self {
            CallError::Missing(call) => (call, "not exported".to_owned()),
            CallError::Code(call, code) => (call, format!("returned {code}")),
        };
        DetectError::LibraryCall {
            library: library.to_owned(),
            call,
            message,
        }
    }
}

/// `Ok` for a call that answered 0 (every vendor's success), else the code as a [`CallError`].
pub fn check(call: &'static str, code: impl Into<i64>) -> Result<(), CallError> {
    let code = code.into();
    if code == 0 {
        Ok(())
    } else {
        Err(CallError::code(call, code))
    }
}

/// The resolved function, or [`CallError::Missing`] for an optional symbol the library lacks.
pub fn present<T>(f: Option<T>, call: &'static str) -> Result<T, CallError> {
    f.ok_or(CallError::Missing(call))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_as_before() {
        assert_eq!(check("dcmi_init", 0i32), Ok(()));
        assert_eq!(
            check("dcmi_init", -8008i32).unwrap_err().to_string(),
            "dcmi_init returned -8008"
        );
        assert_eq!(
            CallError::code("cndevInit", 1)
                .named(|_| "CNDEV_ERROR_NO_DRIVER")
                .to_string(),
            "cndevInit returned 1 (CNDEV_ERROR_NO_DRIVER)"
        );
        assert_eq!(
            CallError::code("mtmlLibraryInit", u32::MAX).to_string(),
            "mtmlLibraryInit returned 4294967295"
        );
        assert_eq!(
            present::<u8>(None, "mxSmlGetBoardPowerInfo")
                .unwrap_err()
                .to_string(),
            "mxSmlGetBoardPowerInfo is not exported"
        );
    }

    #[test]
    fn a_failed_call_is_a_library_call_error() {
        let e = CallError::code("cndevGetDeviceCount", 7).detect_error("/lib/libcndev.so");
        assert_eq!(
            e.to_string(),
            "/lib/libcndev.so: cndevGetDeviceCount failed: returned 7"
        );
        let e = CallError::Missing("dcmi_get_card_list").detect_error("libdcmi.so");
        assert_eq!(
            e.to_string(),
            "libdcmi.so: dcmi_get_card_list failed: not exported"
        );
    }
}
