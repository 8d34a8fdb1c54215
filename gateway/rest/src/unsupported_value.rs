//! A query parameter holding none of the values it may take, worded as kube-apiserver's
//! field errors are (`NAME: Unsupported value: "X": supported values: "A", "B"`).

use std::fmt;

/// A query parameter's value outside the values it may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedValue {
    /// The parameter's name.
    pub parameter: &'static str,
    /// The value given.
    pub value: String,
    /// The values it may take.
    pub supported: &'static [&'static str],
}

impl fmt::Display for UnsupportedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: Unsupported value: \"{}\": supported values: ",
            self.parameter, self.value
        )?;
        for (i, v) in self.supported.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "\"{v}\"")?;
        }
        Ok(())
    }
}

impl std::error::Error for UnsupportedValue {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worded_as_kube_apiserver() {
        let e = UnsupportedValue {
            parameter: "includeObject",
            value: "All".into(),
            supported: &["Metadata", "None", "Object"],
        };
        assert_eq!(
            e.to_string(),
            "includeObject: Unsupported value: \"All\": supported values: \"Metadata\", \"None\", \"Object\""
        );
    }
}
